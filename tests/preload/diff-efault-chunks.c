// SPDX-License-Identifier: MIT
/*
 * diff-efault-chunks: the exact count of a write whose source faults,
 * for every alignment, with and without a partly filled last page.
 *
 * The source is 3 good pages followed by an unmapped one, starting
 * @off bytes into the first page. What a plain pipe does (Linux 6.x,
 * transcribed): the kernel first tops up the pipe's last page with
 * (len % 4096) bytes if the pipe is not empty and they fit there, then
 * copies whole pages of the source stream, 4096 bytes at a time from
 * wherever the previous piece ended. A piece that faults part-way is
 * dropped entirely, so the count is a sum of whole pieces: an aligned
 * source faulting at a page boundary returns the good bytes, but an
 * unaligned one returns less (from offset 1: 8192, not 12287), and a
 * write whose first piece faults fails with EFAULT even though bytes
 * before the fault were readable. The pipe then holds exactly the counted
 * bytes. A library that copies with memcpy-and-catch would naturally get
 * "all good bytes"; this program shows whether it reproduces the kernel.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GOOD 3

static unsigned char *sink;

int main(void)
{
	static const struct {
		const char *name;
		size_t fill;
		int flags;
	} pre[] = {
		{ "empty", 0, 0 },
		{ "10 bytes", 10, 0 },
		{ "4000 bytes", 4000, 0 },
		{ "4096 bytes", 4096, 0 },
		{ "packet mode", 0, O_DIRECT },
	};
	static const size_t offs[] = { 0, 1, 100, 4095 };

	t_init("diff-efault-chunks");
	sink = t_map(T_MIB);
	unsigned char *m = t_map((GOOD + 1) * T_PAGE);

	t_fill(m, GOOD * T_PAGE, 21, 0);
	if (munmap(m + GOOD * T_PAGE, T_PAGE))
		t_die("munmap");

	for (size_t pi = 0; pi < T_ARRAY_SIZE(pre); pi++) {
		for (size_t oi = 0; oi < T_ARRAY_SIZE(offs); oi++) {
			size_t off = offs[oi];
			size_t good = GOOD * T_PAGE - off;
			const size_t lens[] = {
				good, good + 1, 4097, 8192, 8193, 12288, 20000, 70000,
			};

			for (size_t li = 0; li < T_ARRAY_SIZE(lens); li++) {
				unsigned char filler[4096];
				int p[2];

				t_pipe(p, pre[pi].flags | O_NONBLOCK);
				t_fill(filler, pre[pi].fill, 22, 0);
				if (pre[pi].fill &&
				    write(p[1], filler, pre[pi].fill) != (ssize_t)pre[pi].fill)
					t_die("prefill");
				errno = 0;
				ssize_t r = write(p[1], m + off, lens[li]);
				int e = errno;
				size_t got = 0;

				for (;;) {
					ssize_t n = read(p[0], sink + got, T_MIB - got);

					if (n <= 0)
						break;
					got += (size_t)n;
				}
				size_t want = pre[pi].fill + (r > 0 ? (size_t)r : 0);
				bool ok = got == want && !memcmp(sink, filler, pre[pi].fill) &&
					  t_verify(sink + pre[pi].fill, got - pre[pi].fill, 21,
						   off) == got - pre[pi].fill;

				t_log("%s, source offset %zu (%zu good bytes): write %zu -> %s; "
				      "pipe then held %zu %s",
				      pre[pi].name, off, good, lens[li], t_res(r, e), got,
				      ok ? "ok" : "BAD");
				t_check(ok, "pipe contents do not match the count");
				t_close(p[0]);
				t_close(p[1]);
			}
		}
	}
	return t_finish();
}
