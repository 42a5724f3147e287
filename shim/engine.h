/* SPDX-License-Identifier: MIT */
/*
 * The write engine. The interposers call it for writes at or above
 * PPIPE_MIN_WRITE on tracked pipes; everything it cannot do safely it
 * declines before a byte has moved, and the caller makes the real call.
 *
 * Layer: engine (may use: engine, pipes, resources, base).
 */
#ifndef PP_ENGINE_H
#define PP_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct pp_pipe;

/* Returned when nothing was written and the real call must be made. */
#define PP_DECLINE (-100000L)

/*
 * Writes @total bytes described by @iov/@iovcnt to @fd, end of pipe @p
 * (entered by the caller). Returns bytes written (the kernel's partial
 * count rules apply), -errno (no byte written), or PP_DECLINE.
 * Async-signal-safe: a handler that writes while its thread is inside
 * gets PP_DECLINE for that pipe. Its waits are cancellation points, as
 * write()'s are: if pthread_cancel() acts there, the engine releases what
 * it holds and leaves @p itself (the caller's pp_pipe_leave never runs).
 */
ssize_t pp_engine_write(struct pp_pipe *p, int fd, const struct iovec *iov, int iovcnt,
			size_t total);

/* Whether the engine works here, and why not (for PPIPE_DEBUG and the stats). */
bool pp_engine_ready(void);
/* Whether the start-up probe has decided (false while a thread runs it). */
bool pp_engine_decided(void);
const char *pp_engine_name(void);
const char *pp_engine_reason(void);
/* In a fork child: forget a probe that was still running in another thread. */
void pp_engine_after_fork_child(void);

#endif
