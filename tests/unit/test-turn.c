// SPDX-License-Identifier: MIT
/*
 * Writer turns (shim/turn.h), without a preload: a thread that exited
 * holding a pipe's turn does not keep the other writers waiting for good
 * (the next waiter finds its holder gone after a wait slice and takes the
 * turn), while a holder that is still there keeps it until it gives it.
 * The waits are loops with a generous deadline, never a speed.
 */
#include "config.h"
#include "real.h"
#include "turn.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define DEADLINE_MS 10000

static struct pp_turn turn;
static long holder_tid;
static int taken; /* the waiter has the turn (atomic) */
static int give; /* the holder may give it now (atomic) */

static void *take_and_exit(void *arg)
{
	(void)arg;
	holder_tid = syscall(SYS_gettid);
	if (pp_turn_take(&turn))
		holder_tid = 0;
	return NULL; /* exits holding the turn */
}

static void *take_hold_give(void *arg)
{
	(void)arg;
	if (pp_turn_take(&turn)) {
		fprintf(stderr, "the holder could not take the turn\n");
		exit(99);
	}
	__atomic_store_n(&holder_tid, syscall(SYS_gettid), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&give, __ATOMIC_ACQUIRE))
		usleep(1000);
	pp_turn_give(&turn);
	return NULL;
}

static void *waiter(void *arg)
{
	(void)arg;
	if (!pp_turn_take(&turn))
		__atomic_store_n(&taken, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void spawn(pthread_t *t, void *(*fn)(void *))
{
	if (pthread_create(t, NULL, fn, NULL)) {
		fprintf(stderr, "pthread_create\n");
		exit(99);
	}
}

/* Waits up to @ms for the waiter to have the turn. */
static bool waiter_has_it(int ms)
{
	for (int i = 0; i < ms && !__atomic_load_n(&taken, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	return __atomic_load_n(&taken, __ATOMIC_ACQUIRE);
}

int main(void)
{
	pthread_t h, w;

	pp_real_start();
	pp_config_defaults(&pp_cfg);
	pp_cfg.turns = PP_TURNS_ON;

	/* A holder that is there keeps the turn over several wait slices. */
	pp_turn_init(&turn);
	spawn(&h, take_hold_give);
	while (!__atomic_load_n(&holder_tid, __ATOMIC_ACQUIRE))
		usleep(1000);
	spawn(&w, waiter);
	CHECK(!waiter_has_it(50), "taken from a holder that is still there");
	__atomic_store_n(&give, 1, __ATOMIC_RELEASE);
	CHECK(waiter_has_it(DEADLINE_MS), "not taken once given");
	pthread_join(h, NULL);
	pthread_join(w, NULL);

	/* A holder that exited: the next writer takes the turn. */
	pp_turn_init(&turn);
	holder_tid = 0;
	taken = 0;
	spawn(&h, take_and_exit);
	pthread_join(h, NULL);
	CHECK(holder_tid && turn.holder == holder_tid, "the thread exited holding the turn");
	spawn(&w, waiter);
	CHECK(waiter_has_it(DEADLINE_MS), "the turn of a thread that exited is never taken");
	if (!__atomic_load_n(&taken, __ATOMIC_ACQUIRE)) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1; /* the waiter waits for good: do not join it */
	}
	pthread_join(w, NULL);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
