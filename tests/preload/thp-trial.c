// SPDX-License-Identifier: MIT
/*
 * The huge-page verdict of PPIPE_THP=auto, taken from live traffic: run
 * under LD_PRELOAD=libppipe with PPIPE_THP=auto, and
 *   thp-trial on    with PPIPE_TEST_THP_SLOW=small (4 KiB-page laps look 1000x slower)
 *   thp-trial off   with PPIPE_TEST_THP_SLOW=huge  (huge-page laps look 1000x slower)
 *   thp-trial any   without it (whatever this kernel measures)
 *   thp-trial undone  with PPIPE_TEST_THP_SLOW=watch (trials say on, the
 *                   watch after each one sees huge-page laps slow down)
 * A reader thread checks every byte while the writer streams 1 MiB writes
 * through a 1 MiB pipe (a 2 MiB ring) until the verdict is in, and 8 MiB
 * more. Then the verdict must be the expected one, taken by measurement
 * (or, for undone, by the watch after two trials), and the ring must
 * carry the advice of the verdict (it switched to it), and, where the
 * kernel names anonymous mappings, still its name: a switch maps fresh
 * pages in place.
 * Skips where the system has THP disabled.
 */
#include "helpers.h"
#include "ringmaps.h"

#include <ppipe.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1u << 20)
#define SEED 0x7a1
#define LIMIT (1024ull * MIB) /* no verdict by then: fail (laps last >= 1 ms: ~10 MiB each here) */

static int fds[2];
static uint64_t total; /* set before the writer closes its end */
static int reader_failed;

static void *reader(void *arg)
{
	unsigned char *buf = malloc(MIB);
	uint64_t pos = 0;

	(void)arg;
	if (!buf)
		t_die("malloc");
	for (;;) {
		ssize_t n = read(fds[0], buf, MIB);
		size_t bad;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		bad = t_verify(buf, (size_t)n, SEED, pos);
		if (bad != (size_t)n) {
			fprintf(stderr, "thp-trial: wrong byte at %llu\n",
				(unsigned long long)(pos + bad));
			reader_failed = 1;
			break;
		}
		pos += (uint64_t)n;
	}
	if (!reader_failed && pos != __atomic_load_n(&total, __ATOMIC_ACQUIRE)) {
		fprintf(stderr, "thp-trial: read %llu bytes of %llu\n", (unsigned long long)pos,
			(unsigned long long)total);
		reader_failed = 1;
	}
	free(buf);
	return NULL;
}

/* Whether @verdict is final for what the test wants. */
static bool final(const char *verdict, const char *want)
{
	bool on = !strncmp(verdict, "on, measured", 12);
	bool off = !strncmp(verdict, "off, measured", 13);

	if (!strcmp(want, "undone"))
		return !strncmp(verdict, "off, undone", 11);
	return on || off;
}

/* The "thp" value of libppipe's statistics, into @out. */
static void thp_verdict(char *out, size_t len)
{
	int (*dump)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "ppipe_stats_dump");
	static char json[1 << 16];
	int fd = t_tmpfile();
	ssize_t n;
	char *s, *e;

	if (!dump || dump(fd))
		t_die("ppipe_stats_dump");
	n = pread(fd, json, sizeof(json) - 1, 0);
	t_close(fd);
	json[n > 0 ? n : 0] = 0;
	s = strstr(json, "\"thp\":\"");
	if (!s || !(e = strchr(s + 7, '"')))
		t_die("no thp in the statistics");
	s += 7;
	snprintf(out, len, "%.*s", (int)(e - s), s);
}

int main(int argc, char **argv)
{
	struct t_ringmap m[T_RINGMAPS_MAX];
	unsigned char *src = malloc(MIB);
	char verdict[160] = "";
	uint64_t pos = 0, after = 0;
	const char *want;
	pthread_t tid;
	bool on, named;
	int n;

	if (argc != 2 || (strcmp(argv[1], "on") && strcmp(argv[1], "off") &&
			  strcmp(argv[1], "any") && strcmp(argv[1], "undone"))) {
		fprintf(stderr,
			"usage: PPIPE_THP=auto LD_PRELOAD=libppipe.so thp-trial on|off|any|undone\n");
		return T_EXIT_ERROR;
	}
	want = argv[1];
	if (!dlsym(RTLD_DEFAULT, "ppipe_stats_dump") || !src) {
		fprintf(stderr, "thp-trial: libppipe is not preloaded\n");
		return T_EXIT_ERROR;
	}
	if (!t_thp_enabled()) {
		printf("SKIP: transparent huge pages are disabled on this system\n");
		return T_EXIT_SKIP;
	}
	if (pipe(fds) || fcntl(fds[1], F_SETPIPE_SZ, MIB) < (int)MIB) {
		printf("SKIP: cannot make a 1 MiB pipe: %s\n", strerror(errno));
		return T_EXIT_SKIP;
	}
	if (pthread_create(&tid, NULL, reader, NULL))
		t_die("pthread_create");
	/* Until the verdict, then 8 MiB more: every ring has switched to it by then. */
	while (after < 8 * MIB && pos < LIMIT) {
		t_fill(src, MIB, SEED, pos);
		if (t_write_all(fds[1], src, MIB) != MIB)
			t_die("write");
		pos += MIB;
		if (after)
			after += MIB;
		else if (pos % (4 * MIB) == 0) {
			thp_verdict(verdict, sizeof(verdict));
			if (final(verdict, want))
				after = MIB;
		}
	}
	__atomic_store_n(&total, pos, __ATOMIC_RELEASE);
	t_close(fds[1]);
	pthread_join(tid, NULL);
	thp_verdict(verdict, sizeof(verdict));
	printf("after %llu MiB: thp %s\n", (unsigned long long)(pos / MIB), verdict);
	if (reader_failed)
		return T_EXIT_FAIL;
	if (!after) {
		fprintf(stderr, "thp-trial: no verdict after %llu MiB\n",
			(unsigned long long)(pos / MIB));
		return T_EXIT_FAIL;
	}
	on = verdict[1] == 'n';
	if (strcmp(want, "any") && on != !strcmp(want, "on")) {
		fprintf(stderr, "thp-trial: the verdict should be %s\n", want);
		return T_EXIT_FAIL;
	}
	n = t_ringmaps(m);
	named = t_anon_names();
	for (int i = 0; i < n; i++) {
		t_ringmap_print(&m[i]);
		if (on ? !m[i].huge_advised : !m[i].small_advised) {
			fprintf(stderr, "thp-trial: a ring did not switch to the verdict\n");
			return T_EXIT_FAIL;
		}
		if (named && strcmp(m[i].name, T_RING_NAME)) {
			fprintf(stderr, "thp-trial: a ring lost its name %s (\"%s\")\n",
				T_RING_NAME, m[i].name);
			return T_EXIT_FAIL;
		}
	}
	if (!named)
		printf("names of mappings not checked: this kernel does not name them\n");
	if (!n) {
		fprintf(stderr, "thp-trial: no ring found\n");
		return T_EXIT_FAIL;
	}
	return T_EXIT_PASS;
}
