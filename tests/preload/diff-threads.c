// SPDX-License-Identifier: MIT
/*
 * diff-threads: threads of one process writing at the same time, where a
 * library's state is shared rather than copied by fork().
 *
 * Phase "shared pipe": four threads write one pipe, two with PIPE_BUF
 * records (which must arrive whole), two with 66536-byte blocks; a reader
 * thread takes the tagged stream apart. Phase "own pipes": four threads
 * each stream 8 MiB of large writes into a pipe of their own, each with a
 * reader thread, all at once (a library's shared buffer pool under
 * contention).
 */
#include "helpers.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define WRITERS 4

struct wjob {
	int fd;
	unsigned int w;
	size_t size;
	int count;
	int failed;
};

static void *tag_writer(void *arg)
{
	struct wjob *j = arg;
	unsigned char *buf = (unsigned char *)t_map(j->size + T_PAGE) + 1 + j->w;
	uint64_t pos = 0;

	for (int i = 0; i < j->count; i++) {
		t_tag_fill(buf, j->size, j->w, pos);
		ssize_t r = write(j->fd, buf, j->size);

		t_scribble(buf, j->size);
		if (r != (ssize_t)j->size) {
			j->failed = 1;
			break;
		}
		pos += j->size;
	}
	return NULL;
}

struct rjob {
	int fd;
	struct t_demux d;
};

static void *demux_reader(void *arg)
{
	struct rjob *j = arg;
	static unsigned char buf[65536];

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

static void shared_pipe(void)
{
	static const size_t size[WRITERS] = { 4096, 4096, 66536, 66536 };
	static const int count[WRITERS] = { 1000, 1000, 100, 100 };
	static struct wjob wj[WRITERS];
	static struct rjob rj;
	pthread_t wt[WRITERS], rt;
	int p[2];

	t_pipe(p, 0);
	rj.fd = p[0];
	t_demux_init(&rj.d, WRITERS);
	rj.d.rec_size[0] = rj.d.rec_size[1] = 4096;
	if (pthread_create(&rt, NULL, demux_reader, &rj))
		t_die("pthread_create");
	for (unsigned int w = 0; w < WRITERS; w++) {
		wj[w] = (struct wjob){ p[1], w, size[w], count[w], 0 };
		if (pthread_create(&wt[w], NULL, tag_writer, &wj[w]))
			t_die("pthread_create");
	}
	for (unsigned int w = 0; w < WRITERS; w++)
		pthread_join(wt[w], NULL);
	t_close(p[1]);
	pthread_join(rt, NULL);
	t_close(p[0]);
	for (unsigned int w = 0; w < WRITERS; w++) {
		uint64_t expect = (uint64_t)size[w] * (uint64_t)count[w];
		bool ok = !wj[w].failed && rj.d.pos[w] == expect &&
			  rj.d.fnv[w] == t_tag_fnv(w, expect);

		t_log("shared pipe: thread %u (%zu-byte writes): bytes=%llu fnv=%016llx %s", w,
		      size[w], (unsigned long long)rj.d.pos[w], (unsigned long long)rj.d.fnv[w],
		      ok ? "ok" : "BAD");
		t_check(ok, "shared pipe: thread %u's stream is not intact", w);
	}
	t_log("shared pipe: torn=%llu bad=%llu foreign=%llu", (unsigned long long)rj.d.torn,
	      (unsigned long long)rj.d.bad, (unsigned long long)rj.d.foreign);
	t_check(!rj.d.torn && !rj.d.bad && !rj.d.foreign, "shared pipe: damaged");
}

struct own {
	int p[2];
	uint64_t seed;
	int failed;
	uint64_t bytes, fnv, first_bad;
};

static void *own_writer(void *arg)
{
	struct own *o = arg;
	const size_t chunk = 300001;
	unsigned char *buf = (unsigned char *)t_map(chunk + T_PAGE) + 3;
	uint64_t pos = 0;

	while (pos < 8 * T_MIB) {
		size_t n = 8 * T_MIB - pos < chunk ? (size_t)(8 * T_MIB - pos) : chunk;

		t_fill(buf, n, o->seed, pos);
		ssize_t r = write(o->p[1], buf, n);

		t_scribble(buf, n);
		if (r != (ssize_t)n) {
			o->failed = 1;
			break;
		}
		pos += n;
	}
	close(o->p[1]);
	return NULL;
}

static void *own_reader(void *arg)
{
	struct own *o = arg;
	unsigned char *buf = t_map(65536);

	o->fnv = T_FNV_INIT;
	o->first_bad = UINT64_MAX;
	for (;;) {
		ssize_t r = read(o->p[0], buf, 65536);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (o->first_bad == UINT64_MAX &&
		    t_verify(buf, (size_t)r, o->seed, o->bytes) != (size_t)r)
			o->first_bad = o->bytes;
		o->fnv = t_fnv(o->fnv, buf, (size_t)r);
		o->bytes += (uint64_t)r;
	}
	return NULL;
}

static void own_pipes(void)
{
	static struct own o[WRITERS];
	pthread_t wt[WRITERS], rt[WRITERS];

	for (int i = 0; i < WRITERS; i++) {
		memset(&o[i], 0, sizeof(o[i]));
		t_pipe(o[i].p, 0);
		o[i].seed = 1200 + (uint64_t)i;
		if (pthread_create(&rt[i], NULL, own_reader, &o[i]) ||
		    pthread_create(&wt[i], NULL, own_writer, &o[i]))
			t_die("pthread_create");
	}
	for (int i = 0; i < WRITERS; i++) {
		pthread_join(wt[i], NULL);
		pthread_join(rt[i], NULL);
		t_close(o[i].p[0]);
		bool ok = !o[i].failed && o[i].bytes == 8 * T_MIB && o[i].first_bad == UINT64_MAX;

		t_log("own pipe %d: read=%llu fnv=%016llx %s", i, (unsigned long long)o[i].bytes,
		      (unsigned long long)o[i].fnv, ok ? "ok" : "BAD");
		t_check(ok, "own pipe %d: first bad byte %llu", i,
			(unsigned long long)o[i].first_bad);
	}
}

int main(void)
{
	t_init("diff-threads");
	shared_pipe();
	own_pipes();
	return t_finish();
}
