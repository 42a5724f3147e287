/* SPDX-License-Identifier: MIT */
/**
 * @file ppipe.h
 * @brief The few functions an application may call when it links
 * libppipe directly. Everything else libppipe does through LD_PRELOAD and
 * needs no call at all.
 */
#ifndef PPIPE_H
#define PPIPE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Linking. A program that includes this header runs with libppipe
 * preloaded, linked, or not in the process at all: every call below is a
 * weak reference, and where libppipe is absent the header's own fallback
 * (at the end of this file) answers instead: spans are ordinary buffers
 * committed with write(), ppipe_flush() has nothing to wait for, and
 * ppipe_version() returns NULL. A program that links libppipe for sure
 * defines PPIPE_LINKED before including this header and links with
 * -lppipe: the references are then strong (so the linker keeps the
 * library, even with --as-needed) and no fallback is compiled in.
 */
#if defined(PPIPE_LINKED) || defined(PPIPE_BUILDING_LIBRARY)
#define PPIPE_REF
#else
#define PPIPE_REF __attribute__((weak))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define PPIPE_VERSION_MAJOR 0
#define PPIPE_VERSION_MINOR 1
#define PPIPE_VERSION_PATCH 0

/** Returns the library's version, "major.minor.patch". */
const char *ppipe_version(void) PPIPE_REF;

/**
 * Process-wide counters, a snapshot. A fork child's start from zero: they
 * count what this process did. Fields are only ever added at the end: a
 * program built against an older header gets the fields it knows.
 */
struct ppipe_stats {
	size_t size; /**< set by the caller to sizeof(struct ppipe_stats) */
	uint32_t version; /**< set by the library: 3 (see the fields' version comments) */
	uint64_t writes_accelerated; /**< write calls that went in by vmsplice */
	uint64_t bytes_accelerated; /**< bytes those calls moved */
	uint64_t writes_passthrough; /**< tracked-pipe calls made by the real call, any size */
	uint64_t bytes_passthrough; /**< bytes those calls moved */
	uint64_t fallbacks; /**< accelerated attempts that fell back */
	uint64_t pool_bytes; /**< ring memory mapped now */
	uint64_t pool_peak; /**< ring memory mapped at most */
	/* version 2 */
	uint64_t pool_trimmed_bytes; /**< ring memory given back by trimming, in all */
	uint64_t pressure_episodes; /**< times memory pressure (PSI) began */
	/*
	 * version 3: the pipe registry that the processes of this one's tree
	 * share (all 0 while it has none). Counts are the tree's, not this
	 * process's.
	 */
	uint64_t registry_slots; /**< pipes that crossed between processes, registered now */
	uint64_t registry_slots_max; /**< registry slots there are */
	uint64_t registry_records; /**< records of processes holding or handed pipes, now */
	uint64_t registry_records_max; /**< records there are */
	uint64_t registry_reclaimed; /**< records of processes gone, given back, in all */
	uint64_t registry_full; /**< times a pipe stayed plain because the registry was full */
};

/** The size of version 1 of struct ppipe_stats, the smallest accepted. */
#define PPIPE_STATS_SIZE_V1 (offsetof(struct ppipe_stats, pool_peak) + sizeof(uint64_t))

/**
 * Fills @p out with a snapshot, as much of it as the caller's size field
 * says it has room for (at least PPIPE_STATS_SIZE_V1), and sets size to
 * the bytes filled. Returns 0, or -1 with errno EINVAL when @p out is NULL
 * or too small.
 */
int ppipe_stats_get(struct ppipe_stats *out) PPIPE_REF;

/**
 * Writes the JSON statistics object (the PPIPE_STATS format) to @p fd.
 * Returns 0, or -1 with errno set.
 */
int ppipe_stats_dump(int fd) PPIPE_REF;

/**
 * Waits until every byte written to @p fd through libppipe has reached
 * the pipe. With PPIPE_MODE=uring (write-behind) that means the bytes
 * still staged for the pipe; the vmsplice engine writes synchronously,
 * so there it returns 0 at once for any open fd. It is the call to make
 * before handing @p fd to code that expects all earlier writes to be in
 * the pipe. Returns -1 with errno EBADF for a closed fd, or with the
 * error the staged bytes met (EPIPE, after SIGPIPE, when the readers went
 * away), reported once.
 */
int ppipe_flush(int fd) PPIPE_REF;

/*
 * Writing in place (docs/design.md, "Writing in place"). A producer that
 * makes its own output asks for a span of memory, puts the bytes there,
 * and commits them to the pipe:
 *
 *	struct ppipe_span s;
 *	if (ppipe_span_get(fd, 1 << 20, &s) == 0) {
 *		size_t n = produce(s.data, s.len);
 *		ssize_t w = ppipe_span_commit(&s, n);   // as write(fd, s.data, n)
 *		...
 *		ppipe_span_release(&s);                 // harmless once all is written
 *	}
 *
 * Where libppipe accelerates @fd, the span is a region of the thread's
 * ring for the pipe, and committing hands its pages to the pipe without
 * copying them; elsewhere it is an ordinary buffer that commit write()s.
 * A reader sees the same in both cases, and the same as from write().
 */
struct ppipe_span {
	void *data; /**< where the bytes go: page-aligned, len bytes writable */
	size_t len; /**< bytes at data, at least 1 and at most what was asked */
	/** Private: the implementation's, never to be read or written by the caller. */
	struct {
		void *base;
		size_t size;
		void *pipe;
		void *ring;
		uintptr_t owner;
		uint64_t gen;
		int fd;
		unsigned int kind;
	} priv;
};

/**
 * Opens a span of up to @p want bytes for writing to @p fd. Returns 0
 * and fills @p span: @c data, page-aligned, and @c len, which is @p want
 * or less (the most one ring region holds: commit the rest from a
 * second span). Returns -1 with errno EINVAL (@p span NULL, @p want 0 or
 * above SSIZE_MAX) or ENOMEM (no memory for a buffer). The fd is not
 * checked here: commit reports what write() would.
 *
 * A span is the calling thread's: commit and release it from that
 * thread, before the thread exits (a thread that ends with ring spans
 * open, cancelled in the middle of filling one, say, has them released
 * on its way out; a buffer span's memory is then lost, as any block
 * never freed). A thread has at most 8 ring spans open at once; beyond
 * that a span is a buffer. While it is open, the thread's other
 * writes to the same pipe take the kernel's own path (they are not
 * lost, and they reach the pipe in the order of the calls). A fork child
 * must not touch the spans its parent had open: ring memory is not
 * inherited. Not async-signal-safe.
 */
int ppipe_span_get(int fd, size_t want, struct ppipe_span *span) PPIPE_REF;

/**
 * Writes the first @p n bytes of @p span to its fd, as write(fd,
 * span->data, n) would: it blocks or not as the fd's file says, returns
 * a partial count where write() would (a signal, a non-blocking pipe
 * with room for part), fails with write()'s errno (EPIPE after SIGPIPE,
 * EAGAIN, EINTR, EBADF...) and keeps writes of up to PIPE_BUF bytes
 * atomic. A cancellation point, as write() is: a cancellation there
 * closes the span (a clean-up handler's release then does nothing).
 *
 * When all @p n bytes were written (n == 0 included), the span is closed
 * and its memory given back: every field of @p span is zero then, so
 * compare the count with a copy of n, not with span->len. Otherwise it stays open and holds the bytes
 * not written: @c data and @c len move on past what was written (nothing,
 * on -1), so the caller commits the rest or releases it. Returns -1 with
 * errno EINVAL, the span untouched, when @p n exceeds @c len, the span is
 * not open, or another thread or process calls.
 */
ssize_t ppipe_span_commit(struct ppipe_span *span, size_t n) PPIPE_REF;

/**
 * Closes @p span without writing what it still holds. A closed span (or
 * one zero-filled) is left as it is, so release may always follow
 * commit; a span of another thread or process is left open.
 */
void ppipe_span_release(struct ppipe_span *span) PPIPE_REF;

/*
 * The fallback, where libppipe is not in the process. Every call first
 * asks whether the library's definition was bound (one load); these
 * functions are the answer otherwise, and the library itself serves its
 * spans of fds it does not accelerate with the same code.
 */
#if !defined(PPIPE_LINKED)
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/** A fallback span's kind (priv.kind): an ordinary buffer, committed with write(). */
#define PPIPE_SPAN_BUFFER 0x50504201u

static inline int ppipe_buffer_span_get(int fd, size_t want, struct ppipe_span *span)
{
	long sc = sysconf(_SC_PAGESIZE);
	size_t page = sc > 0 ? (size_t)sc : 4096;
	char *buf;

	if (!span || !want || want > (size_t)SSIZE_MAX - page) {
		errno = EINVAL;
		return -1;
	}
	/*
	 * malloc, aligned by hand: once a block of this size was freed, malloc
	 * serves the next from its heap, with no page to fault (an aligned
	 * allocation of the same size would be mapped afresh each time).
	 */
	buf = (char *)malloc(want + page - 1);
	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	memset(&span->priv, 0, sizeof(span->priv));
	span->priv.base = buf;
	span->data = buf + (-(uintptr_t)buf & (page - 1));
	span->len = span->priv.size = want;
	span->priv.owner = (uintptr_t)pthread_self();
	span->priv.fd = fd;
	span->priv.kind = PPIPE_SPAN_BUFFER;
	return 0;
}

static inline void ppipe_buffer_span_release(struct ppipe_span *span)
{
	if (!span || span->priv.kind != PPIPE_SPAN_BUFFER ||
	    span->priv.owner != (uintptr_t)pthread_self())
		return;
	free(span->priv.base);
	memset(span, 0, sizeof(*span));
}

/* pthread_cancel() acted in the write: the span closes (its thread is gone). */
static inline void ppipe_buffer_span_cancelled(void *span)
{
	ppipe_buffer_span_release((struct ppipe_span *)span);
}

static inline ssize_t ppipe_buffer_span_commit(struct ppipe_span *span, size_t n)
{
	ssize_t w;

	if (!span || span->priv.kind != PPIPE_SPAN_BUFFER || n > span->len ||
	    span->priv.owner != (uintptr_t)pthread_self()) {
		errno = EINVAL;
		return -1;
	}
	pthread_cleanup_push(ppipe_buffer_span_cancelled, span);
	w = write(span->priv.fd, span->data, n);
	pthread_cleanup_pop(0);
	if (w < 0)
		return w;
	if ((size_t)w == n) {
		int saved = errno;

		ppipe_buffer_span_release(span);
		errno = saved;
		return w;
	}
	span->data = (char *)span->data + w;
	span->len -= (size_t)w;
	return w;
}

#if !defined(PPIPE_BUILDING_LIBRARY)
static inline const char *ppipe_absent_version(void)
{
	return NULL;
}

static inline int ppipe_absent_stats(void)
{
	errno = ENOSYS;
	return -1;
}

static inline int ppipe_absent_flush(int fd)
{
	return fcntl(fd, F_GETFD) < 0 ? -1 : 0;
}

#define ppipe_version() ((ppipe_version) ? (ppipe_version)() : ppipe_absent_version())
#define ppipe_stats_get(out) \
	((ppipe_stats_get) ? (ppipe_stats_get)(out) : ((void)(out), ppipe_absent_stats()))
#define ppipe_stats_dump(fd) \
	((ppipe_stats_dump) ? (ppipe_stats_dump)(fd) : ((void)(fd), ppipe_absent_stats()))
#define ppipe_flush(fd) ((ppipe_flush) ? (ppipe_flush)(fd) : ppipe_absent_flush(fd))
#define ppipe_span_get(fd, want, span)                         \
	((ppipe_span_get) ? (ppipe_span_get)(fd, want, span) : \
			    ppipe_buffer_span_get(fd, want, span))
#define ppipe_span_commit(span, n) \
	((ppipe_span_commit) ? (ppipe_span_commit)(span, n) : ppipe_buffer_span_commit(span, n))
#define ppipe_span_release(span) \
	((ppipe_span_release) ? (ppipe_span_release)(span) : ppipe_buffer_span_release(span))
#endif
#endif

#ifdef __cplusplus
}
#endif

#endif
