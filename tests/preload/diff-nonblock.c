// SPDX-License-Identifier: MIT
/*
 * diff-nonblock: O_NONBLOCK writes, whose results are exact.
 *
 * With nobody reading concurrently, the result of a non-blocking write
 * depends only on the pipe's state, so the transcript prints exact counts.
 * The kernel fills a pipe in page-sized slots: a write first tops up the
 * last slot by (size % 4096) bytes if that fits there, then takes whole
 * free slots, so a 1 MiB write into a 64 KiB pipe holding 100 bytes
 * returns 61440, not 65436, and a write <= PIPE_BUF that neither fits in
 * the last slot nor finds a free one fails with EAGAIN as a whole. A
 * library must return the same counts, and the pipe must then hold
 * exactly the bytes the count promises (the test drains and checks them).
 *
 * Also: O_NONBLOCK set by pipe2(), by F_SETFL later and cleared again, and
 * on a second open file description of the same pipe (open of
 * /proc/self/fd/N), where the flag belongs to one fd and not the other.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct state {
	const char *name;
	size_t writes[4]; /* pre-fill writes, 0-terminated */
};

static const struct state states[] = {
	{ "empty", { 0 } },
	{ "100", { 100, 0 } },
	{ "3x1", { 1, 1, 1, 0 } },
	{ "4096", { 4096, 0 } },
	{ "61440", { 61440, 0 } },
	{ "65436", { 65436, 0 } },
	{ "4000+4000", { 4000, 4000, 0 } },
	{ "full", { T_MIB, 0 } },
};

static const size_t sizes[] = {
	1, 100, 101, 4095, 4096, 4097, 65536, 65537, 100000, T_MIB, T_MIB + 13,
};

static unsigned char *src, *sink;

/* Checks that the pipe holds exactly stream [0, expect). */
static void check_contents(int rfd, uint64_t seed, size_t expect, const char *what)
{
	size_t got = 0;

	t_set_nonblock(rfd, true);
	for (;;) {
		ssize_t r = read(rfd, sink + got, 2 * T_MIB - got);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	size_t bad = t_verify(sink, got, seed, 0);

	t_check(got == expect && bad == got,
		"%s: pipe held %zu bytes (expected %zu), first bad %zu", what, got, expect, bad);
}

/* Writes stream bytes [pos, pos + n) from the unaligned source. */
static ssize_t put(int fd, uint64_t seed, uint64_t pos, size_t n, int *err)
{
	t_fill(src, n, seed, pos);
	ssize_t r = write(fd, src, n);

	*err = errno;
	t_scribble(src, n);
	return r;
}

static void table(void)
{
	uint64_t seed = 200;

	for (size_t si = 0; si < T_ARRAY_SIZE(states); si++) {
		for (size_t wi = 0; wi < T_ARRAY_SIZE(sizes); wi++, seed++) {
			const struct state *s = &states[si];
			char what[128];
			uint64_t pos = 0;
			int p[2], e;

			t_pipe(p, O_NONBLOCK);
			for (int k = 0; k < 4 && s->writes[k]; k++) {
				ssize_t r = put(p[1], seed, pos, s->writes[k], &e);

				if (r > 0)
					pos += (uint64_t)r;
			}
			int before = t_fionread(p[0]);
			ssize_t r = put(p[1], seed, pos, sizes[wi], &e);
			int after = t_fionread(p[0]);

			snprintf(what, sizeof(what), "state=%s(%d) write %zu", s->name, before,
				 sizes[wi]);
			t_log("%s -> %s fionread=%d", what, t_res(r, e), after);
			t_check(after == before + (r > 0 ? (int)r : 0), "%s: FIONREAD disagrees",
				what);
			check_contents(p[0], seed, (size_t)after, what);
			t_close(p[0]);
			t_close(p[1]);
		}
	}
}

/* The flag set and cleared with F_SETFL, and blocking writes in between. */
static void toggles(void)
{
	uint64_t seed = 300, pos = 0;
	struct t_reader rd;
	int p[2], e;
	ssize_t r;

	t_pipe(p, 0);
	t_set_nonblock(p[1], true);
	r = put(p[1], seed, pos, T_MIB, &e);
	t_log("F_SETFL O_NONBLOCK: write 1MiB -> %s", t_res(r, e));
	pos += r > 0 ? (uint64_t)r : 0;
	r = put(p[1], seed, pos, T_MIB, &e);
	t_log("again into the full pipe -> %s", t_res(r, e));
	pos += r > 0 ? (uint64_t)r : 0;

	t_set_nonblock(p[1], false);
	t_reader_start(&rd, p[0], 65536, seed, 0, 0);
	t_close(p[0]);
	r = put(p[1], seed, pos, T_MIB, &e);
	t_log("O_NONBLOCK cleared, reader running: write 1MiB -> %s", t_res(r, e));
	pos += r > 0 ? (uint64_t)r : 0;
	r = put(p[1], seed, pos, 3 * T_MIB + 5, &e);
	t_log("blocking write 3MiB+5 -> %s", t_res(r, e));
	pos += r > 0 ? (uint64_t)r : 0;
	t_close(p[1]);
	t_reader_finish(&rd, "toggles", pos);
}

/* One pipe, two open file descriptions: only the reopened one is non-blocking. */
static void reopened(void)
{
	uint64_t seed = 301, pos = 0;
	char path[64];
	int p[2], e;
	ssize_t r;

	t_pipe(p, 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[1]);
	int w2 = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (w2 < 0)
		t_die("open %s", path);
	t_log("reopened write end: F_GETFL has O_NONBLOCK: orig=%d reopened=%d",
	      !!(fcntl(p[1], F_GETFL) & O_NONBLOCK), !!(fcntl(w2, F_GETFL) & O_NONBLOCK));
	r = put(w2, seed, pos, 100, &e);
	t_log("reopened: write 100 -> %s", t_res(r, e));
	pos += r > 0 ? (uint64_t)r : 0;
	r = put(w2, seed, pos, T_MIB, &e);
	t_log("reopened: write 1MiB -> %s", t_res(r, e));
	pos += r > 0 ? (uint64_t)r : 0;
	r = put(w2, seed, pos, 5000, &e);
	t_log("reopened: write 5000 into the full pipe -> %s", t_res(r, e));
	pos += r > 0 ? (uint64_t)r : 0;
	t_log("fionread=%d", t_fionread(p[0]));
	check_contents(p[0], seed, (size_t)pos, "reopened");

	/* And the read end reopened for writing: another way to get a write end. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[0]);
	int w3 = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (w3 < 0)
		t_die("open %s", path);
	r = put(w3, seed + 1, 0, T_MIB, &e);
	t_log("read end reopened O_WRONLY|O_NONBLOCK: write 1MiB -> %s", t_res(r, e));
	check_contents(p[0], seed + 1, r > 0 ? (size_t)r : 0, "read end reopened");
	t_close(w3);
	t_close(w2);
	t_close(p[0]);
	t_close(p[1]);
}

/* Other capacities: 1 slot, 4 slots, 256 slots. */
static void capacities(void)
{
	static const int caps[] = { 4096, 16384, 1048576 };
	uint64_t seed = 400;

	for (size_t ci = 0; ci < T_ARRAY_SIZE(caps); ci++, seed++) {
		uint64_t pos = 0;
		int p[2], e;
		ssize_t r;

		t_pipe(p, O_NONBLOCK);
		int sz = t_pipe_size_set(p[1], caps[ci]);

		r = put(p[1], seed, pos, 5 * T_MIB, &e);
		pos += r > 0 ? (uint64_t)r : 0;
		t_log("pipe size %d: write 5MiB -> %s", sz, t_res(r, e));
		r = put(p[1], seed, pos, 1, &e);
		pos += r > 0 ? (uint64_t)r : 0;
		t_log("pipe size %d: then write 1 -> %s", sz, t_res(r, e));
		check_contents(p[0], seed, (size_t)pos, "capacity");
		r = put(p[1], seed + 100, 0, 10, &e);
		pos = r > 0 ? (uint64_t)r : 0;
		int e2;
		ssize_t r2 = put(p[1], seed + 100, pos, 5 * T_MIB, &e2);

		pos += r2 > 0 ? (uint64_t)r2 : 0;
		t_log("pipe size %d: write 10 then 5MiB -> %s, %s", sz, t_res(r, e), t_res(r2, e2));
		check_contents(p[0], seed + 100, (size_t)pos, "capacity after 10");
		t_close(p[0]);
		t_close(p[1]);
	}
}

int main(void)
{
	t_init("diff-nonblock");
	/* Source 1 byte past a page boundary: never aligned. */
	src = (unsigned char *)t_map(6 * T_MIB) + 1;
	sink = t_map(2 * T_MIB);
	table();
	toggles();
	reopened();
	capacities();
	return t_finish();
}
