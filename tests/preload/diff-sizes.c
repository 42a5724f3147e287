// SPDX-License-Identifier: MIT
/*
 * diff-sizes: write() of every interesting size, from unaligned sources,
 * read by a forked child with several read sizes.
 *
 * For each pipe size (64 KiB, 1 MiB), write size (1 B .. 5 MiB), source
 * offset from a page boundary (0, 1, 3, 4095) and read size, the writer
 * does two blocking writes of consecutive pieces of one pattern stream and
 * overwrites its buffer as soon as each write returns: the reader must
 * still see the stream, so a library that hands the caller's pages to the
 * pipe instead of copying them, or that reuses its own buffer while the
 * pipe still holds it, fails here. Blocking writes to a pipe return the
 * full count (no signals here), and the transcript prints it. 5 MiB runs
 * a thinned matrix to keep the program near one second.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static const size_t sizes[] = {
	1, 100, 4095, 4096, 4097, 65535, 65536, 65537, T_MIB + 13, 5 * T_MIB,
};
static const size_t offsets[] = { 0, 1, 3, 4095 };
static const size_t read_sizes[] = { 4096, 65536, T_MIB + 1 };
static const int pipe_sizes[] = { 65536, 1048576 };

int main(void)
{
	uint64_t seed = 1;

	t_init("diff-sizes");
	for (size_t ps = 0; ps < T_ARRAY_SIZE(pipe_sizes); ps++) {
		for (size_t si = 0; si < T_ARRAY_SIZE(sizes); si++) {
			for (size_t oi = 0; oi < T_ARRAY_SIZE(offsets); oi++) {
				for (size_t ri = 0; ri < T_ARRAY_SIZE(read_sizes); ri++, seed++) {
					size_t n = sizes[si];
					struct t_reader rd;

					/* 5 MiB: all offsets at one read size, all read sizes at one offset (time). */
					if (n == 5 * T_MIB && ri != 1 && oi != 2)
						continue;
					struct t_buf b;
					char what[128];
					int p[2];

					t_pipe(p, 0);
					int sz = t_pipe_size_set(p[1], pipe_sizes[ps]);

					t_reader_start(&rd, p[0], read_sizes[ri], seed, 0, 0);
					t_close(p[0]);
					t_buf_alloc(&b, n, offsets[oi]);

					t_fill(b.p, n, seed, 0);
					ssize_t r1 = write(p[1], b.p, n);
					int e1 = errno;

					t_scribble(b.p, n);
					t_fill(b.p, n, seed, r1 > 0 ? (uint64_t)r1 : 0);
					ssize_t r2 = write(p[1], b.p, n);
					int e2 = errno;

					t_scribble(b.p, n);
					t_close(p[1]);
					t_buf_free(&b);
					snprintf(what, sizeof(what),
						 "pipe=%d size=%zu off=%zu rs=%zu: write=%s,%s", sz,
						 n, offsets[oi], read_sizes[ri], t_res(r1, e1),
						 t_res(r2, e2));
					t_check(r1 == (ssize_t)n && r2 == (ssize_t)n,
						"%s: short blocking write", what);
					t_reader_finish(&rd, what,
							(uint64_t)(r1 > 0 ? r1 : 0) +
								(uint64_t)(r2 > 0 ? r2 : 0));
				}
			}
		}
	}
	return t_finish();
}
