/* SPDX-License-Identifier: MIT */
/*
 * A stdio stream's large writes. fwrite() and fputs() write a stream's fd
 * from inside libc, where no interposer sees them (zstd, lz4, curl and
 * openssl write their output that way). For a stream whose fd is a pipe
 * libppipe may accelerate, the call is made here instead, as glibc's
 * _IO_new_file_xsputn() makes it, step for step, except that the bytes
 * it writes to the fd (the buffer's, then the whole blocks it writes
 * directly) go out through libppipe's write path (writepath.h) in one
 * writev(). Everything else a program can see stays glibc's: what the
 * call returns, the buffer it leaves, the error indicator and errno, the
 * stream's lock (taken as fwrite() takes it; not by the _unlocked forms).
 *
 * Only streams glibc's own file operations write, byte-oriented, fully
 * buffered or unbuffered, with no column tracking and not opened "c" (no
 * cancellation), are taken; and only once a check of glibc's FILE (the
 * fields and flag bits used here, on streams made for the check) has
 * passed, at the first stream that would be taken. Anything else is
 * libc's call, untouched: line-buffered and wide streams, fopencookie()
 * and memory streams, popen()'s, another libc, and every stream under
 * write-behind (PPIPE_MODE=uring), whose counts at EPIPE and at a signal
 * differ from a plain pipe's by design.
 *
 * Layer: operations (may use: operations, engine, pipes, resources, base).
 */
#ifndef PP_STDIOWRITE_H
#define PP_STDIOWRITE_H

#include "compiler.h"
#include "writepath.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* pp_stdio_write() did nothing: the caller makes libc's call. */
#define PP_STDIO_LIBC ((size_t)-2)
/* pp_stdio_write() wrote nothing of the request's own but could not flush the buffer. */
#define PP_STDIO_EOF ((size_t)-1)

/*
 * Whether a write to @f may be one for pp_stdio_write(): its fd is a pipe
 * libppipe may accelerate (pp_write_may_matter); and for @n bytes, that
 * glibc would write at least PPIPE_MIN_WRITE of them to it in this call
 * (what the buffer holds and what does not fit). A few loads of the
 * stream's public fields and the fd's entry; no call, no lock.
 */
/*
 * Whether a write of @n bytes to @f may be one for pp_stdio_write(): the
 * stream's fd is a pipe libppipe may accelerate (pp_write_may_matter),
 * and glibc would write at least PPIPE_MIN_WRITE bytes to it in this call
 * (what the buffer holds and what does not fit). A few loads of the
 * stream's public fields and the fd's entry; no call, no lock.
 */
static inline bool pp_stdio_fd_may_take(const FILE *f)
{
	return f && pp_write_may_matter(f->_fileno);
}

static inline bool pp_stdio_may_take(const FILE *f, size_t n)
{
	if (!pp_stdio_fd_may_take(f))
		return false;
	if (f->_IO_write_ptr && f->_IO_write_end - f->_IO_write_ptr >= (ptrdiff_t)n)
		return false; /* it fits: libc only copies it */
	return n + (size_t)(f->_IO_write_ptr - f->_IO_write_base) >= pp_cfg.min_write;
}

/*
 * Writes @n bytes (n > 0) of @buf to @f as glibc's xsputn would, taking
 * the stream's lock first if @lock (fwrite(), fputs(); not their
 * _unlocked forms, nor a stream set FSETLOCKING_BYCALLER). Returns what
 * xsputn returns (bytes taken, or PP_STDIO_EOF), or PP_STDIO_LIBC when
 * the stream is not one libppipe takes: nothing was done, and the caller
 * makes libc's call.
 */
size_t pp_stdio_write(FILE *f, const void *buf, size_t n, bool lock);

/*
 * A stdio call handed @n bytes for @fd to libc, which writes them out of
 * libppipe's sight (below PPIPE_MIN_WRITE, a stream libppipe does not
 * take, printf...). Where @fd is a write end of a pipe libppipe tracks
 * (or learns: fdlearn.h), they are counted (bytes_stdio) and, with
 * PPIPE_DEBUG, said once per pipe: the statistics do not call a pipe
 * plain and empty that stdio wrote into. Only when pp_cfg.watch (the
 * wrappers' check): its cost is the fd's lookup.
 */
void pp_libc_wrote(int fd, size_t n);

#endif
