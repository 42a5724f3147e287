/* SPDX-License-Identifier: MIT */
/*
 * Copying from a caller's buffer without crashing on a bad one. The
 * kernel answers write() from a bad buffer with EFAULT (or a short
 * count); a plain memcpy would kill the process instead. libppipe keeps
 * a SIGSEGV/SIGBUS handler installed that turns a fault inside its own
 * copy into an error return, and hands every other fault to the
 * application's handler (or the default action) exactly as if libppipe
 * were not there. sigaction() and signal() are interposed for these two
 * signals so the application's handlers are recorded, not installed over
 * ours (once ours are in place: they are installed at the first
 * accelerated write, not at load); a process that installs handlers with the raw system call
 * bypasses this, and then a bad buffer crashes it as memcpy would.
 *
 * Layer: resources (may use: resources, base).
 */
#ifndef PP_FAULTGUARD_H
#define PP_FAULTGUARD_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Looks up libc's sigaction (constructor: no system call). */
void pp_faultguard_bind(void);
/*
 * True once the handlers are in place; the first call (the first
 * accelerated write) installs them. Async-signal-safe; false while
 * another thread installs them, or if they cannot be installed.
 */
bool pp_faultguard_ready(void);

/*
 * Copies @len bytes of the iovec walk (@idx, @off) to @dst. Returns 0, or
 * -EFAULT if the source faulted (the walk position is then unspecified).
 */
int pp_copy_guarded(char *dst, const struct iovec *iov, int *idx, size_t *off, size_t len);
/* The same copy without the guard (the source was checked another way). */
void pp_copy_iov(char *dst, const struct iovec *iov, int *idx, size_t *off, size_t len);

/*
 * Reading what a caller hands a system call (an iovec array, a message
 * header, an exec's path and environment), which the kernel answers with
 * EFAULT when it cannot be read, where a plain read would kill the process.
 *
 * pp_user_bad(): whether [@p, @p + @len) is memory this process cannot
 * read: the first page (below any vm.mmap_min_addr), wrapping, or, above
 * PP_USER_COMMON_TOP, a page no mapping covers. Check every pointer with
 * it before following it. Callers skip their bookkeeping for what it
 * calls bad (the kernel fails the call with EFAULT), so it must never call
 * a readable range bad: above the common top, where 5-level paging and
 * 52-bit address spaces put the mappings a process asks for, the kernel
 * is asked (pp_user_unmapped: one mincore() per 64 pages); below it, the
 * answer costs two comparisons.
 *
 * pp_user_guarded(): runs @fn(@arg), which must only read the caller's
 * memory and write its own @arg, and returns 0, or -EFAULT if a read in
 * it faulted (it stops there). Guarded where the handlers are already in
 * place; it never installs them (they come with the first accelerated
 * write: a process without one keeps its signal dispositions and makes no
 * system call for this). Without them @fn runs unguarded, and only
 * pp_user_bad()'s checks stand between a bad pointer and a crash.
 * Async-signal-safe, and nests (a signal handler's call inside another).
 */
#if UINTPTR_MAX > 0xffffffffu && defined(__aarch64__)
/* aarch64 maps the stack and mmap() just below 2^48 by default. */
#define PP_USER_COMMON_TOP (1ull << 48)
#elif UINTPTR_MAX > 0xffffffffu
/* Where x86-64 (and riscv64 at most) maps everything a process does not ask higher for. */
#define PP_USER_COMMON_TOP 0x00007ffffffff000ull
#else
#define PP_USER_COMMON_TOP UINTPTR_MAX
#endif

/* Whether a page of [@a, @a + @len) is mapped by nothing (asked of the kernel). */
bool pp_user_unmapped(uintptr_t a, size_t len);

static inline bool pp_user_bad(const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p;

	if (a < 4096 || a + len < a)
		return true;
	return __builtin_expect(a + len > PP_USER_COMMON_TOP, 0) && pp_user_unmapped(a, len);
}

int pp_user_guarded(void (*fn)(void *), void *arg);

int pp_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/*
 * Whether the application has a signal handler that runs without
 * SA_RESTART (as installed through sigaction() or signal(): the raw
 * system call is not seen). A system call blocked on a full pipe fails
 * with EINTR when such a handler runs; with SA_RESTART it goes on.
 */
bool pp_signals_interrupt(void);
__sighandler_t pp_signal(int sig, __sighandler_t handler);

#endif
