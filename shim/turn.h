/* SPDX-License-Identifier: MIT */
/*
 * Writer turns (PPIPE_TURNS): the threads of a process that find one
 * pipe full wait for room in turns, so that when the reader makes room
 * one of them at a time contends with it for the kernel's pipe->mutex,
 * instead of all of them waking up and spinning on it. A writer that
 * finds room pushes at once, turn or not; one that found the pipe full
 * takes the turn, and keeps it until its region is in.
 *
 * Layer: resources (may use: resources, base).
 */
#ifndef PP_TURN_H
#define PP_TURN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * PPIPE_TURNS=auto, per pipe: turns help where writers crowd a reader
 * (5 writers x 1 reader: 1.4-1.7x) and cost where several readers drain
 * the pipe (5x5: 0.8x, the hand-over leaves it idle), and only the
 * traffic tells which. So windows of TURN_WINDOW_NS alternate without
 * and with turns; the bytes written per window decide, medians of
 * PP_TURN_WINDOWS each, and the trial is run again now and then.
 */
#define PP_TURN_WINDOWS 3
struct pp_turn_trial {
	uint64_t start; /* of the current window, ns; 0 none yet */
	uint64_t bytes; /* written in it */
	uint32_t ended; /* windows counted since the trial (or the choice) began */
	int choice; /* -1 measuring, 0 without turns, 1 with */
	uint64_t rate[2][PP_TURN_WINDOWS]; /* bytes per ms, without / with */
};

/* The turn of one pipe (kept in its object). */
struct pp_turn {
	int holder; /* tid of the writer pushing now, 0 none (a futex word) */
	int waiters; /* writers waiting for the turn */
	struct pp_turn_trial trial; /* PPIPE_TURNS=auto */
};

/* Whether this write waits for room in turns (PPIPE_TURNS). */
bool pp_turns_on(const struct pp_turn *turn);
/* A write of @bytes to pipe @ino ended at @now (ns): counted for auto. */
void pp_turn_account(struct pp_turn *turn, uint64_t ino, size_t bytes, uint64_t now);

/*
 * Takes the turn for the calling thread, waiting while another thread
 * holds it. The wait is a cancellation point (the caller's clean-up
 * handler runs; the turn is not held then). Returns 0 with the turn, or
 * -EINTR when a signal ended the wait (with or without SA_RESTART: the
 * futex wait cannot tell; the caller decides), or -EDEADLK when this
 * thread already holds it (a signal handler inside a write).
 */
int pp_turn_take(struct pp_turn *turn);
void pp_turn_give(struct pp_turn *turn);

/* In a fork child: the threads that held turns are gone, and this thread's id changed. */
void pp_turn_forget(struct pp_turn *turn);
/* A new pipe's turn: nobody holds it, no trial yet. */
static inline void pp_turn_init(struct pp_turn *turn)
{
	*turn = (struct pp_turn){ .trial = { .choice = -1 } };
}
void pp_turn_after_fork_child(void);

#endif
