/* SPDX-License-Identifier: MIT */
/*
 * System calls made inline, without libc: no errno touched, no PLT entry
 * to bind (a fork child binding one would write its copy of the GOT), and
 * never one of libppipe's own interposers. Every shim/ function that
 * fails returns -errno, as these do (compiler.h, "Errors").
 *
 * Layer: base (may use: base).
 */
#ifndef PP_SYSCALL_H
#define PP_SYSCALL_H

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

/* System call @n with up to six arguments: the result, or -errno. */
#if defined(__x86_64__)
static inline long pp_raw_syscall(long n, long a1, long a2, long a3, long a4, long a5, long a6)
{
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}
#elif defined(__aarch64__)
static inline long pp_raw_syscall(long n, long a1, long a2, long a3, long a4, long a5, long a6)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a1;
	register long x1 __asm__("x1") = a2;
	register long x2 __asm__("x2") = a3;
	register long x3 __asm__("x3") = a4;
	register long x4 __asm__("x4") = a5;
	register long x5 __asm__("x5") = a6;

	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}
#else
static inline long pp_raw_syscall(long n, long a1, long a2, long a3, long a4, long a5, long a6)
{
	int saved = errno;
	long r = syscall(n, a1, a2, a3, a4, a5, a6);

	if (r < 0)
		r = -errno;
	errno = saved;
	return r;
}
#endif

#define PP_SYSCALL_(n, a, b, c, d, e, f, ...) \
	pp_raw_syscall((long)(n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))
/* PP_SYSCALL(SYS_x, args...): up to six arguments; the result or -errno, errno untouched. */
#define PP_SYSCALL(...) PP_SYSCALL_(__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0)

#endif
