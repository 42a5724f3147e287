// SPDX-License-Identifier: MIT
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <link.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The unsigned decimal number @s starts with (no sign), and where it ends; -1 if none. */
static int parse_unsigned(const char *s, unsigned long long *v, char **end)
{
	if (!*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	*v = strtoull(s, end, 10);
	return errno || *end == s ? -1 : 0;
}

int cli_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	if (parse_unsigned(s, &v, &end))
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	default:
		break;
	}
	if (*end || (shift && v > (ULLONG_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int cli_parse_ns(const char *s, uint64_t *out)
{
	static const struct {
		const char *name;
		uint64_t scale;
	} units[] = {
		{ "", 1 }, { "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 }
	};
	char *end;
	unsigned long long v;

	if (parse_unsigned(s, &v, &end))
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].name))
			continue;
		if (v > UINT64_MAX / units[i].scale)
			return -1;
		*out = (uint64_t)v * units[i].scale;
		return 0;
	}
	return -1;
}

int cli_parse_cpus(const char *s, int *cpus)
{
	int n = 0;

	while (*s) {
		char *end;
		long lo = strtol(s, &end, 10), hi;

		if (end == s || lo < 0 || lo >= CPU_SETSIZE)
			return -1;
		hi = lo;
		if (*end == '-') {
			s = end + 1;
			hi = strtol(s, &end, 10);
			if (end == s || hi < lo || hi >= CPU_SETSIZE)
				return -1;
		}
		for (long c = lo; c <= hi; c++) {
			if (n == CLI_MAX_CPUS)
				return -1;
			cpus[n++] = (int)c;
		}
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		s = end;
	}
	return n ? n : -1;
}

void cli_pin_one(const char *prog, const int *cpus, int n, unsigned int id)
{
	cpu_set_t set;

	if (!n)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpus[id % (unsigned int)n], &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		fprintf(stderr, "%s: cannot pin to cpu %d: %s\n", prog, cpus[id % (unsigned int)n],
			strerror(errno));
}

static int same_file(const char *a, const char *b)
{
	char ra[PATH_MAX], rb[PATH_MAX];

	if (!realpath(a, ra) || !realpath(b, rb))
		return 0;
	return !strcmp(ra, rb);
}

static int match_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct cli_preloads *p = data;

	(void)size;
	if (!info->dlpi_name || !*info->dlpi_name)
		return 0;
	for (int i = 0; i < p->n; i++) {
		const char *w = p->want[i];
		const char *base = strrchr(info->dlpi_name, '/');

		if (strchr(w, '/') ? same_file(w, info->dlpi_name) :
				     !strcmp(w, base ? base + 1 : info->dlpi_name))
			p->mapped[i] = 1;
	}
	return 0;
}

void cli_find_preloads(struct cli_preloads *p, const char *env, const char *extra)
{
	static char *copy; /* what p->want points into, until the next call */
	char *save = NULL;

	free(copy);
	copy = env ? strdup(env) : NULL;
	memset(p, 0, sizeof(*p));
	for (char *tok = copy ? strtok_r(copy, ": ", &save) : NULL;
	     tok && p->n < CLI_MAX_PRELOADS - 1; tok = strtok_r(NULL, ": ", &save))
		p->want[p->n++] = tok;
	if (extra)
		p->want[p->n++] = extra;
	dl_iterate_phdr(match_object, p);
}
