// SPDX-License-Identifier: MIT
/*
 * span-api: the zero-copy API's own contracts (include/ppipe.h), run with
 * libppipe preloaded, where the spans of a pipe it accelerates are ring
 * regions committed in place, and without it, where the header's
 * fallback hands out buffers committed with write(). Each case prints
 * what it saw and checks what must hold in both; where the two differ
 * (a fork child and ring memory), it checks what the kind of span it got
 * says. The statistics (ppipe_stats_get(), the PPIPE_STATS report's
 * span_commits) say which path a commit took, where that matters.
 *
 * The cases, in this order:
 *   - a fork child and its parent's open span (first, while this process
 *     has used nothing of libppipe's but spans);
 *   - get, commit, release, and the ring's regions used again and again;
 *   - EINVAL: no span, 0 or too many bytes, closed, another thread's;
 *   - a partial commit (a non-blocking pipe with room for part) and its rest;
 *   - a rest that starts inside a page, non-blocking;
 *   - EPIPE and SIGPIPE;
 *   - a write() while the same thread has a span open;
 *   - the fd closed under an open span;
 *   - the fd switched to a file under an open span;
 *   - pthread_cancel() of a commit waiting for room;
 *   - pthread_cancel() of a commit below PPIPE_MIN_WRITE (the real call);
 *   - pthread_cancel() after a partial commit that ended inside a page;
 *   - a thread that ends with a span open: it returns, calls pthread_exit(),
 *     or is cancelled in a read() while it fills the span;
 *   - a reader that splices the pipe's pages away;
 *   - commits below PPIPE_MIN_WRITE, and of 0 bytes;
 *   - the first span of an inherited pipe.
 *
 * "span-api splice-race" (PPIPE_RING_SIZE=131072) is one more case on its
 * own: a splice out of the pipe that lands while get checks the reuse
 * rule, made to land there by a seccomp trap on that check.
 */
#include "helpers.h"
#include "statsjson.h"

#include <ppipe.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

static bool lib; /* libppipe is in the process */
static bool rings; /* and writes in place: a span of a pipe it accelerates is ring memory */
static bool write_behind; /* PPIPE_MODE=uring: buffers, committed by write-behind's write() */
static size_t min_write = 16384;

static bool in_ring(const struct ppipe_span *s)
{
	return s->priv.kind && s->priv.kind != PPIPE_SPAN_BUFFER;
}

/* The span is ring memory where libppipe writes in place and @ring says it may be. */
static void expect_kind(const char *what, const struct ppipe_span *s, bool ring)
{
	bool want = rings && ring;

	t_check(in_ring(s) == want, "%s: the span is %s, expected %s", what,
		in_ring(s) ? "ring memory" : "a buffer", want ? "ring memory" : "a buffer");
}

static bool aligned(const void *p)
{
	return ((uintptr_t)p & (T_PAGE - 1)) == 0;
}

static struct ppipe_stats stats(void)
{
	struct ppipe_stats st = { .size = sizeof(st) };

	if (lib && ppipe_stats_get(&st))
		t_die("ppipe_stats_get");
	return st;
}

static uint64_t span_commits(void)
{
	return lib ? t_stats_json("span_commits") : 0;
}

/* Heap bytes in use: a span's buffer not given back shows here. */
static size_t heap_inuse(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
}

/* Reads up to @n bytes the pipe @fd holds now (non-blocking meanwhile) into @buf. */
static size_t take(int fd, unsigned char *buf, size_t n)
{
	int fl = fcntl(fd, F_GETFL);
	size_t got = 0;

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK))
		t_die("F_SETFL");
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	fcntl(fd, F_SETFL, fl);
	return got;
}

/* The next @n bytes the pipe holds are stream @seed from @pos (and they are there now). */
static bool holds(int fd, size_t n, uint64_t seed, uint64_t pos)
{
	static unsigned char buf[4 * 1024 * 1024];

	if (n > sizeof(buf))
		t_die("holds: %zu bytes", n);
	return take(fd, buf, n) == n && t_verify(buf, n, seed, pos) == n;
}

/*
 * A span of up to @want bytes of stream @seed from *@pos, committed whole
 * (blocking); *@pos moves on. Returns whether it was ring memory. (Whether
 * the ring has a free region for it may depend on how far the reader got.)
 */
static bool span_put(int fd, uint64_t seed, uint64_t *pos, size_t want, const char *what)
{
	struct ppipe_span s;
	size_t len;
	ssize_t w;
	bool ring;

	if (ppipe_span_get(fd, want, &s)) {
		t_check(false, "%s: get -> %s", what, t_res(-1, errno));
		return false;
	}
	ring = in_ring(&s);
	len = s.len;
	t_fill(s.data, len, seed, *pos);
	/* All written, the span is closed: its fields are not to be read after. */
	w = ppipe_span_commit(&s, len);
	t_check(w == (ssize_t)len, "%s: commit %zu -> %s", what, len, t_res(w, errno));
	if (w > 0)
		*pos += (uint64_t)w;
	ppipe_span_release(&s);
	return ring;
}

/* ---- a fork child and its parent's open span ---- */

struct fork_report {
	ssize_t parents; /* the child's commit of the parent's span */
	int parents_err;
	ssize_t own; /* a span of the child's own */
	int own_ring;
	int done;
};

static void case_fork(void)
{
	struct fork_report *r = t_shared(sizeof(*r));
	struct ppipe_span s;
	int p[2], st;
	pid_t pid;
	ssize_t w;
	void *data;
	size_t len;

	t_pipe(p, 0);
	t_pipe_size_set(p[1], (int)T_MIB);
	if (ppipe_span_get(p[1], 65536, &s))
		t_die("get");
	expect_kind("fork", &s, true);
	t_fill(s.data, s.len, 1, 0);
	data = s.data;
	len = s.len;
	pid = t_fork();
	if (!pid) {
		struct ppipe_span mine;

		/* Ring memory is not inherited: EINVAL. A buffer is this child's copy. */
		errno = 0;
		r->parents = ppipe_span_commit(&s, 100);
		r->parents_err = errno;
		ppipe_span_release(&s);
		if (!ppipe_span_get(p[1], 65536, &mine)) {
			r->own_ring = in_ring(&mine);
			t_fill(mine.data, mine.len, 2, 0);
			r->own = ppipe_span_commit(&mine, mine.len);
			ppipe_span_release(&mine);
		}
		r->done = 1;
		_exit(0);
	}
	st = t_wait(pid);
	if (in_ring(&s)) {
		t_log("fork: the child's commit of the parent's span -> %s (ring memory)",
		      t_res(r->parents, r->parents_err));
		t_check(r->parents == -1 && r->parents_err == EINVAL,
			"fork: a child committed its parent's ring span");
	} else {
		t_log("fork: the child's commit of the parent's span -> %s (a buffer: its copy)",
		      t_res(r->parents, r->parents_err));
		t_check(r->parents == 100, "fork: the child's commit of its copy");
	}
	t_log("fork: the child's own span -> %s; child %s", t_res(r->own, 0), t_status(st));
	t_check(r->done && WIFEXITED(st) && !WEXITSTATUS(st) && r->own == 65536,
		"fork: the child failed");
	t_check(!rings || r->own_ring, "fork: the child's own span is not in its ring");
	t_check(s.data == data && s.len == len, "fork: the parent's span moved");
	w = ppipe_span_commit(&s, len);
	t_log("fork: the parent's span, still open: commit -> %s", t_res(w, errno));
	t_check(w == (ssize_t)len, "fork: the parent's commit");
	ppipe_span_release(&s);
	t_close(p[1]);
	/* The child's copy (a buffer), the child's own span, then the parent's. */
	bool ok = (r->parents != 100 || holds(p[0], 100, 1, 0)) && holds(p[0], 65536, 2, 0) &&
		  holds(p[0], len, 1, 0);
	t_log("fork: the pipe holds the child's bytes, then the parent's: %s", ok ? "yes" : "NO");
	t_check(ok, "fork: the pipe's bytes");
	t_close(p[0]);
	munmap(r, sizeof(*r));
}

/* ---- get, commit, release ---- */

static void case_basics(void)
{
	static const size_t wants[] = { 65536, 100000, 4097, 20000, T_MIB, 4000, 1 };
	struct ppipe_stats st0 = stats(), st1;
	uint64_t sc0 = span_commits(), pos = 0, ring_spans = 0;
	bool shapes = true, whole = true, closed = true;
	struct t_reader rd;
	int p[2];

	t_pipe(p, 0);
	t_pipe_size_set(p[1], 65536);
	t_reader_start(&rd, p[0], 65536, 10, 0, 0);
	t_close(p[0]);
	for (int i = 0; i < 210; i++) {
		size_t want = wants[i % T_ARRAY_SIZE(wants)];
		struct ppipe_span s;
		ssize_t w;

		size_t len;

		if (ppipe_span_get(p[1], want, &s)) {
			t_check(false, "basics: get %zu -> %s", want, t_res(-1, errno));
			break;
		}
		len = s.len;
		shapes &= len >= 1 && len <= want && aligned(s.data);
		/* Below PPIPE_MIN_WRITE a buffer; above, ring memory unless all of it is in use. */
		if (want < min_write)
			expect_kind("basics", &s, false);
		ring_spans += in_ring(&s);
		t_fill(s.data, len, 10, pos);
		w = ppipe_span_commit(&s, len);
		whole &= w == (ssize_t)len;
		pos += w > 0 ? (uint64_t)w : 0;
		/* All written: the span is closed; release may follow, a commit is EINVAL. */
		ppipe_span_release(&s);
		errno = 0;
		closed &= ppipe_span_commit(&s, 0) == -1 && errno == EINVAL;
	}
	t_close(p[1]);
	t_log("basics: 210 spans: at most what was asked, page-aligned: %s; every commit whole: "
	      "%s; closed after it: %s",
	      shapes ? "yes" : "NO", whole ? "yes" : "NO", closed ? "yes" : "NO");
	t_check(shapes && whole && closed, "basics");
	t_reader_finish(&rd, "basics: reader", pos);
	st1 = stats();
	/* A buffer's commit is a write(), which libppipe may accelerate too. */
	if (rings)
		t_check(ring_spans >= 100 &&
				st1.writes_accelerated - st0.writes_accelerated >= ring_spans &&
				span_commits() - sc0 == ring_spans,
			"basics: %llu ring spans, accelerated +%llu",
			(unsigned long long)ring_spans,
			(unsigned long long)(st1.writes_accelerated - st0.writes_accelerated));
}

/* ---- EINVAL ---- */

struct other {
	struct ppipe_span *s;
	ssize_t r;
	int err;
};

static void *other_thread(void *arg)
{
	struct other *o = arg;

	errno = 0;
	o->r = ppipe_span_commit(o->s, 10);
	o->err = errno;
	ppipe_span_release(o->s);
	return NULL;
}

#define TRY(what, call)                                                \
	do {                                                           \
		errno = 0;                                             \
		ssize_t r_ = (call);                                   \
		int e_ = errno;                                        \
		t_log("einval: %s -> %s", what, t_res(r_, e_));        \
		t_check(r_ == -1 && e_ == EINVAL, "einval: %s", what); \
	} while (0)

static void case_einval(void)
{
	struct ppipe_span s, z, keep;
	struct other o = { .s = &s };
	pthread_t t;
	int p[2];

	t_pipe(p, 0);
	t_pipe_size_set(p[1], (int)T_MIB);
	TRY("get, no span", ppipe_span_get(p[1], 100, NULL));
	TRY("get 0 bytes", ppipe_span_get(p[1], 0, &z));
	TRY("get SSIZE_MAX+1 bytes", ppipe_span_get(p[1], (size_t)SSIZE_MAX + 1, &z));
	TRY("commit, no span", ppipe_span_commit(NULL, 0));
	memset(&z, 0, sizeof(z));
	TRY("commit of a zero-filled span", ppipe_span_commit(&z, 0));
	ppipe_span_release(&z);
	ppipe_span_release(NULL);
	if (ppipe_span_get(p[1], 65536, &s))
		t_die("get");
	expect_kind("einval", &s, true);
	t_fill(s.data, s.len, 20, 0);
	keep = s;
	TRY("commit of len + 1 bytes", ppipe_span_commit(&s, s.len + 1));
	if (pthread_create(&t, NULL, other_thread, &o))
		t_die("pthread_create");
	pthread_join(t, NULL);
	t_log("einval: commit by another thread -> %s; its release leaves the span open: %s",
	      t_res(o.r, o.err), !memcmp(&s, &keep, sizeof(s)) ? "yes" : "NO");
	t_check(o.r == -1 && o.err == EINVAL && !memcmp(&s, &keep, sizeof(s)),
		"einval: another thread");
	t_check(!t_fionread(p[0]), "einval: bytes written by a refused commit");
	ssize_t w = ppipe_span_commit(&s, s.len);

	t_log("einval: the owner commits it -> %s", t_res(w, errno));
	t_check(w == (ssize_t)keep.len, "einval: the owner's commit");
	TRY("commit of a closed span", ppipe_span_commit(&s, 0));
	if (ppipe_span_get(p[1], 65536, &s))
		t_die("get");
	ppipe_span_release(&s);
	ppipe_span_release(&s);
	TRY("commit after release (twice)", ppipe_span_commit(&s, 0));
	bool ok = holds(p[0], keep.len, 20, 0);

	t_log("einval: the pipe holds the owner's commit only: %s", ok ? "yes" : "NO");
	t_check(ok, "einval: the pipe's bytes");
	t_close(p[0]);
	t_close(p[1]);
}

/* ---- partial commits ---- */

static void case_partial(void)
{
	static unsigned char buf[65536];
	struct ppipe_span s;
	void *d0;
	ssize_t w;
	bool ok;
	int p[2];

	/* 14 pages in a 16-slot pipe: a commit of 4 pages writes 2 and stays open. */
	t_pipe(p, O_NONBLOCK);
	t_pipe_size_set(p[1], 65536);
	t_fill(buf, 14 * T_PAGE, 30, 0);
	if (write(p[1], buf, 14 * T_PAGE) != 14 * T_PAGE)
		t_die("prefill");
	if (ppipe_span_get(p[1], 4 * T_PAGE, &s))
		t_die("get");
	expect_kind("partial", &s, true);
	t_fill(s.data, s.len, 30, 14 * T_PAGE);
	d0 = s.data;
	w = ppipe_span_commit(&s, 4 * T_PAGE);
	ok = s.data == (char *)d0 + 2 * T_PAGE && s.len == 2 * T_PAGE;
	t_log("partial: 14 pages in a 16-slot pipe, commit 16384 -> %s; open, moved on past "
	      "them: %s",
	      t_res(w, errno), ok ? "yes" : "NO");
	t_check(w == 2 * T_PAGE && ok, "partial: the first commit");
	errno = 0;
	w = ppipe_span_commit(&s, s.len);
	t_log("partial: the rest into the full pipe -> %s", t_res(w, errno));
	t_check(w == -1 && errno == EAGAIN && s.data == (char *)d0 + 2 * T_PAGE,
		"partial: EAGAIN leaves the span as it was");
	ok = holds(p[0], 16 * T_PAGE, 30, 0);
	w = ppipe_span_commit(&s, s.len);
	ok &= w == 2 * T_PAGE && holds(p[0], 2 * T_PAGE, 30, 16 * T_PAGE);
	t_log("partial: drained, the rest -> %s; the stream intact: %s", t_res(w, errno),
	      ok ? "yes" : "NO");
	t_check(ok, "partial: the rest");
	ppipe_span_release(&s);
	t_close(p[0]);
	t_close(p[1]);
}

static void case_partial_inside_page(void)
{
	static unsigned char buf[100];
	struct ppipe_span s;
	ssize_t w;
	bool ok;
	int p[2];

	/*
	 * The kernel tops the pipe's last page up first: 50 bytes, then one
	 * page, so the span's rest starts inside a page. Into the empty pipe
	 * of two slots, the rest's first 12288 bytes are then what one
	 * write() of them would be: 8192.
	 */
	t_pipe(p, O_NONBLOCK);
	t_pipe_size_set(p[1], 2 * T_PAGE);
	t_fill(buf, 100, 31, 0);
	if (write(p[1], buf, 100) != 100)
		t_die("prefill");
	if (ppipe_span_get(p[1], 65536, &s))
		t_die("get");
	t_fill(s.data, s.len, 31, 100);
	w = ppipe_span_commit(&s, 2 * T_PAGE + 50);
	t_log("partial: commit 8242 into a pipe of 2 slots holding 100 -> %s; the rest starts "
	      "%zu bytes into a page",
	      t_res(w, errno), (size_t)((uintptr_t)s.data & (T_PAGE - 1)));
	t_check(w == T_PAGE + 50, "partial: the top-up");
	ok = holds(p[0], 100 + T_PAGE + 50, 31, 0);
	w = ppipe_span_commit(&s, 3 * T_PAGE);
	t_log("partial: drained, commit 12288 of the rest -> %s (write() of them: 8192)",
	      t_res(w, errno));
	ok &= holds(p[0], w > 0 ? (size_t)w : 0, 31, 100 + T_PAGE + 50);
	t_check(w == 2 * T_PAGE && ok, "partial: the rest from inside a page");
	ppipe_span_release(&s);
	t_close(p[0]);
	t_close(p[1]);
}

/* ---- EPIPE ---- */

static void case_epipe(void)
{
	struct ppipe_span s, keep;
	ssize_t w;
	int p[2], e;

	t_sigaction(SIGPIPE, t_sig_counter, false);
	t_sig_count[SIGPIPE] = 0;
	t_pipe(p, 0);
	t_close(p[0]);
	if (ppipe_span_get(p[1], 65536, &s))
		t_die("get");
	expect_kind("epipe", &s, true);
	memset(s.data, 'e', s.len);
	keep = s;
	errno = 0;
	w = ppipe_span_commit(&s, s.len);
	e = errno;
	t_log("epipe: commit 65536, no reader -> %s, SIGPIPE x%d; the span as it was: %s",
	      t_res(w, e), (int)t_sig_count[SIGPIPE], !memcmp(&s, &keep, sizeof(s)) ? "yes" : "NO");
	t_check(w == -1 && e == EPIPE && t_sig_count[SIGPIPE] == 1 && !memcmp(&s, &keep, sizeof(s)),
		"epipe");
	ppipe_span_release(&s);
	t_close(p[1]);
	t_sigaction(SIGPIPE, SIG_DFL, false);
}

/* ---- write() while the same thread has a span open ---- */

static void case_mixed(void)
{
	static unsigned char buf[65536];
	struct ppipe_stats st0, st1;
	struct ppipe_span s;
	ssize_t w1, w2, w3;
	int p[2];

	t_pipe(p, 0);
	t_pipe_size_set(p[1], (int)T_MIB);
	if (ppipe_span_get(p[1], 65536, &s))
		t_die("get");
	expect_kind("mixed", &s, true);
	t_fill(s.data, s.len, 40, 65536 + 100);
	st0 = stats();
	t_fill(buf, 65536, 40, 0);
	w1 = write(p[1], buf, 65536);
	t_fill(buf, 100, 40, 65536);
	w2 = write(p[1], buf, 100);
	w3 = ppipe_span_commit(&s, s.len);
	st1 = stats();
	t_log("mixed: write 65536 -> %s and 100 -> %s while a span is open, then its commit -> %s",
	      t_res(w1, errno), t_res(w2, errno), t_res(w3, errno));
	bool ok = w1 == 65536 && w2 == 100 && w3 == 65536 &&
		  holds(p[0], 65536 + 100 + 65536, 40, 0) && !t_fionread(p[0]);

	t_log("mixed: the bytes in the order of the calls: %s", ok ? "yes" : "NO");
	t_check(ok, "mixed: order");
	/* The write()s took the kernel's path: the ring was the span's. */
	if (rings)
		t_check(st1.writes_accelerated - st0.writes_accelerated == 1 &&
				st1.writes_passthrough - st0.writes_passthrough == 2,
			"mixed: accelerated +%llu, passed through +%llu (expected 1, 2)",
			(unsigned long long)(st1.writes_accelerated - st0.writes_accelerated),
			(unsigned long long)(st1.writes_passthrough - st0.writes_passthrough));
	t_close(p[0]);
	t_close(p[1]);
}

/* ---- the fd closed under an open span ---- */

static void case_close(void)
{
	uint64_t pool0 = stats().pool_bytes, pool1, pool2;
	size_t heap0 = heap_inuse();
	struct ppipe_span s, keep;
	ssize_t w;
	int p[2], e;

	t_pipe(p, 0);
	if (ppipe_span_get(p[1], 65536, &s))
		t_die("get");
	expect_kind("close", &s, true);
	memset(s.data, 'c', s.len);
	keep = s;
	t_close(p[0]);
	t_close(p[1]);
	errno = 0;
	w = ppipe_span_commit(&s, s.len);
	e = errno;
	pool1 = stats().pool_bytes;
	t_log("close: both ends closed under an open span: commit -> %s; the span as it was: %s",
	      t_res(w, e), !memcmp(&s, &keep, sizeof(s)) ? "yes" : "NO");
	t_check(w == -1 && e == EBADF && !memcmp(&s, &keep, sizeof(s)), "close: commit");
	ppipe_span_release(&s);
	/* The ring lives while the span holds the pipe, and goes with the span. */
	pool2 = stats().pool_bytes;
	bool freed =
		(!rings || (pool1 > pool0 && pool2 <= pool0)) && heap_inuse() < heap0 + 32 * T_KIB;

	t_log("close: the release gave its memory back: %s", freed ? "yes" : "NO");
	t_check(freed, "close: ring memory %llu before, %llu with the span, %llu after it",
		(unsigned long long)pool0, (unsigned long long)pool1, (unsigned long long)pool2);
}

/* ---- the fd switched to a file under an open span ---- */

static void case_switched(void)
{
	static unsigned char buf[4 * T_PAGE];
	struct ppipe_stats before, after;
	struct ppipe_span s;
	int p[2], f = t_tmpfile();
	ssize_t w;

	t_pipe(p, 0);
	if (ppipe_span_get(p[1], 4 * T_PAGE, &s))
		t_die("get");
	expect_kind("switched", &s, true);
	t_fill(s.data, s.len, 53, 0);
	if (dup2(f, p[1]) != p[1])
		t_die("dup2");
	before = stats();
	w = ppipe_span_commit(&s, 4 * T_PAGE);
	after = stats();
	ppipe_span_release(&s);
	bool in_file = lseek(f, 0, SEEK_SET) == 0 && read(f, buf, sizeof(buf)) == sizeof(buf) &&
		       t_verify(buf, sizeof(buf), 53, 0) == sizeof(buf);
	bool eof = read(p[0], buf, 1) == 0;
	uint64_t counted = after.writes_passthrough - before.writes_passthrough +
			   after.writes_accelerated - before.writes_accelerated;

	t_log("switched: the fd dup2()ed to a file under an open span: commit -> %s; the bytes in "
	      "the file: %s; the pipe at EOF: %s; counted as writes to a pipe: %llu",
	      t_res(w, errno), in_file ? "yes" : "NO", eof ? "yes" : "NO",
	      (unsigned long long)counted);
	t_check(w == 4 * T_PAGE && in_file && eof && !counted, "switched");
	t_close(p[0]);
	t_close(p[1]);
	t_close(f);
}

/* ---- pthread_cancel() of a commit ---- */

struct blocked {
	int fd;
	size_t want, n; /* the span asked, the commit */
	bool inside_page; /* first a partial commit that ends inside a page */
	sem_t ready;
	ssize_t first;
};

static void *blocked_writer(void *arg)
{
	struct blocked *b = arg;
	struct ppipe_span s;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	if (ppipe_span_get(b->fd, b->want, &s))
		return NULL;
	t_fill(s.data, s.len, 50, 100);
	if (b->inside_page) {
		t_set_nonblock(b->fd, true);
		b->first = ppipe_span_commit(&s, b->want);
		t_set_nonblock(b->fd, false);
	}
	sem_post(&b->ready);
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	/* No clean-up handler: the cancellation closes the span (ppipe.h). */
	ppipe_span_commit(&s, b->inside_page ? s.len : b->n);
	return NULL;
}

/*
 * Runs blocked_writer() on @b, cancels it once it waits in its commit
 * (or before: then it is cancelled there), and returns how it ended.
 */
static void *cancel_blocked(struct blocked *b)
{
	pthread_t t;
	void *res;

	sem_init(&b->ready, 0, 0);
	if (pthread_create(&t, NULL, blocked_writer, b))
		t_die("pthread_create");
	sem_wait(&b->ready);
	t_usleep(100 * 1000);
	pthread_cancel(t);
	pthread_join(t, &res);
	sem_destroy(&b->ready);
	return res;
}

struct later {
	int fd;
	int aligned;
	ssize_t w;
};

static void *later_writer(void *arg)
{
	struct later *l = arg;
	struct ppipe_span s;

	if (ppipe_span_get(l->fd, 2 * T_PAGE, &s))
		return NULL;
	l->aligned = aligned(s.data);
	t_fill(s.data, s.len, 51, 0);
	l->w = ppipe_span_commit(&s, s.len);
	ppipe_span_release(&s);
	return NULL;
}

/* @b->n: the commit (a wait in the engine, or below PPIPE_MIN_WRITE, the real call). */
static void cancel_one(const char *name, size_t n)
{
	static unsigned char buf[65536];
	uint64_t pool0 = stats().pool_bytes, pool1, pos = 65536;
	size_t heap0 = heap_inuse();
	struct blocked b = { .want = 65536, .n = n };
	struct t_reader rd;
	void *res;
	int p[2];

	t_pipe(p, 0);
	t_pipe_size_set(p[1], 65536);
	t_fill(buf, 65536, 52, 0);
	if (write(p[1], buf, 65536) != 65536)
		t_die("prefill");
	b.fd = p[1];
	res = cancel_blocked(&b);
	t_log("cancel, %s: the writer %s", name,
	      res == PTHREAD_CANCELED ? "cancelled" : "returned");
	t_check(res == PTHREAD_CANCELED, "cancel, %s", name);
	/* The pipe goes on for others: the reader gets the prefill, then the next spans. */
	t_reader_start(&rd, p[0], 65536, 52, 0, 0);
	t_close(p[0]);
	for (int i = 0; i < 4; i++)
		span_put(p[1], 52, &pos, 65536, "cancel: next");
	t_close(p[1]);
	t_reader_finish(&rd, "cancel: reader", pos);
	pool1 = stats().pool_bytes;
	t_check(!rings || pool1 <= pool0,
		"cancel, %s: ring memory %llu before the pipe, %llu after it", name,
		(unsigned long long)pool0, (unsigned long long)pool1);
	t_check(heap_inuse() < heap0 + 32 * T_KIB, "cancel, %s: a span's buffer was not given back",
		name);
	t_log("cancel, %s: the pipe's memory given back: %s", name,
	      (!rings || pool1 <= pool0) ? "yes" : "NO");
}

/*
 * The first commit tops up the pipe's last page (50 bytes) and fills its
 * last slot: the rest starts inside a page, and its commit waits. After
 * the cancellation the next span of the ring (another thread's, which
 * takes the ring over) starts on a page boundary.
 */
static void cancel_inside_page(void)
{
	static unsigned char buf[8192];
	struct blocked b = { .want = 3 * T_PAGE + 50, .inside_page = true };
	struct later l = { 0 };
	pthread_t t;
	void *res;
	int p[2];

	t_pipe(p, 0);
	t_pipe_size_set(p[1], 2 * T_PAGE);
	t_fill(buf, 100, 50, 0);
	if (write(p[1], buf, 100) != 100)
		t_die("prefill");
	b.fd = p[1];
	res = cancel_blocked(&b);
	t_log("cancel, after a partial commit -> %s: the writer %s", t_res(b.first, 0),
	      res == PTHREAD_CANCELED ? "cancelled" : "returned");
	t_check(res == PTHREAD_CANCELED && b.first == T_PAGE + 50, "cancel inside a page");
	bool ok = holds(p[0], 100 + T_PAGE + 50, 50, 0);

	/* Non-blocking: two pages fit the empty pipe, a span across three would not wait. */
	t_set_nonblock(p[1], true);
	l.fd = p[1];
	if (pthread_create(&t, NULL, later_writer, &l))
		t_die("pthread_create");
	pthread_join(t, NULL);
	ok &= l.w == 2 * T_PAGE && holds(p[0], 2 * T_PAGE, 51, 0);
	t_log("cancel: the next span page-aligned: %s; its bytes and the ones before intact: %s",
	      l.aligned ? "yes" : "NO", ok ? "yes" : "NO");
	t_check(l.aligned && ok, "cancel: the span after");
	t_close(p[0]);
	t_close(p[1]);
}

static void case_cancel(void)
{
	/* Write-behind takes more of a write into a full pipe before it waits (docs/design.md). */
	if (write_behind) {
		t_log("cancel: not under write-behind, where a write to a full pipe does not wait");
		return;
	}
	cancel_one("waiting for room", 65536);
	cancel_one("below PPIPE_MIN_WRITE (the real call)", 100);
	cancel_inside_page();
}

/* ---- a thread that ends with a span open ---- */

enum leave_how { LEAVE_RETURN, LEAVE_EXIT, LEAVE_CANCEL, LEAVE_HOWS };
static const char *const leave_names[] = { "returns", "calls pthread_exit()",
					   "is cancelled in a read()" };

struct leaver {
	int fd, idle; /* the pipe's write end; a pipe nobody writes, to wait in */
	enum leave_how how;
	sem_t ready;
	int ring; /* the span was ring memory */
	ssize_t first; /* its commit, partial */
};

/*
 * The pipe holds 14 of its 16 pages when the thread opens a span of 4:
 * the commit writes 2 and the span stays open with the other 2.
 */
#define LEAVE_PREFILL (14 * T_PAGE)
#define LEAVE_SPAN (4 * T_PAGE)
#define LEAVE_FIRST (2 * T_PAGE)

static void *leaver(void *arg)
{
	struct leaver *l = arg;
	struct ppipe_span s;
	char c;

	if (ppipe_span_get(l->fd, LEAVE_SPAN, &s)) {
		sem_post(&l->ready);
		return NULL;
	}
	l->ring = in_ring(&s);
	t_fill(s.data, s.len, 52, LEAVE_PREFILL);
	l->first = ppipe_span_commit(&s, LEAVE_SPAN);
	sem_post(&l->ready);
	if (l->how == LEAVE_EXIT)
		pthread_exit(NULL);
	/* More to fill the span with: the read() is where the cancellation finds the thread. */
	if (l->how == LEAVE_CANCEL)
		(void)!read(l->idle, &c, 1);
	return NULL;
}

/*
 * What the thread committed is in the pipe, and only that. Then, @again:
 * the pipe takes more through a span of this thread (the region after
 * what was committed is free to take); else both ends are closed at once
 * and the pipe is gone with its rings: the thread's exit gave its span
 * back (an open span holds the pipe, as a write in flight does).
 */
static void leave_one(enum leave_how how, bool again)
{
	static unsigned char buf[65536];
	uint64_t pool0 = stats().pool_bytes, pool1, pos = LEAVE_PREFILL + LEAVE_FIRST;
	struct leaver l = { .how = how };
	const char *name = leave_names[how];
	int p[2], idle[2];
	pthread_t t;

	t_pipe(p, O_NONBLOCK);
	t_pipe_size_set(p[1], 65536);
	t_fill(buf, LEAVE_PREFILL, 52, 0);
	if (write(p[1], buf, LEAVE_PREFILL) != LEAVE_PREFILL)
		t_die("prefill");
	t_pipe(idle, 0);
	l.fd = p[1];
	l.idle = idle[0];
	sem_init(&l.ready, 0, 0);
	if (pthread_create(&t, NULL, leaver, &l))
		t_die("pthread_create");
	sem_wait(&l.ready);
	if (how == LEAVE_CANCEL) {
		t_usleep(50 * 1000);
		pthread_cancel(t);
	}
	pthread_join(t, NULL);
	sem_destroy(&l.ready);
	t_close(idle[0]);
	t_close(idle[1]);
	t_check(l.ring == rings, "exit (%s): the span is %s", name,
		l.ring ? "ring memory" : "a buffer");
	t_check(l.first == LEAVE_FIRST, "exit (%s): the commit -> %zd", name, l.first);
	bool kept = holds(p[0], LEAVE_PREFILL + LEAVE_FIRST, 52, 0) &&
		    take(p[0], buf, sizeof(buf)) == 0;

	t_log("exit: a thread that %s with a span open after a partial commit: what it committed, "
	      "and nothing else, in the pipe: %s",
	      name, kept ? "yes" : "NO");
	t_check(kept, "exit (%s): the pipe's bytes", name);
	if (again) {
		bool ring = span_put(p[1], 52, &pos, 65536, "exit: a span after");

		kept = holds(p[0], 65536, 52, LEAVE_PREFILL + LEAVE_FIRST);
		t_log("exit: then a span of another thread: %s, its bytes in the pipe: %s",
		      ring == rings ? "as expected" : "NOT as expected", kept ? "yes" : "NO");
		t_check(ring == rings && kept, "exit (%s): the span after (%s)", name,
			ring ? "ring memory" : "a buffer");
	}
	pool1 = stats().pool_bytes;
	t_close(p[0]);
	t_close(p[1]);
	if (again)
		return;
	bool freed = !rings || (pool1 > pool0 && stats().pool_bytes <= pool0);

	t_log("exit: both ends closed at once: the pipe and its ring are gone: %s",
	      freed ? "yes" : "NO");
	t_check(freed, "exit (%s): ring memory %llu before, %llu with the pipe, %llu after it",
		name, (unsigned long long)pool0, (unsigned long long)pool1,
		(unsigned long long)stats().pool_bytes);
}

static void case_thread_exit(void)
{
	for (int how = 0; how < LEAVE_HOWS; how++) {
		leave_one((enum leave_how)how, false);
		leave_one((enum leave_how)how, true);
	}
}

/* ---- a reader that splices the pipe's pages away ---- */

#define SPLICED (24 * 65536)

struct splice_report {
	struct t_read_result held;
	int done;
};

/* Waits for @go, splices @rfd into holder pipes to EOF (telling @told after the first), reads them. */
static pid_t splicer(int rfd, int go, int told, struct splice_report *rep)
{
	pid_t pid = t_fork();

	if (pid)
		return pid;
	static unsigned char buf[65536];
	int keep[3] = { rfd, go, told }, h[2][2], cur = 0;
	char c;

	t_close_all_but(keep, 3);
	for (int i = 0; i < 2; i++) {
		t_pipe(h[i], 0);
		if (t_pipe_size_set(h[i][1], (int)T_MIB) < (int)T_MIB)
			_exit(3);
	}
	if (read(go, &c, 1) != 1)
		_exit(2);
	for (bool first = true;;) {
		ssize_t n;

		/* The next holder before this one could fill up: no splice ever waits for room. */
		if (cur == 0 && t_fionread(h[0][0]) > (int)(T_MIB - 65536))
			cur = 1;
		n = splice(rfd, NULL, h[cur][1], NULL, 65536, SPLICE_F_MOVE);
		if (n <= 0)
			break;
		if (first && write(told, "s", 1) != 1)
			_exit(2);
		first = false;
	}
	rep->held.fnv = T_FNV_INIT;
	rep->held.first_bad = UINT64_MAX;
	for (int i = 0; i <= cur; i++) {
		ssize_t n;

		t_close(h[i][1]);
		while ((n = read(h[i][0], buf, sizeof(buf))) > 0)
			t_read_result_add(&rep->held, buf, (size_t)n, 60, 0);
	}
	rep->done = 1;
	_exit(0);
}

static void case_splice(void)
{
	struct splice_report *rep = t_shared(sizeof(*rep));
	int p[2], go[2], told[2], st;
	bool buffers = true;
	uint64_t pos = 0;
	int before = 0;
	pid_t pid;
	char c;

	t_pipe(p, 0);
	t_pipe_size_set(p[1], (int)T_MIB);
	t_pipe(go, O_CLOEXEC);
	t_pipe(told, O_CLOEXEC);
	pid = splicer(p[0], go[0], told[1], rep);
	t_close(p[0]);
	t_close(go[0]);
	t_close(told[1]);
	/* Ring pages in the pipe, then the reader splices them on, while spans go on. */
	for (int i = 0; i < 8; i++)
		before += span_put(p[1], 60, &pos, 65536, "splice: before");
	t_check(!rings || before == 8, "splice: %d of the first 8 spans were ring memory", before);
	if (write(go[1], "g", 1) != 1 || read(told[0], &c, 1) != 1)
		t_die("splicer handshake");
	/* The pipe's readers are not known any more: the real call, never the ring again. */
	for (int i = 0; i < 16; i++)
		buffers &= !span_put(p[1], 60, &pos, 65536, "splice: after");
	t_close(p[1]);
	t_close(go[1]);
	t_close(told[0]);
	st = t_wait(pid);
	bool ok = rep->done && rep->held.bytes == pos && rep->held.first_bad == UINT64_MAX;

	t_log("splice: spans after the reader's first splice are buffers: %s; the reader %s, its "
	      "held copy read=%llu fnv=%016llx %s",
	      buffers ? "yes" : "NO", t_status(st), (unsigned long long)rep->held.bytes,
	      (unsigned long long)rep->held.fnv, ok ? "ok" : "BAD");
	t_check(buffers && ok && pos == SPLICED, "splice: first bad byte %llu",
		(unsigned long long)rep->held.first_bad);
	munmap(rep, sizeof(*rep));
}

/* ---- commits below PPIPE_MIN_WRITE, and of 0 bytes ---- */

static void small_one(int fd, size_t n, uint64_t *pos)
{
	struct ppipe_stats st0 = stats(), st1;
	uint64_t sc0 = span_commits();
	struct ppipe_span s;
	bool big = n >= min_write;
	ssize_t w;

	if (ppipe_span_get(fd, 65536, &s))
		t_die("get");
	expect_kind("small", &s, true);
	t_fill(s.data, s.len, 70, *pos);
	w = ppipe_span_commit(&s, n);
	*pos += w > 0 ? (uint64_t)w : 0;
	errno = 0;
	bool closed = ppipe_span_commit(&s, 0) == -1 && errno == EINVAL;

	ppipe_span_release(&s);
	st1 = stats();
	t_log("small: commit %s of a span -> %s; closed: %s",
	      big ? "PPIPE_MIN_WRITE" :
	      n	  ? "less than PPIPE_MIN_WRITE" :
		    "0 bytes",
	      t_res(w, errno), closed ? "yes" : "NO");
	t_check(w == (ssize_t)n && closed, "small: commit %zu", n);
	if (!rings)
		return;
	/* Below the threshold: the real call, counted as write() counts it, no attempt. */
	t_check(st1.writes_accelerated - st0.writes_accelerated == big &&
			span_commits() - sc0 == big &&
			st1.writes_passthrough - st0.writes_passthrough == !big &&
			st1.bytes_passthrough - st0.bytes_passthrough == (big ? 0 : n) &&
			st1.fallbacks == st0.fallbacks,
		"small: commit %zu: accelerated +%llu, passed through +%llu (%llu bytes), "
		"fallbacks +%llu",
		n, (unsigned long long)(st1.writes_accelerated - st0.writes_accelerated),
		(unsigned long long)(st1.writes_passthrough - st0.writes_passthrough),
		(unsigned long long)(st1.bytes_passthrough - st0.bytes_passthrough),
		(unsigned long long)(st1.fallbacks - st0.fallbacks));
}

static void case_small(void)
{
	uint64_t pos = 0;
	int p[2];

	t_pipe(p, 0);
	t_pipe_size_set(p[1], (int)T_MIB);
	small_one(p[1], 100, &pos);
	small_one(p[1], 0, &pos);
	small_one(p[1], min_write - 1, &pos);
	small_one(p[1], min_write, &pos);
	bool ok = holds(p[0], (size_t)pos, 70, 0);

	t_log("small: the pipe holds the commits' bytes: %s", ok ? "yes" : "NO");
	t_check(ok, "small: the pipe's bytes");
	t_close(p[0]);
	t_close(p[1]);
}

/* ---- an inherited pipe: its first span ---- */

#define INHERITED_IN_RING 10

/* In the exec'd image, fd 1 a pipe its parent made: the first thing it does is a span. */
static int inherited_child(void)
{
	struct ppipe_span s;
	bool ring;

	if (ppipe_span_get(STDOUT_FILENO, 65536, &s))
		return T_EXIT_ERROR;
	ring = in_ring(&s);
	t_fill(s.data, 65536, 80, 0);
	if (s.len != 65536 || ppipe_span_commit(&s, 65536) != 65536)
		return T_EXIT_FAIL;
	ppipe_span_release(&s);
	return ring ? INHERITED_IN_RING : 0;
}

static void case_inherited(void)
{
	int p[2], st;
	pid_t pid;

	t_pipe(p, O_CLOEXEC);
	t_pipe_size_set(p[1], (int)T_MIB);
	pid = t_fork();
	if (!pid) {
		if (dup2(p[1], STDOUT_FILENO) < 0)
			_exit(T_EXIT_ERROR);
		t_close_all_but(NULL, 0);
		execl("/proc/self/exe", "span-api", "--inherited", (char *)NULL);
		_exit(T_EXIT_ERROR);
	}
	t_close(p[1]);
	st = t_wait(pid);
	bool ok = WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == INHERITED_IN_RING) &&
		  holds(p[0], 65536, 80, 0);
	bool ring = WIFEXITED(st) && WEXITSTATUS(st) == INHERITED_IN_RING;

	t_log("inherited: the exec'd writer's first span committed, the stream intact: %s",
	      ok ? "yes" : "NO");
	t_check(ok, "inherited: the writer %s", t_status(st));
	/* A write() would take the inherited pipe over: its first span too. */
	t_check(ring == rings, "inherited: the first span is %s",
		ring ? "ring memory" : "a buffer");
	t_close(p[0]);
}

/* ---- a splice out of the pipe that lands while get checks the reuse rule ---- */

#if defined(__x86_64__) || defined(__aarch64__)
#define RACE_ARCH 1
#endif

#ifdef RACE_ARCH
#if defined(__x86_64__)
#define RACE_AUDIT AUDIT_ARCH_X86_64
#else
#define RACE_AUDIT AUDIT_ARCH_AARCH64
#endif

static int race_rfd, race_hold;
static volatile sig_atomic_t race_trapped;

/*
 * SIGSYS: the reuse rule's FIONREAD of the write end, trapped. The reader
 * splices everything the pipe holds into the holder now (splice() marks
 * the pipe's readers unknown first), and the check gets what the pipe
 * holds after that: nothing, as if a reader had consumed it.
 */
static void race_sigsys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	int queued = 0;
	int *out;

	(void)sig;
	(void)si;
#if defined(__x86_64__)
	out = (int *)uc->uc_mcontext.gregs[REG_RDX];
#else
	out = (int *)uc->uc_mcontext.regs[2];
#endif
	while (splice(race_rfd, NULL, race_hold, NULL, T_MIB, SPLICE_F_NONBLOCK) > 0)
		;
	ioctl(race_rfd, FIONREAD, &queued);
	*out = queued;
#if defined(__x86_64__)
	uc->uc_mcontext.gregs[REG_RAX] = 0;
#else
	uc->uc_mcontext.regs[0] = 0;
#endif
	race_trapped++;
}

/* FIONREAD of @fd traps (SIGSYS); everything else goes on. */
static int race_arm(int fd)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, RACE_AUDIT, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, FIONREAD, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)fd, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
	};
	struct sock_fprog prog = { (unsigned short)T_ARRAY_SIZE(f), f };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = race_sigsys;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/*
 * A ring of 128 KiB (PPIPE_RING_SIZE) for a pipe of 1 MiB: two spans of
 * 64 KiB fill it, and stay in the pipe; the third span's region is the
 * first one's again, whose reuse only the exact test (FIONREAD) can
 * allow. The trap lets the reader splice both spans' pages into its
 * holder during that test: they are consumed, and not free, and the
 * third span must not be ring memory (the pipe's readers are not known
 * any more). Its bytes written anyway would show in the holder.
 */
struct race_report {
	int ring; /* the span during which the reader spliced was ring memory */
	int trapped;
	struct t_read_result held;
	int done;
};

/* Two spans of 64 KiB of stream 90 (the child of splice_race(): it does not log). */
static int race_two(int fd)
{
	for (uint64_t pos = 0; pos < 2 * 65536; pos += 65536) {
		struct ppipe_span s;

		if (ppipe_span_get(fd, 65536, &s) || !in_ring(&s) || s.len != 65536)
			return -1;
		t_fill(s.data, s.len, 90, pos);
		if (ppipe_span_commit(&s, s.len) != 65536)
			return -1;
	}
	return 0;
}

static int splice_race(void)
{
	struct race_report *r = t_shared(sizeof(*r));
	int p[2], h[2], st;
	pid_t pid;

	t_init("span-api splice-race");
	if (!rings)
		t_skip("no ring spans here (libppipe not preloaded, or write-behind)");
	pid = t_fork();
	if (!pid) {
		static unsigned char buf[65536];
		struct ppipe_span s;
		ssize_t n;

		t_pipe(p, 0);
		t_pipe(h, O_NONBLOCK);
		if (t_pipe_size_set(p[1], (int)T_MIB) < (int)T_MIB ||
		    t_pipe_size_set(h[1], (int)T_MIB) < (int)T_MIB)
			_exit(T_EXIT_ERROR);
		t_set_nonblock(p[0], true);
		race_rfd = p[0];
		race_hold = h[1];
		if (race_two(p[1]))
			_exit(T_EXIT_FAIL);
		if (race_arm(p[1]))
			_exit(T_EXIT_SKIP);
		if (ppipe_span_get(p[1], 65536, &s))
			_exit(T_EXIT_FAIL);
		r->ring = in_ring(&s);
		memset(s.data, 'Z', s.len);
		ppipe_span_release(&s);
		r->trapped = race_trapped;
		r->held.fnv = T_FNV_INIT;
		r->held.first_bad = UINT64_MAX;
		while ((n = read(h[0], buf, sizeof(buf))) > 0)
			t_read_result_add(&r->held, buf, (size_t)n, 90, 0);
		r->done = 1;
		_exit(0);
	}
	st = t_wait(pid);
	if (WIFEXITED(st) && WEXITSTATUS(st) == T_EXIT_SKIP)
		t_skip("no seccomp filter here");
	bool intact = r->held.bytes == 2 * 65536 && r->held.first_bad == UINT64_MAX;

	t_log("splice-race: the check trapped: %s; the span then %s; the holder read=%llu %s",
	      r->trapped ? "yes" : "NO", r->ring ? "RING MEMORY" : "a buffer",
	      (unsigned long long)r->held.bytes, intact ? "intact" : "DAMAGED");
	t_check(r->done && WIFEXITED(st) && !WEXITSTATUS(st) && r->trapped == 1,
		"splice-race: the scenario did not run (child %s)", t_status(st));
	t_check(!r->ring && intact,
		"splice-race: pages the reader holds were handed out (first bad byte %llu)",
		(unsigned long long)r->held.first_bad);
	return t_finish();
}
#else
static int splice_race(void)
{
	t_init("span-api splice-race");
	t_skip("no seccomp trap for this architecture here");
}
#endif

int main(int argc, char **argv)
{
	const char *mode = getenv("PPIPE_MODE"), *mw = getenv("PPIPE_MIN_WRITE");

	if (argc > 1 && !strcmp(argv[1], "--inherited"))
		return inherited_child();
	lib = ppipe_version() != NULL;
	write_behind = lib && mode && !strcmp(mode, "uring");
	rings = lib && !write_behind && !(mode && !strcmp(mode, "off"));
	if (mw && *mw)
		min_write = strtoul(mw, NULL, 10);
	if (argc > 1 && !strcmp(argv[1], "splice-race"))
		return splice_race();
	t_init("span-api");
	t_log("libppipe %s", lib ? rings ? "preloaded: ring spans" : "preloaded: buffers" :
				   "absent: the header's buffers");
	case_fork();
	case_basics();
	case_einval();
	case_partial();
	case_partial_inside_page();
	case_epipe();
	case_mixed();
	case_close();
	case_switched();
	case_cancel();
	case_thread_exit();
	case_splice();
	case_small();
	case_inherited();
	return t_finish();
}
