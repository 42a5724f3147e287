// SPDX-License-Identifier: MIT
/*
 * fuzz-config: the option parser against arbitrary environments. One
 * input is a set of NUL- or newline-separated "NAME=VALUE" entries (names
 * chosen from the real options when an entry starts with a byte below
 * 32, so that the fuzzer reaches the value parsers quickly), and the
 * pure parsers are fed the whole input as one value too. Whatever comes
 * in: no crash, no read out of bounds (run it under ASan), and every
 * value left within its option's range.
 *
 * Built two ways: with clang's -fsanitize=fuzzer as a libFuzzer target
 * (LLVMFuzzerTestOneInput), and, everywhere else, with a main() that runs
 * a fixed number of random and mutated inputs from a seed (a short run in
 * the unit suite; `fuzz-config ITERATIONS SEED` for a longer one).
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

static const char *const names[] = {
	"PPIPE_FDS",	 "PPIPE_MODE",	    "PPIPE_MIN_WRITE", "PPIPE_READERS",	 "PPIPE_STATS",
	"PPIPE_DEBUG",	 "PPIPE_VERBOSE",   "PPIPE_RING_SIZE", "PPIPE_POOL_MAX", "PPIPE_POOL_KEEP",
	"PPIPE_IDLE_MS", "PPIPE_NUMA_NODE", "PPIPE_PSI",       "PPIPE_PSI_FILE", "PPIPE_THP",
	"PPIPE_TURNS",	 "PPIPE_REGISTRY",  "PPIPE_MIN_WIRTE",
};

static void check_ranges(void)
{
	if (pp_cfg.min_write <= 4096 || pp_cfg.min_write > (1ULL << 30) || pp_cfg.idle_ms < 1 ||
	    pp_cfg.idle_ms > 3600000 || pp_cfg.psi < 0 || pp_cfg.psi > 100 ||
	    pp_cfg.numa_node < -1 || pp_cfg.numa_node > 1023 ||
	    strnlen(pp_cfg.stats, sizeof(pp_cfg.stats)) == sizeof(pp_cfg.stats) ||
	    (unsigned int)pp_cfg.mode > PP_MODE_OFF || (unsigned int)pp_cfg.readers > 1 ||
	    (unsigned int)pp_cfg.thp > PP_THP_OFF || (unsigned int)pp_cfg.turns > PP_TURNS_OFF) {
		fprintf(stderr, "fuzz-config: a value out of its range\n");
		abort();
	}
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char *copy = malloc(size + 1), *env[65], *p, *bufs[64] = { 0 };
	int n = 0;
	uint64_t u;
	int64_t i;
	bool b;
	struct pp_fdset fds;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = 0;
	/* The whole input as one value of each kind. */
	pp_parse_size(copy, 0, UINT64_MAX, &u);
	pp_parse_int(copy, INT64_MIN, INT64_MAX, &i);
	pp_parse_bool(copy, &b);
	pp_parse_fdset(copy, &fds);
	/* Then as an environment. */
	for (p = copy; n < 64 && p < copy + size;) {
		char *end = p;

		while (end < copy + size && *end && *end != '\n')
			end++;
		*end = 0;
		if (*p > 0 && *p < 32) {
			const char *name =
				names[(unsigned char)*p % (sizeof(names) / sizeof(names[0]))];
			size_t len = strlen(name) + strlen(p + 1) + 2;

			bufs[n] = malloc(len);
			if (bufs[n])
				snprintf(bufs[n], len, "%s=%s", name, p + 1);
			env[n] = bufs[n] ? bufs[n] : p;
		} else {
			env[n] = p;
		}
		n++;
		p = end + 1;
	}
	env[n] = NULL;
	pp_config_load_env(env, (size & 1) != 0);
	check_ranges();
	for (int k = 0; k < n; k++)
		free(bufs[k]);
	free(copy);
	return 0;
}

#ifndef PP_LIBFUZZER
static const char *const seeds[] = {
	"\x01stdout,1,7",
	"\x03"
	"16k",
	"\x02vmsplice",
	"\x05yes",
	"\x04/tmp/x-%p-%%",
	"\x08"
	"64MiB",
	"\x0b-1",
	"\x0e"
	"auto",
	"\x10"
	"12x",
	"PPIPE_FDS=none",
	"PPIPE_STATS=1\nPPIPE_DEBUG=on",
	"\x0f"
	"3:4",
	"\x0c"
	"100",
	"\x01 stdin , 1023 ,",
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 20000;
	uint64_t s = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
	unsigned char buf[512];
	int devnull = open("/dev/null", O_WRONLY);

	/* The parser's warnings would flood the log: they go to /dev/null. */
	if (devnull >= 0)
		dup2(devnull, 2);
	for (long it = 0; it < iters; it++) {
		const char *seed = seeds[rnd(&s) % (sizeof(seeds) / sizeof(seeds[0]))];
		size_t len = strlen(seed), edits = rnd(&s) % 8;

		if (len > sizeof(buf))
			len = sizeof(buf);
		memcpy(buf, seed, len);
		if (rnd(&s) % 4 == 0) { /* now and then, random bytes only */
			len = rnd(&s) % sizeof(buf);
			for (size_t k = 0; k < len; k++)
				buf[k] = (unsigned char)rnd(&s);
		}
		for (size_t e = 0; e < edits && len; e++) {
			size_t at = rnd(&s) % len;

			switch (rnd(&s) % 4) {
			case 0:
				buf[at] = (unsigned char)rnd(&s);
				break;
			case 1: /* insert */
				if (len < sizeof(buf)) {
					memmove(buf + at + 1, buf + at, len - at);
					buf[at] = (unsigned char)rnd(&s);
					len++;
				}
				break;
			case 2: /* delete */
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
				break;
			default: /* repeat a run (long values) */
				while (len < sizeof(buf) && rnd(&s) % 16)
					buf[len++] = buf[at];
			}
		}
		LLVMFuzzerTestOneInput(buf, len);
	}
	printf("fuzz-config: %ld inputs, no crash, every value in range\n", iters);
	return 0;
}
#endif
