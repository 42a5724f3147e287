/* SPDX-License-Identifier: MIT */
/*
 * The write engine: one table of operations, chosen once at start-up
 * (init.c, from PPIPE_MODE). The interposers call its write for writes at
 * or above PPIPE_MIN_WRITE on tracked pipes; everything it cannot do
 * safely it declines before a byte has moved, and the caller makes the
 * real call. An engine that keeps bytes of its own on their way (write-
 * behind) also gets the hooks: the fd operations and the process's life
 * tell it what a plain pipe would have settled by then.
 *
 * Engines: engine_vmsplice.c (the default), engine_writebehind.c
 * (PPIPE_MODE=uring). A new engine is one file that defines its table,
 * and one line in init.c that chooses it.
 *
 * Every function returns -errno on failure, as the kernel does.
 *
 * Layer: engine (may use: engine, pipes, resources, base).
 */
#ifndef PP_ENGINE_H
#define PP_ENGINE_H

#include "pipe.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/*
 * Returned by write when nothing was written and the real call must be
 * made. Below every -errno (-1..-4095), so it never reads as an error.
 */
#define PP_DECLINE (-100000L)
_Static_assert(PP_DECLINE < -4095, "PP_DECLINE must not be an errno");

struct pp_engine_ops {
	const char *name;
	/*
	 * Writes @total bytes described by @iov/@iovcnt to @fd, end of pipe
	 * @p (entered by the caller). Returns bytes written (the kernel's
	 * partial count rules apply), -errno (no byte written), or
	 * PP_DECLINE. Async-signal-safe: a handler that writes while its
	 * thread is inside gets PP_DECLINE for that pipe. Its waits are
	 * cancellation points, as write()'s are: if pthread_cancel() acts
	 * there, the engine releases what it holds and leaves @p itself (the
	 * caller's pp_pipe_leave never runs).
	 */
	ssize_t (*write)(struct pp_pipe *p, int fd, const struct iovec *iov, int iovcnt,
			 size_t total);
	/*
	 * The hooks below are called only for a pipe the engine holds
	 * something for (pp_engine_holds) or, for the process-wide ones,
	 * once pp_engine_hooks() says so. All return at once when there is
	 * nothing to do.
	 */
	/*
	 * Anything else is about to reach @p from this process (a small or
	 * declined write, splice/tee/vmsplice into it): what the engine holds
	 * goes first. Returns the error a plain write would have met there
	 * (-errno, reported once, with its SIGPIPE), or 0. With @signals the
	 * caller is a call a plain pipe full of the held bytes would block
	 * in, which a signal handler without SA_RESTART ends: -EINTR when a
	 * handler ran during the wait and the application has one without
	 * SA_RESTART (which signal it was cannot be told); without, the
	 * wait goes on through signals (stdio, ppipe_flush()).
	 */
	int (*flush)(struct pp_pipe *p, bool signals);
	/*
	 * A non-blocking write, splice, tee or vmsplice into @p: flush without a
	 * wait. Moves on what the pipe takes now; returns 0 when the engine
	 * holds nothing for @p any more, else what a plain pipe, still full
	 * of the held bytes, answers: -EAGAIN, or the error they met (-errno,
	 * reported once, with its SIGPIPE).
	 */
	int (*flush_nowait)(struct pp_pipe *p);
	/* Before a write: the error an earlier write left for it (-errno, taken), or 0. */
	int (*take_error)(struct pp_pipe *p);
	/*
	 * F_SETFL or F_SETPIPE_SZ of a write end of @p: like flush, but
	 * bounded (those calls never block on a plain pipe) and the error
	 * left for the next write or close.
	 */
	void (*settle)(struct pp_pipe *p);
	/*
	 * A write end of @p is being closed, or dup2'd over; @last: it was
	 * the process's last one. Returns the error this close reports
	 * (-errno), or 0.
	 */
	int (*close_end)(struct pp_pipe *p, bool last);
	/*
	 * The program is about to close fds [@lo, @hi] (close, dup2 over,
	 * close_range, closefrom): an fd of the engine's own among them is
	 * given up first. Returns whether any was.
	 */
	bool (*fds_closing)(unsigned int lo, unsigned int hi);
	/* pthread_atfork: before fork, and in the child after (the parent goes on as it was). */
	void (*fork_prepare)(void);
	void (*fork_child)(void);
	/* Before exec or posix_spawn; @bounded: the image goes on (spawn, a vfork child's exec). */
	void (*exec)(bool bounded);
	/*
	 * Everything the engine holds delivered, however long that takes:
	 * exit and _exit (the image ends), and stdio's flush of every stream
	 * (fflush(NULL), whose bytes must follow what was written before).
	 */
	void (*flush_all)(void);
	/* What the statistics say of it ("on", or why not), NULL when it has nothing to say. */
	const char *(*state)(void);
};

/* The engine in use (init.c): set once, before the first write. */
extern const struct pp_engine_ops *pp_engine;
extern const struct pp_engine_ops pp_engine_vmsplice;
extern const struct pp_engine_ops pp_engine_writebehind;

/*
 * Nonzero while the engine holds something the fd operations, fork, exec
 * and exit must see (write-behind: its service runs). One load of a hot
 * word on their paths; the engine sets it.
 */
extern int pp_engine_live;
static inline bool pp_engine_hooks(void)
{
	return __atomic_load_n(&pp_engine_live, __ATOMIC_ACQUIRE) != 0;
}

/* Whether the engine holds something for @p (a field of the pipe already in cache). */
static inline bool pp_engine_holds(const struct pp_pipe *p)
{
	return __atomic_load_n(&p->engine_word, __ATOMIC_RELAXED) != 0;
}

/*
 * Before the program's fd @fd (fd table epoch @epoch) pushes into ring @r
 * of the pipe of inode @ino: true, or false when that would break the
 * reuse rule's count (the
 * fd, or the ring's last writing fd, no longer names the pipe: a switch
 * behind libppipe's back; the caller marks the pipe unsafe). Counts its
 * checks in @c.
 */
struct pp_ring_checks;
bool pp_core_writer(struct pp_ring *r, int fd, uint32_t epoch, uint64_t ino,
		    struct pp_ring_checks *c);

/*
 * A span (ppipe.h) of @n bytes, in place at @off of ring @r of pipe @p
 * (entered, the ring claimed busy by the span), committed to @fd with
 * the semantics of write(): the vmsplice engine's push of one region
 * (engine_vmsplice.c), without its copy. The ring's head stays where it
 * is: the span moves it when it closes. Returns bytes written, -errno,
 * or PP_DECLINE (nothing moved: the caller writes the span's bytes with
 * the real call). A cancellation in its waits closes the span: its
 * region is released, @p left and *@span_kind zeroed.
 */
ssize_t pp_core_commit(struct pp_pipe *p, int fd, struct pp_ring *r, size_t off, size_t n,
		       unsigned int *span_kind);

/* Whether the vmsplice machinery works here, and why not (probe.c). */
bool pp_engine_ready(void);
/* Whether the start-up probe has decided (false while a thread runs it). */
bool pp_engine_decided(void);
const char *pp_engine_name(void);
const char *pp_engine_reason(void);
/* In a fork child: forget a probe that was still running in another thread. */
void pp_engine_after_fork_child(void);

#endif
