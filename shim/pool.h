/* SPDX-License-Identifier: MIT */
/*
 * The pool: page-aligned memory for rings, faulted in by use, placed on the
 * writer's NUMA node, never inherited by fork children, and accounted
 * against the process cap (PPIPE_POOL_MAX). Where the kernel names
 * anonymous mappings, /proc/PID/smaps shows each as "[anon:" PP_POOL_NAME "]"
 * (docs/design.md, "Ring mappings in smaps").
 *
 * Layer: resources (may use: resources, base).
 */
#ifndef PP_POOL_H
#define PP_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PP_POOL_NAME "libppipe-ring"

/*
 * Maps @len bytes (a page multiple). With @aligned the mapping starts on
 * a 2 MiB boundary, so that it can hold huge pages; with @huge too it
 * asks for transparent huge pages. NULL if over the cap or out of memory. Pages are faulted in by their first use, so a
 * ring is resident only as far as the pipe's traffic has reached: the
 * engine copies into a region before it vmsplice()s it, so the fault is
 * taken in that copy, outside any kernel lock, never under pipe->mutex.
 */
void *pp_pool_map(size_t len, bool aligned, bool huge);
/*
 * Gives [@p, @p+@len) of a pool mapping fresh pages, huge or not, with no
 * page table left behind (a page table would keep the next faults on
 * 4 KiB pages). The pages taken away live on while something else, a
 * pipe, holds them. False when the mapping could not be replaced; it is
 * then unchanged.
 */
bool pp_pool_replace(void *p, size_t len, bool huge);
/* Faults [p, p+len) in, for writing. */
void pp_populate(char *p, size_t len);
void pp_pool_unmap(void *p, size_t len);
/* Forgets all accounting (fork child: nothing was inherited). */
void pp_pool_reset(void);

/* Bytes of ring memory mapped by this process now, and at most so far. */
uint64_t pp_pool_bytes(void);
uint64_t pp_pool_peak(void);

/* The node count a sysfs node list ("0-1,3") names; 1 if it does not parse. */
int pp_parse_node_list(const char *s);

/* Node memory is bound to: -1 when NUMA is absent or not used. */
int pp_numa_node(void);

#endif
