// SPDX-License-Identifier: MIT
/*
 * Sweeps of the pipe registry (registry.h): finding the records of
 * processes that are gone, and the counts nobody stands behind, and
 * giving them back. Off the hot paths: only when the registry is full, or
 * on the first record made after the time the last sweep set; each sweep
 * is bounded.
 *
 * Layer: pipes (may use: pipes, resources, base).
 */
#include "registry.h"
#include "registry_layout.h"

#include "compiler.h"
#include "config.h"
#include "log.h"
#include "sys.h"
#include "vfork.h"

#include <fcntl.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

/*
 * Which pages of the segment exist: a page nobody ever wrote holds only
 * zeros (free records, unused slots), and reading it would make it
 * memory. Walks over the whole registry look only at the pages that
 * exist, so that its memory stays what its use made it. Pages of 4 KiB
 * or more; unknown (mincore refused): all.
 */
#define REG_PAGES_MAX ((REG_SIZE + 4095) / 4096)
struct resident {
	unsigned char vec[REG_PAGES_MAX];
	size_t shift;
};

static void resident_map(struct resident *m)
{
	unsigned long page = getauxval(AT_PAGESZ);

	m->shift = 12;
	while (page > 4096 && (1ul << m->shift) < page)
		m->shift++;
	if (PP_SYSCALL(SYS_mincore, pp_reg, REG_SIZE, m->vec))
		memset(m->vec, 1, sizeof(m->vec));
}

static bool resident(const struct resident *m, const void *p)
{
	return m->vec[(size_t)((const char *)p - (const char *)pp_reg) >> m->shift] & 1;
}

/* Record @i's owner word, or 0 (free) when its page was never written. */
static uint64_t rec_own(const struct resident *m, uint32_t i)
{
	const struct reg_rec *r = &reg_recs()[i];

	return resident(m, &r->own) ? __atomic_load_n(&r->own, __ATOMIC_ACQUIRE) : 0;
}

/*
 * Whether the process @pid is gone. With @seen_ns (CLOCK_BOOTTIME at which
 * it was known to be the process meant), a process that now has the pid
 * but started after that is another one: gone too. A process that exists
 * but cannot be looked at (another user's, with /proc mounted hidepid) is
 * taken to be the one meant.
 */
static bool proc_gone(int32_t pid, uint64_t seen_ns)
{
	char path[32] = "/proc/", buf[512];
	static uint64_t tick_ns;
	const char *c;
	long fd, n;
	uint64_t start = 0;
	int field;

	if (pid <= 0)
		return false;
	if (PP_SYSCALL(SYS_kill, pid, 0) == -ESRCH)
		return true;
	pp_utoa((unsigned long)pid, path + 6);
	memcpy(path + strlen(path), "/stat", 6);
	fd = PP_SYSCALL(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return PP_SYSCALL(SYS_kill, pid, 0) == -ESRCH;
	n = PP_SYSCALL(SYS_read, (int)fd, buf, sizeof(buf) - 1);
	pp_sys_close((int)fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	/* "pid (comm) S ...": comm may hold anything, so the fields start after the last ')'. */
	c = NULL;
	for (long i = 0; i < n; i++)
		if (buf[i] == ')')
			c = buf + i;
	if (!c || c[1] != ' ')
		return false;
	c += 2;
	if (*c == 'Z' || *c == 'X')
		return true; /* a zombie holds no fd any more */
	/* Field 22, starttime in clock ticks since boot; c is at field 3. */
	for (field = 3; *c && field < 22; c++)
		if (*c == ' ')
			field++;
	for (; *c >= '0' && *c <= '9'; c++)
		start = start * 10 + (uint64_t)(*c - '0');
	if (field != 22 || !seen_ns)
		return false;
	if (!tick_ns) {
		unsigned long hz = getauxval(AT_CLKTCK);

		tick_ns = 1000000000ull / (hz ? hz : 100);
	}
	return start > seen_ns / tick_ns;
}

/* ---- sweeps: what nobody gave back ---- */

/* Records one sweep examines at most, and the slots it recounts. */
#define SWEEP_RECS 512u
/*
 * (Small: a sweep may run in a signal handler that forks or execs, on an
 * alternate stack of a few KiB; its counts take 4 bytes a slot.)
 */
#define SWEEP_SLOTS 256u
/* A record nobody has named this long (a fork that failed, a child killed at birth). */
#define UNNAMED_NS (10ull * 1000000000ull)
/* A sweep that seems stuck (its process stopped) is taken over after this. */
#define SWEEP_STALE_NS (10ull * 1000000000ull)
/* Needed sweeps (the registry is full) at most this often. */
#define SWEEP_NEEDED_NS 100000000ull
/*
 * The next sweep on schedule: soon while sweeps find many dead records (a
 * storm of killed children), a second later while they find some, and up
 * to a minute later while they find little.
 */
#define BACKOFF_STORM_MS 100u
#define BACKOFF_MIN_MS 1000u
#define BACKOFF_MAX_MS 64000u

/*
 * Whether record @r, read as @own, stands for nothing any more: its owner
 * is gone, its claim window passed unclaimed, or nobody named it in time
 * and its maker is gone or long done.
 */
static bool rec_dead(const struct reg_rec *r, uint64_t own, uint64_t now)
{
	uint64_t made = __atomic_load_n(&r->made_ns, __ATOMIC_RELAXED);
	uint64_t age = now > made ? now - made : 0;
	int32_t pid = OWN_PID(own);

	switch (OWN_STATE(own)) {
	case REC_BUSY:
		/* Being made or taken apart by pid: only once pid is gone. */
		return proc_gone(pid, 0);
	case REC_EXEC:
		/* Unclaimed in time, or its image gone unclaimed: a plain verdict from now on. */
		return age > pp_reg_claim_ns ||
		       (pid && proc_gone(pid, __atomic_load_n(&r->seen_ns, __ATOMIC_RELAXED)));
	case REC_LIVE:
		if (!pid)
			return age > UNNAMED_NS ||
			       proc_gone(__atomic_load_n(&r->maker, __ATOMIC_RELAXED), 0);
		return proc_gone(pid, __atomic_load_n(&r->seen_ns, __ATOMIC_RELAXED));
	default:
		return false;
	}
}

/* Gives back what dead record @r held; true when it was ours to do. */
static bool rec_reclaim(struct reg_rec *r, uint64_t own)
{
	bool exec = OWN_STATE(own) == REC_EXEC;
	uint32_t n;

	if (!pp_reg_rec_set(r, &own, REC_BUSY, reg_pid()))
		return false;
	n = pp_reg_rec_empty(r, true);
	pp_reg_rec_free(r, own);
	reg_add(&pp_reg->reclaimed, 1);
	reg_add(exec ? &pp_reg->expired : &pp_reg->reclaimed_holds, n);
	return true;
}

/*
 * Recounts slots [from, from + n): the holds and charges the records list
 * for each, against its counts. A count above what the records list is a
 * leftover of a process killed between two steps; seen the same in two
 * passes in a row (a change in flight lasts nanoseconds, a pass over every
 * slot takes many sweeps), it is set right: holds simply, charges by
 * making the pipe plain first, since a charge is only ever lifted by the
 * image it describes.
 */
static void recount(const struct resident *m, uint32_t from, uint32_t n, uint32_t cycle)
{
	uint16_t hold[SWEEP_SLOTS], charge[SWEEP_SLOTS];

	memset(hold, 0, sizeof(hold));
	memset(charge, 0, sizeof(charge));
	for (uint32_t i = 0; i < pp_reg_nrecs; i++) {
		struct reg_rec *r = &reg_recs()[i];

		/* A record in use was written whole: its entries' page exists too. */
		if (OWN_STATE(rec_own(m, i)) == REC_FREE)
			continue;
		for (int k = 0; k < REC_ENTRIES; k++) {
			uint64_t e = __atomic_load_n(&r->ent[k], __ATOMIC_RELAXED);
			uint32_t at = ENT_SLOT(e) - from;

			if (!e || ENT_SLOT(e) < from || at >= n ||
			    !reg_slot_is(reg_slot_at(ENT_SLOT(e)), ENT_INO(e)))
				continue;
			if (ENT_KIND(e) == ENT_CHARGE)
				charge[at] += charge[at] < UINT16_MAX;
			else
				hold[at] += hold[at] < UINT16_MAX;
		}
	}
	for (uint32_t at = 0; at < n; at++) {
		struct pp_shared *s = reg_slot_at(from + at);
		uint64_t ino = resident(m, s) ? __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE) : 0;
		uint32_t hs, ps, eh, ep, mark, was;

		if (!ino || ino == REG_TOMB)
			continue;
		hs = __atomic_load_n(&s->holders, __ATOMIC_ACQUIRE);
		ps = __atomic_load_n(&s->pending, __ATOMIC_ACQUIRE);
		eh = hs > hold[at] ? hs - hold[at] : 0;
		ep = ps > charge[at] ? ps - charge[at] : 0;
		was = __atomic_load_n(&s->mark, __ATOMIC_RELAXED);
		eh = eh > 255 ? 255 : eh;
		ep = ep > 255 ? 255 : ep;
		mark = eh || ep ? (cycle & 0xffffu) << 16 | eh << 8 | ep : 0;
		if (mark && was == (((cycle - 1) & 0xffffu) << 16 | eh << 8 | ep)) {
			if (ep) {
				__atomic_store_n(&s->unsafe, 1, __ATOMIC_RELEASE);
				reg_dec_by(&s->pending, ep);
			}
			reg_dec_by(&s->holders, eh);
			reg_add(&pp_reg->healed, eh + ep);
			mark = 0;
		}
		if (mark != was)
			__atomic_store_n(&s->mark, mark, __ATOMIC_RELAXED);
		pp_reg_slot_maybe_free(s);
	}
}

/*
 * A sweep: up to SWEEP_RECS records are looked at from where the last one
 * stopped, those that stand for nothing are given back, and SWEEP_SLOTS
 * slots are recounted. It runs when the registry is full (@needed, ten
 * times a second at most), or on the first record made after the time the
 * last sweep set: a second later when it found plenty to give back, up to
 * a minute when it found little. One at a time per tree; never in a vfork
 * child. Returns whether it gave anything back.
 */
bool pp_reg_sweep(bool needed, uint64_t now)
{
	struct reg_header *h = __atomic_load_n(&pp_reg, __ATOMIC_ACQUIRE);
	uint64_t busy, since;
	uint32_t freed = 0, looked = 0, cursor, i, from, n, backoff;
	struct resident m;
	int32_t pid;

	if (!h || (!needed && now < __atomic_load_n(&h->sweep_after, __ATOMIC_RELAXED)) ||
	    pp_in_vfork_child())
		return false;
	since = __atomic_load_n(&h->sweep_since, __ATOMIC_RELAXED);
	/*
	 * A full registry sweeps at once, but not again within a tenth of a
	 * second of one that found nothing (it is full of living holders).
	 */
	if (needed ? now - __atomic_load_n(&h->sweep_empty, __ATOMIC_RELAXED) < SWEEP_NEEDED_NS :
		     now < __atomic_load_n(&h->sweep_after, __ATOMIC_RELAXED))
		return false;
	busy = __atomic_load_n(&h->sweeper, __ATOMIC_ACQUIRE);
	if (busy && now - since < SWEEP_STALE_NS && !proc_gone((int32_t)busy, 0))
		return false;
	pid = reg_pid();
	if (!__atomic_compare_exchange_n(&h->sweeper, &busy, (uint64_t)(uint32_t)pid, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return false;
	__atomic_store_n(&h->sweep_since, now, __ATOMIC_RELAXED);

	resident_map(&m);
	cursor = __atomic_load_n(&h->rec_cursor, __ATOMIC_RELAXED) % pp_reg_nrecs;
	for (i = 0; i < pp_reg_nrecs && looked < SWEEP_RECS; i++) {
		struct reg_rec *r = &reg_recs()[(cursor + i) % pp_reg_nrecs];
		uint64_t own = rec_own(&m, (cursor + i) % pp_reg_nrecs);

		if (OWN_STATE(own) == REC_FREE)
			continue;
		looked++;
		/* Ours (this process's holds, or one we are making) stand for us. */
		if (OWN_PID(own) == pid && OWN_STATE(own) != REC_EXEC)
			continue;
		if (rec_dead(r, own, now) && rec_reclaim(r, own))
			freed++;
	}
	__atomic_store_n(&h->rec_cursor, (cursor + i) % pp_reg_nrecs, __ATOMIC_RELAXED);

	from = __atomic_load_n(&h->slot_cursor, __ATOMIC_RELAXED) % pp_reg_nslots;
	n = pp_reg_nslots - from < SWEEP_SLOTS ? pp_reg_nslots - from : SWEEP_SLOTS;
	recount(&m, from, n, __atomic_load_n(&h->cycle, __ATOMIC_RELAXED));
	if (from + n >= pp_reg_nslots) {
		__atomic_store_n(&h->slot_cursor, 0, __ATOMIC_RELAXED);
		__atomic_fetch_add(&h->cycle, 1, __ATOMIC_RELAXED);
	} else {
		__atomic_store_n(&h->slot_cursor, from + n, __ATOMIC_RELAXED);
	}

	backoff = __atomic_load_n(&h->backoff_ms, __ATOMIC_RELAXED);
	if (needed && !freed)
		__atomic_store_n(&h->sweep_empty, now, __ATOMIC_RELAXED);
	if (freed && freed * 2 >= looked)
		backoff = BACKOFF_STORM_MS;
	else if (freed && freed * 8 >= looked)
		backoff = BACKOFF_MIN_MS;
	else
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS :
			  backoff < BACKOFF_MIN_MS     ? BACKOFF_MIN_MS :
							 backoff * 2;
	__atomic_store_n(&h->backoff_ms, backoff, __ATOMIC_RELAXED);
	__atomic_store_n(&h->sweep_after, now + backoff * 1000000ull, __ATOMIC_RELAXED);
	reg_add(&h->sweeps, 1);
	__atomic_store_n(&h->sweeper, 0, __ATOMIC_RELEASE);
	return freed;
}

bool pp_reg_sweep_now(void)
{
	if (!pp_reg)
		return false;
	__atomic_store_n(&pp_reg->sweep_empty, 0, __ATOMIC_RELAXED);
	return pp_reg_sweep(true, reg_boot_ns());
}

void pp_reg_note_full(const char *what)
{
	static int told;
	struct pp_stats_registry o;

	if (pp_reg)
		reg_add(&pp_reg->full, 1);
	if (!pp_cfg.debug || __atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
		return;
	pp_reg_occupancy(&o);
	pp_debug("the pipe registry is full (%llu of %llu slots, %llu of %llu records in use, "
		 "no %s left): pipes that cross into another process stay plain until some "
		 "close (said once per process)",
		 (unsigned long long)o.slots, (unsigned long long)o.slots_max,
		 (unsigned long long)o.records, (unsigned long long)o.records_max, what);
}

void pp_reg_occupancy(struct pp_stats_registry *o)
{
	struct reg_header *h = __atomic_load_n(&pp_reg, __ATOMIC_ACQUIRE);
	struct resident m;

	*o = (struct pp_stats_registry){ 0 };
	if (!h)
		return;
	resident_map(&m);
	o->slots_max = pp_reg_nslots;
	o->records_max = pp_reg_nrecs;
	for (uint32_t i = 0; i < pp_reg_nslots; i++) {
		const struct pp_shared *s = reg_slot_at(i);
		uint64_t ino = resident(&m, s) ? __atomic_load_n(&s->ino, __ATOMIC_RELAXED) : 0;

		o->slots += ino && ino != REG_TOMB;
	}
	for (uint32_t i = 0; i < pp_reg_nrecs; i++)
		o->records += OWN_STATE(rec_own(&m, i)) != REC_FREE;
	o->reclaimed = __atomic_load_n(&h->reclaimed, __ATOMIC_RELAXED);
	o->reclaimed_holds = __atomic_load_n(&h->reclaimed_holds, __ATOMIC_RELAXED);
	o->expired_charges = __atomic_load_n(&h->expired, __ATOMIC_RELAXED);
	o->healed = __atomic_load_n(&h->healed, __ATOMIC_RELAXED);
	o->full = __atomic_load_n(&h->full, __ATOMIC_RELAXED);
	o->sweeps = __atomic_load_n(&h->sweeps, __ATOMIC_RELAXED);
}
