// SPDX-License-Identifier: MIT
/*
 * diff-dup2: fd numbers that stop being the pipe they were.
 *
 * A library that remembers "fd N is my accelerated pipe" must notice when
 * N becomes something else: dup2() of a regular file, a socket, an eventfd
 * or /dev/null over it; close() and a new open() that gets the same
 * number; close_range() (which a library interposing close() does not
 * see) and then a reused number; dup()s of the pipe that outlive the
 * original. Every large write must land in whatever N is at that moment,
 * with that object's semantics (an eventfd refuses anything but 8 bytes).
 *
 * The transcript also lists the open fds at start and end: a library that
 * keeps fds of its own shows up there (and would be hit by programs that
 * close every fd they do not know, as this one does with close_range).
 * The one exception is libppipe's pipe registry, a memfd it keeps
 * close-on-exec to hand to the programs its process tree execs
 * (docs/design.md, "The registry across fork and exec"): it is left out
 * here, and this program's close_range() closing it shows that losing it
 * costs nothing but reach.
 */
#include "helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned char *src;

static void census(const char *when)
{
	char line[1024];
	size_t at = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int fds[256], n = 0;

	if (!d)
		t_die("opendir /proc/self/fd");
	while ((e = readdir(d)) && n < 256) {
		if (e->d_name[0] == '.')
			continue;
		int fd = atoi(e->d_name);
		char path[64], target[128];
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		len = readlink(path, target, sizeof(target) - 1);
		target[len > 0 ? len : 0] = 0;
		if (strstr(target, "memfd:libppipe-registry"))
			continue;
		if (fd != dirfd(d))
			fds[n++] = fd;
	}
	closedir(d);
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (fds[j] < fds[i]) {
				int t = fds[i];

				fds[i] = fds[j];
				fds[j] = t;
			}
	for (int i = 0; i < n && at < sizeof(line) - 16; i++)
		at += (size_t)snprintf(line + at, sizeof(line) - at, " %d", fds[i]);
	line[at] = 0;
	t_log("open fds %s:%s", when, line);
}

static const char *kind(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return t_errname(errno);
	switch (st.st_mode & S_IFMT) {
	case S_IFIFO:
		return "fifo";
	case S_IFREG:
		return "regular";
	case S_IFSOCK:
		return "socket";
	case S_IFCHR:
		return "chardev";
	default:
		return "non-file";
	}
}

/* Writes @len bytes of stream @seed from @pos to @fd; logs the result. */
static ssize_t put(int fd, const char *what, uint64_t seed, uint64_t pos, size_t len)
{
	t_fill(src, len, seed, pos);
	errno = 0;
	ssize_t r = write(fd, src, len);
	int e = errno;

	t_scribble(src, len);
	t_log("%s: write %zu to a %s -> %s", what, len, kind(fd), t_res(r, e));
	errno = e;
	return r;
}

/* The file holds exactly stream @seed [0, len). */
static void file_holds(int fd, uint64_t seed, size_t len, const char *what)
{
	struct stat st;
	unsigned char *buf = t_map(len + 1);

	if (fstat(fd, &st))
		t_die("fstat");
	ssize_t r = pread(fd, buf, len + 1, 0);
	bool ok = r == (ssize_t)len && (size_t)st.st_size == len &&
		  t_verify(buf, len, seed, 0) == len;

	t_log("%s: file size %lld, offset %lld, contents %s", what, (long long)st.st_size,
	      (long long)lseek(fd, 0, SEEK_CUR), ok ? "ok" : "BAD");
	t_check(ok, "%s: the file does not hold the written stream", what);
	munmap(buf, len + 1);
}

static void over_with_file(void)
{
	struct t_reader rd;
	int p[2];

	t_pipe(p, 0);
	t_reader_start(&rd, p[0], 65536, 800, 0, 0);
	t_close(p[0]);
	ssize_t r = put(p[1], "pipe", 800, 0, T_MIB);
	int f = t_tmpfile();

	t_log("dup2(file, pipe fd) -> %s", dup2(f, p[1]) == p[1] ? "same number" : "FAILED");
	put(p[1], "after dup2", 801, 0, T_MIB + 5);
	put(p[1], "after dup2", 801, T_MIB + 5, 70000);
	t_reader_finish(&rd, "reader of the replaced pipe", r > 0 ? (uint64_t)r : 0);
	file_holds(f, 801, T_MIB + 5 + 70000, "file via the old pipe number");
	t_close(f);
	t_close(p[1]);
}

static void close_and_reopen(void)
{
	struct t_reader rd;
	int p[2];

	/* The read end stays open here so that the write end's number is the lowest free one. */
	t_pipe(p, 0);
	t_reader_start(&rd, p[0], 65536, 810, 0, 0);
	ssize_t r = put(p[1], "pipe", 810, 0, 2 * T_MIB);
	int old = p[1];

	t_close(p[1]);
	t_reader_finish(&rd, "reader after close", r > 0 ? (uint64_t)r : 0);
	int f = t_tmpfile();

	t_log("file opened after close gets the pipe's number: %s", f == old ? "yes" : "no");
	put(f, "reused number", 811, 0, T_MIB + 1);
	file_holds(f, 811, T_MIB + 1, "reused number");
	t_close(f);
	t_close(p[0]);

	/* A pipe closed and a new pipe with the same numbers. */
	int q[2], s[2];
	struct t_reader r1, r2;

	t_pipe(q, 0);
	t_reader_start(&r1, q[0], 4096, 812, 0, 0);
	int q0 = q[0], q1 = q[1];

	t_close(q[0]);
	r = put(q[1], "first pipe", 812, 0, T_MIB);
	t_close(q[1]);
	t_pipe(s, 0);
	t_log("second pipe gets the first one's numbers: %s",
	      s[0] == q0 && s[1] == q1 ? "yes" : "no");
	t_reader_start(&r2, s[0], 65536, 813, 0, 0);
	t_close(s[0]);
	ssize_t r2len = put(s[1], "second pipe", 813, 0, T_MIB + 100);

	t_close(s[1]);
	t_reader_finish(&r1, "first pipe's reader", r > 0 ? (uint64_t)r : 0);
	t_reader_finish(&r2, "second pipe's reader", r2len > 0 ? (uint64_t)r2len : 0);
}

static void dups(void)
{
	struct t_reader rd;
	uint64_t pos = 0;
	int p[2];

	t_pipe(p, 0);
	t_reader_start(&rd, p[0], 65536, 820, 0, 0);
	t_close(p[0]);
	int d = dup(p[1]);
	int d3 = fcntl(p[1], F_DUPFD_CLOEXEC, 100);
	ssize_t r;

	if (d < 0 || d3 < 0)
		t_die("dup");
	for (int i = 0; i < 6; i++) {
		int fd = i % 3 == 0 ? p[1] : i % 3 == 1 ? d : d3;

		r = put(fd,
			i % 3 == 0 ? "original" :
			i % 3 == 1 ? "dup" :
				     "F_DUPFD_CLOEXEC",
			820, pos, 300000 + (size_t)i);
		pos += r > 0 ? (uint64_t)r : 0;
	}
	t_close(p[1]);
	r = put(d, "dup after the original was closed", 820, pos, T_MIB);
	pos += r > 0 ? (uint64_t)r : 0;
	t_close(d);
	r = put(d3, "last dup", 820, pos, T_MIB);
	pos += r > 0 ? (uint64_t)r : 0;
	t_close(d3);
	t_reader_finish(&rd, "reader of the dup'ed pipe", pos);
}

static void over_with_others(void)
{
	struct t_reader rd, rs;
	int p[2], sv[2];

	t_pipe(p, 0);
	t_reader_start(&rd, p[0], 65536, 830, 0, 0);
	t_close(p[0]);
	ssize_t rpipe = put(p[1], "pipe", 830, 0, T_MIB);
	ssize_t r;

	/* A socket. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		t_die("socketpair");
	t_reader_start(&rs, sv[1], 65536, 831, 0, 0);
	t_close(sv[1]);
	dup2(sv[0], p[1]);
	t_close(sv[0]);
	ssize_t rsock = put(p[1], "after dup2(socket)", 831, 0, T_MIB + 3);

	/* An eventfd: only 8-byte writes. */
	int efd = eventfd(0, EFD_CLOEXEC);

	if (efd < 0)
		t_die("eventfd");
	dup2(efd, p[1]);
	t_close(efd);
	t_reader_finish(&rs, "socket reader", rsock > 0 ? (uint64_t)rsock : 0);
	put(p[1], "after dup2(eventfd)", 832, 0, 100000);
	uint64_t one = 1;

	errno = 0;
	r = write(p[1], &one, sizeof(one));
	t_log("after dup2(eventfd): write 8 -> %s", t_res(r, errno));

	/* /dev/null. */
	int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (nul < 0)
		t_die("open /dev/null");
	dup2(nul, p[1]);
	t_close(nul);
	put(p[1], "after dup2(/dev/null)", 833, 0, 5 * T_MIB);
	t_close(p[1]);
	t_reader_finish(&rd, "reader of the pipe", rpipe > 0 ? (uint64_t)rpipe : 0);
}

static void after_close_range(void)
{
	struct t_reader rd;
	int p[2];

	t_pipe(p, 0);
	t_reader_start(&rd, p[0], 65536, 840, 0, 0);
	ssize_t r = put(p[1], "pipe", 840, 0, T_MIB);
	int old = p[1];

	/* Everything from 3 up except the transcript goes; the library is not told. */
	t_close_all_but(NULL, 0);
	t_reader_finish(&rd, "reader after close_range", r > 0 ? (uint64_t)r : 0);
	int f = t_tmpfile();

	t_log("file after close_range gets the pipe's number: %s", f == old ? "yes" : "no");
	if (f != old && dup2(f, old) == old)
		t_close(f), f = old;
	put(f, "number reused after close_range", 841, 0, T_MIB + 9);
	file_holds(f, 841, T_MIB + 9, "number reused after close_range");
	t_close(f);

	/* A new pipe after close_range works too. */
	t_pipe(p, 0);
	t_reader_start(&rd, p[0], 65536, 842, 0, 0);
	t_close(p[0]);
	r = put(p[1], "new pipe after close_range", 842, 0, 3 * T_MIB);
	t_close(p[1]);
	t_reader_finish(&rd, "new pipe's reader", r > 0 ? (uint64_t)r : 0);
}

int main(void)
{
	t_init("diff-dup2");
	census("at start");
	src = (unsigned char *)t_map(5 * T_MIB + T_PAGE) + 1;
	over_with_file();
	close_and_reopen();
	dups();
	over_with_others();
	census("before close_range");
	after_close_range();
	census("at end");
	return t_finish();
}
