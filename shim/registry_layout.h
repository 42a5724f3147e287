/* SPDX-License-Identifier: MIT */
/*
 * The registry's segment (registry.h), as registry.c and registry_sweep.c
 * (and the tests that scribble on it) see it: the header, the records and
 * the slots, and the few steps both files take. Only struct pp_shared, a
 * pipe's state in a slot, is for the rest of shim/ (pipe.h keeps a copy
 * of its own until the pipe first crosses).
 *
 * Layer: pipes (may use: pipes, resources, base).
 */
#ifndef PP_REGISTRY_LAYOUT_H
#define PP_REGISTRY_LAYOUT_H

#include "syscall.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/*
 * Cross-process state of one pipe: a registry slot, or the pipe object's
 * own copy while the pipe has not crossed into another process (pipe.h).
 */
struct pp_shared {
	uint64_t ino; /* 0: never used; all ones: freed */
	uint32_t unsafe; /* a reader may keep pages: no reuse, ever again */
	uint32_t capacity_max; /* largest capacity any process saw, bytes */
	uint32_t holders; /* holds on record: processes holding an fd of it */
	uint32_t nonblock; /* the write end's open file has O_NONBLOCK */
	uint32_t pending; /* charges: exec'd images that got an end, not confirmed */
	uint32_t mark; /* what the last sweep found amiss here (registry.c) */
};

/* Pipe ends of one exec, as charged in its record. */
#define PP_EXEC_MAX_PIPES 16

#define REG_MAGIC 0x3467657270697070ull /* "ppipreg4" */
#define REG_VERSION 4
#define REG_SLOTS 16384u
#define REG_RECS 8192u
#define REC_ENTRIES PP_EXEC_MAX_PIPES
#define REG_PROBES 256u /* longest probe sequence: beyond it the registry is full */
#define REG_TOMB UINT64_MAX /* a slot freed in the middle of a probe sequence */
#define REG_VAR "PPIPE_REGISTRY="

struct reg_header {
	uint64_t magic;
	uint32_t version, slots, recs, slot_size, rec_size, entries;
	/* What may be used of them (a test's smaller registry), at most slots, recs. */
	uint32_t slots_limit, recs_limit;
	/* The claim window, ms (REG_CLAIM_WINDOW_NS, or a test's shorter one). */
	uint32_t claim_ms, pad;
	uint64_t key; /* random; an exec'd image must name it to join */
	/* Totals (atomic), for the statistics. */
	uint64_t reclaimed, reclaimed_holds, expired, healed, full, sweeps;
	/*
	 * Sweeps (atomic): who runs one now and since when, when the next
	 * may on schedule, and when one the registry needed last found nothing.
	 */
	uint64_t sweeper, sweep_since, sweep_after, sweep_empty;
	uint32_t backoff_ms, rec_cursor, slot_cursor, cycle;
};

/*
 * A record. Its owner word: the state, the owner's pid (while BUSY: the
 * pid of the process building or taking it apart) and a sequence number
 * that changes whenever the record is freed, so that a record taken,
 * freed and taken again is never mistaken for the one it was.
 */
struct reg_rec {
	uint64_t own;
	uint64_t seen_ns; /* CLOCK_BOOTTIME at which pid was the owner; 0 unknown */
	uint64_t made_ns; /* CLOCK_MONOTONIC when it was made */
	int32_t maker; /* the process that made it (a fork or spawn parent) */
	uint32_t pad;
	char comm[16]; /* of an exec'd image: the name the kernel gives it */
	uint64_t ent[REC_ENTRIES]; /* ino32 << 32 | kind << 24 | slot; 0: empty */
	uint64_t pad2[2];
};

enum { REC_FREE, REC_BUSY, REC_EXEC, REC_LIVE };
enum { ENT_HOLD = 1, ENT_CHARGE = 2 };

#define OWN_PID(w) ((int32_t)(uint32_t)(w))
#define OWN_STATE(w) ((uint32_t)((w) >> 32) & 0xfu)
#define OWN_SEQ(w) ((w) >> 40)
#define OWN(seq, state, pid) \
	((uint64_t)(seq) << 40 | (uint64_t)(state) << 32 | (uint64_t)(uint32_t)(pid))

#define ENT(slot, kind, ino) ((uint64_t)(uint32_t)(ino) << 32 | (uint64_t)(kind) << 24 | (slot))
#define ENT_SLOT(e) ((uint32_t)(e)&0xffffffu)
#define ENT_KIND(e) ((uint32_t)((e) >> 24) & 0xffu)
#define ENT_INO(e) ((uint32_t)((e) >> 32))

/*
 * Layout: the header, the first REG_HOME_SLOTS slots (the home slots),
 * the records (a new record is the first free one, so the records in use
 * stay on the first pages), then the rest of the slots, page-aligned. A
 * pipe's slot is a home slot while one is free: the first page then holds
 * all that a small tree uses (header, home slots, its first records), and
 * each process of the tree, which maps none of the segment's pages at
 * first (fork does not copy a shared mapping's page tables), takes one
 * page fault for it, not one more for each pipe it touches.
 */
#define REG_HEADER_SIZE 256u
#define REG_HOME_SLOTS 32u
#define REG_RECS_OFFSET \
	((size_t)REG_HEADER_SIZE + (size_t)REG_HOME_SLOTS * sizeof(struct pp_shared))
#define REG_SLOTS_OFFSET \
	((REG_RECS_OFFSET + (size_t)REG_RECS * sizeof(struct reg_rec) + 4095) & ~(size_t)4095)
#define REG_SIZE \
	(REG_SLOTS_OFFSET + (size_t)(REG_SLOTS - REG_HOME_SLOTS) * sizeof(struct pp_shared))
_Static_assert(REG_RECS_OFFSET + 8 * sizeof(struct reg_rec) <= 4096,
	       "the home slots and the first records share the first page with the header");

_Static_assert(sizeof(struct reg_header) <= REG_HEADER_SIZE, "header");
_Static_assert(sizeof(struct reg_rec) == 192, "a record is three cache lines");
_Static_assert(REG_SLOTS < (1u << 24), "a slot index fits an entry");

/*
 * A claim must come soon after the exec it names: the image to come claims
 * its record while it starts. Together with the pid and the command name
 * this tells the image apart from a later process that got the same pid
 * and inherited the variable through a program that does not run
 * libppipe (a static one): that would take long enough for its pid to
 * come round again. A record not claimed in that time never will be: its
 * charges turn into plain verdicts, and the record is reused.
 */
#define REG_CLAIM_WINDOW_NS (10ull * 1000000000ull)
/* The window this registry's processes keep to: the header's, at most the default. */
extern uint64_t pp_reg_claim_ns;

/* The segment this process attached (NULL: none), and the limits it keeps to. */
extern struct reg_header *pp_reg;
/* The header's limits, clamped to the layout's (the header is untrusted). */
extern uint32_t pp_reg_nslots, pp_reg_nrecs;

/* Slots 0 to REG_HOME_SLOTS - 1, on the first page; the rest after the records. */
static inline struct pp_shared *reg_home_slots(void)
{
	return (struct pp_shared *)((char *)pp_reg + REG_HEADER_SIZE);
}

static inline struct pp_shared *reg_other_slots(void)
{
	return (struct pp_shared *)((char *)pp_reg + REG_SLOTS_OFFSET);
}

static inline struct reg_rec *reg_recs(void)
{
	return (struct reg_rec *)((char *)pp_reg + REG_RECS_OFFSET);
}

/* The home slots this registry has: REG_HOME_SLOTS, or all of a test's fewer slots. */
static inline uint32_t reg_nhome(void)
{
	return pp_reg_nslots < REG_HOME_SLOTS ? pp_reg_nslots : REG_HOME_SLOTS;
}

/* Slot @i, or NULL. A slot or record pointer only ever comes from our own index arithmetic. */
static inline struct pp_shared *reg_slot_at(uint32_t i)
{
	if (i >= pp_reg_nslots)
		return NULL;
	return i < REG_HOME_SLOTS ? &reg_home_slots()[i] : &reg_other_slots()[i - REG_HOME_SLOTS];
}

/* The index of slot @s, or UINT32_MAX when @s is no slot. */
static inline uint32_t reg_slot_index(const struct pp_shared *s)
{
	const struct pp_shared *home = reg_home_slots(), *other = reg_other_slots();

	if (s >= home && s < home + REG_HOME_SLOTS)
		return (uint32_t)(s - home);
	if (s >= other && s < other + (REG_SLOTS - REG_HOME_SLOTS))
		return REG_HOME_SLOTS + (uint32_t)(s - other);
	return UINT32_MAX;
}

/*
 * Pipe @ino's probe sequence: its @k'th slot, or UINT32_MAX past the end.
 * The home slots first, from where @ino's hash points among them, then up
 * to REG_PROBES of the others, from where it points among those. Slots
 * are never emptied, only freed (REG_TOMB): a search ends at the first
 * empty one, which no insertion before it could have passed.
 */
static inline uint32_t reg_probe(uint32_t hash, uint32_t k)
{
	uint32_t home = reg_nhome(), others = pp_reg_nslots - home;

	if (k < home)
		return (hash + k) % home;
	k -= home;
	if (k >= REG_PROBES || k >= others)
		return UINT32_MAX;
	return home + (hash + k) % others;
}

/* Where pipe @ino's probe sequence starts (modulo the slots in use). */
static inline uint32_t reg_hash(uint64_t ino)
{
	return (uint32_t)((ino * 0x9e3779b97f4a7c15ull) >> 40);
}

/* Whether @s describes the pipe an entry with @ino32 names. */
static inline bool reg_slot_is(const struct pp_shared *s, uint32_t ino32)
{
	uint64_t ino = __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE);

	return ino && ino != REG_TOMB && (uint32_t)ino == ino32;
}

static inline int32_t reg_pid(void)
{
	return (int32_t)PP_SYSCALL(SYS_getpid);
}

/* This process's clock reads so far, up to REG_CLOCK_SYSCALLS (registry.c; a fork child's start over). */
extern int pp_reg_clock_reads;
#define REG_CLOCK_SYSCALLS 3

/*
 * CLOCK_BOOTTIME in ns: what /proc/PID/stat's start times count from. The
 * first reads of a process (most make one or two: a fork child for its
 * exec, a new program for its claim) by the system call; after that by
 * the vDSO, which makes none, but whose data page is a page fault the
 * first time a process reads it (a fork child does not inherit it), and
 * whose libc function binds at its first call: a process that forks over
 * and over (a shell) reads the clock twice per fork.
 */
static inline uint64_t reg_boot_ns(void)
{
	struct timespec ts = { 0, 0 };
	int n = __atomic_load_n(&pp_reg_clock_reads, __ATOMIC_RELAXED);

	if (n >= REG_CLOCK_SYSCALLS) {
		clock_gettime(CLOCK_BOOTTIME, &ts);
	} else {
		PP_SYSCALL(SYS_clock_gettime, CLOCK_BOOTTIME, &ts);
		__atomic_store_n(&pp_reg_clock_reads, n + 1, __ATOMIC_RELAXED);
	}
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void reg_add(uint64_t *v, uint64_t n)
{
	__atomic_fetch_add(v, n, __ATOMIC_RELAXED);
}

/* Counters in shared memory never go below zero, whoever wrote them. */
static inline void reg_dec_by(uint32_t *v, uint32_t n)
{
	uint32_t cur = __atomic_load_n(v, __ATOMIC_RELAXED);

	while (cur && !__atomic_compare_exchange_n(v, &cur, cur > n ? cur - n : 0, true,
						   __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		;
}

static inline void reg_dec(uint32_t *v)
{
	reg_dec_by(v, 1);
}

/* registry.c: */
/* Frees slot @s if nothing holds or charges it any more. */
void pp_reg_slot_maybe_free(struct pp_shared *s);
/* Sets record @r, owned as *@own, to @state and owner @pid; false if it is not as *@own says. */
bool pp_reg_rec_set(struct reg_rec *r, uint64_t *own, uint32_t state, int32_t pid);
/* Frees @r (every entry gone), unless it is no longer as @own says. */
void pp_reg_rec_free(struct reg_rec *r, uint64_t own);
/*
 * Takes every entry out of @r and gives back what each stood for; with
 * @charges_made_plain a charge turns into its pipe's plain verdict.
 * Returns how many there were.
 */
uint32_t pp_reg_rec_empty(struct reg_rec *r, bool charges_made_plain);

/* registry_sweep.c: */
/*
 * A sweep, if one is due at @now (CLOCK_MONOTONIC), or at once with
 * @needed (the registry is full). Returns whether it gave anything back.
 */
bool pp_reg_sweep(bool needed, uint64_t now);
/* Counts a pipe left plain for want of @what; PPIPE_DEBUG says so once. */
void pp_reg_note_full(const char *what);

#endif
