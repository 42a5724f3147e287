// SPDX-License-Identifier: MIT
/*
 * diff-bytewise: a large write consumed in tiny pieces.
 *
 * One write of 1 MiB + 5 bytes, read by a child 1 byte at a time (the
 * writer is blocked for most of it, its data sitting in the pipe page by
 * page while the reader nibbles); then writes of odd sizes read 7 bytes at
 * a time; then a reader using readv() with small and empty iovecs.
 */
#include "helpers.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static unsigned char *src;

static void run(const char *what, const size_t *sizes, int n, size_t rsize, uint64_t seed)
{
	struct t_reader rd;
	char res[256];
	size_t at = 0;
	uint64_t pos = 0;
	int p[2];

	t_pipe(p, 0);
	t_reader_start(&rd, p[0], rsize, seed, 0, 0);
	t_close(p[0]);
	for (int i = 0; i < n; i++) {
		t_fill(src, sizes[i], seed, pos);
		ssize_t r = write(p[1], src, sizes[i]);

		at += (size_t)snprintf(res + at, sizeof(res) - at, " %s", t_res(r, errno));
		t_scribble(src, sizes[i]);
		pos += r > 0 ? (uint64_t)r : 0;
	}
	t_close(p[1]);
	t_log("%s: writes%s", what, res);
	t_reader_finish(&rd, what, pos);
}

static void readv_reader(void)
{
	struct t_read_result *res = t_shared(sizeof(*res));
	uint64_t seed = 1003;
	int p[2];

	t_pipe(p, 0);
	pid_t pid = t_fork();

	if (!pid) {
		t_close_all_but(&p[0], 1);
		unsigned char a[1], b[2], c[4093];
		struct iovec iov[4] = { { a, 1 }, { NULL, 0 }, { b, 2 }, { c, sizeof(c) } };

		res->fnv = T_FNV_INIT;
		res->first_bad = UINT64_MAX;
		for (;;) {
			ssize_t r = readv(p[0], iov, 4);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			unsigned char tmp[4096];
			size_t got = (size_t)r;

			memcpy(tmp, a, got < 1 ? got : 1);
			if (got > 1)
				memcpy(tmp + 1, b, got - 1 < 2 ? got - 1 : 2);
			if (got > 3)
				memcpy(tmp + 3, c, got - 3);
			t_read_result_add(res, tmp, got, seed, 0);
		}
		res->done = 1;
		_exit(0);
	}
	t_close(p[0]);
	t_fill(src, 2 * T_MIB + 3, seed, 0);
	ssize_t r = write(p[1], src, 2 * T_MIB + 3);

	t_scribble(src, 2 * T_MIB + 3);
	t_close(p[1]);
	int st = t_wait(pid);
	bool ok = res->done && res->bytes == (uint64_t)r && res->first_bad == UINT64_MAX;

	t_log("readv {1, 0, 2, 4093} reader: write 2MiB+3 -> %s; reader %s read=%llu fnv=%016llx "
	      "%s",
	      t_res(r, errno), t_status(st), (unsigned long long)res->bytes,
	      (unsigned long long)res->fnv, ok ? "ok" : "BAD");
	t_check(ok, "readv reader");
	munmap(res, sizeof(*res));
}

int main(void)
{
	static const size_t one[] = { T_MIB + 5 };
	static const size_t odd[] = { 70001, 1, 300000, 4097, 65535 };

	t_init("diff-bytewise");
	src = (unsigned char *)t_map(2 * T_MIB + 2 * T_PAGE) + 1;
	run("1MiB+5 read 1 byte at a time", one, 1, 1, 1001);
	run("odd sizes read 7 bytes at a time", odd, 5, 7, 1002);
	readv_reader();
	return t_finish();
}
