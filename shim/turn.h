/* SPDX-License-Identifier: MIT */
/*
 * Writer turns (PPIPE_TURNS): the threads of a process that push into
 * one pipe take turns, so that one of them at a time contends with the
 * reader for the kernel's pipe->mutex instead of all of them spinning on
 * it. A thread holds the turn only while it vmsplice()s one region (and
 * waits for room for it); copying into its ring happens before, in
 * parallel with the others.
 */
#ifndef PP_TURN_H
#define PP_TURN_H

#include <stdbool.h>

struct pp_pipe;

/* Whether writes take turns (PPIPE_TURNS). */
bool pp_turns_on(void);

/*
 * Takes @p's turn for the calling thread, waiting while another thread
 * holds it. The wait is a cancellation point (the caller's clean-up
 * handler runs; the turn is not held then). Returns 0 with the turn, or
 * -EINTR when a signal whose handler was installed without SA_RESTART
 * ended the wait (a plain write() would have returned there too, or
 * not waited at all: the caller lets the real call decide), or -EDEADLK
 * when this thread already holds it (a signal handler inside a write).
 */
int pp_turn_take(struct pp_pipe *p);
void pp_turn_give(struct pp_pipe *p);

/* In a fork child: the threads that held turns are gone, and this thread's id changed. */
void pp_turn_forget(struct pp_pipe *p);
void pp_turn_after_fork_child(void);

#endif
