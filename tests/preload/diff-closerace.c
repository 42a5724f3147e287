// SPDX-License-Identifier: MIT
/*
 * diff-closerace: another thread closes the write end while a large
 * write() is blocked on a full pipe, and a new pipe takes the same fd
 * number, as its write end or as its read end. On a plain pipe the write
 * holds the open file until it returns: it completes into the first pipe,
 * the reader of that pipe gets every byte and then EOF, and the new pipe
 * gets nothing. A write must never move a byte to the file that now has
 * the number, nor wait on it.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define BIG (4 * 1024 * 1024)
#define PIPE_SZ (64 * 1024)

struct job {
	int fd;
	const unsigned char *buf;
	size_t len;
	volatile int started;
	ssize_t ret;
	int err;
};

static void *writer(void *arg)
{
	struct job *j = arg;

	j->started = 1;
	j->ret = write(j->fd, j->buf, j->len);
	j->err = errno;
	return NULL;
}

static void scenario(const char *name, bool reuse_as_write_end)
{
	static unsigned char pre[PIPE_SZ], src[BIG];
	struct job j;
	struct t_reader rd;
	pthread_t t;
	int p[2], q[2], low, w;

	/* @low sits below the pipe, so that closing both frees two numbers. */
	low = dup(2);
	if (low < 0)
		t_die("dup");
	t_pipe(p, 0);
	w = p[1];
	t_pipe_size_set(w, PIPE_SZ);
	t_fill(pre, PIPE_SZ, 7, 0);
	t_check(t_write_all(w, pre, PIPE_SZ) == PIPE_SZ, "prefill");
	t_fill(src, BIG, 7, PIPE_SZ);
	j = (struct job){ .fd = w, .buf = src, .len = BIG };
	if (pthread_create(&t, NULL, writer, &j))
		t_die("pthread_create");
	while (!j.started)
		t_usleep(1000);
	t_usleep(200 * 1000); /* let it block on the full pipe */

	if (reuse_as_write_end)
		t_close(low);
	t_close(w);
	t_pipe(q, 0);
	if (q[reuse_as_write_end ? 1 : 0] != w)
		t_skip("the new pipe did not get fd %d (%d, %d)", w, q[0], q[1]);
	if (!reuse_as_write_end)
		t_close(low);
	/* Only now does anybody read the first pipe. */
	t_reader_start(&rd, p[0], 64 * 1024, 7, 0, 0);
	t_close(p[0]);
	pthread_join(t, NULL);
	t_log("%s: write -> %s", name, t_res(j.ret, j.err));
	t_check(j.ret == BIG, "%s: the write returned %zd", name, j.ret);
	t_reader_finish(&rd, name, (uint64_t)PIPE_SZ + BIG);
	t_log("%s: bytes in the new pipe: %d", name, t_fionread(q[0]));
	t_check(t_fionread(q[0]) == 0, "%s: bytes landed in the new pipe", name);
	t_close(q[0]);
	t_close(q[1]);
}

int main(void)
{
	t_init("diff-closerace");
	t_close_all_but(NULL, 0);
	scenario("number reused by a write end", true);
	scenario("number reused by a read end", false);
	return t_finish();
}
