/* SPDX-License-Identifier: MIT */
/*
 * The differential suite through the zero-copy API (include/ppipe.h):
 * helpers.h includes this header when a diff-* program is built with
 * -DT_API_WRITE, and from there on the program's write(), writev() and
 * t_write_all() calls are t_api_write(), t_api_writev() and
 * t_api_write_all(): a span of the size of the write, the bytes copied
 * (gathered) into it, committed, released. run-diff.py then requires
 * the same transcript as the program's own write() build, run plain,
 * with the API's header fallback (no libppipe) and with libppipe
 * preloaded (ring spans). The helpers' own calls (helpers.c: the
 * transcript, the readers) are compiled without it and stay write().
 *
 * A call that must stay write() names the function in parentheses,
 * "(write)(fd, buf, n)", or calls it through a pointer: in a signal
 * handler (the API is not async-signal-safe), from a source the API
 * cannot copy (a bad address: write() says EFAULT where a copy would
 * crash).
 *
 * One span holds all of a write when the API can give it: its header's
 * buffers are as large as asked, and where libppipe writes in place a
 * ring region holds up to half the ring (twice the pipe's capacity by
 * default). A larger write is committed in parts, span after span, and
 * the parts are chosen so that the result is what ONE write() of all the
 * bytes gives, in every case the suite looks at:
 *   - the call's open file is held by a duplicate of the fd for all the
 *     parts, as write() holds it (another thread may close the number
 *     and reuse it meanwhile: diff-closerace);
 *   - a part is committed only when every part before it was written in
 *     full; a part that stops short or fails ends the call with the count
 *     so far, and an error of a later part is not the call's (errno is as
 *     it was, as after a short write());
 *   - blocking: before each part after the first, poll() waits for room,
 *     which a signal always interrupts: write() that has moved bytes
 *     returns the count when a signal comes, while a part that had not
 *     started would be restarted (SA_RESTART) into a wait nobody ends;
 *   - non-blocking: the kernel first tops up the pipe's last page with
 *     the write's size % 4096 bytes, if they fit there, then takes whole
 *     pages. Parts of whole pages with the remainder last give that count
 *     when the pipe is empty (nothing to top up) or the remainder is 0;
 *     otherwise no cut into parts does, and the call takes a span of all
 *     the bytes (a buffer: the API hands one out while the ring's region
 *     is open) and commits it once, which is one write().
 */
#ifndef PPIPE_TEST_API_WRITE_H
#define PPIPE_TEST_API_WRITE_H

#include <ppipe.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

/*
 * Set by a program where get may fail with ENOMEM and write() would not
 * (an address space limited to what the process uses: diff-restricted):
 * such a call then takes write(), as a program that cannot have a span
 * would. Elsewhere that failure is the call's.
 */
static bool t_api_enomem_write;

/* The duplicates the parts go through: above the numbers the programs use and expect. */
#define T_API_PIN_MIN 200

/* What one call has open, for a cancellation to close (write() is a cancellation point). */
struct t_api_call {
	struct ppipe_span part; /* the part being committed */
	struct ppipe_span ring; /* held open so that @part is a buffer of all the bytes */
	int pin; /* the duplicate holding the call's file, or -1 */
};

static inline void t_api_cleanup(void *arg)
{
	struct t_api_call *c = arg;

	ppipe_span_release(&c->part);
	ppipe_span_release(&c->ring);
	if (c->pin >= 0)
		close(c->pin);
}

/* A commit, with the call's clean-up around its cancellation point. */
static inline ssize_t t_api_commit(struct t_api_call *c, size_t n)
{
	ssize_t w;

	pthread_cleanup_push(t_api_cleanup, c);
	w = ppipe_span_commit(&c->part, n);
	pthread_cleanup_pop(0);
	return w;
}

/* Waits for room in the pipe: 0, or -1 (EINTR: a signal came). */
static inline int t_api_wait_room(struct t_api_call *c)
{
	struct pollfd pfd = { .fd = c->pin, .events = POLLOUT };
	int r;

	pthread_cleanup_push(t_api_cleanup, c);
	do
		r = poll(&pfd, 1, -1);
	while (r == 0);
	pthread_cleanup_pop(0);
	return r < 0 ? -1 : 0;
}

/* Copies the next @n bytes of @iov (from iovec *@idx, byte *@off) to @dst. */
static inline void t_api_gather(void *dst, const struct iovec *iov, int *idx, size_t *off, size_t n)
{
	unsigned char *d = dst;

	while (n) {
		size_t take = iov[*idx].iov_len - *off;

		if (take > n)
			take = n;
		if (take)
			memcpy(d, (const unsigned char *)iov[*idx].iov_base + *off, take);
		d += take;
		n -= take;
		*off += take;
		if (*off == iov[*idx].iov_len) {
			(*idx)++;
			*off = 0;
		}
	}
}

/* The larger write: parts, span after span (see the top of this file). */
static inline ssize_t t_api_parts(int fd, const struct iovec *iov, size_t n, int saved)
{
	struct t_api_call c = { .pin = -1 };
	size_t done = 0, off = 0, page = (size_t)sysconf(_SC_PAGESIZE);
	int fl, queued = 0, idx = 0, err = 0;
	bool nonblock, whole;
	ssize_t w = 0;

	c.pin = fcntl(fd, F_DUPFD_CLOEXEC, T_API_PIN_MIN);
	if (c.pin < 0)
		return -1;
	fl = fcntl(c.pin, F_GETFL);
	nonblock = fl >= 0 && (fl & O_NONBLOCK);
	whole = nonblock && n % page && (ioctl(c.pin, FIONREAD, &queued) || queued);
	while (done < n) {
		size_t part;

		if (done && !nonblock && t_api_wait_room(&c)) {
			err = errno;
			w = -1;
			break;
		}
		if (ppipe_span_get(c.pin, n - done, &c.part)) {
			err = errno;
			w = -1;
			break;
		}
		if (whole && c.part.len < n) {
			/* The ring's region, held open: the next get is a buffer of all n bytes. */
			c.ring = c.part;
			memset(&c.part, 0, sizeof(c.part));
			if (ppipe_span_get(c.pin, n, &c.part) || c.part.len < n) {
				err = c.part.len ? E2BIG : errno;
				w = -1;
				break;
			}
		}
		errno = saved;
		part = n - done < c.part.len ? n - done : c.part.len;
		/* Whole pages but for the last part: its remainder is where write() puts it. */
		if (part < n - done)
			part &= ~(page - 1);
		t_api_gather(c.part.data, iov, &idx, &off, part);
		w = t_api_commit(&c, part);
		err = errno;
		ppipe_span_release(&c.part);
		if (w < 0)
			break;
		done += (size_t)w;
		if ((size_t)w < part)
			break;
	}
	ppipe_span_release(&c.part);
	ppipe_span_release(&c.ring);
	close(c.pin);
	if (done) {
		/* A later part's error is not the call's: write() returns the count, errno as it was. */
		if (w < 0)
			errno = saved;
		return (ssize_t)done;
	}
	errno = err;
	return w < 0 ? -1 : 0;
}

static inline ssize_t t_api_put(int fd, const struct iovec *iov, int iovcnt, size_t n)
{
	struct t_api_call c = { .pin = -1 };
	int saved = errno, idx = 0;
	size_t off = 0;
	ssize_t w;

	/* A write of 0 bytes is a commit of 0 bytes (write()'s checks of the fd, no more). */
	if (ppipe_span_get(fd, n ? n : 1, &c.part)) {
		if (errno == ENOMEM && t_api_enomem_write) {
			errno = saved;
			return iovcnt == 1 ? (write)(fd, iov[0].iov_base, n) :
					     (writev)(fd, iov, iovcnt);
		}
		return -1;
	}
	/* Get is no part of write(): what it did to errno is undone; commit's is the call's. */
	errno = saved;
	if (c.part.len < n) {
		ppipe_span_release(&c.part);
		return t_api_parts(fd, iov, n, saved);
	}
	t_api_gather(c.part.data, iov, &idx, &off, n);
	w = t_api_commit(&c, n);
	/* Closed already when all was written; a partial or failed commit leaves it open. */
	ppipe_span_release(&c.part);
	return w;
}

static inline ssize_t t_api_write(int fd, const void *buf, size_t n)
{
	struct iovec v = { (void *)buf, n };

	return t_api_put(fd, &v, 1, n);
}

static inline ssize_t t_api_writev(int fd, const struct iovec *iov, int iovcnt)
{
	size_t total = 0;

	/* What is no span of bytes (a bad count, a total above SSIZE_MAX) is the kernel's to refuse. */
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return (writev)(fd, iov, iovcnt);
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - total)
			return (writev)(fd, iov, iovcnt);
		total += iov[i].iov_len;
	}
	return t_api_put(fd, iov, iovcnt, total);
}

#define write(fd, buf, n) t_api_write(fd, buf, n)
#define writev(fd, iov, iovcnt) t_api_writev(fd, iov, iovcnt)
#define t_write_all(fd, buf, len) t_write_all_by(t_api_write, fd, buf, len)

#endif
