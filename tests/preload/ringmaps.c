// SPDX-License-Identifier: MIT
#include "ringmaps.h"

#include "helpers.h"

#include <stdio.h>
#include <string.h>

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
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			cur = (struct t_ringmap){ .start = lo, .size = hi - lo };
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
	printf("ring at %#lx: %lu kB, %ld kB in huge pages, %s\n", m->start, m->size >> 10,
	       m->anon_huge_kb,
	       m->huge_advised	? "huge pages asked for" :
	       m->small_advised ? "huge pages refused" :
				  "no advice");
}
