/* SPDX-License-Identifier: MIT */
/*
 * The fd cache: an array indexed by fd, read without locks. Each entry
 * names the pipe object the fd refers to and which end it is, tagged
 * with the object's generation so that a stale read is detected. Every
 * interposed call that changes what an fd number means updates it;
 * the write path also checks the fd's inode, so a change made behind the
 * shim's back (an internal libc close) is caught before it matters.
 */
#ifndef PP_FDTABLE_H
#define PP_FDTABLE_H

#include "pipe.h"

#include <stdbool.h>
#include <stdint.h>

/* Sizes the table from RLIMIT_NOFILE. Idempotent; async-signal-safe. */
int pp_fdt_init(void);

/* Associates @fd with end @end of @p (takes an fd reference). */
void pp_fdt_set(int fd, struct pp_pipe *p, enum pp_end end);
/* Remembers that @fd is not a pipe (trust mode's negative cache). */
void pp_fdt_mark_plain(int fd);
bool pp_fdt_is_plain(int fd);

/* Forgets @fd (drops its reference). */
void pp_fdt_clear(int fd);
/* @newfd now refers to what @oldfd refers to (dup, dup2, F_DUPFD). */
void pp_fdt_dup(int oldfd, int newfd);

/*
 * Looks @fd up and, if it refers to a live tracked pipe, enters it (see
 * pp_pipe_enter). Returns NULL for any other fd: the caller takes the
 * real call. The caller must pp_pipe_leave() what it got.
 */
struct pp_pipe *pp_fdt_enter(int fd, enum pp_end *end);

/*
 * The epoch of @fd: it moves whenever an interposed call changes (or is
 * about to change) what the number refers to. 0 for fds outside the table.
 */
uint32_t pp_fdt_epoch(int fd);
/* Moves @fd's epoch: call before a dup2()/dup3() onto @fd. */
void pp_fdt_invalidate(int fd);
/*
 * A duplicate of @fd for libppipe's own use, numbered in the upper half
 * of the soft fd limit (at most from 512), out of the way of the numbers
 * the program uses. Returns the new fd or -errno.
 */
long pp_fdt_dup_spare(int fd, bool cloexec);

/* The highest fd the table covers, plus one. */
int pp_fdt_size(void);

/* For each tracked fd: fn(fd, pipe, end, arg). Not for hot paths. */
void pp_fdt_for_each(void (*fn)(int, struct pp_pipe *, enum pp_end, void *), void *arg);

/*
 * The pipe @fd refers to, without entering it, or NULL: for counting the
 * small writes the real call makes. The object is type-stable, so a close
 * racing the caller can only make it count into a pipe that is gone or
 * reused.
 */
struct pp_pipe *pp_fdt_peek(int fd);

/* The table, for pp_fdt_tracked() (fdtable.c's fdt and fdt_size). */
extern uint64_t *pp_fdt_words;
extern int pp_fdt_nwords;

/*
 * Whether @fd may be a tracked pipe (pp_fdt_peek says for sure). Inline,
 * for the writes below PPIPE_MIN_WRITE: one load of the fd's entry, no
 * call, no lock.
 */
static inline bool pp_fdt_tracked(int fd)
{
	const uint64_t *t = __atomic_load_n(&pp_fdt_words, __ATOMIC_ACQUIRE);

	return t && (unsigned int)fd < (unsigned int)pp_fdt_nwords &&
	       (__atomic_load_n(&t[fd], __ATOMIC_RELAXED) & 1);
}

#endif
