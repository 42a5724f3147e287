// SPDX-License-Identifier: MIT
/*
 * idle-cost: what libppipe costs the calls it does not accelerate. Times
 * N write() calls of a small size and of a large size to /dev/null (not a
 * pipe) and of a small size to a pipe libppipe tracks, and prints ns per
 * call as one JSON line per case. Run it with and without LD_PRELOAD and
 * compare; under valgrind --tool=callgrind the instruction counts give
 * the same comparison without timer noise.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 16];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *drain(void *arg)
{
	static char sink[1 << 16];
	int fd = *(int *)arg;

	while (read(fd, sink, sizeof(sink)) > 0)
		;
	return NULL;
}

static void run(const char *name, int fd, size_t len, long n)
{
	double t0 = now();

	for (long i = 0; i < n; i++) {
		if (write(fd, buf, len) != (ssize_t)len) {
			perror("write");
			exit(1);
		}
	}
	printf("{\"case\":\"%s\",\"size\":%zu,\"calls\":%ld,\"ns_per_call\":%.1f}\n", name, len, n,
	       (now() - t0) / (double)n);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC), fds[2];
	pthread_t reader;

	if (null < 0 || pipe(fds) || n <= 0) {
		fprintf(stderr, "usage: idle-cost [calls]\n");
		return 2;
	}
	pthread_create(&reader, NULL, drain, &fds[0]);
	run("devnull-small", null, 1, n);
	run("devnull-large", null, sizeof(buf), n);
	run("pipe-small", fds[1], 128, n);
	close(fds[1]);
	pthread_join(reader, NULL);
	return 0;
}
