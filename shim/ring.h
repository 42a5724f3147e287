/* SPDX-License-Identifier: MIT */
/*
 * Rings: each writing thread has, per pipe, one page-aligned, pre-faulted
 * ring of pages it copies data into before vmsplice()ing it. A page may
 * be written again only once the pipe has let go of it (docs/design.md, "The reuse rule"):
 * either the thread has pushed at least capacity/PAGE_SIZE further slots
 * into the pipe since (the pipe cannot hold more, and it is FIFO), or
 * FIONREAD shows fewer bytes in the pipe than the thread pushed since.
 *
 * Layer: resources (may use: resources, base).
 */
#ifndef PP_RING_H
#define PP_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pp_ring {
	struct pp_ring *next; /* in its pipe's list (struct pp_rings) */
	long owner; /* tid of the writing thread */
	int busy; /* the owner is inside a write (signal re-entry) */
	char *data; /* size bytes, page-aligned */
	size_t size; /* multiple of the page size */
	size_t max_chunk; /* largest region one reservation may take */
	size_t head; /* next region starts here */
	uint64_t pushed_bytes;
	uint64_t pushed_slots;
	uint64_t verified_slots; /* every push before this one went into our pipe */
	int writer_fd; /* the program's fd of the last write, -1 before the first */
	uint32_t writer_epoch; /* its fd table epoch then (pp_core_writer) */
	uint64_t *mark_bytes; /* per page: pushed_bytes after its last push, 0 = never */
	uint64_t *mark_slots; /* per page: pushed_slots after its last push */
	size_t map_len; /* the whole mapping, header included */
	uint64_t last_use_ns; /* CLOCK_MONOTONIC of the owner's last write */
	size_t resident; /* data bytes not trimmed since the last use */
	/* Huge pages (thp.h): only for rings that can hold them. */
	bool thp; /* a 2 MiB multiple, 2 MiB aligned: it may switch backing */
	bool huge; /* asked for huge pages now */
	bool cold; /* this lap paid page faults: it is not counted */
	uint64_t lap_end; /* pushed_bytes at which this lap ends */
	uint64_t lap_ns, lap_bytes; /* time in write() and bytes so far this lap */
	/*
	 * Read and written under the list lock only, after what every write
	 * touches: which thread owns it, and when trimming asks again whether
	 * that thread still exists (and the gap after that).
	 */
	long owner_pid; /* the process it belongs to (its tgid) */
	uint64_t owner_serial; /* which thread: tids are reused, serials never (ring.c) */
	uint64_t check_use; /* last_use_ns when these were set */
	uint64_t check_at, check_gap;
};

/* The rings of one pipe, one per writing thread; kept in the pipe's object. */
struct pp_rings {
	struct pp_ring *head;
	int lock; /* guards head (a spin lock, never held across a system call) */
};

/*
 * The calling thread's ring in @set, created on first use. @gen_word is
 * the owner's incarnation counter (atomic): the thread's cache of rings
 * tells an owner that was freed and reused by it. NULL when the pool cap
 * is reached or memory cannot be had: the caller writes plainly.
 *
 * Rings of threads that exited (docs/design.md,
 * "Rings of threads that exited"): a thread that needs a new ring first asks
 * whether the owners of the others in @set still exist (tgkill(pid, tid,
 * 0)). It takes one whose owner is gone over, as it is (its pages, and
 * the evidence of the reuse rule, which is the ring's own pushes into the
 * pipe), and unmaps those too small for the pipe now; the others stay for
 * the next thread that needs one. Trimming unmaps the rings of exited
 * threads that nobody took over (pp_rings_trim).
 */
struct pp_ring *pp_ring_get(struct pp_rings *set, const uint32_t *gen_word, uint32_t capacity);

/*
 * Reserves @len bytes (rounded up to pages) at the ring's head, checking
 * the reuse rule on every page it covers. The rule's evidence is our own
 * pushes since, so it only holds if they all went into this pipe: when
 * the evidence is not yet covered by an identity check, @fd is checked to
 * still be pipe inode @ino. Returns the region's offset, -EBUSY when the
 * pipe may still reference part of it, or -ESTALE when @fd no longer
 * refers to the pipe (the ring must not be reused at all).
 *
 * With write-behind (stage.h) the pages go into staging pipe @stage_fd
 * first and move on into the pipe in order: @capacity_max is then both
 * pipes' together, and the exact test counts what both hold (the staging
 * pipe read first: a byte moving on between the two reads is counted
 * twice, never missed). @stage_fd is -1 otherwise.
 */
struct pp_ring_checks {
	uint64_t fionread;
	uint64_t identity;
};
long pp_ring_reserve(struct pp_ring *r, size_t len, int fd, int stage_fd, uint64_t ino,
		     uint32_t capacity_max, struct pp_ring_checks *checks);
/* Records that @bytes of the region at @off (page-aligned) went into the pipe. */
void pp_ring_pushed(struct pp_ring *r, size_t off, size_t bytes);
/*
 * Records that every push so far is known to have gone into the pipe: what
 * pp_ring_reserve()'s identity check would record, for a caller that holds
 * the pipe's file itself, checked, so that the check could not fail.
 */
static inline void pp_ring_verified(struct pp_ring *r)
{
	r->verified_slots = r->pushed_slots;
}
/*
 * The ring's owner is done with it for now (a write, a span) at @now: it
 * counts as used then, resident whole, and may be claimed again.
 */
static inline void pp_ring_release(struct pp_ring *r, uint64_t now)
{
	r->last_use_ns = now;
	r->resident = r->size;
	__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
}
/*
 * Moves the head past @len bytes at @off, to the next page boundary: @off
 * is a reserved region's start, or a place inside one of its pages (the
 * rest of a span after a partial commit, ppipe.h).
 */
void pp_ring_commit(struct pp_ring *r, size_t off, size_t len);

/*
 * A write of @bytes through ring @r (claimed busy) took @ns: counted for
 * the huge-page verdict while it is being measured; the ring switches
 * backing at the end of a lap, or at once when the verdict differs from
 * its backing. Nothing for rings that cannot hold huge pages.
 */
void pp_ring_account(struct pp_ring *r, uint64_t ns, size_t bytes);

/*
 * Trimming gives the memory of rings idle for PPIPE_IDLE_MS back to the
 * system, down to PPIPE_POOL_KEEP bytes each; under memory @pressure, all
 * of it, from rings idle for PPIPE_IDLE_MS / 2 (since the last look). It
 * is always safe: a page the pipe still holds keeps its contents, the
 * ring just gets a fresh one. pp_ring_trim_plan() says what goes at
 * @now_ns, pp_rings_trim() applies that to one pipe's rings (pipe.h walks
 * the pipes); cheap when nothing is idle.
 *
 * It also unmaps the rings of threads that exited: an idle ring's owner
 * is asked for once it is idle, then again after a gap that doubles each
 * time the owner is still there (up to 64 idle periods). After the pool
 * refused a ring (its cap), the next trim asks about every ring at once,
 * idle or not (@any_owner).
 */
struct pp_ring_trim {
	uint64_t now, idle;
	size_t keep;
	bool any_owner;
};
void pp_ring_trim_plan(struct pp_ring_trim *t, uint64_t now_ns, bool pressure);
void pp_rings_trim(struct pp_rings *set, const struct pp_ring_trim *t);
/* Bytes given back by trimming so far. */
uint64_t pp_rings_trimmed_bytes(void);
/* Rings of exited threads so far: taken over by another thread, and unmapped. */
uint64_t pp_rings_exited_reused(void);
uint64_t pp_rings_exited_freed(void);

/* Frees every ring of @set (its pipe is gone). */
void pp_rings_free(struct pp_rings *set);
/* In a fork child: the rings were not inherited (MADV_DONTFORK); forget them. */
void pp_rings_forget(struct pp_rings *set);
/* In a fork child: drop this thread's ring cache and the pool accounting. */
void pp_ring_after_fork_child(void);

/*
 * The calling thread's serial, as its rings' owner_serial says it (0
 * before its first ring): never the same for two threads of a process,
 * nor in a fork child for any thread of its parent.
 */
uint64_t pp_ring_self_serial(void);

/* Page size, read once. */
size_t pp_page_size(void);

#endif
