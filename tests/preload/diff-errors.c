// SPDX-License-Identifier: MIT
/*
 * diff-errors: error results of write()/writev() on pipes, and which error
 * wins when several apply.
 *
 * What a plain pipe does (Linux 6.x, transcribed): EBADF for the read end
 * or a closed fd; writev() EINVAL for a negative or > IOV_MAX count and for
 * an iovec length above SSIZE_MAX, EFAULT for one that is merely beyond
 * the address space; a count of 0 returns 0 before anything else is
 * looked at (no EPIPE, no SIGPIPE, no EAGAIN); a missing reader is
 * reported (EPIPE) before the buffer is read, so a bad buffer gives EPIPE
 * there; a full non-blocking pipe gives EAGAIN before the buffer is read;
 * a huge count with a valid start is clamped and copied only as far as
 * the pipe takes (a non-blocking write of 3 GiB from a 1 MiB buffer into an
 * empty 64 KiB pipe returns 65536). A successful write leaves errno alone.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

static unsigned char *buf;

/*
 * Called through pointers: gcc knows write()'s and writev()'s access
 * attributes and rejects the deliberately wrong arguments at compile time.
 * The pointers still resolve to whatever definition LD_PRELOAD puts first.
 */
static ssize_t (*volatile write_p)(int, const void *, size_t) = write;
static ssize_t (*volatile writev_p)(int, const struct iovec *, int) = writev;
/*
 * A source the API cannot copy from (a bad address, a length beyond the
 * buffer): write() itself in the API build too, where the kernel answers
 * without reading it all.
 */
static ssize_t (*volatile write_bad_p)(int, const void *, size_t) = write;
static ssize_t (*volatile writev_bad_p)(int, const struct iovec *, int) = writev;
#ifdef T_API_WRITE
#undef write
#undef writev
static void api_init(void)
{
	write_p = t_api_write;
	writev_p = t_api_writev;
}
#else
static void api_init(void)
{
}
#endif
#define write write_p
#define writev writev_p

#define TRY(what, call)                                                                           \
	do {                                                                                      \
		t_sig_count[SIGPIPE] = 0;                                                         \
		errno = 0;                                                                        \
		ssize_t r_ = (call);                                                              \
		int e_ = errno;                                                                   \
		t_log("%-58s -> %s SIGPIPE x%d", what, t_res(r_, e_), (int)t_sig_count[SIGPIPE]); \
	} while (0)

int main(void)
{
	int p[2];
	struct iovec iov[2];

	t_init("diff-errors");
	api_init();
	t_sigaction(SIGPIPE, t_sig_counter, false);
	buf = t_map(T_MIB);
	t_fill(buf, T_MIB, 1600, 0);

	t_pipe(p, O_NONBLOCK);
	TRY("write 100 to the read end", write(p[0], buf, 100));
	TRY("write 1MiB to the read end", write(p[0], buf, T_MIB));
	iov[0] = (struct iovec){ buf, 70000 };
	TRY("writev 70000 to the read end", writev(p[0], iov, 1));
	TRY("write 1MiB to fd -1", write(-1, buf, T_MIB));
	TRY("write 1MiB to fd 1000 (not open)", write(1000, buf, T_MIB));
	TRY("writev count -1", writev(p[1], iov, -1));
	TRY("writev count IOV_MAX+1", writev(p[1], iov, IOV_MAX + 1));
	TRY("writev count 0", writev(p[1], iov, 0));
	iov[0] = (struct iovec){ buf, (size_t)SSIZE_MAX + 1 };
	TRY("writev iov_len SSIZE_MAX+1", writev(p[1], iov, 1));
	iov[0] = (struct iovec){ buf, (size_t)SSIZE_MAX };
	TRY("writev iov_len SSIZE_MAX", writev_bad_p(p[1], iov, 1));
	iov[0] = (struct iovec){ buf, 100 };
	iov[1] = (struct iovec){ buf, (size_t)SSIZE_MAX };
	TRY("writev {100, SSIZE_MAX}", writev(p[1], iov, 2));
	TRY("write SIZE_MAX bytes", write_bad_p(p[1], buf, SIZE_MAX));
	t_log("  drained %zu", t_drain(p[0]));
	TRY("write 3GiB from a 1MiB buffer, empty pipe, O_NONBLOCK",
	    write_bad_p(p[1], buf, 3UL * 1024 * T_MIB));
	t_log("  fionread %d", t_fionread(p[0]));
	TRY("write 1MiB+1 into the full pipe, O_NONBLOCK", write(p[1], buf, T_MIB + 1));
	TRY("write 1MiB from (void*)1 into the full pipe, O_NONBLOCK",
	    write_bad_p(p[1], (const void *)1, T_MIB));
	TRY("write 0 into the full pipe, O_NONBLOCK", write(p[1], buf, 0));
	TRY("pwrite 1MiB at offset 0", pwrite(p[1], buf, T_MIB, 0));
	iov[0] = (struct iovec){ buf, T_MIB };
	TRY("pwritev 1MiB at offset 0", pwritev(p[1], iov, 1, 0));
	t_close(p[0]);
	TRY("write 1MiB+1, no reader, full pipe, O_NONBLOCK", write(p[1], buf, T_MIB + 1));
	TRY("write 1MiB from (void*)1, no reader", write_bad_p(p[1], (const void *)1, T_MIB));
	TRY("write 0, no reader", write(p[1], buf, 0));
	TRY("writev count 0, no reader", writev(p[1], iov, 0));
	TRY("writev count -1, no reader", writev(p[1], iov, -1));
	t_close(p[1]);
	TRY("write 1MiB to the closed write end", write(p[1], buf, T_MIB));

	/* A read-only second description of the pipe's write end. */
	t_pipe(p, 0);
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[1]);
	int ro = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (ro < 0)
		t_die("open %s", path);
	TRY("write 1MiB to an O_RDONLY open of the write end", write(ro, buf, T_MIB));
	t_close(ro);

	/* errno after success. */
	t_set_nonblock(p[1], true);
	errno = EILSEQ;
	ssize_t r = write(p[1], buf, 8192);
	int after = errno;

	t_log("errno = EILSEQ; write 8192 -> %s; errno now %s", t_res(r, after), t_errname(after));
	errno = EILSEQ;
	iov[0] = (struct iovec){ buf, 20000 };
	iov[1] = (struct iovec){ buf + 30000, 30000 };
	r = writev(p[1], iov, 2);
	after = errno;
	t_log("errno = EILSEQ; writev 50000 -> %s; errno now %s", t_res(r, after),
	      t_errname(after));
	errno = EILSEQ;
	r = write(p[1], buf, T_MIB);
	after = errno;
	t_log("errno = EILSEQ; write 1MiB (partial) -> %s; errno now %s", t_res(r, after),
	      t_errname(after));
	t_log("fionread %d", t_fionread(p[0]));
	/* Filled up by its first 64 KiB: nothing of the write met EAGAIN. */
	t_log("  drained %zu", t_drain(p[0]));
	errno = EILSEQ;
	r = write(p[1], buf, T_MIB);
	after = errno;
	t_log("errno = EILSEQ; write 1MiB into the empty pipe -> %s; errno now %s", t_res(r, after),
	      t_errname(after));
	t_close(p[0]);
	t_close(p[1]);
	return t_finish();
}
