// SPDX-License-Identifier: MIT
/*
 * ppipe-bench: pipe throughput and write latency, with several writers and
 * readers on one pipe, as threads of one process or as processes.
 *
 * It measures whatever write() and read() do in this process, so running
 * it with and without LD_PRELOAD compares a preload library against plain
 * pipes. ppipe-compare drives it; the output is one JSON object (--json) or
 * a short text block.
 *
 * --produce api writes through ppipe.h's spans. The header is included
 * without PPIPE_LINKED: its calls are weak references, bound to libppipe's
 * when it is preloaded and answered by the header's fallback (a buffer and
 * write()) when it is not, so one binary measures both.
 */
#include "cli.h"
#include "histogram.h"
#include "ppipe.h"
#include "pressure.h"
#include "stream.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#ifndef PPIPE_VERSION
#define PPIPE_VERSION "unknown"
#endif

enum { EXIT_RUN_FAILED = 1, EXIT_USAGE = 2, EXIT_ENV = 3 };

/*
 * How writers make each write (--produce): prepared, one buffer filled
 * once and written again and again (the verification stream is made
 * afresh only with --verify); copy, every block generated into the
 * writer's buffer (the produced stream, stream.h), then write(); api,
 * every block generated in place into spans of ppipe_span_get(), then
 * committed. copy and api make the same bytes at the same cost: what
 * differs between them is only the way into the pipe.
 */
enum produce { PRODUCE_PREPARED, PRODUCE_COPY, PRODUCE_API };
static const char *const produce_names[] = { "prepared", "copy", "api" };

#define MAX_TASKS 1024
#define MAX_SIZE (256ull << 20)
#define MAX_WORK_NS 1000000000ull

struct options {
	int procs;
	int memcpy; /* --mode memcpy: the single-thread copy bandwidth, for reference */
	int ring; /* --mode ring: two threads' copy in and copy out, no kernel: the ceiling */
	unsigned int writers, readers;
	uint64_t size, read_size, pipe_size;
	double duration;
	uint64_t work_ns; /* --work: the producer's computation before each write */
	enum produce produce;
	int verify, json;
	enum pressure_mode memory_pressure; /* PRESSURE_NONE without --memory-pressure */
	uint64_t pressure_limit;
	unsigned int filler_cpu_pct;
	int cpus_w[CLI_MAX_CPUS], ncpus_w;
	int cpus_r[CLI_MAX_CPUS], ncpus_r;
	const char *expect_preload;
};

struct writer_stats {
	uint64_t writes; /* write() calls; --produce api: blocks of --size */
	uint64_t bytes;
	uint64_t spans; /* --produce api: the spans the blocks took */
	uint64_t end_ns;
	uint64_t works, work_time_ns; /* --work: how often, and how long it took */
	uint64_t work_state; /* the end of its chain, so that no step is dead code */
	int error;
	struct histogram hist;
};

/* CPU time from the kernel's accounting (getrusage, wait4), in microseconds. */
struct cpu_use {
	uint64_t user_us, sys_us;
};

/* Lives in MAP_SHARED memory so that procs mode can use it across fork. */
struct shared {
	atomic_int stop;
	int read_error;
	uint64_t bytes_read;
	/*
	 * The CPU the run's tasks used: all writers, all readers, and (threads
	 * mode) the process's other threads but the main one, such as a preload
	 * library's own. Threads add theirs as they end; in procs mode the main
	 * process fills them in as it reaps.
	 */
	struct cpu_use cpu_writers, cpu_readers, cpu_other;
	pthread_mutex_t read_lock;
	struct stream_check check;
	struct writer_stats w[];
};

struct bench {
	const struct options *opt;
	uint64_t work_steps; /* --work in steps of work_run(), see work_calibrate() */
	struct shared *sh;
	int fds[2];
	int start[2];
};

struct task {
	struct bench *b;
	unsigned int id;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die_env(const char *what, int err)
{
	fprintf(stderr, "ppipe-bench: %s: %s\n", what, strerror(err));
	exit(EXIT_ENV);
}

/* Blocks until the main thread closes the start pipe's write end. */
static void wait_start(struct bench *b)
{
	char c;

	while (read(b->start[0], &c, 1) < 0 && errno == EINTR)
		;
}

static void *alloc_buffer(uint64_t size)
{
	void *p = NULL;

	if (posix_memalign(&p, 64, size))
		return NULL;
	memset(p, 'x', size);
	return p;
}

/*
 * --work: the producer's computation before each write, as a compressor
 * or an encoder would do it, writing its output into the buffer.
 *
 * Each step transforms one 64-bit word of the buffer in place, mixed with
 * a state that every step advances by a multiply: a dependency chain that
 * the CPU cannot overlap and the compiler cannot vectorize, and stores
 * into memory that write() then reads, so none of it can be removed. The
 * output comes out at a few GB/s, below memcpy's speed, as a real
 * producer's does, and passes wrap around the buffer where the last one
 * stopped, so the writer's cache holds what it is about to write.
 *
 * The amount is a fixed number of steps per write, calibrated once to
 * take --work ns on this machine, rather than a loop that reads a clock
 * until the time is up: a producer's work is fixed in instructions, so
 * when the pipe's readers and writers compete for the CPUs it takes
 * longer, as the real one would (work_avg_ns shows it), and no clock read
 * or system call (CLOCK_THREAD_CPUTIME_ID has no vDSO path) sits in the
 * loop it measures.
 */
static uint64_t work_run(uint64_t *words, size_t nwords, size_t *pos, uint64_t state,
			 uint64_t steps)
{
	size_t i = *pos;

	while (steps--) {
		state = state * 6364136223846793005ull + 1442695040888963407ull;
		words[i] = (words[i] ^ state) * 0x9e3779b97f4a7c15ull;
		if (++i == nwords)
			i = 0;
	}
	*pos = i;
	return state;
}

/* The words --work transforms: all of a write's bytes, at least one word. */
static size_t work_words(uint64_t size)
{
	return (size_t)((size + 7) / 8);
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t timeval_us(struct timeval tv)
{
	return (uint64_t)tv.tv_sec * 1000000ull + (uint64_t)tv.tv_usec;
}

/* Adds @ru's CPU time to @to, which other tasks may add to at the same time. */
static void cpu_add(struct cpu_use *to, const struct rusage *ru)
{
	__atomic_fetch_add(&to->user_us, timeval_us(ru->ru_utime), __ATOMIC_RELAXED);
	__atomic_fetch_add(&to->sys_us, timeval_us(ru->ru_stime), __ATOMIC_RELAXED);
}

/* A worker thread's CPU over its whole life (its buffer, the run), at its end. */
static void thread_cpu_add(struct cpu_use *to)
{
	struct rusage ru;

	if (!getrusage(RUSAGE_THREAD, &ru))
		cpu_add(to, &ru);
}

/*
 * Steps of work_run() that take @o->work_ns on a buffer of the write size:
 * measured in this thread's CPU time (a preemption does not count) before
 * any worker runs, the fastest of three measurements of at least 2 ms.
 */
static uint64_t work_calibrate(const struct options *o)
{
	size_t n = work_words(o->size), pos = 0;
	uint64_t *words, state = 1, steps = 4096, best = UINT64_MAX;
	volatile uint64_t sink;
	double per_ns;

	if (!o->work_ns)
		return 0;
	words = alloc_buffer(n * 8);
	if (!words)
		die_env("malloc", ENOMEM);
	for (int good = 0; good < 3;) {
		uint64_t t0 = cpu_ns(), dt;

		state = work_run(words, n, &pos, state, steps);
		dt = cpu_ns() - t0;
		if (dt < 2000000) {
			steps *= 2;
			good = 0;
			best = UINT64_MAX;
			continue;
		}
		if (dt < best)
			best = dt;
		good++;
	}
	sink = state;
	(void)sink;
	free(words);
	per_ns = (double)steps / (double)best;
	return (uint64_t)((double)o->work_ns * per_ns + 0.5) ?: 1;
}

/*
 * --produce api: one block of --size bytes generated in place into spans
 * of the pipe, as many as it takes (a span holds at most what one ring
 * region does), each committed whole. @ns gets the time spent in
 * ppipe_span_get() and ppipe_span_commit(), what write() is to the other
 * ways. Returns 0, or the errno that ended the block.
 */
static int write_spans(struct bench *b, unsigned int id, uint64_t *pos, uint64_t *ns)
{
	struct writer_stats *ws = &b->sh->w[id];
	uint64_t left = b->opt->size, t0;

	*ns = 0;
	while (left) {
		struct ppipe_span span;
		size_t len;

		t0 = now_ns();
		if (ppipe_span_get(b->fds[1], (size_t)left, &span))
			return errno;
		*ns += now_ns() - t0;
		ws->spans++;
		len = span.len;
		stream_words_fill(id, *pos, span.data, len);
		/* A partial commit leaves the rest in the span: commit it too. */
		for (size_t todo = len; todo;) {
			ssize_t n;

			t0 = now_ns();
			n = ppipe_span_commit(&span, todo);
			*ns += now_ns() - t0;
			if (n < 0) {
				int err = errno;

				if (err == EINTR)
					continue;
				ppipe_span_release(&span);
				return err;
			}
			todo -= (size_t)n;
			*pos += (uint64_t)n;
			ws->bytes += (uint64_t)n;
		}
		left -= len;
	}
	return 0;
}

static void writer_loop(struct bench *b, unsigned int id)
{
	const struct options *o = b->opt;
	struct writer_stats *ws = &b->sh->w[id];
	/* The work's words cover the write's last bytes whole; spans need no buffer. */
	unsigned char *buf =
		o->produce == PRODUCE_API ?
			NULL :
			alloc_buffer(b->work_steps ? work_words(o->size) * 8 : o->size);
	uint64_t pos = 0, state = id + 1;
	size_t work_pos = 0;

	cli_pin_one("ppipe-bench", o->cpus_w, o->ncpus_w, id);
	wait_start(b);
	if (!buf && o->produce != PRODUCE_API) {
		ws->error = ENOMEM;
		goto out;
	}
	while (!atomic_load_explicit(&b->sh->stop, memory_order_relaxed)) {
		uint64_t t0, dt;
		ssize_t n;

		if (b->work_steps) {
			t0 = now_ns();
			state = work_run((uint64_t *)buf, work_words(o->size), &work_pos, state,
					 b->work_steps);
			ws->work_time_ns += now_ns() - t0;
			ws->works++;
		}
		if (o->produce == PRODUCE_API) {
			int err = write_spans(b, id, &pos, &dt);

			if (err) {
				ws->error = err;
				break;
			}
			ws->writes++;
			hist_record(&ws->hist, dt);
			continue;
		}
		/* After the work: the verified stream is what goes out. */
		if (o->produce == PRODUCE_COPY)
			stream_words_fill(id, pos, buf, o->size);
		else if (o->verify)
			stream_fill(id, pos, buf, o->size);
		t0 = now_ns();
		n = write(b->fds[1], buf, o->size);
		dt = now_ns() - t0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ws->error = errno;
			break;
		}
		ws->writes++;
		ws->bytes += (uint64_t)n;
		pos += (uint64_t)n;
		hist_record(&ws->hist, dt);
	}
out:
	ws->end_ns = now_ns();
	ws->work_state = state;
	free(buf);
}

static void reader_loop(struct bench *b, unsigned int id)
{
	const struct options *o = b->opt;
	struct shared *sh = b->sh;
	unsigned char *buf = alloc_buffer(o->read_size);
	uint64_t got = 0;

	cli_pin_one("ppipe-bench", o->cpus_r, o->ncpus_r, id);
	wait_start(b);
	if (!buf) {
		sh->read_error = ENOMEM;
		return;
	}
	for (;;) {
		ssize_t n;

		/* Verification needs the stream in order: one read at a time. */
		if (o->verify)
			pthread_mutex_lock(&sh->read_lock);
		n = read(b->fds[0], buf, o->read_size);
		if (n > 0 && o->verify)
			stream_check_feed(&sh->check, buf, (size_t)n);
		if (o->verify)
			pthread_mutex_unlock(&sh->read_lock);
		if (n > 0) {
			got += (uint64_t)n;
			continue;
		}
		if (!n)
			break;
		if (errno == EINTR)
			continue;
		sh->read_error = errno;
		break;
	}
	__atomic_fetch_add(&sh->bytes_read, got, __ATOMIC_RELAXED);
	free(buf);
}

static void *writer_thread(void *arg)
{
	struct task *t = arg;

	writer_loop(t->b, t->id);
	thread_cpu_add(&t->b->sh->cpu_writers);
	return NULL;
}

static void *reader_thread(void *arg)
{
	struct task *t = arg;

	reader_loop(t->b, t->id);
	thread_cpu_add(&t->b->sh->cpu_readers);
	return NULL;
}

static void sleep_until(uint64_t deadline)
{
	struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000000ull),
			       .tv_nsec = (long)(deadline % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Releases the workers, lets them run, tells the writers to stop. */
static uint64_t run_clock(struct bench *b)
{
	uint64_t start = now_ns();

	close(b->start[1]);
	sleep_until(start + (uint64_t)(b->opt->duration * 1e9));
	atomic_store(&b->sh->stop, 1);
	return start;
}

/*
 * The process's CPU between @self0/@main0 and now that is neither a
 * worker's own nor the main thread's: threads a preload library started
 * (a write-behind service thread) and the workers' thread exits. Each
 * task's split into user and system time is the kernel's estimate from
 * timer ticks, made task by task, while each task's total is exact: so
 * the total is the difference of the totals, and a part that comes out
 * below 0 gives the whole of it to the other part.
 */
static void other_threads_cpu(struct shared *sh, const struct rusage *self0,
			      const struct rusage *main0)
{
	struct rusage self1, main1;
	int64_t user, sys;

	if (getrusage(RUSAGE_SELF, &self1) || getrusage(RUSAGE_THREAD, &main1))
		return;
	user = (int64_t)(timeval_us(self1.ru_utime) - timeval_us(self0->ru_utime)) -
	       (int64_t)(timeval_us(main1.ru_utime) - timeval_us(main0->ru_utime)) -
	       (int64_t)(sh->cpu_writers.user_us + sh->cpu_readers.user_us);
	sys = (int64_t)(timeval_us(self1.ru_stime) - timeval_us(self0->ru_stime)) -
	      (int64_t)(timeval_us(main1.ru_stime) - timeval_us(main0->ru_stime)) -
	      (int64_t)(sh->cpu_writers.sys_us + sh->cpu_readers.sys_us);
	if (user + sys <= 0)
		return;
	if (user < 0) {
		sys += user;
		user = 0;
	} else if (sys < 0) {
		user += sys;
		sys = 0;
	}
	sh->cpu_other.user_us = (uint64_t)user;
	sh->cpu_other.sys_us = (uint64_t)sys;
}

static int run_threads(struct bench *b, uint64_t *start)
{
	const struct options *o = b->opt;
	unsigned int n = o->writers + o->readers;
	pthread_t tid[2 * MAX_TASKS];
	struct task task[2 * MAX_TASKS];
	struct rusage self0, main0;
	unsigned int i;
	int err;

	if (getrusage(RUSAGE_SELF, &self0) || getrusage(RUSAGE_THREAD, &main0))
		die_env("getrusage", errno);
	for (i = 0; i < n; i++) {
		int is_writer = i < o->writers;

		task[i].b = b;
		task[i].id = is_writer ? i : i - o->writers;
		err = pthread_create(&tid[i], NULL, is_writer ? writer_thread : reader_thread,
				     &task[i]);
		if (err) {
			fprintf(stderr, "ppipe-bench: pthread_create: %s\n", strerror(err));
			exit(EXIT_ENV);
		}
	}
	*start = run_clock(b);
	for (i = 0; i < o->writers; i++)
		pthread_join(tid[i], NULL);
	close(b->fds[1]);
	for (; i < n; i++)
		pthread_join(tid[i], NULL);
	close(b->fds[0]);
	other_threads_cpu(b->sh, &self0, &main0);
	return 0;
}

static int run_procs(struct bench *b, uint64_t *start)
{
	const struct options *o = b->opt;
	unsigned int n = o->writers + o->readers;
	pid_t pid[2 * MAX_TASKS];
	int failed = 0;

	for (unsigned int i = 0; i < n; i++) {
		int is_writer = i < o->writers;

		pid[i] = fork();
		if (pid[i] < 0) {
			fprintf(stderr, "ppipe-bench: fork: %s\n", strerror(errno));
			exit(EXIT_ENV);
		}
		if (pid[i])
			continue;
		close(b->start[1]);
		close(b->fds[is_writer ? 0 : 1]);
		if (is_writer)
			writer_loop(b, i);
		else
			reader_loop(b, i - o->writers);
		/* exit, not _exit: a preload library's exit handlers (statistics) run. */
		exit(0);
	}
	close(b->fds[0]);
	close(b->fds[1]);
	*start = run_clock(b);
	for (unsigned int i = 0; i < n; i++) {
		struct rusage ru;
		int status;

		/* Each worker process's whole life, all its threads, from its reaping. */
		while (wait4(pid[i], &status, 0, &ru) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			failed = 1;
		cpu_add(i < o->writers ? &b->sh->cpu_writers : &b->sh->cpu_readers, &ru);
	}
	return failed ? -1 : 0;
}

/* ---- results ---- */

struct summary {
	uint64_t writes, bytes, spans, end_ns;
	double elapsed_s, mbps, writes_per_s;
	double write_time_share; /* of the writers' time, the part inside write() */
	uint64_t work_avg_ns; /* --work: what it took per write, on the clock */
	struct histogram hist;
};

static void summarize(const struct bench *b, uint64_t start, struct summary *s)
{
	uint64_t lives = 0, works = 0, work_time = 0;

	memset(s, 0, sizeof(*s));
	for (unsigned int i = 0; i < b->opt->writers; i++) {
		const struct writer_stats *ws = &b->sh->w[i];

		s->writes += ws->writes;
		s->bytes += ws->bytes;
		s->spans += ws->spans;
		if (ws->end_ns > s->end_ns)
			s->end_ns = ws->end_ns;
		if (ws->end_ns > start)
			lives += ws->end_ns - start;
		works += ws->works;
		work_time += ws->work_time_ns;
		hist_merge(&s->hist, &ws->hist);
	}
	/*
	 * What write-behind could give back to the producer: the histogram
	 * holds every write()'s duration, each writer lives from the start
	 * to its end.
	 */
	if (lives)
		s->write_time_share = (double)s->hist.sum / (double)lives;
	if (works)
		s->work_avg_ns = work_time / works;
	s->elapsed_s = (double)(s->end_ns - start) / 1e9;
	if (s->elapsed_s > 0) {
		s->mbps = (double)s->bytes / s->elapsed_s / (1024.0 * 1024.0);
		s->writes_per_s = (double)s->writes / s->elapsed_s;
	}
}

/* The CPU of one group of the run's tasks; "all" is the sum of the others. */
struct cpu_group {
	const char *name;
	struct cpu_use use;
};

enum { CPU_GROUPS = 4 };

static void cpu_groups(const struct shared *sh, struct cpu_group g[CPU_GROUPS])
{
	g[0] = (struct cpu_group){ "writers", sh->cpu_writers };
	g[1] = (struct cpu_group){ "readers", sh->cpu_readers };
	g[2] = (struct cpu_group){ "other", sh->cpu_other };
	g[3] = (struct cpu_group){ "all", { 0, 0 } };
	for (int i = 0; i < 3; i++) {
		g[3].use.user_us += g[i].use.user_us;
		g[3].use.sys_us += g[i].use.sys_us;
	}
}

/* What the CPU counts hold, in the JSON's and the text's "counted". */
static const char *cpu_counted(const struct options *o)
{
	return o->procs ? "processes" : "threads";
}

static double gib_moved(const struct summary *s)
{
	return (double)s->bytes / (double)(1ull << 30);
}

static void print_cpu_json(FILE *f, const struct bench *b, const struct summary *s)
{
	struct cpu_group g[CPU_GROUPS];
	double gib = gib_moved(s);

	cpu_groups(b->sh, g);
	fprintf(f, "\"cpu\":{\"counted\":\"%s\"", cpu_counted(b->opt));
	for (int i = 0; i < CPU_GROUPS; i++) {
		double user = (double)g[i].use.user_us / 1e6, sys = (double)g[i].use.sys_us / 1e6;
		double total = (double)(g[i].use.user_us + g[i].use.sys_us) / 1e6;

		fprintf(f, ",\"%s\":{\"user_s\":%.6f,\"sys_s\":%.6f,\"total_s\":%.6f,", g[i].name,
			user, sys, total);
		if (gib > 0)
			fprintf(f,
				"\"user_s_per_gib\":%.9g,\"sys_s_per_gib\":%.9g,"
				"\"total_s_per_gib\":%.9g}",
				user / gib, sys / gib, total / gib);
		else
			fprintf(f, "\"user_s_per_gib\":null,\"sys_s_per_gib\":null,"
				   "\"total_s_per_gib\":null}");
	}
	fprintf(f, "}");
}

static void print_cpu_text(const struct bench *b, const struct summary *s)
{
	struct cpu_group g[CPU_GROUPS];
	double gib = gib_moved(s);

	cpu_groups(b->sh, g);
	printf("cpu_counted: %s\n", cpu_counted(b->opt));
	for (int i = 0; i < CPU_GROUPS; i++) {
		double user = (double)g[i].use.user_us / 1e6, sys = (double)g[i].use.sys_us / 1e6;
		double total = (double)(g[i].use.user_us + g[i].use.sys_us) / 1e6;

		printf("cpu_%s: user_s=%.6f sys_s=%.6f total_s=%.6f", g[i].name, user, sys, total);
		if (gib > 0)
			printf(" user_s_per_gib=%.4f sys_s_per_gib=%.4f total_s_per_gib=%.4f",
			       user / gib, sys / gib, total / gib);
		printf("\n");
	}
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

#define DELTA(field) (p->after.field - p->before.field)

static void print_pressure_json(FILE *f, const struct pressure *p)
{
	double share = pressure_helper_cpu_share(p);

	fprintf(f, "{\"mode\":\"%s\",\"method\":\"%s\",\"stressor\":", pressure_mode_name(p->mode),
		p->method);
	json_string(f, p->stressor);
	fprintf(f,
		",\"cgroup_limit\":%" PRIu64
		",\"wall_s\":%.6f,\"vmstat_delta\":{\"pgscan_direct\":%" PRIu64
		",\"pgsteal_direct\":%" PRIu64 ",\"allocstall\":%" PRIu64
		",\"pgscan_kswapd\":%" PRIu64 "},",
		p->mode == PRESSURE_MEMCG ? p->limit : 0, (double)DELTA(wall_ns) / 1e9,
		DELTA(pgscan_direct), DELTA(pgsteal_direct), DELTA(allocstall),
		DELTA(pgscan_kswapd));
	if (!strcmp(p->method, "cgroup-v2"))
		fprintf(f,
			"\"memcg_delta\":{\"pgscan_direct\":%" PRIu64 ",\"pgsteal_direct\":%" PRIu64
			",\"max_events\":%" PRIu64 ",\"max_events_local\":%" PRIu64 "},",
			DELTA(memcg_pgscan_direct), DELTA(memcg_pgsteal_direct), DELTA(memcg_max),
			DELTA(memcg_max_local));
	else if (!strcmp(p->method, "cgroup-v1"))
		fprintf(f, "\"memcg_delta\":{\"failcnt\":%" PRIu64 "},", DELTA(memcg_failcnt));
	else
		fprintf(f, "\"memcg_delta\":null,");
	if (p->have_stall)
		fprintf(f, "\"bench_stall_us\":%" PRIu64 ",", DELTA(bench_stall_us));
	else
		fprintf(f, "\"bench_stall_us\":null,");
	fprintf(f, "\"helper\":{\"what\":\"%s\",\"cpu_budget\":",
		p->mode == PRESSURE_MEMCG ? "filler" : "stress-ng");
	if (p->mode == PRESSURE_MEMCG)
		fprintf(f, "%.2f", p->filler_cpu_pct / 100.0);
	else
		fprintf(f, "null");
	if (share >= 0)
		fprintf(f, ",\"cpu_us\":%" PRIu64 ",\"cpu_share\":%.4f,\"cpu_from\":\"%s\"},",
			DELTA(helper_cpu_us), share, p->cpu_from);
	else
		fprintf(f, ",\"cpu_us\":null,\"cpu_share\":null,\"cpu_from\":null},");
	fprintf(f, "\"direct_reclaim\":%s,\"direct_reclaim_scope\":\"%s\"}",
		pressure_saw_direct_reclaim(p) ? "true" : "false", pressure_reclaim_scope(p));
}

/* One line of evidence for the text output. */
static void print_pressure_text(const struct pressure *p)
{
	double share = pressure_helper_cpu_share(p);
	double wall = (double)DELTA(wall_ns) / 1e9;

	printf("pressure: %s, %s (%s)\n", pressure_mode_name(p->mode), p->method, p->stressor);
	printf("pressure: direct reclaim in the %s: %s", pressure_reclaim_scope(p),
	       pressure_saw_direct_reclaim(p) ? "yes" : "NO");
	if (p->have_stall)
		printf("; benchmark stalled on memory %" PRIu64 " us (%.2f%% of the run)",
		       DELTA(bench_stall_us),
		       wall > 0 ? (double)DELTA(bench_stall_us) / 1e4 / wall : 0.0);
	if (!strcmp(p->method, "cgroup-v2"))
		printf("; cgroup pgscan_direct %" PRIu64 ", max events %" PRIu64,
		       DELTA(memcg_pgscan_direct), DELTA(memcg_max));
	else if (!strcmp(p->method, "cgroup-v1"))
		printf("; cgroup failcnt %" PRIu64, DELTA(memcg_failcnt));
	else
		printf("; system pgscan_direct %" PRIu64 ", allocstall %" PRIu64,
		       DELTA(pgscan_direct), DELTA(allocstall));
	if (share >= 0)
		printf("; %s CPU %.1f%% of one CPU\n",
		       p->mode == PRESSURE_MEMCG ? "filler" : "stress-ng", share * 100);
	else
		printf("; helper CPU unknown\n");
}

static void print_json(const struct bench *b, const struct summary *s, const struct pressure *p,
		       const struct cli_preloads *pl, const char *api_version, int verified)
{
	const struct options *o = b->opt;
	const struct histogram *h = &s->hist;
	FILE *f = stdout;
	int first = 1;

	fprintf(f,
		"{\"tool\":\"ppipe-bench\",\"version\":\"%s\",\"mode\":\"%s\",\"writers\":%u,"
		"\"readers\":%u,\"size\":%" PRIu64 ",\"read_size\":%" PRIu64
		",\"pipe_size\":%" PRIu64 ",\"work_ns\":%" PRIu64
		",\"produce\":\"%s\",\"duration_s\":%g,\"elapsed_s\":%.6f,",
		PPIPE_VERSION, o->procs ? "procs" : "threads", o->writers, o->readers, o->size,
		o->read_size, o->pipe_size, o->work_ns, produce_names[o->produce], o->duration,
		s->elapsed_s);
	fprintf(f, "\"verify\":%s,\"verified\":%s,\"memory_pressure\":%s,\"pressure_mode\":",
		o->verify ? "true" : "false", o->verify ? (verified ? "true" : "false") : "null",
		o->memory_pressure ? "true" : "false");
	if (o->memory_pressure)
		fprintf(f, "\"%s\",", pressure_mode_name(o->memory_pressure));
	else
		fprintf(f, "null,");
	fprintf(f,
		"\"writes\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"bytes_read\":%" PRIu64
		",\"spans\":%" PRIu64
		",\"mbps\":%.3f,\"writes_per_s\":%.1f,\"write_time_share\":%.4f,\"work_avg_ns\":%" PRIu64
		",",
		s->writes, s->bytes, b->sh->bytes_read, s->spans, s->mbps, s->writes_per_s,
		s->write_time_share, s->work_avg_ns);
	fprintf(f,
		"\"lat_avg_ns\":%" PRIu64 ",\"lat_p50_ns\":%" PRIu64 ",\"lat_p99_ns\":%" PRIu64
		",\"lat_p999_ns\":%" PRIu64 ",\"lat_max_ns\":%" PRIu64 ",\"per_writer\":[",
		hist_mean(h), hist_quantile(h, 0.50), hist_quantile(h, 0.99),
		hist_quantile(h, 0.999), h->max);
	for (unsigned int i = 0; i < o->writers; i++) {
		const struct writer_stats *ws = &b->sh->w[i];

		fprintf(f,
			"%s{\"writes\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"lat_avg_ns\":%" PRIu64
			",\"lat_p99_ns\":%" PRIu64 ",\"lat_max_ns\":%" PRIu64 "}",
			i ? "," : "", ws->writes, ws->bytes, hist_mean(&ws->hist),
			hist_quantile(&ws->hist, 0.99), ws->hist.max);
	}
	fprintf(f, "],\"pressure\":");
	if (o->memory_pressure)
		print_pressure_json(f, p);
	else
		fprintf(f, "null");
	fprintf(f, ",");
	print_cpu_json(f, b, s);
	/* What ppipe_version() answered: null where libppipe is not in the process. */
	fprintf(f, ",\"ppipe_version\":");
	if (api_version)
		json_string(f, api_version);
	else
		fprintf(f, "null");
	fprintf(f, ",\"preloaded\":[");
	for (int i = 0; i < pl->n; i++) {
		if (!pl->mapped[i] || (o->expect_preload && pl->want[i] == o->expect_preload))
			continue;
		fprintf(f, "%s", first ? "" : ",");
		json_string(f, pl->want[i]);
		first = 0;
	}
	fprintf(f, "]}\n");
}

static void print_text(const struct bench *b, const struct summary *s, const struct pressure *p,
		       const char *api_version, int verified)
{
	const struct options *o = b->opt;
	const struct histogram *h = &s->hist;

	printf("config: mode=%s writers=%u readers=%u size=%" PRIu64 " pipe_size=%" PRIu64
	       " work_ns=%" PRIu64 " produce=%s duration=%g memory_pressure=%s verify=%s\n",
	       o->procs ? "procs" : "threads", o->writers, o->readers, o->size, o->pipe_size,
	       o->work_ns, produce_names[o->produce], o->duration,
	       o->memory_pressure ? pressure_mode_name(o->memory_pressure) : "no",
	       o->verify ? "yes" : "no");
	printf("writes: total=%" PRIu64 " rate=%.0f/s elapsed=%.3fs\n", s->writes, s->writes_per_s,
	       s->elapsed_s);
	if (o->produce == PRODUCE_API)
		printf("spans: total=%" PRIu64 " of libppipe %s\n", s->spans,
		       api_version ? api_version : "(absent: the header's buffers)");
	printf("throughput_MBps: %.2f\n", s->mbps);
	printf("write_time_share: %.4f\n", s->write_time_share);
	if (o->work_ns)
		printf("work_avg_ns: %" PRIu64 "\n", s->work_avg_ns);
	printf("lat_avg_ns: %" PRIu64 "\nlat_p50_ns: %" PRIu64 "\nlat_p99_ns: %" PRIu64
	       "\nlat_p999_ns: %" PRIu64 "\nlat_max_ns: %" PRIu64 "\n",
	       hist_mean(h), hist_quantile(h, 0.50), hist_quantile(h, 0.99),
	       hist_quantile(h, 0.999), h->max);
	print_cpu_text(b, s);
	if (o->memory_pressure)
		print_pressure_text(p);
	if (o->verify)
		printf("verify: %s\n", verified ? "ok" : "FAILED");
}

/*
 * The reference a pipe is measured against: one thread copying @size
 * bytes between two warm buffers, as fast as memcpy goes.
 */
static int run_memcpy(const struct options *o)
{
	unsigned char *a = alloc_buffer(o->size), *b = alloc_buffer(o->size);
	uint64_t start, end, bytes = 0;

	if (!a || !b)
		die_env("malloc", ENOMEM);
	start = now_ns();
	end = start + (uint64_t)(o->duration * 1e9);
	do {
		memcpy(b, a, o->size);
		__asm__ volatile("" : : "r"(b) : "memory");
		bytes += o->size;
	} while (now_ns() < end);
	end = now_ns();
	printf(o->json ? "{\"tool\":\"ppipe-bench\",\"version\":\"%s\",\"mode\":\"memcpy\","
			 "\"size\":%" PRIu64 ",\"mbps\":%.3f}\n" :
			 "ppipe-bench %s memcpy size=%" PRIu64 " throughput_MBps: %.2f\n",
	       PPIPE_VERSION, o->size, (double)bytes / ((double)(end - start) / 1e9) / 1048576.0);
	free(a);
	free(b);
	return 0;
}

/*
 * --mode ring: what any transport that copies a block in and a block out
 * can reach between two threads of this machine, with no kernel and no
 * lock on the way. A writer thread copies @size bytes into a slot of a
 * shared ring of 2 MiB (or two slots, if larger), huge-page backed, as
 * libppipe's ring for a 1 MiB pipe is; a reader thread copies them out of
 * it into its own buffer; two sequence numbers hand the slots over.
 * libppipe's write copies a block in and the reader's read() copies it
 * out, so its MB/s over this ceiling is the share of the machine the
 * kernel's pipe leaves it.
 */
struct ring_run {
	const struct options *o;
	unsigned char *slots;
	uint64_t nslots;
	_Alignas(64) atomic_uint_fast64_t filled; /* blocks the writer has copied in */
	_Alignas(64) atomic_uint_fast64_t drained; /* blocks the reader has copied out */
	_Alignas(64) atomic_int stop;
};

/* Spin for the other side, yielding now and then in case both share a cpu. */
static int ring_wait(struct ring_run *rr, atomic_uint_fast64_t *seq, uint64_t until)
{
	unsigned int spins = 0;

	while (atomic_load_explicit(seq, memory_order_acquire) < until) {
		if (atomic_load_explicit(&rr->stop, memory_order_relaxed))
			return -1;
		if (++spins % 4096 == 0)
			sched_yield();
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	return 0;
}

/*
 * One side of the ring: the writer copies its block into slot i once the
 * reader has drained the block that used it before, the reader copies slot
 * i out once the writer has filled it; each then publishes i + 1.
 */
struct ring_side {
	struct ring_run *rr;
	bool writer;
};

static void *ring_side(void *arg)
{
	const struct ring_side *side = arg;
	struct ring_run *rr = side->rr;
	const struct options *o = rr->o;
	atomic_uint_fast64_t *wait_on = side->writer ? &rr->drained : &rr->filled;
	atomic_uint_fast64_t *publish = side->writer ? &rr->filled : &rr->drained;
	unsigned char *own = alloc_buffer(o->size), *slot;
	uint64_t i;

	if (!own)
		die_env("malloc", ENOMEM);
	if (side->writer)
		cli_pin_one("ppipe-bench", o->cpus_w, o->ncpus_w, 0);
	else
		cli_pin_one("ppipe-bench", o->cpus_r, o->ncpus_r, 0);
	for (i = 0; !ring_wait(rr, wait_on,
			       side->writer ? (i < rr->nslots ? 0 : i - rr->nslots + 1) : i + 1);
	     i++) {
		slot = rr->slots + (i % rr->nslots) * o->size;
		if (side->writer)
			memcpy(slot, own, o->size);
		else
			memcpy(own, slot, o->size);
		__asm__ volatile("" : : "r"(own), "r"(slot) : "memory");
		atomic_store_explicit(publish, i + 1, memory_order_release);
	}
	free(own);
	return NULL;
}

static int run_ring(const struct options *o)
{
	size_t huge = 2u << 20;
	struct ring_run rr = { .o = o, .nslots = o->size * 2 >= huge ? 2 : huge / o->size };
	struct ring_side reader = { &rr, false }, writer = { &rr, true };
	size_t len = (size_t)(o->size * rr.nslots), map = (len + 2 * huge - 1) & ~(huge - 1);
	uint64_t start, end, blocks;
	unsigned char *m;
	pthread_t w, r;
	int err;

	m = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		die_env("mmap", errno);
	rr.slots = (unsigned char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
	(void)madvise(rr.slots, len, MADV_HUGEPAGE); /* as libppipe's rings may have them */
	memset(rr.slots, 'x', len);
	if ((err = pthread_create(&r, NULL, ring_side, &reader)))
		die_env("pthread_create", err);
	if ((err = pthread_create(&w, NULL, ring_side, &writer)))
		die_env("pthread_create", err);
	/* The threads' start and first laps are not counted: 50 ms of warm-up. */
	usleep(50000);
	blocks = atomic_load_explicit(&rr.drained, memory_order_acquire);
	start = now_ns();
	usleep((useconds_t)(o->duration * 1e6));
	blocks = atomic_load_explicit(&rr.drained, memory_order_acquire) - blocks;
	end = now_ns();
	atomic_store(&rr.stop, 1);
	pthread_join(w, NULL);
	pthread_join(r, NULL);
	munmap(m, map);
	printf(o->json ? "{\"tool\":\"ppipe-bench\",\"version\":\"%s\",\"mode\":\"ring\","
			 "\"size\":%" PRIu64 ",\"mbps\":%.3f}\n" :
			 "ppipe-bench %s ring size=%" PRIu64 " throughput_MBps: %.2f\n",
	       PPIPE_VERSION, o->size,
	       (double)blocks * (double)o->size / ((double)(end - start) / 1e9) / 1048576.0);
	return 0;
}

/* ---- command line ---- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ppipe-bench [options]\n"
		"  --mode threads|procs    writers and readers as threads or processes (threads)\n"
		"  --mode memcpy           instead: one thread's memcpy bandwidth at --size\n"
		"  --mode ring             instead: a writer thread copying --size blocks into\n"
		"                          a shared ring and a reader thread copying them out,\n"
		"                          no kernel: the ceiling of a copy in and a copy out\n"
		"  -w, --writers N         writer count (1)\n"
		"  -r, --readers N         reader count (1)\n"
		"  -s, --size BYTES        bytes per write(), K/M/G suffixes are binary (64K)\n"
		"      --read-size BYTES   bytes per read() (same as --size)\n"
		"      --work NS           each writer computes NS ns before every write, into\n"
		"                          its buffer (ns, or us/ms/s suffixes; 0: none)\n"
		"      --produce HOW       how writers make each write: prepared (one buffer,\n"
		"                          written again and again; the default), copy (every\n"
		"                          block generated into the writer's buffer, then\n"
		"                          write()), api (every block generated in place into\n"
		"                          ppipe_span_get() spans, then committed; ppipe.h)\n"
		"  -p, --pipe-size BYTES   F_SETPIPE_SZ; 0 keeps the default (1M)\n"
		"  -d, --duration SECONDS  run time, fractions allowed (3)\n"
		"      --verify            check every byte (sequence numbers, checksums)\n"
		"      --memory-pressure[=MODE]  run under memory pressure; MODE memcg (the\n"
		"                          default): in a memory cgroup a page-cache filler\n"
		"                          keeps full; hog: stress-ng over half of RAM\n"
		"      --pressure-limit B  memcg: the cgroup's limit (512M)\n"
		"      --filler-cpu PCT    memcg: the filler's CPU budget, %% of one CPU (15)\n"
		"      --cpus-writers LIST pin writers round-robin to these cpus (0,2-3)\n"
		"      --cpus-readers LIST pin readers likewise\n"
		"      --expect-preload P  fail unless library P is loaded in this process\n"
		"      --json              print one JSON object instead of text\n"
		"      --version           print the version\n");
}

__attribute__((format(printf, 1, 2))) static void die_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ppipe-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(EXIT_USAGE);
}

static unsigned int parse_count(const char *name, const char *s, unsigned int max)
{
	uint64_t v;

	if (cli_parse_size(s, &v) || !v || v > max) {
		fprintf(stderr, "ppipe-bench: %s: '%s' is not a count between 1 and %u\n", name, s,
			max);
		exit(EXIT_USAGE);
	}
	return (unsigned int)v;
}

static void parse_args(int argc, char **argv, struct options *o)
{
	enum {
		O_MODE = 256,
		O_READ_SIZE,
		O_WORK,
		O_PRODUCE,
		O_VERIFY,
		O_PRESSURE,
		O_LIMIT,
		O_FILLER_CPU,
		O_CPUS_W,
		O_CPUS_R,
		O_EXPECT,
		O_JSON,
		O_VERSION,
		O_HELP
	};
	static const struct option lopts[] = {
		{ "mode", required_argument, NULL, O_MODE },
		{ "writers", required_argument, NULL, 'w' },
		{ "readers", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 's' },
		{ "read-size", required_argument, NULL, O_READ_SIZE },
		{ "work", required_argument, NULL, O_WORK },
		{ "produce", required_argument, NULL, O_PRODUCE },
		{ "pipe-size", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "verify", no_argument, NULL, O_VERIFY },
		{ "memory-pressure", optional_argument, NULL, O_PRESSURE },
		{ "pressure-limit", required_argument, NULL, O_LIMIT },
		{ "filler-cpu", required_argument, NULL, O_FILLER_CPU },
		{ "cpus-writers", required_argument, NULL, O_CPUS_W },
		{ "cpus-readers", required_argument, NULL, O_CPUS_R },
		{ "expect-preload", required_argument, NULL, O_EXPECT },
		{ "json", no_argument, NULL, O_JSON },
		{ "version", no_argument, NULL, O_VERSION },
		{ "help", no_argument, NULL, O_HELP },
		{ 0 },
	};
	char *end;
	int c;

	*o = (struct options){ .writers = 1,
			       .readers = 1,
			       .size = 64 << 10,
			       .pipe_size = 1 << 20,
			       .duration = 3,
			       .pressure_limit = 512 << 20,
			       .filler_cpu_pct = PRESSURE_FILLER_CPU_PCT };
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":w:r:s:p:d:", lopts, NULL)) != -1) {
		switch (c) {
		case O_MODE:
			if (!strcmp(optarg, "threads") || !strcmp(optarg, "procs"))
				o->procs = !strcmp(optarg, "procs");
			else if (!strcmp(optarg, "memcpy"))
				o->memcpy = 1;
			else if (!strcmp(optarg, "ring"))
				o->ring = 1;
			else
				die_usage("--mode: '%s' is not threads, procs, memcpy or ring",
					  optarg);
			break;
		case 'w':
			o->writers = parse_count("--writers", optarg, MAX_TASKS);
			break;
		case 'r':
			o->readers = parse_count("--readers", optarg, MAX_TASKS);
			break;
		case 's':
			if (cli_parse_size(optarg, &o->size) || !o->size || o->size > MAX_SIZE)
				die_usage("--size: '%s' is not a byte count from 1 to 256M",
					  optarg);
			break;
		case O_READ_SIZE:
			if (cli_parse_size(optarg, &o->read_size) || !o->read_size ||
			    o->read_size > MAX_SIZE)
				die_usage("--read-size: '%s' is not a byte count from 1 to 256M",
					  optarg);
			break;
		case O_WORK:
			if (cli_parse_ns(optarg, &o->work_ns) || o->work_ns > MAX_WORK_NS)
				die_usage(
					"--work: '%s' is not a time from 0 to 1s (ns, or a us, ms "
					"or s suffix)",
					optarg);
			break;
		case O_PRODUCE: {
			unsigned int i = 0;

			while (i < sizeof(produce_names) / sizeof(produce_names[0]) &&
			       strcmp(optarg, produce_names[i]))
				i++;
			if (i == sizeof(produce_names) / sizeof(produce_names[0]))
				die_usage("--produce: '%s' is not prepared, copy or api", optarg);
			o->produce = (enum produce)i;
			break;
		}
		case 'p':
			if (cli_parse_size(optarg, &o->pipe_size) || o->pipe_size > INT_MAX)
				die_usage("--pipe-size: '%s' is not a byte count below 2G", optarg);
			break;
		case 'd':
			errno = 0;
			o->duration = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->duration > 0) ||
			    o->duration > 86400)
				die_usage(
					"--duration: '%s' is not a number of seconds in (0, 86400]",
					optarg);
			break;
		case O_VERIFY:
			o->verify = 1;
			break;
		case O_PRESSURE:
			o->memory_pressure = optarg ? pressure_mode_parse(optarg) : PRESSURE_MEMCG;
			if (!o->memory_pressure)
				die_usage("--memory-pressure: '%s' is not memcg or hog", optarg);
			break;
		case O_FILLER_CPU: {
			uint64_t v;

			if (cli_parse_size(optarg, &v) || !v || v > 100)
				die_usage("--filler-cpu: '%s' is not a percentage from 1 to 100",
					  optarg);
			o->filler_cpu_pct = (unsigned int)v;
			break;
		}
		case O_LIMIT:
			if (cli_parse_size(optarg, &o->pressure_limit) ||
			    o->pressure_limit < (64u << 20))
				die_usage(
					"--pressure-limit: '%s' is not a byte count of at least 64M",
					optarg);
			break;
		case O_CPUS_W:
			o->ncpus_w = cli_parse_cpus(optarg, o->cpus_w);
			if (o->ncpus_w < 0)
				die_usage("--cpus-writers: '%s' is not a cpu list like 0,2-3",
					  optarg);
			break;
		case O_CPUS_R:
			o->ncpus_r = cli_parse_cpus(optarg, o->cpus_r);
			if (o->ncpus_r < 0)
				die_usage("--cpus-readers: '%s' is not a cpu list like 0,2-3",
					  optarg);
			break;
		case O_EXPECT:
			o->expect_preload = optarg;
			break;
		case O_JSON:
			o->json = 1;
			break;
		case O_VERSION:
			printf("ppipe-bench %s\n", PPIPE_VERSION);
			exit(0);
		case O_HELP:
			usage(stdout);
			exit(0);
		case ':':
			die_usage("%s needs a value", argv[optind - 1]);
			break;
		default:
			die_usage("unknown option '%s' (see --help)", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (!o->read_size)
		o->read_size = o->size;
	if ((o->memcpy || o->ring) && o->work_ns)
		die_usage("--work applies to --mode threads and procs, not %s",
			  o->memcpy ? "memcpy" : "ring");
	if ((o->memcpy || o->ring) && o->produce != PRODUCE_PREPARED)
		die_usage("--produce applies to --mode threads and procs, not %s",
			  o->memcpy ? "memcpy" : "ring");
	if (o->work_ns && o->produce != PRODUCE_PREPARED)
		die_usage("--work applies to --produce prepared: copy and api generate every block "
			  "themselves");
	if (o->verify && o->writers > STREAM_MAX_WRITERS) {
		fprintf(stderr, "ppipe-bench: --verify supports at most %d writers\n",
			STREAM_MAX_WRITERS);
		exit(EXIT_USAGE);
	}
}

static void setup_pipe(struct bench *b, struct options *o)
{
	int got;

	if (pipe(b->fds))
		die_env("pipe", errno);
	if (pipe(b->start))
		die_env("pipe", errno);
	if (o->pipe_size && fcntl(b->fds[1], F_SETPIPE_SZ, (int)o->pipe_size) < 0) {
		if (errno == EPERM)
			fprintf(stderr,
				"ppipe-bench: F_SETPIPE_SZ %" PRIu64
				": above /proc/sys/fs/pipe-max-size for this user\n",
				o->pipe_size);
		else
			fprintf(stderr, "ppipe-bench: F_SETPIPE_SZ %" PRIu64 ": %s\n", o->pipe_size,
				strerror(errno));
		exit(EXIT_ENV);
	}
	got = fcntl(b->fds[1], F_GETPIPE_SZ);
	if (got < 0)
		die_env("F_GETPIPE_SZ", errno);
	o->pipe_size = (uint64_t)got;
}

static struct shared *alloc_shared(unsigned int writers, unsigned int verify_writers,
				   enum produce produce)
{
	size_t len = sizeof(struct shared) + writers * sizeof(struct writer_stats);
	pthread_mutexattr_t attr;
	struct shared *sh;

	sh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die_env("mmap", errno);
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&sh->read_lock, &attr);
	pthread_mutexattr_destroy(&attr);
	if (produce == PRODUCE_PREPARED)
		stream_check_init(&sh->check, verify_writers);
	else
		stream_check_init_words(&sh->check, verify_writers);
	return sh;
}

int main(int argc, char **argv)
{
	struct options opt;
	struct bench b = { .opt = &opt };
	struct pressure pr = { .method = "none", .stressor = "" };
	struct summary sum;
	struct cli_preloads pl;
	char err[512];
	uint64_t start, written[STREAM_MAX_WRITERS] = { 0 };
	int failed = 0, verified = 1, run;

	parse_args(argc, argv, &opt);
	signal(SIGPIPE, SIG_IGN);
	if (opt.memcpy)
		return run_memcpy(&opt);
	if (opt.ring)
		return run_ring(&opt);

	cli_find_preloads(&pl, getenv("LD_PRELOAD"), opt.expect_preload);
	if (opt.expect_preload && !pl.mapped[pl.n - 1]) {
		fprintf(stderr,
			"ppipe-bench: %s is not loaded in this process "
			"(missing, not in LD_PRELOAD, or ld.so refused it)\n",
			opt.expect_preload);
		return EXIT_ENV;
	}
	/* Before the pressure's stressors take CPU time and memory. */
	b.work_steps = work_calibrate(&opt);
	if (opt.memory_pressure && pressure_start(&pr, opt.memory_pressure, opt.pressure_limit,
						  opt.filler_cpu_pct, err, sizeof(err))) {
		fprintf(stderr, "ppipe-bench: %s\n", err);
		return EXIT_ENV;
	}

	setup_pipe(&b, &opt);
	b.sh = alloc_shared(opt.writers, opt.writers, opt.produce);
	run = opt.procs ? run_procs(&b, &start) : run_threads(&b, &start);
	if (opt.memory_pressure)
		pressure_stop(&pr);
	summarize(&b, start, &sum);

	if (run) {
		fprintf(stderr, "ppipe-bench: a worker process failed\n");
		failed = 1;
	}
	for (unsigned int i = 0; i < opt.writers; i++) {
		if (b.sh->w[i].error) {
			fprintf(stderr, "ppipe-bench: writer %u: %s: %s\n", i,
				opt.produce == PRODUCE_API ? "ppipe_span_get/commit" : "write",
				strerror(b.sh->w[i].error));
			failed = 1;
		}
		if (i < STREAM_MAX_WRITERS)
			written[i] = b.sh->w[i].bytes;
	}
	if (b.sh->read_error) {
		fprintf(stderr, "ppipe-bench: read: %s\n", strerror(b.sh->read_error));
		failed = 1;
	}
	if (opt.verify && stream_check_finish(&b.sh->check, written)) {
		fprintf(stderr, "ppipe-bench: verification failed: %s\n", b.sh->check.error);
		verified = 0;
		failed = 1;
	} else if (b.sh->bytes_read != sum.bytes) {
		fprintf(stderr,
			"ppipe-bench: verification failed: writers wrote %" PRIu64
			" bytes, readers received %" PRIu64 "\n",
			sum.bytes, b.sh->bytes_read);
		verified = 0;
		failed = 1;
	}

	if (opt.json)
		print_json(&b, &sum, &pr, &pl, ppipe_version(), verified);
	else
		print_text(&b, &sum, &pr, ppipe_version(), verified);
	return failed ? EXIT_RUN_FAILED : 0;
}
