// SPDX-License-Identifier: MIT
/*
 * The exported stdio names. A stdio stream writes its bytes to its fd from
 * inside libc, by a system call no interposer sees. Under write-behind
 * (PPIPE_MODE=uring; docs/design.md, "Write-behind") a write() may return
 * while some of its bytes still wait in the pipe's staging pipe, and a
 * stream's bytes written after it would then reach the pipe before them.
 * So every call that may write a stream's bytes to its fd first has what
 * is staged for that fd's pipe delivered, as a small write() does
 * (fdops.h, pp_flush_write_end). Where write-behind never ran that is one
 * load and a branch, and the libc call.
 *
 * The libc definitions are looked up on first use (pp_real_next(), which
 * walks the symbol tables dlsym(RTLD_NEXT) would search), not at
 * start-up: most processes call few of them, and start-up stays as it
 * was. Calls that only touch a stream's buffer in memory (sprintf,
 * open_memstream...) and input are not here.
 *
 * Layer: interpose (may use: interpose, operations, engine, pipes, resources, base).
 */
/* Both fseeko and fseeko64 (fsetpos, fsetpos64) are defined here: no renaming by the headers. */
#undef _FILE_OFFSET_BITS

#include "compiler.h"
#include "engine.h"
#include "fdops.h"
#include "init.h"
#include "real.h"
#include "stdiowrite.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

/*
 * Every name below that stands in for libc's, and the slot of libc's
 * definition, found on first use, or before a fork (pp_stdio_bind()).
 */
#define STDIO_NAMES(X)      \
	X(fwrite)           \
	X(fwrite_unlocked)  \
	X(fputs)            \
	X(fputs_unlocked)   \
	X(puts)             \
	X(fputc)            \
	X(fputc_unlocked)   \
	X(putc)             \
	X(putc_unlocked)    \
	X(putchar)          \
	X(putchar_unlocked) \
	X(__overflow)       \
	X(perror)           \
	X(vfprintf)         \
	X(vprintf)          \
	X(vdprintf)         \
	X(__vfprintf_chk)   \
	X(__vprintf_chk)    \
	X(__vdprintf_chk)   \
	X(fputwc)           \
	X(putwc)            \
	X(putwchar)         \
	X(fputws)           \
	X(vfwprintf)        \
	X(vwprintf)         \
	X(__vfwprintf_chk)  \
	X(__vwprintf_chk)   \
	X(freopen)          \
	X(freopen64)        \
	X(fflush)           \
	X(fflush_unlocked)  \
	X(fcloseall)        \
	X(fseek)            \
	X(fseeko)           \
	X(fseeko64)         \
	X(fsetpos)          \
	X(fsetpos64)        \
	X(rewind)

enum {
#define STDIO_ENUM(name) STDIO_##name,
	STDIO_NAMES(STDIO_ENUM)
#undef STDIO_ENUM
		STDIO_COUNT
};

/* In the hot data: every program's exit flushes its streams, and binds fflush here. */
PP_HOT static void *stdio_next[STDIO_COUNT];
#define NEXT(name) stdio_next[STDIO_##name]

/*
 * Binds, in one walk of the symbol tables, every name not bound yet,
 * before a fork of a process with pipes (init.c): a fork child does not
 * map libc's symbol tables, so each name it bound itself would cost it
 * page faults there, and a copy of the page of the slots. What the walk
 * cannot settle is left to the first use, as before.
 */
void pp_stdio_bind(void)
{
	static const char names[] =
#define STDIO_STR(name) #name "\0"
		STDIO_NAMES(STDIO_STR);
#undef STDIO_STR
	static int done;
	const char *name[STDIO_COUNT], *n = names;
	void *fn[STDIO_COUNT];
	int k, left = 0, idx[STDIO_COUNT];

	/* Every fork with pipes comes here: once done, a load, not a store. */
	if (__atomic_load_n(&done, __ATOMIC_ACQUIRE) ||
	    __atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
		return;
	for (k = 0; k < STDIO_COUNT; k++, n += strlen(n) + 1) {
		if (__atomic_load_n(&stdio_next[k], __ATOMIC_ACQUIRE))
			continue;
		idx[left] = k;
		name[left++] = n;
	}
	if (!left)
		return;
	pp_real_next_many(left, name, fn);
	for (k = 0; k < left; k++) {
		void *expected = NULL;

		if (fn[k])
			__atomic_compare_exchange_n(&stdio_next[idx[k]], &expected, fn[k], false,
						    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
	}
}

/* The next definition of @name after libppipe (libc's), found once. */
static void *bind_next(void **slot, const char *name)
{
	void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (likely(fn))
		return fn;
	fn = pp_real_next(name);
	__atomic_store_n(slot, fn, __ATOMIC_RELEASE);
	return fn;
}

/* fn_, libc's @name, bound now if need be; without one (libc always has it), ENOSYS. */
#define BIND_OR_FAIL(name, fail)                                        \
	do {                                                            \
		fn_ = (__typeof__(&name))bind_next(&NEXT(name), #name); \
		if (unlikely(!fn_)) {                                   \
			errno = ENOSYS;                                 \
			return fail;                                    \
		}                                                       \
	} while (0)

/*
 * Defines the exported @name: libc's, after @pre when write-behind runs.
 * The common case (bound, write-behind never ran) is two loads and a
 * jump; the rest, out of line: @pre, and binding on first use (@fail
 * with ENOSYS if libc had no such function: it always has).
 */
#define WRAP(ret, name, params, args, fail, pre)                                           \
	static __attribute__((noinline, cold)) ret slow_##name params                      \
	{                                                                                  \
		__typeof__(&name) fn_;                                                     \
		pre;                                                                       \
		BIND_OR_FAIL(name, fail);                                                  \
		return fn_ args;                                                           \
	}                                                                                  \
	PP_COMMON PP_EXPORT ret(name) params                                               \
	{                                                                                  \
		__typeof__(&name) fn_ =                                                    \
			(__typeof__(&name))__atomic_load_n(&NEXT(name), __ATOMIC_ACQUIRE); \
		if (likely(fn_ && !pp_engine_hooks()))                                     \
			return fn_ args;                                                   \
		return slow_##name args;                                                   \
	}

/* Defines the variadic @name as its va_list form @vname, which has the same leading arguments. */
#define VARIADIC(name, params, vname, args)  \
	PP_COMMON PP_EXPORT int(name) params \
	{                                    \
		va_list ap;                  \
		int r;                       \
                                             \
		va_start(ap, fmt);           \
		r = vname args;              \
		va_end(ap);                  \
		return r;                    \
	}

/* Before a call that may write @fd: what write-behind staged for its pipe goes first. */
static inline void before_fd(int fd)
{
	if (unlikely(pp_engine_hooks()))
		pp_flush_write_end(fd);
}

static inline void before(FILE *f)
{
	if (unlikely(pp_engine_hooks()))
		pp_flush_write_end(f ? f->_fileno : -1);
}

/*
 * Before a call that writes @f only if it holds output (fflush, a seek,
 * fclose): a stream with nothing buffered waits for nobody. A wide stream
 * may hold it in its wide buffer: taken as holding some. NULL: every
 * stream.
 */
static inline void before_pending(FILE *f)
{
	if (unlikely(pp_engine_hooks()) &&
	    (!f || f->_mode > 0 || f->_IO_write_ptr > f->_IO_write_base))
		pp_flush_write_end(f ? f->_fileno : -1);
}

/* Names in parentheses: <stdio.h> makes some of them macros. */

/* ---- bytes and strings ---- */

/*
 * fwrite() and fputs(), and their _unlocked forms, carry the large writes
 * of programs that write through stdio (zstd, lz4, curl, openssl): where
 * glibc would write at least PPIPE_MIN_WRITE bytes of the call to a pipe
 * libppipe may accelerate, the call is made by stdiowrite.h, and writes by
 * libppipe's path. Elsewhere, a few loads more before libc's own.
 */
#define WRAP_WRITE(ret, name, params, args, fail, quick, len, stream, lock, done, left)    \
	static __attribute__((noinline)) ret slow_##name params                            \
	{                                                                                  \
		__typeof__(&name) fn_;                                                     \
		size_t len_ = 0;                                                           \
		ret r_;                                                                    \
                                                                                           \
		before(stream);                                                            \
		if ((len) && pp_stdio_may_take(stream, len_)) {                            \
			size_t w_ = pp_stdio_write(stream, buf_of args, len_, lock);       \
                                                                                           \
			if (w_ != PP_STDIO_LIBC)                                           \
				return done;                                               \
		}                                                                          \
		BIND_OR_FAIL(name, fail);                                                  \
		r_ = fn_ args;                                                             \
		if (unlikely(pp_cfg.watch))                                                \
			libc_wrote(stream, left);                                          \
		return r_;                                                                 \
	}                                                                                  \
	PP_COMMON PP_EXPORT ret(name) params                                               \
	{                                                                                  \
		__typeof__(&name) fn_ =                                                    \
			(__typeof__(&name))__atomic_load_n(&NEXT(name), __ATOMIC_ACQUIRE); \
		if (likely(fn_ && !pp_engine_hooks() && !(quick) &&                        \
			   !(unlikely(pp_cfg.watch) && pp_stdio_fd_may_take(stream))))     \
			return fn_ args;                                                   \
		return slow_##name args;                                                   \
	}

/*
 * Defines @name as WRAP does, and where statistics are asked for
 * (pp_cfg.watch) counts the @left bytes (an expression of the result r_)
 * that libc wrote for @stream out of sight: stdiowrite.h.
 */
#define WRAP_COUNTED(ret, name, params, args, fail, pre, stream, left)                     \
	static __attribute__((noinline, cold)) ret slow_##name params                      \
	{                                                                                  \
		__typeof__(&name) fn_;                                                     \
		ret r_;                                                                    \
		pre;                                                                       \
		BIND_OR_FAIL(name, fail);                                                  \
		r_ = fn_ args;                                                             \
		if (pp_cfg.watch)                                                          \
			libc_wrote(stream, left);                                          \
		return r_;                                                                 \
	}                                                                                  \
	PP_COMMON PP_EXPORT ret(name) params                                               \
	{                                                                                  \
		__typeof__(&name) fn_ =                                                    \
			(__typeof__(&name))__atomic_load_n(&NEXT(name), __ATOMIC_ACQUIRE); \
		if (likely(fn_ && !pp_engine_hooks() && !pp_cfg.watch))                    \
			return fn_ args;                                                   \
		return slow_##name args;                                                   \
	}

/* Bytes a call handed libc for @stream (a FILE *, or an fd for dprintf): counted, out of line. */
static __attribute__((noinline, cold)) void libc_wrote_file(FILE *f, long long n)
{
	if (f && n > 0)
		pp_libc_wrote(f->_fileno, (size_t)n);
}

static __attribute__((noinline, cold)) void libc_wrote_fd(int fd, long long n)
{
	if (n > 0)
		pp_libc_wrote(fd, (size_t)n);
}

#define libc_wrote(stream, n) \
	_Generic((stream), int : libc_wrote_fd, default : libc_wrote_file)(stream, (long long)(n))

/* The request of an fwrite(), 0 when it overflows (libc's call then says what it says). */
static inline bool fwrite_len(size_t size, size_t n, size_t *len)
{
	return !__builtin_mul_overflow(size, n, len) && *len;
}

#define buf_of(a, ...) (a)
/* fwrite() returns the items written: all of them when the bytes went into the buffer or the pipe. */
#define FWRITE_DONE (w_ == len_ || w_ == PP_STDIO_EOF ? n : w_ / size)
/* fputs() returns 1 when every byte went, else EOF. */
#define FPUTS_DONE (w_ == len_ ? 1 : EOF)

/* An overflowing size * n wraps to something libc's call then judges. */
#define FWRITE_QUICK pp_stdio_may_take(f, size *n)
/* A string's length is not known without reading it: only the fd, before the slow path. */
#define FPUTS_QUICK pp_stdio_fd_may_take(f)

WRAP_WRITE(size_t, fwrite, (const void *buf, size_t size, size_t n, FILE *f), (buf, size, n, f), 0,
	   FWRITE_QUICK, fwrite_len(size, n, &len_), f, true, FWRITE_DONE, r_ *size)
WRAP_WRITE(size_t, fwrite_unlocked, (const void *buf, size_t size, size_t n, FILE *f),
	   (buf, size, n, f), 0, FWRITE_QUICK, fwrite_len(size, n, &len_), f, false, FWRITE_DONE,
	   r_ *size)
WRAP_WRITE(int, fputs, (const char *buf, FILE *f), (buf, f), EOF, FPUTS_QUICK, (len_ = strlen(buf)),
	   f, true, FPUTS_DONE, r_ != EOF ? len_ : 0)
WRAP_WRITE(int, fputs_unlocked, (const char *buf, FILE *f), (buf, f), EOF, FPUTS_QUICK,
	   (len_ = strlen(buf)), f, false, FPUTS_DONE, r_ != EOF ? len_ : 0)
WRAP_COUNTED(int, puts, (const char *s), (s), EOF, before(stdout), stdout,
	     r_ != EOF ? strlen(s) + 1 : 0)
WRAP(int, fputc, (int c, FILE *f), (c, f), EOF, before(f))
WRAP(int, fputc_unlocked, (int c, FILE *f), (c, f), EOF, before(f))
WRAP(int, putc, (int c, FILE *f), (c, f), EOF, before(f))
WRAP(int, putc_unlocked, (int c, FILE *f), (c, f), EOF, before(f))
WRAP(int, putchar, (int c), (c), EOF, before(stdout))
WRAP(int, putchar_unlocked, (int c), (c), EOF, before(stdout))
/* Where the inline putc_unlocked of <stdio.h> goes when the buffer is full. */
WRAP(int, __overflow, (FILE * f, int c), (f, c), EOF, before(f))

PP_COMMON PP_EXPORT void(perror)(const char *s)
{
	void (*fn)(const char *) = (void (*)(const char *))bind_next(&NEXT(perror), "perror");

	before(stderr);
	if (likely(fn))
		fn(s);
}

/* ---- formatted: the variadic forms go through the va_list ones ---- */

WRAP_COUNTED(int, vfprintf, (FILE * f, const char *fmt, va_list ap), (f, fmt, ap), -1, before(f), f,
	     r_)
WRAP_COUNTED(int, vprintf, (const char *fmt, va_list ap), (fmt, ap), -1, before(stdout), stdout, r_)
WRAP_COUNTED(int, vdprintf, (int fd, const char *fmt, va_list ap), (fd, fmt, ap), -1, before_fd(fd),
	     fd, r_)

VARIADIC(fprintf, (FILE * f, const char *fmt, ...), vfprintf, (f, fmt, ap))
VARIADIC(printf, (const char *fmt, ...), vprintf, (fmt, ap))
VARIADIC(dprintf, (int fd, const char *fmt, ...), vdprintf, (fd, fmt, ap))

/* The _FORTIFY_SOURCE forms, which programs built with it call instead. */
int __vfprintf_chk(FILE *f, int flag, const char *fmt, va_list ap);
int __vprintf_chk(int flag, const char *fmt, va_list ap);
int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap);
int __fprintf_chk(FILE *f, int flag, const char *fmt, ...);
int __printf_chk(int flag, const char *fmt, ...);
int __dprintf_chk(int fd, int flag, const char *fmt, ...);

WRAP_COUNTED(int, __vfprintf_chk, (FILE * f, int flag, const char *fmt, va_list ap),
	     (f, flag, fmt, ap), -1, before(f), f, r_)
WRAP_COUNTED(int, __vprintf_chk, (int flag, const char *fmt, va_list ap), (flag, fmt, ap), -1,
	     before(stdout), stdout, r_)
WRAP_COUNTED(int, __vdprintf_chk, (int fd, int flag, const char *fmt, va_list ap),
	     (fd, flag, fmt, ap), -1, before_fd(fd), fd, r_)

VARIADIC(__fprintf_chk, (FILE * f, int flag, const char *fmt, ...), __vfprintf_chk,
	 (f, flag, fmt, ap))
VARIADIC(__printf_chk, (int flag, const char *fmt, ...), __vprintf_chk, (flag, fmt, ap))
VARIADIC(__dprintf_chk, (int fd, int flag, const char *fmt, ...), __vdprintf_chk,
	 (fd, flag, fmt, ap))

/* ---- wide characters ---- */

WRAP(wint_t, fputwc, (wchar_t c, FILE *f), (c, f), WEOF, before(f))
WRAP(wint_t, putwc, (wchar_t c, FILE *f), (c, f), WEOF, before(f))
WRAP(wint_t, putwchar, (wchar_t c), (c), WEOF, before(stdout))
WRAP(int, fputws, (const wchar_t *s, FILE *f), (s, f), -1, before(f))
WRAP(int, vfwprintf, (FILE * f, const wchar_t *fmt, va_list ap), (f, fmt, ap), -1, before(f))
WRAP(int, vwprintf, (const wchar_t *fmt, va_list ap), (fmt, ap), -1, before(stdout))

VARIADIC(fwprintf, (FILE * f, const wchar_t *fmt, ...), vfwprintf, (f, fmt, ap))
VARIADIC(wprintf, (const wchar_t *fmt, ...), vwprintf, (fmt, ap))

int __vfwprintf_chk(FILE *f, int flag, const wchar_t *fmt, va_list ap);
int __vwprintf_chk(int flag, const wchar_t *fmt, va_list ap);
int __fwprintf_chk(FILE *f, int flag, const wchar_t *fmt, ...);
int __wprintf_chk(int flag, const wchar_t *fmt, ...);

WRAP(int, __vfwprintf_chk, (FILE * f, int flag, const wchar_t *fmt, va_list ap), (f, flag, fmt, ap),
     -1, before(f))
WRAP(int, __vwprintf_chk, (int flag, const wchar_t *fmt, va_list ap), (flag, fmt, ap), -1,
     before(stdout))
VARIADIC(__fwprintf_chk, (FILE * f, int flag, const wchar_t *fmt, ...), __vfwprintf_chk,
	 (f, flag, fmt, ap))
VARIADIC(__wprintf_chk, (int flag, const wchar_t *fmt, ...), __vwprintf_chk, (flag, fmt, ap))

/* ---- flushes: fflush, and the seeks, which flush first ---- */

/* fclose() writes what the stream holds, then closes the fd (fdops.h). */
PP_COMMON PP_EXPORT int(fclose)(FILE *f)
{
	if (f)
		before_pending(f);
	return pp_fclose(f);
}

/*
 * freopen() writes what the stream holds, then closes its fd inside libc
 * and puts the new file at that number: as fclose(), libppipe forgets the
 * fd first. Else a large write to the new file would go out from the old
 * pipe's ring, and be found a switch behind libppipe's back when the
 * pipe's other ends write next: the pipe would lose its acceleration.
 */
static FILE *reopen(void **next, const char *name, const char *path, const char *mode, FILE *f)
{
	FILE *(*fn)(const char *, const char *, FILE *) =
		(FILE * (*)(const char *, const char *, FILE *)) bind_next(next, name);

	if (f) {
		before_pending(f);
		pp_stream_closing(f);
	}
	if (unlikely(!fn)) {
		errno = ENOSYS;
		return NULL;
	}
	return fn(path, mode, f);
}

PP_COMMON PP_EXPORT FILE *(freopen)(const char *path, const char *mode, FILE *f)
{
	return reopen(&NEXT(freopen), "freopen", path, mode, f);
}

PP_COMMON PP_EXPORT FILE *(freopen64)(const char *path, const char *mode, FILE *f)
{
	return reopen(&NEXT(freopen64), "freopen64", path, mode, f);
}

WRAP(int, fflush, (FILE * f), (f), EOF, before_pending(f))
WRAP(int, fflush_unlocked, (FILE * f), (f), EOF, before_pending(f))
WRAP(int, fcloseall, (void), (), EOF, before_pending(NULL))
WRAP(int, fseek, (FILE * f, long off, int whence), (f, off, whence), -1, before_pending(f))
WRAP(int, fseeko, (FILE * f, off_t off, int whence), (f, off, whence), -1, before_pending(f))
WRAP(int, fseeko64, (FILE * f, off64_t off, int whence), (f, off, whence), -1, before_pending(f))
WRAP(int, fsetpos, (FILE * f, const fpos_t *pos), (f, pos), -1, before_pending(f))
WRAP(int, fsetpos64, (FILE * f, const fpos64_t *pos), (f, pos), -1, before_pending(f))

PP_COMMON PP_EXPORT void(rewind)(FILE *f)
{
	void (*fn)(FILE *) = (void (*)(FILE *))bind_next(&NEXT(rewind), "rewind");

	before_pending(f);
	if (likely(fn))
		fn(f);
}
