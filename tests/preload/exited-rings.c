// SPDX-License-Identifier: MIT
/*
 * Rings of threads that exited are given back (docs/design.md,
 * "Rings of threads that exited"). One long-lived pipe is written by
 * THREADS short-lived threads, each making WRITES large writes of a record
 * (a header naming the thread and the record, then a pattern of its own)
 * that a reader thread checks byte by byte. Run under
 * LD_PRELOAD=libppipe with PPIPE_MIN_WRITE=4097, a small PPIPE_IDLE_MS and
 * a PPIPE_POOL_MAX far below THREADS rings. Usage:
 *
 *   exited-rings serial THREADS    one thread at a time
 *   exited-rings window THREADS    WINDOW threads at a time, a new one
 *                                  started as the oldest is joined
 *
 * It checks that
 *   - every record arrives intact, in each thread's order;
 *   - the process's ring memory (ppipe_stats_get's pool_bytes) stays
 *     within a few rings, whatever THREADS is: a new thread takes over the
 *     ring of one that exited, or the ring goes;
 *   - the statistics (PPIPE_STATS, ppipe_stats_dump) count the rings of
 *     exited threads taken over, or unmapped;
 *   - after the first threads, no large write falls back to the real call
 *     (no "no ring: pool cap reached") and none is passed through. Each
 *     record is written once the reader has read the one before, so that
 *     the pipe holds nothing of a ring and the reuse rule always lets it
 *     be written again: any fallback would be for want of a ring;
 *   - where the kernel names anonymous mappings, every ring mapping is
 *     "[anon:libppipe-ring]" in /proc/self/smaps;
 *   - once every writer has exited, trimming (driven by writes to another
 *     pipe) unmaps their rings, and closing the pipes leaves no ring memory.
 * Waits are loops with a generous deadline: an event must happen, at no
 * particular speed.
 */
#include "helpers.h"
#include "ringmaps.h"
#include "statsjson.h"

#include <ppipe.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WRITES 3
#define WINDOW 4
#define REC_MIN (20u << 10)
#define REC_MAX (64u << 10) /* header included: one write, at most half a default ring */
#define MAGIC 0x72696e67u
#define DEADLINE_MS 10000

struct header {
	uint32_t magic, len, thread, seq;
};

static int (*stats_get)(struct ppipe_stats *);
static int pipe_fds[2];
static unsigned int nthreads;
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

/* What the reader saw. */
static uint32_t *next_seq; /* per thread */
static uint64_t records, bad_records;
/* Bytes written, under write_lock, and bytes read (atomic). */
static uint64_t produced, consumed;

static struct ppipe_stats stats(void)
{
	struct ppipe_stats st = { .size = sizeof(st) };

	if (stats_get(&st))
		t_die("ppipe_stats_get");
	return st;
}

/* Payload bytes of record @seq of thread @thread: varied, so that ring heads move around. */
static uint32_t rec_len(uint32_t thread, uint32_t seq)
{
	uint32_t span = REC_MAX - REC_MIN - (uint32_t)sizeof(struct header);

	return REC_MIN + (thread * 7919u + seq * 104729u) % span;
}

static uint64_t seed_of(uint32_t thread)
{
	return (uint64_t)thread + 1;
}

static void *writer(void *arg)
{
	uint32_t thread = (uint32_t)(uintptr_t)arg;
	unsigned char *buf = malloc(REC_MAX);

	if (!buf)
		t_die("malloc");
	for (uint32_t seq = 0; seq < WRITES; seq++) {
		struct header h = { MAGIC, rec_len(thread, seq), thread, seq };
		size_t n = sizeof(h) + h.len;

		memcpy(buf, &h, sizeof(h));
		t_fill(buf + sizeof(h), h.len, seed_of(thread), (uint64_t)seq << 20);
		/* Whole records: one writer at a time, into an empty pipe. */
		pthread_mutex_lock(&write_lock);
		for (uint64_t c; (c = __atomic_load_n(&consumed, __ATOMIC_ACQUIRE)) != produced &&
				 c != UINT64_MAX;)
			sched_yield(); /* UINT64_MAX: the reader lost its way and only drains */
		if (t_write_all(pipe_fds[1], buf, n) != (ssize_t)n)
			t_die("write of thread %u", thread);
		produced += n;
		pthread_mutex_unlock(&write_lock);
		t_scribble(buf, n);
	}
	free(buf);
	return NULL;
}

/* Reads records until EOF; after a bad header, drains the rest (writers must not block). */
static void *reader(void *arg)
{
	unsigned char *buf = malloc(REC_MAX);
	struct header h;

	(void)arg;
	if (!buf)
		t_die("malloc");
	for (;;) {
		ssize_t n = t_read_full(pipe_fds[0], &h, sizeof(h));

		if (n == 0)
			break;
		if (n != (ssize_t)sizeof(h) || h.magic != MAGIC || h.thread >= nthreads ||
		    h.seq != next_seq[h.thread] || h.len != rec_len(h.thread, h.seq)) {
			bad_records++;
			while (t_read_full(pipe_fds[0], buf, REC_MAX) > 0)
				;
			__atomic_store_n(&consumed, UINT64_MAX, __ATOMIC_RELEASE);
			break;
		}
		if (t_read_full(pipe_fds[0], buf, h.len) != (ssize_t)h.len ||
		    t_verify(buf, h.len, seed_of(h.thread), (uint64_t)h.seq << 20) != h.len)
			bad_records++;
		next_seq[h.thread]++;
		records++;
		__atomic_add_fetch(&consumed, sizeof(h) + h.len, __ATOMIC_RELEASE);
	}
	free(buf);
	return NULL;
}

static pthread_t start(uint32_t thread)
{
	pthread_t t;

	if (pthread_create(&t, NULL, writer, (void *)(uintptr_t)thread))
		t_die("pthread_create");
	return t;
}

static void join(pthread_t t)
{
	if (pthread_join(t, NULL))
		t_die("pthread_join");
}

/* Checks that every ring mapping carries the name, where this kernel names mappings. */
static void check_names(void)
{
	struct t_ringmap maps[T_RINGMAPS_MAX];
	int n = t_ringmaps(maps), named = 0;

	if (!t_anon_names()) {
		t_log("this kernel does not name anonymous mappings (no CONFIG_ANON_VMA_NAME): "
		      "name not checked (%d ring mappings)",
		      n);
		return;
	}
	for (int i = 0; i < n; i++)
		named += !strcmp(maps[i].name, T_RING_NAME);
	t_log("ring mappings named %s: %d of %d", T_RING_NAME, named, n);
	t_check(n > 0 && named == n, "every ring mapping is named %s", T_RING_NAME);
}

int main(int argc, char **argv)
{
	static unsigned char a[REC_MAX], b[REC_MAX];
	pthread_t window[WINDOW], rd;
	struct ppipe_stats st, base, end;
	uint64_t ring, peak = 0, pos = 0;
	unsigned int width, warm;
	int other[2];
	bool serial;

	t_init("exited-rings");
	if (argc != 3 || (strcmp(argv[1], "serial") && strcmp(argv[1], "window")) ||
	    atoi(argv[2]) < 4 * WINDOW)
		t_die("usage: exited-rings serial|window THREADS (at least %d)", 4 * WINDOW);
	stats_get = (int (*)(struct ppipe_stats *))dlsym(RTLD_DEFAULT, "ppipe_stats_get");
	if (!stats_get)
		t_die("libppipe is not preloaded");
	serial = !strcmp(argv[1], "serial");
	nthreads = (unsigned int)atoi(argv[2]);
	width = serial ? 1 : WINDOW;
	warm = 2 * width;
	next_seq = calloc(nthreads, sizeof(*next_seq));
	if (!next_seq)
		t_die("calloc");
	t_pipe(pipe_fds, 0);
	if (pthread_create(&rd, NULL, reader, NULL))
		t_die("pthread_create");

	/* One thread alone: what one ring costs. */
	join(start(0));
	ring = stats().pool_bytes;
	t_log("one thread's ring: %llu bytes", (unsigned long long)ring);
	if (!ring)
		t_die("the first thread got no ring: is libppipe's fast path working here?");

	/* The others, @width at a time. */
	base = stats();
	for (uint32_t i = 1, done = 1; done < nthreads;) {
		if (i < nthreads && i - done < width) {
			window[i % WINDOW] = start(i);
			i++;
			continue;
		}
		join(window[done % WINDOW]);
		done++;
		st = stats();
		peak = st.pool_bytes > peak ? st.pool_bytes : peak;
		if (done == warm)
			base = st;
		if (done == nthreads / 2)
			check_names();
	}
	end = stats();
	t_log("%u threads, %u at a time: ring memory at most %llu bytes (%.1f rings), "
	      "%llu now",
	      nthreads, width, (unsigned long long)peak, (double)peak / (double)ring,
	      (unsigned long long)end.pool_bytes);
	t_log("after the first %u threads: %llu writes accelerated, %llu fallbacks, %llu "
	      "passed through",
	      warm, (unsigned long long)(end.writes_accelerated - base.writes_accelerated),
	      (unsigned long long)(end.fallbacks - base.fallbacks),
	      (unsigned long long)(end.writes_passthrough - base.writes_passthrough));
	t_check(peak <= (2 * width + 2) * ring,
		"ring memory stays within %u rings, whatever the number of threads", 2 * width + 2);
	t_check(end.fallbacks == base.fallbacks &&
			end.writes_passthrough == base.writes_passthrough,
		"every large write after the first threads is accelerated");
	t_check(end.writes_accelerated + end.writes_passthrough == (uint64_t)nthreads * WRITES,
		"every write is counted, accelerated or passed through");
	{
		uint64_t reused = t_stats_json("exited_rings_reused");
		uint64_t freed = t_stats_json("exited_rings_freed");

		t_log("rings of exited threads: %llu taken over, %llu unmapped",
		      (unsigned long long)reused, (unsigned long long)freed);
		t_check(reused + freed >= nthreads - warm,
			"the statistics count a ring of an exited thread for nearly each new one");
	}

	/*
	 * Every writer is gone. Writes to another pipe drive trimming, which
	 * must unmap the rings of the pipe's exited writers: only the other
	 * pipe's ring stays.
	 */
	t_pipe(other, 0);
	for (int waited = 0; waited < DEADLINE_MS; waited += 20) {
		t_fill(a, sizeof(a), 99, pos);
		if (t_write_all(other[1], a, sizeof(a)) != (ssize_t)sizeof(a) ||
		    t_read_full(other[0], b, sizeof(b)) != (ssize_t)sizeof(b))
			t_die("the other pipe");
		t_check(t_verify(b, sizeof(b), 99, pos) == sizeof(b), "the other pipe's bytes");
		pos += sizeof(a);
		st = stats();
		if (st.pool_bytes <= ring)
			break;
		t_usleep(20000);
	}
	t_log("exited writers' rings after trimming: %s (%llu bytes mapped)",
	      st.pool_bytes <= ring ? "unmapped" : "still mapped",
	      (unsigned long long)st.pool_bytes);
	t_check(st.pool_bytes <= ring, "trimming unmaps the rings of exited threads");

	t_close(pipe_fds[1]);
	join(rd);
	t_close(pipe_fds[0]);
	t_close(other[0]);
	t_close(other[1]);
	t_log("records read: %llu of %llu, %llu bad", (unsigned long long)records,
	      (unsigned long long)nthreads * WRITES, (unsigned long long)bad_records);
	t_check(records == (uint64_t)nthreads * WRITES && !bad_records,
		"every record arrived intact, in order");
	st = stats();
	t_check(st.pool_bytes == 0, "no ring memory once the pipes are closed (%llu bytes)",
		(unsigned long long)st.pool_bytes);
	return t_finish();
}
