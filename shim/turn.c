// SPDX-License-Identifier: MIT
/*
 * Writer turns: a futex word per pipe, the tid of the holder or 0. Taken
 * and given with one atomic each when nobody waits; a waiter sleeps on
 * the word in slices of WAIT_SLICE_NS, testing for cancellation between
 * them (a raw futex wait is not a cancellation point, and the holder may
 * sit in a blocked vmsplice() for as long as the reader pleases, during
 * which a plain write() would be cancellable).
 */
#include "turn.h"

#include "config.h"
#include "pipe.h"
#include "sys.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WAIT_SLICE_NS 10000000L

static __thread long tl_tid __attribute__((tls_model("initial-exec")));

bool pp_turns_on(void)
{
	return pp_cfg.turns != PP_TURNS_OFF;
}

int pp_turn_take(struct pp_pipe *p)
{
	struct timespec slice = { 0, WAIT_SLICE_NS };
	int tid, cur, saved = errno;

	if (!tl_tid)
		tl_tid = pp_sys_gettid();
	tid = (int)tl_tid;
	for (;;) {
		cur = 0;
		if (__atomic_compare_exchange_n(&p->turn, &cur, tid, false, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			errno = saved;
			return 0;
		}
		if (cur == tid)
			return -EDEADLK;
		__atomic_add_fetch(&p->turn_waiters, 1, __ATOMIC_SEQ_CST);
		/* Sleeps only while the word still names that holder. */
		long r = syscall(SYS_futex, &p->turn, FUTEX_WAIT_PRIVATE, cur, &slice, NULL, 0);
		int err = r ? errno : 0;

		__atomic_sub_fetch(&p->turn_waiters, 1, __ATOMIC_SEQ_CST);
		errno = saved;
		if (err == EINTR)
			return -EINTR;
		pthread_testcancel();
	}
}

void pp_turn_give(struct pp_pipe *p)
{
	int saved = errno;

	__atomic_store_n(&p->turn, 0, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&p->turn_waiters, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &p->turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	errno = saved;
}

void pp_turn_forget(struct pp_pipe *p)
{
	p->turn = 0;
	p->turn_waiters = 0;
}

void pp_turn_after_fork_child(void)
{
	tl_tid = 0;
}
