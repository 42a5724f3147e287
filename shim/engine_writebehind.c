// SPDX-License-Identifier: MIT
/*
 * The write-behind engine (PPIPE_MODE=uring, stage.h): the vmsplice
 * engine's writes, with the pipe's staging pipe as their outlet when the
 * pipe is full, and the hooks that keep what is staged in order with
 * every other way into the pipe. The io_uring service (uring.h) moves
 * the staged bytes on.
 *
 * Layer: engine (may use: engine, pipes, resources, base).
 */
#include "engine_core.h"

#include "compiler.h"
#include "config.h"
#include "fault.h"
#include "faultguard.h"
#include "fdtable.h"
#include "log.h"
#include "pipe.h"
#include "stage.h"
#include "stats.h"
#include "sys.h"
#include "uring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

static void pp_stage_put(struct pp_stage *st);

/* Guards taking a free slot; only ever tried, never waited for (signal handlers). */
static int alloc_lock;

static uint64_t stage_word(const struct pp_stage *st, uint32_t gen)
{
	return ((uint64_t)(st - pp_stages + 1) << 32) | gen;
}

/* A reference on @st if it is still the open stage of generation @gen. */
static bool stage_ref(struct pp_stage *st, uint32_t gen)
{
	int r = __atomic_load_n(&st->refs, __ATOMIC_ACQUIRE);

	do {
		if (r <= 0)
			return false;
	} while (!__atomic_compare_exchange_n(&st->refs, &r, r + 1, true, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	if (__atomic_load_n(&st->gen, __ATOMIC_ACQUIRE) != gen ||
	    __atomic_load_n(&st->state, __ATOMIC_ACQUIRE) != PP_STAGE_OPEN) {
		pp_stage_put(st);
		return false;
	}
	return true;
}

/* Drops a reference pp_stage_get() or stage_any() took. */
static void pp_stage_put(struct pp_stage *st)
{
	int r = __atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL);

	/* The last reference of a retired stage: the service closes it. */
	if (r == 0) {
		pp_uring_kick();
	} else if (r == 1 && __atomic_load_n(&st->tfd, __ATOMIC_ACQUIRE) >= 0) {
		/*
		 * Nobody inside: the service closes the pipe's dup once the
		 * stage is drained and no write came for PP_STAGE_LINGER_NS
		 * (stage.h); it is told, unless its timer will look anyway.
		 */
		__atomic_store_n(&st->used_ns, pp_mono_ns(), __ATOMIC_RELEASE);
		if (!pp_uring_will_look())
			pp_uring_kick();
	}
}

/*
 * The caller holds a reference on @st, whose dup of the pipe may have
 * been dropped: a new one of @fd, which must still name the pipe. Under
 * the stage's lock (signals blocked), as the drop is. False without one.
 */
static bool stage_target(struct pp_stage *st, int fd)
{
	sigset_t all, old;
	bool ok = true;

	if (__atomic_load_n(&st->tfd, __ATOMIC_ACQUIRE) >= 0)
		return true; /* our reference keeps it */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (!pp_stage_mover_try(st))
		sched_yield(); /* held for one non-blocking system call at a time */
	if (__atomic_load_n(&st->tfd, __ATOMIC_ACQUIRE) < 0) {
		long t = pp_sys_dup_spare(fd, true);
		uint64_t ino;

		if (t >= 0 && (pp_sys_pipe_ino((int)t, &ino) || ino != st->ino)) {
			pp_sys_close((int)t);
			t = -1;
		}
		if (t >= 0)
			__atomic_store_n(&st->tfd, (int)t, __ATOMIC_RELEASE);
		ok = t >= 0;
	}
	pp_stage_mover_release(st);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ok;
}

/* @p's stage with a reference, or NULL. */
static struct pp_stage *stage_of(struct pp_pipe *p)
{
	uint64_t w = __atomic_load_n(&p->engine_word, __ATOMIC_ACQUIRE);
	struct pp_stage *st;

	if (!w || (w >> 32) > PP_STAGE_MAX)
		return NULL;
	st = &pp_stages[(w >> 32) - 1];
	return stage_ref(st, (uint32_t)w) ? st : NULL;
}

/* Moves a fresh fd of ours out of the program's way (its low numbers). */
static int to_spare(int fd)
{
	long r = pp_sys_dup_spare(fd, true);

	pp_sys_close(fd);
	return r < 0 ? -1 : (int)r;
}

/*
 * Opens the staging pipe and the target's dup in slot @st. The staging
 * pipe is sized PPIPE_URING_STAGE, never above the target (more would
 * only queue behind a full target); a pipe the kernel shrank because the
 * user is past pipe-user-pages-soft is given back.
 */
static const char *stage_open(struct pp_stage *st, struct pp_pipe *p, int fd)
{
	int s[2];
	long cap_t, cap_s, want;
	uint64_t ino;

	/*
	 * The fds are stored atomically: a close() of any thread may look at
	 * them (owns_in) while the slot opens or closes, without a reference.
	 */
	pp_stage_set_fds(st, -1, -1, -1);
	if (pp_fault(PP_FAULT_STAGE) || PP_SYSCALL(SYS_pipe2, s, O_CLOEXEC))
		return "no staging pipe (fds or pipe-user-pages-soft)";
	pp_stage_set_fds(st, to_spare(s[0]), to_spare(s[1]), (int)pp_sys_dup_spare(fd, true));
	if (st->sfd_r < 0 || st->sfd_w < 0 || st->tfd < 0)
		return "no fds for the staging pipe";
	if (pp_sys_pipe_ino(st->tfd, &ino) || ino != pp_pipe_ino(p))
		return "fd changed under the write";
	cap_t = pp_sys_fcntl(st->tfd, F_GETPIPE_SZ, 0);
	if (cap_t <= 0)
		return "F_GETPIPE_SZ failed";
	want = (long)pp_cfg.uring_stage < cap_t ? (long)pp_cfg.uring_stage : cap_t;
	if (pp_sys_fcntl(st->sfd_w, F_SETPIPE_SZ, (unsigned long)want) < 0 &&
	    pp_sys_fcntl(st->sfd_w, F_GETPIPE_SZ, 0) < want)
		return "staging pipe could not be sized (pipe-user-pages-soft?)";
	cap_s = pp_sys_fcntl(st->sfd_w, F_GETPIPE_SZ, 0);
	if (cap_s < 16384)
		return "staging pipe shrunk by the kernel (pipe-user-pages-soft)";
	st->ino = pp_pipe_ino(p); /* another writer may be learning it this very moment */
	st->owner_gen = &p->gen;
	st->owner_was = pp_pipe_gen(p);
	st->cap_s = (uint32_t)cap_s;
	st->cap_t = (uint32_t)cap_t;
	pp_pipe_note_capacity(p, (int)cap_t);
	return NULL;
}

static int stage_drain(struct pp_stage *st, bool signals);
static long help_move(struct pp_stage *st);

/*
 * A reference on the stage @w names, open or retired but not yet closed
 * (its bytes may still be on their way), or NULL once it is gone.
 */
static struct pp_stage *stage_any(uint64_t w)
{
	struct pp_stage *st;
	int r;

	if (!w || (w >> 32) > PP_STAGE_MAX)
		return NULL;
	st = &pp_stages[(w >> 32) - 1];
	r = __atomic_load_n(&st->refs, __ATOMIC_ACQUIRE);
	do {
		if (r < 0)
			return NULL;
	} while (!__atomic_compare_exchange_n(&st->refs, &r, r + 1, true, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	if (__atomic_load_n(&st->gen, __ATOMIC_ACQUIRE) != (uint32_t)w ||
	    __atomic_load_n(&st->state, __ATOMIC_ACQUIRE) < PP_STAGE_OPEN) {
		pp_stage_put(st);
		return NULL;
	}
	return st;
}

/*
 * The stage of @p for a large write, created on first use, with a
 * reference the caller drops with pp_stage_put(). NULL when write-behind
 * is not available for it (service not ready, table full, no fds): the
 * caller writes directly. Async-signal-safe (never waits for a lock).
 */
static struct pp_stage *pp_stage_get(struct pp_pipe *p, int fd)
{
	struct pp_stage *st = stage_of(p);
	uint64_t old = __atomic_load_n(&p->engine_word, __ATOMIC_ACQUIRE);
	const char *why;

	if (st) {
		if (stage_target(st, fd))
			return st;
		pp_stage_put(st);
		return NULL;
	}
	if (!pp_uring_ready())
		return NULL;
	/* From now on the fd operations, fork, exec and exit ask this engine. */
	if (!__atomic_load_n(&pp_engine_live, __ATOMIC_RELAXED))
		__atomic_store_n(&pp_engine_live, 1, __ATOMIC_RELEASE);
	/* A retired stage of the pipe first delivers what it holds: order. */
	if ((st = stage_any(old))) {
		stage_drain(st, false);
		pp_stage_put(st);
	}
	if (__atomic_exchange_n(&alloc_lock, 1, __ATOMIC_ACQUIRE))
		return NULL;
	for (st = pp_stages; st < pp_stages + PP_STAGE_MAX; st++)
		if (__atomic_load_n(&st->state, __ATOMIC_ACQUIRE) == PP_STAGE_FREE)
			break;
	/* None free: the stages of pipes that went unseen go, a drained one at once. */
	if (st == pp_stages + PP_STAGE_MAX) {
		bool retired = false;

		for (st = pp_stages; st < pp_stages + PP_STAGE_MAX; st++) {
			retired |= pp_stage_retire_orphan(st);
			if (pp_stage_try_reap(st))
				break;
		}
		if (retired)
			pp_uring_kick();
	}
	if (st == pp_stages + PP_STAGE_MAX) {
		__atomic_store_n(&alloc_lock, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&p->last_fallback, "write-behind: every staging slot in use",
				 __ATOMIC_RELAXED);
		return NULL;
	}
	/* Taken under the lock: nobody else opens this slot meanwhile. */
	__atomic_store_n(&st->state, PP_STAGE_OPENING, __ATOMIC_RELEASE);
	__atomic_store_n(&alloc_lock, 0, __ATOMIC_RELEASE);

	why = stage_open(st, p, fd);
	if (why) {
		pp_stage_close_fds(st);
		__atomic_store_n(&st->state, PP_STAGE_FREE, __ATOMIC_RELEASE);
		__atomic_store_n(&p->last_fallback, why, __ATOMIC_RELAXED);
		pp_debug("pipe inode %llu: write-behind not used: %s",
			 (unsigned long long)pp_pipe_ino(p), why);
		return NULL;
	}
	__atomic_store_n(&st->in, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&st->out, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&st->err, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&st->inflight, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&st->mover, 0, __ATOMIC_RELAXED);
	PP_WB_ADD(stages, 1);
	/* Open + the caller (a stale handle may hold the slot a moment: add). */
	__atomic_add_fetch(&st->refs, 2, __ATOMIC_ACQ_REL);
	__atomic_store_n(&st->state, PP_STAGE_OPEN, __ATOMIC_RELEASE);
	{
		uint64_t w = stage_word(st, __atomic_load_n(&st->gen, __ATOMIC_ACQUIRE));

		if (__atomic_compare_exchange_n(&p->engine_word, &old, w, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return st;
	}
	/* Another thread gave the pipe a stage first: use that one. */
	__atomic_store_n(&st->state, PP_STAGE_RETIRED, __ATOMIC_RELEASE);
	__atomic_sub_fetch(&st->refs, 2, __ATOMIC_ACQ_REL);
	pp_uring_kick();
	return stage_of(p);
}

/*
 * Sleeps until @st's bytes move past @seq (or 10 ms pass), registered as
 * a waiter. Returns whether a signal handler ran meanwhile.
 */
static bool wait_seq(struct pp_stage *st, uint32_t seq)
{
	struct timespec slice = { 0, 10000000 };
	long r = 0;

	__atomic_add_fetch(&st->flushers, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&st->moved, __ATOMIC_SEQ_CST) == seq)
		r = syscall(SYS_futex, &st->moved, FUTEX_WAIT_PRIVATE, seq, &slice, NULL, 0);
	__atomic_sub_fetch(&st->flushers, 1, __ATOMIC_SEQ_CST);
	return r < 0 && errno == EINTR;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Waits until every byte staged in @st before the call has left S. With
 * @stall_ns, gives up once they have not moved for that long (the pipe
 * is full and nobody reads it: the caller must not wait for a reader
 * that may only start after it returns). With @signals, a signal handler
 * that runs meanwhile ends the wait when the application has one without
 * SA_RESTART (engine.h, flush). Returns 1 when they all left, 0 when it
 * gave up, -EINTR.
 */
static int wait_moved(struct pp_stage *st, uint64_t stall_ns, bool signals)
{
	uint64_t target = __atomic_load_n(&st->in, __ATOMIC_ACQUIRE);
	uint64_t seen = __atomic_load_n(&st->out, __ATOMIC_ACQUIRE), since = 0;
	bool counted = false;
	int saved = errno;

	if (pp_fault(PP_FAULT_FLUSH))
		return false; /* tests: the flush points broken on purpose */

	while (seen < target) {
		uint32_t seq = __atomic_load_n(&st->moved, __ATOMIC_ACQUIRE);
		uint64_t now;

		if (!counted) {
			counted = true;
			PP_WB_ADD(flush_waits, 1);
		}
		if (stall_ns) {
			now = mono_ns();
			if (!since)
				since = now;
			else if (now - since >= stall_ns)
				break;
		}
		pp_uring_kick();
		if (__atomic_load_n(&st->out, __ATOMIC_ACQUIRE) == seen && wait_seq(st, seq) &&
		    signals && pp_signals_interrupt()) {
			errno = saved;
			return -EINTR;
		}
		{
			uint64_t out = __atomic_load_n(&st->out, __ATOMIC_ACQUIRE);

			if (out != seen)
				since = 0; /* progress */
			seen = out;
		}
	}
	errno = saved;
	return seen >= target;
}

/* Waits for the staged bytes, then takes the deferred error; -EINTR leaves it. */
static int stage_drain(struct pp_stage *st, bool signals)
{
	if (wait_moved(st, 0, signals) < 0)
		return -EINTR;
	return __atomic_exchange_n(&st->err, 0, __ATOMIC_ACQ_REL);
}

/*
 * A deferred error (-errno) is handed over: counted, and for EPIPE the
 * SIGPIPE the kernel would have sent the write that met it, to this
 * thread. Returns it.
 */
static int report(int e)
{
	if (!e)
		return 0;
	PP_WB_ADD(errors_reported, 1);
	if (e == -EPIPE) {
		long pid = PP_SYSCALL(SYS_getpid), tid = pp_sys_gettid();

		PP_SYSCALL(SYS_tgkill, pid, tid, SIGPIPE);
	}
	return e;
}

/*
 * Waits like pp_stage_flush(), leaving a deferred error for the next write
 * or close, but only while the staged bytes move: once they have not moved
 * for PP_STAGE_STALL_NS (the pipe is full and nobody reads), it returns.
 * For calls that never block on a plain pipe (F_SETFL, F_SETPIPE_SZ).
 */
static void pp_stage_wait(struct pp_pipe *p)
{
	struct pp_stage *st;

	if (!p || !(st = stage_any(__atomic_load_n(&p->engine_word, __ATOMIC_ACQUIRE))))
		return;
	wait_moved(st, PP_STAGE_STALL_NS, false);
	pp_stage_put(st);
}

/* Takes @p's deferred error without waiting (-errno, reported; 0 if none). */
static int pp_stage_take_error(struct pp_pipe *p)
{
	struct pp_stage *st;
	int e;

	if (!(st = stage_any(__atomic_load_n(&p->engine_word, __ATOMIC_ACQUIRE))))
		return 0;
	e = __atomic_exchange_n(&st->err, 0, __ATOMIC_ACQ_REL);
	pp_stage_put(st);
	return report(e);
}

/*
 * Before anything else reaches @p's target from this process: waits until
 * every byte staged so far has left S. Returns the deferred error (-errno,
 * taken: reported once, with SIGPIPE for EPIPE), -EINTR (@signals: engine.h)
 * or 0.
 */
static int pp_stage_flush(struct pp_pipe *p, bool signals)
{
	struct pp_stage *st;
	int e;

	if (!p || !(st = stage_any(__atomic_load_n(&p->engine_word, __ATOMIC_ACQUIRE))))
		return 0;
	e = stage_drain(st, signals);
	pp_stage_put(st);
	return e == -EINTR ? e : report(e);
}

/*
 * pp_stage_flush() for a call that must not wait: the writer moves on
 * what the pipe takes now. Returns 0 when nothing is staged or in flight
 * any more, the deferred error or the readers' EPIPE (-errno, with its
 * SIGPIPE) when there is one, else -EAGAIN: to the program the pipe is
 * still full of the staged bytes.
 */
static int pp_stage_flush_nowait(struct pp_pipe *p)
{
	struct pp_stage *st;
	long n = 0;
	int e;

	if (pp_fault(PP_FAULT_FLUSH))
		return 0; /* tests: the flush points broken on purpose */
	if (!p || !(st = stage_any(__atomic_load_n(&p->engine_word, __ATOMIC_ACQUIRE))))
		return 0;
	if (pp_stage_pending(st))
		n = help_move(st); /* -EPIPE came with the kernel's SIGPIPE */
	if (n == -EPIPE)
		e = -EPIPE; /* a deferred error stays for the next write, as after a write's */
	else if ((e = __atomic_exchange_n(&st->err, 0, __ATOMIC_ACQ_REL)))
		e = report(e);
	else if (pp_stage_pending(st) || __atomic_load_n(&st->inflight, __ATOMIC_SEQ_CST))
		e = -EAGAIN;
	pp_stage_put(st);
	return e;
}

/*
 * A write end of @p is being closed (close, dup2 over it): when it was the
 * process's last write end, the stage retires, so that the target's EOF
 * follows its staged bytes. Returns the deferred error (-errno), or 0.
 */
static int pp_stage_close(struct pp_pipe *p, bool last)
{
	struct pp_stage *st = stage_any(__atomic_load_n(&p->engine_word, __ATOMIC_ACQUIRE));
	int open = PP_STAGE_OPEN;
	int e;

	if (!st)
		return 0;
	/*
	 * No wait: the staged bytes are delivered behind the close, and the
	 * readers' EOF after them, when the service closes its dup. (A plain
	 * write would still be blocked with them: waiting here could wait for
	 * a reader that reads only after this close.) An error already met is
	 * this close's.
	 */
	e = __atomic_exchange_n(&st->err, 0, __ATOMIC_ACQ_REL);
	/*
	 * Writers still inside finish into S and the service closes it once
	 * drained; the pipe keeps the word, so that its next stage waits for
	 * this one's bytes.
	 */
	if (last && __atomic_compare_exchange_n(&st->state, &open, PP_STAGE_RETIRED, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		pp_stage_put(st); /* the open reference */
	pp_stage_put(st);
	return report(e);
}

/*
 * Flushes every stage of the process. @bounded: as pp_stage_wait(), for
 * fork and posix_spawn, where the reader may be the process about to
 * start, and the service goes on delivering afterwards. Unbounded for
 * exit and exec, which end this image and its service: a plain write
 * would still be blocked with those bytes.
 */
PP_COMMON static void pp_stages_flush_all(bool bounded)
{
	/* Stages exist only once the service has started: otherwise nothing to look at. */
	if (likely(!pp_uring_started()))
		return;
	for (struct pp_stage *st = pp_stages; st < pp_stages + PP_STAGE_MAX; st++) {
		int r = __atomic_load_n(&st->refs, __ATOMIC_ACQUIRE);

		/* A reference only while it is open or still draining. */
		if (r <= 0 || !__atomic_compare_exchange_n(&st->refs, &r, r + 1, false,
							   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			continue;
		/* An error found now has no write left to report it: it stays pending. */
		wait_moved(st, bounded ? PP_STAGE_STALL_NS : 0, false);
		pp_stage_put(st);
	}
}

static bool owns_in(const struct pp_stage *st, unsigned int lo, unsigned int hi)
{
	/* No reference held: the slot may be opening or closing meanwhile (stage_open). */
	const int fds[3] = { __atomic_load_n(&st->sfd_r, __ATOMIC_RELAXED),
			     __atomic_load_n(&st->sfd_w, __ATOMIC_RELAXED),
			     __atomic_load_n(&st->tfd, __ATOMIC_ACQUIRE) };

	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0 && (unsigned int)fds[i] >= lo && (unsigned int)fds[i] <= hi)
			return true;
	return false;
}

/*
 * The program is about to close (or dup2 over) fds [@lo, @hi]: a stage
 * whose own fds are among them delivers what it holds and closes first,
 * so that no staged byte is lost and no later splice reaches a file the
 * program opened under a recycled number; when the service's own are,
 * every stage does and the service ends. Returns whether any was ours.
 */
static bool pp_stage_fds_closing(unsigned int lo, unsigned int hi)
{
	bool any = false, service;

	if (!pp_uring_started())
		return false;
	/*
	 * The service's own fds are among them: every stage delivers and
	 * closes, the service ends, and the next write starts it afresh (no
	 * fd of the program's is ever taken for one of ours).
	 */
	service = pp_uring_stop_if_owns(lo, hi);
	for (struct pp_stage *st = pp_stages; st < pp_stages + PP_STAGE_MAX; st++) {
		int open = PP_STAGE_OPEN;

		if (__atomic_load_n(&st->state, __ATOMIC_ACQUIRE) < PP_STAGE_OPEN ||
		    (!service && !owns_in(st, lo, hi)))
			continue;
		any = true;
		/* Deliver, retire, wait for the writers inside, close. */
		if (__atomic_compare_exchange_n(&st->state, &open, PP_STAGE_RETIRED, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			pp_stage_put(st);
		while (!pp_stage_try_reap(st) &&
		       __atomic_load_n(&st->state, __ATOMIC_ACQUIRE) != PP_STAGE_FREE) {
			wait_moved(st, 0, false);
			sched_yield(); /* delivered: the last writers are leaving */
		}
	}
	if (service)
		pp_uring_stop();
	return any || service;
}

/* In a fork child: the service did not come along; drop every stage. */
PP_COMMON static void pp_stages_after_fork_child(void)
{
	/* The counters are the parent's story, as the pipes' own are (stats.c). */
	memset(&pp_wb, 0, sizeof(pp_wb));
	for (struct pp_stage *st = pp_stages; st < pp_stages + PP_STAGE_MAX; st++) {
		if (__atomic_load_n(&st->state, __ATOMIC_RELAXED) == PP_STAGE_FREE)
			continue;
		pp_stage_close_fds(st);
		st->gen++;
		st->refs = 0;
		st->state = PP_STAGE_FREE;
	}
	alloc_lock = 0;
}

/*
 * Before a write-behind write goes straight into the pipe, the bytes
 * staged before it must be in: the writer moves them on itself when it
 * can (no wake-up of the service) and the pipe has room. Returns 0 when
 * nothing is staged any more, -EPIPE when the readers are gone (with the
 * kernel's SIGPIPE to this thread), else nonzero: this write is staged
 * too, and the service, kicked, takes the rest on.
 */
static long help_move(struct pp_stage *st)
{
	sigset_t all, old;
	long n = -EBUSY;

	/* With IORING_OP_SPLICE the service alone moves bytes on. */
	if (pp_cfg.uring_splice == PP_URING_SPLICE_ASYNC)
		return 1;

	/*
	 * No handler may run while this thread holds the mover right: one
	 * that flushes the pipe would wait for bytes only this thread can
	 * move on (the service leaves a held stage to its holder).
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (!pp_stage_mover_try(st)) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return n;
	}
	for (int round = 0; round < 4 && (n = pp_stage_move_once(st)) > 0; round++)
		;
	pp_stage_mover_release(st);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pp_uring_kick(); /* as after stage_push: the service may have passed it by */
	if (n == -EPIPE)
		return n;
	return pp_stage_pending(st) ? 1 : 0;
}

/*
 * Stages what @v holds: a vmsplice() into the staging pipe that never
 * waits, under the stage's lock, counted in the same breath, so that
 * what the staging pipe holds is always exactly what the counters say
 * (two writers' pushes and their counts could otherwise cross, and a
 * move or a flush act on the wrong bytes). Signals are blocked while the
 * lock is held (a handler's flush would wait for this thread). Returns
 * what vmsplice() returned.
 */
static long stage_push(struct pp_stage *st, const struct iovec *v)
{
	sigset_t all, old;
	long n;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (!pp_stage_mover_try(st))
		sched_yield(); /* held for one non-blocking system call at a time */
	n = pp_sys_vmsplice(st->sfd_w, v, 1, SPLICE_F_NONBLOCK);
	if (n > 0) {
		__atomic_add_fetch(&st->in, (uint64_t)n, __ATOMIC_SEQ_CST);
		PP_WB_ADD(staged_bytes, (uint64_t)n);
	}
	pp_stage_mover_release(st);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/*
	 * The service may have passed the stage by while the lock was held
	 * (and gone to sleep): whatever happened, it looks again. A kick
	 * costs a system call only when the service sleeps.
	 */
	pp_uring_kick();
	return n;
}

/* ---- the outlet: the core's writes go through the pipe's stage ---- */

static long wb_begin(struct pp_outlet *o, struct pp_pipe *p, int fd)
{
	/*
	 * Into the staging pipe, which passes it on in order. Without one,
	 * the bytes a stage of this pipe still holds go first (the ring's
	 * reuse evidence counts on it).
	 */
	struct pp_stage *st = pp_stage_get(p, fd);
	uint64_t ino;

	o->p = p;
	o->st = NULL;
	if (!st)
		return pp_stage_flush(p, false);
	/*
	 * The stage holds the pipe the fd named when it was made: the fd
	 * must still name it (a raw dup3 over it is not seen).
	 */
	if (pp_sys_pipe_ino(fd, &ino) || ino != pp_pipe_ino(p)) {
		pp_stage_put(st);
		pp_stage_wait(p);
		o->why = "fd switched to another file behind libppipe";
		pp_pipe_mark_unsafe(p, o->why);
		return PP_DECLINE;
	}
	o->st = st;
	o->in_fd = st->sfd_w;
	o->pipe_fd = st->tfd; /* our reference keeps it open (stage.h) */
	o->capacity = st->cap_s;
	return 0;
}

static void wb_end(struct pp_outlet *o)
{
	pp_stage_put(o->st);
}

static long wb_catch_up(struct pp_outlet *o)
{
	long n;

	if (!pp_stage_pending(o->st))
		return 0;
	n = help_move(o->st);
	return n == -EPIPE ? n : n != 0;
}

static long wb_error(struct pp_outlet *o, bool moved)
{
	struct pp_stage *st = o->st;

	if (!__atomic_load_n(&st->err, __ATOMIC_ACQUIRE))
		return 0;
	if (moved)
		return -EPIPE;
	return pp_stage_take_error(o->p) ?: -EPIPE;
}

static long wb_push(struct pp_outlet *o, const struct iovec *v)
{
	return stage_push(o->st, v);
}

static void wb_settle(struct pp_outlet *o)
{
	pp_stage_wait(o->p);
}

static const struct pp_outlet_ops wb_outlet = {
	.begin = wb_begin,
	.end = wb_end,
	.catch_up = wb_catch_up,
	.error = wb_error,
	.push = wb_push,
	.settle = wb_settle,
};

/* ---- the engine ---- */

static ssize_t wb_write(struct pp_pipe *p, int fd, const struct iovec *iov, int iovcnt,
			size_t total)
{
	return pp_core_write(p, fd, iov, iovcnt, total, &wb_outlet);
}

PP_COMMON static void wb_fork_prepare(void)
{
	/* Staged bytes are delivered before the child exists. */
	pp_stages_flush_all(true);
}

PP_COMMON static void wb_fork_child(void)
{
	/* The service did not come along: every stage goes, and the service starts anew. */
	if (pp_was_used(PP_USED_URING)) {
		pp_stages_after_fork_child();
		pp_uring_after_fork_child();
	}
	if (pp_engine_live)
		pp_engine_live = 0;
}

PP_COMMON static void wb_flush_all(void)
{
	pp_stages_flush_all(false);
}

static const char *wb_state(void)
{
	return pp_uring_started() ? "on" : pp_uring_reason();
}

const struct pp_engine_ops pp_engine_writebehind = {
	.name = "write-behind",
	.write = wb_write,
	.flush = pp_stage_flush,
	.flush_nowait = pp_stage_flush_nowait,
	.take_error = pp_stage_take_error,
	.settle = pp_stage_wait,
	.close_end = pp_stage_close,
	.fds_closing = pp_stage_fds_closing,
	.fork_prepare = wb_fork_prepare,
	.fork_child = wb_fork_child,
	.exec = pp_stages_flush_all,
	.flush_all = wb_flush_all,
	.state = wb_state,
};
