/* SPDX-License-Identifier: MIT */
/*
 * Faults on purpose, for the test suite: PPIPE_TEST_FAULT makes chosen
 * calls fail, so that every failure path of libppipe can be shown to end
 * in a correct result. Off (the variable unset), a site costs one load of
 * a flag that is never set.
 *
 *   PPIPE_TEST_FAULT=SITE:ERRNO:N[,SITE:ERRNO:N...]
 *
 * fails every N-th call of SITE with ERRNO (a number, or ENOMEM, EFAULT,
 * EAGAIN, EMFILE, EINVAL, EBADF, EIO). Sites: vmsplice, mmap (ring
 * memory), getpipesz (F_GETPIPE_SZ), fionread, dupfd (the write's hold on
 * its file), registry (a new registry slot: the registry is full), adopt
 * (taking over an inherited pipe end at start-up), thp (switching a
 * ring between huge and 4 KiB pages), stage (a write-behind staging
 * pipe), uring (io_uring_setup: io_uring refused), splice (a completed
 * write-behind splice reports the error instead of its count), flush
 * (a flush of staged bytes returns without waiting: the contract broken
 * on purpose, to show that the tests see it), lag (the write-behind
 * service waits 20 ms before it moves bytes: with flushes broken, a path
 * that skips one is then overtaken every time).
 *
 *   PPIPE_TEST_REGISTRY=SLOTS:RECORDS[:CLAIM_MS]
 *
 * makes a registry this process creates use only that many slots and
 * records (fewer than it has room for), and a shorter claim window, so
 * that a test fills it, and shows it recover, in seconds instead of a
 * week.
 *
 *   PPIPE_TEST_THP_SLOW=huge|small|watch
 *
 * makes the huge-page verdict (thp.c) see the laps of that backing four
 * times slower than they ran, so that either verdict can be forced
 * through the real measurement and switching code; "watch" makes the
 * trials say on and the watch after them doubt it, until it is undone.
 *
 * Layer: base (may use: base).
 */
#ifndef PP_FAULT_H
#define PP_FAULT_H

#include "compiler.h"

#include <stdbool.h>
#include <stdint.h>

enum pp_fault_site {
	PP_FAULT_VMSPLICE,
	PP_FAULT_MMAP,
	PP_FAULT_GETPIPESZ,
	PP_FAULT_FIONREAD,
	PP_FAULT_DUPFD,
	PP_FAULT_REGISTRY,
	PP_FAULT_ADOPT,
	PP_FAULT_THP,
	PP_FAULT_STAGE,
	PP_FAULT_URING,
	PP_FAULT_SPLICE,
	PP_FAULT_FLUSH,
	PP_FAULT_LAG,
	PP_FAULT_SITES
};

extern int pp_fault_armed;
/* PPIPE_TEST_REGISTRY: 0, or the slots, records and claim window (ms) of a new registry. */
extern uint32_t pp_fault_reg_slots, pp_fault_reg_recs, pp_fault_reg_claim_ms;
/* PPIPE_TEST_THP_SLOW: 1 huge, 0 small, PP_FAULT_THP_WATCH, -1 none. */
#define PP_FAULT_THP_WATCH 2
extern int pp_fault_thp_slow;

/* Reads PPIPE_TEST_FAULT from @envp (start-up). */
void pp_fault_init(char *const *envp);
/* One stderr line per armed site: how many calls failed of how many. */
void pp_fault_report(void);
/* Whether this call of @site fails; if so, its errno in @err. */
bool pp_fault_hit(enum pp_fault_site site, int *err);

/* -errno when this call of @site is to fail, else 0. */
static inline int pp_fault(enum pp_fault_site site)
{
	int err;

	if (likely(!__atomic_load_n(&pp_fault_armed, __ATOMIC_RELAXED)))
		return 0;
	return pp_fault_hit(site, &err) ? -err : 0;
}

#endif
