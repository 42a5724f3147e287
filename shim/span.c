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
 */
#include "span.h"

#include "ppipe.h"

#include "compiler.h"
#include "config.h"
#include "engine.h"
#include "fdtable.h"
#include "log.h"
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
 * The ring spans this thread has open, kept where the thread's exit can
 * find them: a thread that ends with one open (it returns, calls
 * pthread_exit(), or is cancelled at a cancellation point while it fills
 * the span, in a read() of its input, say) gives it back on its way out,
 * as ppipe_span_release() would. Otherwise the pipe would stay entered
 * for good (its object, its registry slot and its rings never freed) and
 * the ring claimed. The program's span itself may be gone by then (it
 * was on that thread's stack), so what a close needs is here: the ring,
 * the pipe, where the region starts and how far commits got. A thread
 * has at most SPANS_PER_THREAD ring spans open; beyond that, and where
 * the exit hook cannot be had, a span is a buffer.
 */
#define SPANS_PER_THREAD 8
struct open_span {
	struct pp_ring *ring; /* NULL: a free entry */
	struct pp_pipe *pipe;
	size_t base, end; /* offsets in the ring: the region, and the commits' end */
};
static __thread struct open_span tl_open[SPANS_PER_THREAD]
	__attribute__((tls_model("initial-exec")));
static __thread bool tl_exit_hooked __attribute__((tls_model("initial-exec")));

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static bool exit_key_made;
static int told_exit;

static void ring_span_end(struct open_span *o);

/* The thread ends: the spans it left open close, what they committed in the pipe. */
static void spans_at_exit(void *unused)
{
	int n = 0;

	(void)unused;
	for (int i = 0; i < SPANS_PER_THREAD; i++) {
		if (tl_open[i].ring) {
			ring_span_end(&tl_open[i]);
			n++;
		}
	}
	if (n)
		pp_debug_once(&told_exit,
			      "a thread ended with %d span(s) open: given back (said once)", n);
}

static void make_exit_key(void)
{
	exit_key_made = !pthread_key_create(&exit_key, spans_at_exit);
}

/* A free entry of this thread's open spans, its exit hooked; NULL if there is none. */
static struct open_span *open_entry(void)
{
	if (!tl_exit_hooked) {
		pthread_once(&exit_once, make_exit_key);
		/* Any value but NULL: the destructor runs at the thread's exit. */
		if (!exit_key_made || pthread_setspecific(exit_key, &exit_key))
			return NULL;
		tl_exit_hooked = true;
	}
	for (int i = 0; i < SPANS_PER_THREAD; i++)
		if (!tl_open[i].ring)
			return &tl_open[i];
	return NULL;
}

/* This thread's entry for its open span in @r, or NULL. */
static struct open_span *open_entry_of(const struct pp_ring *r)
{
	for (int i = 0; i < SPANS_PER_THREAD; i++)
		if (tl_open[i].ring == r)
			return &tl_open[i];
	return NULL;
}

/* pthread_cancel() acted in the engine's commit, which closed the span itself. */
static void open_entry_forget(void *o)
{
	if (o)
		memset(o, 0, sizeof(struct open_span));
}

void pp_span_after_fork_child(void)
{
	for (int i = 0; i < SPANS_PER_THREAD; i++)
		if (tl_open[i].ring)
			tl_open[i] = (struct open_span){ 0 };
}

/*
 * A region of @p's ring for this thread, of up to @want bytes: fills
 * @span and returns true, the pipe staying entered; false when the write
 * path would not take the ring for this pipe now (the caller leaves @p
 * and hands out a buffer instead).
 */
static bool ring_span(struct pp_pipe *p, int fd, size_t want, struct ppipe_span *span)
{
	struct pp_ring_checks checks = { 0 };
	struct open_span *o;
	uint32_t capacity, epoch;
	struct pp_ring *r;
	size_t len;
	long off;

	/* Rings, pool, probe: a fork child must forget them (init.c), as after a write. */
	pp_mark_used(PP_USED_ENGINE);
	if (!pp_engine_ready() || pp_pipe_unsafe(p) || !(o = open_entry()))
		return false;
	if (!pp_pipe_ino(p) && !pp_fdt_learn_ino(p, fd))
		return false;
	capacity = pp_pipe_capacity(p, fd);
	r = pp_ring_get(&p->rings, &p->gen, capacity);
	/* Busy: a span of this thread is open on the pipe already, or a write runs. */
	if (!r || __atomic_exchange_n(&r->busy, 1, __ATOMIC_ACQUIRE))
		return false;
	len = want < r->max_chunk ? want : r->max_chunk;
	epoch = pp_fdt_epoch(fd);
	off = pp_core_writer(r, fd, epoch, pp_pipe_ino(p), &checks) ?
		      pp_ring_reserve(r, len, fd, -1, pp_pipe_ino(p), capacity, &checks) :
		      -ESTALE;
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
	span->priv.gen = epoch;
	span->priv.fd = fd;
	span->priv.kind = PP_SPAN_RING;
	*o = (struct open_span){ .ring = r, .pipe = p, .base = (size_t)off, .end = (size_t)off };
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

/* A span ends: the ring's head moves past what went into the pipe, the ring and the pipe are let go. */
static void ring_span_end(struct open_span *o)
{
	struct pp_pipe *p = o->pipe;
	struct pp_ring *r = o->ring;
	int saved = errno;

	pp_ring_commit(r, o->base, o->end - o->base);
	pp_ring_release(r, pp_now_ns());
	*o = (struct open_span){ 0 };
	pp_pipe_leave(p);
	errno = saved;
}

/* The program's span ends, and its entry with it. */
static void ring_span_close(struct ppipe_span *span)
{
	struct pp_ring *r = span->priv.ring;
	struct open_span *o = open_entry_of(r), now = {
		.ring = r,
		.pipe = span->priv.pipe,
		.base = (size_t)((char *)span->priv.base - r->data),
		.end = (size_t)((char *)span->data - r->data),
	};

	if (o)
		*o = (struct open_span){ 0 };
	memset(span, 0, sizeof(*span));
	ring_span_end(&now);
}

/* pthread_cancel() acted in the real call: the span closes, as in the engine's waits. */
static void ring_span_cancelled(void *span)
{
	ring_span_close(span);
}

/*
 * The engine pushes @n bytes of @span in place (or declines: PP_DECLINE).
 * A cancellation in there closes the span in the engine: its entry @o
 * goes with it.
 */
static __attribute__((noinline)) ssize_t commit_in_place(struct ppipe_span *span, size_t n,
							 struct open_span *o)
{
	struct pp_ring *r = span->priv.ring;
	ssize_t w;

	pthread_cleanup_push(open_entry_forget, o);
	w = pp_core_commit(span->priv.pipe, span->priv.fd, r,
			   (size_t)((char *)span->data - r->data), n, &span->priv.kind);
	pthread_cleanup_pop(0);
	return w;
}

/* The real call writes @n bytes of @span: a cancellation point, as write() is. */
static __attribute__((noinline)) ssize_t commit_by_write(struct ppipe_span *span, size_t n)
{
	ssize_t w;

	/* The span must not outlive the thread. */
	pthread_cleanup_push(ring_span_cancelled, span);
	w = real_write(span->priv.fd, span->data, n);
	pthread_cleanup_pop(0);
	return w;
}

PP_EXPORT ssize_t ppipe_span_commit(struct ppipe_span *span, size_t n)
{
	struct open_span *o;
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
		w = commit_in_place(span, n, open_entry_of(r));
	if (w == PP_DECLINE) {
		w = commit_by_write(span, n);
		/*
		 * Counted as write() counts it: below PPIPE_MIN_WRITE, no attempt
		 * and not large; and on the pipe the fd names now, if libppipe
		 * tracks what it names (a close or dup2 under the span moved its
		 * epoch: the bytes went there, not into the span's pipe).
		 */
		if ((uint32_t)span->priv.gen != pp_fdt_epoch(fd))
			p = pp_fdt_peek(fd);
		if (w >= 0 && p) {
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
	o = open_entry_of(r);
	if (o)
		o->end = (size_t)((char *)span->data - r->data);
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
