// SPDX-License-Identifier: MIT
/*
 * diff-stale-otherfd: a pipe written through a dup of its write end, the
 * dup switched to a second pipe behind libppipe's back (a raw dup3) and
 * written once there, then the pipe written on through its own write end. The bytes the second
 * pipe still holds came from the first pipe's ring: writing on through the
 * other fd must not reuse those pages (that fd's own identity says nothing
 * of where the switched one pushed). Both pipes deliver their bytes intact.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CHUNK (64 * 1024)
#define STRAY CHUNK /* into the second pipe, through the switched fd */
#define ROUNDS 64 /* then into the first pipe, through the other fd */

int main(void)
{
	static unsigned char buf[CHUNK], back[STRAY];
	struct t_reader rd;
	int p[2], q[2], d;
	uint64_t pos = 0;
	ssize_t r, got;

	t_init("diff-stale-otherfd");
	t_pipe(p, O_CLOEXEC);
	t_pipe(q, O_CLOEXEC);
	t_log("sizes: %d %d", t_pipe_size_set(p[1], CHUNK), t_pipe_size_set(q[1], CHUNK));
	t_reader_start(&rd, p[0], CHUNK, 21, 0, 0);
	t_close(p[0]);
	if ((d = dup(p[1])) < 0)
		t_die("dup");
	/* The dup writes the first pipe: the ring's next region is one it never pushed. */
	t_fill(buf, CHUNK, 21, pos);
	r = write(d, buf, CHUNK);
	t_check(r == CHUNK, "write to the first pipe through the dup: %zd", r);
	pos += CHUNK;
	/* Behind libppipe's back: d now names the second pipe, which keeps this unread. */
	if (syscall(SYS_dup3, q[1], d, O_CLOEXEC) < 0)
		t_die("dup3");
	t_close(q[1]);
	t_fill(buf, STRAY, 22, 0);
	r = write(d, buf, STRAY);
	t_check(r == STRAY, "write to the second pipe: %zd", r);
	/* The first pipe again, through p[1]: many times its capacity. */
	pos = t_write_stream(p[1], buf, CHUNK, 21, pos, pos + ROUNDS * CHUNK, "the first pipe");
	t_close(p[1]);
	t_reader_finish(&rd, "first pipe", pos);
	t_close(d);
	got = t_read_full(q[0], back, sizeof(back));
	t_log("second pipe: read %zd, intact: %s", got,
	      got == STRAY && t_verify(back, STRAY, 22, 0) == STRAY ? "yes" : "NO");
	t_check(got == STRAY && t_verify(back, STRAY, 22, 0) == STRAY, "second pipe corrupted");
	return t_finish();
}
