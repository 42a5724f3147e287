/* SPDX-License-Identifier: MIT */
/*
 * Pipe objects. Each pipe libppipe tracks has one struct pp_pipe per
 * process, shared by every fd of this process that refers to it, and one
 * struct pp_shared in the registry, a MAP_SHARED region inherited by fork,
 * so that every process of the tree sees the same reader-safety verdict.
 *
 * Lifetime: a pp_pipe is referenced by its fds (fd_refs) and by writers in
 * flight (users). The last fd going away marks it dead; whoever drops the
 * last reference frees its rings and the object itself.
 */
#ifndef PP_PIPE_H
#define PP_PIPE_H

#include "stats.h"
#include "turn.h"

#include <stdbool.h>
#include <stdint.h>

struct pp_ring;

/* Cross-process state of one pipe. */
struct pp_shared {
	uint64_t ino; /* 0: free slot */
	uint32_t unsafe; /* a reader may keep pages: no reuse, ever again */
	uint32_t capacity_max; /* largest capacity any process saw, bytes */
	uint32_t holders; /* processes holding an fd of it */
	uint32_t nonblock; /* the write end's open file has O_NONBLOCK */
	uint32_t pending; /* exec'd images that got an end and have not confirmed */
	uint32_t spare;
};

enum pp_end { PP_END_READ = 0, PP_END_WRITE = 1 };
enum { PP_PIPE_LIVE, PP_PIPE_DEAD, PP_PIPE_FREED };

struct pp_pipe {
	uint64_t ino;
	struct pp_shared *sh;
	const char *reason; /* why it is (not) accelerated, for the stats */
	bool accel; /* writes may take the vmsplice path */
	bool created_here; /* by pipe() in this tree, or inherited through a confirmed exec */
	bool shared; /* its state is a registry slot (not private to this process) */
	bool released; /* its registry hold went to the image of an exec in progress */
	int fd_refs; /* fds of this process (atomic) */
	int wfd_refs; /* of them, write ends (atomic) */
	uint64_t stage_word; /* its write-behind stage (stage.h), 0 none (atomic) */
	int users; /* writers inside the engine (atomic) */
	int state; /* PP_PIPE_LIVE, PP_PIPE_DEAD (no fd left), PP_PIPE_FREED */
	int lock; /* guards rings (spin; never held across a syscall) */
	int turn; /* tid of the writer pushing now, 0 none (turn.c) */
	int turn_waiters; /* writers waiting for the turn */
	struct pp_turn_trial turn_trial; /* PPIPE_TURNS=auto */
	int path_told; /* PPIPE_DEBUG said which path it took, in this process */
	const char *last_fallback; /* why its last large write took the real call */
	bool marked_here; /* made unsafe by this process (or its parent): reason says why */
	struct pp_ring *rings;
	struct pp_counters cnt;
	struct pp_pipe *next; /* list of live pipes, for stats and fork */
};

/*
 * Creates the object for a new pipe (pipe/pipe2) or an inherited one
 * (PPIPE_READERS=trust). Returns NULL when libppipe cannot track it.
 */
struct pp_pipe *pp_pipe_new(uint64_t ino, bool created_here, int capacity);
/*
 * Takes over a pipe this image inherited through exec, if the registry
 * knows it. Its readers are known while no holder is pending.
 */
struct pp_pipe *pp_pipe_adopt(uint64_t ino, int capacity);
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
	const struct pp_shared *s = p->sh;

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
	return __atomic_load_n(&p->sh->nonblock, __ATOMIC_RELAXED);
}
static inline void pp_pipe_set_nonblock(struct pp_pipe *p, bool on)
{
	__atomic_store_n(&p->sh->nonblock, on, __ATOMIC_RELAXED);
}

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
		if (!__atomic_load_n(&p->sh->unsafe, __ATOMIC_ACQUIRE) &&
		    __atomic_load_n(&p->sh->pending, __ATOMIC_ACQUIRE))
			*why = "an exec'd holder has not confirmed (no libppipe there, yet or at all)";
		else if (!p->marked_here)
			*why = "readers no longer known (marked by another process)";
		return "passthrough";
	}
	return "vmsplice";
}

/* @p ends: its counters go to the process totals, its story to the report. */
static inline void pp_pipe_report_closed(const struct pp_pipe *p)
{
	const char *why, *path = pp_pipe_path(p, &why);

	pp_stats_fold_pipe(p->ino, path, why, __atomic_load_n(&p->last_fallback, __ATOMIC_RELAXED),
			   &p->cnt);
}

/* Records a capacity seen by F_SETPIPE_SZ/F_GETPIPE_SZ. */
void pp_pipe_note_capacity(struct pp_pipe *p, int capacity);

/* Type-stable identity: slot index and generation (bumped when freed). */
uint32_t pp_pipe_index(const struct pp_pipe *p);
uint32_t pp_pipe_gen(const struct pp_pipe *p);
struct pp_pipe *pp_pipe_at(uint32_t index);

/* Calls @fn for every live pipe (stats at exit; fork). */
void pp_pipes_for_each(void (*fn)(struct pp_pipe *, void *), void *arg);
/* Before fork: the child's registry holds, taken by the parent. */
void pp_pipes_before_fork(void);
/* In a fork child: reset what only the parent's threads used. */
void pp_pipes_after_fork_child(void);
/*
 * An exec is about to replace this image: its registry holds go (the new
 * image takes its own); reacquire them if the exec fails. Pipes already
 * unsafe keep their hold, so their slot (and verdict) outlives the exec.
 */
void pp_pipes_exec_release(void);
void pp_pipes_exec_reacquire(void);

#endif
