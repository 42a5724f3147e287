/* SPDX-License-Identifier: MIT */
/*
 * Start-up and process life cycle: the constructor (bind the real
 * functions, read the options, nothing else), the fork handlers, and the
 * statistics at exit.
 */
#ifndef PP_INIT_H
#define PP_INIT_H

#include <stdbool.h>

/* Initialised and not switched off: calls may be intercepted. */
bool pp_active(void);

/* Writes the PPIPE_STATS report now (also run at exit). */
void pp_stats_report_now(void);
/* Writes the same report to @fd. */
void pp_stats_report_fd(int fd);

#endif
