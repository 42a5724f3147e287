// SPDX-License-Identifier: MIT
/*
 * ppipe-soak-helper: the small programs ppipe-soak runs where Python would be
 * too slow or cannot do it. One mode per call:
 *
 *   check N   read stdin to EOF and check it as the per-byte tagged stream
 *             of N writers (stream.h) that threads wrote into one pipe;
 *             print one line "bytes B0 B1 ..." with what each writer's
 *             stream delivered. Exit 1 at the first wrong byte.
 *   copy      copy stdin to stdout, one write() per read() (a dynamically
 *             linked copier: ppipe-soak runs a copy of it setuid)
 *   splice    move stdin to stdout with splice() only (a reader that
 *             passes pages on, which libppipe must keep plain)
 *
 * Exit status: 0, 1 a check or an I/O call failed, 2 bad arguments.
 */
#include "stream.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (1u << 20)

static unsigned char buf[CHUNK];

static int fail(const char *what)
{
	fprintf(stderr, "ppipe-soak-helper: %s: %s\n", what, strerror(errno));
	return 1;
}

static int check(unsigned int writers)
{
	static struct stream_check c;

	stream_check_init(&c, writers);
	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail("check: read");
		if (!n)
			break;
		if (stream_check_feed(&c, buf, (size_t)n)) {
			fprintf(stderr, "ppipe-soak-helper: check: %s\n", c.error);
			return 1;
		}
	}
	printf("bytes");
	for (unsigned int w = 0; w < writers; w++)
		printf(" %" PRIu64, c.pos[w]);
	printf("\n");
	return fflush(stdout) ? 1 : 0;
}

static int copy(void)
{
	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail("copy: read");
		if (!n)
			return 0;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(1, buf + off, (size_t)(n - off));

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return fail("copy: write");
			off += w;
		}
	}
}

static int splice_all(void)
{
	for (;;) {
		ssize_t n = splice(0, NULL, 1, NULL, CHUNK, SPLICE_F_MOVE);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail("splice");
		if (!n)
			return 0;
	}
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "check")) {
		char *end;
		unsigned long n = strtoul(argv[2], &end, 10);

		if (*end || !n || n > STREAM_MAX_WRITERS) {
			fprintf(stderr, "ppipe-soak-helper: check: 1 to %d writers\n",
				STREAM_MAX_WRITERS);
			return 2;
		}
		return check((unsigned int)n);
	}
	if (argc == 2 && !strcmp(argv[1], "copy"))
		return copy();
	if (argc == 2 && !strcmp(argv[1], "splice"))
		return splice_all();
	fprintf(stderr, "usage: ppipe-soak-helper check N | copy | splice\n");
	return 2;
}
