// SPDX-License-Identifier: MIT
/*
 * Huge-page rings: run under LD_PRELOAD=libppipe with PPIPE_THP=on or off
 * and the same word as the argument. Streams 1 MiB writes through a 1 MiB
 * pipe (a 2 MiB ring, reused every other write) and checks every byte,
 * then finds the ring in /proc/self/smaps by its advice flags (dc: not
 * inherited by fork; hg/nh: huge pages asked for or refused) and checks
 * that it is what PPIPE_THP asked for. Skips where the system has THP
 * disabled or no huge page could be had.
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
#include <unistd.h>

#define MIB (1u << 20)
#define ROUNDS 8

static void stream(int rfd, int wfd)
{
	char *src = malloc(MIB), *dst = malloc(MIB);

	if (!src || !dst)
		exit(T_EXIT_ERROR);
	for (int r = 0; r < ROUNDS; r++) {
		for (size_t i = 0; i < MIB; i++)
			src[i] = (char)(i * 7 + (size_t)r * 13 + (i >> 12));
		if (t_write_all(wfd, src, MIB) != MIB) {
			fprintf(stderr, "thp-ring: write %d: %s\n", r, strerror(errno));
			exit(T_EXIT_FAIL);
		}
		if (t_read_full(rfd, dst, MIB) != MIB || memcmp(src, dst, MIB)) {
			fprintf(stderr, "thp-ring: round %d read back wrong bytes\n", r);
			exit(T_EXIT_FAIL);
		}
	}
	free(src);
	free(dst);
}

int main(int argc, char **argv)
{
	int (*stats_get)(struct ppipe_stats *) =
		(int (*)(struct ppipe_stats *))dlsym(RTLD_DEFAULT, "ppipe_stats_get");
	struct ppipe_stats st = { .size = sizeof(st) };
	struct t_ringmap m[T_RINGMAPS_MAX];
	int n, huge = 0, small = 0;
	bool want_huge;
	int fds[2];

	if (argc != 2 || (strcmp(argv[1], "on") && strcmp(argv[1], "off"))) {
		fprintf(stderr, "usage: PPIPE_THP=on|off LD_PRELOAD=libppipe.so thp-ring on|off\n");
		return T_EXIT_ERROR;
	}
	want_huge = !strcmp(argv[1], "on");
	if (!stats_get) {
		fprintf(stderr, "thp-ring: libppipe is not preloaded\n");
		return T_EXIT_ERROR;
	}
	if (want_huge && !t_thp_enabled()) {
		printf("SKIP: transparent huge pages are disabled on this system\n");
		return T_EXIT_SKIP;
	}
	if (pipe(fds) || fcntl(fds[1], F_SETPIPE_SZ, MIB) < (int)MIB) {
		printf("SKIP: cannot make a 1 MiB pipe: %s\n", strerror(errno));
		return T_EXIT_SKIP;
	}
	stream(fds[0], fds[1]);
	if (stats_get(&st) || st.writes_accelerated < ROUNDS) {
		fprintf(stderr, "thp-ring: only %llu of %d writes took the fast path\n",
			(unsigned long long)st.writes_accelerated, ROUNDS);
		return T_EXIT_FAIL;
	}
	n = t_ringmaps(m);
	for (int i = 0; i < n; i++) {
		t_ringmap_print(&m[i]);
		huge += m[i].huge_advised;
		small += m[i].small_advised;
	}
	if (want_huge) {
		if (n != 1 || huge != 1) {
			fprintf(stderr, "thp-ring: PPIPE_THP=on must give one huge-advised ring\n");
			return T_EXIT_FAIL;
		}
		if (m[0].start % (2ul << 20)) {
			fprintf(stderr,
				"thp-ring: the ring does not start on a huge page boundary\n");
			return T_EXIT_FAIL;
		}
		if (m[0].anon_huge_kb < 2048) {
			printf("SKIP: the ring asked for huge pages but got none (memory fragmented?)\n");
			return T_EXIT_SKIP;
		}
	} else if (n != 1 || small != 1) {
		fprintf(stderr, "thp-ring: PPIPE_THP=off must give one ring refusing huge pages\n");
		return T_EXIT_FAIL;
	}
	return T_EXIT_PASS;
}
