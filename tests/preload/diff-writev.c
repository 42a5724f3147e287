// SPDX-License-Identifier: MIT
/*
 * diff-writev: writev() with few and many, small and large, zero-length
 * and unaligned iovecs, totals below and above 64 KiB, up to IOV_MAX and
 * one past it.
 *
 * Each iovec points at its own slice of a scratch mapping, with gaps
 * between slices, so the source is never one contiguous run. Each layout
 * is written twice (consecutive pieces of one pattern stream), and the
 * sources are overwritten as soon as each call returns. A forked reader
 * checks the stream. Return values and errno are printed.
 */
#include "helpers.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_IOV 1100

struct layout {
	const char *name;
	int count;
	size_t len[MAX_IOV];
};

static struct layout layouts[20];
static int nlayouts;

static struct layout *add(const char *name)
{
	struct layout *l = &layouts[nlayouts++];

	l->name = name;
	l->count = 0;
	return l;
}

static void push(struct layout *l, size_t len, int times)
{
	for (int i = 0; i < times; i++)
		l->len[l->count++] = len;
}

static void build_layouts(void)
{
	struct layout *l;

	push(add("3x1000"), 1000, 3);
	push(add("5 empty"), 0, 5);
	l = add("0,4096,0,1,0,4095,0");
	push(l, 0, 1), push(l, 4096, 1), push(l, 0, 1), push(l, 1, 1), push(l, 0, 1);
	push(l, 4095, 1), push(l, 0, 1);
	push(add("64x1024"), 1024, 64);
	push(add("65x1024"), 1024, 65);
	push(add("1024x64 (IOV_MAX)"), 64, 1024);
	push(add("1024x1000 (IOV_MAX)"), 1000, 1024);
	push(add("1025x1 (IOV_MAX+1)"), 1, 1025);
	l = add("1MiB+13,0,5,70000,3");
	push(l, T_MIB + 13, 1), push(l, 0, 1), push(l, 5, 1), push(l, 70000, 1), push(l, 3, 1);
	push(add("2x2MiB"), 2 * T_MIB, 2);
	push(add("100x4097"), 4097, 100);
	push(add("1x65537"), 65537, 1);
	l = add("500x0,100000,500x0");
	push(l, 0, 500), push(l, 100000, 1), push(l, 0, 500);
	l = add("20x(1,65535)");
	for (int i = 0; i < 20; i++)
		push(l, 1, 1), push(l, 65535, 1);
	l = add("4095,4097,8191,1 x8");
	for (int i = 0; i < 8; i++)
		push(l, 4095, 1), push(l, 4097, 1), push(l, 8191, 1), push(l, 1, 1);
}

int main(void)
{
	static struct iovec iov[MAX_IOV];
	uint64_t seed = 100;

	t_init("diff-writev");
	build_layouts();
	for (int li = 0; li < nlayouts; li++, seed++) {
		struct layout *l = &layouts[li];
		size_t total = 0, span = 0;
		struct t_reader rd;
		char what[160];
		int p[2];

		for (int i = 0; i < l->count; i++) {
			total += l->len[i];
			span += l->len[i] + (size_t)(i % 7) + 1;
		}
		unsigned char *area = t_map(span + T_PAGE);

		t_pipe(p, 0);
		t_reader_start(&rd, p[0], li % 2 ? 4096 : 65536, seed, 0, 0);
		t_close(p[0]);

		uint64_t pos = 0;
		ssize_t r[2];
		int e[2];

		for (int round = 0; round < 2; round++) {
			size_t at = 1;
			uint64_t fillpos = pos;

			for (int i = 0; i < l->count; i++) {
				iov[i].iov_base = area + at;
				iov[i].iov_len = l->len[i];
				t_fill(area + at, l->len[i], seed, fillpos);
				fillpos += l->len[i];
				at += l->len[i] + (size_t)(i % 7) + 1;
			}
			r[round] = writev(p[1], iov, l->count);
			e[round] = errno;
			t_scribble(area, span);
			if (r[round] > 0)
				pos += (uint64_t)r[round];
		}
		t_close(p[1]);
		snprintf(what, sizeof(what), "%s total=%zu: writev=%s,%s", l->name, total,
			 t_res(r[0], e[0]), t_res(r[1], e[1]));
		if (l->count <= IOV_MAX)
			t_check(r[0] == (ssize_t)total && r[1] == (ssize_t)total,
				"%s: short blocking writev", what);
		t_reader_finish(&rd, what, pos);
		munmap(area, span + T_PAGE);
	}
	return t_finish();
}
