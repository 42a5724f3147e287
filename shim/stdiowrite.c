// SPDX-License-Identifier: MIT
/*
 * glibc's fwrite() path (libio/iofwrite.c, fileops.c: _IO_new_file_xsputn,
 * new_do_write, _IO_new_file_write, genops.c: _IO_default_xsputn), made
 * here for the streams stdiowrite.h describes. Its fields are those of
 * struct _IO_FILE, which <stdio.h> publishes; the flag bits below are
 * libio's own, no longer installed, so they are checked before first use
 * (layout_ok), on streams made for the check, and never guessed.
 * _vtable_offset is not read: only the ABIs of glibc 2.0 use it, and
 * elsewhere glibc never sets it (a stream on the heap has garbage there).
 */
#include "stdiowrite.h"

#include "engine.h"
#include "log.h"
#include "once.h"
#include "real.h"
#include "ring.h"
#include "sys.h"
#include "vfork.h"

#include <errno.h>
#include <pthread.h>
#include <stdio_ext.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

/* libio.h's flag bits (_flags, _flags2) this file reads or sets. */
#define IO_UNBUFFERED 0x0002
#define IO_NO_WRITES 0x0008
#define IO_ERR_SEEN 0x0020 /* <stdio.h>'s _IO_ERR_SEEN */
#define IO_LINE_BUF 0x0200
#define IO_CURRENTLY_PUTTING 0x0800
#define IO_IS_APPENDING 0x1000
#define IO_USER_LOCK 0x8000 /* <stdio.h>'s _IO_USER_LOCK */
#define IO2_NOTCANCEL 2
#define IO_POS_BAD ((__off64_t)-1)

_Static_assert(IO_ERR_SEEN == _IO_ERR_SEEN && IO_USER_LOCK == _IO_USER_LOCK,
	       "the public flag bits are libio's");

/* libc's own calls (the probe and the steps): never back through libppipe's exports. */
static struct {
	int (*overflow)(FILE *, int);
	int (*fputc)(int, FILE *);
	int (*fflush)(FILE *);
	int (*fclose)(FILE *);
} libc;

/* The operations glibc's own files write with: stdin's, stdout's and stderr's. */
static const void *file_jumps;

/* Whether glibc's FILE is as this file reads it (once.h), and why not. */
static int layout;
static const char *layout_reason;

/* A stream's operations, which struct _IO_FILE_plus keeps right after the FILE. */
static const void *jumps_of(const FILE *f)
{
	const void *v;

	memcpy(&v, (const char *)f + sizeof(FILE), sizeof(v));
	return v;
}

/* A cookie stream's writes: all taken, or all refused while *@cookie is set. */
static ssize_t probe_write(void *cookie, const char *buf, size_t n)
{
	(void)buf;
	return *(int *)cookie ? -1 : (ssize_t)n;
}

/* A stream for the check: a cookie stream opened @mode, buffered @how in @buf[256] (or not at all). */
static FILE *probe_stream(int *fail, const char *mode, char *buf, int how)
{
	cookie_io_functions_t io = { .write = probe_write };
	FILE *f = fopencookie(fail, mode, io);

	if (f && how >= 0 && setvbuf(f, buf, how, 256)) {
		libc.fclose(f);
		return NULL;
	}
	return f;
}

/*
 * Whether a buffered write stream behaves in its fields as this file
 * reads them: its buffer where setvbuf put it, the put area that the
 * first byte sets up, the error bit and the reset after a failed flush,
 * byte orientation, the lock bit. NULL, or the first thing that is not.
 */
static const char *probe_buffered(const void *jumps)
{
	char buf[256];
	int fail = 0;
	FILE *f = probe_stream(&fail, "w", buf, _IOFBF);
	const char *why = NULL;

	if (!f)
		return "no cookie stream";
	if (f->_IO_buf_base != buf || f->_IO_buf_end != buf + 256 ||
	    (f->_flags & (IO_UNBUFFERED | IO_LINE_BUF | IO_NO_WRITES | IO_CURRENTLY_PUTTING)))
		why = "setvbuf's buffer or its bits";
	else if (libc.fputc('a', f) != 'a' || f->_mode != -1 ||
		 !(f->_flags & IO_CURRENTLY_PUTTING) || f->_IO_write_base != buf ||
		 f->_IO_write_ptr != buf + 1 || f->_IO_write_end != buf + 256 ||
		 f->_IO_read_end != buf)
		why = "the put area of a byte";
	else if (f->_fileno >= 0 || f->_cur_column || !jumps_of(f) || jumps_of(f) == jumps)
		why = "a cookie stream's fd, column or operations";
	if (!why) {
		fail = 1;
		if (libc.fflush(f) != EOF || !ferror(f) || !(f->_flags & IO_ERR_SEEN) ||
		    f->_IO_write_ptr != buf || f->_IO_write_base != buf || f->_IO_read_end != buf)
			why = "a failed flush";
		clearerr(f);
	}
	if (!why && (f->_flags & (IO_ERR_SEEN | IO_USER_LOCK)))
		why = "clearerr's bits";
	if (!why) {
		__fsetlocking(f, FSETLOCKING_BYCALLER);
		if (!(f->_flags & IO_USER_LOCK))
			why = "FSETLOCKING_BYCALLER's bit";
		__fsetlocking(f, FSETLOCKING_INTERNAL);
		if (f->_flags & IO_USER_LOCK)
			why = "FSETLOCKING_INTERNAL's bit";
	}
	libc.fclose(f);
	return why;
}

/* Whether setvbuf's modes, a read stream and an appending one set the bits they should. */
static bool probe_modes(void)
{
	char buf[256];
	int fail = 0;
	FILE *lb = probe_stream(&fail, "w", buf, _IOLBF);
	bool ok = lb && (lb->_flags & IO_LINE_BUF) && !(lb->_flags & IO_UNBUFFERED);
	FILE *nb, *rd, *ap;

	if (lb)
		libc.fclose(lb);
	nb = probe_stream(&fail, "w", NULL, _IONBF);
	ok = ok && nb && (nb->_flags & IO_UNBUFFERED) && !(nb->_flags & IO_LINE_BUF);
	if (nb)
		libc.fclose(nb);
	rd = probe_stream(&fail, "r", NULL, -1);
	ok = ok && rd && (rd->_flags & IO_NO_WRITES);
	if (rd)
		libc.fclose(rd);
	ap = probe_stream(&fail, "a", NULL, -1);
	ok = ok && ap && (ap->_flags & IO_IS_APPENDING) && !(ap->_flags & IO_NO_WRITES);
	if (ap)
		libc.fclose(ap);
	return ok;
}

/* Whether a file stream has glibc's file operations, no position, and "c" sets the bit. */
static bool probe_file(const void *jumps)
{
	FILE *plain = fopen("/dev/null", "we"), *nocancel = fopen("/dev/null", "wce");
	bool ok = plain && nocancel && jumps_of(plain) == jumps && jumps_of(nocancel) == jumps &&
		  plain->_fileno >= 0 && plain->_offset == IO_POS_BAD &&
		  !(plain->_flags2 & IO2_NOTCANCEL) && (nocancel->_flags2 & IO2_NOTCANCEL);

	if (plain)
		libc.fclose(plain);
	if (nocancel)
		libc.fclose(nocancel);
	return ok;
}

/* The check: NULL when glibc's FILE is as this file reads it, else why not. */
static const char *layout_check(void)
{
	const void *jumps = jumps_of(stdout);
	const char *why;

	libc.overflow = (int (*)(FILE *, int))pp_real_next("__overflow");
	libc.fputc = (int (*)(int, FILE *))pp_real_next("fputc");
	libc.fflush = (int (*)(FILE *))pp_real_next("fflush");
	libc.fclose = (int (*)(FILE *))pp_real_next("fclose");
	if (!libc.overflow || !libc.fputc || !libc.fflush || !libc.fclose)
		return "libc's stdio calls not found";
	if (!jumps || jumps != jumps_of(stdin) || jumps != jumps_of(stderr))
		return "the standard streams do not share their operations";
	if ((why = probe_buffered(jumps)))
		return why;
	if (!probe_modes())
		return "the buffering and mode bits are not glibc 2.x's";
	if (!probe_file(jumps))
		return "a file stream on /dev/null is not as glibc 2.x makes one";
	file_jumps = jumps;
	return NULL;
}

static void layout_told(const char *why)
{
	if (why)
		pp_debug(
			"stdio: fwrite() and fputs() stay libc's: glibc's FILE is not as checked (%s)",
			why);
	else
		pp_debug("stdio: glibc's FILE checked: large fwrite() and fputs() to pipes go "
			 "through libppipe");
}

/* The check, once per process (its verdict is inherited across fork); no while it runs. */
static inline bool layout_ok(void)
{
	bool yes;

	if (likely(pp_once_decided(&layout, &yes)))
		return yes;
	return pp_once_run(&layout, &layout_reason, layout_check, "glibc's FILE checked",
			   layout_told);
}

/*
 * Whether fwrite() on @f runs _IO_new_file_xsputn as made below: glibc's
 * file operations, byte-oriented (or not yet oriented: fwrite makes it
 * so), writable, fully buffered or unbuffered, no column kept, writes
 * that may be cancelled, a real fd, and no input waiting in the buffer.
 * Its put area is set up, or the stream has no buffer yet.
 */
static bool stream_taken(const FILE *f)
{
	return jumps_of(f) == file_jumps && f->_mode <= 0 &&
	       !(f->_flags & (IO_NO_WRITES | IO_LINE_BUF)) && !(f->_flags2 & IO2_NOTCANCEL) &&
	       f->_cur_column == 0 && f->_fileno >= 0 && f->_IO_read_ptr == f->_IO_read_end &&
	       (f->_IO_write_base ? (f->_flags & IO_CURRENTLY_PUTTING) && f->_IO_buf_base :
				    !f->_IO_write_ptr);
}

/* After a write of the buffer or past it, as new_do_write() leaves a stream. */
static void put_area_reset(FILE *f)
{
	f->_IO_read_base = f->_IO_read_ptr = f->_IO_read_end = f->_IO_buf_base;
	f->_IO_write_base = f->_IO_write_ptr = f->_IO_buf_base;
	f->_IO_write_end = f->_flags & IO_UNBUFFERED ? f->_IO_buf_base : f->_IO_buf_end;
}

/*
 * _IO_new_file_write() of @iov's @total bytes: write() until all are in
 * or one fails (its errno stays, the error bit is set), by libppipe's
 * path. Returns the bytes written.
 */
static size_t file_write(FILE *f, struct iovec *iov, int cnt, size_t total)
{
	size_t done = 0;

	while (done < total) {
		ssize_t w = pp_writev(f->_fileno, iov, cnt);

		if (w < 0) {
			f->_flags |= IO_ERR_SEEN;
			break;
		}
		done += (size_t)w;
		/* What went in leaves the front of the vector. */
		while (cnt && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	if (f->_offset >= 0)
		f->_offset += (__off64_t)done;
	return done;
}

/* _IO_default_xsputn(): @n bytes into the buffer, flushing it by libc's overflow when full. */
static size_t default_xsputn(FILE *f, const char *s, size_t n)
{
	size_t more = n;

	while (more) {
		if (f->_IO_write_ptr < f->_IO_write_end) {
			size_t count = (size_t)(f->_IO_write_end - f->_IO_write_ptr);

			if (count > more)
				count = more;
			memcpy(f->_IO_write_ptr, s, count);
			f->_IO_write_ptr += count;
			s += count;
			more -= count;
		}
		if (!more || libc.overflow(f, (unsigned char)*s++) == EOF)
			break;
		more--;
	}
	return n - more;
}

/*
 * _IO_new_file_xsputn() for a stream stream_taken() accepts, with @n
 * larger than the room left in its buffer (else pp_stdio_may_take said
 * no). glibc fills the buffer, writes it out (its overflow), writes the
 * whole blocks of what is left straight from @s, and buffers the rest.
 * Here the buffer and the blocks go out in one writev() by libppipe's
 * path when both are whole pages, which the kernel counts as it counts
 * them one after the other; the returns, the buffer left behind and the
 * error bit are glibc's for every point at which that write may stop.
 * Otherwise the buffer goes out by libc's overflow, and the blocks alone
 * by libppipe's path.
 */
static size_t xsputn(FILE *f, const char *s, size_t n)
{
	size_t to_do = n, fill = 0, block, direct, held, page = pp_page_size();

	if (f->_mode == 0)
		f->_mode = -1; /* what fwrite's _IO_fwide(fp, -1) does */
	if (f->_IO_write_end > f->_IO_write_ptr) {
		fill = (size_t)(f->_IO_write_end - f->_IO_write_ptr);
		if (fill > to_do)
			fill = to_do;
		memcpy(f->_IO_write_ptr, s, fill);
		f->_IO_write_ptr += fill;
		s += fill;
		to_do -= fill;
	}
	if (!to_do)
		return n;
	/* No buffer yet: libc's overflow makes one and writes nothing. */
	if (!f->_IO_write_base && libc.overflow(f, EOF) == EOF)
		return n - to_do;
	block = (size_t)(f->_IO_buf_end - f->_IO_buf_base);
	direct = to_do - (block >= 128 ? to_do % block : 0);
	held = (size_t)(f->_IO_write_ptr - f->_IO_write_base);
	if (held + direct && held % page == 0 && direct % page == 0 &&
	    f->_IO_read_end == f->_IO_write_base) {
		struct iovec iov[2] = { { f->_IO_write_base, held }, { (void *)s, direct } };
		size_t done;

		if (f->_flags & IO_IS_APPENDING)
			f->_offset = IO_POS_BAD;
		done = file_write(f, iov, 2, held + direct);
		put_area_reset(f);
		if (done < held)
			return n - to_do; /* the overflow failed: the fill counts, as in glibc */
		to_do -= done - held;
		if (done < held + direct)
			return n - to_do;
	} else {
		struct iovec iov = { (void *)s, direct };

		if (libc.overflow(f, EOF) == EOF)
			return n - to_do;
		if (direct) {
			size_t done;

			/* new_do_write(): a position to give back first, which a pipe has not. */
			if (f->_flags & IO_IS_APPENDING) {
				f->_offset = IO_POS_BAD;
			} else if (f->_IO_read_end != f->_IO_write_base) {
				long pos =
					PP_SYSCALL(SYS_lseek, f->_fileno,
						   f->_IO_write_base - f->_IO_read_end, SEEK_CUR);

				if (pos < 0) {
					errno = (int)-pos;
					return n - to_do;
				}
				f->_offset = pos;
			}
			done = file_write(f, &iov, 1, direct);
			put_area_reset(f);
			to_do -= done;
			if (done < direct)
				return n - to_do;
		}
	}
	s += direct;
	if (to_do)
		to_do -= default_xsputn(f, s, to_do);
	return n - to_do;
}

/* A stream this call locked, for its cancellation. */
struct held {
	FILE *f;
	bool locked;
};

static void release_stream(void *arg)
{
	struct held *h = arg;

	if (h->locked)
		funlockfile(h->f);
}

size_t pp_stdio_write(FILE *f, const void *buf, size_t n, bool lock)
{
	struct held h = { f, lock && !(f->_flags & IO_USER_LOCK) };
	volatile size_t r = PP_STDIO_LIBC; /* across the cleanup handler's setjmp */

	/*
	 * Write-behind's counts at EPIPE and at a signal are its own
	 * (docs/design.md, "What differs from a plain pipe"): a stream there
	 * stays libc's, whose writes are plain.
	 */
	if (pp_engine != &pp_engine_vmsplice || !layout_ok())
		return PP_STDIO_LIBC;
	if (h.locked)
		flockfile(f);
	/* fwrite() is a cancellation point: the lock goes with the thread. */
	pthread_cleanup_push(release_stream, &h);
	if (stream_taken(f) &&
	    !(f->_IO_write_ptr && f->_IO_write_end - f->_IO_write_ptr >= (ptrdiff_t)n)) {
		struct pp_pipe *p;

		r = xsputn(f, buf, n);
		/* Its writes are counted where they went; the call, here. */
		if ((p = pp_fdt_peek(f->_fileno)))
			pp_count(&p->cnt, PP_CNT_stdio_writes, 1);
	}
	pthread_cleanup_pop(1);
	return r;
}

void pp_libc_wrote(int fd, size_t n)
{
	int saved = errno;
	enum pp_end end;
	struct pp_pipe *p;

	if (!n || fd < 0 || pp_in_vfork_child() || !(p = pp_write_enter(fd, &end)))
		goto out;
	if (end == PP_END_WRITE) {
		pp_count(&p->cnt, PP_CNT_bytes_stdio, n);
		pp_note_large_write();
		if (unlikely(pp_cfg.debug) &&
		    !__atomic_exchange_n(&p->stdio_told, 1, __ATOMIC_RELAXED))
			pp_debug(
				"pipe inode %llu (fd %d): written through stdio inside libc, out of "
				"libppipe's sight (%s)",
				(unsigned long long)pp_pipe_ino(p), fd,
				pp_engine != &pp_engine_vmsplice ?
					"write-behind leaves streams to libc" :
				n < pp_cfg.min_write ? "calls below PPIPE_MIN_WRITE" :
						       "a stream libppipe does not take");
	}
	pp_pipe_leave(p);
out:
	errno = saved;
}
