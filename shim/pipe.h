/* SPDX-License-Identifier: MIT */
/*
 * Pipe objects. Each pipe libppipe tracks has one struct pp_pipe per
 * process, shared by every fd of this process that refers to it. Its
 * cross-process state (struct pp_shared: the reader-safety verdict, the
 * largest capacity seen, O_NONBLOCK of the write end) lives in the object
 * itself while the pipe stays in this process, and moves into a slot of
 * the registry (registry.h) the first time the pipe crosses a fork, an
 * exec or a spawn, so that every process of the tree then sees the same
 * state. A pipe that never crosses costs no registry slot, no shared
 * page and no system call beyond the one that learns its inode.
 *
 * Lifetime: a pp_pipe is referenced by its fds (fd_refs) and by threads
 * inside it (users). The last fd going away marks it dead; whoever drops
 * the last reference frees its rings and gives the slot back.
 *
 * Layer: pipes (may use: pipes, resources, base).
 */
#ifndef PP_PIPE_H
#define PP_PIPE_H

#include "registry.h"
#include "ring.h"
#include "stats.h"
#include "turn.h"

#include <stdbool.h>
#include <stdint.h>

enum pp_end { PP_END_READ = 0, PP_END_WRITE = 1 };
/* Pipe objects one process can track at once. */
#define PP_MAX_PIPES 65536

/* A slot never used is UNUSED (zero); a freed one FREED until it is taken again. */
enum { PP_PIPE_UNUSED, PP_PIPE_LIVE, PP_PIPE_DEAD, PP_PIPE_FREED };

/*
 * Laid out by cache line, for writer threads of one pipe: what every write
 * reads and hardly anyone writes, then the pipe's own state (also read by
 * every write), then what every write changes, apart, so that the
 * writers' atomics do not take the lines the others read away from them.
 */
struct pp_pipe {
	/* Kept across reuse of the slot (see users below). */
	uint32_t gen; /* bumped when it is freed: a stale reference sees it (atomic) */
	uint32_t next_free; /* while free: index + 1 of the next free object, 0 = end (atomic) */
	/* From here to users, set afresh when the slot is taken (pp_pipe_new(), field by field). Read-mostly: */
	uint64_t ino; /* 0 until learned (pp_fdt_learn_ino): pipe() does not ask (atomic) */
	struct pp_shared *sh; /* &local, or its registry slot once shared (atomic) */
	const char *reason; /* why it is (not) accelerated, for the stats */
	bool accel; /* writes may take the vmsplice path */
	uint32_t cap_own; /* largest capacity this process saw itself (atomic) */
	bool created_here; /* by pipe() in this tree, or inherited through a confirmed exec */
	bool shared; /* its state is a registry slot (it crossed a fork, exec or spawn) */
	bool marked_here; /* made unsafe by this process (or its parent): reason says why */
	uint64_t engine_word; /* what the engine holds for it (engine.h), 0 none (atomic) */
	const char *last_fallback; /* why its last large write took the real call */
	int path_told; /* PPIPE_DEBUG said which path it took, in this process */
	int stdio_told; /* PPIPE_DEBUG said that stdio wrote into it out of sight */
	/* Its state while it has not crossed into another process: */
	struct pp_shared local __attribute__((aligned(64)));
	/* Written by every write: */
	struct pp_counters cnt __attribute__((aligned(64)));
	struct pp_rings rings; /* one per writing thread (ring.h) */
	int fd_refs; /* fds of this process (atomic) */
	int wfd_refs; /* of them, write ends (atomic) */
	struct pp_turn turn; /* writer turns (turn.h) */
	/*
	 * Kept across reuse of the slot: a thread walking the pipes may hold
	 * users on a slot while it is freed and taken again.
	 */
	int users __attribute__((aligned(64))); /* threads inside it (atomic) */
	int state; /* PP_PIPE_* (atomic) */
};

/* @p's inode, or 0 while nobody needed it yet (see pp_fdt_learn_ino). */
static inline uint64_t pp_pipe_ino(const struct pp_pipe *p)
{
	return __atomic_load_n(&p->ino, __ATOMIC_ACQUIRE);
}

/* The state @p reads and writes now: its own, or its registry slot. */
static inline struct pp_shared *pp_pipe_sh(const struct pp_pipe *p)
{
	return __atomic_load_n(&p->sh, __ATOMIC_ACQUIRE);
}

/*
 * Creates the object for a new pipe (pipe/pipe2) or an inherited one
 * (PPIPE_READERS=trust), its state private to this process; the objects
 * are mapped with the fd table (fdtable.h, pp_fdt_init()). @capacity
 * may be 0 (not known yet: the engine asks before the first ring).
 * Returns NULL when libppipe cannot track it.
 */
struct pp_pipe *pp_pipe_new(uint64_t ino, bool created_here, int capacity);
/*
 * Moves @p's state into the registry (created on the first call), before
 * @p crosses into another process; its inode must be known. Returns 0
 * (shared, now or before), or -errno when there is no room or no inode:
 * the caller then makes the pipe plain.
 */
int pp_pipe_share(struct pp_pipe *p);
/*
 * The object of a pipe this image inherited through exec, whose registry
 * slot @sh it holds (the hold passes to the object). Its readers are
 * known while no holder is pending. NULL when there is no room.
 */
struct pp_pipe *pp_pipe_adopt(uint64_t ino, struct pp_shared *sh);
/* Frees @p, new and named by no fd (pp_fdt_set_new() could not hold its fds). */
void pp_pipe_discard(struct pp_pipe *p);
/* An fd now refers to @p / no longer does. */
void pp_pipe_get_fd(struct pp_pipe *p, enum pp_end end);
void pp_pipe_put_fd(struct pp_pipe *p, enum pp_end end);
/* A writer enters / leaves the engine. pp_pipe_enter fails once dead. */
bool pp_pipe_enter(struct pp_pipe *p);
void pp_pipe_leave(struct pp_pipe *p);

/*
 * Readers can no longer be established (an exec, a splice or tee out of
 * it): stop reusing pages of this pipe in every process, for good.
 */
void pp_pipe_mark_unsafe(struct pp_pipe *p, const char *why);
static inline bool pp_pipe_unsafe(const struct pp_pipe *p)
{
	const struct pp_shared *s = pp_pipe_sh(p);

	/*
	 * Unsafe for good, or an exec'd holder not confirmed yet, or the
	 * slot no longer describes this pipe (the registry is untrusted).
	 */
	return __atomic_load_n(&s->unsafe, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&s->pending, __ATOMIC_ACQUIRE) ||
	       (p->shared && __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE) != p->ino);
}
/*
 * O_NONBLOCK of the write end's open file, as pipe2/F_SETFL/FIONBIO left
 * it in any libppipe process of the tree (nobody else can reach that open
 * file while the pipe is still accelerated: an exec that passes it on
 * marks the pipe unsafe).
 */
static inline bool pp_pipe_nonblock(const struct pp_pipe *p)
{
	return __atomic_load_n(&pp_pipe_sh(p)->nonblock, __ATOMIC_RELAXED);
}
void pp_pipe_set_nonblock(struct pp_pipe *p, bool on);

/* Why @p is (not) accelerated; written by whichever writer last found out. */
static inline const char *pp_pipe_reason(const struct pp_pipe *p)
{
	const char *r = __atomic_load_n(&p->reason, __ATOMIC_RELAXED);

	return r ? r : "";
}

/*
 * The path @p's large writes take as far as the pipe decides ("vmsplice"
 * or "passthrough"; an engine that cannot work overrides it), and in
 * @why, the reason, for the statistics.
 */
static inline const char *pp_pipe_path(const struct pp_pipe *p, const char **why)
{
	*why = pp_pipe_reason(p);
	if (!p->accel)
		return "passthrough";
	if (pp_pipe_unsafe(p)) {
		const struct pp_shared *s = pp_pipe_sh(p);

		if (!__atomic_load_n(&s->unsafe, __ATOMIC_ACQUIRE) &&
		    __atomic_load_n(&s->pending, __ATOMIC_ACQUIRE))
			*why = "an exec'd holder has not confirmed (no libppipe there, yet or at all)";
		else if (!p->marked_here)
			*why = "readers no longer known (marked by another process)";
		return "passthrough";
	}
	return "vmsplice";
}

/* @p ends: its counters go to the process totals, its story (if listed) to the report. */
static inline void pp_pipe_report_closed(const struct pp_pipe *p)
{
	long entry = pp_stats_fold_closed(&p->cnt);
	const char *why, *path;

	if (entry < 0)
		return;
	path = pp_pipe_path(p, &why);
	pp_stats_list_closed(entry, pp_pipe_ino(p), path, why,
			     __atomic_load_n(&p->last_fallback, __ATOMIC_RELAXED), &p->cnt);
}

/* Records a capacity seen by F_SETPIPE_SZ/F_GETPIPE_SZ. */
void pp_pipe_note_capacity(struct pp_pipe *p, int capacity);
/*
 * The capacity the reuse rule may count on for @p, written through @fd:
 * the largest any process of the tree saw (the shared state), and never
 * less than what this process saw itself. The shared value lives in a
 * file every process of the tree can write, so a damaged one must not
 * make the rule free pages early: this process asks the kernel once
 * (F_GETPIPE_SZ, at its first large write to @p). 0 when nothing is known.
 */
uint32_t pp_pipe_capacity(struct pp_pipe *p, int fd);

/* Every pipe object, by index: PP_MAX_PIPES of them, never unmapped (NULL before the first). */
extern struct pp_pipe *pp_pipes;
/*
 * Makes @objs (PP_MAX_PIPES of them, zeroed) the pipe objects, unless
 * there are some already (false): the fd table maps them (fdtable.c).
 */
bool pp_pipes_place(struct pp_pipe *objs);

/* Type-stable identity: index and generation (bumped when freed). */
static inline uint32_t pp_pipe_index(const struct pp_pipe *p)
{
	return (uint32_t)(p - __atomic_load_n(&pp_pipes, __ATOMIC_RELAXED));
}
static inline uint32_t pp_pipe_gen(const struct pp_pipe *p)
{
	return __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);
}
static inline struct pp_pipe *pp_pipe_at(uint32_t index)
{
	struct pp_pipe *t = __atomic_load_n(&pp_pipes, __ATOMIC_ACQUIRE);

	return t && index < PP_MAX_PIPES ? &t[index] : NULL;
}

/*
 * Calls @fn for every live pipe (stats at exit; fork), entered for the
 * call. Not for hot paths: it walks every slot ever used.
 */
void pp_pipes_for_each(void (*fn)(struct pp_pipe *, void *), void *arg);
/* Trims the rings of every pipe (ring.h, pp_ring_trim_plan): the engine calls it now and then. */
void pp_pipes_trim_rings(uint64_t now_ns, bool pressure);
/* Live pipes in this process: 0 means libppipe has nothing to do at fork or exec. */
int pp_pipes_live(void);
/*
 * Before a pipe may cross into another process (vfork, exec, spawn): every
 * live pipe made here moves into the registry, or turns plain.
 */
void pp_pipes_share_all(void);
/*
 * Before fork (after pp_reg_fork_prepare): every live pipe moves into the
 * registry (the child shares it), and the child's holds are taken and
 * recorded as the child's by the parent.
 */
void pp_pipes_before_fork(void);
/* In a fork child: reset what only the parent's threads used. */
void pp_pipes_after_fork_child(void);

#endif
