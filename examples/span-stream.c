// SPDX-License-Identifier: MIT
/*
 * span-stream: a producer that makes its output in place, in memory
 * libppipe hands it (ppipe.h's spans), and a consumer that checks it.
 *
 *   span-stream produce [-n BYTES] [-s BLOCK]   the stream to stdout
 *   span-stream consume [-n BYTES]              stdin must be the stream, BYTES long
 *   span-stream pipeline [-n BYTES] [-s BLOCK]  both: a pipe, the consumer forked
 *
 * The stream is deterministic: byte i is byte i % 8 (least significant
 * first) of a 64-bit mix of i / 8, so the consumer regenerates it and
 * compares every byte. Each side prints the length and the FNV-1a 64
 * checksum of what it wrote or read on stderr; the consumer exits 1 when
 * the bytes or their number differ.
 *
 * The producer asks for a span of up to BLOCK bytes (1 MiB), generates the
 * stream straight into it and commits it: with libppipe accelerating the
 * pipe the span is ring memory that goes into the pipe without a copy;
 * otherwise it is an ordinary buffer that the commit write()s. The same
 * source builds two ways (examples/meson.build): without PPIPE_LINKED it
 * runs with libppipe preloaded or not loaded at all (the header's weak
 * references and fallback); with PPIPE_LINKED it links libppipe. Either
 * way it says on stderr which libppipe answered, if any.
 *
 * libppipe accelerates a pipe that it saw created, while every process
 * holding its read end runs libppipe (docs/design.md, "The readers"). So
 * under LD_PRELOAD `sh -c 'span-stream produce | span-stream consume'` is
 * accelerated: sh makes the pipe, and sh and both stages run libppipe.
 * The linked build has libppipe without LD_PRELOAD, and a pipe made by a
 * shell without it stays plain; `pipeline` makes the pipe itself and
 * forks the consumer, which is libppipe's as the producer is.
 */
#include "ppipe.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static const char *prog = "span-stream";

/* Word k of the stream: splitmix64's output for k. */
static uint64_t stream_word(uint64_t k)
{
	uint64_t z = (k + 1) * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Bytes [@pos, @pos + @len) of the stream into @buf. */
static void stream_fill(uint64_t pos, unsigned char *buf, size_t len)
{
	while (len) {
		uint64_t w = stream_word(pos / 8);
		size_t off = pos % 8, n = 8 - off < len ? 8 - off : len;

		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)(w >> (8 * (off + i)));
		buf += n;
		pos += n;
		len -= n;
	}
}

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n)
{
	while (n--)
		h = (h ^ *p++) * FNV_PRIME;
	return h;
}

/* Which libppipe answers ppipe.h's calls, for the report. */
static const char *library(void)
{
	const char *v = ppipe_version();

	return v ? v : "absent (ppipe.h's fallback: buffers and write())";
}

static int produce(int fd, uint64_t total, size_t block)
{
	uint64_t pos = 0, spans = 0, sum = FNV_OFFSET;

	while (pos < total) {
		size_t want = total - pos < block ? (size_t)(total - pos) : block;
		struct ppipe_span span;
		size_t len;

		if (ppipe_span_get(fd, want, &span)) {
			fprintf(stderr, "%s: ppipe_span_get: %s\n", prog, strerror(errno));
			return 1;
		}
		/* The span may be shorter than asked: the rest goes into the next one. */
		len = span.len;
		stream_fill(pos, span.data, len);
		sum = fnv1a(sum, span.data, len);
		spans++;
		/* A partial commit leaves the rest in the span, moved on: commit that too. */
		for (size_t todo = len; todo;) {
			ssize_t n = ppipe_span_commit(&span, todo);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				fprintf(stderr, "%s: ppipe_span_commit: %s\n", prog,
					strerror(errno));
				ppipe_span_release(&span);
				return 1;
			}
			todo -= (size_t)n;
		}
		pos += len;
	}
	fprintf(stderr,
		"%s produce: %" PRIu64 " bytes, fnv1a %016" PRIx64 ", %" PRIu64
		" spans, libppipe %s%s\n",
		prog, pos, sum, spans, library(),
#ifdef PPIPE_LINKED
		" (linked)"
#else
		""
#endif
	);
	return 0;
}

static int consume(int fd, uint64_t total)
{
	static unsigned char buf[1 << 16], want[1 << 16];
	uint64_t pos = 0, sum = FNV_OFFSET;
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "%s: read: %s\n", prog, strerror(errno));
			return 1;
		}
		stream_fill(pos, want, (size_t)n);
		if (memcmp(buf, want, (size_t)n)) {
			size_t i = 0;

			while (buf[i] == want[i])
				i++;
			fprintf(stderr, "%s consume: byte %" PRIu64 " is 0x%02x, not 0x%02x\n",
				prog, pos + i, buf[i], want[i]);
			return 1;
		}
		sum = fnv1a(sum, buf, (size_t)n);
		pos += (uint64_t)n;
	}
	fprintf(stderr, "%s consume: %" PRIu64 " bytes, fnv1a %016" PRIx64 ", %s\n", prog, pos, sum,
		pos == total ? "stream ok" : "LENGTH WRONG");
	if (pos != total) {
		fprintf(stderr, "%s consume: expected %" PRIu64 " bytes\n", prog, total);
		return 1;
	}
	return 0;
}

/* The pipe made here, the consumer a fork child: both processes are libppipe's when this one is. */
static int pipeline(uint64_t total, size_t block)
{
	int fds[2], status, rc;
	pid_t child;

	if (pipe(fds)) {
		fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
		return 1;
	}
	child = fork();
	if (child < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
		return 1;
	}
	if (!child) {
		close(fds[1]);
		exit(consume(fds[0], total));
	}
	close(fds[0]);
	rc = produce(fds[1], total, block);
	close(fds[1]);
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	return rc || !WIFEXITED(status) || WEXITSTATUS(status) ? 1 : 0;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: %s produce [-n BYTES] [-s BLOCK]\n"
		"       %s consume [-n BYTES]\n"
		"       %s pipeline [-n BYTES] [-s BLOCK]\n"
		"BYTES: the stream's length (64M); BLOCK: the most asked of one span (1M);\n"
		"K, M and G suffixes are binary\n",
		prog, prog, prog);
	return 2;
}

/* A byte count with an optional binary K, M or G suffix; 0 when malformed. */
static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	if (*s < '0' || *s > '9')
		return 0;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	else if (*end == 'G' || *end == 'g')
		shift = 30;
	if (shift)
		end++;
	if (errno || *end || v > (UINT64_MAX >> shift))
		return 0;
	return (uint64_t)v << shift;
}

int main(int argc, char **argv)
{
	uint64_t total = 64ull << 20, block = 1 << 20;
	const char *cmd;
	int c;

	if (argc < 2)
		return usage();
	cmd = argv[1];
	optind = 2;
	while ((c = getopt(argc, argv, "n:s:")) != -1) {
		if (c == 'n' && (total = parse_size(optarg)))
			continue;
		if (c == 's' && (block = parse_size(optarg)) && block <= SSIZE_MAX)
			continue;
		return usage();
	}
	if (optind != argc)
		return usage();
	if (!strcmp(cmd, "produce"))
		return produce(STDOUT_FILENO, total, (size_t)block);
	if (!strcmp(cmd, "consume"))
		return consume(STDIN_FILENO, total);
	if (!strcmp(cmd, "pipeline"))
		return pipeline(total, (size_t)block);
	return usage();
}
