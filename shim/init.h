/* SPDX-License-Identifier: MIT */
/*
 * Start-up and process life cycle: the constructor (bind the real
 * functions, read the options, nothing else), the fork handlers, and the
 * statistics at exit and _exit.
 *
 * Layer: interpose (may use: interpose, operations, engine, pipes, resources, base).
 */
#ifndef PP_INIT_H
#define PP_INIT_H

#include <stdbool.h>
#include <sys/types.h>

/*
 * Writes the process's last PPIPE_STATS report: run at exit. Only the first
 * call (of this and pp_exit) writes it.
 */
void pp_stats_report_now(void);
/* Writes the same report to @fd. */
void pp_stats_report_fd(int fd);

/*
 * _exit() and _Exit() (@upper): the last report, unless exit() wrote it,
 * this is a vfork child, or a signal handler interrupted a report of its
 * own thread; then the real call. Async-signal-safe.
 */
__attribute__((noreturn)) void pp_exit(int status, bool upper);

/*
 * fork(): the real one, after which the parent names the child's records
 * in the pipe registry (registry.h) with the pid it returned.
 */
pid_t pp_fork(void);

/*
 * Binds libc's definitions of the stdio names libppipe stands in for
 * (interpose_stdio.c), those not bound yet, in one walk: at the first
 * fork() of a process with pipes, so that its children inherit them.
 */
void pp_stdio_bind(void);

/* The library's finalizer, DT_FINI (shim/meson.build): nothing to do there. */
void pp_fini(void);

#endif
