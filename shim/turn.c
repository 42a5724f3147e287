// SPDX-License-Identifier: MIT
/*
 * Writer turns: a futex word per pipe, the tid of the holder or 0. Taken
 * and given with one atomic each when nobody waits; a waiter sleeps on
 * the word in slices of WAIT_SLICE_NS, testing for cancellation between
 * them (a raw futex wait is not a cancellation point, and the holder may
 * sit in a blocked vmsplice() for as long as the reader pleases, during
 * which a plain write() would be cancellable). After a slice in which the
 * same holder kept the turn, the waiter asks whether that thread still
 * exists: one that exited holding it (pthread_exit() in a handler that
 * interrupted its write) would otherwise keep every writer of the pipe
 * waiting for good.
 */
#include "turn.h"

#include "config.h"
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WAIT_SLICE_NS 10000000L

static __thread long tl_tid __attribute__((tls_model("initial-exec")));

#define TURN_WINDOW_NS 10000000ull
/* A window this much longer than TURN_WINDOW_NS had the pipe idle: not counted. */
#define TURN_WINDOW_MAX_NS (4 * TURN_WINDOW_NS)
/* Turns must win by this much, in percent, to be chosen. */
#define TURN_WIN_PCT 110
/* Windows after a choice before the next trial (about two seconds of writing). */
#define TURN_REVISIT 200

bool pp_turns_on(const struct pp_turn *turn)
{
	const struct pp_turn_trial *t = &turn->trial;
	int c;

	if (pp_cfg.turns != PP_TURNS_AUTO)
		return pp_cfg.turns == PP_TURNS_ON;
	c = __atomic_load_n(&t->choice, __ATOMIC_RELAXED);
	return c >= 0 ? c != 0 : (__atomic_load_n(&t->ended, __ATOMIC_RELAXED) & 1) != 0;
}

/*
 * Two writers may end consecutive windows at once (one preempted inside
 * window_ended()): the rates are read and written with relaxed atomics.
 */
static uint64_t median3(const uint64_t *v)
{
	uint64_t a = __atomic_load_n(&v[0], __ATOMIC_RELAXED);
	uint64_t b = __atomic_load_n(&v[1], __ATOMIC_RELAXED);
	uint64_t c = __atomic_load_n(&v[2], __ATOMIC_RELAXED);

	_Static_assert(PP_TURN_WINDOWS == 3, "median3() takes three windows");
	if (a > b) {
		uint64_t x = a;

		a = b;
		b = x;
	}
	return c < a ? a : c > b ? b : c;
}

/* The window that began at @start ended at @now with @bytes written: one writer is here. */
static void window_ended(struct pp_turn *turn, uint64_t ino, uint64_t start, uint64_t now,
			 uint64_t bytes)
{
	struct pp_turn_trial *t = &turn->trial;
	uint32_t e = __atomic_load_n(&t->ended, __ATOMIC_RELAXED);
	uint64_t on, off;

	if (__atomic_load_n(&t->choice, __ATOMIC_RELAXED) >= 0) {
		if (e + 1 >= TURN_REVISIT) {
			__atomic_store_n(&t->ended, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&t->choice, -1, __ATOMIC_RELAXED);
		} else {
			__atomic_store_n(&t->ended, e + 1, __ATOMIC_RELAXED);
		}
		return;
	}
	if (now - start > TURN_WINDOW_MAX_NS)
		return; /* the pipe sat idle: the same side again */
	__atomic_store_n(&t->rate[e & 1][e / 2], bytes * 1000000 / (now - start), __ATOMIC_RELAXED);
	if (e + 1 < 2 * PP_TURN_WINDOWS) {
		__atomic_store_n(&t->ended, e + 1, __ATOMIC_RELAXED);
		return;
	}
	off = median3(t->rate[0]);
	on = median3(t->rate[1]);
	pp_debug("turns: pipe %llu: %s (%llu MB/s with turns, %llu without, medians of %d windows)",
		 (unsigned long long)ino, on * 100 > off * TURN_WIN_PCT ? "on" : "off",
		 (unsigned long long)(on / 1000), (unsigned long long)(off / 1000),
		 PP_TURN_WINDOWS);
	__atomic_store_n(&t->ended, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&t->choice, on * 100 > off * TURN_WIN_PCT, __ATOMIC_RELAXED);
}

void pp_turn_account(struct pp_turn *turn, uint64_t ino, size_t bytes, uint64_t now)
{
	struct pp_turn_trial *t = &turn->trial;
	uint64_t start;

	if (pp_cfg.turns != PP_TURNS_AUTO)
		return;
	/* Bytes are counted only in a trial: a shared counter costs every writer. */
	if (__atomic_load_n(&t->choice, __ATOMIC_RELAXED) < 0)
		__atomic_add_fetch(&t->bytes, bytes, __ATOMIC_RELAXED);
	start = __atomic_load_n(&t->start, __ATOMIC_RELAXED);
	if (start && now > start && now - start < TURN_WINDOW_NS)
		return;
	/* One writer ends the window and starts the next. */
	if (!__atomic_compare_exchange_n(&t->start, &start, now, false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return;
	bytes = __atomic_exchange_n(&t->bytes, 0, __ATOMIC_RELAXED);
	if (start && now > start)
		window_ended(turn, ino, start, now, bytes);
}

int pp_turn_take(struct pp_turn *turn)
{
	struct timespec slice = { 0, WAIT_SLICE_NS };
	int tid, cur, saved = errno;

	if (!tl_tid)
		tl_tid = pp_sys_gettid();
	tid = (int)tl_tid;
	for (;;) {
		cur = 0;
		if (__atomic_compare_exchange_n(&turn->holder, &cur, tid, false, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			errno = saved;
			return 0;
		}
		if (cur == tid)
			return -EDEADLK;
		__atomic_add_fetch(&turn->waiters, 1, __ATOMIC_SEQ_CST);
		/* Sleeps only while the word still names that holder. */
		long r =
			syscall(SYS_futex, &turn->holder, FUTEX_WAIT_PRIVATE, cur, &slice, NULL, 0);
		int err = r ? errno : 0;

		__atomic_sub_fetch(&turn->waiters, 1, __ATOMIC_SEQ_CST);
		errno = saved;
		if (err == EINTR)
			return -EINTR;
		/* A whole slice with the same holder: is it still there? */
		if (err == ETIMEDOUT && __atomic_load_n(&turn->holder, __ATOMIC_RELAXED) == cur &&
		    PP_SYSCALL(SYS_tgkill, PP_SYSCALL(SYS_getpid), cur, 0) == -ESRCH &&
		    __atomic_compare_exchange_n(&turn->holder, &cur, 0, false, __ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED))
			pp_debug("turns: the thread that held a pipe's turn exited: given back");
		pthread_testcancel();
	}
}

void pp_turn_give(struct pp_turn *turn)
{
	int saved = errno;

	__atomic_store_n(&turn->holder, 0, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&turn->waiters, __ATOMIC_SEQ_CST))
		PP_SYSCALL(SYS_futex, &turn->holder, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	errno = saved;
}

PP_COMMON void pp_turn_forget(struct pp_turn *turn)
{
	/* Written only when there is something to forget: no copy-on-write for nothing. */
	if (turn->holder)
		turn->holder = 0;
	if (turn->waiters)
		turn->waiters = 0;
	if (turn->trial.start || turn->trial.ended || turn->trial.choice != -1)
		pp_turn_init(turn);
}

PP_COMMON void pp_turn_after_fork_child(void)
{
	if (tl_tid)
		tl_tid = 0;
}
