// SPDX-License-Identifier: MIT
/*
 * Pipe objects and the cross-process registry.
 *
 * Objects come from one type-stable array: memory is never unmapped, so a
 * reader that loaded a stale fd-cache entry can still look at the object
 * and see, by its generation, that it was freed or reused. The free list
 * and the list of live pipes are guarded by a spin lock that is only
 * tried, never waited on without bound, so a signal handler that creates
 * a pipe while its thread holds the lock gets an untracked pipe instead
 * of a deadlock.
 */
#include "pipe.h"

#include "fault.h"
#include "log.h"
#include "registry.h"
#include "ring.h"
#include "turn.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PP_MAX_PIPES 65536

struct pp_slot {
	struct pp_pipe p;
	uint32_t gen;
	int32_t next_free; /* index + 1; 0 = end */
};

static struct pp_slot *slots; /* PP_MAX_PIPES, type-stable */
static int32_t free_head; /* index + 1 */
static uint32_t slots_used; /* high-water mark */
static int list_lock;
static struct pp_pipe *live; /* list of live pipes */
static struct pp_shared private_sh; /* for pipes outside the registry */

/*
 * The list lock is taken with all signals blocked, so a handler can never
 * interrupt its holder in the same thread; other holders keep it for a
 * few pointer updates only.
 */
static void list_lock_sigsafe(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, old, _NSIG / 8);
	while (__atomic_exchange_n(&list_lock, 1, __ATOMIC_ACQUIRE))
		__builtin_ia32_pause();
}

static void list_unlock_sigsafe(const sigset_t *old)
{
	__atomic_store_n(&list_lock, 0, __ATOMIC_RELEASE);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, old, NULL, _NSIG / 8);
}

static void *map_once(void **where, size_t len, int flags)
{
	void *p = __atomic_load_n(where, __ATOMIC_ACQUIRE);
	void *expected = NULL;

	if (p)
		return p;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (!__atomic_compare_exchange_n(where, &expected, p, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		munmap(p, len);
		return expected;
	}
	return p;
}

uint32_t pp_pipe_gen(const struct pp_pipe *p)
{
	return __atomic_load_n(&((const struct pp_slot *)p)->gen, __ATOMIC_ACQUIRE);
}

uint32_t pp_pipe_index(const struct pp_pipe *p)
{
	return (uint32_t)((const struct pp_slot *)p - slots);
}

struct pp_pipe *pp_pipe_at(uint32_t index)
{
	return slots && index < PP_MAX_PIPES ? &slots[index].p : NULL;
}

static void registry_release(struct pp_pipe *p)
{
	if (p->shared && !p->released)
		pp_reg_put(p->sh);
}

static struct pp_pipe *pipe_new(uint64_t ino, struct pp_shared *sh, bool created_here, int capacity)
{
	struct pp_slot *s = NULL;
	struct pp_pipe *p;

	sigset_t old;

	if (!map_once((void **)&slots, PP_MAX_PIPES * sizeof(struct pp_slot), MAP_PRIVATE)) {
		pp_reg_put(sh);
		return NULL;
	}
	list_lock_sigsafe(&old);
	if (free_head) {
		s = &slots[free_head - 1];
		free_head = s->next_free;
	} else if (slots_used < PP_MAX_PIPES) {
		s = &slots[slots_used++];
	}
	if (!s) {
		list_unlock_sigsafe(&old);
		pp_reg_put(sh);
		return NULL;
	}
	p = &s->p;
	memset(p, 0, sizeof(*p));
	pp_turn_trial_init(&p->turn_trial);
	p->ino = ino;
	p->created_here = created_here;
	/* Outside the registry (trust mode, inherited pipes) nothing is shared. */
	p->sh = sh ? sh : &private_sh;
	p->shared = sh != NULL;
	p->next = live;
	live = p;
	list_unlock_sigsafe(&old);
	pp_pipe_note_capacity(p, capacity);
	return p;
}

struct pp_pipe *pp_pipe_new(uint64_t ino, bool created_here, int capacity)
{
	struct pp_shared *sh = NULL;

	/* Without a registry slot nothing could follow it across exec: plain. */
	if (created_here && !(sh = pp_reg_get(ino, true)))
		return NULL;
	return pipe_new(ino, sh, created_here, capacity);
}

struct pp_pipe *pp_pipe_adopt(uint64_t ino, int capacity)
{
	struct pp_shared *sh = pp_fault(PP_FAULT_ADOPT) ? NULL : pp_reg_get(ino, false);
	struct pp_pipe *p;

	if (!sh)
		return NULL;
	p = pipe_new(ino, sh, true, capacity);
	if (p) {
		p->accel = true;
		p->reason = "inherited across exec, readers confirmed";
	}
	return p;
}

/* Frees @p once it is dead and nobody is inside it. */
static void pipe_try_free(struct pp_pipe *p)
{
	struct pp_slot *s = (struct pp_slot *)p;
	int expected = PP_PIPE_DEAD;
	sigset_t old;

	if (__atomic_load_n(&p->users, __ATOMIC_ACQUIRE))
		return;
	/* DEAD -> FREED claims the right to free it, exactly once. */
	if (!__atomic_compare_exchange_n(&p->state, &expected, PP_PIPE_FREED, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	__atomic_fetch_add(&s->gen, 1, __ATOMIC_RELEASE);
	pp_pipe_report_closed(p);
	pp_rings_free(p);
	registry_release(p);

	list_lock_sigsafe(&old);
	for (struct pp_pipe **pp = &live; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	s->next_free = free_head;
	free_head = (int32_t)(s - slots) + 1;
	list_unlock_sigsafe(&old);
}

void pp_pipe_get_fd(struct pp_pipe *p, enum pp_end end)
{
	if (end == PP_END_WRITE)
		__atomic_fetch_add(&p->wfd_refs, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&p->fd_refs, 1, __ATOMIC_RELAXED);
}

void pp_pipe_put_fd(struct pp_pipe *p, enum pp_end end)
{
	if (end == PP_END_WRITE)
		__atomic_fetch_sub(&p->wfd_refs, 1, __ATOMIC_RELAXED);
	if (__atomic_sub_fetch(&p->fd_refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	__atomic_store_n(&p->state, PP_PIPE_DEAD, __ATOMIC_RELEASE);
	pipe_try_free(p);
}

bool pp_pipe_enter(struct pp_pipe *p)
{
	__atomic_fetch_add(&p->users, 1, __ATOMIC_ACQ_REL);
	if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == PP_PIPE_LIVE)
		return true;
	pp_pipe_leave(p);
	return false;
}

void pp_pipe_leave(struct pp_pipe *p)
{
	if (__atomic_sub_fetch(&p->users, 1, __ATOMIC_ACQ_REL) == 0 &&
	    __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == PP_PIPE_DEAD)
		pipe_try_free(p);
}

void pp_pipe_mark_unsafe(struct pp_pipe *p, const char *why)
{
	if (!__atomic_exchange_n(&p->sh->unsafe, 1, __ATOMIC_ACQ_REL))
		pp_debug("pipe inode %llu: readers no longer known (%s): plain writes from now on",
			 (unsigned long long)p->ino, why);
	__atomic_store_n(&p->reason, why, __ATOMIC_RELAXED);
	p->marked_here = true;
}

void pp_pipe_note_capacity(struct pp_pipe *p, int capacity)
{
	uint32_t cur = __atomic_load_n(&p->sh->capacity_max, __ATOMIC_RELAXED);

	while (capacity > 0 && (uint32_t)capacity > cur &&
	       !__atomic_compare_exchange_n(&p->sh->capacity_max, &cur, (uint32_t)capacity, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

void pp_pipes_for_each(void (*fn)(struct pp_pipe *, void *), void *arg)
{
	sigset_t old;

	list_lock_sigsafe(&old);
	for (struct pp_pipe *p = live; p; p = p->next)
		fn(p, arg);
	list_unlock_sigsafe(&old);
}

static void hold_for_child(struct pp_pipe *p, void *arg)
{
	(void)arg;
	if (p->shared && !p->released)
		__atomic_fetch_add(&p->sh->holders, 1, __ATOMIC_ACQ_REL);
}

void pp_pipes_before_fork(void)
{
	/*
	 * The child will hold every fd the parent holds: its holds are taken
	 * here, before the parent can close its own ends and free the slot
	 * while the child has not run yet. (A failed fork leaves them taken:
	 * the slots then outlive their pipes, which only costs registry room.)
	 */
	pp_pipes_for_each(hold_for_child, NULL);
}

void pp_pipes_after_fork_child(void)
{
	list_lock = 0;
	for (struct pp_pipe *p = live; p; p = p->next) {
		p->users = 0;
		pp_rings_forget(p);
		pp_turn_forget(p);
	}
}

static void exec_release(struct pp_pipe *p, void *arg)
{
	(void)arg;
	if (!p->shared || p->released || pp_pipe_unsafe(p))
		return;
	p->released = true;
	pp_reg_put(p->sh);
}

void pp_pipes_exec_release(void)
{
	pp_pipes_for_each(exec_release, NULL);
}

static void exec_reacquire(struct pp_pipe *p, void *arg)
{
	struct pp_shared *sh;

	(void)arg;
	if (!p->released)
		return;
	p->released = false;
	if (__atomic_load_n(&p->sh->ino, __ATOMIC_ACQUIRE) == p->ino) {
		__atomic_fetch_add(&p->sh->holders, 1, __ATOMIC_ACQ_REL);
		return;
	}
	/* Nobody else held it, so it was safe: a fresh slot says the same. */
	sh = pp_reg_get(p->ino, true);
	if (sh) {
		p->sh = sh;
		return;
	}
	p->shared = false;
	p->sh = &private_sh;
	p->accel = false;
	p->reason = "registry full after a failed exec";
}

void pp_pipes_exec_reacquire(void)
{
	pp_pipes_for_each(exec_reacquire, NULL);
}
