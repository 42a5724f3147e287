// SPDX-License-Identifier: MIT
#include "writepath.h"

#include "config.h"
#include "compiler.h"
#include "engine.h"
#include "exec.h"
#include "explain.h"
#include "faultguard.h"
#include "fdlearn.h"
#include "fdtable.h"
#include "pipe.h"
#include "real.h"
#include "stats.h"
#include "sys.h"
#include "vfork.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>

/*
 * flush_first() where the engine holds bytes: a non-blocking write end
 * never waits for them (engine.h, flush_nowait: -EAGAIN while any are
 * held, as from a plain pipe still full of them). The kernel is asked:
 * only its answer covers a raw fcntl() behind libppipe's back.
 */
static __attribute__((noinline)) int flush_held(struct pp_pipe *p, int fd)
{
	long fl = pp_sys_fcntl(fd, F_GETFL, 0);

	if (fl >= 0 && (fl & O_NONBLOCK))
		return pp_engine->flush_nowait(p);
	return pp_engine->flush(p, true);
}

/*
 * Before a write to @fd takes the real call on a pipe the engine holds
 * bytes for (write-behind): they go first (order), and an error they met
 * is this write's. Returns that -errno, or 0.
 */
static inline int flush_first(struct pp_pipe *p, int fd)
{
	/* A vfork child runs on its parent's memory: never its engine's. */
	if (likely(!p || !pp_engine_holds(p)) || pp_in_vfork_child())
		return 0;
	return flush_held(p, fd);
}

static inline ssize_t to_libc(ssize_t r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/*
 * A large write to an fd that is no tracked pipe: an inherited pipe end
 * to take over now, or any pipe under PPIPE_READERS=trust; with
 * PPIPE_DEBUG, why an inherited pipe stays plain. Out of line: most large
 * writes of most processes go to files and sockets.
 */
static __attribute__((noinline)) struct pp_pipe *untracked(int fd, enum pp_end *end)
{
	struct pp_pipe *p = pp_fd_learn(fd, end, PP_LEARN_WRITE);

	if (!p && unlikely(pp_cfg.debug))
		pp_explain_untracked(fd, pp_exec_why_plain());
	return p;
}

struct pp_pipe *pp_write_enter(int fd, enum pp_end *end)
{
	struct pp_pipe *p = pp_fdt_enter(fd, end);

	if (!p && (pp_exec_takeover_armed || pp_cfg.readers == PP_READERS_TRUST ||
		   unlikely(pp_cfg.debug)))
		p = untracked(fd, end);
	return p;
}

static ssize_t write_iov(int fd, const struct iovec *iov, int iovcnt, size_t total)
{
	enum pp_end end = PP_END_WRITE;
	bool asked = false;
	struct pp_pipe *p;
	ssize_t r;
	int e;

	/* A vfork child runs on its parent's rings: never there. */
	if (pp_in_vfork_child())
		p = NULL;
	else
		p = pp_write_enter(fd, &end);
	if (!p)
		return iovcnt == 1 ? real_write(fd, iov[0].iov_base, iov[0].iov_len) :
				     real_writev(fd, iov, iovcnt);
	/* Once per process, a plain store: the PPIPE_COUNTERS file hears of this process. */
	pp_note_large_write();
	r = PP_DECLINE;
	/* An error bytes the engine held met is this write's (write-behind). */
	if (unlikely(pp_engine_holds(p)) && end == PP_END_WRITE && (e = pp_engine->take_error(p))) {
		r = e;
	} else if (end == PP_END_WRITE && p->accel && pp_fd_selected(fd)) {
		r = pp_engine->write(p, fd, iov, iovcnt, total);
		asked = true;
	} else if (end == PP_END_WRITE) {
		__atomic_store_n(&p->last_fallback,
				 p->accel ? "fd not in PPIPE_FDS" : pp_pipe_reason(p),
				 __ATOMIC_RELAXED);
	}
	if (unlikely(pp_cfg.debug) && end == PP_END_WRITE) {
		/* The engine declined: what it fell back for, once per kind. */
		if (asked && r == PP_DECLINE)
			pp_explain_fallback(p,
					    __atomic_load_n(&p->last_fallback, __ATOMIC_RELAXED));
		pp_explain_path(p, fd, r);
	}
	if (r == PP_DECLINE) {
		e = end == PP_END_WRITE ? flush_first(p, fd) : 0;
		r = e		? to_libc(e) :
		    iovcnt == 1 ? real_write(fd, iov[0].iov_base, iov[0].iov_len) :
				  real_writev(fd, iov, iovcnt);
		if (!e && r >= 0) {
			pp_count(&p->cnt, PP_CNT_writes_passthrough, 1);
			pp_count(&p->cnt, PP_CNT_bytes_passthrough, (uint64_t)r);
			pp_count(&p->cnt, PP_CNT_bytes_passthrough_large, (uint64_t)r);
		}
	} else {
		r = to_libc(r);
	}
	{
		int saved = errno;

		pp_pipe_leave(p);
		errno = saved;
	}
	return r;
}

/*
 * What the kernel refuses before looking at the fd (a range outside user
 * space) or trims (MAX_RW_COUNT) stays with the kernel.
 */
#define PP_MAX_RW_COUNT ((size_t)INT_MAX & ~(size_t)4095)
#define PP_USER_TOP 0x00007ffffffff000ull

static bool plain_range(const void *buf, size_t n)
{
	uintptr_t a = (uintptr_t)buf;

	return n > PP_MAX_RW_COUNT || a + n < a || a + n > PP_USER_TOP;
}

/*
 * A write below PPIPE_MIN_WRITE to a tracked pipe: the real call, counted
 * as passed through, so that a pipe's counters tell its whole story.
 */
static inline ssize_t count_small(struct pp_pipe *p, ssize_t r)
{
	/* A vfork child's writes are not its parent's pipe's story. */
	if (p && r >= 0 && !pp_in_vfork_child()) {
		pp_count_quick(&p->cnt, PP_CNT_writes_passthrough, 1);
		pp_count_quick(&p->cnt, PP_CNT_bytes_passthrough, (uint64_t)r);
	}
	return r;
}

/*
 * A write of nothing returns 0 at once from a pipe, full or without
 * readers (pipe_write() looks at nothing else first): it waits for no
 * staged byte and takes no error of theirs.
 */
PP_COMMON static __attribute__((noinline)) ssize_t write_small(int fd, const void *buf, size_t n)
{
	struct pp_pipe *p = pp_fdt_peek(fd);
	int e = n ? flush_first(p, fd) : 0;

	if (e)
		return to_libc(e);
	return count_small(p, real_write(fd, buf, n));
}

PP_COMMON static __attribute__((noinline)) ssize_t writev_small(int fd, const struct iovec *iov,
								int iovcnt, size_t total)
{
	struct pp_pipe *p = pp_fdt_peek(fd);
	int e = total ? flush_first(p, fd) : 0;

	if (e)
		return to_libc(e);
	return count_small(p, real_writev(fd, iov, iovcnt));
}

PP_COMMON static __attribute__((noinline)) ssize_t write_large(int fd, const void *buf, size_t n)
{
	struct iovec iov = { (void *)buf, n };

	if (plain_range(buf, n) || !pp_write_may_matter(fd))
		return real_write(fd, buf, n);
	return write_iov(fd, &iov, 1, n);
}

PP_COMMON ssize_t pp_write(int fd, const void *buf, size_t n)
{
	if (likely(n < pp_cfg.min_write)) {
		if (likely(!pp_fdt_tracked(fd)))
			return real_write(fd, buf, n);
		return write_small(fd, buf, n);
	}
	return write_large(fd, buf, n);
}

/* What pp_writev() learns of an iovec array, read as the kernel reads it. */
struct iov_sum {
	const struct iovec *iov;
	int cnt;
	size_t total;
	bool plain; /* a length or a range the fast path leaves to the kernel */
};

static void sum_iov(void *arg)
{
	struct iov_sum *s = arg;

	for (int i = 0; i < s->cnt; i++) {
		size_t len = s->iov[i].iov_len;

		/* Overflow or a length the kernel would refuse: let it say so. */
		if (len > SSIZE_MAX - s->total || plain_range(s->iov[i].iov_base, len)) {
			s->plain = true;
			return;
		}
		s->total += len;
	}
}

bool pp_iov_moves_bytes(const struct iovec *iov, size_t cnt)
{
	struct iov_sum s = { .iov = iov, .cnt = (int)cnt };

	if (!cnt || cnt > IOV_MAX)
		return false;
	if (pp_user_bad(iov, cnt * sizeof(*iov)) || pp_user_guarded(sum_iov, &s))
		return false;
	return s.total || s.plain; /* an entry the fast path leaves alone may still move bytes */
}

PP_COMMON ssize_t pp_writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct iov_sum s = { .iov = iov, .cnt = iovcnt };

	if (iovcnt <= 0 || iovcnt > IOV_MAX)
		return real_writev(fd, iov, iovcnt);
	/*
	 * An fd libppipe has nothing to do with: the array is the kernel's
	 * alone to read, and a bad one its EFAULT, not a crash of ours.
	 */
	if (likely(!pp_write_may_matter(fd)))
		return real_writev(fd, iov, iovcnt);
	if (pp_user_bad(iov, (size_t)iovcnt * sizeof(*iov)) || pp_user_guarded(sum_iov, &s) ||
	    s.plain)
		return real_writev(fd, iov, iovcnt);
	if (likely(s.total < pp_cfg.min_write)) {
		if (likely(!pp_fdt_tracked(fd)))
			return real_writev(fd, iov, iovcnt);
		return writev_small(fd, iov, iovcnt, s.total);
	}
	if (s.total > PP_MAX_RW_COUNT)
		return real_writev(fd, iov, iovcnt);
	return write_iov(fd, iov, iovcnt, s.total);
}
