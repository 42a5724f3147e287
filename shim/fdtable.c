// SPDX-License-Identifier: MIT
/*
 * Entry format (one 64-bit word per fd, 0 = not tracked):
 *   bit 0      valid (0 with bit 1 set: known not to be a pipe)
 *   bit 1      end (1 = write end)
 *   bits 2-33  generation of the pipe object
 *   bits 34-63 index of the pipe object
 * Readers load the word, enter the object it names and check that the
 * object still has that generation; writers replace words atomically.
 *
 * Beside each word, an epoch: bumped by every change of the entry and
 * before every interposed call that may change what the fd number refers
 * to (close, dup2, dup3...), so "the epoch did not move" proves that no
 * such call ran in between, even one that put the same pipe back.
 */
#include "fdtable.h"

#include "sys.h"

#include <fcntl.h>

#include <stddef.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FDT_MAX (1 << 20)
#define FDT_MIN 1024

static uint64_t *fdt;
static uint32_t *fdt_epoch; /* fdt_size entries, after the words */
static int fdt_size;
static int spare_base; /* lowest fd number for libppipe's own fds */

int pp_fdt_init(void)
{
	struct rlimit rl;
	uint64_t *t;
	size_t n = FDT_MIN;

	if (__atomic_load_n(&fdt, __ATOMIC_ACQUIRE))
		return 0;
	/* The hard limit: the soft one can be raised later without us. */
	if (!syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) && rl.rlim_max > n)
		n = rl.rlim_max > FDT_MAX ? FDT_MAX : rl.rlim_max;
	t = mmap(NULL, n * (sizeof(*t) + sizeof(*fdt_epoch)), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (t == MAP_FAILED)
		return -1;
	/*
	 * libppipe's own short-lived fds go to the upper half of the soft
	 * limit (at most 512), out of the way of the numbers the program
	 * gets from open() and expects from dup2() targets it chose.
	 */
	if (!syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) && rl.rlim_cur >= 128)
		spare_base = rl.rlim_cur / 2 > 512 ? 512 : (int)(rl.rlim_cur / 2);
	fdt_size = (int)n;
	fdt_epoch = (uint32_t *)(t + n);
	__atomic_store_n(&fdt, t, __ATOMIC_RELEASE);
	return 0;
}

long pp_fdt_dup_spare(int fd, bool cloexec)
{
	int cmd = cloexec ? F_DUPFD_CLOEXEC : F_DUPFD;
	long r = pp_sys_fcntl(fd, cmd, (unsigned long)spare_base);

	/* The soft limit was lowered below the range since: anywhere, then. */
	if (r == -EINVAL && spare_base)
		r = pp_sys_fcntl(fd, cmd, 0);
	return r;
}

uint32_t pp_fdt_epoch(int fd)
{
	if (!fdt || (unsigned int)fd >= (unsigned int)fdt_size)
		return 0;
	return __atomic_load_n(&fdt_epoch[fd], __ATOMIC_SEQ_CST);
}

void pp_fdt_invalidate(int fd)
{
	if (fdt && (unsigned int)fd < (unsigned int)fdt_size)
		__atomic_fetch_add(&fdt_epoch[fd], 1, __ATOMIC_SEQ_CST);
}

int pp_fdt_size(void)
{
	return fdt ? fdt_size : 0;
}

static uint64_t encode(struct pp_pipe *p, enum pp_end end)
{
	return ((uint64_t)pp_pipe_index(p) << 34) | ((uint64_t)pp_pipe_gen(p) << 2) |
	       ((uint64_t)end << 1) | 1;
}

static struct pp_pipe *decode(uint64_t w, enum pp_end *end, uint32_t *gen)
{
	if (!(w & 1))
		return NULL;
	*end = (enum pp_end)((w >> 1) & 1);
	*gen = (uint32_t)(w >> 2);
	return pp_pipe_at((uint32_t)(w >> 34));
}

static uint64_t swap_entry(int fd, uint64_t w)
{
	if (!fdt || fd < 0 || fd >= fdt_size)
		return 0;
	pp_fdt_invalidate(fd);
	return __atomic_exchange_n(&fdt[fd], w, __ATOMIC_ACQ_REL);
}

/* Drops the fd reference an old entry held. */
static void release_entry(uint64_t old)
{
	enum pp_end end;
	uint32_t gen;
	struct pp_pipe *p = decode(old, &end, &gen);

	if (p && pp_pipe_gen(p) == gen)
		pp_pipe_put_fd(p, end);
}

void pp_fdt_set(int fd, struct pp_pipe *p, enum pp_end end)
{
	if (!fdt || fd < 0 || fd >= fdt_size) {
		return;
	}
	pp_pipe_get_fd(p, end);
	release_entry(swap_entry(fd, encode(p, end)));
}

#define FDT_PLAIN 2ull

void pp_fdt_mark_plain(int fd)
{
	release_entry(swap_entry(fd, FDT_PLAIN));
}

bool pp_fdt_is_plain(int fd)
{
	return fdt && fd >= 0 && fd < fdt_size &&
	       __atomic_load_n(&fdt[fd], __ATOMIC_ACQUIRE) == FDT_PLAIN;
}

void pp_fdt_clear(int fd)
{
	release_entry(swap_entry(fd, 0));
}

void pp_fdt_dup(int oldfd, int newfd)
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
	pp_fdt_set(newfd, p, end);
	pp_pipe_leave(p);
}

struct pp_pipe *pp_fdt_enter(int fd, enum pp_end *end)
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
	if (pp_pipe_gen(p) != gen) {
		pp_pipe_leave(p);
		return NULL;
	}
	return p;
}

static struct pp_pipe *fdt_peek(int fd, enum pp_end *end)
{
	uint32_t gen;
	struct pp_pipe *p;

	if (!fdt || (unsigned int)fd >= (unsigned int)fdt_size)
		return NULL;
	p = decode(__atomic_load_n(&fdt[fd], __ATOMIC_ACQUIRE), end, &gen);
	return p && pp_pipe_gen(p) == gen ? p : NULL;
}

void pp_fdt_for_each(void (*fn)(int, struct pp_pipe *, enum pp_end, void *), void *arg)
{
	for (int fd = 0; fdt && fd < fdt_size; fd++) {
		enum pp_end end;
		struct pp_pipe *p = fdt_peek(fd, &end);

		if (p)
			fn(fd, p, end, arg);
	}
}

struct pp_pipe *pp_fdt_peek(int fd)
{
	enum pp_end end;

	return fdt_peek(fd, &end);
}

/*
 * The table under the names fdtable.h gives pp_fdt_tracked(), which the
 * write path inlines. (Aliases: fdt and fdt_size stay this file's.)
 */
extern uint64_t *pp_fdt_words __attribute__((alias("fdt")));
extern int pp_fdt_nwords __attribute__((alias("fdt_size")));
