/* SPDX-License-Identifier: MIT */
/*
 * What the harness programs (ppipe-bench, ppipe-stage) share on their
 * command lines: byte counts with binary suffixes, times, cpu lists and pinning,
 * and which preload libraries ld.so really mapped (it only warns when a
 * preload fails, so a run "with the library" has to check).
 */
#ifndef PPIPE_BENCH_CLI_H
#define PPIPE_BENCH_CLI_H

#include <stdint.h>

#define CLI_MAX_CPUS 256
#define CLI_MAX_PRELOADS 64

/* Decimal byte count with an optional binary K/M/G suffix: 0, or -1 if malformed. */
int cli_parse_size(const char *s, uint64_t *out);
/*
 * A time in nanoseconds: a decimal count with an optional unit ns, us, ms
 * or s (20us = 20000). 0, or -1 if malformed or beyond 2^64 ns.
 */
int cli_parse_ns(const char *s, uint64_t *out);
/* A cpu list such as 0,2-3 into @cpus (CLI_MAX_CPUS): the count, or -1 if malformed. */
int cli_parse_cpus(const char *s, int *cpus);
/* Pins the calling thread to cpus[id % n]; no-op when n is 0; warns on failure. */
void cli_pin_one(const char *prog, const int *cpus, int n, unsigned int id);

struct cli_preloads {
	const char *want[CLI_MAX_PRELOADS];
	int mapped[CLI_MAX_PRELOADS];
	int n;
};

/*
 * Which of the entries of @env (LD_PRELOAD's value, split at ':' and ' ';
 * may be NULL) and of @extra (may be NULL; then it is the last entry) are
 * mapped in this process. An entry with a '/' matches the same file, one
 * without matches a mapped object's base name. The entries point into a
 * copy of @env that lives until the next call.
 */
void cli_find_preloads(struct cli_preloads *p, const char *env, const char *extra);

#endif
