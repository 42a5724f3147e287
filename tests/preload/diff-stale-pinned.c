// SPDX-License-Identifier: MIT
/*
 * diff-stale-pinned: diff-stale with writes larger than the pipe. A 1 MiB
 * write into a 64 KiB pipe takes many system calls, and from its second
 * one on it holds a duplicate of the fd, whose check stands for the reuse
 * rule's identity check while the write lasts. Between two such writes the
 * fd is switched to another pipe behind libppipe's back (a raw dup3, as
 * libc does inside freopen or daemon) while the first pipe still holds the
 * last 48 KiB of the last write, unread. On a plain pipe every later write
 * goes whole into the second pipe and the first keeps its 48 KiB: so here,
 * with no short count and no page of the first pipe written again.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define WRITE (1024 * 1024)
#define FIRST (4 * WRITE)
#define LEFT (48 * 1024)
#define SECOND (4 * WRITE)
#define CHUNK (64 * 1024)

/* In a fork child: reads exactly @len bytes of the first stream, then stops. */
static int read_but_the_rest(int fd, size_t len)
{
	static unsigned char buf[FIRST];
	ssize_t got = t_read_full(fd, buf, len);

	return got == (ssize_t)len && t_verify(buf, len, 31, 0) == len ? 0 : 1;
}

int main(void)
{
	static unsigned char buf[WRITE], back[LEFT + 1];
	int p[2], q[2], status = -1;
	struct t_reader rd;
	uint64_t pos;
	ssize_t r, got;
	pid_t pid;

	t_init("diff-stale-pinned");
	t_pipe(p, O_CLOEXEC);
	t_pipe(q, O_CLOEXEC);
	t_log("sizes: %d %d", t_pipe_size_set(p[1], CHUNK), t_pipe_size_set(q[1], CHUNK));
	pid = fork();
	if (pid < 0)
		t_die("fork");
	if (pid == 0)
		_exit(read_but_the_rest(p[0], FIRST - LEFT));
	/* The first pipe: its reader stops 48 KiB short of the end. */
	for (pos = 0; pos < FIRST; pos += WRITE) {
		t_fill(buf, WRITE, 31, pos);
		r = write(p[1], buf, WRITE);
		t_check(r == WRITE, "write to the first pipe at %llu: %zd", (unsigned long long)pos,
			r);
	}
	if (waitpid(pid, &status, 0) != pid)
		t_die("waitpid");
	t_log("first reader: %s", status == 0 ? "read all but the last 48 KiB, intact" : "FAILED");
	t_check(status == 0, "the first reader");
	/* Behind libppipe's back: p[1] now names the second pipe. */
	if (syscall(SYS_dup3, q[1], p[1], O_CLOEXEC) < 0)
		t_die("dup3");
	t_close(q[1]);
	t_reader_start(&rd, q[0], CHUNK, 32, 0, 0);
	t_close(q[0]);
	for (pos = 0; pos < SECOND; pos += WRITE) {
		t_fill(buf, WRITE, 32, pos);
		r = write(p[1], buf, WRITE);
		t_log("write 1 MiB to the second pipe at %llu -> %s", (unsigned long long)pos,
		      t_res(r, errno));
		if (r != WRITE) {
			pos += r > 0 ? (uint64_t)r : 0;
			break;
		}
	}
	t_close(p[1]);
	t_reader_finish(&rd, "second pipe", pos);
	got = t_read_full(p[0], back, sizeof(back));
	t_log("first pipe: read %zd more, intact: %s", got,
	      got == LEFT && t_verify(back, LEFT, 31, FIRST - LEFT) == LEFT ? "yes" : "NO");
	t_check(got == LEFT && t_verify(back, LEFT, 31, FIRST - LEFT) == LEFT,
		"first pipe corrupted");
	return t_finish();
}
