/* SPDX-License-Identifier: MIT */
/*
 * Whether rings are backed by transparent huge pages (PPIPE_THP). It
 * depends on the kernel and on the traffic, so auto decides from the
 * process's own writes: rings big enough for huge pages take turns at
 * both backings, one lap (the ring's size pushed) at a time, and the
 * time their writes spent in write() per byte decides. thp.c keeps the
 * process-wide tally; ring.c runs the laps.
 *
 * Layer: resources (may use: resources, base).
 */
#ifndef PP_THP_H
#define PP_THP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A ring of @size data bytes can hold huge pages (it is a 2 MiB multiple). */
bool pp_thp_eligible(size_t size);

/* The backing wanted now: 1 huge pages, 0 4 KiB pages, -1 still measuring. */
int pp_thp_want(void);

/*
 * A lap ends when the ring has been filled once and its writes have
 * spent at least this long in write(): on a fast kernel a 2 MiB ring
 * wraps in ~100 us, where one preemption would decide the sample.
 */
#define PP_THP_LAP_MIN_NS 1000000ull

/* Whether writes through rings that can hold huge pages are to be timed now. */
bool pp_thp_timing(void);

/*
 * One measured lap of a ring: @ns spent in write() for @bytes pushed,
 * with huge pages when @huge. Returns the backing the ring should use
 * for its next lap (the side with fewer laps measured, or the verdict
 * once there is one). After an "on" verdict, huge-page laps are
 * watched (thp.c).
 */
bool pp_thp_lap(bool huge, uint64_t ns, uint64_t bytes);

/* The verdict in words, for PPIPE_DEBUG and the statistics. */
const char *pp_thp_verdict(void);

/* In a fork child: a decision being taken by another thread is taken again. */
void pp_thp_after_fork_child(void);

#endif
