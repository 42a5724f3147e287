// SPDX-License-Identifier: MIT
/*
 * ring-memory: what N pipes cost a process in resident memory. Each pipe
 * gets one write of SIZE bytes, read back at once ("active"); then the
 * process waits longer than PPIPE_IDLE_MS and writes once more to the
 * first pipe, which lets libppipe trim idle rings ("idle"). Prints the
 * growth of VmRSS over the start, in KiB, after each phase. Run it with
 * and without LD_PRELOAD and compare; it asserts nothing.
 *
 * usage: ring-memory N [SIZE [IDLE_MS]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = atol(line + 6);
	fclose(f);
	return kib;
}

static void one_write(int *p, char *buf, size_t size)
{
	size_t got = 0;

	if (write(p[1], buf, size) != (ssize_t)size)
		exit(99);
	while (got < size) {
		ssize_t n = read(p[0], buf, size - got);

		if (n <= 0)
			exit(99);
		got += (size_t)n;
	}
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 64;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 65536;
	long idle_ms = argc > 3 ? atol(argv[3]) : 1000;
	int(*p)[2] = calloc((size_t)n, sizeof(*p));
	char *buf = malloc(size);
	struct timespec nap = { (idle_ms * 3 / 2) / 1000, (idle_ms * 3 / 2) % 1000 * 1000000 };
	long base;

	if (!p || !buf)
		return 99;
	memset(buf, 'x', size);
	base = rss_kib();
	for (int i = 0; i < n; i++) {
		if (pipe(p[i]))
			return 99;
		one_write(p[i], buf, size);
	}
	printf("pipes %d, one %zu-byte write each: active +%ld KiB", n, size, rss_kib() - base);
	nanosleep(&nap, NULL);
	one_write(p[0], buf, size); /* a write notices the idle rings */
	nanosleep(&nap, NULL);
	one_write(p[0], buf, size);
	printf(", idle +%ld KiB\n", rss_kib() - base);
	return 0;
}
