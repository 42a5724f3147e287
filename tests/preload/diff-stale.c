// SPDX-License-Identifier: MIT
/*
 * diff-stale: an fd switched to another pipe behind libppipe's back (a
 * raw dup3, as libc does inside freopen or daemon) while the first pipe
 * still holds unread data written through that fd. Writing on must not
 * reuse the pages the first pipe still holds: both pipes deliver their
 * bytes intact.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FIRST (600 * 1024)
#define SECOND (4 * 1024 * 1024)
#define CHUNK (64 * 1024)

int main(void)
{
	static unsigned char buf[CHUNK], back[FIRST];
	int p[2], q[2];
	struct t_reader rd;
	ssize_t r, got;
	uint64_t pos = 0;

	t_init("diff-stale");
	t_pipe(p, O_CLOEXEC);
	t_pipe(q, O_CLOEXEC);
	t_log("sizes: %d %d", t_pipe_size_set(p[1], 1 << 20), t_pipe_size_set(q[1], 1 << 20));
	/* The first pipe keeps these bytes unread until the end. */
	for (size_t off = 0; off < FIRST; off += CHUNK) {
		size_t n = FIRST - off < CHUNK ? FIRST - off : CHUNK;

		t_fill(buf, n, 11, off);
		r = write(p[1], buf, n);
		t_check(r == (ssize_t)n, "write to the first pipe: %zd", r);
	}
	/* Behind libppipe's back: p[1] now names the second pipe. */
	if (syscall(SYS_dup3, q[1], p[1], O_CLOEXEC) < 0)
		t_die("dup3");
	t_close(q[1]);
	t_reader_start(&rd, q[0], CHUNK, 12, 0, 0);
	t_close(q[0]);
	pos = t_write_stream(p[1], buf, CHUNK, 12, 0, SECOND, "the second pipe");
	t_log("wrote %llu bytes to the second pipe", (unsigned long long)pos);
	t_close(p[1]);
	t_reader_finish(&rd, "second pipe", pos);
	got = t_read_full(p[0], back, sizeof(back));
	t_log("first pipe: read %zd, intact: %s", got,
	      got == FIRST && t_verify(back, FIRST, 11, 0) == FIRST ? "yes" : "NO");
	t_check(got == FIRST && t_verify(back, FIRST, 11, 0) == FIRST, "first pipe corrupted");
	return t_finish();
}
