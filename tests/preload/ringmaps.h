/* SPDX-License-Identifier: MIT */
/*
 * libppipe's rings as /proc/self/smaps shows them, for the tests that
 * check what the pool did with memory. A ring is an anonymous mapping
 * with MADV_DONTFORK (VmFlags "dc"), and MADV_HUGEPAGE ("hg") or
 * MADV_NOHUGEPAGE ("nh"); nothing else in the test programs has "dc".
 * Where the kernel names anonymous mappings (CONFIG_ANON_VMA_NAME), a
 * ring is named "[anon:libppipe-ring]".
 */
#ifndef PPIPE_TEST_RINGMAPS_H
#define PPIPE_TEST_RINGMAPS_H

#include <stdbool.h>
#include <stddef.h>

#define T_RINGMAPS_MAX 16

struct t_ringmap {
	unsigned long start, size; /* bytes */
	long rss_kb, anon_huge_kb;
	bool huge_advised; /* hg */
	bool small_advised; /* nh */
	char name[64]; /* what smaps names it ("[anon:libppipe-ring]"), "" if nothing */
};

#define T_RING_NAME "[anon:libppipe-ring]"

/*
 * Whether this kernel names anonymous mappings (PR_SET_VMA_ANON_NAME): it
 * names a mapping of its own and looks for the name in /proc/self/maps.
 */
bool t_anon_names(void);

/* One line on stdout: where @m is, its size, its huge pages and its advice. */
void t_ringmap_print(const struct t_ringmap *m);

/* Whether the system's THP mode allows huge pages at all (not "never"). */
bool t_thp_enabled(void);

/* Fills @out with up to T_RINGMAPS_MAX rings, in address order; returns how many. */
int t_ringmaps(struct t_ringmap *out);

#endif
