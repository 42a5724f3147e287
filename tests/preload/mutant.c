// SPDX-License-Identifier: MIT
/*
 * libppipe-mutant: a deliberately wrong accelerating preload, for testing
 * the tests. Each mode is a mistake a vmsplice()-based library could
 * plausibly make; test-selftest.py checks that the differential tests
 * catch every one of them. PPIPE_MUTANT selects the mode:
 *
 *   nocopy     blocking writes > 4096 bytes to a pipe are vmspliced straight
 *              from the caller's buffer, without copying (the caller may
 *              change the bytes while the pipe still holds its pages)
 *   ring       such writes are copied into one 1 MiB ring and vmspliced from
 *              there; the ring is reused as soon as the pipe is empty (FIONREAD
 *              0), which ignores readers that splice or tee the pages away;
 *              O_DIRECT is ignored and a faulting source is memcpy'd (crash)
 *   nosigpipe  SIGPIPE is blocked around writes and a pending one discarded
 *   writevflip writev() to a pipe flips one bit of the middle byte
 *   errno      a successful write() to a pipe sets errno to ENOTTY
 *
 * Never installed; not thread-safe (ring mode); the caller's buffer is never
 * modified.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define RING (1UL << 20)
#define CHUNK (64UL << 10)
#define PAGE 4096UL

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);

static write_fn next_write;
static writev_fn next_writev;
static enum { M_NONE, M_NOCOPY, M_RING, M_NOSIGPIPE, M_WRITEVFLIP, M_ERRNO } mode;
static unsigned char *ring;
static size_t ring_off;

__attribute__((constructor)) static void mutant_init(void)
{
	static const char *const names[] = { "",	  "nocopy",	"ring",
					     "nosigpipe", "writevflip", "errno" };
	const char *m = getenv("PPIPE_MUTANT");

	next_write = (write_fn)dlsym(RTLD_NEXT, "write");
	next_writev = (writev_fn)dlsym(RTLD_NEXT, "writev");
	for (unsigned int i = 1; m && i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(m, names[i]))
			mode = i;
}

static int is_pipe(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISFIFO(st.st_mode);
}

static int blocking_pipe(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl >= 0 && !(fl & O_NONBLOCK) && is_pipe(fd);
}

static size_t total_len(const struct iovec *iov, int cnt)
{
	size_t t = 0;

	for (int i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

/* vmsplices @iov until all is in or an error; returns bytes or -1. */
static ssize_t splice_all(int fd, struct iovec *iov, int cnt)
{
	size_t done = 0;

	while (cnt > 0) {
		ssize_t r = vmsplice(fd, iov, (unsigned long)cnt, 0);

		if (r < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)r;
		while (cnt > 0 && (size_t)r >= iov->iov_len) {
			r -= (ssize_t)iov->iov_len;
			iov++, cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return (ssize_t)done;
}

static void wait_empty(int fd)
{
	struct timespec ts = { 0, 50000 };
	int n;

	while (!ioctl(fd, FIONREAD, &n) && n > 0)
		nanosleep(&ts, NULL);
}

static ssize_t ring_write(int fd, const struct iovec *iov, int cnt)
{
	size_t total = total_len(iov, cnt), done = 0;
	int i = 0;
	size_t in = 0;

	if (!ring) {
		ring = mmap(NULL, RING, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (ring == MAP_FAILED)
			return -2;
	}
	while (done < total) {
		size_t chunk = total - done < CHUNK ? total - done : CHUNK;

		if (ring_off + chunk > RING) {
			wait_empty(fd);
			ring_off = 0;
		}
		for (size_t got = 0; got < chunk;) {
			size_t n = iov[i].iov_len - in;

			if (n > chunk - got)
				n = chunk - got;
			memcpy(ring + ring_off + got, (const char *)iov[i].iov_base + in, n);
			got += n, in += n;
			if (in == iov[i].iov_len)
				i++, in = 0;
		}
		struct iovec v = { ring + ring_off, chunk };
		ssize_t r = splice_all(fd, &v, 1);

		if (r < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)r;
		ring_off += (chunk + PAGE - 1) & ~(PAGE - 1);
		if ((size_t)r < chunk)
			break;
	}
	return (ssize_t)done;
}

static ssize_t nosigpipe(int fd, const struct iovec *iov, int cnt, const void *buf, size_t n)
{
	sigset_t set, old;
	ssize_t r;
	int e;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigprocmask(SIG_BLOCK, &set, &old);
	r = iov ? next_writev(fd, iov, cnt) : next_write(fd, buf, n);
	e = errno;
	if (r < 0 && e == EPIPE) {
		struct timespec zero = { 0, 0 };

		sigtimedwait(&set, NULL, &zero);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return r;
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct iovec iov = { (void *)buf, n };
	ssize_t r;

	switch (mode) {
	case M_NOCOPY:
		if (n > 4096 && blocking_pipe(fd))
			return splice_all(fd, &iov, 1);
		break;
	case M_RING:
		if (n > 4096 && blocking_pipe(fd)) {
			r = ring_write(fd, &iov, 1);
			if (r != -2)
				return r;
		}
		break;
	case M_NOSIGPIPE:
		if (is_pipe(fd))
			return nosigpipe(fd, NULL, 0, buf, n);
		break;
	case M_ERRNO:
		r = next_write(fd, buf, n);
		if (r >= 0 && is_pipe(fd))
			errno = ENOTTY;
		return r;
	default:
		break;
	}
	return next_write(fd, buf, n);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	size_t total = cnt > 0 && cnt <= 1024 ? total_len(iov, cnt) : 0;

	switch (mode) {
	case M_NOCOPY:
	case M_RING:
		if (total > 4096 && blocking_pipe(fd)) {
			struct iovec copy[1024];

			memcpy(copy, iov, sizeof(copy[0]) * (size_t)cnt);
			if (mode == M_NOCOPY)
				return splice_all(fd, copy, cnt);
			ssize_t r = ring_write(fd, copy, cnt);

			if (r != -2)
				return r;
		}
		break;
	case M_NOSIGPIPE:
		if (is_pipe(fd))
			return nosigpipe(fd, iov, cnt, NULL, 0);
		break;
	case M_WRITEVFLIP:
		if (total > 1 && is_pipe(fd)) {
			unsigned char *flat = malloc(total);
			size_t at = 0;
			ssize_t r;

			if (!flat)
				break;
			for (int i = 0; i < cnt; i++) {
				memcpy(flat + at, iov[i].iov_base, iov[i].iov_len);
				at += iov[i].iov_len;
			}
			flat[total / 2] ^= 0x01;
			r = next_write(fd, flat, total);
			free(flat);
			return r;
		}
		break;
	default:
		break;
	}
	return next_writev(fd, iov, cnt);
}
