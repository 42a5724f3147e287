// SPDX-License-Identifier: MIT
/*
 * diff-fork: parent and child writing the same pipe.
 *
 * A library's per-process state (its buffers, what it believes the pipe
 * holds) is duplicated by fork(); both copies then write. Every byte is
 * tagged with its writer (see t_tag_fill) and a third process, the reader,
 * takes the stream apart. Phase "records": each writes 2000 records of
 * exactly PIPE_BUF bytes, which must arrive whole. Phase "blocks": each
 * writes 200 blocks of 65536 + 7 bytes; those may interleave at page
 * boundaries, so only each writer's bytes, in order, are checked. Phase
 * "pending": the parent fills a 1 MiB pipe while the reader waits, forks,
 * overwrites its source buffer, and both keep writing; the child then
 * forks a grandchild that writes too.
 */
#include "helpers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct demux_report {
	struct t_demux d;
	int done;
};

/* The reader: waits for a byte on @go (if >= 0), then demultiplexes to EOF. */
static pid_t demux_reader(int rfd, int go, unsigned int writers, uint64_t rec,
			  struct demux_report *rep)
{
	pid_t pid = t_fork();

	if (pid)
		return pid;
	int keep[2] = { rfd, go };

	t_close_all_but(keep, go >= 0 ? 2 : 1);
	if (go >= 0) {
		char c;

		if (read(go, &c, 1) != 1)
			_exit(2);
	}
	t_demux_init(&rep->d, writers);
	for (unsigned int w = 0; w < writers; w++)
		rep->d.rec_size[w] = rec;
	static unsigned char buf[65536];

	for (;;) {
		ssize_t r = read(rfd, buf, 12345);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		t_demux_feed(&rep->d, buf, (size_t)r);
	}
	t_demux_end(&rep->d);
	rep->done = 1;
	_exit(0);
}

/* Writes @count tagged writes of @size as writer @w from @pos; 0 if all were full. */
static int tagged_writes(int fd, unsigned int w, uint64_t *pos, size_t size, int count,
			 unsigned char *buf)
{
	for (int i = 0; i < count; i++) {
		t_tag_fill(buf, size, w, *pos);
		ssize_t r = write(fd, buf, size);

		t_scribble(buf, size);
		if (r != (ssize_t)size)
			return 1;
		*pos += size;
	}
	return 0;
}

static void report(const char *phase, struct demux_report *rep, const uint64_t *expect,
		   unsigned int writers, const int *status)
{
	for (unsigned int w = 0; w < writers; w++) {
		uint64_t fnv = t_tag_fnv(w, expect[w]);
		bool ok = rep->done && rep->d.pos[w] == expect[w] && rep->d.fnv[w] == fnv;

		t_log("%s: writer %u %s bytes=%llu fnv=%016llx %s", phase, w, t_status(status[w]),
		      (unsigned long long)rep->d.pos[w], (unsigned long long)rep->d.fnv[w],
		      ok ? "ok" : "BAD");
		t_check(ok && WIFEXITED(status[w]) && !WEXITSTATUS(status[w]),
			"%s: writer %u's stream is not intact", phase, w);
	}
	t_log("%s: torn=%llu bad=%llu foreign=%llu", phase, (unsigned long long)rep->d.torn,
	      (unsigned long long)rep->d.bad, (unsigned long long)rep->d.foreign);
	t_check(!rep->d.torn && !rep->d.bad && !rep->d.foreign, "%s: damaged", phase);
}

static void two_writers(const char *phase, size_t size, int count, bool atomic)
{
	struct demux_report *rep = t_shared(sizeof(*rep));
	unsigned char *buf = (unsigned char *)t_map(size + T_PAGE) + 5;
	uint64_t pos = 0;
	int p[2];

	t_pipe(p, 0);
	pid_t rd = demux_reader(p[0], -1, 2, atomic ? size : 0, rep);

	t_close(p[0]);
	/* Some bytes before the fork, so that both sides carry state into it. */
	int bad = tagged_writes(p[1], 0, &pos, size, 1, buf);
	pid_t child = t_fork();

	if (!child) {
		uint64_t cpos = 0;

		exit(tagged_writes(p[1], 1, &cpos, size, count, buf));
	}
	bad |= tagged_writes(p[1], 0, &pos, size, count - 1, buf);
	t_close(p[1]);
	int status[2] = { bad ? 1 << 8 : 0, t_wait(child) };

	t_wait(rd);
	uint64_t expect[2] = { (uint64_t)size * (uint64_t)count, (uint64_t)size * (uint64_t)count };

	report(phase, rep, expect, 2, status);
	munmap(rep, sizeof(*rep));
}

static void pending(void)
{
	struct demux_report *rep = t_shared(sizeof(*rep));
	unsigned char *buf = (unsigned char *)t_map(2 * T_MIB) + 1;
	uint64_t pos = 0;
	int p[2], go[2];

	t_pipe(p, 0);
	t_pipe(go, 0);
	int sz = t_pipe_size_set(p[1], 1048576);
	pid_t rd = demux_reader(p[0], go[0], 3, 0, rep);

	t_close(p[0]);
	t_close(go[0]);
	int bad = tagged_writes(p[1], 0, &pos, T_MIB - 4096, 1, buf);
	pid_t child = t_fork();

	if (!child) {
		uint64_t cpos = 0;
		int cbad = tagged_writes(p[1], 1, &cpos, 300000, 10, buf);
		pid_t grand = t_fork();

		if (!grand) {
			uint64_t gpos = 0;

			exit(tagged_writes(p[1], 2, &gpos, 200000, 10, buf));
		}
		cbad |= tagged_writes(p[1], 1, &cpos, 300000, 10, buf);
		int gst = t_wait(grand);

		exit(cbad || !WIFEXITED(gst) || WEXITSTATUS(gst));
	}
	t_scribble(buf, T_MIB);
	if (write(go[1], "g", 1) != 1)
		t_die("go");
	t_close(go[1]);
	bad |= tagged_writes(p[1], 0, &pos, 500000, 10, buf);
	t_close(p[1]);
	int cst = t_wait(child);
	int status[3] = { bad ? 1 << 8 : 0, cst, cst };

	t_wait(rd);
	uint64_t expect[3] = { T_MIB - 4096 + 5000000, 6000000, 2000000 };

	t_log("pending: pipe size %d", sz);
	report("pending", rep, expect, 3, status);
	munmap(rep, sizeof(*rep));
}

int main(void)
{
	t_init("diff-fork");
	two_writers("records", 4096, 2000, true);
	two_writers("blocks", 65536 + 7, 200, false);
	pending();
	return t_finish();
}
