/* SPDX-License-Identifier: MIT */
/*
 * The pool: pre-faulted, page-aligned memory for rings, placed on the
 * writer's NUMA node, never inherited by fork children, and accounted
 * against the process cap (PPIPE_POOL_MAX).
 */
#ifndef PP_POOL_H
#define PP_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Maps @len bytes (a page multiple). With @huge the mapping starts on a
 * 2 MiB boundary and asks for transparent huge pages. NULL if over the
 * cap or out of memory. Pages are faulted in by their first use, so a
 * ring is resident only as far as the pipe's traffic has reached: the
 * engine copies into a region before it vmsplice()s it, so the fault is
 * taken in that copy, outside any kernel lock, never under pipe->mutex.
 */
void *pp_pool_map(size_t len, bool huge);
/*
 * The pieces of pp_pool_map() without its accounting or advice, for the
 * THP probe: an anonymous mapping of @len bytes (MAP_FAILED on failure)
 * that starts on a 2 MiB boundary when @huge, and faulting [p, p+len) in.
 */
char *pp_map_aligned(size_t len, bool huge);
void pp_populate(char *p, size_t len);

/* Whether a ring of @size data bytes should be huge-page backed (PPIPE_THP). */
bool pp_pool_huge(size_t size);

/*
 * thp_probe.c: whether huge pages make rings faster on this kernel
 * (PPIPE_THP; auto measures once), the verdict in words for PPIPE_DEBUG
 * and the statistics, and the fork child's reset.
 */
bool pp_thp_wanted(void);
const char *pp_thp_verdict(void);
void pp_thp_after_fork_child(void);
void pp_pool_unmap(void *p, size_t len);
/* Forgets all accounting (fork child: nothing was inherited). */
void pp_pool_reset(void);

/* Bytes of ring memory mapped by this process now, and at most so far. */
uint64_t pp_pool_bytes(void);
uint64_t pp_pool_peak(void);

/* Node memory is bound to: -1 when NUMA is absent or not used. */
int pp_numa_node(void);

#endif
