// SPDX-License-Identifier: MIT
#include "init.h"

#include "config.h"
#include "engine.h"
#include "exec.h"
#include "faultguard.h"
#include "fdtable.h"
#include "log.h"
#include "pipe.h"
#include "pool.h"
#include "psi.h"
#include "real.h"
#include "ring.h"
#include "stats.h"
#include "vfork.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static bool active;

bool pp_active(void)
{
	return __atomic_load_n(&active, __ATOMIC_ACQUIRE);
}

static void after_fork_child(void)
{
	pp_vfork_note_pid();
	pp_pipes_after_fork_child();
	pp_ring_after_fork_child();
	pp_engine_after_fork_child();
	pp_thp_after_fork_child();
	pp_psi_after_fork_child();
}

#define MAX_REPORT_FDS 256

struct report_ctx {
	struct pp_fd_report fds[MAX_REPORT_FDS];
	size_t n;
	struct pp_counters totals;
};

static void add_fd(int fd, struct pp_pipe *p, enum pp_end end, void *arg)
{
	struct report_ctx *c = arg;
	struct pp_fd_report *r;

	if (c->n == MAX_REPORT_FDS)
		return;
	r = &c->fds[c->n++];
	r->fd = fd;
	r->inode = (unsigned long)p->ino;
	r->write_end = end == PP_END_WRITE;
	r->path = p->accel && !pp_pipe_unsafe(p) && pp_engine_ready() ? "vmsplice" : "passthrough";
	r->reason = p->reason ? p->reason : "";
	for (int i = 0; i < PP_CNT_COUNT; i++)
		r->cnt.v[i] = __atomic_load_n(&p->cnt.v[i], __ATOMIC_RELAXED);
}

static void add_pipe(struct pp_pipe *p, void *arg)
{
	struct report_ctx *c = arg;

	for (int i = 0; i < PP_CNT_COUNT; i++)
		c->totals.v[i] += __atomic_load_n(&p->cnt.v[i], __ATOMIC_RELAXED);
}

/* Gathers the report; @ctx is static storage of the caller. */
static void build_report(struct report_ctx *ctx, struct pp_stats_report *rep)
{
	memset(ctx, 0, sizeof(*ctx));
	for (int i = 0; i < PP_CNT_COUNT; i++)
		ctx->totals.v[i] = __atomic_load_n(&pp_totals_closed.v[i], __ATOMIC_RELAXED);
	pp_pipes_for_each(add_pipe, ctx);
	pp_fdt_for_each(add_fd, ctx);
	*rep = (struct pp_stats_report){
		.pid = getpid(),
		.engine = pp_engine_name(),
		.engine_reason = pp_engine_reason(),
		.thp = pp_thp_verdict(),
		.pool_bytes = pp_pool_bytes(),
		.pool_peak = pp_pool_peak(),
		.pool_trimmed_bytes = pp_rings_trimmed_bytes(),
		.pressure_episodes = pp_psi_episodes(),
		.totals = ctx->totals,
		.latency = &pp_latency_all,
		.fds = ctx->fds,
		.nfds = ctx->n,
	};
}

static struct report_ctx report_ctx; /* large; never on the stack */
static int report_lock;

void pp_stats_report_now(void)
{
	struct pp_stats_report rep;

	if (!pp_cfg.stats[0] || !strcmp(pp_cfg.stats, "0"))
		return;
	while (__atomic_exchange_n(&report_lock, 1, __ATOMIC_ACQUIRE))
		;
	build_report(&report_ctx, &rep);
	pp_stats_emit(pp_cfg.stats, &rep);
	__atomic_store_n(&report_lock, 0, __ATOMIC_RELEASE);
}

void pp_stats_report_fd(int fd)
{
	struct pp_stats_report rep;

	while (__atomic_exchange_n(&report_lock, 1, __ATOMIC_ACQUIRE))
		;
	build_report(&report_ctx, &rep);
	pp_stats_emit_fd(fd, &rep);
	__atomic_store_n(&report_lock, 0, __ATOMIC_RELEASE);
}

static void at_exit(void)
{
	pp_stats_report_now();
	/* This image's registry holds end with it (an exec's were handed on). */
	pp_pipes_exec_release();
}

__attribute__((constructor(101))) static void pp_init(void)
{
	pp_real_bind();
	pp_config_load(environ);
	if (pp_cfg.verbose)
		pp_config_dump(2);
	if (pp_cfg.mode == PP_MODE_OFF) {
		pp_debug("PPIPE_MODE=off: every call goes to libc");
		return;
	}
	pp_faultguard_init();
	pp_vfork_note_pid();
	/* Pipe ends inherited through exec from a libppipe process tree. */
	if (!pp_fdt_init() && !pp_reg_join(environ))
		pp_exec_adopt();
	unsetenv("PPIPE_REGISTRY"); /* for libppipe only: the program never sees it */
	pthread_atfork(pp_pipes_before_fork, NULL, after_fork_child);
	atexit(at_exit);
	__atomic_store_n(&active, true, __ATOMIC_RELEASE);
}
