/* SPDX-License-Identifier: MIT */
/*
 * Memory pressure (PSI) for the pool: polled now and then from the write
 * path, no thread and no fd of its own. See psi.c.
 *
 * Layer: resources (may use: resources, base).
 */
#ifndef PP_PSI_H
#define PP_PSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Reads the pressure file (the caller rate-limits and serialises calls)
 * and returns whether memory pressure is at or above PPIPE_PSI now.
 */
bool pp_psi_poll(uint64_t now_ns);
/* The last answer of pp_psi_poll(): one load (what a poll already running returns). */
bool pp_psi_active(void);
/* How many times pressure began (for the statistics). */
uint64_t pp_psi_episodes(void);
void pp_psi_after_fork_child(void);

/*
 * The cgroup v2 path ("/..."), from the "0::" line of the /proc/PID/cgroup
 * contents read from @fd, into @out (@len bytes); false without one, or if
 * it does not fit (exposed for tests).
 */
bool pp_psi_cgroup_v2_path(int fd, char *out, size_t len);
/* Parses the "some ... total=N" line of a PSI file's @text (exposed for tests). */
bool pp_psi_parse_some_total(const char *text, uint64_t *total_us);

#endif
