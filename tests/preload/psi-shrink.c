// SPDX-License-Identifier: MIT
/*
 * Memory pressure shrinks the pool: run under LD_PRELOAD=libppipe with
 * PPIPE_PSI_FILE pointing at a file this program writes, in the format of
 * /proc/pressure/memory, and PPIPE_IDLE_MS=200 (libppipe looks at the file
 * every 100 ms while writes go on). Usage: psi-shrink PSI_FILE.
 *
 *  1. Pipe A (1 MiB, a 2 MiB ring) and pipe B (64 KiB) are written, no
 *     stall reported: A's ring stays resident.
 *  2. The file reports more stall than wall time. A is no longer written;
 *     B is. A's ring must give all its memory back (the rings' resident
 *     size in smaps drops by about 2 MiB), while B keeps its ring.
 *  3. Under the same pressure a new pipe C gets a ring: a ring is charged
 *     once, where a plain write would allocate under the pipe's mutex.
 *     Once C is no longer written, its ring gives its memory back too.
 * Every byte through every pipe is checked. Waits are loops with a
 * generous deadline: the test needs an event to happen, never a speed.
 */
#include "helpers.h"
#include "ringmaps.h"

#include <ppipe.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (256u << 10)
#define DEADLINE_MS 10000

static const char *psi_file;
static unsigned long long stall_us = 1000;
static int (*stats_get)(struct ppipe_stats *);
static uint64_t stream_pos[4];

static void report_stall(void)
{
	char tmp[512];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.new", psi_file);
	f = fopen(tmp, "w");
	if (!f)
		t_die("create %s", tmp);
	fprintf(f,
		"some avg10=0.00 avg60=0.00 avg300=0.00 total=%llu\n"
		"full avg10=0.00 avg60=0.00 avg300=0.00 total=%llu\n",
		stall_us, stall_us / 2);
	if (fclose(f) || rename(tmp, psi_file))
		t_die("write %s", psi_file);
}

static struct ppipe_stats stats(void)
{
	struct ppipe_stats st = { .size = sizeof(st) };

	if (stats_get(&st))
		t_die("ppipe_stats_get");
	return st;
}

/* Writes @len bytes of stream @id to @fds[1] and checks they come back. */
static void through(const int fds[2], int id, size_t len)
{
	static unsigned char src[CHUNK], dst[CHUNK];

	t_fill(src, len, (uint64_t)id, stream_pos[id]);
	if (t_write_all(fds[1], src, len) != (ssize_t)len)
		t_die("write to pipe %c", 'A' + id);
	if (t_read_full(fds[0], dst, len) != (ssize_t)len)
		t_die("read from pipe %c", 'A' + id);
	t_check(t_verify(dst, len, (uint64_t)id, stream_pos[id]) == len,
		"pipe %c: bytes read back differ", 'A' + id);
	stream_pos[id] += len;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * The resident size of all rings, in kB. Adjacent rings may share one
 * mapping in smaps (the kernel merges them), so only the sum means much.
 */
static long rings_rss_kb(void)
{
	struct t_ringmap m[T_RINGMAPS_MAX];
	int n = t_ringmaps(m);
	long kb = 0;

	for (int i = 0; i < n; i++)
		kb += m[i].rss_kb;
	return kb;
}

int main(int argc, char **argv)
{
	int a[2], b[2], c[2];
	struct ppipe_stats st, before;
	long rss, full, waited;

	t_init("psi-shrink");
	if (argc != 2)
		t_die("usage: psi-shrink PSI_FILE");
	psi_file = argv[1];
	stats_get = (int (*)(struct ppipe_stats *))dlsym(RTLD_DEFAULT, "ppipe_stats_get");
	if (!stats_get)
		t_die("libppipe is not preloaded");
	report_stall();

	/* 1. No pressure: A stays resident while both pipes are written. */
	t_pipe(a, 0);
	t_pipe(b, 0);
	if (t_pipe_size_set(a[1], 1 << 20) < (1 << 20))
		t_skip("cannot make a 1 MiB pipe");
	for (waited = 0; waited < 500; waited += 20) {
		through(a, 0, CHUNK);
		through(b, 1, CHUNK / 4);
		sleep_ms(20);
	}
	full = rings_rss_kb();
	st = stats();
	t_log("no pressure: rings resident %s, pressure episodes %llu",
	      full >= 2048 ? ">= 2 MiB" : "< 2 MiB", (unsigned long long)st.pressure_episodes);
	t_check(full >= 2048 && st.pressure_episodes == 0, "without pressure rings hold %ld kB",
		full);

	/* 2. Pressure: more stall than wall time, for as long as it takes. */
	before = st;
	for (waited = 0; waited < DEADLINE_MS; waited += 20) {
		stall_us += 100000;
		report_stall();
		through(b, 1, CHUNK / 4);
		sleep_ms(20);
		rss = rings_rss_kb();
		if (stats().pressure_episodes > before.pressure_episodes && full - rss >= 2048 - 64)
			break;
	}
	st = stats();
	t_log("pressure: episodes %s, rings gave back %s, trimmed %s",
	      st.pressure_episodes > before.pressure_episodes ? "began" : "none",
	      full - rss >= 2048 - 64 ? ">= 2 MiB - 64 KiB" : "less",
	      st.pool_trimmed_bytes - before.pool_trimmed_bytes >= (2u << 20) - (64u << 10) ?
		      ">= 2 MiB - 64 KiB" :
		      "less");
	t_check(full - rss >= 2048 - 64, "under pressure rings went from %ld to %ld kB", full, rss);
	/* 3. A new pipe gets a ring under pressure, and gives it back once idle. */
	t_pipe(c, 0);
	stall_us += 100000;
	report_stall();
	before = stats();
	through(c, 2, CHUNK / 4);
	st = stats();
	t_log("pressure: new pipe C took the %s path",
	      st.writes_accelerated > before.writes_accelerated ? "vmsplice" : "plain");
	t_check(st.writes_accelerated > before.writes_accelerated,
		"no ring was made for a new pipe under pressure");
	for (waited = 0; waited < DEADLINE_MS; waited += 20) {
		stall_us += 100000;
		report_stall();
		through(b, 1, CHUNK / 4);
		sleep_ms(20);
		if (stats().pool_trimmed_bytes - st.pool_trimmed_bytes >= CHUNK / 4)
			break;
	}
	t_log("pressure: idle pipe C's ring %s",
	      stats().pool_trimmed_bytes - st.pool_trimmed_bytes >= CHUNK / 4 ? "was given back" :
										"was kept");
	t_check(stats().pool_trimmed_bytes - st.pool_trimmed_bytes >= CHUNK / 4,
		"the ring made under pressure was not given back once idle");
	/* A still works: its ring refills on demand. */
	through(a, 0, CHUNK);
	return t_finish();
}
