/* SPDX-License-Identifier: MIT */
/*
 * Write-behind staging (PPIPE_MODE=uring; docs/design.md, "Write-behind"): the
 * stages, and
 * what both the engine (engine_writebehind.c) and the io_uring service
 * (uring.h) do with them. A pipe written in this mode gets one staging
 * point per process: a private pipe S that every thread's large writes
 * vmsplice their ring pages into, and a dup of the target's write end,
 * held only while bytes may be staged. write() returns once its bytes
 * are in S; the service splices them from S into the target, in order,
 * as many writes per splice as are staged. Because every thread's large
 * writes for the target go through the same S, a write that happens
 * before another reaches the reader first.
 *
 * The contract the rest of the shim keeps with it, through the engine's
 * hooks (engine.h):
 *   - any other way into the target (a small write, a declined large one,
 *     splice/tee/vmsplice into it) flushes first;
 *   - close, dup2/dup3 over, F_SETFL, F_SETPIPE_SZ of a write end, fork,
 *     exec/posix_spawn, exit/_exit flush;
 *   - an error the service met (EPIPE: the readers went away) is handed
 *     to the next write or close of the target, once, as the kernel would
 *     have given it to the write (with SIGPIPE).
 * Staged bytes are at most S's capacity per pipe; SIGKILL loses them.
 * Errors are -errno, as everywhere in the shim.
 *
 * Stages live in a fixed table and are never freed, only recycled under a
 * new generation, so a writer holding a stale handle finds out safely.
 *
 * Layer: resources (may use: resources, base).
 */
#ifndef PP_STAGE_H
#define PP_STAGE_H

#include "stats.h"
#include "sys.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stdbool.h>
#include <stdint.h>

struct pp_pipe;

#define PP_STAGE_MAX 64

/* Waits on a flush give up after this long without progress (F_SETFL, F_SETPIPE_SZ, fork). */
#define PP_STAGE_STALL_NS 1000000000ull

/* Counts @n in the write-behind statistic @field (stats.h). */
#define PP_WB_ADD(field, n) __atomic_add_fetch(&pp_wb.field, (n), __ATOMIC_RELAXED)

enum pp_stage_state { PP_STAGE_FREE, PP_STAGE_OPENING, PP_STAGE_OPEN, PP_STAGE_RETIRED };

struct pp_stage {
	int state; /* enum pp_stage_state (atomic) */
	uint32_t gen; /* bumped each time the slot is recycled */
	int refs; /* writers and flushers inside, plus 1 while OPEN (atomic) */
	int sfd_r, sfd_w; /* the staging pipe */
	int tfd; /* our dup of the target's write end, while it may stage (atomic) */
	uint64_t ino; /* the target pipe */
	uint32_t cap_s, cap_t; /* capacities, bytes */
	/* Written by writers (in), by the service (out, moved): atomics. */
	uint64_t in; /* bytes vmspliced into S */
	uint64_t out; /* bytes that left S: spliced on, or dropped after an error */
	uint32_t moved; /* futex word: bumped whenever out moves */
	int err; /* -errno the service met, not yet reported (0 none) */
	int inflight; /* a splice or a poll for room is submitted (the service's own) */
	int mover; /* the stage's lock: held to push into S and count, or to move on (atomic) */
	int flushers; /* threads waiting for moved (atomic) */
	uint64_t used_ns; /* CLOCK_MONOTONIC when a writer last left it (atomic) */
	/*
	 * The generation word of the pipe's object (type-stable, never
	 * unmapped) and its value when the stage opened: once it moves, the
	 * object was freed, and nobody in this process writes through the
	 * stage again (pp_stage_retire_orphan).
	 */
	const uint32_t *owner_gen;
	uint32_t owner_was;
};

/*
 * How long a drained stage keeps its dup of the pipe after the last write
 * left it. Writes that follow within it reuse the dup (a new one costs a
 * dup, an fstat and two signal-mask changes per write); after it, the
 * service closes the dup, so an end the program replaced behind
 * libppipe's back (a raw dup3) lets the reader see EOF this much later at
 * most.
 */
#define PP_STAGE_LINGER_NS (20 * 1000000ull)

extern struct pp_stage pp_stages[PP_STAGE_MAX];

/* For the service: the staged bytes not yet submitted. */
static inline uint64_t pp_stage_pending(const struct pp_stage *st)
{
	return __atomic_load_n(&st->in, __ATOMIC_ACQUIRE) -
	       __atomic_load_n(&st->out, __ATOMIC_ACQUIRE);
}

/*
 * Sets the stage's fds. Atomic stores: a close() of any thread may read
 * them without a reference on the stage, to learn whether it closes one
 * of ours, while the slot opens or closes.
 */
static inline void pp_stage_set_fds(struct pp_stage *st, int sfd_r, int sfd_w, int tfd)
{
	__atomic_store_n(&st->sfd_r, sfd_r, __ATOMIC_RELAXED);
	__atomic_store_n(&st->sfd_w, sfd_w, __ATOMIC_RELAXED);
	__atomic_store_n(&st->tfd, tfd, __ATOMIC_RELEASE);
}

/* Closes the fds of @st that are open. */
static inline void pp_stage_close_fds(struct pp_stage *st)
{
	if (st->sfd_r >= 0)
		pp_sys_close(st->sfd_r);
	if (st->sfd_w >= 0)
		pp_sys_close(st->sfd_w);
	if (st->tfd >= 0)
		pp_sys_close(st->tfd);
	pp_stage_set_fds(st, -1, -1, -1);
}

/*
 * Takes the stage's lock, held only across non-blocking system calls: a
 * push into S and its count (engine), or a move on and its count (the
 * service, a writer). So S always holds exactly in - out bytes. False
 * when someone else has it.
 */
static inline bool pp_stage_mover_try(struct pp_stage *st)
{
	return !__atomic_exchange_n(&st->mover, 1, __ATOMIC_SEQ_CST);
}

static inline void pp_stage_mover_release(struct pp_stage *st)
{
	__atomic_store_n(&st->mover, 0, __ATOMIC_SEQ_CST);
}

/* out moved: whoever waits for it is woken (a system call only if someone does). */
static inline void pp_stage_wake(struct pp_stage *st)
{
	__atomic_add_fetch(&st->moved, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&st->flushers, __ATOMIC_SEQ_CST))
		PP_SYSCALL(SYS_futex, &st->moved, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* @n bytes left S for the pipe: counted, and waiters woken. */
static inline void pp_stage_moved(struct pp_stage *st, uint64_t n)
{
	PP_WB_ADD(splices, 1);
	PP_WB_ADD(moved_bytes, n);
	__atomic_add_fetch(&st->out, n, __ATOMIC_SEQ_CST);
	pp_stage_wake(st);
}

/*
 * Moves what @st holds on into its pipe with one splice() that never
 * waits; the caller holds the mover right. Returns the bytes moved, 0 when
 * nothing is staged, or -errno (-EAGAIN: the pipe is full). A writer that
 * meets -EPIPE here got the kernel's SIGPIPE, as its own write would have.
 */
static inline long pp_stage_move_once(struct pp_stage *st)
{
	uint64_t pend = pp_stage_pending(st);
	long n;

	if (!pend)
		return 0;
	n = PP_SYSCALL(SYS_splice, st->sfd_r, NULL, st->tfd, NULL,
		       pend > st->cap_s ? st->cap_s : pend, SPLICE_F_NONBLOCK);
	if (n > 0 && pp_fault(PP_FAULT_SPLICE))
		return -EPIPE; /* tests: as if the readers were gone (nothing counted) */
	if (n > 0)
		pp_stage_moved(st, (uint64_t)n);
	return n ? n : -EIO;
}

/*
 * The stage holds its dup of the target only while it may stage: once
 * nothing is staged or in flight and nobody is inside (only the open
 * reference is left), the dup is closed, so that the readers' EOF never
 * waits for it (the program may put something else over its write end
 * behind libppipe's back). A writer takes a new one (pp_stage_get). The
 * caller has signals blocked; does nothing when the stage's lock is taken
 * (its holder looks again when it is done).
 */
static inline void pp_stage_drop_target(struct pp_stage *st)
{
	int tfd;

	if (__atomic_load_n(&st->tfd, __ATOMIC_ACQUIRE) < 0 || !pp_stage_mover_try(st))
		return;
	tfd = __atomic_load_n(&st->tfd, __ATOMIC_ACQUIRE);
	if (tfd >= 0 && __atomic_load_n(&st->state, __ATOMIC_ACQUIRE) == PP_STAGE_OPEN &&
	    __atomic_load_n(&st->refs, __ATOMIC_SEQ_CST) == 1 && !pp_stage_pending(st) &&
	    !__atomic_load_n(&st->inflight, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&st->tfd, -1, __ATOMIC_RELEASE);
		pp_sys_close(tfd);
	}
	pp_stage_mover_release(st);
}

/*
 * Retires @st if it is open while its pipe's object is gone (true): the
 * last write end went without the engine seeing it close (a close_range
 * system call, an fd number replaced behind libppipe's back, then the
 * object freed when the number came back). What it holds is delivered,
 * then it is closed like any retired stage; else its slot and staging
 * pipe stayed for the life of the process.
 */
static inline bool pp_stage_retire_orphan(struct pp_stage *st)
{
	int open = PP_STAGE_OPEN;

	if (__atomic_load_n(&st->state, __ATOMIC_ACQUIRE) != PP_STAGE_OPEN ||
	    __atomic_load_n(st->owner_gen, __ATOMIC_ACQUIRE) == st->owner_was ||
	    !__atomic_compare_exchange_n(&st->state, &open, PP_STAGE_RETIRED, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return false;
	__atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL); /* the open reference */
	return true;
}

/*
 * Closes a retired stage nobody holds any more and frees its slot, if it
 * is one (true). Called by the service once S is drained, and by the
 * program's own sweeps of fds.
 */
static inline bool pp_stage_try_reap(struct pp_stage *st)
{
	int zero = 0;

	if (__atomic_load_n(&st->state, __ATOMIC_ACQUIRE) != PP_STAGE_RETIRED ||
	    !__atomic_compare_exchange_n(&st->refs, &zero, -1, false, __ATOMIC_SEQ_CST,
					 __ATOMIC_RELAXED))
		return false;
	/*
	 * Nobody can stage any more; a writer that left just before the claim
	 * may have staged bytes after the caller last looked: they go first.
	 */
	if (pp_stage_pending(st) || __atomic_load_n(&st->inflight, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&st->refs, 0, __ATOMIC_SEQ_CST);
		return false;
	}
	pp_stage_close_fds(st);
	__atomic_add_fetch(&st->gen, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&st->refs, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&st->state, PP_STAGE_FREE, __ATOMIC_RELEASE);
	return true;
}

#endif
