// SPDX-License-Identifier: MIT
/*
 * Spans (include/ppipe.h; docs/design.md, "Writing in place"): a region
 * of the calling thread's ring, handed to the program to fill, then
 * pushed into the pipe by the engine without a copy.
 *
 * An open span holds what a write in flight holds: the pipe entered (it
 * is not freed under the span, whatever the program closes) and the ring
 * claimed busy (its owner's other writes to the pipe, its signal
 * handlers' and trimming leave it alone). The region was reserved by the
 * reuse rule like any other, so no page of it is still in the pipe; the
 * ring's head moves past it only when the span closes. A span that is
 * not the ring's kind is the header's buffer, committed with write().
 *
 * Layer: interpose (may use: interpose, operations, engine, pipes, resources, base).
 */
#include "ppipe.h"

#include "compiler.h"
#include "config.h"
#include "engine.h"
#include "fdtable.h"
#include "pipe.h"
#include "real.h"
#include "ring.h"
#include "stats.h"
#include "sys.h"
#include "vfork.h"
#include "writepath.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

/* A span in ring memory (priv.kind); the header's buffers are PPIPE_SPAN_BUFFER. */
#define PP_SPAN_RING 0x50504252u

/*
 * A region of @p's ring for this thread, of up to @want bytes: fills
 * @span and returns true, the pipe staying entered; false when the write
 * path would not take the ring for this pipe now (the caller leaves @p
 * and hands out a buffer instead).
 */
static bool ring_span(struct pp_pipe *p, int fd, size_t want, struct ppipe_span *span)
{
	struct pp_ring_checks checks = { 0 };
	uint32_t capacity;
	struct pp_ring *r;
	size_t len;
	long off;

	/* Rings, pool, probe: a fork child must forget them (init.c), as after a write. */
	pp_mark_used(PP_USED_ENGINE);
	if (!pp_engine_ready() || pp_pipe_unsafe(p))
		return false;
	if (!pp_pipe_ino(p) && !pp_fdt_learn_ino(p, fd))
		return false;
	capacity = pp_pipe_capacity(p, fd);
	r = pp_ring_get(&p->rings, &p->gen, capacity);
	/* Busy: a span of this thread is open on the pipe already, or a write runs. */
	if (!r || __atomic_exchange_n(&r->busy, 1, __ATOMIC_ACQUIRE))
		return false;
	len = want < r->max_chunk ? want : r->max_chunk;
	off = pp_ring_reserve(r, len, fd, -1, pp_pipe_ino(p), capacity, &checks);
	pp_count(&p->cnt, PP_CNT_fionread_checks, checks.fionread);
	pp_count(&p->cnt, PP_CNT_identity_checks, checks.identity);
	if (off == -ESTALE)
		pp_pipe_mark_unsafe(p, "fd switched to another file behind libppipe");
	/*
	 * After the reuse verdict, as the write path looks: a reader that
	 * turned unknown since the look above (splice() marks the pipe, then
	 * moves its pages on) may hold pages the verdict found consumed.
	 */
	if (off < 0 || pp_pipe_unsafe(p)) {
		if (off == -EBUSY)
			pp_count(&p->cnt, PP_CNT_ring_waits, 1);
		__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
		return false;
	}
	memset(&span->priv, 0, sizeof(span->priv));
	span->data = span->priv.base = r->data + off;
	span->len = span->priv.size = len;
	span->priv.pipe = p;
	span->priv.ring = r;
	/* The ring's thread: a fork child's thread and other threads have other serials. */
	span->priv.owner = (uintptr_t)r->owner_serial;
	span->priv.gen = pp_fdt_epoch(fd);
	span->priv.fd = fd;
	span->priv.kind = PP_SPAN_RING;
	return true;
}

PP_EXPORT int ppipe_span_get(int fd, size_t want, struct ppipe_span *span)
{
	enum pp_end end;
	struct pp_pipe *p;

	if (!span || !want || want > (size_t)SSIZE_MAX) {
		errno = EINVAL;
		return -1;
	}
	/*
	 * The ring only where a write of @want bytes would take it: a large
	 * write to a selected write end of an accelerated pipe, with the
	 * vmsplice engine (write-behind orders its own bytes: a span there
	 * is a buffer its write path takes).
	 */
	if (want >= pp_cfg.min_write && pp_engine == &pp_engine_vmsplice && pp_fd_selected(fd) &&
	    !pp_in_vfork_child() && (p = pp_write_enter(fd, &end))) {
		if (end == PP_END_WRITE && p->accel && ring_span(p, fd, want, span)) {
			pp_note_large_write();
			return 0;
		}
		pp_pipe_leave(p);
	}
	return ppipe_buffer_span_get(fd, want, span);
}

/* Whether @span is a ring span of this thread (of this process: see pp_ring_self_serial). */
static bool ring_span_mine(const struct ppipe_span *span)
{
	return span->priv.kind == PP_SPAN_RING && span->priv.owner &&
	       span->priv.owner == (uintptr_t)pp_ring_self_serial();
}

/* The span ends: the ring's head moves past what went into the pipe, the ring and the pipe are let go. */
static void ring_span_close(struct ppipe_span *span)
{
	struct pp_pipe *p = span->priv.pipe;
	struct pp_ring *r = span->priv.ring;
	char *base = span->priv.base;
	int saved = errno;

	pp_ring_commit(r, (size_t)(base - r->data), (size_t)((char *)span->data - base));
	pp_ring_release(r, pp_now_ns());
	memset(span, 0, sizeof(*span));
	pp_pipe_leave(p);
	errno = saved;
}

/* pthread_cancel() acted in the real call: the span closes, as in the engine's waits. */
static void ring_span_cancelled(void *span)
{
	ring_span_close(span);
}

PP_EXPORT ssize_t ppipe_span_commit(struct ppipe_span *span, size_t n)
{
	struct pp_pipe *p;
	struct pp_ring *r;
	ssize_t w;
	int fd;

	if (span && span->priv.kind == PPIPE_SPAN_BUFFER)
		return ppipe_buffer_span_commit(span, n);
	if (!span || !ring_span_mine(span) || n > span->len) {
		errno = EINVAL;
		return -1;
	}
	p = span->priv.pipe;
	r = span->priv.ring;
	fd = span->priv.fd;
	/*
	 * The fd still names what it named at get, as far as libppipe saw:
	 * the engine pushes in place. Else (or when it declines), the bytes
	 * are written from the span by the real call, which is then the
	 * whole story of whatever the fd names now.
	 */
	w = PP_DECLINE;
	if (n >= pp_cfg.min_write && (uint32_t)span->priv.gen == pp_fdt_epoch(fd))
		w = pp_core_commit(p, fd, r, (size_t)((char *)span->data - r->data), n,
				   &span->priv.kind);
	if (w == PP_DECLINE) {
		/* A cancellation point, as write() is: the span must not outlive the thread. */
		pthread_cleanup_push(ring_span_cancelled, span);
		w = real_write(fd, span->data, n);
		pthread_cleanup_pop(0);
		/* Counted as write() counts it: below PPIPE_MIN_WRITE, no attempt and not large. */
		if (w >= 0) {
			pp_count(&p->cnt, PP_CNT_writes_passthrough, 1);
			pp_count(&p->cnt, PP_CNT_bytes_passthrough, (uint64_t)w);
			if (n >= pp_cfg.min_write)
				pp_count(&p->cnt, PP_CNT_bytes_passthrough_large, (uint64_t)w);
		}
	} else if (w < 0) {
		errno = (int)-w;
		w = -1;
	}
	/* A cancellation closed the span already; pthread_cancel does not return here. */
	if (w < 0)
		return w;
	span->data = (char *)span->data + w;
	span->len -= (size_t)w;
	if ((size_t)w == n)
		ring_span_close(span);
	return w;
}

PP_EXPORT void ppipe_span_release(struct ppipe_span *span)
{
	if (span && span->priv.kind == PPIPE_SPAN_BUFFER)
		ppipe_buffer_span_release(span);
	else if (span && ring_span_mine(span))
		ring_span_close(span);
}
