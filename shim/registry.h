/* SPDX-License-Identifier: MIT */
/*
 * The pipe registry: one shared memory file per process tree, so that
 * every process that runs libppipe sees the same verdict about each pipe,
 * across fork and across exec (docs/design.md, "The registry across fork and exec").
 *
 * It is a memfd, made when the first pipe of the tree crosses into another
 * process (pipe.h). Fork children share its mapping; an exec passes it on
 * as an fd whose number (and the exec's record) travels in PPIPE_REGISTRY,
 * and the new image maps it again when libppipe starts in it. It holds,
 * per pipe inode, one struct pp_shared, and a table of exec records:
 * before an exec that hands pipe ends to a new program image, the
 * exec'ing process charges each such pipe as "pending" (a holder nobody
 * has vouched for yet) and describes the image to come (pid, command
 * name, when). When libppipe starts in that image, it claims its record,
 * which turns the charges into its own holds; it takes the pipe ends over
 * one by one when it first needs them (exec.h). An image that never runs
 * libppipe (static, setuid, stripped environment) never claims its
 * record, so its pipes stay plain for good: pending is what keeps a pipe
 * off the fast path, and only a claim by the image described ever lifts
 * it.
 *
 * The file is shared with every process of the tree, so its contents are
 * untrusted input: every index is checked against this library's own
 * constants, no pointer is ever stored in it, and a damaged or foreign
 * file only makes pipes plain.
 *
 * Layer: pipes (may use: pipes, resources, base).
 */
#ifndef PP_REGISTRY_H
#define PP_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Cross-process state of one pipe: a registry slot, or the pipe object's
 * own copy while the pipe has not crossed into another process (pipe.h).
 */
struct pp_shared {
	uint64_t ino; /* 0: free slot */
	uint32_t unsafe; /* a reader may keep pages: no reuse, ever again */
	uint32_t capacity_max; /* largest capacity any process saw, bytes */
	uint32_t holders; /* processes holding an fd of it */
	uint32_t nonblock; /* the write end's open file has O_NONBLOCK */
	uint32_t pending; /* exec'd images that got an end and have not confirmed */
	uint32_t spare;
};

/* Pipe ends of one exec, as charged in its record. */
#define PP_EXEC_MAX_PIPES 16

/*
 * The registry slot of pipe @ino, one holder more: found (another process
 * made it) or, with @create, new. NULL when there is no registry or it is
 * full; the pipe is then not accelerated.
 */
struct pp_shared *pp_reg_get(uint64_t ino, bool create);
/* One holder less; the slot is free once no holder and no charge is left. */
void pp_reg_put(struct pp_shared *s);

/* The slot of @ino without taking it (NULL if none). */
struct pp_shared *pp_reg_find(uint64_t ino);

/*
 * Joins the registry this image inherited (PPIPE_REGISTRY in @envp), at
 * start-up. Returns 0, or -errno when there is none or it is not usable.
 */
int pp_reg_join(char **envp);

/*
 * An exec record being prepared by the exec'ing process. pp_reg_exec_begin
 * charges the pipes, makes the registry fd the new image inherits and
 * fills @env with "PPIPE_REGISTRY=<fd>" for its environment;
 * pp_reg_exec_failed undoes it all when the exec returns.
 */
struct pp_exec_charge {
	int rec; /* record index, or -1 */
	int fd; /* the inherited registry fd, or -1 */
	char env[48]; /* PPIPE_REGISTRY=<fd>[:<record>] */
};
/*
 * @comm: the name the kernel will give it (basename of the path).
 * @slot/@inos/@n: the pipes whose ends the image gets (their slots and
 * inodes). Returns 0, or -errno when
 * the exec cannot be described (the caller then marks the pipes unsafe).
 */
int pp_reg_exec_begin(struct pp_exec_charge *c, const char *comm, struct pp_shared *const *slot,
		      const uint64_t *inos, int n, bool for_child);
void pp_reg_exec_failed(struct pp_exec_charge *c);
/*
 * With @for_child (posix_spawn: the image is a child not made yet), the
 * record names the child once it exists: pp_reg_exec_spawned(c, pid).
 */
void pp_reg_exec_spawned(struct pp_exec_charge *c, pid_t pid);

/*
 * In the new image, at start-up: lifts the charges of the record that
 * describes this process, if there is one, and holds its pipes instead.
 * Returns how many pipes it holds now, or -ESRCH when the record was not
 * this image's (its pipes stay pending).
 */
int pp_reg_exec_claim(void);

/*
 * The claimed hold on pipe @ino, handed to the caller (which keeps it in
 * the pipe's object): the slot index, or -ENOENT when there is none left.
 */
long pp_reg_claimed_take(uint64_t ino);
/* The slot of a claimed pipe @ino not yet taken over, or NULL. */
struct pp_shared *pp_reg_claimed_slot(uint64_t ino);
/* Slot @slot if it still holds pipe @ino, else NULL. */
struct pp_shared *pp_reg_slot_at(long slot, uint64_t ino);
/* Claimed pipes not taken over by an fd yet. */
int pp_reg_claimed_left(void);
/*
 * +1: one more hold on each claimed pipe not taken over (a fork child's);
 * -1: gives this process's back (exit, exec).
 */
void pp_reg_claimed_hold(int delta);

/* What the registry holds now, for the statistics (all 0 without one). */
struct pp_reg_occupancy {
	uint64_t slots, slots_max; /* pipe slots in use, and there are */
	uint64_t records, records_max; /* process records in use, and there are */
	uint64_t reclaimed; /* records of processes gone, given back, in all */
	uint64_t full; /* times a pipe stayed plain because the registry was full */
};
void pp_reg_occupancy(struct pp_reg_occupancy *o);

/* The registry's fd in this process (CLOEXEC), or -1. */
int pp_reg_fd(void);

#endif
