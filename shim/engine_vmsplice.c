// SPDX-License-Identifier: MIT
/*
 * The vmsplice engine (DESIGN.md 1): copy the caller's bytes into the
 * thread's ring, outside any kernel lock, and vmsplice() the ring pages
 * into the pipe, so the kernel allocates nothing under pipe->mutex.
 *
 * Every decision that could change what a reader sees is taken before
 * the first byte moves; once bytes have moved, errors follow the kernel's
 * partial-write rules (the count, never the error).
 */
#include "engine.h"

#include "config.h"
#include "explain.h"
#include "faultguard.h"
#include "pipe.h"
#include "psi.h"
#include "real.h"
#include "ring.h"
#include "stats.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

long pp_sys_pipe_ino(int fd, uint64_t *ino)
{
	struct stat st;
	long r = PP_SYSCALL(SYS_fstat, fd, &st);

	if (r)
		return r;
	if (!S_ISFIFO(st.st_mode))
		return -EBADFD;
	*ino = st.st_ino;
	return 0;
}

/*
 * The kernel's write() reports EFAULT (or a partial count) for a bad
 * source buffer; a memcpy would crash instead. So every source range is
 * checked first; on any doubt the real call does the write, and produces
 * the kernel's own answer.
 */
static bool source_readable(const struct iovec *iov, int iovcnt)
{
	size_t page = pp_page_size();

	for (int i = 0; i < iovcnt; i++) {
		uintptr_t lo, hi;

		if (!iov[i].iov_len)
			continue;
		lo = (uintptr_t)iov[i].iov_base & ~(page - 1);
		hi = (uintptr_t)iov[i].iov_base + iov[i].iov_len;
		if (hi < lo || pp_sys_madvise((void *)lo, hi - lo, MADV_POPULATE_READ))
			return false;
	}
	return true;
}

/*
 * Nothing was written: the caller makes the real call. @kind says why
 * (PPIPE_DEBUG, the pipe's last fallback); see decline() for a reason
 * that also changes what the statistics say of the pipe.
 */
static ssize_t fall_back(struct pp_pipe *p, const char *kind)
{
	pp_count(&p->cnt, PP_CNT_fallbacks, 1);
	pp_explain_fallback(p, kind);
	return PP_DECLINE;
}

/*
 * The rest of the iovec walk, written with the real call: the cut
 * segment first, then the caller's remaining iovecs as they are (so no
 * iovec limit of ours applies). A short first part ends it, as a short
 * write() would.
 */
static ssize_t write_rest(int fd, const struct iovec *iov, int iovcnt, int idx, size_t off)
{
	ssize_t first = 0, rest;

	if (idx < iovcnt && off) {
		size_t len = iov[idx].iov_len - off;

		first = real_write(fd, (const char *)iov[idx].iov_base + off, len);
		if (first < 0 || (size_t)first < len)
			return first;
		idx++;
	}
	if (idx >= iovcnt)
		return first;
	rest = iovcnt - idx == 1 ? real_write(fd, iov[idx].iov_base, iov[idx].iov_len) :
				   real_writev(fd, iov + idx, iovcnt - idx);
	if (rest < 0)
		return first ? first : rest;
	return first + rest;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The pipe is full. vmsplice() ignores the file's O_NONBLOCK and waits
 * only once, so the write() semantics are rebuilt here:
 *   - a non-blocking file: -EAGAIN (the caller returns what moved);
 *   - nothing moved yet: 1, wait in a blocking vmsplice(), where the
 *     kernel applies SA_RESTART exactly as write() would;
 *   - bytes moved: wait in poll(), which a signal always interrupts, so
 *     the call returns the partial count as write() does instead of
 *     being restarted into a wait nobody may end.
 * Returns 0 when there is room, 1 (see above), or -errno.
 */
static long wait_writable(struct pp_pipe *p, int fd, bool moved)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	long fl = pp_sys_fcntl(fd, F_GETFL, 0);
	long r;

	if (fl >= 0 && (fl & O_NONBLOCK)) {
		pp_pipe_set_nonblock(p, true);
		return -EAGAIN;
	}
	if (!moved)
		return 1;
	r = PP_SYSCALL(SYS_poll, &pfd, 1, -1);
	if (r < 0)
		return r == -EINTR ? -EINTR : r;
	/* POLLERR: no readers; the next vmsplice reports EPIPE and SIGPIPE. */
	return 0;
}

/* Every half idle period, one writer looks for idle rings to trim. */
static void maybe_trim(uint64_t now)
{
	static uint64_t last;
	uint64_t prev = __atomic_load_n(&last, __ATOMIC_RELAXED);

	if (now - prev < pp_cfg.idle_ms * 500000ull ||
	    !__atomic_compare_exchange_n(&last, &prev, now, false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return;
	if (prev)
		pp_rings_trim_idle(now, pp_psi_poll(now));
}

static ssize_t decline(struct pp_pipe *p, const char *why)
{
	if (why)
		p->reason = why;
	return fall_back(p, why);
}

ssize_t pp_engine_write(struct pp_pipe *p, int fd, const struct iovec *iov, int iovcnt,
			size_t total)
{
	uint64_t t0 = pp_cfg.stats[0] ? now_ns() : 0;
	struct pp_ring_checks checks = { 0 };
	unsigned int vflags = SPLICE_F_NONBLOCK;
	uint64_t now;
	const char *stopped = "ring still referenced"; /* if nothing moved */
	uint32_t capacity;
	struct pp_ring *r;
	size_t done = 0, off = 0;
	int idx = 0;
	ssize_t ret;

	if (!pp_engine_ready())
		return decline(p, pp_engine_reason());
	if (pp_pipe_unsafe(p))
		return fall_back(p, "readers no longer known");
	/*
	 * Non-blocking writes keep the kernel's exact partial counts, which
	 * depend on merging into the last buffer: vmspliced buffers cannot
	 * merge, so those take the real call. Pipes we did not create may
	 * share their open file with anyone: ask the kernel each time.
	 */
	if (!p->created_here) {
		long fl = pp_sys_fcntl(fd, F_GETFL, 0);

		if (fl >= 0 && (fl & O_DIRECT))
			return decline(p, "packet mode (O_DIRECT)");
		if (fl < 0 || (fl & O_NONBLOCK))
			return fall_back(p, fl < 0 ? "F_GETFL failed" : "non-blocking write end");
	} else if (pp_pipe_nonblock(p)) {
		return fall_back(p, "non-blocking write end");
	}
	capacity = __atomic_load_n(&p->sh->capacity_max, __ATOMIC_RELAXED);
	r = pp_ring_get(p, capacity);
	if (!r) {
		/* Look again now and then: pressure ends without a ring. */
		maybe_trim(now_ns());
		return decline(p, pp_psi_active() ? "memory pressure: no new ring" :
						    "pool cap reached");
	}
	if (__atomic_exchange_n(&r->busy, 1, __ATOMIC_ACQUIRE))
		return fall_back(p, "a signal handler wrote inside libppipe's write");
	/* Without the fault guard, check the source ranges by system call. */
	if (!pp_faultguard_ready() && !source_readable(iov, iovcnt)) {
		__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
		pp_count(&p->cnt, PP_CNT_efaults, 1);
		return fall_back(p, "source buffer faulted");
	}

	ret = 0;
	while (done < total) {
		size_t chunk = total - done, pushed = 0;
		long roff;

		if (chunk > r->max_chunk)
			chunk = r->max_chunk;
		roff = pp_ring_reserve(r, chunk, fd, p->ino, capacity, &checks);
		if (roff == PP_RING_MOVED) {
			/*
			 * The fd was switched to another object behind our
			 * back: what the ring pushed since is unaccounted,
			 * so no page of it may be written again.
			 */
			pp_pipe_mark_unsafe(p, "fd switched to another file behind libppipe");
			break;
		}
		if (roff < 0) {
			pp_count(&p->cnt, PP_CNT_ring_waits, 1);
			break;
		}
		/*
		 * After the reuse verdict, before overwriting: a reader that
		 * turned unknown after the pages were consumed is seen here.
		 */
		if (pp_pipe_unsafe(p))
			break;
		if (pp_faultguard_ready()) {
			int cidx = idx;
			size_t coff = off;

			if (pp_copy_guarded(r->data + roff, iov, &idx, &off, chunk)) {
				/* The real call answers for the rest, as the kernel would. */
				pp_count(&p->cnt, PP_CNT_efaults, 1);
				stopped = "source buffer faulted";
				idx = cidx;
				off = coff;
				break;
			}
		} else {
			pp_copy_iov(r->data + roff, iov, &idx, &off, chunk);
		}
		while (pushed < chunk) {
			struct iovec v = { r->data + roff + pushed, chunk - pushed };
			long n = pp_sys_vmsplice(fd, &v, 1, vflags);

			pp_count(&p->cnt, PP_CNT_vmsplice_calls, 1);
			if (n > 0) {
				pp_ring_pushed(r, (size_t)roff + pushed, (size_t)n);
				pushed += (size_t)n;
				continue;
			}
			if (n == -EAGAIN && vflags) {
				n = wait_writable(p, fd, done + pushed > 0);
				if (n == 0)
					continue; /* room now */
				if (n == 1) {
					vflags = 0; /* nothing moved yet: the kernel's own wait */
					continue;
				}
			} else if (!done && !pushed && (n == -EBADF || n == -EINVAL)) {
				/* Not a pipe after all (nothing moved): the real call decides. */
				__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
				return decline(p, "vmsplice refused the fd");
			}
			/* EINTR, EPIPE (SIGPIPE already raised once), EAGAIN, ENOMEM... */
			ret = n ? n : -EIO;
			break;
		}
		vflags = SPLICE_F_NONBLOCK;
		pp_ring_commit(r, (size_t)roff, pushed);
		done += pushed;
		if (ret < 0 || pushed < chunk)
			break;
	}
	/* One clock read serves the idle time, the latency and the trim check. */
	now = now_ns();
	r->last_use_ns = now;
	r->resident = r->size;
	__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
	pp_count(&p->cnt, PP_CNT_fionread_checks, checks.fionread);
	pp_count(&p->cnt, PP_CNT_identity_checks, checks.identity);

	/* Bytes moved: the count. None: the error, as write() gives it. */
	if (ret < 0 && !done)
		return ret;
	/* Nothing moved and nothing failed: the ring is still referenced, or... */
	if (!done)
		return fall_back(p, pp_pipe_unsafe(p) ? "readers no longer known" : stopped);
	if (ret == 0 && done < total) {
		/* The ring could not take the rest: the real call writes it. */
		ssize_t n = write_rest(fd, iov, iovcnt, idx, off);

		if (n > 0)
			done += (size_t)n;
		now = now_ns();
	}
	pp_count(&p->cnt, PP_CNT_writes_accelerated, 1);
	pp_count(&p->cnt, PP_CNT_bytes_accelerated, done);
	if (t0)
		pp_latency_record(&pp_latency_all, now - t0);
	maybe_trim(now);
	return (ssize_t)done;
}
