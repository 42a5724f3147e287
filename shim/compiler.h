/* SPDX-License-Identifier: MIT */
/*
 * Small compiler helpers shared by every shim file, and the conventions
 * they all keep.
 *
 * Errors: a shim function that can fail returns a negative errno value
 * (-EINVAL, -ENOMEM...), as the kernel's system calls and liburing do, and
 * 0 or a non-negative result (a count, an fd, an index) on success; it
 * never sets errno, which is the application's. Functions that answer a
 * question return bool, lookups return NULL for "none". The one value
 * outside the errno range is the engine's PP_DECLINE (engine.h): nothing
 * was written, make the real call. Only the exported functions (the libc
 * names in interpose.c, the API of ppipe.h) speak libc's -1 and errno.
 *
 * Layer: base (may use: base).
 */
#ifndef PP_COMPILER_H
#define PP_COMPILER_H

#define PP_EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define PP_PRINTF(f, a) __attribute__((format(printf, f, a)))

/*
 * State every process reads on its way through write(), fork, exec and
 * exit, kept together in one section: the page that loading writes anyway
 * (the options, and the dynamic loader zeroes the start of .bss there), so
 * that a fork child reads it without a page fault and writes all of it
 * with one. What a fork child or a program that just started writes
 * belongs here too. The section must stay on that one page (the test
 * hot-page checks it, and prints what is left).
 */
#define PP_HOT __attribute__((section("pp_hot")))

/*
 * Code on those paths (start-up, write below the threshold, close, dup,
 * pipe, fork, exec, exit), kept together in .text.hot: a fork child maps
 * none of the library's code pages (file pages are not copied at fork),
 * so each page it runs code from is a page fault. Kept to a few pages.
 */
#define PP_COMMON __attribute__((section(".text.hot.ppipe")))
/* Code that runs once, at start-up: together too, and apart from the rest. */
#define PP_START __attribute__((section(".text.startup.ppipe")))
/*
 * Constants only start-up code reads, on its pages (read-only: the linker
 * puts them into .text, beside that code), not on a page of their own.
 */
#define PP_START_DATA __attribute__((section(".text.startup.ppipe_data")))

/* A spin-wait's pause: lets the other hyperthread run, and saves power. */
static inline void pp_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#endif
