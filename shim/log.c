// SPDX-License-Identifier: MIT
/*
 * Messages on stderr. Each one is formatted into a stack buffer and leaves
 * with a single raw write system call: write(2) itself is interposed by
 * libppipe, and a message must never re-enter the shim, allocate, or touch
 * stdio (it may be printed from a constructor, before libc is fully set up).
 *
 * Messages are also printed from signal handlers (a handler's write may
 * be the first of a pipe, or fall back: PPIPE_DEBUG says so). That holds
 * because every format here uses only string and integer conversions,
 * without widths or precisions taken from arguments, positional arguments
 * or floating point: for those glibc's vsnprintf() writes into the given
 * buffer, takes no lock and allocates nothing (its "AS-Unsafe heap" mark
 * is for the work buffers of the other cases). Keep new messages so.
 */
#include "compiler.h"
#include "log.h"

#include "syscall.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* One message: prefix, text, newline. Longer messages are cut with "...". */
#define PP_LOG_MAX 1024

/* PPIPE_DEBUG, as the options set it (pp_log_set_debug); log.h's pp_debug() reads it. */
PP_HOT bool pp_log_debug_on;

/* At start-up: with the start-up code. */
PP_START void pp_log_set_debug(bool on)
{
	__atomic_store_n(&pp_log_debug_on, on, __ATOMIC_RELAXED);
}

void pp_log_raw(int fd, const char *buf, size_t len)
{
	int saved = errno;

	while (len) {
		long n = PP_SYSCALL(SYS_write, fd, buf, len);

		if (n == -EINTR)
			continue;
		if (n <= 0)
			break;
		buf += n;
		len -= (size_t)n;
	}
	errno = saved;
}

const char *pp_strerror(int err)
{
	const char *s = NULL;

#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 32)
	s = strerrordesc_np(err);
#else
	(void)err;
#endif
	return s ? s : "unknown error";
}

PP_PRINTF(1, 0) static void pp_vlog(const char *fmt, va_list ap)
{
	char buf[PP_LOG_MAX];
	size_t len, max = sizeof(buf) - 1; /* room for the newline */
	int n;

	n = snprintf(buf, sizeof(buf), "libppipe[%ld]: ", PP_SYSCALL(SYS_getpid));
	if (n < 0)
		n = 0;
	len = (size_t)n;
	n = vsnprintf(buf + len, max - len, fmt, ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= max - len) {
		/* vsnprintf kept max - len - 1 bytes; mark the cut. */
		len = max - 4;
		buf[len++] = '.';
		buf[len++] = '.';
		buf[len++] = '.';
	} else {
		len += (size_t)n;
	}
	/* Exactly one line: no trailing newlines of the caller, none inside. */
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	for (size_t i = 0; i < len; i++)
		if (buf[i] == '\n' || buf[i] == '\r')
			buf[i] = ' ';
	buf[len++] = '\n';
	pp_log_raw(2, buf, len);
}

void pp_warn(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	pp_vlog(fmt, ap);
	va_end(ap);
	errno = saved;
}

void pp_debug_print(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	if (!__atomic_load_n(&pp_log_debug_on, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	pp_vlog(fmt, ap);
	va_end(ap);
	errno = saved;
}

void pp_debug_once_print(int *once, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	if (!__atomic_load_n(&pp_log_debug_on, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	pp_vlog(fmt, ap);
	va_end(ap);
	errno = saved;
}
