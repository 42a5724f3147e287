/* SPDX-License-Identifier: MIT */
/*
 * Read-modify-writes on memory no other process sees (pipe objects, the fd
 * table, the process's totals): a locked atomic instruction while other
 * threads may run, and the same instruction without the lock prefix while
 * this thread is the process's only one (glibc's __libc_single_threaded,
 * what glibc itself skips its own locks by). Then only a signal handler of
 * this thread can come in between, and it runs between two instructions,
 * never in the middle of one: what is atomic for another thread is atomic
 * for it. A locked instruction is a full barrier that waits until every
 * store before it has left the core, several times the cost of the rest of
 * a pipe()'s or a close()'s bookkeeping here; most processes (shells,
 * coreutils, build tools) never start a thread.
 *
 * The memory orders of the locked forms are the callers'; alone, program
 * order is the only order there is (the asm is a compiler barrier). Memory
 * shared with other processes (the registry) never comes here. A thread
 * made behind libc's back (a raw clone()) is not seen: glibc's own
 * unlocked paths are then wrong as well.
 *
 * Layer: base (may use: base).
 */
#ifndef PP_SOLO_H
#define PP_SOLO_H

#include "compiler.h"

#include <stdbool.h>

#if defined(__x86_64__) && defined(__GLIBC__) && __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define PP_SOLO 1
/* This thread is the process's only one (it stays so while it runs: only it can start another). */
static inline bool pp_solo(void)
{
	return __atomic_load_n(&__libc_single_threaded, __ATOMIC_RELAXED);
}
#else
#define PP_SOLO 0
static inline bool pp_solo(void)
{
	return false;
}
#endif

#if PP_SOLO
/* The old value of *@p, having added @v (4- and 8-byte integers). */
#define pp_solo_fetch_add(p, v, order)                                   \
	__extension__({                                                  \
		__typeof__(*(p)) pp_v_ = (__typeof__(*(p)))(v);          \
		if (pp_solo())                                           \
			__asm__ __volatile__("xadd %0, %1"               \
					     : "+r"(pp_v_), "+m"(*(p))   \
					     :                           \
					     : "memory");                \
		else                                                     \
			pp_v_ = __atomic_fetch_add((p), pp_v_, (order)); \
		pp_v_;                                                   \
	})
/*
 * *@p = @desired if it is *@expected (true), else *@expected = *@p (false),
 * as __atomic_compare_exchange_n (strong).
 */
#define pp_solo_cas(p, expected, desired, success, failure)                                 \
	__extension__({                                                                     \
		bool pp_ok_;                                                                \
		__typeof__(*(p)) pp_d_ = (__typeof__(*(p)))(desired);                       \
		if (pp_solo()) {                                                            \
			__typeof__(*(p)) pp_e_ = *(expected);                               \
			__asm__ __volatile__("cmpxchg %3, %1"                               \
					     : "=@ccz"(pp_ok_), "+m"(*(p)), "+a"(pp_e_)     \
					     : "r"(pp_d_)                                   \
					     : "memory");                                   \
			if (!pp_ok_)                                                        \
				*(expected) = pp_e_;                                        \
		} else {                                                                    \
			pp_ok_ = __atomic_compare_exchange_n((p), (expected), pp_d_, false, \
							     (success), (failure));         \
		}                                                                           \
		pp_ok_;                                                                     \
	})
#else
#define pp_solo_fetch_add(p, v, order) __atomic_fetch_add((p), (v), (order))
#define pp_solo_cas(p, expected, desired, success, failure) \
	__atomic_compare_exchange_n((p), (expected), (desired), false, (success), (failure))
#endif

#define pp_solo_add_fetch(p, v, order) (pp_solo_fetch_add((p), (v), (order)) + (v))
#define pp_solo_sub_fetch(p, v, order) (pp_solo_fetch_add((p), -(v), (order)) - (v))

#endif
