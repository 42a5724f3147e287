// SPDX-License-Identifier: MIT
#include "init.h"

#include "config.h"
#include "engine.h"
#include "exec.h"
#include "explain.h"
#include "fault.h"
#include "faultguard.h"
#include "fdtable.h"
#include "hostcounters.h"
#include "log.h"
#include "pipe.h"
#include "pool.h"
#include "psi.h"
#include "real.h"
#include "registry.h"
#include "ring.h"
#include "span.h"
#include "stats.h"
#include "sys.h"
#include "thp.h"
#include "turn.h"
#include "vfork.h"

#include <pthread.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Thread id of the thread writing a report (it owns report_ctx), 0 if none. */
PP_HOT static int report_owner;
/* The process's last report (exit or _exit) has been written or is being written. */
PP_HOT static int final_done;

/*
 * The fork handlers run in every fork of every process libppipe is
 * loaded into, most of which never track a pipe. So each step costs a
 * load or two when there is nothing to do, and the child writes nothing
 * that is in its reset state already: a page written after fork is a
 * copy-on-write fault, in the child and then again in the parent.
 */

/* What the engine holds is delivered before the child exists (engine.h). */
PP_COMMON static void before_fork(void)
{
	if (pp_engine_hooks())
		pp_engine->fork_prepare();
	if (!pp_pipes_live() && !pp_reg_claimed_left())
		return;
	/* The child's holds are recorded as the child's (registry.h). */
	pp_reg_fork_prepare();
	if (pp_pipes_live()) {
		/* What crosses needs its inode, which pipe() did not ask for. */
		pp_fdt_learn_all();
		pp_pipes_before_fork();
		/* Read here, once for the whole tree: each child would read it for itself. */
		pp_exec_system_preload();
	}
	pp_reg_claimed_fork();
}

/*
 * Set by pp_fork() to the forking thread: the parent names the child's
 * registry records once fork() returns its pid, so that the child makes
 * no system call for them. A fork libppipe does not see return (libc's
 * own, or another thread's meanwhile) finds it naming another thread, or
 * none: the child then names them itself. A thread is told by the address
 * of its own copy of a thread-local variable, which a fork child keeps.
 * It is not itself thread-local: it is written where the fork writes the
 * registry's own words anyway, while a thread's first write after a fork
 * would be a copy-on-write fault of its own, in every fork.
 */
PP_HOT static uintptr_t fork_namer;

static inline uintptr_t this_thread(void)
{
	return (uintptr_t)&pp_tl_vfork;
}

/* Whether the fork under way is pp_fork()'s, in this thread (the parent names the child). */
static inline bool fork_named_here(void)
{
	return __atomic_load_n(&fork_namer, __ATOMIC_RELAXED) == this_thread();
}

PP_COMMON static void after_fork_parent(void)
{
	if (!fork_named_here())
		pp_reg_fork_parent(0);
}

PP_COMMON pid_t pp_fork(void)
{
	bool names = pp_active() && (pp_pipes_live() || pp_reg_claimed_left());
	pid_t pid;

	if (names)
		__atomic_store_n(&fork_namer, this_thread(), __ATOMIC_RELAXED);
	pid = real_fork();
	if (pid && names) {
		__atomic_store_n(&fork_namer, 0, __ATOMIC_RELAXED);
		pp_reg_fork_parent(pid);
	}
	return pid;
}

PP_COMMON static void after_fork_child(void)
{
	/* A vfork flag left up in this thread belongs to the parent's past. */
	if (pp_tl_vfork)
		pp_tl_vfork = 0;
	/* The holds the parent recorded for this child are its own now. */
	pp_reg_fork_child(fork_named_here());
	if (fork_namer)
		fork_namer = 0;
	/* Each step only for what the parent used: its code is not even mapped here otherwise. */
	if (pp_was_used(PP_USED_PIPES))
		pp_pipes_after_fork_child();
	if (pp_was_used(PP_USED_ENGINE)) {
		pp_ring_after_fork_child();
		pp_span_after_fork_child();
		pp_engine_after_fork_child();
		pp_thp_after_fork_child();
		pp_turn_after_fork_child();
		pp_psi_after_fork_child();
		pp_engine->fork_child();
	}
	/* A thread that was reporting is not in the child; the child reports its own. */
	if (report_owner)
		report_owner = 0;
	if (final_done)
		final_done = 0;
	if (pp_large_written())
		pp_wrote_large = false;
	if (pp_was_used(PP_USED_STATS))
		pp_stats_after_fork_child();
	if (pp_cfg.debug)
		pp_explain_after_fork_child();
}

#define MAX_REPORT_FDS 256

struct report_ctx {
	struct pp_fd_report fds[MAX_REPORT_FDS];
	size_t n;
	struct pp_fd_report closed[PP_CLOSED_MAX];
	struct pp_counters totals;
};

/* What the statistics say of a pipe's path: its own verdict, unless the engine cannot work. */
static const char *report_path(const char *path, const char **why)
{
	if (!pp_engine_ready()) {
		*why = pp_engine_reason();
		return "passthrough";
	}
	return path;
}

static void add_fd(int fd, struct pp_pipe *p, enum pp_end end, void *arg)
{
	struct report_ctx *c = arg;
	struct pp_fd_report *r;

	if (c->n == MAX_REPORT_FDS)
		return;
	r = &c->fds[c->n++];
	r->fd = fd;
	/* A pipe that never needed its inode is asked now (statistics only). */
	r->inode = (unsigned long)pp_fdt_learn_ino(p, fd);
	r->write_end = end == PP_END_WRITE;
	r->path = report_path(pp_pipe_path(p, &r->reason), &r->reason);
	r->last_fallback = __atomic_load_n(&p->last_fallback, __ATOMIC_RELAXED);
	for (int i = 0; i < PP_CNT_COUNT; i++)
		r->cnt.v[i] = __atomic_load_n(&p->cnt.v[i], __ATOMIC_RELAXED);
}

static void add_pipe(struct pp_pipe *p, void *arg)
{
	struct report_ctx *c = arg;

	for (int i = 0; i < PP_CNT_COUNT; i++)
		c->totals.v[i] += __atomic_load_n(&p->cnt.v[i], __ATOMIC_RELAXED);
}

static struct pp_wb_counters wb_snapshot(void)
{
	struct pp_wb_counters w;

	w.stages = __atomic_load_n(&pp_wb.stages, __ATOMIC_RELAXED);
	w.staged_bytes = __atomic_load_n(&pp_wb.staged_bytes, __ATOMIC_RELAXED);
	w.moved_bytes = __atomic_load_n(&pp_wb.moved_bytes, __ATOMIC_RELAXED);
	w.splices = __atomic_load_n(&pp_wb.splices, __ATOMIC_RELAXED);
	w.dropped_bytes = __atomic_load_n(&pp_wb.dropped_bytes, __ATOMIC_RELAXED);
	w.errors_reported = __atomic_load_n(&pp_wb.errors_reported, __ATOMIC_RELAXED);
	w.flush_waits = __atomic_load_n(&pp_wb.flush_waits, __ATOMIC_RELAXED);
	return w;
}

/*
 * Gathers the report; @ctx is static storage of the caller. Without
 * @itemised, no fd or closed pipe is listed (nor an fd's inode asked).
 */
static void build_report(struct report_ctx *ctx, struct pp_stats_report *rep, bool itemised)
{
	uint64_t unlisted = 0;
	size_t nclosed = 0;

	if (itemised)
		memset(ctx, 0, sizeof(*ctx));
	ctx->n = 0;
	for (int i = 0; i < PP_CNT_COUNT; i++)
		ctx->totals.v[i] = __atomic_load_n(&pp_totals_closed.v[i], __ATOMIC_RELAXED);
	pp_pipes_for_each(add_pipe, ctx);
	if (itemised) {
		pp_fdt_for_each(add_fd, ctx);
		nclosed = pp_stats_closed(ctx->closed, &unlisted);
	}
	for (size_t i = 0; i < nclosed; i++)
		ctx->closed[i].path = report_path(ctx->closed[i].path, &ctx->closed[i].reason);
	*rep = (struct pp_stats_report){
		.pid = getpid(),
		.engine = pp_engine_name(),
		.engine_reason = pp_engine_reason(),
		.thp = pp_thp_verdict(),
		.write_behind = pp_engine->state(),
		.pool_bytes = pp_pool_bytes(),
		.pool_peak = pp_pool_peak(),
		.pool_trimmed_bytes = pp_rings_trimmed_bytes(),
		.pressure_episodes = pp_psi_episodes(),
		.exited_rings_reused = pp_rings_exited_reused(),
		.exited_rings_freed = pp_rings_exited_freed(),
		.totals = ctx->totals,
		.wb = wb_snapshot(),
		.latency = &pp_latency_all,
		.fds = ctx->fds,
		.nfds = ctx->n,
		.closed = ctx->closed,
		.nclosed = nclosed,
		.closed_unlisted = unlisted,
	};
	/* The tree's registry, read page by page: for a report, not for the counters file. */
	if (itemised) {
		pp_reg_occupancy(&rep->registry);
		rep->registry_missing = pp_reg_missing();
		/* Which program: what an exec's note names it by (pp_stats_exec_note). */
		PP_SYSCALL(SYS_prctl, PR_GET_NAME, rep->image, 0, 0, 0);
	}
}

static struct report_ctx report_ctx; /* large; never on the stack */

/* A thread that waits for the lock sleeps this long between looks... */
#define REPORT_WAIT_NS 1000000L
/* ...this many times at most, when it must not wait without bound (_exit). */
#define REPORT_WAIT_TRIES 100

/*
 * Takes the report lock. Fails when this thread holds it already (a signal
 * handler interrupted its report: waiting would never end) and, with
 * @bounded, when another thread keeps it for more than about 100 ms.
 * Only raw system calls: this may run in a signal handler.
 */
static bool report_lock(bool bounded)
{
	int self = (int)pp_sys_gettid();

	for (int tries = 0;; tries++) {
		int owner = 0;
		struct timespec ts = { 0, REPORT_WAIT_NS };

		if (__atomic_compare_exchange_n(&report_owner, &owner, self, false,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return true;
		if (owner == self || (bounded && tries == REPORT_WAIT_TRIES))
			return false;
		PP_SYSCALL(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, NULL);
	}
}

static void report_unlock(void)
{
	__atomic_store_n(&report_owner, 0, __ATOMIC_RELEASE);
}

/* The PPIPE_COUNTERS file hears only of a process that made a large write into a tracked pipe. */
static inline bool host_due(void)
{
	return pp_large_written() && pp_cfg.counters[0];
}

static void host_add(const struct pp_stats_report *rep)
{
	uint64_t v[PP_HOST_COUNT];

	pp_host_values(rep, v);
	pp_host_add(pp_cfg.counters, v);
}

/*
 * The process's last report, once: at exit, or in _exit()/_Exit() when
 * exit() did not run (or ran and already wrote it). Its totals go to the
 * PPIPE_COUNTERS file too.
 */
PP_COMMON static void report_final(bool bounded)
{
	struct pp_stats_report rep;
	bool stats = pp_cfg.stats[0] && strcmp(pp_cfg.stats, "0");

	if ((!stats && !host_due()) || !report_lock(bounded))
		return;
	if (!__atomic_exchange_n(&final_done, 1, __ATOMIC_RELAXED)) {
		build_report(&report_ctx, &rep, stats);
		if (stats)
			pp_stats_emit(pp_cfg.stats, &rep);
		if (host_due())
			host_add(&rep);
	}
	report_unlock();
}

PP_COMMON void pp_stats_report_now(void)
{
	report_final(false);
}

void pp_stats_report_fd(int fd)
{
	struct pp_stats_report rep;

	if (!report_lock(false))
		return;
	build_report(&report_ctx, &rep, true);
	pp_stats_emit_fd(fd, &rep);
	report_unlock();
}

/*
 * At exit(), in every process: with the start-up code (a program that just
 * ran its constructor has that page, and no other of the library's), and
 * testing inline what each step would test first.
 */
PP_START static void at_exit(void)
{
	if (pp_engine_hooks())
		pp_engine->flush_all();
	if (pp_fault_armed)
		pp_fault_report();
	if (pp_cfg.stats[0] || host_due())
		pp_stats_report_now();
	/* This image's registry holds end with it (an exec's were handed on). */
	pp_reg_release_all();
}

/*
 * The library's DT_FINI (the link names it): the C runtime's own _fini does
 * nothing but sits on the last page of the code, which no other exit work
 * touches (a page fault in every process that calls exit()).
 */
PP_START void pp_fini(void)
{
}

PP_COMMON void pp_exit(int status, bool upper)
{
	/*
	 * Not in a vfork child: it runs on our memory (a report there would
	 * be ours under its pid, and its once flag would silence ours), and
	 * the pthread_atfork handler that refreshes the pid never ran in it.
	 * Nothing to do at all without a report, pipes or a service.
	 */
	if (pp_active() &&
	    (pp_cfg.stats[0] || pp_large_written() || pp_pipes_live() || pp_reg_claimed_left() ||
	     pp_engine_hooks()) &&
	    !pp_in_vfork_child()) {
		if (pp_engine_hooks())
			pp_engine->flush_all();
		report_final(true);
		/* This image's registry holds end with it, as at_exit() does. */
		pp_reg_release_all();
	}
	real_exit(status, upper);
}

#ifdef __GLIBC__
/*
 * What glibc's pthread_atfork() and atexit() are: calls of these with the
 * library's handle, from small functions that the link puts at the far end
 * of the library's code, a page no other start-up code is on (a page
 * fault in every process start, for two calls).
 */
extern void *__dso_handle __attribute__((visibility("hidden")));
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
			     void *dso);
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

PP_START static void at_exit_arg(void *unused)
{
	(void)unused;
	at_exit();
}

PP_START static void register_handlers(void)
{
	__register_atfork(before_fork, after_fork_parent, after_fork_child, __dso_handle);
	__cxa_atexit(at_exit_arg, NULL, __dso_handle);
}
#else
PP_START static void register_handlers(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
	atexit(at_exit);
}
#endif

/* The engine each PPIPE_MODE runs (engine.h): a new engine is one line here. */
static const struct pp_engine_ops *const engines[] = {
	[PP_MODE_AUTO] = &pp_engine_vmsplice,
	[PP_MODE_VMSPLICE] = &pp_engine_vmsplice,
	[PP_MODE_URING] = &pp_engine_writebehind,
	[PP_MODE_OFF] = &pp_engine_vmsplice, /* never asked: every call goes to libc */
};

/*
 * Loading libppipe reads the options and binds the functions it stands
 * in for; it maps nothing, opens nothing and installs no signal handler
 * (the fault handler comes with the first accelerated write, the fd table
 * with the first pipe, the registry with the first pipe that crosses into
 * another process). Only a program started with pipe ends from a
 * libppipe process tree does more: it takes them over.
 */
PP_START __attribute__((constructor(101))) static void pp_init(void)
{
	bool ours;

	pp_real_start();
	ours = pp_config_load(environ);
	/* Test faults and an inherited registry are PPIPE_ variables too. */
	if (ours)
		pp_fault_init(environ);
	if (pp_cfg.verbose)
		pp_config_dump(2);
	if (pp_cfg.mode == PP_MODE_OFF) {
		pp_debug("PPIPE_MODE=off: every call goes to libc");
		return;
	}
	pp_engine = engines[pp_cfg.mode];
	/*
	 * A setuid or setgid program (loaded by /etc/ld.so.preload, which the
	 * dynamic linker honours there too) runs no engine and vouches for no
	 * pipe end: what it inherited stays pending, plain, and the registry's
	 * variable does not reach what it runs.
	 */
	if (getauxval(AT_SECURE)) {
		pp_debug("setuid/setgid program: every call goes to libc, its pipes stay plain");
		if (ours)
			pp_exec_forget_inherited(environ);
		return;
	}
	/* Pipe ends inherited through exec from a libppipe process tree. */
	if (ours && pp_exec_inherited(environ)) {
		pp_exec_start(environ);
		pp_exec_forget_inherited(
			environ); /* for libppipe only: the program never sees it */
	}
	register_handlers();
	__atomic_store_n(&pp_is_active, true, __ATOMIC_RELEASE);
}
