/* SPDX-License-Identifier: MIT */
/*
 * A decision taken once per process that nobody ever waits for: the first
 * caller makes it; callers meanwhile (other threads, or a signal handler
 * that interrupted the first caller) are told it is being made and go on
 * without it. Used by the start-up probes, which run inside writes.
 *
 * Layer: base (may use: base).
 */
#ifndef PP_ONCE_H
#define PP_ONCE_H

#include <errno.h>
#include <stdbool.h>

enum pp_once { PP_ONCE_UNKNOWN, PP_ONCE_RUNNING, PP_ONCE_YES, PP_ONCE_NO };

/*
 * PP_ONCE_YES or PP_ONCE_NO once decided, PP_ONCE_RUNNING while another
 * caller decides, PP_ONCE_UNKNOWN when this caller has just taken the
 * decision on and must finish it with pp_once_end().
 */
static inline enum pp_once pp_once_begin(int *state)
{
	int expected = PP_ONCE_UNKNOWN;
	int s = __atomic_load_n(state, __ATOMIC_ACQUIRE);

	if (s != PP_ONCE_UNKNOWN)
		return (enum pp_once)s;
	if (!__atomic_compare_exchange_n(state, &expected, PP_ONCE_RUNNING, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return (enum pp_once)expected;
	return PP_ONCE_UNKNOWN;
}

/* Publishes the decision; what was stored before it is visible to every later reader. */
static inline void pp_once_end(int *state, bool yes)
{
	__atomic_store_n(state, yes ? PP_ONCE_YES : PP_ONCE_NO, __ATOMIC_RELEASE);
}

/*
 * The whole decision: the first caller runs @decide (NULL: yes, else why
 * not), stores the reason (@yes_reason when yes) in *@reason for every
 * later reader, tells @told (once, PPIPE_DEBUG) and publishes it. errno
 * is kept. Returns the decision, or false while another caller decides.
 */
static inline bool pp_once_run(int *state, const char **reason, const char *(*decide)(void),
			       const char *yes_reason, void (*told)(const char *why))
{
	enum pp_once s = pp_once_begin(state);
	const char *why;
	int saved;

	if (s != PP_ONCE_UNKNOWN)
		return s == PP_ONCE_YES;
	saved = errno;
	why = decide();
	errno = saved;
	__atomic_store_n(reason, why ? why : yes_reason, __ATOMIC_RELEASE);
	told(why);
	pp_once_end(state, !why);
	return !why;
}

static inline bool pp_once_decided(const int *state, bool *yes)
{
	int s = __atomic_load_n(state, __ATOMIC_ACQUIRE);

	*yes = s == PP_ONCE_YES;
	return s == PP_ONCE_YES || s == PP_ONCE_NO;
}

#endif
