// SPDX-License-Identifier: MIT
/*
 * libppipe-passthru: interposes the pipe calls libppipe interposes and
 * forwards each to the next definition, unchanged. It is the control side
 * of a comparison: its ratios against plain pipes show the harness's noise
 * plus the cost of one interposed call, and should come out near 1.00.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/*
 * Resolves the next definition of @name once. dlsym does not call back
 * into write/read, so resolving on first use is safe; until it succeeds
 * the raw system call serves (a call from an earlier constructor).
 */
#define NEXT(type, name)                                                     \
	static type next_##name;                                             \
	static type resolve_##name(void)                                     \
	{                                                                    \
		type f = __atomic_load_n(&next_##name, __ATOMIC_ACQUIRE);    \
		if (!f) {                                                    \
			f = (type)dlsym(RTLD_NEXT, #name);                   \
			__atomic_store_n(&next_##name, f, __ATOMIC_RELEASE); \
		}                                                            \
		return f;                                                    \
	}

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*iov_fn)(int, const struct iovec *, int);
typedef int (*pipe_fn)(int[2]);
typedef int (*pipe2_fn)(int[2], int);
typedef int (*close_fn)(int);

NEXT(write_fn, write)
NEXT(read_fn, read)
NEXT(iov_fn, writev)
NEXT(iov_fn, readv)
NEXT(pipe_fn, pipe)
NEXT(pipe2_fn, pipe2)
NEXT(close_fn, close)

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	write_fn f = resolve_write();

	return f ? f(fd, buf, n) : syscall(SYS_write, fd, buf, n);
}

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	read_fn f = resolve_read();

	return f ? f(fd, buf, n) : syscall(SYS_read, fd, buf, n);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	iov_fn f = resolve_writev();

	return f ? f(fd, iov, cnt) : syscall(SYS_writev, fd, iov, cnt);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	iov_fn f = resolve_readv();

	return f ? f(fd, iov, cnt) : syscall(SYS_readv, fd, iov, cnt);
}

EXPORT int pipe(int fds[2])
{
	pipe_fn f = resolve_pipe();

	return f ? f(fds) : (int)syscall(SYS_pipe2, fds, 0);
}

EXPORT int pipe2(int fds[2], int flags)
{
	pipe2_fn f = resolve_pipe2();

	return f ? f(fds, flags) : (int)syscall(SYS_pipe2, fds, flags);
}

EXPORT int close(int fd)
{
	close_fn f = resolve_close();

	return f ? f(fd) : (int)syscall(SYS_close, fd);
}
