// SPDX-License-Identifier: MIT
/*
 * diff-efault: writes from source buffers that fault.
 *
 * What a plain pipe does (Linux 6.x, transcribed): a bad pointer fails
 * with EFAULT and writes nothing; a buffer that becomes inaccessible
 * part-way (an unmapped or PROT_NONE page, or the pages of a shared file
 * mapping beyond the end of the file, which raise SIGBUS when a program
 * touches them) gives a partial count: the bytes of the page-sized
 * pieces copied before the fault; with nothing copied, EFAULT. The pipe
 * then holds exactly the bytes the count says. In no case does the writer
 * get a signal: a library that copies the caller's buffer itself must not
 * crash (SIGSEGV, SIGBUS) where the kernel returns EFAULT. diff-efault-
 * chunks has the exact counts for unaligned sources and merges.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

static unsigned char *sink;

/* Reads everything in the pipe; checks it is @len bytes equal to @want. */
static void expect_contents(int rfd, const unsigned char *want, size_t len, const char *what)
{
	size_t got = 0;

	t_set_nonblock(rfd, true);
	for (;;) {
		ssize_t r = read(rfd, sink + got, 4 * T_MIB - got);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	bool ok = got == len && !memcmp(sink, want, len);

	t_log("%s: pipe holds %zu bytes fnv=%016llx %s", what, got,
	      (unsigned long long)t_fnv(T_FNV_INIT, sink, got), ok ? "ok" : "BAD");
	t_check(ok, "%s: pipe contents differ from the source's first %zu bytes", what, len);
}

static void bad_pointers(void)
{
	static const struct {
		const char *name;
		uintptr_t addr;
		size_t len;
	} cases[] = {
		{ "(void*)1", 1, 100000 },
		{ "(void*)1", 1, 10 },
		{ "(void*)1", 1, 4097 },
		{ "NULL", 0, 100000 },
		{ "NULL", 0, 0 },
		{ "kernel address", (uintptr_t)0xffff888000000000ULL, 100000 },
		{ "top of address space", (uintptr_t)-4096, 8192 },
	};
	int p[2];

	t_pipe(p, O_NONBLOCK);
	for (size_t i = 0; i < T_ARRAY_SIZE(cases); i++) {
		errno = 0;
		ssize_t r = write(p[1], (const void *)cases[i].addr, cases[i].len);
		int e = errno;

		t_log("write(%s, %zu) -> %s fionread=%d", cases[i].name, cases[i].len, t_res(r, e),
		      t_fionread(p[0]));
	}
	/* The pipe is still fine afterwards. */
	unsigned char *ok = t_map(100000);

	t_fill(ok, 100000, 11, 0);
	ssize_t r = write(p[1], ok, 65536);

	t_log("then a good write 65536 -> %s", t_res(r, errno));
	expect_contents(p[0], ok, r > 0 ? (size_t)r : 0, "after bad pointers");
	munmap(ok, 100000);
	t_close(p[0]);
	t_close(p[1]);
}

/* @good_pages accessible pages, then one made inaccessible by @how. */
static unsigned char *holey(size_t good_pages, const char *how, size_t *maplen)
{
	*maplen = (good_pages + 1) * T_PAGE;
	unsigned char *m = t_map(*maplen);

	t_fill(m, good_pages * T_PAGE, 12, 0);
	if (!strcmp(how, "unmapped")) {
		if (munmap(m + good_pages * T_PAGE, T_PAGE))
			t_die("munmap");
		*maplen -= T_PAGE;
	} else if (mprotect(m + good_pages * T_PAGE, T_PAGE, PROT_NONE)) {
		t_die("mprotect");
	}
	return m;
}

/* mmap 2 pages, drop the second, write 8192 from the first; and variations. */
static void half_unmapped(void)
{
	static const char *const hows[] = { "unmapped", "PROT_NONE" };

	for (size_t h = 0; h < T_ARRAY_SIZE(hows); h++) {
		size_t maplen;
		unsigned char *m = holey(1, hows[h], &maplen);
		int p[2];

		t_pipe(p, 0);
		errno = 0;
		ssize_t r = write(p[1], m, 8192);
		int e = errno;
		char what[96];

		snprintf(what, sizeof(what), "1 page + 1 %s page: write 8192", hows[h]);
		t_log("%s -> %s", what, t_res(r, e));
		expect_contents(p[0], m, r > 0 ? (size_t)r : 0, what);

		struct iovec iov[3] = { { m, 4096 }, { m + 4096, 5000 }, { m, 100 } };

		t_set_nonblock(p[0], false);
		errno = 0;
		r = writev(p[1], iov, 3);
		e = errno;
		snprintf(what, sizeof(what), "writev {page, 5000 %s, 100}", hows[h]);
		t_log("%s -> %s", what, t_res(r, e));
		expect_contents(p[0], m, r > 0 ? (size_t)r : 0, what);

		struct iovec iov2[3] = { { m, 100 }, { (void *)1, 5000 }, { m, 100 } };

		errno = 0;
		r = writev(p[1], iov2, 3);
		e = errno;
		t_log("writev {100, 5000 at (void*)1, 100} -> %s fionread=%d", t_res(r, e),
		      t_fionread(p[0]));
		munmap(m, maplen);
		t_close(p[0]);
		t_close(p[1]);
	}
}

/* A large write that faults after 40 pages, with a reader draining the pipe. */
static void large_fault(void)
{
	static const size_t offs[] = { 0, 1, 4095 };

	for (size_t oi = 0; oi < T_ARRAY_SIZE(offs); oi++) {
		size_t maplen;
		unsigned char *m = holey(40, "unmapped", &maplen);
		struct t_reader rd;
		char what[96];
		int p[2];

		t_pipe(p, 0);
		t_reader_start(&rd, p[0], 65536, 12, offs[oi], 0);
		t_close(p[0]);
		errno = 0;
		ssize_t r = write(p[1], m + offs[oi], 64 * T_PAGE);
		int e = errno;

		t_close(p[1]);
		snprintf(what, sizeof(what), "40 good pages from offset %zu: write 256KiB -> %s",
			 offs[oi], t_res(r, e));
		t_reader_finish(&rd, what, r > 0 ? (uint64_t)r : 0);
		munmap(m, maplen);
	}
}

/* A shared mapping of a 1-page file, 3 pages long: touching pages 2-3 is SIGBUS. */
static void beyond_eof(void)
{
	int fd = t_tmpfile();
	unsigned char page[4096];

	t_fill(page, sizeof(page), 13, 0);
	if (pwrite(fd, page, sizeof(page), 0) != (ssize_t)sizeof(page))
		t_die("pwrite");
	unsigned char *m = mmap(NULL, 3 * T_PAGE, PROT_READ, MAP_SHARED, fd, 0);

	if (m == MAP_FAILED)
		t_die("mmap file");
	int p[2];

	t_pipe(p, 0);
	errno = 0;
	ssize_t r = write(p[1], m, 3 * T_PAGE);
	int e = errno;

	t_log("file mapping, 1 page of file in 3 mapped: write 12288 -> %s", t_res(r, e));
	expect_contents(p[0], page, r > 0 ? (size_t)r : 0, "beyond EOF");
	errno = 0;
	r = write(p[1], m + T_PAGE, 8192);
	e = errno;
	t_log("write 8192 starting beyond EOF -> %s fionread=%d", t_res(r, e), t_fionread(p[0]));
	munmap(m, 3 * T_PAGE);
	t_close(fd);
	t_close(p[0]);
	t_close(p[1]);
}

int main(void)
{
	t_init("diff-efault");
	/* A crash must show as a crash, not as a hang or a silent exit. */
	t_sigaction(SIGSEGV, SIG_DFL, false);
	t_sigaction(SIGBUS, SIG_DFL, false);
	sink = t_map(4 * T_MIB);
	bad_pointers();
	half_unmapped();
	large_fault();
	beyond_eof();
	t_log("still alive");
	return t_finish();
}
