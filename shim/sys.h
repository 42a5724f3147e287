/* SPDX-License-Identifier: MIT */
/*
 * Raw system calls the engine uses internally. They bypass libc (and so
 * the shim's own interposers), never touch errno, and return -errno.
 */
#ifndef PP_SYS_H
#define PP_SYS_H

#include "fault.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define PP_SYSCALL(...)                         \
	({                                      \
		int saved_errno_ = errno;       \
		long r_ = syscall(__VA_ARGS__); \
		if (r_ < 0)                     \
			r_ = -errno;            \
		errno = saved_errno_;           \
		r_;                             \
	})

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

/* Inode of @fd if it is a pipe or FIFO; -EBADFD when it is not. */
long pp_sys_pipe_ino(int fd, uint64_t *ino);

#endif
