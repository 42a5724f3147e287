// SPDX-License-Identifier: MIT
#include "ringmaps.h"

#include "helpers.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

/* Whether the VmFlags list @flags holds the two-letter flag @f. */
static bool has_flag(const char *flags, const char *f)
{
	for (const char *s = flags; (s = strstr(s, f)); s += 2)
		if ((s == flags || s[-1] == ' ') && (s[2] == ' ' || s[2] == '\n' || !s[2]))
			return true;
	return false;
}

int t_ringmaps(struct t_ringmap *out)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	struct t_ringmap cur = { 0 };
	unsigned long lo, hi;
	char line[512];
	int n = 0;
	long kb;

	if (!f)
		t_die("open /proc/self/smaps");
	/* Each mapping: its range line, then fields, VmFlags last. */
	while (fgets(line, sizeof(line), f)) {
		int name_at = 0;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &name_at) == 2) {
			cur = (struct t_ringmap){ .start = lo, .size = hi - lo };
			if (name_at > 0)
				snprintf(cur.name, sizeof(cur.name), "%.*s",
					 (int)strcspn(line + name_at, "\n"), line + name_at);
		} else if (sscanf(line, "Rss: %ld kB", &kb) == 1) {
			cur.rss_kb = kb;
		} else if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) {
			cur.anon_huge_kb = kb;
		} else if (!strncmp(line, "VmFlags:", 8) && has_flag(line + 8, "dc")) {
			cur.huge_advised = has_flag(line + 8, "hg");
			cur.small_advised = has_flag(line + 8, "nh");
			if (n < T_RINGMAPS_MAX)
				out[n++] = cur;
		}
	}
	fclose(f);
	return n;
}

bool t_anon_names(void)
{
	char want[64], line[512];
	bool found = false;
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	FILE *f;

	if (p == MAP_FAILED)
		t_die("mmap");
	if (prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, 4096UL,
		  (unsigned long)"ppipe-test-name")) {
		munmap(p, 4096);
		return false;
	}
	snprintf(want, sizeof(want), "%lx-", (unsigned long)p);
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f))
		found |= !strncmp(line, want, strlen(want)) &&
			 strstr(line, "[anon:ppipe-test-name]") != NULL;
	if (f)
		fclose(f);
	munmap(p, 4096);
	return found;
}

bool t_thp_enabled(void)
{
	char buf[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return buf[0] && !strstr(buf, "[never]");
}

void t_ringmap_print(const struct t_ringmap *m)
{
	printf("ring at %#lx: %lu kB, %ld kB in huge pages, %s%s%s\n", m->start, m->size >> 10,
	       m->anon_huge_kb,
	       m->huge_advised	? "huge pages asked for" :
	       m->small_advised ? "huge pages refused" :
				  "no advice",
	       m->name[0] ? ", " : "", m->name);
}
