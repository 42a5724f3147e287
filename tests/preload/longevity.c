// SPDX-License-Identifier: MIT
/*
 * longevity: a long-lived process tree's week, run fast, under libppipe
 * (test-longevity.py drives it; the closing numbers of the registry's
 * reclaim come from its long runs).
 *
 *   longevity kill N
 *       N times: a pipe, a fork child that holds it and is inside a 1 MiB
 *       write into it (the pipe full), killed with SIGKILL and reaped.
 *   longevity hold-static N STATIC
 *       a pipe whose read end a static program (STATIC, which libppipe
 *       cannot see into) holds and reads, kept alive while N children are
 *       killed as above; the 16 MiB then written into that pipe must not
 *       be accelerated, however much was reclaimed meanwhile.
 *   longevity fill N
 *       N fork children that each hold a pipe of their own and live on
 *       (more than a small registry has room for), then a probe while
 *       they live (its pipe may find no room: plain, and said), then the
 *       same once they are gone.
 *
 * Then, in both, after a pause of two seconds (sweeps run on a schedule),
 * a new pipe a fork child reads: 16 MiB in 1 MiB writes, checked byte by
 * byte. Each step prints one line: the registry's
 * occupancy (ppipe_stats_get), the registry segment's size and resident
 * bytes (/proc/sysvipc/shm), and the share of the written bytes that went
 * by vmsplice. The probe line is "probe: accelerated A of B bytes (P%)".
 * Exit status 0, 1 when data came out wrong or a step failed, 2 usage.
 */
#include "ppipe.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHUNK (1u << 20)
#define PROBE_BYTES (16u << 20)

static int (*stats_get)(struct ppipe_stats *);

static struct ppipe_stats stats(void)
{
	struct ppipe_stats s;

	memset(&s, 0, sizeof(s));
	s.size = sizeof(s);
	if (stats_get)
		stats_get(&s);
	return s;
}

static unsigned char pattern(uint64_t i)
{
	return (unsigned char)((i * 2654435761u) >> 13);
}

/*
 * The registry segment of this tree, the one this process maps (its
 * /proc/self/maps line names the segment's id as its inode): its size and
 * resident bytes, from /proc/sysvipc/shm.
 */
static void segment(unsigned long long *size, unsigned long long *rss)
{
	char line[512];
	unsigned long long want = ~0ull;
	FILE *f = fopen("/proc/self/maps", "r");

	*size = *rss = 0;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long ino;

		if (strstr(line, "/SYSV") && sscanf(line, "%*s %*s %*s %*s %llu", &ino) == 1)
			want = ino;
	}
	if (f)
		fclose(f);
	f = want != ~0ull ? fopen("/proc/sysvipc/shm", "r") : NULL;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long key, id, sz, rs, v[10];

		if (sscanf(line,
			   "%llu %llu %*o %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
			   &key, &id, &sz, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
			   &v[8], &v[9], &rs) == 14 &&
		    id == want) {
			*size = sz;
			*rss = rs;
		}
	}
	if (f)
		fclose(f);
}

static void report(const char *what)
{
	struct ppipe_stats s = stats();
	unsigned long long size, rss;

	segment(&size, &rss);
	printf("%s: registry slots %llu/%llu, records %llu/%llu, reclaimed %llu, full %llu; "
	       "segment %llu B, %llu B resident\n",
	       what, (unsigned long long)s.registry_slots, (unsigned long long)s.registry_slots_max,
	       (unsigned long long)s.registry_records, (unsigned long long)s.registry_records_max,
	       (unsigned long long)s.registry_reclaimed, (unsigned long long)s.registry_full, size,
	       rss);
	fflush(stdout);
}

/* One child holding a tracked pipe, killed inside a large write into it. */
static int kill_one(void)
{
	static unsigned char big[CHUNK];
	int p[2];
	char c;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		for (;;)
			if (write(p[1], big, sizeof(big)) < 0)
				_exit(1);
	}
	if (pid < 0)
		return -1;
	/* Its write is under way once bytes arrive; the pipe fills and it waits. */
	if (read(p[0], &c, 1) != 1)
		return -1;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(p[0]);
	close(p[1]);
	return 0;
}

static int kill_many(long n)
{
	for (long i = 1; i <= n; i++) {
		if (kill_one()) {
			perror("kill cycle");
			return -1;
		}
		if (i % (n >= 10 ? n / 10 : 1) == 0) {
			char what[64];

			snprintf(what, sizeof(what), "after %ld killed children", i);
			report(what);
		}
	}
	return 0;
}

/* Writes PROBE_BYTES into @wfd in 1 MiB writes; returns the accelerated bytes among them. */
static long long write_probe(int wfd)
{
	static unsigned char buf[CHUNK];
	uint64_t before = stats().bytes_accelerated;

	for (uint64_t off = 0; off < PROBE_BYTES; off += CHUNK) {
		for (uint32_t i = 0; i < CHUNK; i++)
			buf[i] = pattern(off + i);
		if (write(wfd, buf, CHUNK) != CHUNK) {
			perror("probe write");
			return -1;
		}
	}
	return (long long)(stats().bytes_accelerated - before);
}

/* A new pipe a fork child reads and checks: the share of the probe's bytes accelerated. */
static int probe(void)
{
	int p[2], st = -1;
	long long acc;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		static unsigned char buf[CHUNK];
		uint64_t got = 0;
		ssize_t n;

		close(p[1]);
		while ((n = read(p[0], buf, sizeof(buf))) > 0) {
			for (ssize_t i = 0; i < n; i++)
				if (buf[i] != pattern(got + (uint64_t)i))
					_exit(3);
			got += (uint64_t)n;
		}
		_exit(got == PROBE_BYTES ? 0 : 4);
	}
	close(p[0]);
	acc = write_probe(p[1]);
	close(p[1]);
	waitpid(pid, &st, 0);
	printf("probe: accelerated %lld of %u bytes (%.1f%%), data %s\n", acc, PROBE_BYTES,
	       100.0 * (double)acc / PROBE_BYTES,
	       WIFEXITED(st) && !WEXITSTATUS(st) ? "intact" : "WRONG");
	fflush(stdout);
	return acc >= 0 && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

/* A pipe a static reader holds, alive through @n kills: its writes must stay plain. */
static int hold_static(long n, const char *prog)
{
	int p[2], st = -1, bad = 0;
	long long acc;
	pid_t reader;

	if (pipe(p))
		return -1;
	reader = fork();
	if (reader == 0) {
		int out = open("/dev/null", O_WRONLY);

		dup2(p[0], 0);
		dup2(out, 1);
		close(p[0]);
		close(p[1]);
		execl(prog, prog, (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	report("a static reader holds a pipe");
	if (kill_many(n))
		return -1;
	acc = write_probe(p[1]);
	printf("the static reader's pipe, after %ld killed children: accelerated %lld of %u "
	       "bytes (want 0)\n",
	       n, acc, PROBE_BYTES);
	bad = acc != 0;
	close(p[1]);
	waitpid(reader, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		printf("the static reader ended with status %d\n", st);
		bad = 1;
	}
	return bad ? -1 : 0;
}

/* @n living children, each holding a tracked pipe of its own: the registry fills. */
static int fill(long n)
{
	pid_t *kids = calloc((size_t)n, sizeof(pid_t));
	int bad = 0;

	if (!kids)
		return -1;
	for (long i = 0; i < n; i++) {
		int p[2];

		if (pipe(p))
			return -1;
		kids[i] = fork();
		if (kids[i] == 0) {
			char c;

			close(p[1]);
			_exit(read(p[0], &c, 1) < 0);
		}
		close(p[0]);
		/* The write end stays open here: the child lives until it is closed. */
	}
	report("with the children alive");
	bad |= probe() != 0;
	for (long i = 0; i < n; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	for (int fd = 3; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0 && fd != fileno(stdout))
			close(fd);
	report("with the children gone");
	free(kids);
	return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : -1;
	int r;

	if (argc < 3 || n < 0 ||
	    (strcmp(argv[1], "kill") && strcmp(argv[1], "hold-static") &&
	     strcmp(argv[1], "fill")) ||
	    (!strcmp(argv[1], "hold-static") && argc < 4)) {
		fprintf(stderr, "usage: longevity kill N | longevity hold-static N STATIC | "
				"longevity fill N\n");
		return 2;
	}
	stats_get = (int (*)(struct ppipe_stats *))dlsym(RTLD_DEFAULT, "ppipe_stats_get");
	if (!stats_get)
		printf("libppipe is not loaded: no statistics\n");
	/* A first pipe across a fork makes the tree's registry: the start. */
	if (probe())
		return 1;
	report("at the start");
	r = !strcmp(argv[1], "kill") ? kill_many(n) :
	    !strcmp(argv[1], "fill") ? fill(n) :
				       hold_static(n, argv[3]);
	if (r)
		return 1;
	/*
	 * Sweeps run on schedule (or when the registry is full): after a
	 * pause, the next record the tree makes (the probe's fork) brings one.
	 */
	sleep(2);
	r = probe();
	report("at the end");
	return r ? 1 : 0;
}
