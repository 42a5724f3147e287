/* SPDX-License-Identifier: MIT */
/*
 * What the engines share (engine_vmsplice.c): the copy into the thread's
 * ring, the pushes with vmsplice(), the waits for room, turns and
 * cancellation. An engine that passes some of the pages on by a way of
 * its own (write-behind's staging pipe) gives the core an outlet; the
 * vmsplice engine gives none, and every page goes into the pipe.
 *
 * Layer: engine (may use: engine, pipes, resources, base).
 */
#ifndef PP_ENGINE_CORE_H
#define PP_ENGINE_CORE_H

#include "engine.h"

#include <stdint.h>

struct pp_outlet;

struct pp_outlet_ops {
	/*
	 * For one write to @fd, end of @p: fills @o (o->st NULL: no outlet
	 * for this write, every page goes into the pipe). Returns 0,
	 * PP_DECLINE (o->why says why) or -errno.
	 */
	long (*begin)(struct pp_outlet *o, struct pp_pipe *p, int fd);
	/* The write is over: what begin took is given back. */
	void (*end)(struct pp_outlet *o);
	/*
	 * Before a push straight into the pipe: what the outlet holds must
	 * go first. 0 when nothing is held any more (push straight in),
	 * -errno for the write (the kernel's signal came with it), else
	 * nonzero: this write goes through the outlet too.
	 */
	long (*catch_up)(struct pp_outlet *o);
	/*
	 * The error the outlet met and this write must see before it passes
	 * more on (-errno; taken when @moved is false, as nothing was
	 * written), or 0.
	 */
	long (*error)(struct pp_outlet *o, bool moved);
	/* Passes @v on, never waiting. Returns bytes taken, or -errno (-EAGAIN: full). */
	long (*push)(struct pp_outlet *o, const struct iovec *v);
	/* Before the rest of a write goes out with the real call: what it holds goes first. */
	void (*settle)(struct pp_outlet *o);
};

struct pp_outlet {
	const struct pp_outlet_ops *ops;
	void *st; /* the outlet's own, NULL: none for this write */
	int in_fd; /* where pushed pages wait (the ring's reuse checks read it) */
	int pipe_fd; /* the outlet's own fd of the pipe, valid while st is set */
	uint32_t capacity; /* bytes in_fd holds besides the pipe */
	struct pp_pipe *p;
	const char *why; /* begin's reason to decline */
};

/*
 * The write of an engine (engine.h's contract), through @ops when not
 * NULL.
 */
ssize_t pp_core_write(struct pp_pipe *p, int fd, const struct iovec *iov, int iovcnt, size_t total,
		      const struct pp_outlet_ops *ops);

#endif
