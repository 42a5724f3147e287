// SPDX-License-Identifier: MIT
/*
 * The pipe registry (see registry.h). Everything here uses raw system
 * calls: it runs inside pipe(), fork(), exec() and, in a vfork child, on
 * memory shared with the parent.
 *
 * Counters and entries. A slot's holders and pending counts are what the
 * write path reads; the entries in the records say whose they are. Every
 * change moves the count up before it writes the entry, and takes the
 * entry away before it moves the count down, so that a process killed
 * between the two steps leaves a count too high, never too low: too high
 * keeps a pipe plain or its slot taken, and the sweeps find such counts
 * (no entry behind them, two sweeps in a row) and set them right.
 */
#include "registry.h"
#include "registry_layout.h"

#include "compiler.h"
#include "fault.h"
#include "config.h"
#include "log.h"
#include "sys.h"
#include "vfork.h"

#include <fcntl.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ipc.h>
#include <sys/shm.h>

PP_HOT struct reg_header *pp_reg;
uint32_t pp_reg_nslots = REG_SLOTS, pp_reg_nrecs = REG_RECS;
uint64_t pp_reg_claim_ns = REG_CLAIM_WINDOW_NS;

/* ---- the segment ---- */

static void *attach(int id)
{
	long m = PP_SYSCALL(SYS_shmat, id, NULL, 0);

	return m < 0 && m > -4096 ? NULL : (void *)m;
}

static void detach(void *m)
{
	PP_SYSCALL(SYS_shmdt, m);
}

/* A random key: the image to come must name it (it is in its environment only). */
static uint64_t new_key(void)
{
	uint64_t k = 0;

	if (PP_SYSCALL(SYS_getrandom, &k, sizeof(k), 1 /* GRND_NONBLOCK */) != sizeof(k))
		k = reg_boot_ns() ^ ((uint64_t)reg_pid() << 32) ^ (uint64_t)(uintptr_t)&k;
	return k | 1;
}

/* The id of the segment this process attached, for the environment of an exec. */
static int reg_id = -1;

/*
 * One line of /proc/sysvipc/shm, "key shmid perms size cpid lpid nattch uid
 * gid cuid ...": a segment of ours left behind by a process killed between
 * making it and marking it for removal (nobody attaches it, its maker is
 * gone, our size, owner and mode, our magic or nothing written yet) is
 * removed.
 */
static void reap_line(const char *c, long euid)
{
	unsigned long long v[10];
	struct reg_header *h;
	int k;

	for (k = 0; k < 10; k++) {
		while (*c == ' ')
			c++;
		if (*c < '0' || *c > '9')
			return;
		v[k] = 0;
		/* perms is printed in octal, the rest in decimal */
		for (; *c >= '0' && *c <= '9'; c++)
			v[k] = v[k] * (k == 2 ? 8 : 10) + (unsigned long long)(*c - '0');
	}
	if (v[0] || v[3] != REG_SIZE || v[6] || v[7] != (unsigned long long)euid ||
	    v[9] != (unsigned long long)euid || (v[2] & 0777) != 0600 ||
	    PP_SYSCALL(SYS_kill, (long)v[4], 0) != -ESRCH || !(h = attach((int)v[1])))
		return;
	if (h->magic == REG_MAGIC || !h->magic)
		PP_SYSCALL(SYS_shmctl, (int)v[1], IPC_RMID, NULL);
	detach(h);
}

/* Reads /proc/sysvipc/shm (1 MiB at most) and reaps what was left behind. */
#define REAP_READ_MAX (1l << 20)
static void reap_orphans(void)
{
	char buf[4096];
	long fd = PP_SYSCALL(SYS_openat, AT_FDCWD, "/proc/sysvipc/shm", O_RDONLY | O_CLOEXEC);
	long euid = PP_SYSCALL(SYS_geteuid), n, have = 0, total = 0;
	bool first = true;

	if (fd < 0)
		return;
	while (total < REAP_READ_MAX &&
	       (n = PP_SYSCALL(SYS_read, (int)fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		char *line = buf, *nl;

		total += n;
		have += n;
		buf[have] = 0;
		while ((nl = strchr(line, '\n'))) {
			*nl = 0;
			if (!first) /* the first line names the columns */
				reap_line(line, euid);
			first = false;
			line = nl + 1;
		}
		/* The part of a line the next read completes; a line longer than the buffer is dropped. */
		have = buf + have - line;
		if (have == (long)sizeof(buf) - 1)
			have = 0;
		memmove(buf, line, (size_t)have);
	}
	pp_sys_close((int)fd);
}

/*
 * A host's System V segment ids (kernel.shmmni, per IPC namespace) are
 * shared with other software: databases, X11 shared memory, HPC
 * libraries. A registry is made only while at least 1/REG_IDS_FREE_SHARE
 * of them would stay free after it, so that libppipe is never the reason
 * another program's shmget() fails. A process that went without one tries
 * again at most once a second (its fork children inherit the wait).
 */
#define REG_IDS_FREE_SHARE 2
#define REG_RETRY_NS 1000000000ull
static const char *missing;
static uint64_t retry_after;

PP_COMMON const char *pp_reg_missing(void)
{
	return __atomic_load_n(&pp_reg, __ATOMIC_ACQUIRE) ?
		       NULL :
		       __atomic_load_n(&missing, __ATOMIC_RELAXED);
}

/* Goes without a registry for @why (said once per process). */
static void reg_declined(const char *why, long used, long max)
{
	static int told;

	__atomic_store_n(&missing, why, __ATOMIC_RELAXED);
	__atomic_store_n(&retry_after, reg_boot_ns() + REG_RETRY_NS, __ATOMIC_RELAXED);
	if (!pp_cfg.debug || __atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
		return;
	if (max > 0)
		pp_debug("no pipe registry for this process tree: %ld of the host's %ld shared "
			 "memory segment ids are in use, and libppipe leaves 1/%d of them to other "
			 "programs; pipes that cross into another process stay plain",
			 used, max, REG_IDS_FREE_SHARE);
	else
		pp_debug("%s (for this process tree): pipes that cross into another process "
			 "stay plain",
			 why);
}

/* Whether making a segment now would leave less than the share of ids free. */
static bool ids_scarce(long *used, long *max)
{
	struct shminfo info;
	struct shm_info now;

	/* Not known (an old kernel, seccomp): shmget() decides, as before. */
	if (PP_SYSCALL(SYS_shmctl, 0, IPC_INFO, &info) < 0 ||
	    PP_SYSCALL(SYS_shmctl, 0, SHM_INFO, &now) < 0 || !info.shmmni)
		return false;
	*used = now.used_ids;
	*max = (long)info.shmmni;
	return (unsigned long)now.used_ids + 1 > info.shmmni - info.shmmni / REG_IDS_FREE_SHARE;
}

/* Makes this tree's registry, on the first pipe that crosses. */
static struct reg_header *reg_create(void)
{
	static int creating;
	struct reg_header *h;
	long id, used = 0, max = 0;

	if (__atomic_exchange_n(&creating, 1, __ATOMIC_ACQUIRE))
		return NULL; /* another thread (or a handler in this one) is at it */
	h = __atomic_load_n(&pp_reg, __ATOMIC_ACQUIRE);
	if (h)
		goto out;
	if (__atomic_load_n(&missing, __ATOMIC_RELAXED) &&
	    reg_boot_ns() < __atomic_load_n(&retry_after, __ATOMIC_RELAXED))
		goto out;
	reap_orphans();
	if (ids_scarce(&used, &max)) {
		reg_declined("no pipe registry: the host's shared-memory segment ids are scarce",
			     used, max);
		goto out;
	}
	id = PP_SYSCALL(SYS_shmget, IPC_PRIVATE, REG_SIZE, IPC_CREAT | IPC_EXCL | 0600);
	if (id < 0) {
		reg_declined(id == -ENOSPC ? "no pipe registry: shmget() found no segment id left" :
			     id == -ENOMEM ? "no pipe registry: shmget() found no memory for it" :
			     id == -EPERM || id == -EACCES || id == -ENOSYS ?
					     "no pipe registry: shmget() is not allowed here" :
					     "no pipe registry: shmget() failed",
			     0, 0);
		goto out;
	}
	h = attach((int)id);
	/*
	 * Marked for removal at once: the kernel frees it when the last
	 * process of the tree that maps it is gone, however that ends.
	 * Linux lets processes of the tree attach it by its id until then.
	 */
	PP_SYSCALL(SYS_shmctl, (int)id, IPC_RMID, NULL);
	if (!h)
		goto out;
	h->version = REG_VERSION;
	h->slots = REG_SLOTS;
	h->recs = REG_RECS;
	h->slot_size = sizeof(struct pp_shared);
	h->rec_size = sizeof(struct reg_rec);
	h->entries = REC_ENTRIES;
	h->slots_limit = pp_fault_reg_slots && pp_fault_reg_slots < REG_SLOTS ? pp_fault_reg_slots :
										REG_SLOTS;
	h->recs_limit =
		pp_fault_reg_recs && pp_fault_reg_recs < REG_RECS ? pp_fault_reg_recs : REG_RECS;
	h->claim_ms =
		pp_fault_reg_claim_ms && pp_fault_reg_claim_ms < REG_CLAIM_WINDOW_NS / 1000000 ?
			pp_fault_reg_claim_ms :
			(uint32_t)(REG_CLAIM_WINDOW_NS / 1000000);
	h->key = new_key();
	/* Nothing to sweep in a new registry: the first sweep on schedule a second from now. */
	h->backoff_ms = 1000;
	h->sweep_after = reg_boot_ns() + 1000000000ull;
	h->magic = REG_MAGIC;
	pp_reg_nslots = h->slots_limit;
	pp_reg_nrecs = h->recs_limit;
	pp_reg_claim_ns = h->claim_ms * 1000000ull;
	reg_id = (int)id;
	__atomic_store_n(&pp_reg, h, __ATOMIC_RELEASE);
out:
	__atomic_store_n(&creating, 0, __ATOMIC_RELEASE);
	return h;
}

/* ---- slots ---- */

PP_COMMON struct pp_shared *pp_reg_find(uint64_t ino)
{
	struct reg_header *h = __atomic_load_n(&pp_reg, __ATOMIC_ACQUIRE);

	if (!h || !ino || ino == REG_TOMB)
		return NULL;
	for (uint32_t k = 0, hash = reg_hash(ino), i; (i = reg_probe(hash, k)) != UINT32_MAX; k++) {
		struct pp_shared *s = reg_slot_at(i);
		uint64_t cur = __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE);

		if (cur == ino)
			return s;
		if (!cur)
			return NULL;
	}
	return NULL;
}

static void slot_reset(struct pp_shared *s)
{
	__atomic_store_n(&s->unsafe, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->capacity_max, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->nonblock, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->pending, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->mark, 0, __ATOMIC_RELAXED);
}

/* A new slot for @ino, holders 1: the first free or freed slot of its probe sequence (a home slot while one is). */
static struct pp_shared *slot_new(uint64_t ino)
{
	for (uint32_t k = 0, hash = reg_hash(ino), i; (i = reg_probe(hash, k)) != UINT32_MAX; k++) {
		struct pp_shared *s = reg_slot_at(i);
		uint64_t cur = __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE);

		if (cur && cur != REG_TOMB)
			continue;
		/* Counted held before it is visible: it never looks free with a holder. */
		__atomic_store_n(&s->holders, 1, __ATOMIC_RELEASE);
		if (__atomic_compare_exchange_n(&s->ino, &cur, ino, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			slot_reset(s);
			return s;
		}
	}
	return NULL;
}

PP_COMMON void pp_reg_slot_maybe_free(struct pp_shared *s)
{
	uint64_t ino = __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE);

	if (__atomic_load_n(&s->holders, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&s->pending, __ATOMIC_ACQUIRE) || !ino || ino == REG_TOMB)
		return;
	__atomic_compare_exchange_n(&s->ino, &ino, REG_TOMB, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_RELAXED);
}

/* ---- records ---- */

/*
 * Takes a free record for this process to fill (BUSY, with our pid: if we
 * die before it is filled, a sweep sees whose it was). The first free
 * one, so that the records in use stay on the first pages. NULL: full.
 */
PP_COMMON static struct reg_rec *rec_take(uint64_t *own)
{
	int32_t pid = reg_pid();
	uint64_t now = reg_boot_ns();

	/* A sweep on schedule (its code is not even mapped in most processes otherwise). */
	if (now >= __atomic_load_n(&pp_reg->sweep_after, __ATOMIC_RELAXED))
		pp_reg_sweep(false, now);
	for (uint32_t i = 0; i < pp_reg_nrecs; i++) {
		struct reg_rec *r = &reg_recs()[i];
		uint64_t w = __atomic_load_n(&r->own, __ATOMIC_ACQUIRE);

		if (OWN_STATE(w) != REC_FREE)
			continue;
		*own = OWN(OWN_SEQ(w), REC_BUSY, pid);
		if (!__atomic_compare_exchange_n(&r->own, &w, *own, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		r->seen_ns = 0;
		r->made_ns = now;
		r->maker = pid;
		pp_comm_copy(r->comm, "");
		for (int k = 0; k < REC_ENTRIES; k++)
			__atomic_store_n(&r->ent[k], 0, __ATOMIC_RELAXED);
		return r;
	}
	return NULL;
}

/* Sets record @r, owned as *@own, to @state and owner @pid. */
PP_COMMON bool pp_reg_rec_set(struct reg_rec *r, uint64_t *own, uint32_t state, int32_t pid)
{
	uint64_t w = *own, nw = OWN(OWN_SEQ(w), state, pid);

	if (!__atomic_compare_exchange_n(&r->own, &w, nw, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return false;
	*own = nw;
	return true;
}

/* Frees @r (every entry gone), unless it is no longer as *@own says. */
PP_COMMON void pp_reg_rec_free(struct reg_rec *r, uint64_t own)
{
	__atomic_compare_exchange_n(&r->own, &own, OWN(OWN_SEQ(own) + 1, REC_FREE, 0), false,
				    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* Puts @e into a free entry of @r. */
PP_COMMON static bool rec_add(struct reg_rec *r, uint64_t e)
{
	for (int k = 0; k < REC_ENTRIES; k++) {
		uint64_t zero = 0;

		if (!__atomic_load_n(&r->ent[k], __ATOMIC_RELAXED) &&
		    __atomic_compare_exchange_n(&r->ent[k], &zero, e, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			return true;
	}
	return false;
}

/* Takes entry @e out of @r: true when it was there (it is then the caller's to undo). */
PP_COMMON static bool rec_remove(struct reg_rec *r, uint64_t e)
{
	for (int k = 0; k < REC_ENTRIES; k++) {
		uint64_t cur = e;

		if (__atomic_load_n(&r->ent[k], __ATOMIC_RELAXED) == e &&
		    __atomic_compare_exchange_n(&r->ent[k], &cur, 0, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			return true;
	}
	return false;
}

/*
 * Gives back what entry @e stood for: a hold, or a charge, which turns
 * into the pipe's plain verdict for good (its image never confirmed).
 */
PP_COMMON static void ent_undo(uint64_t e, bool charge_made_plain)
{
	struct pp_shared *s = reg_slot_at(ENT_SLOT(e));

	if (!s || !reg_slot_is(s, ENT_INO(e)))
		return;
	if (ENT_KIND(e) == ENT_CHARGE) {
		if (charge_made_plain)
			__atomic_store_n(&s->unsafe, 1, __ATOMIC_RELEASE);
		reg_dec(&s->pending);
	} else {
		reg_dec(&s->holders);
	}
	pp_reg_slot_maybe_free(s);
}

/* ---- this process's own records: its holds ---- */

#define OWN_MAX 64 /* records one process may own: 1024 holds */

/*
 * A record of this process's, as it keeps it: the record's index + 1 in the
 * low 32 bits (0: none) and the sequence number the record had when it
 * became this process's above them, which is all of its owner word that
 * can change behind the process's back.
 */
#define REF(rec, own) ((uint64_t)OWN_SEQ(own) << 32 | (uint32_t)(rec))
#define REF_REC(ref) ((uint32_t)(ref))
#define REF_SEQ(ref) ((ref) >> 32)

/*
 * The records this process owns, and those made for the child of a fork
 * in progress (the child's "mine"). On the page loading writes anyway: a
 * fork child rewrites both, and a program started with pipe ends fills
 * them at start-up, so they are no page fault of their own there.
 */
PP_HOT static uint64_t mine[OWN_MAX];
PP_HOT static uint64_t forked[OWN_MAX];
PP_HOT int pp_reg_nforked;
/* reg_boot_ns()'s count (registry_layout.h). */
PP_HOT int pp_reg_clock_reads;
/* Whether mine[] may list anything (a fork child then forgets it). */
PP_HOT int pp_reg_nmine;

/*
 * The record of mine[i], if it is still mine: the same allocation (its
 * sequence number), live. (Its pid may have been filled in since: a fork
 * parent names its child's records after the child started using them.)
 */
PP_COMMON static struct reg_rec *mine_at(int i)
{
	uint64_t ref = __atomic_load_n(&mine[i], __ATOMIC_ACQUIRE), cur;
	uint32_t ri = REF_REC(ref);
	struct reg_rec *r;

	if (!ri || ri > pp_reg_nrecs || !pp_reg)
		return NULL;
	r = &reg_recs()[ri - 1];
	cur = __atomic_load_n(&r->own, __ATOMIC_ACQUIRE);
	if (OWN_SEQ(cur) != REF_SEQ(ref) || OWN_STATE(cur) != REC_LIVE) {
		/* Taken from us (a sweep mistook us for gone): forget it. */
		__atomic_store_n(&mine[i], 0, __ATOMIC_RELEASE);
		return NULL;
	}
	return r;
}

/* Lists record @r (owned as @own) among mine. */
PP_COMMON static bool mine_add(struct reg_rec *r, uint64_t own)
{
	uint64_t ref = REF((uint32_t)(r - reg_recs()) + 1, own);

	for (int i = 0; i < OWN_MAX; i++) {
		uint64_t zero = 0;

		if (__atomic_load_n(&mine[i], __ATOMIC_RELAXED))
			continue;
		if (__atomic_compare_exchange_n(&mine[i], &zero, ref, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			if (!__atomic_load_n(&pp_reg_nmine, __ATOMIC_RELAXED))
				__atomic_store_n(&pp_reg_nmine, 1, __ATOMIC_RELAXED);
			return true;
		}
	}
	return false;
}

/* A new record of this process's own (LIVE, ours), listed among mine. */
static struct reg_rec *mine_new(void)
{
	struct reg_rec *r;
	uint64_t own;

	r = rec_take(&own);
	if (!r && pp_reg_sweep(true, reg_boot_ns()))
		r = rec_take(&own);
	if (!r) {
		pp_reg_note_full("records");
		return NULL;
	}
	/* This process, alive when the record was made. */
	r->seen_ns = r->made_ns;
	if (!pp_reg_rec_set(r, &own, REC_LIVE, OWN_PID(own)) || !mine_add(r, own)) {
		pp_reg_rec_free(r, own);
		return NULL;
	}
	return r;
}

/* Records entry @e as this process's. */
static bool mine_record(uint64_t e)
{
	struct reg_rec *r;

	for (int i = 0; i < OWN_MAX; i++)
		if ((r = mine_at(i)) && rec_add(r, e))
			return true;
	r = mine_new();
	return r && rec_add(r, e);
}

/* Takes entry @e out of this process's records: true when it was there. */
PP_COMMON static bool mine_forget(uint64_t e)
{
	struct reg_rec *r;

	for (int i = 0; i < OWN_MAX; i++)
		if ((r = mine_at(i)) && rec_remove(r, e))
			return true;
	return false;
}

/* One hold more on @s for this process, recorded. */
static bool hold(struct pp_shared *s, uint64_t ino)
{
	__atomic_fetch_add(&s->holders, 1, __ATOMIC_ACQ_REL);
	/* Freed meanwhile? Then it is not ours to use, nor our hold. */
	if (__atomic_load_n(&s->ino, __ATOMIC_ACQUIRE) != ino ||
	    !mine_record(ENT(reg_slot_index(s), ENT_HOLD, ino))) {
		reg_dec(&s->holders);
		pp_reg_slot_maybe_free(s);
		return false;
	}
	return true;
}

PP_COMMON struct pp_shared *pp_reg_get(uint64_t ino, bool create)
{
	struct reg_header *h = __atomic_load_n(&pp_reg, __ATOMIC_ACQUIRE);
	struct pp_shared *s;

	if (!ino || ino == REG_TOMB || ino > UINT32_MAX)
		return NULL;
	s = pp_reg_find(ino);
	if (s)
		return hold(s, ino) ? s : NULL;
	if (!create || pp_fault(PP_FAULT_REGISTRY))
		return NULL;
	if (!h && !(h = reg_create()))
		return NULL;
	s = slot_new(ino);
	if (!s && pp_reg_sweep(true, reg_boot_ns()))
		s = slot_new(ino);
	if (!s) {
		pp_reg_note_full("slots");
		return NULL;
	}
	if (!mine_record(ENT(reg_slot_index(s), ENT_HOLD, ino))) {
		reg_dec(&s->holders);
		pp_reg_slot_maybe_free(s);
		return NULL;
	}
	return s;
}

PP_COMMON bool pp_reg_hold(struct pp_shared *s, uint64_t ino)
{
	return s && pp_reg && reg_slot_at(reg_slot_index(s)) == s && hold(s, ino);
}

PP_COMMON void pp_reg_put(struct pp_shared *s)
{
	uint64_t ino;

	if (!s || !pp_reg || reg_slot_at(reg_slot_index(s)) != s)
		return;
	ino = __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE);
	/* Only a hold of ours is given back: one a sweep took is not ours to count twice. */
	if (ino && ino != REG_TOMB && mine_forget(ENT(reg_slot_index(s), ENT_HOLD, ino))) {
		reg_dec(&s->holders);
		pp_reg_slot_maybe_free(s);
	}
}

/* ---- fork ---- */

PP_COMMON void pp_reg_fork_prepare(void)
{
	pp_reg_nforked = 0;
}

PP_COMMON void pp_reg_fork_hold(struct pp_shared *s)
{
	uint64_t ino, e, own;
	struct reg_rec *r = NULL;

	if (!s || !pp_reg || reg_slot_at(reg_slot_index(s)) != s)
		return;
	ino = __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE);
	if (!ino || ino == REG_TOMB)
		return;
	e = ENT(reg_slot_index(s), ENT_HOLD, ino);
	__atomic_fetch_add(&s->holders, 1, __ATOMIC_ACQ_REL);
	/* Freed meanwhile (this process holds it: only by a sweep's mistake)? Not the child's. */
	if (__atomic_load_n(&s->ino, __ATOMIC_ACQUIRE) != ino) {
		reg_dec(&s->holders);
		pp_reg_slot_maybe_free(s);
		return;
	}
	if (pp_reg_nforked)
		r = &reg_recs()[REF_REC(forked[pp_reg_nforked - 1]) - 1];
	if (!r || !rec_add(r, e)) {
		/*
		 * A new record for the child: LIVE, nobody's yet (pid 0) until
		 * pp_reg_fork_parent() names it. Made by us, so that a sweep can
		 * tell a fork that failed.
		 */
		r = pp_reg_nforked < OWN_MAX ? rec_take(&own) : NULL;
		if (!r && pp_reg_nforked < OWN_MAX && pp_reg_sweep(true, reg_boot_ns()))
			r = rec_take(&own);
		if (r && !pp_reg_rec_set(r, &own, REC_LIVE, 0))
			r = NULL;
		if (!r) {
			/* No room: the child's hold is not counted; its pipe may turn plain early. */
			pp_reg_note_full("records");
			reg_dec(&s->holders);
			pp_reg_slot_maybe_free(s);
			return;
		}
		forked[pp_reg_nforked] = REF((uint32_t)(r - reg_recs()) + 1, own);
		pp_reg_nforked++;
		rec_add(r, e);
	}
}

PP_COMMON void pp_reg_fork_parent(pid_t child)
{
	uint64_t now;

	if (!pp_reg_nforked)
		return;
	now = child > 0 ? reg_boot_ns() : 0;
	for (int i = 0; i < pp_reg_nforked; i++) {
		struct reg_rec *r = &reg_recs()[REF_REC(forked[i]) - 1];
		/* As pp_reg_fork_hold() made it: live, nobody's yet. */
		uint64_t own = OWN(REF_SEQ(forked[i]), REC_LIVE, 0);

		if (child < 0) {
			/* No child: its holds come back at once. */
			if (pp_reg_rec_set(r, &own, REC_BUSY, reg_pid())) {
				pp_reg_rec_empty(r, false);
				pp_reg_rec_free(r, own);
			}
			continue;
		}
		/*
		 * The child exists now: its records are named after it, unless it
		 * already took them apart (it exec'd or ended: the sequence moved
		 * on). The time goes in after the name; if the record was reused
		 * in between, it names that record's new owner, who held it by
		 * then.
		 */
		if (child > 0 && pp_reg_rec_set(r, &own, REC_LIVE, child))
			__atomic_store_n(&r->seen_ns, now, __ATOMIC_RELAXED);
	}
	pp_reg_nforked = 0;
}

PP_COMMON void pp_reg_fork_child_work(bool named)
{
	int32_t pid = 0;

	/*
	 * The parent's records are the parent's; the child has its own, if
	 * any. (No memset: a first call of a libc function through the PLT in
	 * a fork child binds it there, which costs the child page faults.)
	 */
	for (int i = 0; i < OWN_MAX; i++)
		if (mine[i])
			mine[i] = 0;
	if (pp_reg_nmine)
		pp_reg_nmine = 0;
	/* The vDSO's data page is not the child's until it reads it: its first reads by system call. */
	if (pp_reg_clock_reads)
		pp_reg_clock_reads = 0;
	if (!pp_reg_nforked)
		return;
	/* A fork libppipe did not see return (libc's own): the child names them. */
	if (!named)
		pid = reg_pid();
	for (int i = 0; i < pp_reg_nforked; i++) {
		struct reg_rec *r = &reg_recs()[REF_REC(forked[i]) - 1];
		uint64_t own = OWN(REF_SEQ(forked[i]), REC_LIVE, 0);

		/* Ours whatever the parent writes: it only adds the name (the pid). */
		if (pid && pp_reg_rec_set(r, &own, REC_LIVE, pid))
			r->seen_ns = reg_boot_ns();
		mine[i] = forked[i];
		pp_reg_nmine = 1;
	}
	pp_reg_nforked = 0;
}

/* ---- exec records ---- */

/* Takes every entry out of @r and undoes it. */
PP_COMMON uint32_t pp_reg_rec_empty(struct reg_rec *r, bool charges_made_plain)
{
	uint32_t n = 0;

	for (int k = 0; k < REC_ENTRIES; k++) {
		uint64_t e = __atomic_exchange_n(&r->ent[k], 0, __ATOMIC_ACQ_REL);

		if (e) {
			ent_undo(e, charges_made_plain);
			n++;
		}
	}
	return n;
}

/* Writes @v in decimal at @out; returns the end. (No libc: this runs in fork children.) */
PP_COMMON static char *put_num(char *out, unsigned long v)
{
	pp_utoa(v, out);
	while (*out)
		out++;
	return out;
}

/* Writes "<id>.<key>" (the registry's name in PPIPE_REGISTRY) at @out; returns the end. */
PP_COMMON static char *put_name(char *out, int id, uint64_t key)
{
	out = put_num(out, (unsigned long)id);
	*out++ = '.';
	/* Digits by arithmetic: a table would be a page of constants of its own. */
	for (int sh = 60; sh >= 0; sh -= 4) {
		int d = (int)((key >> sh) & 0xf);

		*out++ = (char)(d < 10 ? '0' + d : 'a' + d - 10);
	}
	*out = 0;
	return out;
}

PP_COMMON int pp_reg_exec_begin(struct pp_exec_charge *c, const char *comm,
				struct pp_shared *const *slot, const uint64_t *inos, int n,
				enum pp_exec_who who)
{
	struct reg_header *h = __atomic_load_n(&pp_reg, __ATOMIC_ACQUIRE);
	struct reg_rec *r = NULL;
	int handed = 0;
	char *e;

	c->rec = -1;
	c->env[0] = 0;
	if (!h || reg_id < 0)
		return -ENOENT;
	if (n > PP_EXEC_MAX_PIPES)
		return -E2BIG;
	if (n) {
		r = rec_take(&c->own);
		/* Not in a vfork child: it runs on its parent's stack, its exec waiting. */
		if (!r && who != PP_EXEC_VFORK_CHILD && pp_reg_sweep(true, reg_boot_ns()))
			r = rec_take(&c->own);
		if (!r) {
			pp_reg_note_full("records");
			return -ENOSPC;
		}
		c->rec = (int)(r - reg_recs());
		pp_comm_copy(r->comm, comm);
		for (int i = 0; i < n; i++) {
			struct pp_shared *s = slot[i];

			if (!s || reg_slot_at(reg_slot_index(s)) != s || inos[i] > UINT32_MAX)
				continue;
			/* Charged before the exec: no moment without a holder on record. */
			__atomic_fetch_add(&s->pending, 1, __ATOMIC_ACQ_REL);
			if (__atomic_load_n(&s->ino, __ATOMIC_ACQUIRE) != inos[i] ||
			    !rec_add(r, ENT(reg_slot_index(s), ENT_CHARGE, inos[i]))) {
				reg_dec(&s->pending);
				pp_reg_slot_maybe_free(s);
			}
		}
		/*
		 * The image is this process (or the vfork child's): pid and time
		 * are its now. A spawned child's come once it exists.
		 */
		if (who != PP_EXEC_SPAWN_CHILD)
			r->seen_ns = r->made_ns;
		pp_reg_rec_set(r, &c->own, REC_EXEC,
			       who == PP_EXEC_SPAWN_CHILD ? 0 : OWN_PID(c->own));
	}
	memcpy(c->env, REG_VAR, sizeof(REG_VAR) - 1);
	e = put_name(c->env + sizeof(REG_VAR) - 1, reg_id, h->key);
	*e++ = ':';
	if (c->rec >= 0)
		e = put_num(e, (unsigned long)c->rec);
	else
		*e++ = '-';
	/* This process's own records go with it: the image gives them back. */
	for (int i = 0; who == PP_EXEC_SELF && i < OWN_MAX && handed < PP_EXEC_HANDED_MAX; i++) {
		if (!mine_at(i))
			continue;
		*e++ = handed++ ? ',' : ':';
		e = put_num(e, REF_REC(__atomic_load_n(&mine[i], __ATOMIC_RELAXED)) - 1);
	}
	*e = 0;
	return 0;
}

PP_COMMON void pp_reg_exec_failed(struct pp_exec_charge *c)
{
	if (c->rec >= 0 && (uint32_t)c->rec < pp_reg_nrecs && pp_reg) {
		struct reg_rec *r = &reg_recs()[c->rec];

		/* Still as we made it (nobody claimed it meanwhile): undone. */
		if (pp_reg_rec_set(r, &c->own, REC_BUSY, OWN_PID(c->own))) {
			pp_reg_rec_empty(r, false);
			pp_reg_rec_free(r, c->own);
		}
	}
	c->rec = -1;
}

PP_COMMON void pp_reg_exec_spawned(struct pp_exec_charge *c, pid_t pid)
{
	if (c->rec >= 0 && (uint32_t)c->rec < pp_reg_nrecs && pp_reg) {
		struct reg_rec *r = &reg_recs()[c->rec];

		/*
		 * The child exists now. Nothing takes an unnamed record from
		 * under its living maker, so the time goes in first.
		 */
		r->seen_ns = reg_boot_ns();
		pp_reg_rec_set(r, &c->own, REC_EXEC, pid);
	}
	c->rec = -1;
}

/* The record the exec that made this image named (PPIPE_REGISTRY=...:rec). */
PP_HOT static int32_t joined_rec = -1;
/*
 * The records of the image that exec'd this one, to give back
 * (PPIPE_REGISTRY=...:rec:a,b). Like claimed[] below, on the page loading
 * writes anyway: a program started with pipe ends fills both there.
 */
PP_HOT static int32_t handed[PP_EXEC_HANDED_MAX];
PP_HOT static int nhanded;

/* Gives back the holds of the image that exec'd this one (this same process). */
PP_START static void give_back_handed(int32_t pid)
{
	for (int i = 0; i < nhanded; i++) {
		struct reg_rec *r =
			(uint32_t)handed[i] < pp_reg_nrecs ? &reg_recs()[handed[i]] : NULL;
		uint64_t own = r ? __atomic_load_n(&r->own, __ATOMIC_ACQUIRE) : 0;

		/* Unnamed: a fork parent may not have named it yet when that image exec'd. */
		if (OWN_STATE(own) != REC_LIVE || (OWN_PID(own) != pid && OWN_PID(own)))
			continue;
		pp_reg_rec_empty(r, false);
		pp_reg_rec_free(r, __atomic_load_n(&r->own, __ATOMIC_ACQUIRE));
	}
	nhanded = 0;
}

/*
 * Holds this image took by claiming its record: one per pipe it was
 * handed, given to the pipe's object when an fd of it is taken over, or
 * back to the registry at exit or exec. Fork children inherit the list
 * (the parent records their holds).
 */
enum { CLAIM_HELD, CLAIM_TAKEN, CLAIM_GIVEN_BACK };
PP_HOT static struct {
	uint64_t ino;
	uint32_t slot;
	int state; /* CLAIM_* (atomic) */
} claimed[PP_EXEC_MAX_PIPES];
PP_HOT static int nclaimed;

/*
 * Tries to claim record @r for this process once. Returns 1 when it was
 * ours (the charges turned into this image's holds), 2 when it is a
 * spawned child's record whose pid is not filled in yet, 0 when it is not
 * ours.
 */
PP_START static int claim_once(struct reg_rec *r, int32_t pid, const char comm[16])
{
	uint64_t own = __atomic_load_n(&r->own, __ATOMIC_ACQUIRE);

	if (OWN_STATE(own) != REC_EXEC || !pp_comm_equal(r->comm, comm))
		return 0;
	if (!OWN_PID(own))
		return 2;
	if (OWN_PID(own) != pid ||
	    reg_boot_ns() - __atomic_load_n(&r->made_ns, __ATOMIC_RELAXED) > pp_reg_claim_ns)
		return 0;
	/* Ours: lift the charges once, whoever else looks. */
	if (!pp_reg_rec_set(r, &own, REC_BUSY, pid))
		return 0;
	for (int k = 0; k < REC_ENTRIES; k++) {
		uint64_t e = __atomic_load_n(&r->ent[k], __ATOMIC_ACQUIRE), held;
		struct pp_shared *s = reg_slot_at(ENT_SLOT(e));

		if (!e)
			continue;
		/* An entry no exec wrote (a scribbled record) or a slot since reused: dropped. */
		if (ENT_KIND(e) != ENT_CHARGE || !s || !reg_slot_is(s, ENT_INO(e))) {
			__atomic_store_n(&r->ent[k], 0, __ATOMIC_RELEASE);
			continue;
		}
		/* The hold first: the slot never looks unheld in between. */
		__atomic_fetch_add(&s->holders, 1, __ATOMIC_ACQ_REL);
		held = ENT(ENT_SLOT(e), ENT_HOLD, ENT_INO(e));
		__atomic_store_n(&r->ent[k], held, __ATOMIC_RELEASE);
		reg_dec(&s->pending);
		claimed[nclaimed].slot = ENT_SLOT(e);
		claimed[nclaimed].ino = __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE);
		claimed[nclaimed].state = CLAIM_HELD;
		nclaimed++;
	}
	/* The record is this image's own now: its holds (same process, same identity). */
	if (pp_reg_rec_set(r, &own, REC_LIVE, pid))
		mine_add(r, own);
	return 1;
}

/* The name the kernel gave this image: the base name of the file exec'd, 15 bytes at most. */
PP_START static void exec_comm(char comm[16])
{
	const char *fn = (const char *)getauxval(AT_EXECFN);

	pp_comm_copy(comm, fn ? pp_base_name(fn) : "");
}

/* 200 us (out of line: its constant would be a page of constants read at every start). */
static __attribute__((noinline, cold)) void claim_pause(void)
{
	struct timespec pause = { 0, 200000 };

	PP_SYSCALL(SYS_nanosleep, &pause, NULL);
}

PP_START int pp_reg_exec_claim(void)
{
	char comm[16];
	int32_t pid = reg_pid();
	int r = 0;

	if (!pp_reg)
		return 0;
	give_back_handed(pid);
	if (joined_rec < 0 || (uint32_t)joined_rec >= pp_reg_nrecs)
		return 0;
	exec_comm(comm);
	/*
	 * A posix_spawn() parent fills in its child's pid when the spawn
	 * returns, which may be just after the child got here: wait for it,
	 * 200 ms at most.
	 */
	for (int i = 0; i < 1000 && (r = claim_once(&reg_recs()[joined_rec], pid, comm)) == 2; i++)
		claim_pause();
	return r == 1 ? nclaimed : -ESRCH;
}

PP_COMMON long pp_reg_claimed_take(uint64_t ino)
{
	for (int i = 0; i < nclaimed; i++) {
		int held = CLAIM_HELD;

		if (claimed[i].ino == ino &&
		    __atomic_compare_exchange_n(&claimed[i].state, &held, CLAIM_TAKEN, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return claimed[i].slot;
	}
	return -ENOENT;
}

PP_COMMON struct pp_shared *pp_reg_slot_at(long slot, uint64_t ino)
{
	struct pp_shared *s =
		slot >= 0 && slot <= UINT32_MAX && pp_reg ? reg_slot_at((uint32_t)slot) : NULL;

	return s && __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE) == ino ? s : NULL;
}

PP_COMMON int pp_reg_claimed_left(void)
{
	int n = 0;

	if (likely(!__atomic_load_n(&nclaimed, __ATOMIC_RELAXED)))
		return 0;
	for (int i = 0; i < nclaimed; i++)
		n += __atomic_load_n(&claimed[i].state, __ATOMIC_RELAXED) == CLAIM_HELD;
	return n;
}

PP_COMMON void pp_reg_claimed_fork(void)
{
	for (int i = 0; i < nclaimed; i++)
		if (__atomic_load_n(&claimed[i].state, __ATOMIC_ACQUIRE) == CLAIM_HELD)
			pp_reg_fork_hold(pp_reg_slot_at(claimed[i].slot, claimed[i].ino));
}

PP_COMMON void pp_reg_release_all_work(void)
{
	struct reg_rec *r;

	/*
	 * Every entry of every record of ours: the pipes' holds, the claimed
	 * ones not taken over. A pipe that closes later finds its entry gone
	 * and gives nothing back twice.
	 */
	for (int i = 0; i < nclaimed; i++)
		__atomic_store_n(&claimed[i].state, CLAIM_GIVEN_BACK, __ATOMIC_RELEASE);
	for (int i = 0; i < OWN_MAX; i++) {
		uint64_t own;

		if (!(r = mine_at(i)))
			continue;
		__atomic_store_n(&mine[i], 0, __ATOMIC_RELEASE);
		pp_reg_rec_empty(r, false);
		own = __atomic_load_n(&r->own, __ATOMIC_ACQUIRE);
		if (OWN_STATE(own) == REC_LIVE)
			pp_reg_rec_free(r, own);
	}
}

/* ---- joining at start-up ---- */

/* Reads a record index at *@v (at most REG_RECS - 1), moving past it; -1 if none. */
PP_START static long parse_rec(const char **v)
{
	long rec = 0;
	int digits = 0;

	for (; **v >= '0' && **v <= '9' && rec < REG_RECS; (*v)++, digits++)
		rec = rec * 10 + (**v - '0');
	return digits && rec < REG_RECS ? rec : -1;
}

/* Reads "<id>.<key hex>:<record>|-[:<handed>,...]" from @v. */
PP_START static int parse_var(const char *v, long *id, uint64_t *key, long *rec)
{
	int digits = 0;

	*id = 0;
	*key = 0;
	*rec = -1;
	nhanded = 0;
	for (; *v >= '0' && *v <= '9'; v++) {
		if (*id > (1l << 30))
			return -EINVAL;
		*id = *id * 10 + (*v - '0');
		digits++;
	}
	if (!digits || *v++ != '.')
		return -EINVAL;
	for (digits = 0; digits < 16; digits++, v++) {
		int x = *v >= '0' && *v <= '9' ? *v - '0' :
			*v >= 'a' && *v <= 'f' ? *v - 'a' + 10 :
						 -1;

		if (x < 0)
			return -EINVAL;
		*key = *key << 4 | (uint64_t)x;
	}
	if (*v++ != ':')
		return -EINVAL;
	if (*v == '-')
		v++;
	else if ((*rec = parse_rec(&v)) < 0)
		return -EINVAL;
	if (*v == ':') {
		do {
			long h;

			v++;
			if ((h = parse_rec(&v)) < 0 || nhanded == PP_EXEC_HANDED_MAX)
				return -EINVAL;
			handed[nhanded++] = (int32_t)h;
		} while (*v == ',');
	}
	return *v ? -EINVAL : 0;
}

PP_START int pp_reg_join(char **envp)
{
	const char *v = NULL;
	struct reg_header *h;
	struct shmid_ds ds;
	long id, rec, euid;
	uint64_t key;

	for (char **e = envp; e && *e; e++)
		if (pp_has_prefix(*e, REG_VAR))
			v = *e + sizeof(REG_VAR) - 1;
	if (!v || !*v)
		return -ENOENT;
	if (parse_var(v, &id, &key, &rec))
		return -EINVAL;
	/*
	 * Only a segment of exactly our size that belongs to this user and is
	 * open to nobody else: another user's (or one they can write) is
	 * never taken, whatever the environment says.
	 */
	euid = (long)getauxval(AT_EUID);
	if (PP_SYSCALL(SYS_shmctl, (int)id, IPC_STAT, &ds) || ds.shm_segsz != REG_SIZE ||
	    (long)ds.shm_perm.uid != euid || (long)ds.shm_perm.cuid != euid ||
	    (ds.shm_perm.mode & 0777) != 0600)
		return -EINVAL;
	h = attach((int)id);
	if (!h)
		return -ENOMEM;
	if (h->magic != REG_MAGIC || h->version != REG_VERSION || h->slots != REG_SLOTS ||
	    h->recs != REG_RECS || h->slot_size != sizeof(struct pp_shared) ||
	    h->rec_size != sizeof(struct reg_rec) || h->entries != REC_ENTRIES || h->key != key) {
		detach(h);
		return -EINVAL;
	}
	pp_reg_nslots = h->slots_limit && h->slots_limit < REG_SLOTS ? h->slots_limit : REG_SLOTS;
	pp_reg_nrecs = h->recs_limit && h->recs_limit < REG_RECS ? h->recs_limit : REG_RECS;
	pp_reg_claim_ns = h->claim_ms && h->claim_ms * 1000000ull < REG_CLAIM_WINDOW_NS ?
				  h->claim_ms * 1000000ull :
				  REG_CLAIM_WINDOW_NS;
	/* The record is this image's to claim only once the segment is known good. */
	joined_rec = rec < pp_reg_nrecs ? (int32_t)rec : -1;
	reg_id = (int)id;
	__atomic_store_n(&pp_reg, h, __ATOMIC_RELEASE);
	return 0;
}
