// SPDX-License-Identifier: MIT
/*
 * diff-fdstate: what a program can see of a pipe besides its bytes.
 *
 * After each large write: FIONREAD (must equal what write() returned at
 * once: a library may not keep bytes back), poll() and edge-triggered
 * epoll readiness of both ends, F_GETFL, F_GETFD, F_GETPIPE_SZ, fstat()
 * (type, size, block size, both ends one inode), the /proc/self/fd link
 * type and /proc/self/fdinfo flags, for pipes made by pipe() and by
 * pipe2() with each flag. All of it is deterministic within one process.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned char *src;

static void flags_line(int fd, char *out, size_t len)
{
	char path[64], line[128];

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(path, "re");

	snprintf(out, len, "?");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "flags:", 6)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(out, len, "%s", line + 6 + strspn(line + 6, " \t"));
		}
	if (f)
		fclose(f);
}

static void describe(const char *what, int p[2])
{
	struct stat s0, s1;
	char l0[64] = "", l1[64] = "", f0[32], f1[32], path[64];

	fstat(p[0], &s0);
	fstat(p[1], &s1);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[0]);
	if (readlink(path, l0, sizeof(l0) - 1) < 0)
		snprintf(l0, sizeof(l0), "?");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[1]);
	if (readlink(path, l1, sizeof(l1) - 1) < 0)
		snprintf(l1, sizeof(l1), "?");
	l0[strcspn(l0, "[")] = 0;
	l1[strcspn(l1, "[")] = 0;
	flags_line(p[0], f0, sizeof(f0));
	flags_line(p[1], f1, sizeof(f1));
	t_log("%s: F_GETFL %#o/%#o F_GETFD %d/%d F_GETPIPE_SZ %d; fdinfo flags %s/%s; link %s/%s; "
	      "fifo %d/%d, one inode %d, st_size %lld, st_blksize %ld, st_nlink %lu",
	      what, fcntl(p[0], F_GETFL), fcntl(p[1], F_GETFL), fcntl(p[0], F_GETFD),
	      fcntl(p[1], F_GETFD), fcntl(p[1], F_GETPIPE_SZ), f0, f1, l0, l1, S_ISFIFO(s0.st_mode),
	      S_ISFIFO(s1.st_mode), s0.st_ino == s1.st_ino && s0.st_dev == s1.st_dev,
	      (long long)s1.st_size, (long)s1.st_blksize, (unsigned long)s1.st_nlink);
}

static void readiness(const char *what, int p[2], int ep)
{
	struct pollfd pf[2] = { { p[0], POLLIN | POLLOUT, 0 }, { p[1], POLLIN | POLLOUT, 0 } };
	struct epoll_event ev[4];
	int n = poll(pf, 2, 0);
	int ne = epoll_wait(ep, ev, 4, 0);
	unsigned int er = 0, ew = 0;

	for (int i = 0; i < ne; i++) {
		if (ev[i].data.fd == p[0])
			er = ev[i].events;
		else
			ew = ev[i].events;
	}
	t_log("  %s: fionread %d; poll %d: read end %#x write end %#x; epoll(ET) %d: read end "
	      "%#x write end %#x",
	      what, t_fionread(p[0]), n, pf[0].revents, pf[1].revents, ne, er, ew);
}

static void sequence(void)
{
	int p[2];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		t_die("epoll_create1");
	t_pipe(p, O_NONBLOCK);
	struct epoll_event e0 = { EPOLLIN | EPOLLET, { .fd = p[0] } };
	struct epoll_event e1 = { EPOLLOUT | EPOLLET, { .fd = p[1] } };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &e0) || epoll_ctl(ep, EPOLL_CTL_ADD, p[1], &e1))
		t_die("epoll_ctl");
	readiness("empty", p, ep);
	static const size_t steps[] = { 100, 70000, 1, 0 };
	static unsigned char sink[65536];

	for (size_t i = 0; i < T_ARRAY_SIZE(steps); i++) {
		ssize_t r = write(p[1], src, steps[i]);
		char what[64];

		snprintf(what, sizeof(what), "after write %zu -> %s", steps[i], t_res(r, errno));
		readiness(what, p, ep);
	}
	ssize_t r = read(p[0], sink, 1);

	readiness(r == 1 ? "after reading 1 byte" : "read failed", p, ep);
	r = read(p[0], sink, 4095);
	readiness(r == 4095 ? "after reading 4095 more (a page freed)" : "read failed", p, ep);
	r = write(p[1], src, 100000);
	char what[64];

	snprintf(what, sizeof(what), "after write 100000 -> %s", t_res(r, errno));
	readiness(what, p, ep);
	t_drain(p[0]);
	readiness("drained", p, ep);
	r = write(p[1], src, 5 * T_MIB);
	snprintf(what, sizeof(what), "after write 5MiB -> %s", t_res(r, errno));
	readiness(what, p, ep);
	t_close(p[0]);
	readiness("read end closed", (int[2]){ p[1], p[1] }, ep);
	t_close(p[1]);
	t_close(ep);
}

int main(void)
{
	static const struct {
		const char *name;
		int flags;
	} kinds[] = {
		{ "pipe2(0)", 0 },
		{ "pipe2(O_CLOEXEC)", O_CLOEXEC },
		{ "pipe2(O_NONBLOCK)", O_NONBLOCK },
		{ "pipe2(O_DIRECT)", O_DIRECT },
		{ "pipe2(O_CLOEXEC|O_NONBLOCK|O_DIRECT)", O_CLOEXEC | O_NONBLOCK | O_DIRECT },
	};
	int p[2];

	t_init("diff-fdstate");
	src = (unsigned char *)t_map(5 * T_MIB + T_PAGE) + 1;
	if (pipe(p))
		t_die("pipe");
	describe("pipe()", p);
	t_set_nonblock(p[1], true);
	ssize_t r = write(p[1], src, T_MIB);

	t_log("pipe(): non-blocking write 1MiB -> %s", t_res(r, errno));
	describe("pipe() after a write", p);
	t_close(p[0]);
	t_close(p[1]);
	for (size_t i = 0; i < T_ARRAY_SIZE(kinds); i++) {
		t_pipe(p, kinds[i].flags);
		describe(kinds[i].name, p);
		t_close(p[0]);
		t_close(p[1]);
	}
	sequence();
	return t_finish();
}
