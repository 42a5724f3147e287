// SPDX-License-Identifier: MIT
/*
 * diff-rawdup3: a program writes 64 KiB to a pipe, then puts a file over
 * the pipe's only write end with the dup3 system call itself (as a
 * static helper or a raw syscall() would: no libc function libppipe sees).
 * On a plain pipe nothing writes to the pipe any more: its reader gets
 * the 64 KiB, then EOF. Nothing libppipe holds may keep the pipe open
 * behind the program's back, and nothing may reach the file.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LEN (64 * 1024)

int main(void)
{
	static unsigned char src[LEN], buf[LEN];
	struct t_read_result res = { .first_bad = UINT64_MAX };
	struct stat sb;
	int p[2], file;
	ssize_t w;
	long r;

	t_init("diff-rawdup3");
	t_close_all_but(NULL, 0);
	t_pipe(p, 0);
	t_fill(src, LEN, 5, 0);
	w = write(p[1], src, LEN);
	t_log("write 64 KiB -> %s", t_res(w, errno));
	t_check(w == LEN, "the write");
	file = t_tmpfile();
	r = syscall(SYS_dup3, file, p[1], 0);
	t_log("raw dup3(file, write end) -> %s", t_res(r < 0 ? -1 : 0, errno));
	t_close(file);
	for (;;) {
		ssize_t n = read(p[0], buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			res.err = errno;
			break;
		}
		if (!n)
			break;
		t_read_result_add(&res, buf, (size_t)n, 5, 0);
	}
	t_log("reader: %llu bytes, then %s", (unsigned long long)res.bytes,
	      res.err ? t_errname(res.err) : "EOF");
	t_check(!res.err && res.bytes == LEN && res.first_bad == UINT64_MAX,
		"the reader did not get 64 KiB intact, then EOF");
	t_check(!fstat(p[1], &sb) && sb.st_size == 0, "bytes reached the file");
	t_log("file size %lld", (long long)sb.st_size);
	t_close(p[1]);
	t_close(p[0]);
	return t_finish();
}
