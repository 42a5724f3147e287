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
 * libppipe takes its fast path for such writes where that gives the
 * kernel's result (docs/design.md, "Non-blocking writes"): a size that is
 * a multiple of the page, or any size into an empty pipe; other sizes,
 * and any write into a full pipe, take the real call (write-behind keeps
 * them all plain). Under libppipe the program also reads its counters
 * (ppipe_stats_get(), found with dlsym) and checks that each large write
 * took the path that rule gives; none of that goes into the transcript,
 * a wrong path is a FAIL line there.
 *
 * Also: O_NONBLOCK set by pipe2(), by F_SETFL and FIONBIO and cleared
 * again between writes, and behind libppipe's back (a raw fcntl); a
 * second open file description of the same pipe (open of
 * /proc/self/fd/N), where the flag belongs to one fd and not the other;
 * a ring whose pages are all still in the pipe; readiness (epoll, level-
 * and edge-triggered, and poll) after partial writes; EPIPE with SIGPIPE
 * fatal, caught and ignored; writev with an unaligned tail; threads
 * writing one non-blocking pipe (every byte intact; no atomicity above
 * PIPE_BUF is claimed, records of PIPE_BUF bytes stay whole).
 */
#include "helpers.h"

#include <ppipe.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the path each large write takes under libppipe (never in the transcript) ---- */

enum path {
	PATH_NONE, /* not a large write of a tracked pipe: libppipe does not try */
	PATH_FAST, /* its fast path answers (no fallback) */
	PATH_BLOCKING, /* a blocking write: the fast path, in every mode */
	PATH_REAL, /* it tries, and the real call answers (one fallback) */
	PATH_ANY, /* depends on timing */
};

static int (*stats_get)(struct ppipe_stats *);
static bool write_behind; /* PPIPE_MODE=uring: non-blocking writes stay plain */
static size_t min_write = 16384;

static void stats_init(void)
{
	const char *mode = getenv("PPIPE_MODE"), *mw = getenv("PPIPE_MIN_WRITE");

	stats_get = (int (*)(struct ppipe_stats *))dlsym(RTLD_DEFAULT, "ppipe_stats_get");
#ifdef T_API_WRITE
	/* The rule is write()'s, one call's path; a write through spans may be several commits. */
	stats_get = NULL;
#endif
	write_behind = mode && !strcmp(mode, "uring");
	if (mw && *mw)
		min_write = strtoul(mw, NULL, 10);
}

/*
 * The rule (docs/design.md, "Non-blocking writes"): a non-blocking write
 * of @size into a pipe holding @queued bytes.
 */
static enum path rule(size_t size, int queued)
{
	if (size < min_write)
		return PATH_NONE;
	if (size % T_PAGE == 0 || queued == 0)
		return PATH_FAST;
	return PATH_REAL;
}

struct probe {
	struct ppipe_stats st;
};

static struct ppipe_stats snapshot(void)
{
	struct ppipe_stats st = { .size = sizeof(st) };

	if (stats_get(&st))
		t_die("ppipe_stats_get");
	return st;
}

static void probe_start(struct probe *pr)
{
	if (stats_get)
		pr->st = snapshot();
}

static const char *path_name(enum path p)
{
	return p == PATH_NONE			    ? "no attempt" :
	       p == PATH_FAST || p == PATH_BLOCKING ? "the fast path" :
	       p == PATH_REAL			    ? "the real call" :
						      "any path";
}

/*
 * After one write (@r, @err): did it take @want? A write into a full pipe
 * that moved nothing (EAGAIN) is the real call's to answer.
 */
static void probe_check(const struct probe *pr, enum path want, ssize_t r, int err,
			const char *what)
{
	struct ppipe_stats now;
	uint64_t fell, acc;
	bool ok;

	if (!stats_get || want == PATH_ANY)
		return;
	if (want == PATH_FAST && r < 0 && err == EAGAIN)
		want = PATH_REAL;
	if (want == PATH_FAST && write_behind)
		want = PATH_REAL;
	if (want == PATH_BLOCKING)
		want = PATH_FAST;
	now = snapshot();
	fell = now.fallbacks - pr->st.fallbacks;
	acc = now.writes_accelerated - pr->st.writes_accelerated;
	ok = want == PATH_NONE ? !fell && !acc :
	     want == PATH_FAST ? !fell && acc == (r > 0) :
				 fell == 1 && !acc;
	t_check(ok, "%s: under libppipe %s was to answer (fallbacks +%llu, accelerated +%llu)",
		what, path_name(want), (unsigned long long)fell, (unsigned long long)acc);
}

/* ---- the stream ---- */

static unsigned char *src, *sink;

/* Checks that the pipe holds exactly stream [0, expect). */
static void check_contents(int rfd, uint64_t seed, size_t expect, const char *what)
{
	size_t got = 0;

	t_set_nonblock(rfd, true);
	for (;;) {
		ssize_t r = read(rfd, sink + got, 3 * T_MIB - got);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	t_set_nonblock(rfd, false);
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

/*
 * put() of the next @n bytes, logged as "@what -> result", with the path
 * libppipe is to take checked; the stream position moves on by the count.
 */
static ssize_t step(int fd, uint64_t seed, uint64_t *pos, size_t n, enum path want,
		    const char *what)
{
	struct probe pr;
	int e;

	probe_start(&pr);
	ssize_t r = put(fd, seed, *pos, n, &e);

	probe_check(&pr, want, r, e, what);
	t_log("%s: write %zu -> %s", what, n, t_res(r, e));
	if (r > 0)
		*pos += (uint64_t)r;
	errno = e;
	return r;
}

/* Reads and checks the next @n bytes of the stream (the pipe holds them). */
static void take(int rfd, uint64_t seed, uint64_t *rpos, size_t n, const char *what)
{
	ssize_t r = t_read_full(rfd, sink, n);

	t_check(r == (ssize_t)n && t_verify(sink, n, seed, *rpos) == n, "%s: read %zd of %zu", what,
		r, n);
	*rpos += n;
}

/* ---- exact counts from every state ---- */

struct state {
	const char *name;
	size_t writes[4]; /* pre-fill writes, 0-terminated */
};

static const struct state states[] = {
	{ "empty", { 0 } },	   { "100", { 100, 0 } },     { "3x1", { 1, 1, 1, 0 } },
	{ "4096", { 4096, 0 } },   { "8192", { 8192, 0 } },   { "60000", { 60000, 0 } },
	{ "61440", { 61440, 0 } }, { "65436", { 65436, 0 } }, { "4000+4000", { 4000, 4000, 0 } },
	{ "full", { T_MIB, 0 } },
};

static const size_t sizes[] = {
	1,     100,   101,   4095,  4096,   4097,   8191,  8192,       12289,
	61439, 65535, 65536, 65537, 100000, 131072, T_MIB, T_MIB + 13,
};

static void table(void)
{
	uint64_t seed = 200;

	for (size_t si = 0; si < T_ARRAY_SIZE(states); si++) {
		for (size_t wi = 0; wi < T_ARRAY_SIZE(sizes); wi++, seed++) {
			const struct state *s = &states[si];
			char what[128];
			uint64_t pos = 0;
			struct probe pr;
			int p[2], e;

			t_pipe(p, O_NONBLOCK);
			for (int k = 0; k < 4 && s->writes[k]; k++) {
				ssize_t r = put(p[1], seed, pos, s->writes[k], &e);

				if (r > 0)
					pos += (uint64_t)r;
			}
			int before = t_fionread(p[0]);

			snprintf(what, sizeof(what), "state=%s(%d) write %zu", s->name, before,
				 sizes[wi]);
			probe_start(&pr);
			ssize_t r = put(p[1], seed, pos, sizes[wi], &e);

			probe_check(&pr, rule(sizes[wi], before), r, e, what);
			int after = t_fionread(p[0]);

			t_log("%s -> %s fionread=%d", what, t_res(r, e), after);
			t_check(after == before + (r > 0 ? (int)r : 0), "%s: FIONREAD disagrees",
				what);
			check_contents(p[0], seed, (size_t)after, what);
			t_close(p[0]);
			t_close(p[1]);
		}
	}
}

/* writev: an unaligned tail that crosses iovecs, into an empty and a non-empty pipe. */
static void vectors(void)
{
	static const size_t lens[][3] = {
		{ 3000, 10000, 2000 }, /* 15000: 12288 + a tail of 712 + 2000 */
		{ 5000, 3192, 0 }, /* 8192 */
		{ 4096, 4096, 1 },
		{ 1, 65535, 65536 },
	};
	uint64_t seed = 250;

	for (size_t li = 0; li < T_ARRAY_SIZE(lens); li++) {
		for (int pre = 0; pre < 2; pre++, seed++) {
			struct iovec iov[3];
			size_t total = 0, at = 0;
			uint64_t pos = 0;
			char what[128];
			struct probe pr;
			int p[2], e, n = 0;

			t_pipe(p, O_NONBLOCK);
			if (pre && put(p[1], seed, pos, 100, &e) == 100)
				pos += 100;
			int before = t_fionread(p[0]);

			for (int k = 0; k < 3 && lens[li][k]; k++)
				total += lens[li][k];
			t_fill(src, total, seed, pos);
			for (int k = 0; k < 3 && lens[li][k]; k++, n++) {
				iov[k] = (struct iovec){ src + at, lens[li][k] };
				at += lens[li][k];
			}
			snprintf(what, sizeof(what), "writev %zu in %d (pipe holding %d)", total, n,
				 before);
			probe_start(&pr);
			ssize_t r = writev(p[1], iov, n);

			e = errno;
			t_scribble(src, total);
			probe_check(&pr, rule(total, before), r, e, what);
			t_log("%s -> %s fionread=%d", what, t_res(r, e), t_fionread(p[0]));
			check_contents(p[0], seed, (size_t)pos + (r > 0 ? (size_t)r : 0), what);
			t_close(p[0]);
			t_close(p[1]);
		}
	}
}

/* ---- the flag ---- */

/* The flag set and cleared with F_SETFL, and blocking writes in between. */
static void toggles(void)
{
	uint64_t seed = 300, pos = 0;
	struct t_reader rd;
	int p[2];

	t_pipe(p, 0);
	t_set_nonblock(p[1], true);
	step(p[1], seed, &pos, T_MIB, PATH_FAST, "F_SETFL O_NONBLOCK");
	step(p[1], seed, &pos, T_MIB, PATH_REAL, "again into the full pipe");

	t_set_nonblock(p[1], false);
	t_reader_start(&rd, p[0], 65536, seed, 0, 0);
	t_close(p[0]);
	step(p[1], seed, &pos, T_MIB, PATH_BLOCKING, "O_NONBLOCK cleared, reader running");
	step(p[1], seed, &pos, 3 * T_MIB + 5, PATH_BLOCKING, "blocking");
	t_close(p[1]);
	t_reader_finish(&rd, "toggles", pos);
}

static void set_fionbio(int fd, int on)
{
	if (ioctl(fd, FIONBIO, &on))
		t_die("FIONBIO");
}

/*
 * The flag switched between writes, by F_SETFL and FIONBIO, with the
 * program draining part of the pipe in between: blocking writes that fit,
 * non-blocking ones that fill it. Then the flag cleared by the raw system
 * call, which libppipe does not see: its writes must still block.
 */
static void flips(void)
{
	uint64_t seed = 320, pos = 0, rpos = 0;
	struct t_reader rd;
	int p[2];
	long fl;

	t_pipe(p, 0);
	t_set_nonblock(p[1], true);
	step(p[1], seed, &pos, 100000, PATH_FAST, "flips: F_SETFL on, empty");
	take(p[0], seed, &rpos, 10000, "flips");
	set_fionbio(p[1], 0);
	step(p[1], seed, &pos, 8192, PATH_BLOCKING, "flips: FIONBIO off, 2 slots free");
	set_fionbio(p[1], 1);
	step(p[1], seed, &pos, 20000, PATH_REAL, "flips: FIONBIO on, full");
	take(p[0], seed, &rpos, (size_t)(pos - rpos), "flips");
	step(p[1], seed, &pos, 20000, PATH_FAST, "flips: empty again");
	step(p[1], seed, &pos, 100, PATH_NONE, "flips: a small write merges into the tail");
	step(p[1], seed, &pos, 65536, PATH_FAST, "flips: fill");
	take(p[0], seed, &rpos, 3 * 4096, "flips");
	t_set_nonblock(p[1], false);
	step(p[1], seed, &pos, 3 * 4096, PATH_BLOCKING, "flips: F_SETFL off, 3 slots free");
	t_set_nonblock(p[1], true);
	step(p[1], seed, &pos, 4097, PATH_REAL, "flips: F_SETFL on, full");
	t_log("flips: fionread=%d", t_fionread(p[0]));
	take(p[0], seed, &rpos, (size_t)(pos - rpos), "flips");

	/* Cleared behind libppipe's back: it still takes the write for non-blocking. */
	fl = syscall(SYS_fcntl, p[1], F_GETFL);
	if (fl < 0 || syscall(SYS_fcntl, p[1], F_SETFL, fl & ~(long)O_NONBLOCK))
		t_die("raw F_SETFL");
	t_reader_start(&rd, p[0], 65536, seed, rpos, 0);
	t_close(p[0]);
	step(p[1], seed, &pos, T_MIB, PATH_FAST, "flips: cleared by a raw fcntl, reader running");
	/* Whether the pipe is empty or full now depends on the reader. */
	step(p[1], seed, &pos, T_MIB + 5, PATH_ANY, "flips: again, unaligned");
	step(p[1], seed, &pos, 3 * T_MIB, PATH_ANY, "flips: again, 3MiB");
	t_close(p[1]);
	t_reader_finish(&rd, "flips", pos - rpos);
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
	step(w2, seed, &pos, 100, PATH_NONE, "reopened");
	step(w2, seed, &pos, T_MIB, PATH_NONE, "reopened");
	step(w2, seed, &pos, 5000, PATH_NONE, "reopened: into the full pipe");
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

/*
 * The other way round: the pipe's own end non-blocking (tracked), a
 * second open file description blocking (libppipe never sees it), both
 * writing: what the second leaves mergeable decides the first's counts.
 */
static void second_description(void)
{
	uint64_t seed = 302, pos = 0;
	char path[64];
	int p[2];

	t_pipe(p, O_NONBLOCK);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[1]);
	int w2 = open(path, O_WRONLY | O_CLOEXEC);

	if (w2 < 0)
		t_die("open %s", path);
	step(p[1], seed, &pos, 8192, PATH_FAST, "two descriptions: own end");
	step(w2, seed, &pos, 100, PATH_NONE, "two descriptions: second, blocking");
	step(p[1], seed, &pos, 5000, PATH_REAL, "two descriptions: own end, merges");
	step(p[1], seed, &pos, T_MIB, PATH_FAST, "two descriptions: own end, fills");
	t_log("two descriptions: fionread=%d", t_fionread(p[0]));
	check_contents(p[0], seed, (size_t)pos, "two descriptions");
	step(w2, seed, &pos, 20000, PATH_NONE, "two descriptions: second, empty");
	step(p[1], seed, &pos, T_MIB, PATH_FAST, "two descriptions: own end, fills");
	t_log("two descriptions: fionread=%d", t_fionread(p[0]));
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
		char what[64];
		int p[2];

		t_pipe(p, O_NONBLOCK);
		int sz = t_pipe_size_set(p[1], caps[ci]);

		snprintf(what, sizeof(what), "pipe size %d", sz);
		step(p[1], seed, &pos, 5 * T_MIB, PATH_FAST, what);
		step(p[1], seed, &pos, 1, PATH_NONE, what);
		check_contents(p[0], seed, (size_t)pos, "capacity");
		pos = 0;
		step(p[1], seed + 100, &pos, 10, PATH_NONE, what);
		step(p[1], seed + 100, &pos, 5 * T_MIB, PATH_FAST, what);
		step(p[1], seed + 100, &pos, 5 * T_MIB + 1, PATH_REAL, what);
		check_contents(p[0], seed + 100, (size_t)pos, "capacity after 10");
		t_close(p[0]);
		t_close(p[1]);
	}
}

/*
 * The ring's pages all still in the pipe: the ring was made for a 64 KiB
 * pipe (twice that), the pipe then grew to 1 MiB and holds all of it, so
 * a write finds no page it may reuse and takes the real call, until the
 * reader has let the pages go.
 */
static void ring_full(void)
{
	uint64_t seed = 450, pos = 0;
	int p[2];

	t_pipe(p, O_NONBLOCK);
	step(p[1], seed, &pos, 65536, PATH_FAST, "ring: empty 64KiB pipe");
	int sz = t_pipe_size_set(p[1], (int)T_MIB);

	t_log("ring: pipe size %d", sz);
	step(p[1], seed, &pos, 65536, PATH_FAST, "ring: grown pipe");
	step(p[1], seed, &pos, 65536, sz > 0 ? PATH_REAL : PATH_ANY,
	     "ring: every ring page in the pipe");
	step(p[1], seed, &pos, T_MIB, sz > 0 ? PATH_REAL : PATH_ANY, "ring: still");
	t_log("ring: fionread=%d", t_fionread(p[0]));
	check_contents(p[0], seed, (size_t)pos, "ring");
	pos = 0;
	step(p[1], seed + 1, &pos, 65536, PATH_FAST, "ring: drained");
	check_contents(p[0], seed + 1, (size_t)pos, "ring drained");
	t_close(p[0]);
	t_close(p[1]);
}

/* ---- readiness ---- */

static void ready_add(int ep, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		t_die("epoll_ctl");
}

static const char *ready_str(int ep)
{
	static char out[4][32];
	static int k;
	struct epoll_event ev[4];
	char *s = out[k++ % 4];
	int n = epoll_wait(ep, ev, 4, 0);

	if (n < 0)
		t_die("epoll_wait");
	snprintf(s, 32, "%s%s%s%s", n ? "" : "-", n && (ev[0].events & EPOLLIN) ? "IN" : "",
		 n && (ev[0].events & EPOLLOUT) ? "OUT" : "",
		 n && (ev[0].events & EPOLLERR) ? "+ERR" : "");
	return s;
}

/*
 * What an event loop waits on: EPOLLOUT of the write end, level- and
 * edge-triggered, poll(), and the read end's edge-triggered EPOLLIN
 * (the kernel wakes it on every write, also one that found the pipe full).
 */
static void readiness(void)
{
	uint64_t seed = 470, pos = 0, rpos = 0;
	int p[2], lt, et, rd;

	t_pipe(p, O_NONBLOCK);
	lt = epoll_create1(EPOLL_CLOEXEC);
	et = epoll_create1(EPOLL_CLOEXEC);
	rd = epoll_create1(EPOLL_CLOEXEC);
	if (lt < 0 || et < 0 || rd < 0)
		t_die("epoll_create1");
	ready_add(lt, p[1], EPOLLOUT);
	ready_add(et, p[1], EPOLLOUT | EPOLLET);
	ready_add(rd, p[0], EPOLLIN | EPOLLET);

#define READY(what)                                                                        \
	do {                                                                               \
		struct pollfd pfd = { .fd = p[1], .events = POLLOUT };                     \
		int pn = poll(&pfd, 1, 0);                                                 \
		t_log("readiness: %s: level %s, edge %s, poll %s, reader edge %s", what,   \
		      ready_str(lt), ready_str(et), pn == 1 ? "OUT" : "-", ready_str(rd)); \
	} while (0)

	READY("empty");
	step(p[1], seed, &pos, T_MIB, PATH_FAST, "readiness: 1MiB");
	READY("after a partial write");
	take(p[0], seed, &rpos, 100, "readiness");
	READY("100 bytes read, no slot free");
	take(p[0], seed, &rpos, 3996, "readiness");
	READY("a slot free");
	step(p[1], seed, &pos, T_MIB, PATH_FAST, "readiness: into one free slot");
	READY("full again");
	step(p[1], seed, &pos, 65536, PATH_REAL, "readiness: into the full pipe");
	READY("after EAGAIN");
	step(p[1], seed, &pos, 5000, PATH_REAL, "readiness: unaligned into the full pipe");
	READY("after EAGAIN");
	take(p[0], seed, &rpos, (size_t)(pos - rpos), "readiness");
	READY("drained");
	step(p[1], seed, &pos, 20000, PATH_FAST, "readiness: unaligned into the empty pipe");
	READY("after it");
	step(p[1], seed, &pos, 65536, PATH_FAST, "readiness: fill");
	READY("full");
	take(p[0], seed, &rpos, (size_t)(pos - rpos), "readiness");
	READY("drained");
#undef READY
	close(lt);
	close(et);
	close(rd);
	t_close(p[0]);
	t_close(p[1]);
}

/* ---- EPIPE ---- */

/*
 * The readers gone: EPIPE and one SIGPIPE, whatever the size and the
 * state; a process with SIGPIPE's default action dies of it.
 */
static void epipe(void)
{
	static const size_t esizes[] = { 65536, 20000, T_MIB + 13 };
	uint64_t seed = 480;

	for (int disp = 0; disp < 3; disp++) {
		const char *how = disp == 0 ? "default" : disp == 1 ? "caught" : "ignored";

		for (size_t si = 0; si < T_ARRAY_SIZE(esizes); si++) {
			for (int pre = 0; pre < 2; pre++, seed++) {
				uint64_t pos = 0;
				char what[96];
				int p[2], e;

				t_pipe(p, O_NONBLOCK);
				if (pre && put(p[1], seed, pos, 4096, &e) == 4096)
					pos += 4096;
				t_close(p[0]);
				snprintf(what, sizeof(what), "epipe: SIGPIPE %s, pipe holding %d",
					 how, pre ? 4096 : 0);
				if (disp == 0) {
					pid_t pid = t_fork();

					if (!pid) {
						t_sigaction(SIGPIPE, SIG_DFL, true);
						put(p[1], seed, pos, esizes[si], &e);
						_exit(0);
					}
					int st = t_wait(pid);

					t_log("%s: write %zu in a child -> %s", what, esizes[si],
					      t_status(st));
				} else {
					t_sigaction(SIGPIPE, disp == 1 ? t_sig_counter : SIG_IGN,
						    true);
					t_sig_count[SIGPIPE] = 0;
					step(p[1], seed, &pos, esizes[si],
					     rule(esizes[si], pre ? 4096 : 0), what);
					t_log("%s: SIGPIPE came %d times", what,
					      (int)t_sig_count[SIGPIPE]);
				}
				t_close(p[1]);
			}
		}
	}
	t_sigaction(SIGPIPE, SIG_DFL, true);
}

/* ---- threads ---- */

#define NB_WRITERS 4
#define NB_BYTES (6 * T_MIB)

struct nb_job {
	int fd;
	unsigned int w;
	int failed;
	uint64_t eagain;
};

/*
 * A writer of its tagged stream into the shared non-blocking pipe, as an
 * event loop writes: what a write did not take is written again once
 * poll() says there is room. Writer 0 writes PIPE_BUF records, which stay
 * whole; the others mixed sizes, aligned and not.
 */
static void *nb_writer(void *arg)
{
	static const size_t mixed[] = { 65536, 20000, 12289, 100000, T_MIB, 4096 * 3 };
	struct nb_job *j = arg;
	unsigned char *buf = (unsigned char *)t_map(T_MIB + T_PAGE) + 1 + j->w;
	uint64_t pos = 0;
	unsigned int k = 0;

	while (pos < NB_BYTES) {
		size_t n = j->w == 0 ? 4096 : mixed[k % T_ARRAY_SIZE(mixed)];

		if (n > NB_BYTES - pos)
			n = (size_t)(NB_BYTES - pos);
		t_tag_fill(buf, n, j->w, pos);
		ssize_t r = write(j->fd, buf, n);

		t_scribble(buf, n);
		if (r < 0 && errno == EAGAIN) {
			struct pollfd pfd = { .fd = j->fd, .events = POLLOUT };

			j->eagain++;
			poll(&pfd, 1, -1);
			continue;
		}
		if (r <= 0) {
			j->failed = 1;
			break;
		}
		pos += (uint64_t)r;
		k++;
	}
	return NULL;
}

struct nb_reader {
	int fd;
	struct t_demux d;
};

static void *nb_read(void *arg)
{
	struct nb_reader *j = arg;
	unsigned char *buf = t_map(65536);

	for (;;) {
		ssize_t r = read(j->fd, buf, 30000);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		t_demux_feed(&j->d, buf, (size_t)r);
	}
	t_demux_end(&j->d);
	return NULL;
}

static void threads(void)
{
	static struct nb_job wj[NB_WRITERS];
	static struct nb_reader rj;
	pthread_t wt[NB_WRITERS], rt;
	int p[2];

	t_pipe(p, 0);
	t_set_nonblock(p[1], true);
	rj.fd = p[0];
	t_demux_init(&rj.d, NB_WRITERS);
	rj.d.rec_size[0] = 4096;
	if (pthread_create(&rt, NULL, nb_read, &rj))
		t_die("pthread_create");
	for (unsigned int w = 0; w < NB_WRITERS; w++) {
		wj[w] = (struct nb_job){ .fd = p[1], .w = w };
		if (pthread_create(&wt[w], NULL, nb_writer, &wj[w]))
			t_die("pthread_create");
	}
	for (unsigned int w = 0; w < NB_WRITERS; w++)
		pthread_join(wt[w], NULL);
	t_close(p[1]);
	pthread_join(rt, NULL);
	t_close(p[0]);
	for (unsigned int w = 0; w < NB_WRITERS; w++) {
		bool ok = !wj[w].failed && rj.d.pos[w] == NB_BYTES &&
			  rj.d.fnv[w] == t_tag_fnv(w, NB_BYTES);

		t_log("threads: writer %u: bytes=%llu fnv=%016llx %s", w,
		      (unsigned long long)rj.d.pos[w], (unsigned long long)rj.d.fnv[w],
		      ok ? "ok" : "BAD");
		t_check(ok, "threads: writer %u's stream is not intact", w);
	}
	t_log("threads: torn=%llu bad=%llu foreign=%llu", (unsigned long long)rj.d.torn,
	      (unsigned long long)rj.d.bad, (unsigned long long)rj.d.foreign);
	t_check(!rj.d.torn && !rj.d.bad && !rj.d.foreign, "threads: damaged");
}

int main(void)
{
	t_init("diff-nonblock");
	stats_init();
	/* Source 1 byte past a page boundary: never aligned. */
	src = (unsigned char *)t_map(6 * T_MIB) + 1;
	sink = t_map(3 * T_MIB);
	table();
	vectors();
	toggles();
	flips();
	reopened();
	second_description();
	capacities();
	ring_full();
	readiness();
	epipe();
	threads();
	return t_finish();
}
