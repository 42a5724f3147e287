// SPDX-License-Identifier: MIT
/*
 * Entry format (one 64-bit word per fd, 0 = never tracked):
 *   bit 0       valid (0 with bit 1 set: known not to be a pipe)
 *   bit 1       end (1 = open for writing: the kernel's FMODE_WRITE)
 *   bit 2       ask the kernel for the file's flags (pp_fdt_asks_flags)
 *   bits 3-18   index of the pipe object
 *   bits 19-41  generation of the pipe object (its low 23 bits)
 *   bits 42-63  epoch of the fd number
 * Readers load the word, enter the object it names and check that the
 * object still has that generation; writers replace words atomically.
 *
 * The epoch is bumped by every change of the entry and before every
 * interposed call that may change what the fd number refers to (close,
 * dup2, dup3...), so "the epoch did not move" proves that no such call ran
 * in between, even one that put the same pipe back. It lives in the word
 * itself, so that a change writes one page of the table, not two: after
 * fork, each page written is a copy-on-write fault.
 */
#include "fdtable.h"

#include "compiler.h"
#include "solo.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>

#include <stddef.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FDT_MAX (1 << 20)
#define FDT_MIN 1024

#define W_PLAIN W_WRITE /* not valid, end bit set: known not to be a pipe */

_Static_assert(PP_MAX_PIPES <= W_INDEX_MASK + 1, "pipe indexes fit the fd table's word");

PP_HOT static uint64_t *fdt;
PP_HOT static int fdt_size;
PP_HOT static int fdt_top; /* highest fd ever given an entry, plus one: walks stop there */

/*
 * The pipe objects and the table are one mapping, the objects first, and
 * the table's first fds on the page of the last objects, which are taken
 * first (pipe.c): a shell's fork child, which closes and dups the ends of
 * a pipe or two, writes one page of them, not two (each a copy-on-write
 * fault, in the child and again in the parent).
 */
#define FDT_SHARED_PIPES 4 /* objects on the page of fds 0 to 255 */
_Static_assert(FDT_SHARED_PIPES * sizeof(struct pp_pipe) + 256 * sizeof(uint64_t) == 4096,
	       "the last pipe objects and the first fds fill one page");

PP_COMMON int pp_fdt_map(void)
{
	struct rlimit rl = { 0, 0 };
	const size_t lead = 4096 - FDT_SHARED_PIPES * sizeof(struct pp_pipe);
	const size_t objs = (size_t)PP_MAX_PIPES * sizeof(struct pp_pipe);
	uint64_t *t;
	size_t n = FDT_MIN;
	char *m;
	int saved;

	if (__atomic_load_n(&fdt, __ATOMIC_ACQUIRE))
		return 0;
	saved = errno; /* the caller's (pipe()): mmap may set it */
	/* The hard limit: the soft one can be raised later without us. */
	if (!PP_SYSCALL(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) && rl.rlim_max > n)
		n = rl.rlim_max > FDT_MAX ? FDT_MAX : rl.rlim_max;
	m = mmap(NULL, lead + objs + n * sizeof(*t), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		errno = saved;
		return -ENOMEM;
	}
	t = (uint64_t *)(m + lead + objs);
	/*
	 * Another thread's first pipe (or a signal handler's, which may have
	 * interrupted this one) placed theirs meanwhile: theirs stays, and
	 * until its table is published, this pipe is not tracked.
	 */
	if (!pp_pipes_place((struct pp_pipe *)(m + lead))) {
		munmap(m, lead + objs + n * sizeof(*t));
		errno = saved;
		return __atomic_load_n(&fdt, __ATOMIC_ACQUIRE) ? 0 : -EAGAIN;
	}
	errno = saved;
	/*
	 * libppipe's own short-lived fds go to the upper half of the soft
	 * limit (at most 512), out of the way of the numbers the program
	 * gets from open() and expects from dup2() targets it chose.
	 */
	if (rl.rlim_cur >= 128)
		pp_sys_spare_fds_from(rl.rlim_cur / 2 > 512 ? 512 : (int)(rl.rlim_cur / 2));
	fdt_size = (int)n;
	__atomic_store_n(&fdt, t, __ATOMIC_RELEASE);
	return 0;
}

PP_COMMON uint32_t pp_fdt_epoch(int fd)
{
	if (!fdt || (unsigned int)fd >= (unsigned int)fdt_size)
		return 0;
	return (uint32_t)(__atomic_load_n(&fdt[fd], __ATOMIC_SEQ_CST) >> W_EPOCH_SHIFT);
}

PP_COMMON int pp_fdt_top(void)
{
	return __atomic_load_n(&fdt_top, __ATOMIC_ACQUIRE);
}

static void raise_top(int fd)
{
	int top = __atomic_load_n(&fdt_top, __ATOMIC_RELAXED);

	while (fd >= top &&
	       !pp_solo_cas(&fdt_top, &top, fd + 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

/*
 * Replaces the content of @fd's word with @content (0 to clear), moving
 * its epoch; returns the old word. A word that holds nothing and is to
 * hold nothing is left alone: no page written (no copy-on-write after fork
 * for nothing), and no write of ours can be in flight on such an fd (its
 * epoch moved when it was cleared, if it ever had an entry).
 */
PP_COMMON static uint64_t swap_entry(int fd, uint64_t content)
{
	uint64_t old, next;

	if (!fdt || fd < 0 || fd >= fdt_size)
		return 0;
	if (!content &&
	    (fd >= pp_fdt_top() || !(__atomic_load_n(&fdt[fd], __ATOMIC_ACQUIRE) & W_CONTENT)))
		return 0;
	if (content)
		raise_top(fd);
	old = __atomic_load_n(&fdt[fd], __ATOMIC_ACQUIRE);
	do
		next = (old & ~W_CONTENT) + (1ull << W_EPOCH_SHIFT) + content;
	while (!pp_solo_cas(&fdt[fd], &old, next, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE));
	return old;
}

PP_COMMON void pp_fdt_invalidate(int fd)
{
	uint64_t old;

	if (!fdt || (unsigned int)fd >= (unsigned int)pp_fdt_top())
		return;
	old = __atomic_load_n(&fdt[fd], __ATOMIC_ACQUIRE);
	while ((old & W_CONTENT) && !pp_solo_cas(&fdt[fd], &old, old + (1ull << W_EPOCH_SHIFT),
						 __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE))
		;
}

/* Adds what @fd says of @p's inode to @seen (0 so far), if the table says @fd is @p's. */
PP_COMMON static void learn_from(struct pp_pipe *p, int fd, uint64_t *seen, bool *mixed)
{
	enum pp_end end;
	uint64_t got;

	if (pp_fdt_peek_end(fd, &end) != p || pp_sys_pipe_ino(fd, &got))
		return;
	if (*seen && got != *seen)
		*mixed = true;
	if (!*seen)
		*seen = got;
}

PP_COMMON uint64_t pp_fdt_learn_ino(struct pp_pipe *p, int hint)
{
	uint64_t seen = 0, zero = 0;
	bool mixed = false;
	int top = pp_fdt_top();

	if (pp_pipe_ino(p))
		return pp_pipe_ino(p);
	/* The fd at hand first, then every other fd of the pipe. */
	if (hint >= 0)
		learn_from(p, hint, &seen, &mixed);
	for (int fd = 0; fdt && fd < top; fd++)
		if (fd != hint)
			learn_from(p, fd, &seen, &mixed);
	if (!seen)
		return 0;
	if (mixed)
		pp_pipe_mark_unsafe(p, "an fd of it was switched to another file behind libppipe");
	__atomic_compare_exchange_n(&p->ino, &zero, seen, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
	return pp_pipe_ino(p);
}

PP_COMMON void pp_fdt_learn_all(void)
{
	for (int fd = 0, top = pp_fdt_top(); fdt && fd < top; fd++) {
		enum pp_end end;
		struct pp_pipe *p = pp_fdt_peek_end(fd, &end);

		if (p && !pp_pipe_ino(p))
			pp_fdt_learn_ino(p, fd);
	}
}

struct pp_pipe *pp_fdt_find_ino(uint64_t ino)
{
	for (int fd = 0, top = pp_fdt_top(); fdt && fd < top; fd++) {
		enum pp_end end;
		struct pp_pipe *p = pp_fdt_enter(fd, &end);

		if (!p)
			continue;
		if ((pp_pipe_ino(p) ? pp_pipe_ino(p) : pp_fdt_learn_ino(p, fd)) == ino)
			return p;
		pp_pipe_leave(p);
	}
	return NULL;
}

PP_COMMON int pp_fdt_size(void)
{
	return fdt ? fdt_size : 0;
}

static uint64_t encode(struct pp_pipe *p, enum pp_end end, bool ask_flags)
{
	return ((uint64_t)pp_pipe_index(p) << W_INDEX_SHIFT) |
	       (((uint64_t)pp_pipe_gen(p) & W_GEN_MASK) << W_GEN_SHIFT) |
	       (end == PP_END_WRITE ? W_WRITE : 0) | (ask_flags ? W_ASKFL : 0) | W_VALID;
}

static bool gen_matches(struct pp_pipe *p, uint32_t gen)
{
	return (pp_pipe_gen(p) & W_GEN_MASK) == gen;
}

static struct pp_pipe *decode(uint64_t w, enum pp_end *end, uint32_t *gen)
{
	if (!(w & W_VALID))
		return NULL;
	*end = w & W_WRITE ? PP_END_WRITE : PP_END_READ;
	*gen = (uint32_t)((w >> W_GEN_SHIFT) & W_GEN_MASK);
	return pp_pipe_at((uint32_t)((w >> W_INDEX_SHIFT) & W_INDEX_MASK));
}

/* Drops the fd reference an old entry held. */
static inline void release_entry(uint64_t old)
{
	enum pp_end end;
	uint32_t gen;
	struct pp_pipe *p;

	if (!(old & W_VALID))
		return;
	p = decode(old, &end, &gen);
	if (p && gen_matches(p, gen))
		pp_pipe_put_fd(p, end);
}

PP_COMMON void pp_fdt_set(int fd, struct pp_pipe *p, enum pp_end end, bool ask_flags)
{
	if (!fdt || fd < 0 || fd >= fdt_size) {
		return;
	}
	pp_pipe_get_fd(p, end);
	release_entry(swap_entry(fd, encode(p, end, ask_flags)));
}

PP_COMMON int pp_fdt_set_new(const int fds[2], struct pp_pipe *p)
{
	bool r = fdt && fds[0] >= 0 && fds[0] < fdt_size;
	bool w = fdt && fds[1] >= 0 && fds[1] < fdt_size;

	/* Plain stores: nobody can reach @p before the first entry names it. */
	p->fd_refs = r + w;
	p->wfd_refs = w;
	if (r)
		release_entry(swap_entry(fds[0], encode(p, PP_END_READ, false)));
	if (w)
		release_entry(swap_entry(fds[1], encode(p, PP_END_WRITE, false)));
	return r + w;
}

PP_COMMON void pp_fdt_mark_plain(int fd)
{
	release_entry(swap_entry(fd, W_PLAIN));
}

PP_COMMON bool pp_fdt_is_plain(int fd)
{
	return fdt && fd >= 0 && fd < fdt_size &&
	       (__atomic_load_n(&fdt[fd], __ATOMIC_ACQUIRE) & W_CONTENT) == W_PLAIN;
}

PP_COMMON void pp_fdt_clear(int fd)
{
	release_entry(swap_entry(fd, 0));
}

PP_COMMON void pp_fdt_dup(int oldfd, int newfd)
{
	enum pp_end end;
	struct pp_pipe *p;

	if (oldfd == newfd)
		return;
	p = pp_fdt_enter(oldfd, &end);
	if (!p) {
		pp_fdt_clear(newfd);
		return;
	}
	/* The same open file: what the old number knew of it holds for the new one. */
	pp_fdt_set(newfd, p, end, pp_fdt_asks_flags(oldfd));
	pp_pipe_leave(p);
}

PP_COMMON struct pp_pipe *pp_fdt_enter(int fd, enum pp_end *end)
{
	uint64_t w;
	uint32_t gen;
	struct pp_pipe *p;

	if (!fdt || (unsigned int)fd >= (unsigned int)fdt_size)
		return NULL;
	w = __atomic_load_n(&fdt[fd], __ATOMIC_ACQUIRE);
	p = decode(w, end, &gen);
	if (!p || !pp_pipe_enter(p))
		return NULL;
	if (!gen_matches(p, gen)) {
		pp_pipe_leave(p);
		return NULL;
	}
	return p;
}

PP_COMMON void pp_fdt_for_each(void (*fn)(int, struct pp_pipe *, enum pp_end, void *), void *arg)
{
	for (int fd = 0, top = pp_fdt_top(); fdt && fd < top; fd++) {
		enum pp_end end;
		struct pp_pipe *p = pp_fdt_peek_end(fd, &end);

		if (p)
			fn(fd, p, end, arg);
	}
}

/*
 * The table under the names fdtable.h gives pp_fdt_tracked(), which the
 * write path inlines. (Aliases: fdt and fdt_size stay this file's.)
 */
extern uint64_t *pp_fdt_words __attribute__((alias("fdt")));
extern int pp_fdt_nwords __attribute__((alias("fdt_size")));
