/* SPDX-License-Identifier: MIT */
/*
 * Raw system calls the engine uses internally. They bypass libc (and so
 * the shim's own interposers), never touch errno, and return -errno.
 *
 * Layer: base (may use: base).
 */
#ifndef PP_SYS_H
#define PP_SYS_H

#include "fault.h"
#include "syscall.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

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
static inline __attribute__((always_inline)) bool pp_has_prefix_n(const char *s, const char *prefix,
								  size_t n)
{
#pragma GCC unroll 32
	for (size_t i = 0; i < n; i++)
		if (s[i] != prefix[i])
			return false;
	return true;
}
/*
 * Whether @s starts with the string literal @prefix, which is compared as
 * immediates and never read: it would be on a page of constants that a
 * fork child or a program that just started otherwise never touches, a
 * page fault of its own.
 */
#define pp_has_prefix(s, prefix) pp_has_prefix_n((s), "" prefix, sizeof(prefix) - 1)

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

/* CLOCK_MONOTONIC in ns, through the vDSO: the writers' clock. */
static inline uint64_t pp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

/*
 * A duplicate of @fd for libppipe's own use, numbered from the base the
 * fd table chose (pp_sys_spare_fds_from: the upper half of the soft fd
 * limit, at most from 512), out of the way of the numbers the program
 * uses. Returns the new fd or -errno.
 */
long pp_sys_dup_spare(int fd, bool cloexec);
void pp_sys_spare_fds_from(int base);

/*
 * A close-on-exec duplicate of @fd held for the length of one call (a
 * write's hold on its file), which must not make the kernel grow the
 * process's fd table: growing a table that threads share waits for an RCU
 * grace period (12 ms here, at the first such write of a threaded zstd).
 * In a process with one thread, or once the table has grown to the spare
 * range, it is pp_sys_dup_spare()'s; else it is numbered from 63, the
 * last fd of the 64 every process's table starts with. Returns the new fd
 * or -errno.
 */
long pp_sys_dup_brief(int fd);

/* Inode of @fd if it is a pipe or FIFO; -EBADFD when it is not. */
long pp_sys_pipe_ino(int fd, uint64_t *ino);
/*
 * Whether @fd is a pipe made by pipe() (its inode lives in pipefs) rather
 * than a FIFO, whose inode number is its file system's and may equal an
 * anonymous pipe's: only the former can be a pipe libppipe created or was
 * handed through exec. One fstatfs(); false when it fails.
 */
bool pp_sys_anon_pipe(int fd);

/*
 * What an open file whose F_GETFL is @fl (>= 0) lets a system call do: a
 * write(), and so vmsplice() into the pipe, needs one open for writing
 * (O_WRONLY, O_RDWR: the kernel's FMODE_WRITE); vmsplice() on any other
 * end moves bytes out of the pipe instead. A read(), splice() or tee()
 * out of it needs one open for reading (O_RDONLY, O_RDWR). An O_PATH
 * file allows neither (its access bits read as O_RDONLY), nor an fd
 * F_GETFL failed for (@fl < 0).
 */
static inline bool pp_file_writable(long fl)
{
	return fl >= 0 && !(fl & O_PATH) &&
	       ((fl & O_ACCMODE) == O_WRONLY || (fl & O_ACCMODE) == O_RDWR);
}
static inline bool pp_file_readable(long fl)
{
	return fl >= 0 && !(fl & O_PATH) &&
	       ((fl & O_ACCMODE) == O_RDONLY || (fl & O_ACCMODE) == O_RDWR);
}

/*
 * A file that is whole before it has a name: pp_sys_tmpfile_for() opens
 * an unnamed file (O_TMPFILE, mode 0644 less the umask, open @flags such
 * as O_RDWR | O_CLOEXEC) in the directory of @path, which it cuts at its
 * last '/' for the call and then mends; the caller writes it, then
 * pp_sys_link_tmpfile() gives it the name @path (through /proc/self/fd,
 * else AT_EMPTY_PATH). An unnamed file whose process dies goes with its
 * fd. -EOPNOTSUPP or -EISDIR: no O_TMPFILE on that file system; -EEXIST:
 * the name is taken.
 */
long pp_sys_tmpfile_for(char *path, int flags);
long pp_sys_link_tmpfile(int fd, const char *path);

#endif
