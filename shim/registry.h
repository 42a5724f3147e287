/* SPDX-License-Identifier: MIT */
/*
 * The pipe registry: one shared memory segment per process tree, so that
 * every process that runs libppipe sees the same verdict about each pipe,
 * across fork and across exec (docs/design.md, "The registry across fork
 * and exec", and "How the registry stays clean").
 *
 * It is a System V shared memory segment, made when the first pipe of the
 * tree crosses into another process and marked for removal at once: the
 * kernel frees it when the last process of the tree that maps it is gone,
 * however it ended. Fork children inherit the mapping; an exec passes the
 * segment's id and a random key in PPIPE_REGISTRY, and the new image
 * attaches it again when libppipe starts there, after checking that it
 * belongs to its own user and is not open to anyone else. No fd is ever
 * handed on: a program sees nothing of it.
 *
 * The segment holds one slot (struct pp_shared) per pipe that crossed,
 * and records. A record belongs to one process: it lists the slots that
 * process holds (an entry per pipe), or, for an exec, the pipes the image
 * to come is handed, as charges: a pipe is plain while any charge on it
 * is pending. When libppipe starts in the image described, it claims its
 * record, which turns the charges into its own holds. An image that never
 * runs libppipe (static, setuid, stripped environment) never claims it,
 * and once its claim window has passed its charges turn into the pipe's
 * permanent plain verdict and the record is reused.
 *
 * Every hold and charge has an owner, so nothing outlives what it stands
 * for: a process that ends gives its holds back, and when one does not
 * (SIGKILL, a crash, an exit libppipe did not see), a sweep finds its
 * records by the owner's pid and start time and gives them back. Sweeps
 * run off the hot paths, when the registry fills up, and each is bounded.
 * Whatever a sweep decides, it can only ever make a pipe plain: a charge
 * is lifted by the claim of the image it describes and by nothing else.
 *
 * The segment is shared with every process of the tree, so its contents
 * are untrusted input: every index is checked against this library's own
 * constants, no pointer is ever stored in it, and a damaged or foreign
 * segment only makes pipes plain.
 *
 * Layer: pipes (may use: pipes, resources, base).
 */
#ifndef PP_REGISTRY_H
#define PP_REGISTRY_H

#include "registry_layout.h"
#include "stats.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The registry slot of pipe @ino, held by this process: found (another
 * process made it) or, with @create, new. NULL when there is no registry,
 * @ino has no slot (and !@create), or the registry is full even after a
 * sweep; the pipe is then not accelerated.
 */
struct pp_shared *pp_reg_get(uint64_t ino, bool create);
/* Gives this process's hold on @s back; the slot is free once nothing holds or charges it. */
void pp_reg_put(struct pp_shared *s);
/*
 * One more hold of this process on @s, if it still describes pipe @ino
 * (an exec that failed takes its holds back). false when it does not, or
 * there is no room to record the hold.
 */
bool pp_reg_hold(struct pp_shared *s, uint64_t ino);

/* The slot of @ino without taking it (NULL if none). */
struct pp_shared *pp_reg_find(uint64_t ino);

/*
 * Fork: before it, pp_reg_fork_prepare() and one pp_reg_fork_hold() per
 * slot the child will hold (they are recorded as the child's, made by
 * this process); after it, pp_reg_fork_parent() in the parent, with the
 * child's pid when fork() returned it (it names the child's records: no
 * system call in the child), else 0, and pp_reg_fork_child() in the child,
 * which makes them its own (and names them itself when @named is false).
 * A child that never runs (a failed fork) leaves records that name no
 * process: a sweep gives them back.
 */
void pp_reg_fork_prepare(void);
void pp_reg_fork_hold(struct pp_shared *s);
void pp_reg_fork_parent(pid_t child);
/*
 * Inline the test of whether there is anything to do: a fork child of a
 * process without records runs no code of registry.c (each code page a
 * fork child runs is a page fault there).
 */
extern int pp_reg_nforked, pp_reg_nmine, pp_reg_clock_reads;
void pp_reg_fork_child_work(bool named);
static inline void pp_reg_fork_child(bool named)
{
	if (__atomic_load_n(&pp_reg_nforked, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&pp_reg_nmine, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&pp_reg_clock_reads, __ATOMIC_RELAXED))
		pp_reg_fork_child_work(named);
}

/*
 * This process is ending: gives back everything it holds, and its records.
 * (An exec hands them to the new image instead: pp_reg_exec_begin.)
 */
void pp_reg_release_all_work(void);
static inline void pp_reg_release_all(void)
{
	if (__atomic_load_n(&pp_reg_nmine, __ATOMIC_RELAXED))
		pp_reg_release_all_work();
}

/*
 * Joins the registry this image inherited (PPIPE_REGISTRY in @envp), at
 * start-up. Returns 0, or -errno when there is none or it is not usable.
 */
int pp_reg_join(char **envp);

/*
 * An exec being prepared. pp_reg_exec_begin charges the pipes whose ends
 * the image to come gets, in an exec record of its own, and fills @env
 * with "PPIPE_REGISTRY=..." for the new image's environment, which also
 * names this process's own records when the image is this process
 * (PP_EXEC_SELF): the image gives their holds back when it starts, or,
 * if it never runs libppipe, a sweep does once the process is gone. So an
 * exec gives nothing back before it happens, and one that fails has
 * nothing to take again: pp_reg_exec_failed only undoes the charges.
 */
enum pp_exec_who {
	PP_EXEC_SELF, /* execve() in this process */
	PP_EXEC_VFORK_CHILD, /* in a vfork child, whose records are its parent's */
	PP_EXEC_SPAWN_CHILD, /* posix_spawn(): a child not made yet */
};
#define PP_EXEC_HANDED_MAX 8 /* own records an exec hands on (more: a sweep's) */
struct pp_exec_charge {
	int rec; /* record index, or -1 */
	uint64_t own; /* the record's owner word as made (registry.c) */
	char env[128]; /* PPIPE_REGISTRY=<id>.<key>:<record>|-[:<handed>,...] */
};
/*
 * @comm: the name the kernel will give it (basename of the path).
 * @slot/@inos/@n: the pipes whose ends the image gets (their slots and
 * inodes). Returns 0, or -errno when
 * the exec cannot be described (the caller then marks the pipes unsafe).
 */
int pp_reg_exec_begin(struct pp_exec_charge *c, const char *comm, struct pp_shared *const *slot,
		      const uint64_t *inos, int n, enum pp_exec_who who);
void pp_reg_exec_failed(struct pp_exec_charge *c);
/*
 * For PP_EXEC_SPAWN_CHILD, the record names the child once it exists:
 * pp_reg_exec_spawned(c, pid).
 */
void pp_reg_exec_spawned(struct pp_exec_charge *c, pid_t pid);

/*
 * In the new image, at start-up: lifts the charges of the record that
 * describes this process, if there is one, and holds its pipes instead;
 * gives back the holds of the image that exec'd this one. Returns how
 * many pipes it holds now, or -ESRCH when the record was not this
 * image's (its pipes stay pending).
 */
int pp_reg_exec_claim(void);

/*
 * The claimed hold on pipe @ino, handed to the caller (which keeps it in
 * the pipe's object): the slot index, or -ENOENT when there is none left.
 */
long pp_reg_claimed_take(uint64_t ino);
/* Slot @slot if it still holds pipe @ino, else NULL. */
struct pp_shared *pp_reg_slot_at(long slot, uint64_t ino);
/* Claimed pipes not taken over by an fd yet. */
int pp_reg_claimed_left(void);
/* Before fork: the child's holds on the claimed pipes not taken over (pp_reg_fork_hold). */
void pp_reg_claimed_fork(void);

/*
 * Runs a sweep now, whatever the schedule (a full registry runs its own):
 * for tests, which cannot wait for a tree's week. Returns whether it gave
 * anything back.
 */
bool pp_reg_sweep_now(void);

/* What the registry holds now, for the statistics (all 0 without one). */
void pp_reg_occupancy(struct pp_stats_registry *o);
/*
 * Why this process has no registry, when it tried to make one and did not
 * (a static string: the host's shared-memory segment ids are scarce, or
 * shmget() refused), else NULL.
 */
const char *pp_reg_missing(void);

#endif
