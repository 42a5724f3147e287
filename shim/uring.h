/* SPDX-License-Identifier: MIT */
/*
 * The io_uring service of write-behind (stage.h): one thread per process
 * that owns an io_uring, keeps one IORING_OP_SPLICE in flight per staging
 * pipe that holds bytes (from S into the target, everything staged so far
 * in one request), resubmits partial splices, drops what a dead target
 * cannot take and records the error, and closes retired stages once they
 * are drained. Each splice runs in the kernel's io-wq, so a full target
 * holds up nothing but its own pipe: no writer ever has to come back for
 * its staged bytes to move.
 *
 * The thread blocks every signal and makes only raw system calls (no
 * libc function libppipe interposes).
 *
 * Layer: resources (may use: resources, base).
 */
#ifndef PP_URING_H
#define PP_URING_H

#include <stdbool.h>

/*
 * Starts the service on first use (PPIPE_MODE=uring). False when it
 * cannot run here; pp_uring_reason() says why (for PPIPE_DEBUG and the
 * statistics), and the vmsplice engine writes directly.
 */
bool pp_uring_ready(void);
/* Whether the service was ever started in this process (inline: close and fcntl ask). */
extern int pp_uring_state;
static inline bool pp_uring_started(void)
{
	return __atomic_load_n(&pp_uring_state, __ATOMIC_ACQUIRE) == 2; /* PP_ONCE_YES */
}
const char *pp_uring_reason(void);
/* Wakes the service if it sleeps (async-signal-safe, cheap when awake). */
void pp_uring_kick(void);
/*
 * Whether the service will look at the stages again by itself (a timer
 * for drained stages that still hold a dup of their pipe is armed): a
 * writer leaving a drained stage kicks the service only when not.
 */
extern int pp_uring_timer_armed;
static inline bool pp_uring_will_look(void)
{
	return __atomic_load_n(&pp_uring_timer_armed, __ATOMIC_ACQUIRE) != 0;
}
/*
 * The program is about to close fds [@lo, @hi] and the service's own (its
 * ring, its wake-up eventfd) are among them: true, and no new stage opens
 * until pp_uring_stop(), which the caller calls once it has drained and
 * closed every stage. False when none of them is (waits while another
 * thread starts or stops the service).
 */
bool pp_uring_stop_if_owns(unsigned int lo, unsigned int hi);
/*
 * Ends the service thread, which closes its ring and eventfd; the next
 * write that stages starts a new one. Only after pp_uring_stop_if_owns().
 */
void pp_uring_stop(void);
/* In a fork child: the thread and its ring stayed with the parent. */
void pp_uring_after_fork_child(void);

#endif
