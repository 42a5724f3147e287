// SPDX-License-Identifier: MIT
/*
 * The fd cache (shim/fdtable.h), without a preload: the shim's modules are
 * linked in, and the test calls what the interposers call (fdops.h) on
 * real pipes. Each rule of fdtable.h in turn: the table's size, entries set
 * at pipe creation, dup/dup2/dup3/F_DUPFD copying an entry, close and
 * close_range forgetting (and only in their span), the epoch, the negative
 * cache, stale entries of a recycled pipe object, the inode learned from
 * the fds, libppipe's own fd numbers, fork (the child keeps the entries,
 * forgets the rest, and each side's table is its own), exec (which
 * ends the table hands on: not the close-on-exec ones), and fds learned
 * rather than made (fdlearn.h): their end is their access mode, never
 * their kind, and their writes ask the kernel for their flags.
 */
#include "config.h"
#include "exec.h"
#include "fdlearn.h"
#include "fdops.h"
#include "fdtable.h"
#include "init.h"
#include "pipe.h"
#include "real.h"
#include "registry.h"
#include "ring.h"
#include "sys.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* The object @fd's entry names, entered and left again (NULL if none), and its end. */
static struct pp_pipe *entry(int fd, enum pp_end *end)
{
	enum pp_end e = PP_END_READ;
	struct pp_pipe *p = pp_fdt_enter(fd, &e);

	if (p)
		pp_pipe_leave(p);
	if (end)
		*end = e;
	return p;
}

static int refs(const struct pp_pipe *p)
{
	return __atomic_load_n(&p->fd_refs, __ATOMIC_RELAXED);
}

static int wrefs(const struct pp_pipe *p)
{
	return __atomic_load_n(&p->wfd_refs, __ATOMIC_RELAXED);
}

static uint64_t ino_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? 0 : (uint64_t)st.st_ino;
}

/* A pipe made through the interposer (pipe2), its ends moved to @rd and @wr. */
static struct pp_pipe *tracked_pipe(int rd, int wr, int flags)
{
	int fds[2];
	struct pp_pipe *p;

	if (pp_pipe2(fds, flags)) {
		perror("pipe2");
		exit(99);
	}
	if (pp_dup3(fds[0], rd, flags & O_CLOEXEC) != rd ||
	    pp_dup3(fds[1], wr, flags & O_CLOEXEC) != wr) {
		perror("dup3");
		exit(99);
	}
	pp_close(fds[0]);
	pp_close(fds[1]);
	p = entry(wr, NULL);
	if (!p) {
		fprintf(stderr, "pipe2 made no entry\n");
		exit(99);
	}
	return p;
}

/* What pp_fd_learn() gives @fd: NULL, or the pipe (left again) with *@end. */
static struct pp_pipe *learned(int fd, enum pp_end *end, enum pp_learn why)
{
	struct pp_pipe *p = pp_fd_learn(fd, end, why);

	if (p)
		pp_pipe_leave(p);
	return p;
}

static int reopen(int fd, int flags)
{
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	r = open(path, flags);
	if (r < 0) {
		perror(path);
		exit(99);
	}
	return r;
}

/*
 * Fds learned rather than made (fdlearn.h): an end of our pipe reopened
 * joins its object as what its access mode makes it, whatever end it was
 * reopened from; its flags are asked of the kernel, and a dup keeps that;
 * pipe()'s own ends ask nothing. Under trust a FIFO's read end is a read
 * end; an O_PATH fd of a pipe is no write end; what is no pipe is plain.
 */
static void test_learn(void)
{
	struct pp_pipe *p = tracked_pipe(120, 121, 0), *q;
	enum pp_end end = PP_END_WRITE;
	int rd, wr, rw, pth, fifo, null;
	char path[4200];

	CHECK(!pp_fdt_asks_flags(120) && !pp_fdt_asks_flags(121), "pipe()'s ends ask nothing");
	CHECK(pp_fdt_asks_flags(122) && pp_fdt_asks_flags(-1),
	      "an fd the table does not name asks");
	rd = reopen(121, O_RDONLY); /* the write end's path, opened for reading */
	wr = reopen(120, O_WRONLY); /* the read end's path, opened for writing */
	rw = reopen(120, O_RDWR);
	pth = reopen(121, O_PATH);
	q = learned(rd, &end, PP_LEARN_READERS);
	CHECK(q == p && end == PP_END_READ, "reopened for reading: a read end of p (%d)", end);
	CHECK(entry(rd, &end) == p && end == PP_END_READ && pp_fdt_asks_flags(rd),
	      "in the table as one, asking its flags");
	q = learned(wr, &end, PP_LEARN_WRITE);
	CHECK(q == p && end == PP_END_WRITE && pp_fdt_asks_flags(wr),
	      "reopened for writing: a write end of p, asking (%d)", end);
	q = learned(rw, &end, PP_LEARN_READERS);
	CHECK(q == p && end == PP_END_WRITE, "O_RDWR: open for writing (%d)", end);
	q = learned(pth, &end, PP_LEARN_READERS);
	CHECK(q == p && end == PP_END_READ, "O_PATH: never a write end (%d)", end);
	CHECK(refs(p) == 6 && wrefs(p) == 3, "six fds, three of them open for writing: %d/%d",
	      refs(p), wrefs(p));
	pp_dup2(wr, 130);
	CHECK(entry(130, &end) == p && end == PP_END_WRITE && pp_fdt_asks_flags(130),
	      "a dup of a learned fd asks too");
	pp_dup2(121, 131);
	CHECK(entry(131, NULL) == p && !pp_fdt_asks_flags(131), "a dup of pipe()'s end does not");
	/* A shell's `< /dev/stdin`: an unknown fd put over a tracked one is learned first. */
	pp_close(rd);
	rd = reopen(120, O_RDONLY);
	pp_dup2(rd, 131);
	CHECK(entry(131, &end) == p && end == PP_END_READ, "dup2 over a tracked fd: a read end");

	null = open("/dev/null", O_WRONLY);
	CHECK(!learned(null, &end, PP_LEARN_WRITE) && pp_fdt_is_plain(null), "no pipe: plain");

	/* Under trust, a FIFO opened for reading is adopted as a read end, never a write end. */
	snprintf(path, sizeof(path), "%s/fifo", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	unlink(path);
	if (mkfifo(path, 0600) || (fifo = open(path, O_RDONLY | O_NONBLOCK)) < 0) {
		perror(path);
		exit(99);
	}
	unlink(path);
	CHECK(pp_sys_anon_pipe(120) && !pp_sys_anon_pipe(fifo) && !pp_sys_anon_pipe(null),
	      "pipefs tells a pipe() pipe from a FIFO and a device");
	pp_cfg.readers = PP_READERS_TRUST;
	q = learned(fifo, &end, PP_LEARN_WRITE);
	CHECK(q && q != p && end == PP_END_READ && !q->created_here,
	      "trust: a FIFO's read end is adopted as one (%d)", end);
	pp_cfg.readers = PP_READERS_VERIFY;
	pp_close(fifo);
	pp_close(null);
	pp_close(rd);
	pp_close(wr);
	pp_close(rw);
	pp_close(pth);
	pp_close(130);
	pp_close(131);
	pp_close(120);
	pp_close(121);
}

/* Before the first pipe there is no table; its size comes from RLIMIT_NOFILE. */
static void test_map(void)
{
	struct rlimit rl;
	int want;
	enum pp_end end;

	CHECK(pp_fdt_size() == 0, "no table before the first pipe: %d", pp_fdt_size());
	CHECK(pp_fdt_epoch(3) == 0 && !pp_fdt_tracked(3) && !pp_fdt_enter(3, &end),
	      "an fd outside the table");
	CHECK(pp_fdt_map() == 0, "map");
	getrlimit(RLIMIT_NOFILE, &rl);
	want = rl.rlim_max < 1024 ? 1024 : rl.rlim_max > (1 << 20) ? 1 << 20 : (int)rl.rlim_max;
	CHECK(pp_fdt_size() == want, "sized by the hard limit: %d, want %d", pp_fdt_size(), want);
	{
		uint64_t *words = pp_fdt_words;

		CHECK(pp_fdt_map() == 0 && pp_fdt_init() == 0 && pp_fdt_words == words &&
			      pp_fdt_size() == want,
		      "mapping again changes nothing");
	}
}

/* pipe2() gives both ends an entry, each taking a reference; no inode is asked. */
static void test_create(void)
{
	int fds[2];
	enum pp_end e0, e1;
	struct pp_pipe *p;

	CHECK(pp_pipe2(fds, 0) == 0, "pipe2");
	p = entry(fds[0], &e0);
	CHECK(p && entry(fds[1], &e1) == p, "both ends name one object");
	CHECK(e0 == PP_END_READ && e1 == PP_END_WRITE, "ends %d %d", e0, e1);
	CHECK(p && refs(p) == 2 && wrefs(p) == 1, "references %d/%d", p ? refs(p) : -1,
	      p ? wrefs(p) : -1);
	CHECK(p && pp_pipe_ino(p) == 0, "pipe() does not ask for the inode");
	CHECK(pp_fdt_tracked(fds[0]) && pp_fdt_tracked(fds[1]), "tracked");
	CHECK(pp_fdt_peek(fds[1]) == p, "peek");
	CHECK(pp_fdt_top() > fds[1], "top %d covers fd %d", pp_fdt_top(), fds[1]);
	CHECK(pp_fdt_epoch(fds[0]) && pp_fdt_epoch(fds[1]), "setting an entry moves its epoch");
	pp_close(fds[0]);
	pp_close(fds[1]);

	/* Packet mode is never tracked: vmspliced buffers lose the packet flag. */
	CHECK(pp_pipe2(fds, O_DIRECT) == 0, "pipe2(O_DIRECT)");
	CHECK(!entry(fds[0], NULL) && !entry(fds[1], NULL), "an O_DIRECT pipe has no entries");
	pp_close(fds[0]);
	pp_close(fds[1]);
}

/* Every way of duplicating an fd copies its entry, and what it replaces lets go. */
static void test_dup(void)
{
	struct pp_pipe *p = tracked_pipe(40, 41, 0), *q = tracked_pipe(42, 43, 0);
	int devnull = open("/dev/null", O_RDONLY);
	enum pp_end end;
	uint32_t ep;
	int d;

	d = pp_dup(41);
	CHECK(d >= 0 && entry(d, &end) == p && end == PP_END_WRITE, "dup: fd %d", d);
	CHECK(refs(p) == 3 && wrefs(p) == 2, "dup takes a reference: %d/%d", refs(p), wrefs(p));
	pp_close(d);
	CHECK(refs(p) == 2 && wrefs(p) == 1, "its close drops it: %d/%d", refs(p), wrefs(p));

	d = pp_fcntl(40, F_DUPFD_CLOEXEC, 100);
	CHECK(d >= 100 && entry(d, &end) == p && end == PP_END_READ, "F_DUPFD_CLOEXEC: fd %d", d);
	pp_close(d);

	/* dup2 over another pipe's end: the entry now names p, q lost one reference. */
	ep = pp_fdt_epoch(42);
	CHECK(pp_dup2(40, 42) == 42, "dup2");
	CHECK(entry(42, &end) == p && end == PP_END_READ, "dup2 copies the entry");
	CHECK(refs(q) == 1 && refs(p) == 3, "references q %d p %d", refs(q), refs(p));
	CHECK(pp_fdt_epoch(42) != ep, "dup2 moves the target's epoch");

	/* dup3 of something that is not a tracked pipe over a tracked fd: forgotten. */
	CHECK(pp_dup3(devnull, 42, O_CLOEXEC) == 42, "dup3");
	CHECK(!entry(42, NULL) && !pp_fdt_tracked(42), "an untracked file replaces the entry");
	CHECK(refs(p) == 2, "and its reference goes: %d", refs(p));

	/* Onto itself: nothing changes. */
	CHECK(pp_dup2(41, 41) == 41 && entry(41, &end) == p && end == PP_END_WRITE && refs(p) == 2,
	      "dup2 onto itself");

	/* The last reference of q goes with its last fd: the object is freed. */
	{
		uint32_t gen = pp_pipe_gen(q);
		int live = pp_pipes_live();

		pp_close(43);
		CHECK(__atomic_load_n(&q->state, __ATOMIC_RELAXED) == PP_PIPE_FREED,
		      "q freed with its last fd: state %d", q->state);
		CHECK(pp_pipe_gen(q) != gen, "its generation moved");
		CHECK(pp_pipes_live() == live - 1, "live pipes %d, was %d", pp_pipes_live(), live);
	}
	close(42);
	close(devnull);
	pp_close(40);
	pp_close(41);
}

/* close forgets the entry (and moves the epoch); clearing nothing writes nothing. */
static void test_close(void)
{
	struct pp_pipe *p = tracked_pipe(50, 51, 0);
	uint32_t ep = pp_fdt_epoch(50), ep_empty;

	CHECK(pp_close(50) == 0, "close");
	CHECK(!entry(50, NULL) && !pp_fdt_tracked(50) && !pp_fdt_peek(50), "closed fd forgotten");
	CHECK(pp_fdt_epoch(50) != ep, "close moves the epoch");
	CHECK(refs(p) == 1 && wrefs(p) == 1, "the read end's reference went: %d/%d", refs(p),
	      wrefs(p));
	CHECK(__atomic_load_n(&p->state, __ATOMIC_RELAXED) == PP_PIPE_LIVE,
	      "live while the write end is open");
	ep_empty = pp_fdt_epoch(50);
	pp_fdt_clear(50);
	pp_fdt_invalidate(50);
	CHECK(pp_fdt_epoch(50) == ep_empty, "an empty entry is left alone: epoch %u -> %u",
	      ep_empty, pp_fdt_epoch(50));
	pp_close(51);
	CHECK(__atomic_load_n(&p->state, __ATOMIC_RELAXED) == PP_PIPE_FREED, "freed");
}

/* close_range and closefrom forget exactly their span; CLOSE_RANGE_CLOEXEC forgets nothing. */
static void test_close_range(void)
{
	struct pp_pipe *a = tracked_pipe(60, 61, 0), *b = tracked_pipe(62, 63, 0);
	struct pp_pipe *c = tracked_pipe(64, 65, 0);

	CHECK(pp_close_range(61, 64, CLOSE_RANGE_CLOEXEC) == 0, "close_range(CLOEXEC)");
	for (int fd = 60; fd <= 65; fd++)
		CHECK(entry(fd, NULL), "fd %d keeps its entry until exec", fd);
	CHECK((fcntl(61, F_GETFD) & FD_CLOEXEC) && !(fcntl(60, F_GETFD) & FD_CLOEXEC),
	      "the flag is set in the span only");

	CHECK(pp_close_range(61, 64, 0) == 0, "close_range");
	CHECK(entry(60, NULL) == a && entry(65, NULL) == c, "the ends outside the span stay");
	for (int fd = 61; fd <= 64; fd++)
		CHECK(!entry(fd, NULL) && !pp_fdt_tracked(fd) && fcntl(fd, F_GETFD) < 0,
		      "fd %d closed and forgotten", fd);
	CHECK(refs(a) == 1 && refs(c) == 1, "one reference left each: %d %d", refs(a), refs(c));
	CHECK(__atomic_load_n(&b->state, __ATOMIC_RELAXED) == PP_PIPE_FREED,
	      "the pipe wholly inside the span is freed");

	/* Past the highest fd ever tracked, and a span of nothing tracked. */
	CHECK(pp_close_range(70, ~0U, 0) == 0, "close_range to the end");
	CHECK(entry(60, NULL) == a && entry(65, NULL) == c, "nothing below it forgotten");

	pp_closefrom(65);
	CHECK(!entry(65, NULL) && entry(60, NULL) == a, "closefrom: fd 65 forgotten, 60 kept");
	CHECK(__atomic_load_n(&c->state, __ATOMIC_RELAXED) == PP_PIPE_FREED, "c freed");
	pp_close(60);
}

/*
 * A stale entry (its object freed behind it and recycled for another pipe)
 * must not be found, and forgetting it must not take a reference of the
 * pipe now in that object.
 */
static void test_stale(void)
{
	struct pp_pipe *p = tracked_pipe(80, 81, 0), *q;
	uint32_t index = pp_pipe_index(p), gen = pp_pipe_gen(p);
	int visited = 0;

	/* Both references dropped while the entries stay: the object is freed. */
	pp_pipe_put_fd(p, PP_END_READ);
	pp_pipe_put_fd(p, PP_END_WRITE);
	CHECK(pp_pipe_gen(p) != gen, "freed: generation %u -> %u", gen, pp_pipe_gen(p));
	CHECK(!entry(80, NULL) && !entry(81, NULL), "stale entries are not entered");
	CHECK(!pp_fdt_peek(80) && !pp_fdt_peek(81), "nor peeked at");

	q = tracked_pipe(82, 83, 0);
	CHECK(pp_pipe_index(q) == index, "q reuses p's object (index %u, p's %u)", pp_pipe_index(q),
	      index);
	CHECK(!entry(80, NULL) && !entry(81, NULL), "a recycled object: still not found");
	for (int fd = 0; fd < pp_fdt_top(); fd++) {
		enum pp_end end;

		if (pp_fdt_peek_end(fd, &end) == q)
			visited++;
	}
	CHECK(visited == 2, "only q's own two fds name it: %d", visited);

	pp_fdt_clear(80);
	pp_fdt_dup(81, 84);
	CHECK(refs(q) == 2 && wrefs(q) == 1, "q's references untouched: %d/%d", refs(q), wrefs(q));
	CHECK(!entry(84, NULL), "dup of a stale entry copies nothing");
	pp_fdt_clear(81);
	CHECK(refs(q) == 2 && __atomic_load_n(&q->state, __ATOMIC_RELAXED) == PP_PIPE_LIVE,
	      "q alive: %d references", refs(q));
	close(80);
	close(81);
	pp_close(82);
	pp_close(83);
}

/* The negative cache: known not to be a pipe, and never confused with one. */
static void test_plain(void)
{
	int fd = open("/dev/null", O_WRONLY);
	struct pp_pipe *p = tracked_pipe(86, 87, 0);
	uint32_t ep;

	pp_fdt_mark_plain(fd);
	CHECK(pp_fdt_is_plain(fd), "marked plain");
	CHECK(!pp_fdt_tracked(fd) && !entry(fd, NULL) && !pp_fdt_peek(fd), "plain is not tracked");
	pp_fdt_clear(fd);
	CHECK(!pp_fdt_is_plain(fd), "close forgets that too");

	/* A tracked fd marked plain lets its pipe go. */
	ep = pp_fdt_epoch(87);
	pp_fdt_mark_plain(87);
	CHECK(pp_fdt_is_plain(87) && !entry(87, NULL), "now plain");
	CHECK(refs(p) == 1 && wrefs(p) == 0, "its reference went: %d/%d", refs(p), wrefs(p));
	CHECK(pp_fdt_epoch(87) != ep, "the epoch moved");
	pp_fdt_set(87, p, PP_END_WRITE, false);
	CHECK(!pp_fdt_is_plain(87) && entry(87, NULL) == p, "set again");
	CHECK(!pp_fdt_is_plain(86), "the other end is not plain");
	close(fd);
	pp_close(86);
	pp_close(87);
}

/* The epoch moves with every change of the entry and every invalidation, nothing else. */
static void test_epoch(void)
{
	struct pp_pipe *p = tracked_pipe(90, 91, 0);
	uint32_t ep = pp_fdt_epoch(91);

	CHECK(pp_fdt_epoch(91) == ep, "reading it moves nothing");
	(void)entry(91, NULL);
	CHECK(pp_fdt_epoch(91) == ep, "entering moves nothing");
	pp_fdt_invalidate(91);
	CHECK(pp_fdt_epoch(91) == ep + 1, "invalidate: %u -> %u", ep, pp_fdt_epoch(91));
	CHECK(entry(91, NULL) == p, "and keeps the entry");
	pp_fdt_set(91, p, PP_END_WRITE, false);
	CHECK(pp_fdt_epoch(91) == ep + 2, "set again, even to the same: %u", pp_fdt_epoch(91));
	CHECK(refs(p) == 2, "without a reference more: %d", refs(p));
	CHECK(pp_fdt_epoch(-1) == 0 && pp_fdt_epoch(pp_fdt_size()) == 0, "outside: 0");
	pp_fdt_invalidate(pp_fdt_size() + 5);
	pp_fdt_set(pp_fdt_size(), p, PP_END_WRITE, false);
	pp_fdt_set(-1, p, PP_END_WRITE, false);
	CHECK(refs(p) == 2, "entries outside the table take nothing: %d", refs(p));
	pp_close(90);
	pp_close(91);
}

/* The inode comes from the fds, once asked; fds that disagree make the pipe plain. */
static void test_learn_ino(void)
{
	struct pp_pipe *p = tracked_pipe(100, 101, 0), *q = tracked_pipe(102, 103, 0);
	int other[2];

	CHECK(pp_fdt_learn_ino(p, 101) == ino_of(101) && pp_pipe_ino(p) == ino_of(101),
	      "learned from the hint");
	CHECK(!pp_pipe_unsafe(p), "agreeing fds");

	/* q's read end switched to another pipe behind the table's back. */
	if (pipe(other)) {
		perror("pipe");
		exit(99);
	}
	dup2(other[0], 102);
	CHECK(pp_fdt_learn_ino(q, 103) == ino_of(103), "the hint's inode first");
	CHECK(pp_pipe_unsafe(q), "fds disagree: plain");
	CHECK(strstr(pp_pipe_reason(q), "switched"), "reason: %s", pp_pipe_reason(q));

	/* learn_all: every pipe without one; none when no fd of it can tell. */
	{
		struct pp_pipe *r = tracked_pipe(104, 105, 0), *s = tracked_pipe(106, 107, 0);
		int devnull = open("/dev/null", O_RDONLY);

		dup2(devnull, 106);
		dup2(devnull, 107);
		pp_fdt_learn_all();
		CHECK(pp_pipe_ino(r) == ino_of(104), "learn_all: %llu",
		      (unsigned long long)pp_pipe_ino(r));
		CHECK(pp_pipe_ino(s) == 0 && pp_fdt_learn_ino(s, 106) == 0,
		      "no fd of it is a pipe: no inode");
		close(devnull);
		pp_close(104);
		pp_close(105);
		pp_close(106);
		pp_close(107);
	}
	close(other[0]);
	close(other[1]);
	for (int fd = 100; fd <= 103; fd++)
		pp_close(fd);
}

/*
 * The capacity the reuse rule counts on: never below what this process
 * saw itself, whatever the shared state (a file any process of the tree
 * can write) says.
 */
static void test_capacity(void)
{
	struct pp_pipe *p = tracked_pipe(110, 111, 0);
	long real = fcntl(111, F_GETPIPE_SZ);

	pp_fdt_learn_ino(p, 111);
	CHECK(pp_pipe_capacity(p, 111) == (uint32_t)real, "asked once: %u, kernel %ld",
	      pp_pipe_capacity(p, 111), real);
	CHECK(pp_pipe_share(p) == 0 && p->shared, "shared");
	/* Scribbled: a capacity below the pipe's would free pages it still holds. */
	__atomic_store_n(&pp_pipe_sh(p)->capacity_max, 4096, __ATOMIC_RELAXED);
	CHECK(pp_pipe_capacity(p, 111) == (uint32_t)real, "a scribbled capacity: %u, kernel %ld",
	      pp_pipe_capacity(p, 111), real);
	/* Another process grew it: the larger value counts. */
	__atomic_store_n(&pp_pipe_sh(p)->capacity_max, 4 * (uint32_t)real, __ATOMIC_RELAXED);
	CHECK(pp_pipe_capacity(p, 111) == 4 * (uint32_t)real, "grown elsewhere: %u",
	      pp_pipe_capacity(p, 111));
	pp_close(110);
	pp_close(111);
}

static void *idle_thread(void *arg)
{
	return arg;
}

/*
 * A write's brief hold on its file: while threads share the fd table and
 * it has not grown to the spare range, from fd 63 (no growth, no RCU wait);
 * once it has, or with one thread, in the spare range.
 */
static void test_dup_brief(int spare_base)
{
	pthread_t t;
	long fd;

	if (pthread_create(&t, NULL, idle_thread, NULL) || pthread_join(t, NULL)) {
		perror("pthread_create");
		exit(99);
	}
	fd = pp_sys_dup_brief(1);
	CHECK(fd == 63 || spare_base <= 63, "threaded, table not grown: fd %ld", fd);
	CHECK(fd >= 0 && (fcntl((int)fd, F_GETFD) & FD_CLOEXEC), "close-on-exec: %ld", fd);
	close((int)fd);
	fd = pp_sys_dup_spare(1, true); /* the table grows to the spare range */
	close((int)fd);
	fd = pp_sys_dup_brief(1);
	CHECK(fd >= spare_base, "once grown, the spare range: %ld, base %d", fd, spare_base);
	close((int)fd);
}

/* libppipe's own fds: in the upper half of the soft limit (at most from 512). */
static void test_dup_spare(int spare_base)
{
	struct rlimit rl, low;
	long fd = pp_sys_dup_spare(1, true);

	CHECK(fd >= spare_base, "spare fd %ld, base %d", fd, spare_base);
	CHECK(fd >= 0 && (fcntl((int)fd, F_GETFD) & FD_CLOEXEC), "close-on-exec as asked");
	close((int)fd);
	fd = pp_sys_dup_spare(1, false);
	CHECK(fd >= spare_base && !(fcntl((int)fd, F_GETFD) & FD_CLOEXEC), "inheritable: %ld", fd);
	close((int)fd);
	/* The soft limit lowered below the range since: anywhere, then. */
	getrlimit(RLIMIT_NOFILE, &rl);
	if (spare_base > 16) {
		low = rl;
		low.rlim_cur = (rlim_t)spare_base / 2;
		setrlimit(RLIMIT_NOFILE, &low);
		fd = pp_sys_dup_spare(1, true);
		CHECK(fd >= 0 && fd < spare_base / 2, "under a lowered limit: %ld", fd);
		if (fd >= 0)
			close((int)fd);
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* for_each visits exactly the tracked fds, with their ends. */
static void count_fd(int fd, struct pp_pipe *p, enum pp_end end, void *arg)
{
	int *seen = arg;

	(void)p;
	if (fd >= 110 && fd <= 113)
		seen[fd - 110] = 1 + (int)end;
	else
		seen[4]++;
}

static void test_for_each(void)
{
	int seen[5] = { 0 };

	tracked_pipe(110, 111, 0);
	tracked_pipe(112, 113, 0);
	pp_fdt_mark_plain(112);
	pp_fdt_for_each(count_fd, seen);
	CHECK(seen[0] == 1 && seen[1] == 2 && seen[2] == 0 && seen[3] == 2,
	      "read end, write end, plain fd skipped, write end: %d %d %d %d", seen[0], seen[1],
	      seen[2], seen[3]);
	CHECK(seen[4] == 0, "no other fd: %d", seen[4]);
	for (int fd = 110; fd <= 113; fd++)
		pp_close(fd);
}

/*
 * fork (init.c's handlers, registered by its constructor): the child keeps
 * every entry, naming the same objects, with the parent's users, rings and
 * counters forgotten; the parent takes the child's registry hold; each
 * side's table is its own afterwards.
 */
static void test_fork(void)
{
	struct pp_pipe *p = tracked_pipe(120, 121, 0);
	uint32_t index = pp_pipe_index(p), gen = pp_pipe_gen(p);
	struct pp_ring *r = pp_ring_get(&p->rings, &p->gen, 65536);
	struct pp_shared *sh;
	int status = -1;
	pid_t pid;

	CHECK(r && p->rings.head == r, "a ring for the parent");
	p->cnt.v[PP_CNT_writes_accelerated] = 5;
	/* As if another thread were inside it (it does not come along). */
	CHECK(pp_pipe_enter(p), "enter");
	pid = fork();
	if (pid == 0) {
		enum pp_end end;
		struct pp_pipe *c = pp_fdt_enter(121, &end);

		failures = 0;
		CHECK(c == p && end == PP_END_WRITE, "the child keeps the entry");
		CHECK(c && pp_pipe_index(c) == index && pp_pipe_gen(c) == gen, "same object");
		CHECK(c && c->users == 1, "the parent's users are not the child's: %d",
		      c ? c->users : -1);
		if (c)
			pp_pipe_leave(c);
		CHECK(entry(120, &end) == p && end == PP_END_READ, "and the read end's");
		CHECK(refs(p) == 2, "with its references: %d", refs(p));
		CHECK(!p->rings.head, "the parent's rings are not the child's");
		CHECK(!p->cnt.v[PP_CNT_writes_accelerated], "nor its counters");
		CHECK(p->shared && pp_pipe_sh(p)->ino == ino_of(121), "in the registry");
		pp_close(120);
		CHECK(!entry(120, NULL), "the child's close forgets in the child");
		exit(failures ? 1 : 0);
	}
	CHECK(pid > 0, "fork: %s", strerror(errno));
	pp_pipe_leave(p);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);
	CHECK(entry(120, NULL) == p && refs(p) == 2, "the parent's entry stays: %d", refs(p));
	CHECK(p->rings.head == r && p->cnt.v[PP_CNT_writes_accelerated] == 5,
	      "the parent's ring and counters stay");
	sh = pp_pipe_sh(p);
	CHECK(p->shared && sh != &p->local, "shared before the fork");
	CHECK(sh->holders == 1, "the child's hold given back at its exit: %u", sh->holders);
	pp_close(120);
	pp_close(121);
}

/*
 * exec: the pipes whose ends the table says survive it (not close-on-exec)
 * are charged to the new image; a pipe whose ends are all close-on-exec is
 * not. A failed exec undoes it.
 */
static void test_exec(void)
{
	struct pp_pipe *kept = tracked_pipe(130, 131, 0);
	struct pp_pipe *gone = tracked_pipe(132, 133, O_CLOEXEC);
	struct pp_pipe *half = tracked_pipe(134, 135, O_CLOEXEC);
	char *envp[] = { "LD_PRELOAD=libppipe.so", "HOME=/", NULL };
	char *out[4];
	char **env;
	struct pp_exec_ctx x;
	struct pp_shared *s;
	bool var = false;

	fcntl(135, F_SETFD, 0); /* one end of it survives */
	CHECK(pp_exec_env_slots(envp) == 4, "slots: %zu", pp_exec_env_slots(envp));
	env = pp_exec_prepare(&x, "/bin/prog", envp, out, pp_exec_env_slots(envp));
	for (char **e = env; *e; e++)
		var |= !strncmp(*e, "PPIPE_REGISTRY=", 15);
	CHECK(env == out && var, "the registry's variable is passed on");
	s = pp_reg_find(pp_pipe_ino(kept));
	CHECK(s && s->pending == 1, "a pipe with inherited ends is charged: %u",
	      s ? s->pending : 0);
	s = pp_reg_find(pp_pipe_ino(half));
	CHECK(s && s->pending == 1, "one inherited end is enough: %u", s ? s->pending : 0);
	s = pp_reg_find(pp_pipe_ino(gone));
	CHECK(!s || !s->pending, "close-on-exec ends are not handed on: %u", s ? s->pending : 0);
	pp_exec_failed(&x);
	s = pp_reg_find(pp_pipe_ino(kept));
	CHECK(s && !s->pending && s->holders == 1, "a failed exec undoes the charge: %u/%u",
	      s ? s->pending : 0, s ? s->holders : 0);
	CHECK(!pp_pipe_unsafe(kept) && !pp_pipe_unsafe(gone) && !pp_pipe_unsafe(half),
	      "nothing turned plain");
	for (int fd = 130; fd <= 135; fd++)
		pp_close(fd);
}

int main(void)
{
	struct rlimit rl;
	int spare_base = 0;

	/* What the constructor does in a preloaded process; here too, explicitly. */
	pp_real_start();
	pp_config_defaults(&pp_cfg);
	if (!pp_active()) {
		fprintf(stderr, "init.c's constructor did not run: no fork handlers to test\n");
		return 99;
	}
	/* Room for the fixed fd numbers below, and a known spare range. */
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < 1024 && rl.rlim_max >= 1024) {
		rl.rlim_cur = 1024;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur >= 128)
		spare_base = rl.rlim_cur / 2 > 512 ? 512 : (int)(rl.rlim_cur / 2);

	test_map();
	test_create();
	test_dup();
	test_close();
	test_close_range();
	test_stale();
	test_plain();
	test_epoch();
	test_learn_ino();
	test_capacity();
	test_dup_brief(spare_base);
	test_dup_spare(spare_base);
	test_for_each();
	test_fork();
	test_exec();
	test_learn();
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
