// SPDX-License-Identifier: MIT
/*
 * producer-consumer: a parent writes 256 MiB in 64 KiB blocks into a pipe,
 * a forked child reads and checksums them, and the parent prints what
 * libppipe did, read through the public API (linked directly, or preloaded:
 * the symbols are looked up at run time so the program also runs without
 * libppipe, and says so).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ppipe.h"

#define BLOCK (64 << 10)
#define TOTAL (256ull << 20)

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	while (n--)
		h = (h ^ *p++) * 0x100000001b3ull;
	return h;
}

int main(void)
{
	static unsigned char buf[BLOCK];
	int (*stats_get)(struct ppipe_stats *) =
		(int (*)(struct ppipe_stats *))dlsym(RTLD_DEFAULT, "ppipe_stats_get");
	uint64_t sent = 0xcbf29ce484222325ull;
	struct timespec t0, t1;
	int fds[2], status;
	pid_t child;

	if (pipe(fds))
		return perror("pipe"), 1;
	child = fork();
	if (child < 0)
		return perror("fork"), 1;
	if (!child) {
		uint64_t h = 0xcbf29ce484222325ull, got = 0;
		ssize_t n;

		close(fds[1]);
		while ((n = read(fds[0], buf, sizeof(buf))) > 0) {
			h = fnv(h, buf, (size_t)n);
			got += (uint64_t)n;
		}
		printf("child: read %llu bytes, checksum %016llx\n", (unsigned long long)got,
		       (unsigned long long)h);
		exit(0);
	}
	close(fds[0]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint64_t off = 0; off < TOTAL; off += BLOCK) {
		for (size_t i = 0; i < BLOCK; i += 64)
			memset(buf + i, (int)((off + i) >> 6), 64);
		sent = fnv(sent, buf, BLOCK);
		for (size_t done = 0; done < BLOCK;) {
			ssize_t n = write(fds[1], buf + done, BLOCK - done);

			if (n < 0)
				return perror("write"), 1;
			done += (size_t)n;
		}
	}
	close(fds[1]);
	waitpid(child, &status, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("parent: wrote %llu bytes, checksum %016llx, %.0f MB/s\n", (unsigned long long)TOTAL,
	       (unsigned long long)sent,
	       (double)TOTAL / 1048576.0 /
		       ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9));
	if (stats_get) {
		struct ppipe_stats st = { .size = sizeof(st) };

		if (!stats_get(&st))
			printf("libppipe: %llu writes (%llu bytes) by vmsplice, %llu plain, "
			       "%llu fallbacks, ring memory peak %llu KiB\n",
			       (unsigned long long)st.writes_accelerated,
			       (unsigned long long)st.bytes_accelerated,
			       (unsigned long long)st.writes_passthrough,
			       (unsigned long long)st.fallbacks,
			       (unsigned long long)st.pool_peak / 1024);
	} else {
		printf("libppipe is not loaded (try: ppipe-run %s)\n", "producer-consumer");
	}
	return WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : 1;
}
