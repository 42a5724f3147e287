/* SPDX-License-Identifier: MIT */
/*
 * Raw system calls the engine uses internally. They bypass libc (and so
 * the shim's own interposers), never touch errno, and return -errno.
 */
#ifndef PP_SYS_H
#define PP_SYS_H

#include "fault.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/*
 * A system call made inline: no call into libc (no PLT entry to bind in a
 * fork child, which would write the child's copy of our GOT), no errno.
 * Returns the result, or -errno.
 */
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

static inline long pp_sys_fcntl(int fd, int cmd, unsigned long arg)
{
	return PP_SYSCALL(SYS_fcntl, fd, cmd, arg);
}

static inline long pp_sys_vmsplice(int fd, const struct iovec *iov, size_t n, unsigned int flags)
{
	int f = pp_fault(PP_FAULT_VMSPLICE);

	if (f)
		return f;
	return PP_SYSCALL(SYS_vmsplice, fd, iov, n, flags);
}

static inline long pp_sys_ioctl(int fd, unsigned long req, void *arg)
{
	return PP_SYSCALL(SYS_ioctl, fd, req, arg);
}

static inline long pp_sys_madvise(void *addr, size_t len, int advice)
{
	return PP_SYSCALL(SYS_madvise, addr, len, advice);
}

static inline long pp_sys_close(int fd)
{
	return PP_SYSCALL(SYS_close, fd);
}

static inline long pp_sys_gettid(void)
{
	return PP_SYSCALL(SYS_gettid);
}

/* Writes @v in decimal and a NUL to @out (at least 21 bytes). */
static inline void pp_utoa(unsigned long v, char *out)
{
	char tmp[21];
	int n = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while (v /= 10);
	while (n)
		*out++ = tmp[--n];
	*out = 0;
}

/*
 * String helpers for the paths a fork child takes (exec): written out
 * here, so that they call nothing in libc (a first call through the PLT
 * in a fork child binds it there, writing a page of the child's GOT).
 */

/* Whether @s starts with @prefix. */
static inline bool pp_has_prefix(const char *s, const char *prefix)
{
	while (*prefix)
		if (*s++ != *prefix++)
			return false;
	return true;
}

/* The part of @path after its last '/'. */
static inline const char *pp_base_name(const char *path)
{
	const char *b = path;

	for (; path && *path; path++)
		if (*path == '/')
			b = path + 1;
	return b ? b : "";
}

/* Copies @src's first 15 bytes into @dst[16], NUL-padded (a kernel command name). */
static inline void pp_comm_copy(char dst[16], const char *src)
{
	int i = 0;

	for (; i < 15 && src[i]; i++)
		dst[i] = src[i];
	for (; i < 16; i++)
		dst[i] = 0;
}

static inline bool pp_comm_equal(const char a[16], const char b[16])
{
	for (int i = 0; i < 16; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* CLOCK_MONOTONIC in ns, by the system call (the vDSO's data page faults in a fork child). */
static inline uint64_t pp_mono_ns(void)
{
	struct {
		long sec, nsec;
	} ts = { 0, 0 };

	PP_SYSCALL(SYS_clock_gettime, 1 /* CLOCK_MONOTONIC */, &ts);
	return (uint64_t)ts.sec * 1000000000ull + (uint64_t)ts.nsec;
}

/* Inode of @fd if it is a pipe or FIFO; -EBADFD when it is not. */
long pp_sys_pipe_ino(int fd, uint64_t *ino);

#endif
