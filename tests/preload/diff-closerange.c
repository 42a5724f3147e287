// SPDX-License-Identifier: MIT
/*
 * diff-closerange: a program writes to a pipe, closes it, then closes
 * every fd from 3 up, as daemons and spawners do (libc's close_range(),
 * or close() on every number up to 1023), and goes on with a new pipe:
 * 4 MiB written while a thread reads.
 * On a plain pipe the reader gets the whole stream, then EOF. Whatever
 * libppipe keeps open of its own is in that range too: it must not lose
 * the stream, hang, or take a number of the program's for one of its own.
 *
 * The scenario runs in a child (close_range takes the transcript too),
 * which reports through shared memory.
 */
#include "helpers.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define FIRST (64 * 1024)
#define BIG (4 * 1024 * 1024)

struct report {
	int close_range_ret, close_range_err;
	ssize_t first, big;
	struct t_read_result rd;
};

struct reader {
	int fd;
	struct t_read_result *res;
};

static void *read_all(void *arg)
{
	struct reader *r = arg;
	static unsigned char buf[64 * 1024];

	for (;;) {
		ssize_t n = read(r->fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r->res->err = errno;
			break;
		}
		if (!n)
			break;
		t_read_result_add(r->res, buf, (size_t)n, 11, 0);
	}
	r->res->done = 1;
	return NULL;
}

static void scenario(struct report *rep, bool loop)
{
	static unsigned char src[BIG];
	struct reader rd = { .res = &rep->rd };
	pthread_t t;
	int p[2], q[2];

	rep->rd.first_bad = UINT64_MAX;
	t_fill(src, BIG, 11, 0);
	if (pipe(p))
		_exit(T_EXIT_ERROR);
	rep->first = write(p[1], src, FIRST);
	close(p[1]);
	close(p[0]);
	if (loop) {
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
	} else {
		rep->close_range_ret = close_range(3, ~0U, 0);
		rep->close_range_err = errno;
	}
	if (pipe(q))
		_exit(T_EXIT_ERROR);
	rd.fd = q[0];
	if (pthread_create(&t, NULL, read_all, &rd))
		_exit(T_EXIT_ERROR);
	rep->big = t_write_all(q[1], src, BIG);
	close(q[1]);
	pthread_join(t, NULL);
	close(q[0]);
}

static void run(const char *how, bool loop)
{
	struct report *rep;
	int status;
	pid_t pid;

	rep = t_shared(sizeof(*rep));
	pid = t_fork();
	if (!pid) {
		scenario(rep, loop);
		exit(0);
	}
	status = t_wait(pid);
	t_log("%s: child: %s", how, t_status(status));
	t_log("%s: first write -> %zd", how, rep->first);
	if (!loop) {
		t_log("%s: close_range(3, ~0U, 0) -> %s", how,
		      t_res(rep->close_range_ret, rep->close_range_err));
		if (rep->close_range_ret && rep->close_range_err == ENOSYS)
			t_skip("no close_range here");
	}
	t_log("%s: 4 MiB into the new pipe -> %zd", how, rep->big);
	t_log("%s: reader: %llu bytes, fnv %016llx, %s, first bad %s", how,
	      (unsigned long long)rep->rd.bytes, (unsigned long long)rep->rd.fnv,
	      rep->rd.err ? t_errname(rep->rd.err) : "EOF",
	      rep->rd.first_bad == UINT64_MAX ? "none" : "some");
	t_check(WIFEXITED(status) && !WEXITSTATUS(status), "%s: the child failed", how);
	t_check(rep->first == FIRST, "%s: the first write", how);
	t_check(rep->big == BIG, "%s: the 4 MiB write", how);
	t_check(rep->rd.done && !rep->rd.err && rep->rd.bytes == BIG &&
			rep->rd.first_bad == UINT64_MAX,
		"%s: the reader did not get the stream intact, then EOF", how);
}

int main(void)
{
	t_init("diff-closerange");
	run("close_range", false);
	run("close loop", true);
	return t_finish();
}
