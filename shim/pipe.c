// SPDX-License-Identifier: MIT
/*
 * Pipe objects (pipe.h).
 *
 * Objects come from one type-stable array: memory is never unmapped, so a
 * reader that loaded a stale fd-cache entry can still look at the object
 * and see, by its generation, that it was freed or reused. Slots are
 * taken from and given back to a lock-free stack (a tagged index, so a
 * slot popped and pushed back between a thread's load and its exchange is
 * noticed), which a signal handler may use while its thread is inside:
 * no lock, no signal mask, no system call. Walks over the live pipes
 * (statistics, fork, exec, trimming) visit every slot ever used.
 */
#include "pipe.h"

#include "compiler.h"
#include "config.h"
#include "fault.h"
#include "log.h"
#include "registry.h"
#include "ring.h"
#include "solo.h"
#include "sys.h"
#include "turn.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * PP_MAX_PIPES objects, type-stable, mapped at the first pipe with the fd
 * table (fdtable.c; pipe.h reads it inline). Taken from the last one
 * down: the last ones share a page with the table's first fds.
 */
PP_HOT struct pp_pipe *pp_pipes;
#define slots pp_pipes
PP_HOT static uint64_t free_top; /* tag << 32 | (index + 1) of the top free slot */
PP_HOT static uint32_t slots_used; /* high-water mark (may overshoot PP_MAX_PIPES) */
PP_HOT static int live_pipes; /* pipes between pp_pipe_new and their free */

PP_COMMON bool pp_pipes_place(struct pp_pipe *objs)
{
	struct pp_pipe *expected = NULL;

	return __atomic_compare_exchange_n(&slots, &expected, objs, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

PP_COMMON int pp_pipes_live(void)
{
	return __atomic_load_n(&live_pipes, __ATOMIC_RELAXED);
}

static uint32_t slots_in_use(void)
{
	uint32_t n = __atomic_load_n(&slots_used, __ATOMIC_ACQUIRE);

	return n < PP_MAX_PIPES ? n : PP_MAX_PIPES;
}

static struct pp_pipe *slot_pop(void)
{
	uint64_t top = __atomic_load_n(&free_top, __ATOMIC_ACQUIRE), next;
	uint32_t i;

	do {
		if (!(uint32_t)top) {
			i = pp_solo_fetch_add(&slots_used, 1, __ATOMIC_ACQ_REL);
			return i < PP_MAX_PIPES ? &slots[PP_MAX_PIPES - 1 - i] : NULL;
		}
		i = (uint32_t)top - 1;
		next = ((top >> 32) + 1) << 32 |
		       __atomic_load_n(&slots[i].next_free, __ATOMIC_RELAXED);
	} while (!pp_solo_cas(&free_top, &top, next, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	return &slots[i];
}

static void slot_push(struct pp_pipe *s)
{
	uint64_t top = __atomic_load_n(&free_top, __ATOMIC_RELAXED), next;
	uint32_t i = (uint32_t)(s - slots);

	do {
		__atomic_store_n(&s->next_free, (uint32_t)top, __ATOMIC_RELAXED);
		next = ((top >> 32) + 1) << 32 | (i + 1);
	} while (!pp_solo_cas(&free_top, &top, next, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

static void registry_release(struct pp_pipe *p)
{
	if (p->shared)
		pp_reg_put(pp_pipe_sh(p));
}

PP_COMMON struct pp_pipe *pp_pipe_new(uint64_t ino, bool created_here, int capacity)
{
	struct pp_pipe *p;

	/* Mapped with the fd table (pp_fdt_init()), which every caller has. */
	if (!__atomic_load_n(&slots, __ATOMIC_ACQUIRE))
		return NULL;
	pp_mark_used(PP_USED_PIPES);
	p = slot_pop();
	if (!p)
		return NULL;
	/*
	 * Field by field, not one memset over them all: that is a rep stos
	 * here, which takes longer to start than these stores take (every
	 * pipe() of every process pays it), and it would clear the padding
	 * between the cache lines too.
	 */
	p->reason = NULL;
	p->accel = false;
	p->cap_own = 0;
	p->shared = false;
	p->marked_here = false;
	p->engine_word = 0;
	p->last_fallback = NULL;
	p->path_told = 0;
	p->stdio_told = 0;
	p->local = (struct pp_shared){ 0 };
	/* One store each: as a loop, its counting cost more than the stores. */
#define PP_X(name, desc) __atomic_store_n(&p->cnt.v[PP_CNT_##name], 0, __ATOMIC_RELAXED);
	PP_COUNTERS(PP_X)
#undef PP_X
	p->rings = (struct pp_rings){ 0 };
	p->fd_refs = 0;
	p->wfd_refs = 0;
	pp_turn_init(&p->turn);
	__atomic_store_n(&p->ino, ino, __ATOMIC_RELEASE);
	p->created_here = created_here;
	__atomic_store_n(&p->sh, &p->local, __ATOMIC_RELAXED);
	pp_solo_fetch_add(&live_pipes, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&p->state, PP_PIPE_LIVE, __ATOMIC_RELEASE);
	if (capacity > 0)
		pp_pipe_note_capacity(p, capacity);
	return p;
}

PP_COMMON struct pp_pipe *pp_pipe_adopt(uint64_t ino, struct pp_shared *sh)
{
	struct pp_pipe *p = pp_pipe_new(ino, true, 0);

	if (!p)
		return NULL;
	__atomic_store_n(&p->sh, sh, __ATOMIC_RELEASE);
	p->shared = true;
	p->accel = true;
	p->reason = "inherited across exec, readers confirmed";
	return p;
}

/*
 * What was written into @p's own state while it moved into slot @s: the
 * verdict and the capacity only ever grow, so they are merged (again, by
 * whoever wrote the old place last).
 */
PP_COMMON static void merge_into(struct pp_shared *s, const struct pp_shared *from)
{
	uint32_t cap = __atomic_load_n(&from->capacity_max, __ATOMIC_RELAXED);
	uint32_t cur = __atomic_load_n(&s->capacity_max, __ATOMIC_RELAXED);

	if (__atomic_load_n(&from->unsafe, __ATOMIC_ACQUIRE))
		__atomic_store_n(&s->unsafe, 1, __ATOMIC_RELEASE);
	while (cap > cur && !__atomic_compare_exchange_n(&s->capacity_max, &cur, cap, true,
							 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

PP_COMMON int pp_pipe_share(struct pp_pipe *p)
{
	struct pp_shared *s;

	if (p->shared)
		return 0;
	if (!pp_pipe_ino(p))
		return -EINVAL;
	s = pp_reg_get(pp_pipe_ino(p), true);
	if (!s)
		return -ENOSPC;
	merge_into(s, &p->local);
	__atomic_store_n(&s->nonblock, __atomic_load_n(&p->local.nonblock, __ATOMIC_RELAXED),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&p->sh, s, __ATOMIC_RELEASE);
	p->shared = true;
	/* A thread that still held the old place may have written it meanwhile. */
	merge_into(s, &p->local);
	return 0;
}

/* Frees @p once it is dead and nobody is inside it. */
PP_COMMON static void pipe_try_free(struct pp_pipe *p)
{
	int expected = PP_PIPE_DEAD;

	if (__atomic_load_n(&p->users, __ATOMIC_ACQUIRE))
		return;
	/* DEAD -> FREED claims the right to free it, exactly once. */
	if (!pp_solo_cas(&p->state, &expected, PP_PIPE_FREED, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	/* Only the one that won the state above writes it: no locked add. */
	__atomic_store_n(&p->gen, __atomic_load_n(&p->gen, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
	pp_pipe_report_closed(p);
	pp_rings_free(&p->rings);
	registry_release(p);
	pp_solo_fetch_add(&live_pipes, -1, __ATOMIC_RELAXED);
	slot_push(p);
}

void pp_pipe_discard(struct pp_pipe *p)
{
	__atomic_store_n(&p->state, PP_PIPE_DEAD, __ATOMIC_RELEASE);
	pipe_try_free(p);
}

PP_COMMON void pp_pipe_get_fd(struct pp_pipe *p, enum pp_end end)
{
	if (end == PP_END_WRITE)
		pp_solo_fetch_add(&p->wfd_refs, 1, __ATOMIC_RELAXED);
	pp_solo_fetch_add(&p->fd_refs, 1, __ATOMIC_RELAXED);
}

PP_COMMON void pp_pipe_put_fd(struct pp_pipe *p, enum pp_end end)
{
	if (end == PP_END_WRITE)
		pp_solo_fetch_add(&p->wfd_refs, -1, __ATOMIC_RELAXED);
	if (pp_solo_sub_fetch(&p->fd_refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	__atomic_store_n(&p->state, PP_PIPE_DEAD, __ATOMIC_RELEASE);
	pipe_try_free(p);
}

PP_COMMON bool pp_pipe_enter(struct pp_pipe *p)
{
	pp_solo_fetch_add(&p->users, 1, __ATOMIC_ACQ_REL);
	if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == PP_PIPE_LIVE)
		return true;
	pp_pipe_leave(p);
	return false;
}

PP_COMMON void pp_pipe_leave(struct pp_pipe *p)
{
	if (pp_solo_sub_fetch(&p->users, 1, __ATOMIC_ACQ_REL) == 0 &&
	    __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == PP_PIPE_DEAD)
		pipe_try_free(p);
}

PP_COMMON void pp_pipe_mark_unsafe(struct pp_pipe *p, const char *why)
{
	struct pp_shared *s = pp_pipe_sh(p);
	bool first = !__atomic_exchange_n(&s->unsafe, 1, __ATOMIC_ACQ_REL);

	/* The state moved into the registry meanwhile: mark it there too. */
	if (pp_pipe_sh(p) != s)
		__atomic_store_n(&pp_pipe_sh(p)->unsafe, 1, __ATOMIC_RELEASE);
	if (first)
		pp_debug("pipe inode %llu: readers no longer known (%s): plain writes from now on",
			 (unsigned long long)pp_pipe_ino(p), why);
	__atomic_store_n(&p->reason, why, __ATOMIC_RELAXED);
	p->marked_here = true;
}

PP_COMMON void pp_pipe_set_nonblock(struct pp_pipe *p, bool on)
{
	struct pp_shared *s = pp_pipe_sh(p);

	__atomic_store_n(&s->nonblock, on, __ATOMIC_RELAXED);
	if (pp_pipe_sh(p) != s)
		__atomic_store_n(&pp_pipe_sh(p)->nonblock, on, __ATOMIC_RELAXED);
}

PP_COMMON void pp_pipe_note_capacity(struct pp_pipe *p, int capacity)
{
	struct pp_shared *s;
	uint32_t cur;

	if (capacity <= 0)
		return;
	cur = __atomic_load_n(&p->cap_own, __ATOMIC_RELAXED);
	while ((uint32_t)capacity > cur &&
	       !__atomic_compare_exchange_n(&p->cap_own, &cur, (uint32_t)capacity, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	s = pp_pipe_sh(p);
	cur = __atomic_load_n(&s->capacity_max, __ATOMIC_RELAXED);
	while ((uint32_t)capacity > cur &&
	       !__atomic_compare_exchange_n(&s->capacity_max, &cur, (uint32_t)capacity, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	if (pp_pipe_sh(p) != s)
		merge_into(pp_pipe_sh(p), s);
}

uint32_t pp_pipe_capacity(struct pp_pipe *p, int fd)
{
	uint32_t shared = __atomic_load_n(&pp_pipe_sh(p)->capacity_max, __ATOMIC_RELAXED);
	uint32_t own = __atomic_load_n(&p->cap_own, __ATOMIC_RELAXED);

	if (!own) {
		long cap = pp_fault(PP_FAULT_GETPIPESZ) ?: pp_sys_fcntl(fd, F_GETPIPE_SZ, 0);

		pp_pipe_note_capacity(p, cap > 0 ? (int)cap : 0);
		own = cap > 0 ? (uint32_t)cap : 0;
	}
	return own > shared ? own : shared;
}

PP_COMMON void pp_pipes_for_each(void (*fn)(struct pp_pipe *, void *), void *arg)
{
	uint32_t n = slots_in_use();

	for (uint32_t i = PP_MAX_PIPES - n; i < PP_MAX_PIPES; i++) {
		struct pp_pipe *p = &slots[i];

		if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != PP_PIPE_LIVE ||
		    !pp_pipe_enter(p))
			continue;
		fn(p, arg);
		pp_pipe_leave(p);
	}
}

static void trim_one(struct pp_pipe *p, void *plan)
{
	pp_rings_trim(&p->rings, plan);
}

void pp_pipes_trim_rings(uint64_t now_ns, bool pressure)
{
	struct pp_ring_trim plan;

	pp_ring_trim_plan(&plan, now_ns, pressure);
	pp_pipes_for_each(trim_one, &plan);
}

/* Shares @p, or makes it plain when it cannot be shared. True when shared. */
static bool share_or_plain(struct pp_pipe *p)
{
	if (!p->created_here)
		return false; /* its state stays each process's own (PPIPE_READERS=trust) */
	if (pp_pipe_share(p)) {
		/* The statistics count pipes by this reason (stats.h, "reason"). */
		const char *why = pp_reg_missing();

		pp_pipe_mark_unsafe(p, why ? why :
					     "no registry slot to share it with another process");
		return false;
	}
	return true;
}

PP_COMMON static void share_one(struct pp_pipe *p, void *arg)
{
	(void)arg;
	share_or_plain(p);
}

PP_COMMON void pp_pipes_share_all(void)
{
	if (pp_pipes_live())
		pp_pipes_for_each(share_one, NULL);
}

/* Shares @p and records the fork child's hold on its slot. */
PP_COMMON static void hold_for_child(struct pp_pipe *p, void *arg)
{
	(void)arg;
	if (share_or_plain(p))
		pp_reg_fork_hold(pp_pipe_sh(p));
}

PP_COMMON void pp_pipes_before_fork(void)
{
	/*
	 * The child will hold every fd the parent holds: its holds are taken
	 * here, before the parent can close its own ends and free the slot
	 * while the child has not run yet, and recorded as the child's (a
	 * failed fork leaves records nobody names, which a sweep gives back).
	 */
	if (pp_pipes_live())
		pp_pipes_for_each(hold_for_child, NULL);
}

PP_COMMON void pp_pipes_after_fork_child(void)
{
	uint32_t n = __atomic_load_n(&slots, __ATOMIC_RELAXED) ? slots_in_use() : 0;

	/*
	 * Only the forking thread came along: nobody is inside any pipe, and
	 * nothing is freed under this walk. A field is written only when it
	 * is not in its reset state already (no copy-on-write for nothing).
	 */
	for (uint32_t i = PP_MAX_PIPES - n; i < PP_MAX_PIPES; i++) {
		struct pp_pipe *p = &slots[i];

		if (__atomic_load_n(&p->users, __ATOMIC_RELAXED))
			p->users = 0;
		if (p->state != PP_PIPE_LIVE)
			continue;
		pp_rings_forget(&p->rings);
		pp_turn_forget(&p->turn);
		/* What it did in the parent is the parent's to report and explain. */
		for (int k = 0; k < PP_CNT_COUNT; k++) {
			if (p->cnt.v[k]) {
				memset(&p->cnt, 0, sizeof(p->cnt));
				break;
			}
		}
		if (p->path_told)
			p->path_told = 0;
		if (p->stdio_told)
			p->stdio_told = 0;
		if (p->last_fallback)
			p->last_fallback = NULL;
	}
}
