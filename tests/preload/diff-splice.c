// SPDX-License-Identifier: MIT
/*
 * diff-splice: readers that keep the pipe's pages after the pipe is empty.
 *
 * A library that pushes its own buffer pages into a pipe with vmsplice()
 * may reuse a buffer only when no one references those pages any more,
 * and an empty pipe does not mean that: a reader can splice() the pages
 * into another pipe, tee() them, or splice them into a socket, and read
 * them much later. Here the writer streams 8 MiB in large writes into a
 * 64 KiB pipe while the reader moves everything into other pipes (1 MiB
 * each) or unix sockets, or tees it there, and reads them only at the end
 * (or when all of them are full): each byte must still be the byte
 * written. A plain pipe copies at write(), so it always passes. Splicing
 * into a regular file (a copy) is checked too.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOTAL (8 * T_MIB)

enum mode { M_PIPE, M_TEE, M_SOCKET, M_FILE };
static const char *const mode_name[] = { "splice to a pipe", "tee to a pipe",
					 "splice to a unix socket", "splice to a file" };

struct check {
	uint64_t bytes, fnv, first_bad;
};

static void check_init(struct check *c)
{
	c->bytes = 0;
	c->fnv = T_FNV_INIT;
	c->first_bad = UINT64_MAX;
}

static void check_feed(struct check *c, const unsigned char *buf, size_t n, uint64_t seed)
{
	if (c->first_bad == UINT64_MAX && t_verify(buf, n, seed, c->bytes) != n)
		c->first_bad = c->bytes + t_verify(buf, n, seed, c->bytes);
	c->fnv = t_fnv(c->fnv, buf, n);
	c->bytes += n;
}

/* Reads whatever @fd holds now (non-blocking) into @c. */
static void drain_into(int fd, struct check *c, uint64_t seed)
{
	static unsigned char buf[65536];

	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		check_feed(c, buf, (size_t)r, seed);
	}
}

struct result {
	struct check held, direct;
	int err;
	int done;
};

/* Where the reader parks pages: pipes of 1 MiB, or unix sockets with large buffers. */
#define MAX_HOLDERS 32

struct holder {
	int put, get;
};

static int make_holders(enum mode m, struct holder *h)
{
	int n = m == M_SOCKET ? MAX_HOLDERS : 12;

	for (int i = 0; i < n; i++) {
		int fds[2];

		if (m == M_SOCKET) {
			int big = 4 << 20;

			if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds))
				_exit(3);
			if (setsockopt(fds[0], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)))
				setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
			h[i].put = fds[0];
			h[i].get = fds[1];
		} else {
			t_pipe(fds, 0);
			t_pipe_size_set(fds[1], 1048576);
			h[i].put = fds[1];
			h[i].get = fds[0];
		}
		t_set_nonblock(h[i].put, true);
		t_set_nonblock(h[i].get, true);
	}
	return n;
}

/* Reads every holder up to @upto, in order: the parked bytes, in stream order. */
static void drain_holders(enum mode m, struct holder *h, int upto, struct check *c, uint64_t seed)
{
	for (int i = 0; i <= upto; i++) {
		if (m == M_SOCKET)
			shutdown(h[i].put, SHUT_WR);
		drain_into(h[i].get, c, seed);
		if (m == M_SOCKET) {
			/* A shut-down socket takes no more; make a fresh pair. */
			int fds[2], big = 4 << 20;

			close(h[i].put);
			close(h[i].get);
			if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds))
				_exit(3);
			if (setsockopt(fds[0], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)))
				setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
			h[i].put = fds[0];
			h[i].get = fds[1];
			t_set_nonblock(h[i].put, true);
			t_set_nonblock(h[i].get, true);
		}
	}
}

/*
 * Moves (or tees) everything from @a into the holders, switching to the
 * next one when one is full, and reads the holders only when all are full
 * or at EOF: the whole stream (8 MiB) stays parked if the holders can take
 * it, which makes the test independent of the size of a library's buffers.
 */
static void reader(enum mode m, int a, uint64_t seed, struct result *res)
{
	static struct holder h[MAX_HOLDERS];
	static unsigned char buf[65536];
	int nh = 0, cur = 0, file = -1;

	check_init(&res->held);
	check_init(&res->direct);
	if (m == M_FILE)
		file = t_tmpfile();
	else
		nh = make_holders(m, h);
	for (;;) {
		struct pollfd pf = { a, POLLIN, 0 };

		if (poll(&pf, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			res->err = errno;
			break;
		}
		ssize_t n;

		if (m == M_TEE)
			n = tee(a, h[cur].put, 65536, SPLICE_F_NONBLOCK);
		else if (m == M_FILE)
			n = splice(a, NULL, file, NULL, 65536, SPLICE_F_MOVE);
		else
			n = splice(a, NULL, h[cur].put, NULL, 65536,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0 && errno == EAGAIN && m != M_FILE) {
			/* This holder is full: the next one, or read them all if none is left. */
			if (++cur == nh) {
				drain_holders(m, h, nh - 1, &res->held, seed);
				cur = 0;
			}
			continue;
		}
		if (n < 0) {
			res->err = errno;
			break;
		}
		if (n == 0)
			break;
		if (m == M_TEE) {
			/* Consume the teed bytes from the pipe itself. */
			ssize_t got = t_read_full(a, buf, (size_t)n);

			if (got != n) {
				res->err = EIO;
				break;
			}
			check_feed(&res->direct, buf, (size_t)n, seed);
		}
	}
	if (m == M_FILE) {
		off_t end = lseek(file, 0, SEEK_CUR);
		unsigned char *all = t_map((size_t)end + 1);

		if (pread(file, all, (size_t)end, 0) == end)
			check_feed(&res->held, all, (size_t)end, seed);
	} else {
		drain_holders(m, h, cur, &res->held, seed);
	}
	res->done = 1;
}

static void one(enum mode m)
{
	uint64_t seed = 1300 + (uint64_t)m, pos = 0;
	struct result *res = t_shared(sizeof(*res));
	unsigned char *src = (unsigned char *)t_map(T_MIB) + 1;
	int p[2];

	t_pipe(p, 0);
	pid_t pid = t_fork();

	if (!pid) {
		t_close_all_but(&p[0], 1);
		reader(m, p[0], seed, res);
		_exit(0);
	}
	t_close(p[0]);
	bool ok = true;

	while (pos < TOTAL) {
		size_t n = TOTAL - pos < 262147 ? (size_t)(TOTAL - pos) : 262147;

		t_fill(src, n, seed, pos);
		ssize_t r = write(p[1], src, n);

		t_scribble(src, n);
		if (r != (ssize_t)n) {
			ok = false;
			break;
		}
		pos += n;
	}
	t_close(p[1]);
	int st = t_wait(pid);
	bool held_ok = res->done && !res->err && res->held.bytes == pos &&
		       res->held.first_bad == UINT64_MAX;

	t_log("%s: writes %s; reader %s%s%s; held copy read=%llu fnv=%016llx %s", mode_name[m],
	      ok ? "full" : "SHORT", t_status(st), res->err ? " error " : "",
	      res->err ? t_errname(res->err) : "", (unsigned long long)res->held.bytes,
	      (unsigned long long)res->held.fnv, held_ok ? "ok" : "BAD");
	t_check(ok && held_ok, "%s: held copy differs from the stream at byte %llu", mode_name[m],
		(unsigned long long)res->held.first_bad);
	if (m == M_TEE) {
		bool dok = res->direct.bytes == pos && res->direct.first_bad == UINT64_MAX;

		t_log("%s: direct read=%llu fnv=%016llx %s", mode_name[m],
		      (unsigned long long)res->direct.bytes, (unsigned long long)res->direct.fnv,
		      dok ? "ok" : "BAD");
		t_check(dok, "tee: the pipe's own bytes differ at %llu",
			(unsigned long long)res->direct.first_bad);
	}
	munmap(res, sizeof(*res));
	munmap(src - 1, T_MIB);
}

int main(void)
{
	t_init("diff-splice");
	for (int m = M_PIPE; m <= M_FILE; m++)
		one((enum mode)m);
	return t_finish();
}
