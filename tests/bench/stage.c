// SPDX-License-Identifier: MIT
/*
 * ppipe-stage: one stage of a shell pipeline, so that ppipe-compare can
 * measure what libppipe gains programs that a shell connects with pipes
 * and execs, each in its own process:
 *
 *   sh -c 'ppipe-stage produce -s 64K -d 1 | ppipe-stage relay -s 64K | ppipe-stage consume -s 64K'
 *
 * The stream is a pseudo-random pattern of PATTERN_PERIOD bytes, repeated
 * (pattern.h): byte i of the stream is pattern[i % PATTERN_PERIOD]. The
 * period is an odd number of pages, so no ring or pipe size (powers of two)
 * is a multiple of it: a page written again while a reader still needed it,
 * a lost, repeated or altered byte all show as bytes that differ from the
 * pattern at their offset. The producer ends the stream with a marker written in one call of
 * fewer than PIPE_BUF bytes (so it is atomic and no preload library treats
 * it as a large write): a magic, the count of stream bytes before it, and
 * the producer's write() count and latencies, which the consumer reports
 * with its own byte count and time. A stream cut short has no marker.
 */
#include "cli.h"
#include "histogram.h"
#include "pattern.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef PPIPE_VERSION
#define PPIPE_VERSION "unknown"
#endif

enum { EXIT_RUN_FAILED = 1, EXIT_USAGE = 2, EXIT_ENV = 3 };
enum mode { PRODUCE, RELAY, CONSUME };

#define MAX_SIZE (64ull << 20)
#define END_MAGIC "ppipe-stage-end"

/* The end of the stream, in host byte order (every stage runs on one host). */
struct end_marker {
	char magic[16];
	uint64_t bytes; /* stream bytes before the marker */
	uint64_t writes; /* the producer's write() calls */
	uint64_t elapsed_ns; /* from the producer's first write to its last */
	uint64_t lat_avg_ns, lat_p50_ns, lat_p99_ns, lat_p999_ns, lat_max_ns;
};
_Static_assert(sizeof(struct end_marker) < PIPE_BUF, "the end marker must be one atomic write");

struct options {
	enum mode mode;
	uint64_t size, bytes, pipe_size;
	double duration;
	int by_bytes, by_duration;
	int cpus[CLI_MAX_CPUS], ncpus;
	const char *expect_preload;
};

static const char *const mode_names[] = { "produce", "relay", "consume" };
static struct histogram hist;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((format(printf, 2, 3), noreturn)) static void die(int status, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ppipe-stage: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(status);
}

static void *alloc_buffer(uint64_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len))
		die(EXIT_ENV, "cannot allocate %" PRIu64 " bytes", len);
	return p;
}

/* The pattern, followed by its first @extra bytes again: any piece of up to
 * @extra bytes of the stream is pattern + offset % PATTERN_PERIOD. */
static unsigned char *make_pattern(uint64_t extra)
{
	uint64_t len = PATTERN_PERIOD + extra;
	unsigned char *p = alloc_buffer(len);

	pattern_fill(p, len);
	return p;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void set_pipe_size(const struct options *o)
{
	if (!o->pipe_size)
		return;
	if (fcntl(1, F_SETPIPE_SZ, (int)o->pipe_size) >= 0)
		return;
	if (errno == EPERM)
		die(EXIT_ENV, "%s: F_SETPIPE_SZ %" PRIu64 ": above /proc/sys/fs/pipe-max-size",
		    mode_names[o->mode], o->pipe_size);
	die(EXIT_ENV, "%s: F_SETPIPE_SZ %" PRIu64 " on stdout: %s", mode_names[o->mode],
	    o->pipe_size, errno == EBADF ? "stdout is not a pipe" : strerror(errno));
}

static int produce(const struct options *o)
{
	unsigned char *pat = make_pattern(o->size);
	uint64_t pos = 0, writes = 0, start, now, deadline;
	struct end_marker end = { .magic = END_MAGIC };

	set_pipe_size(o);
	hist_init(&hist);
	start = now = now_ns();
	deadline = start + (uint64_t)(o->duration * 1e9);
	while (o->by_bytes ? pos < o->bytes : now < deadline) {
		uint64_t len = o->size, t0;
		ssize_t n;

		if (o->by_bytes && o->bytes - pos < len)
			len = o->bytes - pos;
		t0 = now_ns();
		n = write(1, pat + pos % PATTERN_PERIOD, len);
		now = now_ns();
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die(EXIT_RUN_FAILED, "produce: write: %s", strerror(errno));
		}
		hist_record(&hist, now - t0);
		writes++;
		pos += (uint64_t)n;
	}
	end.bytes = pos;
	end.writes = writes;
	end.elapsed_ns = now - start;
	end.lat_avg_ns = hist_mean(&hist);
	end.lat_p50_ns = hist_quantile(&hist, 0.50);
	end.lat_p99_ns = hist_quantile(&hist, 0.99);
	end.lat_p999_ns = hist_quantile(&hist, 0.999);
	end.lat_max_ns = hist.max;
	if (write_all(1, &end, sizeof(end)))
		die(EXIT_RUN_FAILED, "produce: write: %s", strerror(errno));
	free(pat);
	return 0;
}

/* Full blocks, as dd iflag=fullblock: every write but the last is -s bytes. */
static int relay(const struct options *o)
{
	unsigned char *buf = alloc_buffer(o->size);
	int eof = 0;

	set_pipe_size(o);
	while (!eof) {
		uint64_t fill = 0;

		while (fill < o->size) {
			ssize_t n = read(0, buf + fill, o->size - fill);

			if (n < 0) {
				if (errno == EINTR)
					continue;
				die(EXIT_RUN_FAILED, "relay: read: %s", strerror(errno));
			}
			if (!n) {
				eof = 1;
				break;
			}
			fill += (uint64_t)n;
		}
		if (fill && write_all(1, buf, fill))
			die(EXIT_RUN_FAILED, "relay: write: %s", strerror(errno));
	}
	free(buf);
	return 0;
}

static void check_piece(const unsigned char *pat, const unsigned char *got, uint64_t len,
			uint64_t pos)
{
	const unsigned char *want = pat + pos % PATTERN_PERIOD;
	uint64_t i = 0;

	if (!memcmp(got, want, len))
		return;
	while (got[i] == want[i])
		i++;
	die(EXIT_RUN_FAILED,
	    "consume: verification failed at stream offset %" PRIu64
	    ": expected 0x%02x, got 0x%02x (a lost, repeated or altered piece of the stream)",
	    pos + i, want[i], got[i]);
}

/*
 * The last sizeof(struct end_marker) bytes read so far may be the marker,
 * so they are held back at the front of the buffer and checked as stream
 * bytes only once more data follows them.
 */
static int consume(const struct options *o)
{
	const uint64_t hold = sizeof(struct end_marker);
	unsigned char *pat = make_pattern(o->size + hold);
	unsigned char *buf = alloc_buffer(o->size + hold);
	uint64_t held = 0, pos = 0, start, elapsed_ns;
	struct end_marker end;
	int pipe_size;
	double elapsed, mbps;

	start = now_ns();
	for (;;) {
		ssize_t n = read(0, buf + held, o->size);
		uint64_t total;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die(EXIT_RUN_FAILED, "consume: read: %s", strerror(errno));
		}
		if (!n)
			break;
		total = held + (uint64_t)n;
		if (total <= hold) {
			held = total;
			continue;
		}
		check_piece(pat, buf, total - hold, pos);
		pos += total - hold;
		memmove(buf, buf + total - hold, hold);
		held = hold;
	}
	elapsed_ns = now_ns() - start;
	/* Now: the producer may have resized the pipe after this process started. */
	pipe_size = fcntl(0, F_GETPIPE_SZ);
	if (held < hold)
		die(EXIT_RUN_FAILED,
		    "consume: the stream ended after %" PRIu64
		    " bytes without the producer's end marker (did the producer fail?)",
		    pos + held);
	memcpy(&end, buf, sizeof(end));
	if (memcmp(end.magic, END_MAGIC, sizeof(END_MAGIC)))
		die(EXIT_RUN_FAILED,
		    "consume: the stream does not end with the producer's end marker (after %" PRIu64
		    " bytes)",
		    pos);
	if (end.bytes != pos)
		die(EXIT_RUN_FAILED,
		    "consume: verification failed: the producer wrote %" PRIu64 " bytes, %" PRIu64
		    " arrived",
		    end.bytes, pos);
	elapsed = (double)elapsed_ns / 1e9;
	mbps = elapsed > 0 ? (double)pos / elapsed / 1048576.0 : 0;
	printf("{\"tool\":\"ppipe-stage\",\"version\":\"%s\",\"mode\":\"consume\",\"size\":%" PRIu64
	       ",",
	       PPIPE_VERSION, o->size);
	if (pipe_size > 0)
		printf("\"pipe_size\":%d,", pipe_size);
	else
		printf("\"pipe_size\":null,");
	printf("\"bytes\":%" PRIu64 ",\"elapsed_s\":%.6f,\"mbps\":%.3f,\"verified\":true,"
	       "\"writes\":%" PRIu64 ",\"writes_per_s\":%.1f,\"producer_elapsed_s\":%.6f,"
	       "\"lat_avg_ns\":%" PRIu64 ",\"lat_p50_ns\":%" PRIu64 ",\"lat_p99_ns\":%" PRIu64
	       ",\"lat_p999_ns\":%" PRIu64 ",\"lat_max_ns\":%" PRIu64 "}\n",
	       pos, elapsed, mbps, end.writes, elapsed > 0 ? (double)end.writes / elapsed : 0,
	       (double)end.elapsed_ns / 1e9, end.lat_avg_ns, end.lat_p50_ns, end.lat_p99_ns,
	       end.lat_p999_ns, end.lat_max_ns);
	free(buf);
	free(pat);
	return fflush(stdout) ? EXIT_RUN_FAILED : 0;
}

/* ---- command line ---- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ppipe-stage produce|relay|consume [options]\n"
		"  produce   write the test stream to stdout in write() calls of --size bytes\n"
		"  relay     copy stdin to stdout: read until --size bytes (or EOF), write them\n"
		"  consume   read stdin to EOF in read() calls of --size bytes, check every\n"
		"            byte and print one JSON object (bytes, time, the producer's latencies)\n"
		"options:\n"
		"  -s, --size BYTES         bytes per call, K/M/G suffixes are binary (64K)\n"
		"  -d, --duration SECONDS   produce: write for this long (1)\n"
		"  -b, --bytes BYTES        produce: write this many bytes instead\n"
		"  -p, --pipe-size BYTES    produce, relay: F_SETPIPE_SZ on stdout (0: keep)\n"
		"      --cpus LIST          pin this process to these cpus (0,2-3)\n"
		"      --expect-preload P   fail unless library P is loaded in this process\n"
		"      --version            print the version\n"
		"Exit status: 0 success, 1 the run failed (verification, I/O), 2 bad\n"
		"arguments, 3 the environment is missing something.\n");
}

static void parse_args(int argc, char **argv, struct options *o)
{
	enum { O_CPUS = 256, O_EXPECT, O_VERSION, O_HELP };
	static const struct option lopts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "duration", required_argument, NULL, 'd' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "pipe-size", required_argument, NULL, 'p' },
		{ "cpus", required_argument, NULL, O_CPUS },
		{ "expect-preload", required_argument, NULL, O_EXPECT },
		{ "version", no_argument, NULL, O_VERSION },
		{ "help", no_argument, NULL, O_HELP },
		{ 0 },
	};
	const char *mode;
	char *end;
	int c;

	*o = (struct options){ .size = 64 << 10, .duration = 1 };
	if (argc > 1 && !strcmp(argv[1], "--help")) {
		usage(stdout);
		exit(0);
	}
	if (argc > 1 && !strcmp(argv[1], "--version")) {
		printf("ppipe-stage %s\n", PPIPE_VERSION);
		exit(0);
	}
	if (argc < 2)
		die(EXIT_USAGE, "missing the mode: produce, relay or consume (see --help)");
	mode = argv[1];
	if (!strcmp(mode, "produce"))
		o->mode = PRODUCE;
	else if (!strcmp(mode, "relay"))
		o->mode = RELAY;
	else if (!strcmp(mode, "consume"))
		o->mode = CONSUME;
	else
		die(EXIT_USAGE, "'%s' is not a mode: produce, relay or consume", mode);
	argc--;
	argv++;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:d:b:p:", lopts, NULL)) != -1) {
		if ((c == 'd' || c == 'b') && o->mode != PRODUCE)
			die(EXIT_USAGE, "--%s applies to produce only",
			    c == 'd' ? "duration" : "bytes");
		if (c == 'p' && o->mode == CONSUME)
			die(EXIT_USAGE, "--pipe-size applies to produce and relay only");
		switch (c) {
		case 's':
			if (cli_parse_size(optarg, &o->size) || !o->size || o->size > MAX_SIZE)
				die(EXIT_USAGE, "--size: '%s' is not a byte count from 1 to 64M",
				    optarg);
			break;
		case 'd':
			errno = 0;
			o->duration = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->duration > 0) ||
			    o->duration > 86400)
				die(EXIT_USAGE,
				    "--duration: '%s' is not a number of seconds in (0, 86400]",
				    optarg);
			o->by_duration = 1;
			break;
		case 'b':
			if (cli_parse_size(optarg, &o->bytes))
				die(EXIT_USAGE, "--bytes: '%s' is not a byte count", optarg);
			o->by_bytes = 1;
			break;
		case 'p':
			if (cli_parse_size(optarg, &o->pipe_size) || o->pipe_size > INT_MAX)
				die(EXIT_USAGE, "--pipe-size: '%s' is not a byte count below 2G",
				    optarg);
			break;
		case O_CPUS:
			o->ncpus = cli_parse_cpus(optarg, o->cpus);
			if (o->ncpus < 0)
				die(EXIT_USAGE, "--cpus: '%s' is not a cpu list like 0,2-3",
				    optarg);
			break;
		case O_EXPECT:
			o->expect_preload = optarg;
			break;
		case O_VERSION:
			printf("ppipe-stage %s\n", PPIPE_VERSION);
			exit(0);
		case O_HELP:
			usage(stdout);
			exit(0);
		case ':':
			die(EXIT_USAGE, "%s needs a value", argv[optind - 1]);
		default:
			die(EXIT_USAGE, "unknown option '%s' (see --help)", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	if (o->by_bytes && o->by_duration)
		die(EXIT_USAGE, "--bytes and --duration exclude each other");
}

/* Every process of the pipeline checks for itself: ld.so only warns. */
static void expect_preload(const char *path)
{
	struct cli_preloads pl;

	cli_find_preloads(&pl, getenv("LD_PRELOAD"), path);
	if (!pl.mapped[pl.n - 1])
		die(EXIT_ENV,
		    "%s is not loaded in this process (missing, not in LD_PRELOAD, or ld.so refused "
		    "it)",
		    path);
}

int main(int argc, char **argv)
{
	struct options opt;

	parse_args(argc, argv, &opt);
	if (opt.expect_preload)
		expect_preload(opt.expect_preload);
	if (opt.ncpus) {
		cpu_set_t set;

		CPU_ZERO(&set);
		for (int i = 0; i < opt.ncpus; i++)
			CPU_SET(opt.cpus[i], &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			fprintf(stderr, "ppipe-stage: cannot pin to the cpus asked for: %s\n",
				strerror(errno));
	}
	switch (opt.mode) {
	case PRODUCE:
		return produce(&opt);
	case RELAY:
		return relay(&opt);
	case CONSUME:
		break;
	}
	return consume(&opt);
}
