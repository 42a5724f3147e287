// SPDX-License-Identifier: MIT
/*
 * diff-stdout: stdout as a pipe the process inherited.
 *
 * The program re-executes itself with fd 1 the write end of a pipe its
 * parent made (as a shell does for "prog | consumer"), so in the writer the
 * library never saw the pipe being created. The writer writes large
 * blocks with write(1), writev(1) and stdio (fwrite + fflush, which glibc
 * hands to the kernel without going through the write() symbol), and
 * reports each result on fd 9; the parent reads the pipe and checks the
 * stream. Then it writes large blocks and stdio by turns, each stream's
 * bytes right after a large write. A second round makes the inherited pipe a packet-mode pipe
 * (O_DIRECT) of 1 MiB before the exec: the writer does not know, and the
 * parent prints the length of every read (one packet each).
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define REPORT_FD 9
#define SEED 1100

/* Enough of them that a stream's bytes overtaking staged ones shows in nearly every run. */
#define MIXED_ROUNDS 64

static const size_t wsizes[] = { T_MIB + 1, 100, 65536, 4097, 3 * T_MIB };

static int writer(void)
{
	unsigned char *buf = (unsigned char *)t_map(3 * T_MIB + T_PAGE) + 1;
	FILE *rep = fdopen(REPORT_FD, "w");
	uint64_t pos = 0;

	if (!rep)
		return T_EXIT_ERROR;
	for (size_t i = 0; i < T_ARRAY_SIZE(wsizes); i++) {
		t_fill(buf, wsizes[i], SEED, pos);
		ssize_t r = write(STDOUT_FILENO, buf, wsizes[i]);

		fprintf(rep, "write(1, %zu) -> %s\n", wsizes[i], t_res(r, errno));
		t_scribble(buf, wsizes[i]);
		pos += r > 0 ? (uint64_t)r : 0;
	}
	struct iovec iov[3] = { { buf, 70000 }, { buf + 80000, 0 }, { buf + 90000, 200000 } };

	t_fill(buf, 70000, SEED, pos);
	t_fill(buf + 90000, 200000, SEED, pos + 70000);
	ssize_t r = writev(STDOUT_FILENO, iov, 3);

	fprintf(rep, "writev(1, 270000) -> %s\n", t_res(r, errno));
	pos += r > 0 ? (uint64_t)r : 0;

	/* stdio: one large fwrite, flushed. */
	t_fill(buf, 2 * T_MIB + 11, SEED, pos);
	size_t n = fwrite(buf, 1, 2 * T_MIB + 11, stdout);
	int fl = fflush(stdout);

	fprintf(rep, "fwrite(stdout, 2MiB+11) -> %zu, fflush -> %d\n", n, fl);
	pos += n;

	/*
	 * Large writes and stdio by turns: the stream's bytes follow the
	 * write's, however the write reached the pipe (under write-behind
	 * some of its bytes may still be staged when it returns, and stdio
	 * writes from inside libc).
	 */
	uint64_t mixed = 0;
	int fails = 0;

	for (int round = 0; round < MIXED_ROUNDS; round++) {
		t_fill(buf, T_MIB, SEED, pos);
		r = write(STDOUT_FILENO, buf, T_MIB);
		fails += r != (ssize_t)T_MIB;
		pos += r > 0 ? (uint64_t)r : 0;
		t_fill(buf, 65543, SEED, pos);
		n = fwrite(buf, 1, 65543, stdout);
		fails += n != 65543;
		pos += n;
		t_fill(buf, 100, SEED, pos);
		for (int i = 0; i < 100; i++)
			fails += putc(buf[i], stdout) == EOF;
		fails += fflush(stdout) != 0;
		pos += 100;
		mixed += (r > 0 ? (uint64_t)r : 0) + n + 100;
	}
	fprintf(rep,
		"%d x (write(1, 1MiB), fwrite(stdout, 65543), 100 x putc, fflush) -> %llu, %d failed\n",
		MIXED_ROUNDS, (unsigned long long)mixed, fails);
	fprintf(rep, "writer total %llu\n", (unsigned long long)pos);
	fclose(rep);
	return 0;
}

static void round_trip(const char *name, bool packet)
{
	int p[2], rep[2];

	t_pipe(p, O_CLOEXEC);
	t_pipe(rep, O_CLOEXEC);
	if (packet) {
		int sz = t_pipe_size_set(p[1], 1048576);

		if (fcntl(p[1], F_SETFL, O_DIRECT))
			t_die("O_DIRECT");
		t_log("%s: pipe size %d, O_DIRECT", name, sz);
	}
	pid_t pid = t_fork();

	if (!pid) {
		if (dup2(p[1], STDOUT_FILENO) < 0 || dup2(rep[1], REPORT_FD) < 0)
			_exit(T_EXIT_ERROR);
		int keep[1] = { REPORT_FD };

		t_close_all_but(keep, 1);
		execl("/proc/self/exe", "diff-stdout", "--writer", (char *)NULL);
		_exit(T_EXIT_ERROR);
	}
	t_close(p[1]);
	t_close(rep[1]);

	static unsigned char buf[65536];
	uint64_t bytes = 0, fnv = T_FNV_INIT, first_bad = UINT64_MAX;
	char lens[2048];
	size_t at = 0;
	int last = -1, run = 0, reads = 0;

	for (;;) {
		ssize_t r = read(p[0], buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		reads++;
		if (first_bad == UINT64_MAX && t_verify(buf, (size_t)r, SEED, bytes) != (size_t)r)
			first_bad = bytes;
		fnv = t_fnv(fnv, buf, (size_t)r);
		bytes += (uint64_t)r;
		if (packet) {
			if ((int)r == last) {
				run++;
			} else {
				if (run && at < sizeof(lens) - 32)
					at += (size_t)snprintf(lens + at, sizeof(lens) - at,
							       " %dx%d", last, run);
				last = (int)r;
				run = 1;
			}
		}
	}
	if (packet && run && at < sizeof(lens) - 32)
		at += (size_t)snprintf(lens + at, sizeof(lens) - at, " %dx%d", last, run);
	lens[at] = 0;
	int st = t_wait(pid);
	FILE *f = fdopen(rep[0], "r");
	char line[256];
	uint64_t total = UINT64_MAX;

	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		t_log("%s: writer says: %s", name, line);
		sscanf(line, "writer total %llu", (unsigned long long *)&total);
	}
	if (f)
		fclose(f);
	t_close(p[0]);
	bool ok = WIFEXITED(st) && !WEXITSTATUS(st) && bytes == total && first_bad == UINT64_MAX;

	t_log("%s: writer %s; read=%llu fnv=%016llx %s", name, t_status(st),
	      (unsigned long long)bytes, (unsigned long long)fnv, ok ? "ok" : "BAD");
	if (packet)
		t_log("%s: %d reads, lengths:%s", name, reads, lens);
	t_check(ok, "%s: got %llu bytes (first bad %llu), writer counted %llu", name,
		(unsigned long long)bytes, (unsigned long long)first_bad,
		(unsigned long long)total);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--writer"))
		return writer();
	t_init("diff-stdout");
	round_trip("inherited pipe", false);
	round_trip("inherited packet pipe", true);
	return t_finish();
}
