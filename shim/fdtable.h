/* SPDX-License-Identifier: MIT */
/*
 * The fd cache: an array indexed by fd, read without locks. Each entry
 * names the pipe object the fd refers to and which end it is, tagged
 * with the object's generation so that a stale read is detected. Every
 * interposed call that changes what an fd number means updates it;
 * the write path also checks the fd's inode, so a change made behind the
 * shim's back (an internal libc close) is caught before it matters.
 *
 * Layer: pipes (may use: pipes, resources, base).
 */
#ifndef PP_FDTABLE_H
#define PP_FDTABLE_H

#include "pipe.h"

#include <stdbool.h>
#include <stdint.h>

/*
 * Sizes and maps the table from RLIMIT_NOFILE, at the first pipe libppipe
 * tracks. Idempotent; async-signal-safe. 0, or -ENOMEM.
 */
int pp_fdt_map(void);

/*
 * Associates @fd with end @end of @p (takes an fd reference). With
 * @ask_flags, @fd's open file may be another than the one @p's state
 * describes (it was learned, not made by pipe(): see pp_fdt_asks_flags).
 */
void pp_fdt_set(int fd, struct pp_pipe *p, enum pp_end end, bool ask_flags);
/*
 * Associates the two fds pipe() just made (the read end @fds[0], the write
 * end @fds[1]) with @p, an object nobody else can see yet, whose fd
 * references are set in one go rather than taken one by one. Returns how
 * many of them the table holds: with none, @p is the caller's to discard.
 */
int pp_fdt_set_new(const int fds[2], struct pp_pipe *p);
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
 * Learns @p's inode from its fds, the first time it is needed (pipe()
 * does not ask): from @hint (an fd of it, or -1) and every other fd the
 * table says names it, all of which must agree, or the pipe is made plain
 * (an fd was switched to another file behind libppipe's back). Returns
 * the inode, or 0 when no fd of it could tell.
 */
uint64_t pp_fdt_learn_ino(struct pp_pipe *p, int hint);

/* pp_fdt_learn_ino() for every tracked pipe whose inode is not known yet. */
void pp_fdt_learn_all(void);

/*
 * The tracked pipe of inode @ino that some fd of the table names,
 * entered, or NULL: for an fd of a pipe of ours that reached this
 * process out of the table's sight (reopened through /proc/self/fd,
 * duplicated inside libc). Learns the inodes not known yet on the way.
 * Walks the table: not for hot paths.
 */
struct pp_pipe *pp_fdt_find_ino(uint64_t ino);

/* The highest fd the table covers, plus one. */
int pp_fdt_size(void);
/* The highest fd that ever had an entry, plus one: where walks over the table stop. */
int pp_fdt_top(void);

/* For each tracked fd: fn(fd, pipe, end, arg). Not for hot paths. */
void pp_fdt_for_each(void (*fn)(int, struct pp_pipe *, enum pp_end, void *), void *arg);

/* The table, for the inline readers below (fdtable.c's fdt and fdt_size). */
extern uint64_t *pp_fdt_words;
extern int pp_fdt_nwords;

/* An entry (see fdtable.c). */
#define W_VALID 1ull
#define W_WRITE 2ull
#define W_ASKFL 4ull
#define W_INDEX_SHIFT 3
#define W_INDEX_MASK 0xffffull
#define W_GEN_SHIFT 19
#define W_GEN_MASK 0x7fffffull
#define W_EPOCH_SHIFT 42
#define W_CONTENT ((1ull << W_EPOCH_SHIFT) - 1)

/* pp_fdt_map() unless the table is there already (one load). */
static inline int pp_fdt_init(void)
{
	return __atomic_load_n(&pp_fdt_words, __ATOMIC_ACQUIRE) ? 0 : pp_fdt_map();
}

/* The pipe @fd refers to and its end, without entering it, or NULL. */
static inline struct pp_pipe *pp_fdt_peek_end(int fd, enum pp_end *end)
{
	const uint64_t *t = __atomic_load_n(&pp_fdt_words, __ATOMIC_ACQUIRE);
	struct pp_pipe *p;
	uint64_t w;

	if (!t || (unsigned int)fd >= (unsigned int)pp_fdt_nwords)
		return NULL;
	w = __atomic_load_n(&t[fd], __ATOMIC_ACQUIRE);
	if (!(w & W_VALID))
		return NULL;
	p = pp_pipe_at((uint32_t)((w >> W_INDEX_SHIFT) & W_INDEX_MASK));
	if (!p || (pp_pipe_gen(p) & W_GEN_MASK) != ((w >> W_GEN_SHIFT) & W_GEN_MASK))
		return NULL;
	*end = w & W_WRITE ? PP_END_WRITE : PP_END_READ;
	return p;
}

/*
 * The pipe @fd refers to, without entering it, or NULL: for counting the
 * small writes the real call makes. The object is type-stable, so a close
 * racing the caller can only make it count into a pipe that is gone or
 * reused.
 */
static inline struct pp_pipe *pp_fdt_peek(int fd)
{
	enum pp_end end;

	return pp_fdt_peek_end(fd, &end);
}

/*
 * Whether the flags of @fd's open file (O_NONBLOCK, O_DIRECT, its access
 * mode) must be asked of the kernel at each large write: the fd was
 * learned as another fd of a pipe of ours (reopened, duplicated inside
 * libc) or under PPIPE_READERS=trust, so its open file may be another
 * than the one pipe() made, whose O_NONBLOCK the pipe's state follows.
 * pipe()'s ends, their dups and ends handed on through exec ask nothing.
 * One load, no call.
 */
static inline bool pp_fdt_asks_flags(int fd)
{
	const uint64_t *t = __atomic_load_n(&pp_fdt_words, __ATOMIC_ACQUIRE);

	return !t || (unsigned int)fd >= (unsigned int)pp_fdt_nwords ||
	       (__atomic_load_n(&t[fd], __ATOMIC_RELAXED) & (W_VALID | W_ASKFL)) != W_VALID;
}

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
