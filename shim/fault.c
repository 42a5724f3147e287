// SPDX-License-Identifier: MIT
#include "fault.h"

#include "compiler.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

PP_HOT int pp_fault_armed;
int pp_fault_thp_slow = -1;
uint32_t pp_fault_reg_slots, pp_fault_reg_recs, pp_fault_reg_claim_ms;

static const char *const site_names[PP_FAULT_SITES] = {
	"vmsplice", "mmap",  "getpipesz", "fionread", "dupfd", "registry", "adopt",
	"thp",	    "stage", "uring",	  "splice",   "flush", "lag",
};

static const struct {
	const char *name;
	int err;
} err_names[] = {
	{ "ENOMEM", ENOMEM }, { "EFAULT", EFAULT }, { "EAGAIN", EAGAIN }, { "EMFILE", EMFILE },
	{ "EINVAL", EINVAL }, { "EBADF", EBADF },   { "EIO", EIO },	  { "EPIPE", EPIPE },
};

static struct {
	int err;
	unsigned long every;
	unsigned long calls;
	unsigned long hits;
} sites[PP_FAULT_SITES];

PP_START static int parse_err(const char *s, size_t n)
{
	char *end;
	long v;

	for (size_t i = 0; i < sizeof(err_names) / sizeof(err_names[0]); i++)
		if (strlen(err_names[i].name) == n && !memcmp(err_names[i].name, s, n))
			return err_names[i].err;
	v = strtol(s, &end, 10);
	return end == s + n && v > 0 && v < 4096 ? (int)v : 0;
}

/* One SITE:ERRNO:N item of @len bytes. Returns false if it is not one. */
PP_START static bool parse_item(const char *s, size_t len)
{
	const char *c1 = memchr(s, ':', len), *c2;
	char *end;
	unsigned long every;
	int site = -1, err;

	if (!c1 || !(c2 = memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - s))))
		return false;
	for (int i = 0; i < PP_FAULT_SITES; i++)
		if (strlen(site_names[i]) == (size_t)(c1 - s) && !memcmp(site_names[i], s, c1 - s))
			site = i;
	err = parse_err(c1 + 1, (size_t)(c2 - c1 - 1));
	every = strtoul(c2 + 1, &end, 10);
	if (site < 0 || !err || end != s + len || !every)
		return false;
	sites[site].err = err;
	sites[site].every = every;
	return true;
}

PP_START void pp_fault_init(char *const *envp)
{
	/* Beside this code: a program started with PPIPE_ variables reads them (compiler.h). */
	PP_START_DATA static const char var[] = "PPIPE_TEST_FAULT=",
					slow[] = "PPIPE_TEST_THP_SLOW=",
					reg[] = "PPIPE_TEST_REGISTRY=";
	const char *v = NULL;

	for (char *const *e = envp; e && *e; e++) {
		if (!strncmp(*e, reg, sizeof(reg) - 1)) {
			char *end;
			unsigned long s = strtoul(*e + sizeof(reg) - 1, &end, 10), r = 0, w = 0;

			if (*end == ':')
				r = strtoul(end + 1, &end, 10);
			if (*end == ':')
				w = strtoul(end + 1, &end, 10);
			if (*end || !s || !r || s > UINT32_MAX || r > UINT32_MAX || w > UINT32_MAX)
				pp_warn("PPIPE_TEST_REGISTRY: '%s' is not SLOTS:RECORDS[:CLAIM_MS], "
					"ignored",
					*e + sizeof(reg) - 1);
			else
				pp_fault_reg_slots = (uint32_t)s, pp_fault_reg_recs = (uint32_t)r,
				pp_fault_reg_claim_ms = (uint32_t)w;
		}
		if (!strncmp(*e, var, sizeof(var) - 1))
			v = *e + sizeof(var) - 1;
		if (!strncmp(*e, slow, sizeof(slow) - 1)) {
			const char *side = *e + sizeof(slow) - 1;

			pp_fault_thp_slow = !strcmp(side, "huge")  ? 1 :
					    !strcmp(side, "small") ? 0 :
					    !strcmp(side, "watch") ? PP_FAULT_THP_WATCH :
								     -1;
			if (pp_fault_thp_slow < 0 && *side)
				pp_warn("PPIPE_TEST_THP_SLOW: '%s' is not huge, small or watch, ignored",
					side);
		}
	}
	if (!v || !*v)
		return;
	while (*v) {
		const char *comma = strchr(v, ',');
		size_t len = comma ? (size_t)(comma - v) : strlen(v);

		if (!parse_item(v, len))
			pp_warn("PPIPE_TEST_FAULT: '%.*s' is not SITE:ERRNO:N, ignored", (int)len,
				v);
		v += len + (comma ? 1 : 0);
	}
	for (int i = 0; i < PP_FAULT_SITES; i++)
		if (sites[i].every)
			__atomic_store_n(&pp_fault_armed, 1, __ATOMIC_RELEASE);
}

void pp_fault_report(void)
{
	for (int i = 0; i < PP_FAULT_SITES; i++)
		if (sites[i].every)
			pp_warn("PPIPE_TEST_FAULT: %s failed %lu of %lu calls", site_names[i],
				__atomic_load_n(&sites[i].hits, __ATOMIC_RELAXED),
				__atomic_load_n(&sites[i].calls, __ATOMIC_RELAXED));
}

bool pp_fault_hit(enum pp_fault_site site, int *err)
{
	unsigned long n;

	if ((unsigned int)site >= PP_FAULT_SITES || !sites[site].every)
		return false;
	n = __atomic_add_fetch(&sites[site].calls, 1, __ATOMIC_RELAXED);
	if (n % sites[site].every)
		return false;
	__atomic_add_fetch(&sites[site].hits, 1, __ATOMIC_RELAXED);
	*err = sites[site].err;
	return true;
}
