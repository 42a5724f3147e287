// SPDX-License-Identifier: MIT
/*
 * diff-atomic: writes of at most PIPE_BUF bytes are atomic, with several
 * writers on one pipe.
 *
 * Phase "4096": 4 forked writers each write 2000 records of exactly
 * PIPE_BUF bytes (writer id, sequence number, pattern); the parent reads
 * with an odd read size and checks that the stream is a sequence of whole
 * records, each writer's in order. Phase "100": the same with 100-byte
 * records. Phase "mixed": writers 0 and 1 write 4096-byte records while
 * writers 2 and 3 write 66536-byte blocks (which the kernel may split at
 * page boundaries, and which a library accelerates); every byte is tagged
 * with its writer, the reader takes the stream apart and checks each
 * writer's bytes, and that no run of a record writer's bytes ends inside
 * a record.
 */
#include "helpers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define WRITERS 4
#define RECORDS 2000

static void record_fill(unsigned char *rec, size_t size, uint32_t w, uint32_t seq)
{
	memcpy(rec, &w, 4);
	memcpy(rec + 4, &seq, 4);
	t_fill(rec + 8, size - 8, ((uint64_t)w << 32) | seq, 0);
}

static void records_phase(size_t size)
{
	pid_t pids[WRITERS];
	int p[2];

	t_pipe(p, 0);
	for (uint32_t w = 0; w < WRITERS; w++) {
		pids[w] = t_fork();
		if (pids[w])
			continue;
		t_close(p[0]);
		/* Unaligned source: one byte into a page. */
		unsigned char *rec = (unsigned char *)t_map(size + T_PAGE) + 1;

		for (uint32_t seq = 0; seq < RECORDS; seq++) {
			record_fill(rec, size, w, seq);
			ssize_t r = write(p[1], rec, size);

			if (r != (ssize_t)size)
				exit(T_EXIT_FAIL);
			t_scribble(rec, size);
		}
		exit(0);
	}
	t_close(p[1]);

	static unsigned char stream[65536 + 8192];
	unsigned char *expect = t_map(size);
	uint32_t next[WRITERS] = { 0 };
	size_t have = 0, records = 0, torn = 0, disorder = 0;
	bool lost_sync = false;

	for (;;) {
		ssize_t r = read(p[0], stream + have, 10007);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			t_die("read");
		if (r == 0)
			break;
		have += (size_t)r;
		size_t at = 0;

		while (!lost_sync && have - at >= size) {
			uint32_t w, seq;

			memcpy(&w, stream + at, 4);
			memcpy(&seq, stream + at + 4, 4);
			if (w >= WRITERS || seq >= RECORDS) {
				torn++;
				lost_sync = true;
				break;
			}
			record_fill(expect, size, w, seq);
			if (memcmp(expect, stream + at, size)) {
				torn++;
			} else {
				if (seq != next[w])
					disorder++;
				next[w] = seq + 1;
				records++;
			}
			at += size;
		}
		if (lost_sync)
			at = have;
		memmove(stream, stream + at, have - at);
		have -= at;
	}
	int failed_writers = 0;

	for (int w = 0; w < WRITERS; w++) {
		int st = t_wait(pids[w]);

		failed_writers += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	t_log("records of %zu: writers-failed=%d records=%zu torn=%zu out-of-order=%zu leftover=%zu "
	      "sync=%s",
	      size, failed_writers, records, torn, disorder, have, lost_sync ? "LOST" : "ok");
	t_check(!failed_writers && records == WRITERS * RECORDS && !torn && !disorder && !have &&
			!lost_sync,
		"records of %zu are not intact", size);
	t_close(p[0]);
	munmap(expect, size);
}

static void mixed_phase(void)
{
	static const size_t wsize[WRITERS] = { 4096, 4096, 66536, 66536 };
	static const int wcount[WRITERS] = { 1000, 1000, 100, 100 };
	pid_t pids[WRITERS];
	struct t_demux d;
	int p[2];

	t_pipe(p, 0);
	for (unsigned int w = 0; w < WRITERS; w++) {
		pids[w] = t_fork();
		if (pids[w])
			continue;
		t_close(p[0]);
		unsigned char *buf = (unsigned char *)t_map(wsize[w] + T_PAGE) + 3;
		uint64_t pos = 0;

		for (int i = 0; i < wcount[w]; i++) {
			t_tag_fill(buf, wsize[w], w, pos);
			ssize_t r = write(p[1], buf, wsize[w]);

			if (r != (ssize_t)wsize[w])
				exit(T_EXIT_FAIL);
			t_scribble(buf, wsize[w]);
			pos += (uint64_t)r;
		}
		exit(0);
	}
	t_close(p[1]);
	t_demux_init(&d, WRITERS);
	d.rec_size[0] = d.rec_size[1] = 4096;

	static unsigned char buf[65536];

	for (;;) {
		ssize_t r = read(p[0], buf, 9001);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			t_die("read");
		if (r == 0)
			break;
		t_demux_feed(&d, buf, (size_t)r);
	}
	t_demux_end(&d);
	t_close(p[0]);
	for (unsigned int w = 0; w < WRITERS; w++) {
		int st = t_wait(pids[w]);
		uint64_t expect = (uint64_t)wsize[w] * (uint64_t)wcount[w];
		uint64_t fnv = t_tag_fnv(w, expect);

		t_log("mixed: writer %u (%zu-byte writes) %s bytes=%llu fnv=%016llx %s", w,
		      wsize[w], t_status(st), (unsigned long long)d.pos[w],
		      (unsigned long long)d.fnv[w],
		      d.pos[w] == expect && d.fnv[w] == fnv ? "ok" : "BAD");
		t_check(WIFEXITED(st) && !WEXITSTATUS(st) && d.pos[w] == expect && d.fnv[w] == fnv,
			"mixed: writer %u's stream differs", w);
	}
	t_log("mixed: torn=%llu bad=%llu foreign=%llu", (unsigned long long)d.torn,
	      (unsigned long long)d.bad, (unsigned long long)d.foreign);
	t_check(!d.torn && !d.bad && !d.foreign, "mixed: records torn or bytes damaged");
}

int main(void)
{
	t_init("diff-atomic");
	records_phase(4096);
	records_phase(100);
	mixed_phase();
	return t_finish();
}
