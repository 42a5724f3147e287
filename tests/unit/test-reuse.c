// SPDX-License-Identifier: MIT
/*
 * The reuse rule (shim/ring.h), without a preload, on real pipes: ring
 * pages are vmspliced into a pipe as the engine does it, and the test
 * reads the pipe itself, so that the kernel decides what the pipe still
 * holds. A page may be written again only once the pipe has let go of it.
 * Case by case:
 *   - never pushed: at once, without asking anything;
 *   - slots: capacity/page pushes of this ring after the page prove it
 *     consumed, after one identity check; fewer prove nothing;
 *   - FIONREAD: fewer bytes queued than the ring pushed after the page,
 *     to the byte, before and after it;
 *   - another thread's ring on the same pipe: its pushes are not this
 *     ring's evidence, and its bytes in the pipe count against it;
 *   - write-behind: the staging pipe and the target together, the
 *     capacities of both and the bytes both hold;
 *   - the fd no longer names the pipe: no reuse at all;
 *   - trimmed pages are fresh: writing them changes nothing the pipe holds;
 *   - a thread that exited: its ring is taken over by the next thread that
 *     needs one on the pipe, evidence and all, or unmapped; trimming
 *     unmaps the rings of exited threads nobody took over.
 * Every page the rule gives back is overwritten at once, and the reader
 * checks every byte it reads: a page given back too early shows there.
 */
#include "config.h"
#include "fdtable.h"
#include "pipe.h"
#include "pool.h"
#include "real.h"
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check.h"
#include "fdtable.h"

#define PAGE 4096

/* One pipe and the byte stream through it: what went in, what came out. */
struct stream {
	int rd, wr;
	uint64_t ino;
	uint64_t in, out; /* stream offsets */
	int bad; /* bytes read that were not what was written */
};

static unsigned char byte_at(uint64_t k)
{
	return (unsigned char)(k * 131 + (k >> 12) * 7 + 1);
}

static void open_stream(struct stream *s, int capacity)
{
	int fds[2];
	struct stat st;

	if (pipe2(fds, O_NONBLOCK) || fstat(fds[1], &st)) {
		perror("pipe2");
		exit(99);
	}
	if (capacity && fcntl(fds[1], F_SETPIPE_SZ, capacity) < capacity) {
		perror("F_SETPIPE_SZ");
		exit(99);
	}
	*s = (struct stream){ .rd = fds[0], .wr = fds[1], .ino = (uint64_t)st.st_ino };
}

static void close_stream(struct stream *s)
{
	close(s->rd);
	close(s->wr);
}

/* Reads @n bytes from @fd, the next of @s's stream, checking each. */
static void drain_from(struct stream *s, int fd, size_t n)
{
	static unsigned char buf[1 << 20];

	while (n) {
		ssize_t got = read(fd, buf, n < sizeof(buf) ? n : sizeof(buf));

		if (got <= 0) {
			fprintf(stderr, "read: %zd (%s), %zu short\n", got, strerror(errno), n);
			exit(99);
		}
		for (ssize_t i = 0; i < got; i++)
			s->bad += buf[i] != byte_at(s->out + (uint64_t)i);
		s->out += (uint64_t)got;
		n -= (size_t)got;
	}
}

static void drain(struct stream *s, size_t n)
{
	drain_from(s, s->rd, n);
}

static long queued(int fd)
{
	int n = -1;

	return ioctl(fd, FIONREAD, &n) ? -1 : n;
}

/*
 * What the engine does with a region the rule gave back: fills it with the
 * next bytes of the stream (after scribbling it, as a copy that faults half
 * way would), vmsplices it into @fd whole, records and commits it.
 */
static void push(struct stream *s, struct pp_ring *r, long off, size_t len, int fd)
{
	struct iovec iov = { r->data + off, len };
	ssize_t n;

	if (off < 0) {
		fprintf(stderr, "push of a region the rule refused\n");
		exit(99);
	}
	memset(r->data + off, 0xee, len);
	for (size_t i = 0; i < len; i++)
		r->data[off + (long)i] = (char)byte_at(s->in + i);
	n = vmsplice(fd, &iov, 1, SPLICE_F_NONBLOCK);
	if (n != (ssize_t)len) {
		fprintf(stderr, "vmsplice: %zd of %zu (%s)\n", n, len, strerror(errno));
		exit(99);
	}
	s->in += len;
	pp_ring_pushed(r, (size_t)off, len);
	pp_ring_commit(r, (size_t)off, len);
}

/* The rule's verdict on @len bytes at @off (where the head is put first). */
static long reserve_at(struct pp_ring *r, size_t off, size_t len, int fd, int stage_fd,
		       uint64_t ino, uint32_t cap, struct pp_ring_checks *c)
{
	r->head = off;
	return pp_ring_reserve(r, len, fd, stage_fd, ino, cap, c);
}

/* A pipe object and this thread's ring for it. */
static struct pp_ring *ring_for(struct pp_pipe **pp, uint32_t capacity)
{
	/* The pipe objects are mapped with the fd table, as pipe() maps them. */
	struct pp_pipe *p = pp_fdt_init() ? NULL : pp_pipe_new(0, true, (int)capacity);
	struct pp_ring *r = p ? pp_ring_get(&p->rings, &p->gen, capacity) : NULL;

	if (!r) {
		fprintf(stderr, "no ring\n");
		exit(99);
	}
	*pp = p;
	return r;
}

static void free_ring(struct pp_pipe *p)
{
	pp_pipe_get_fd(p, PP_END_WRITE);
	pp_pipe_put_fd(p, PP_END_WRITE); /* the last reference: rings freed */
}

/* Pages never pushed: given at once, nothing asked. */
static void test_fresh(void)
{
	struct pp_pipe *p;
	struct pp_ring *r = ring_for(&p, 65536);
	struct pp_ring_checks c = { 0 };

	CHECK(r->size == 2 * 65536 && r->max_chunk == 65536, "ring %zu, chunks %zu", r->size,
	      r->max_chunk);
	CHECK(reserve_at(r, 0, r->max_chunk, -1, -1, 0, 65536, &c) == 0, "fresh pages");
	CHECK(reserve_at(r, r->size - PAGE, PAGE, -1, -1, 0, 65536, &c) == (long)(r->size - PAGE),
	      "the last page");
	CHECK(reserve_at(r, r->size - PAGE, 2 * PAGE, -1, -1, 0, 65536, &c) == 0,
	      "a region past the end starts over at 0");
	CHECK(reserve_at(r, 0, r->max_chunk + 1, -1, -1, 0, 65536, &c) == -EBUSY,
	      "more than a chunk: never");
	CHECK(!c.fionread && !c.identity, "nothing asked: %llu %llu",
	      (unsigned long long)c.fionread, (unsigned long long)c.identity);
	free_ring(p);
}

/*
 * FIONREAD: a pipe of 64 slots, a ring of 32 pages, so that the slot rule
 * never proves anything and every reuse asks the pipe.
 */
static void test_fionread(void)
{
	struct pp_pipe *p;
	struct pp_ring *r;
	struct pp_ring_checks c = { 0 };
	struct stream s;
	const uint32_t cap = 64 * PAGE;

	pp_cfg.ring_size = 32 * PAGE;
	r = ring_for(&p, cap);
	pp_cfg.ring_size = 0;
	open_stream(&s, (int)cap);

	/* A alone: held until its last byte is read. */
	push(&s, r, reserve_at(r, 0, 4 * PAGE, s.wr, -1, s.ino, cap, &c), 4 * PAGE, s.wr);
	CHECK(reserve_at(r, 0, 4 * PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY, "A in the pipe");
	CHECK(c.fionread == 1 && c.identity == 1, "asked the pipe: %llu, the fd: %llu",
	      (unsigned long long)c.fionread, (unsigned long long)c.identity);
	CHECK(reserve_at(r, 2 * PAGE, PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY, "any page of it");
	drain(&s, 4 * PAGE - 1);
	CHECK(reserve_at(r, 0, 4 * PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY,
	      "one byte of A left: %ld queued", queued(s.rd));
	CHECK(reserve_at(r, 4 * PAGE, 4 * PAGE, s.wr, -1, s.ino, cap, &c) == 4 * PAGE,
	      "the pages after it were never pushed");
	drain(&s, 1);
	CHECK(reserve_at(r, 0, 4 * PAGE, s.wr, -1, s.ino, cap, &c) == 0, "A read: reusable");

	/* A, then B after it: A is free once queued <= what B pushed. */
	push(&s, r, reserve_at(r, 0, 4 * PAGE, s.wr, -1, s.ino, cap, &c), 4 * PAGE, s.wr);
	push(&s, r, reserve_at(r, 4 * PAGE, 3 * PAGE, s.wr, -1, s.ino, cap, &c), 3 * PAGE, s.wr);
	CHECK(reserve_at(r, 0, PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY, "A and B queued");
	drain(&s, 4 * PAGE - 1);
	CHECK(reserve_at(r, 3 * PAGE, PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY,
	      "queued %ld, B pushed %d after A: A's last byte is in", queued(s.rd), 3 * PAGE);
	CHECK(reserve_at(r, 0, 4 * PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY,
	      "a region is decided by its newest page");
	CHECK(reserve_at(r, 0, 3 * PAGE, s.wr, -1, s.ino, cap, &c) == 0,
	      "A's first pages are read: reusable");
	drain(&s, 1);
	CHECK(reserve_at(r, 0, 4 * PAGE, s.wr, -1, s.ino, cap, &c) == 0,
	      "queued %ld = what B pushed after A: A is out", queued(s.rd));
	CHECK(reserve_at(r, 4 * PAGE, PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY, "B is not");
	/* A region over A and B is B's to decide. */
	CHECK(reserve_at(r, 2 * PAGE, 4 * PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY,
	      "a region reaching into B");

	/* Partly written pages: the last one counts as a whole slot, its bytes as bytes. */
	push(&s, r, reserve_at(r, 8 * PAGE, PAGE + 100, s.wr, -1, s.ino, cap, &c), PAGE + 100,
	     s.wr);
	drain(&s, 3 * PAGE); /* B */
	CHECK(reserve_at(r, 8 * PAGE, 2 * PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY,
	      "C in the pipe");
	drain(&s, PAGE + 99);
	CHECK(reserve_at(r, 9 * PAGE, PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY,
	      "C's last byte in the pipe");
	drain(&s, 1);
	CHECK(reserve_at(r, 8 * PAGE, 2 * PAGE, s.wr, -1, s.ino, cap, &c) == 8 * PAGE,
	      "C read: reusable");
	CHECK(!s.bad, "%d bytes read were not the ones written", s.bad);
	close_stream(&s);
	free_ring(p);
}

/*
 * Slots: a 16-slot pipe. 16 pushes of this ring after a page prove the
 * pipe let go of it (it cannot hold 17), after one identity check; 15 do
 * not, and the exact test decides.
 */
static void test_slots(void)
{
	struct pp_pipe *p;
	struct pp_ring *r;
	struct pp_ring_checks c = { 0 };
	struct stream s;
	const uint32_t cap = 16 * PAGE;
	uint64_t fionread;

	r = ring_for(&p, cap);
	open_stream(&s, (int)cap);
	for (int i = 0; i < 16; i++) /* page 0 (A), then 15 more: the pipe is full */
		push(&s, r, reserve_at(r, (size_t)i * PAGE, PAGE, s.wr, -1, s.ino, cap, &c), PAGE,
		     s.wr);
	c = (struct pp_ring_checks){ 0 };
	CHECK(reserve_at(r, 0, PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY,
	      "15 pushes after A prove nothing, and A is in the pipe");
	CHECK(c.fionread == 1, "the exact test decided: %llu", (unsigned long long)c.fionread);

	drain(&s, PAGE); /* A */
	push(&s, r, reserve_at(r, 16 * PAGE, PAGE, s.wr, -1, s.ino, cap, &c), PAGE, s.wr);
	c = (struct pp_ring_checks){ 0 };
	CHECK(reserve_at(r, 0, PAGE, s.wr, -1, s.ino, cap, &c) == 0, "16 pushes after A");
	CHECK(c.fionread == 0 && c.identity == 1,
	      "by the slot rule, after one identity check: %llu %llu",
	      (unsigned long long)c.fionread, (unsigned long long)c.identity);
	CHECK(reserve_at(r, PAGE, PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY,
	      "page 1: 15 pushes after it, and it is in the pipe");

	/* Evidence already covered by an identity check is not checked again. */
	for (int i = 17; i < 32; i++) {
		drain(&s, PAGE);
		push(&s, r, reserve_at(r, (size_t)i * PAGE, PAGE, s.wr, -1, s.ino, cap, &c), PAGE,
		     s.wr);
	}
	c = (struct pp_ring_checks){ 0 };
	CHECK(reserve_at(r, 15 * PAGE, PAGE, s.wr, -1, s.ino, cap, &c) == 15 * PAGE,
	      "page 15: 16 pushes after it");
	CHECK(c.identity == 1 && c.fionread == 0, "checked once: %llu",
	      (unsigned long long)c.identity);
	fionread = c.fionread;
	c = (struct pp_ring_checks){ 0 };
	CHECK(reserve_at(r, 2 * PAGE, 13 * PAGE, s.wr, -1, s.ino, cap, &c) == 2 * PAGE,
	      "pages 2-14: proven by the same evidence");
	CHECK(c.identity == 0 && c.fionread == fionread, "nothing asked again: %llu %llu",
	      (unsigned long long)c.identity, (unsigned long long)c.fionread);
	drain(&s, 16 * PAGE);
	CHECK(!s.bad, "%d bytes read were not the ones written", s.bad);
	close_stream(&s);
	free_ring(p);
}

/* The fd no longer names the pipe the ring pushed into: nothing is reused. */
static void test_moved(void)
{
	struct pp_pipe *p;
	struct pp_ring *r;
	struct pp_ring_checks c = { 0 };
	struct stream s, other;
	const uint32_t cap = 16 * PAGE;
	int fd;

	r = ring_for(&p, cap);
	open_stream(&s, (int)cap);
	open_stream(&other, (int)cap);
	fd = dup(s.wr);
	for (int i = 0; i < 17; i++) {
		push(&s, r, reserve_at(r, (size_t)i * PAGE, PAGE, fd, -1, s.ino, cap, &c), PAGE,
		     fd);
		drain(&s, PAGE);
	}
	dup2(other.wr, fd);
	CHECK(reserve_at(r, 0, PAGE, fd, -1, s.ino, cap, &c) == -ESTALE,
	      "slot rule: the fd names another pipe");
	CHECK(reserve_at(r, 16 * PAGE, PAGE, fd, -1, s.ino, cap, &c) == -ESTALE,
	      "exact test: the fd names another pipe (empty as it is)");
	close(fd);
	CHECK(reserve_at(r, 16 * PAGE, PAGE, fd, -1, s.ino, cap, &c) == -ESTALE, "the fd closed");
	close_stream(&s);
	close_stream(&other);
	free_ring(p);
}

/* Another thread's ring on the same pipe. */
struct other_thread {
	struct pp_pipe *p;
	struct stream *s;
	struct pp_ring *r;
	int pages;
	long tid;
};

static void *other_writer(void *arg)
{
	struct other_thread *t = arg;
	struct pp_ring_checks c = { 0 };
	uint32_t cap = 16 * PAGE;

	t->tid = syscall(SYS_gettid);
	t->r = pp_ring_get(&t->p->rings, &t->p->gen, cap);
	if (!t->r)
		return NULL;
	for (int i = 0; i < t->pages; i++)
		push(t->s, t->r,
		     reserve_at(t->r, (size_t)i * PAGE, PAGE, t->s->wr, -1, t->s->ino, cap, &c),
		     PAGE, t->s->wr);
	return NULL;
}

static void run_other(struct other_thread *t)
{
	pthread_t th;

	if (pthread_create(&th, NULL, other_writer, t) || pthread_join(th, NULL)) {
		fprintf(stderr, "pthread\n");
		exit(99);
	}
}

static void test_threads(void)
{
	struct pp_pipe *p;
	struct pp_ring *r;
	struct pp_ring_checks c = { 0 };
	struct stream s;
	const uint32_t cap = 16 * PAGE;
	struct other_thread t;
	uint64_t slots;

	r = ring_for(&p, cap);
	open_stream(&s, (int)cap);
	push(&s, r, reserve_at(r, 0, PAGE, s.wr, -1, s.ino, cap, &c), PAGE, s.wr);
	slots = r->pushed_slots;
	t = (struct other_thread){ .p = p, .s = &s, .pages = 15 };
	run_other(&t);
	CHECK(t.r && t.r != r && t.r->owner == t.tid && r->owner == syscall(SYS_gettid),
	      "each thread its own ring");
	CHECK(pp_ring_get(&p->rings, &p->gen, cap) == r, "and this thread's again");
	CHECK(r->pushed_slots == slots, "the other's pushes are not this ring's");
	CHECK(reserve_at(r, 0, PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY,
	      "A in the pipe, behind 15 pages of the other thread's");
	drain(&s, PAGE);
	CHECK(reserve_at(r, 0, PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY,
	      "A read, but %ld bytes of the other's queued count against it", queued(s.rd));
	drain(&s, 15 * PAGE);
	CHECK(reserve_at(r, 0, PAGE, s.wr, -1, s.ino, cap, &c) == 0, "all read: reusable");
	CHECK(reserve_at(t.r, 0, 15 * PAGE, s.wr, -1, s.ino, cap, &c) == 0,
	      "the other's too, for itself");

	/* The thread's cache holds four pipes: a fifth evicts one, whose ring is found again. */
	{
		struct pp_pipe *q[5];
		struct pp_ring *qr[5];

		for (int i = 0; i < 5; i++)
			qr[i] = ring_for(&q[i], cap);
		for (int i = 0; i < 5; i++)
			CHECK(pp_ring_get(&q[i]->rings, &q[i]->gen, cap) == qr[i],
			      "pipe %d: the same ring again", i);
		for (int i = 0; i < 5; i++)
			free_ring(q[i]);
	}
	CHECK(!s.bad, "%d bytes read were not the ones written", s.bad);
	close_stream(&s);
	free_ring(p);
}

/*
 * Write-behind: ring pages go into staging pipe S, and move on (splice)
 * into the target T. The rule counts both pipes' capacity and both
 * pipes' bytes.
 */
static void test_stage(void)
{
	struct pp_pipe *p;
	struct pp_ring *r;
	struct pp_ring_checks c = { 0 };
	struct stream s, t; /* s: the staging pipe; t: the target (s's bytes move on) */
	const uint32_t cap = 32 * PAGE; /* 16 slots each */
	uint64_t k;

	r = ring_for(&p, cap);
	open_stream(&s, 16 * PAGE);
	open_stream(&t, 16 * PAGE);
#define MOVE(n) CHECK(splice(s.rd, NULL, t.wr, NULL, (n), SPLICE_F_NONBLOCK) == (n), "move on")
#define RES(off, len) reserve_at(r, (off), (len), t.wr, s.wr, t.ino, cap, &c)

	push(&s, r, RES(0, PAGE), PAGE, s.wr);
	CHECK(RES(0, PAGE) == -EBUSY, "A staged");
	MOVE(PAGE);
	CHECK(queued(s.rd) == 0 && RES(0, PAGE) == -EBUSY, "A moved on into the target");
	drain_from(&s, t.rd, PAGE - 1);
	CHECK(RES(0, PAGE) == -EBUSY, "A's last byte in the target");
	drain_from(&s, t.rd, 1);
	CHECK(RES(0, PAGE) == 0, "A read from the target: reusable");

	/* 31 pushes after A, both pipes full: not enough; 32 are. */
	push(&s, r, RES(0, PAGE), PAGE, s.wr);
	MOVE(PAGE);
	for (k = 1; k < 16; k++)
		push(&s, r, RES(k * PAGE, PAGE), PAGE, s.wr);
	MOVE(15 * PAGE);
	for (; k < 32; k++)
		push(&s, r, RES(k * PAGE, PAGE), PAGE, s.wr);
	c = (struct pp_ring_checks){ 0 };
	CHECK(RES(0, PAGE) == -EBUSY, "31 pushes after A, A in the target");
	CHECK(c.fionread == 1, "decided by both pipes' bytes");
	CHECK(RES(16 * PAGE, PAGE) == -EBUSY, "a page still staged");
	drain_from(&s, t.rd, PAGE);
	MOVE(PAGE);
	push(&s, r, RES(32 * PAGE, PAGE), PAGE, s.wr);
	c = (struct pp_ring_checks){ 0 };
	CHECK(RES(0, PAGE) == 0 && c.fionread == 0, "32 pushes after A: the slot rule");
	CHECK(RES(PAGE, PAGE) == -EBUSY, "page 1 is in the target");
	drain_from(&s, t.rd, 16 * PAGE);
	MOVE(16 * PAGE);
	drain_from(&s, t.rd, 16 * PAGE);
	CHECK(RES(PAGE, 16 * PAGE) == PAGE, "everything read: reusable");
	CHECK(!s.bad, "%d bytes read were not the ones written", s.bad);
#undef MOVE
#undef RES
	close_stream(&s);
	close_stream(&t);
	free_ring(p);
}

/* Trimmed pages are fresh: the pipe keeps the ones it holds, the ring may write at once. */
static void test_trim(void)
{
	struct pp_pipe *p;
	struct pp_ring *r;
	struct pp_ring_checks c = { 0 };
	struct stream s;
	const uint32_t cap = 16 * PAGE;

	r = ring_for(&p, cap);
	open_stream(&s, (int)cap);
	push(&s, r, reserve_at(r, 0, 4 * PAGE, s.wr, -1, s.ino, cap, &c), 4 * PAGE, s.wr);
	push(&s, r, reserve_at(r, 4 * PAGE, 4 * PAGE, s.wr, -1, s.ino, cap, &c), 4 * PAGE, s.wr);
	r->last_use_ns = 1;

	/* A ring its owner is writing with is left alone. */
	r->busy = 1;
	pp_pipes_trim_rings(10000000000ull, true);
	r->busy = 0;
	CHECK(reserve_at(r, 0, 4 * PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY, "busy: not trimmed");

	/* Idle: the pages go, but for the ones the next write uses (PPIPE_POOL_KEEP). */
	r->head = 8 * PAGE;
	pp_cfg.pool_keep = 0;
	pp_pipes_trim_rings(10000000000ull, false);
	CHECK(r->resident == 0, "trimmed: %zu left", r->resident);
	CHECK(reserve_at(r, 0, 8 * PAGE, s.wr, -1, s.ino, cap, &c) == 0,
	      "fresh pages: reusable with the old ones in the pipe");
	memset(r->data, 0x55, 8 * PAGE);
	drain(&s, 8 * PAGE);
	CHECK(!s.bad, "writing fresh pages changed what the pipe held: %d bytes", s.bad);
	pp_cfg.pool_keep = 8 << 10;
	close_stream(&s);
	free_ring(p);
}

/* A thread that writes @pages pages into @s through its ring on @p, then exits. */
struct exiting {
	struct pp_pipe *p;
	struct stream *s;
	uint32_t cap;
	int pages; /* pushed, from page 0 */
	bool busy; /* leaves its ring claimed, as a thread that exited inside a write */
	bool want_tid; /* only when its tid is @tid (else it does nothing) */
	long tid;
	struct pp_ring *r;
};

static void *exiting_writer(void *arg)
{
	struct exiting *t = arg;
	struct pp_ring_checks c = { 0 };
	long tid = syscall(SYS_gettid);

	if (t->want_tid && tid != t->tid)
		return NULL;
	t->tid = tid;
	t->r = pp_ring_get(&t->p->rings, &t->p->gen, t->cap);
	for (int i = 0; t->r && i < t->pages; i++)
		push(t->s, t->r,
		     reserve_at(t->r, (size_t)i * PAGE, PAGE, t->s->wr, -1, t->s->ino, t->cap, &c),
		     PAGE, t->s->wr);
	if (t->r && t->busy)
		t->r->busy = 1;
	return NULL;
}

static void run_exiting(struct exiting *t)
{
	pthread_t th;

	t->r = NULL;
	if (pthread_create(&th, NULL, exiting_writer, t) || pthread_join(th, NULL)) {
		fprintf(stderr, "pthread\n");
		exit(99);
	}
}

/* Two threads with a ring each on @p at once, which then both exit. */
struct pair {
	struct pp_pipe *p;
	uint32_t cap;
	pthread_barrier_t both;
	long tid[2];
	int next;
};

static void *pair_writer(void *arg)
{
	struct pair *w = arg;
	int me = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);

	w->tid[me] = syscall(SYS_gettid);
	if (!pp_ring_get(&w->p->rings, &w->p->gen, w->cap))
		w->tid[me] = 0;
	pthread_barrier_wait(&w->both);
	return NULL;
}

static void wait_gone(long tid);

static void run_pair(struct pair *w)
{
	pthread_t th[2];

	pthread_barrier_init(&w->both, NULL, 2);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, pair_writer, w)) {
			fprintf(stderr, "pthread\n");
			exit(99);
		}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&w->both);
	for (int i = 0; i < 2; i++)
		wait_gone(w->tid[i]);
}

static int rings_in(const struct pp_pipe *p)
{
	int n = 0;

	for (const struct pp_ring *r = p->rings.head; r; r = r->next)
		n++;
	return n;
}

/* Waits until the kernel has let thread @tid go (pthread_join() returns a moment before). */
static void wait_gone(long tid)
{
	for (int i = 0; i < 10000 && !syscall(SYS_tgkill, getpid(), tid, 0); i++)
		usleep(100);
}

/*
 * A thread that exited leaves its ring: the next thread that needs one on
 * the pipe takes it over, with the evidence of the reuse rule as it was;
 * one that does not fit any more goes. Trimming unmaps the rest.
 */
static void test_exited(void)
{
	struct pp_ring_checks c = { 0 };
	const uint32_t cap = 16 * PAGE;
	struct exiting a, b;
	struct pp_pipe *p, *q;
	struct stream s;
	uint64_t pool;

	p = pp_pipe_new(0, true, (int)cap);
	open_stream(&s, (int)cap);
	pool = pp_pool_bytes();
	a = (struct exiting){ .p = p, .s = &s, .cap = cap, .pages = 4, .busy = true };
	run_exiting(&a);
	wait_gone(a.tid);
	CHECK(a.r && pp_pool_bytes() > pool, "the first thread got a ring");
	pool = pp_pool_bytes();

	/* The next thread takes it over: the same pages, the same evidence. */
	b = (struct exiting){ .p = p, .s = &s, .cap = cap };
	run_exiting(&b);
	CHECK(b.r == a.r && b.r->owner == b.tid && rings_in(p) == 1 && pp_pool_bytes() == pool,
	      "the ring of the thread that exited is taken over (%d rings)", rings_in(p));
	CHECK(!b.r->busy, "released: its owner left it claimed, and is gone");
	CHECK(reserve_at(b.r, 0, PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY,
	      "its pages still in the pipe are not written again");
	drain(&s, 2 * PAGE);
	CHECK(reserve_at(b.r, 0, 2 * PAGE, s.wr, -1, s.ino, cap, &c) == 0 &&
		      reserve_at(b.r, 2 * PAGE, PAGE, s.wr, -1, s.ino, cap, &c) == -EBUSY,
	      "the ones read are, to the page");
	drain(&s, 2 * PAGE);
	push(&s, b.r, reserve_at(b.r, 0, 4 * PAGE, s.wr, -1, s.ino, cap, &c), 4 * PAGE, s.wr);
	drain(&s, 4 * PAGE);

	/* The pipe's capacity grew: the old ring no longer fits and goes. */
	wait_gone(b.tid);
	pool -= b.r->map_len;
	a = (struct exiting){ .p = p, .s = &s, .cap = 4 * cap, .pages = 1 };
	run_exiting(&a);
	CHECK(a.r && a.r->size == 8 * cap && rings_in(p) == 1 &&
		      pp_pool_bytes() == pool + a.r->map_len,
	      "a ring too small for the pipe now is unmapped, not taken over (%d rings, "
	      "ring %zu, pool %llu)",
	      rings_in(p), a.r ? a.r->size : 0, (unsigned long long)pp_pool_bytes());
	drain(&s, PAGE);

	/*
	 * The tid of a thread that exited, given to a new one: it is not the
	 * owner. (Only where the next pid can be chosen: root.)
	 */
	wait_gone(a.tid);
	{
		struct exiting t = { .p = p, .s = &s, .cap = 4 * cap, .want_tid = true };
		int tries = 0;

		for (; tries < 100 && !t.r; tries++) {
			FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");

			if (!f || fprintf(f, "%ld", a.tid - 1) < 0 || fclose(f)) {
				tries = 100;
				break;
			}
			t.tid = a.tid;
			run_exiting(&t);
		}
		if (t.r)
			CHECK(t.r == a.r && rings_in(p) == 1,
			      "a thread with the tid of one that exited takes its ring over (%d rings)",
			      rings_in(p));
		else
			fprintf(stderr, "(tid reuse not checked: the tid could not be had)\n");
		if (t.r)
			a.tid = t.tid;
	}

	/*
	 * Two threads exited: the next thread takes one ring over and leaves
	 * the other for the one after it; nothing is mapped or unmapped.
	 */
	{
		struct pair w = { .p = pp_pipe_new(0, true, (int)cap), .cap = cap };
		struct exiting t = { .p = w.p, .s = &s, .cap = cap };
		uint64_t before;

		run_pair(&w);
		before = pp_pool_bytes();
		CHECK(w.tid[0] && w.tid[1] && rings_in(w.p) == 2, "two rings (%d)", rings_in(w.p));
		for (int i = 0; i < 3; i++) {
			run_exiting(&t);
			wait_gone(t.tid);
			CHECK(t.r && rings_in(w.p) == 2 && pp_pool_bytes() == before,
			      "thread %d took a ring over, the other stayed (%d rings)", i,
			      rings_in(w.p));
		}
		free_ring(w.p);
	}

	/* Trimming: the rings of threads that exited go, this thread's own stays. */
	wait_gone(a.tid);
	q = pp_pipe_new(0, true, (int)cap);
	CHECK(pp_ring_get(&q->rings, &q->gen, cap) != NULL, "a ring of this thread's");
	pool = pp_pool_bytes() - a.r->map_len; /* a.r is unmapped below */
	for (struct pp_ring *r = p->rings.head; r; r = r->next)
		r->last_use_ns = 1;
	q->rings.head->last_use_ns = 1;
	pp_pipes_trim_rings(10000000000ull, false);
	CHECK(rings_in(p) == 0 && rings_in(q) == 1 && pp_pool_bytes() == pool,
	      "trimming unmapped the exited thread's ring (%d left), not the live one's",
	      rings_in(p));
	CHECK(pp_rings_exited_reused() >= 2 && pp_rings_exited_freed() >= 2,
	      "counted: %llu taken over, %llu unmapped",
	      (unsigned long long)pp_rings_exited_reused(),
	      (unsigned long long)pp_rings_exited_freed());

	/* One that is not idle goes too once the pool refused a ring. */
	b = (struct exiting){ .p = p, .s = &s, .cap = cap };
	run_exiting(&b);
	wait_gone(b.tid);
	p->rings.head->last_use_ns = 9500000000ull;
	pp_pipes_trim_rings(10000000000ull, false);
	CHECK(rings_in(p) == 1, "not idle: not asked about yet");
	{
		uint64_t max = pp_cfg.pool_max;
		struct pp_pipe *full = pp_pipe_new(0, true, (int)cap);

		pp_cfg.pool_max = pp_pool_bytes();
		CHECK(!pp_ring_get(&full->rings, &full->gen, cap), "the pool is full");
		pp_cfg.pool_max = max;
		free_ring(full);
	}
	pp_pipes_trim_rings(10000000000ull, false);
	CHECK(rings_in(p) == 0, "after the pool refused a ring: unmapped (%d left)", rings_in(p));
	CHECK(!s.bad, "%d bytes read were not the ones written", s.bad);
	close_stream(&s);
	free_ring(q);
	free_ring(p);
}

/*
 * Everything together, as a writer and a reader would: writes of every
 * size where the rule allows, reads of every size between, into pipes the
 * slot rule covers and pipes it does not. Every byte read is checked.
 */
static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	return check_rand(&rng);
}

/* Reads some of what is queued, if anything is. */
static void drain_some(struct stream *s)
{
	long have = queued(s->rd);

	if (have > 0)
		drain(s, 1 + next() % (size_t)have);
}

/*
 * push(), but into a pipe that may be full, as the engine pushes: what
 * vmsplice took is recorded, and the rest waits for the reader.
 */
static void push_some(struct stream *s, struct pp_ring *r, long off, size_t len)
{
	size_t done = 0;

	memset(r->data + off, 0xee, len);
	for (size_t i = 0; i < len; i++)
		r->data[off + (long)i] = (char)byte_at(s->in + i);
	while (done < len) {
		struct iovec iov = { r->data + off + done, len - done };
		ssize_t n = vmsplice(s->wr, &iov, 1, SPLICE_F_NONBLOCK);

		if (n < 0 && errno != EAGAIN) {
			perror("vmsplice");
			exit(99);
		}
		if (n <= 0) {
			drain_some(s);
			continue;
		}
		pp_ring_pushed(r, (size_t)off + done, (size_t)n);
		done += (size_t)n;
	}
	s->in += len;
	pp_ring_commit(r, (size_t)off, len);
}

static void test_mixed(uint32_t cap, uint64_t ring_size)
{
	struct pp_pipe *p;
	struct pp_ring *r;
	struct pp_ring_checks c = { 0 };
	struct stream s;
	int writes = 0, waits = 0;

	pp_cfg.ring_size = ring_size;
	r = ring_for(&p, cap);
	pp_cfg.ring_size = 0;
	open_stream(&s, (int)cap);
	while (writes < 3000) {
		size_t len = 1 + next() % (next() % 4 ? 2 * PAGE : r->max_chunk);
		long off;

		if (next() % 3 == 0) {
			drain_some(&s);
			continue;
		}
		off = pp_ring_reserve(r, len, s.wr, -1, s.ino, cap, &c);
		if (off == -EBUSY) {
			waits++;
			/* An empty pipe holds no page: nothing can be refused then. */
			CHECK(queued(s.rd) > 0, "refused with the pipe empty");
			if (!queued(s.rd))
				break;
			drain_some(&s);
			continue;
		}
		CHECK(off >= 0, "reserve: %ld", off);
		if (off < 0)
			break;
		push_some(&s, r, off, len);
		writes++;
	}
	drain(&s, (size_t)queued(s.rd));
	CHECK(!s.bad, "capacity %u, ring %llu: %d bytes read were not the ones written", cap,
	      (unsigned long long)ring_size, s.bad);
	CHECK(s.in == s.out && waits > 0, "all read (%llu of %llu), %d waits",
	      (unsigned long long)s.out, (unsigned long long)s.in, waits);
	close_stream(&s);
	free_ring(p);
}

int main(void)
{
	pp_real_start();
	pp_config_defaults(&pp_cfg);
	pp_cfg.thp = PP_THP_OFF; /* 4 KiB pages: the rule is the same, the test simpler */
	if ((size_t)sysconf(_SC_PAGESIZE) != PAGE) {
		fprintf(stderr, "SKIP: written for 4 KiB pages\n");
		return 77;
	}
	test_fresh();
	test_fionread();
	test_slots();
	test_moved();
	test_threads();
	test_stage();
	test_trim();
	test_exited();
	test_mixed(16 * PAGE, 0);
	test_mixed(64 * PAGE, 32 * PAGE);
	test_mixed(16 * PAGE, 32 * PAGE);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
