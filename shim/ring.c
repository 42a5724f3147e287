// SPDX-License-Identifier: MIT
#include "ring.h"

#include "config.h"
#include "fault.h"
#include "log.h"
#include "pool.h"
#include "sys.h"
#include "thp.h"

#include <errno.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

/* Per-thread cache of (owner incarnation -> ring), checked on every write. */
#define TL_RINGS 4

struct tl_entry {
	struct pp_rings *set;
	const uint32_t *gen_word; /* the owner's incarnation counter */
	uint32_t gen;
	struct pp_ring *ring;
};

static __thread struct tl_entry tl_rings[TL_RINGS] __attribute__((tls_model("initial-exec")));
static __thread long tl_tid __attribute__((tls_model("initial-exec")));
static __thread unsigned int tl_next __attribute__((tls_model("initial-exec")));

static size_t page_size;

size_t pp_page_size(void)
{
	size_t v = __atomic_load_n(&page_size, __ATOMIC_RELAXED);

	if (!v) {
		v = (size_t)sysconf(_SC_PAGESIZE);
		__atomic_store_n(&page_size, v, __ATOMIC_RELAXED);
	}
	return v;
}

static size_t round_up(size_t v, size_t to)
{
	return (v + to - 1) / to * to;
}

/*
 * Held only for a few list operations and only by threads inside the
 * engine for this pipe; bounded so that a signal handler interrupting the
 * holder in the same thread gives up (and writes plainly) instead of
 * spinning forever.
 */
static bool list_trylock(struct pp_rings *set)
{
	for (int i = 0; i < 10000; i++) {
		if (!__atomic_exchange_n(&set->lock, 1, __ATOMIC_ACQUIRE))
			return true;
		__builtin_ia32_pause();
	}
	return false;
}

static void list_unlock(struct pp_rings *set)
{
	__atomic_store_n(&set->lock, 0, __ATOMIC_RELEASE);
}

/*
 * One mapping: the data pages, then header page(s) holding the struct
 * and the per-page marks. Data comes first so that it starts on a huge
 * page boundary when the pool maps huge pages. Twice the capacity by
 * default, so that the slot rule alone proves every reuse while the
 * capacity stays what it was.
 */
static struct pp_ring *ring_create(uint32_t capacity)
{
	size_t page = pp_page_size();
	size_t size = pp_cfg.ring_size ? pp_cfg.ring_size : 2 * (size_t)capacity;
	size_t npages, header, len;
	struct pp_ring *r;
	bool thp, huge;
	char *base;

	if (size < 32 * page)
		size = 32 * page;
	size = round_up(size, page);
	npages = size / page;
	header = round_up(sizeof(*r) + 2 * npages * sizeof(uint64_t), page);
	len = header + size;
	thp = pp_thp_eligible(size);
	huge = thp && pp_thp_want() == 1;
	base = pp_pool_map(len, thp, huge);
	if (!base)
		return NULL;
	r = (struct pp_ring *)(base + size);
	r->mark_bytes = (uint64_t *)(r + 1);
	r->mark_slots = r->mark_bytes + npages;
	r->data = base;
	r->size = size;
	r->max_chunk = size / 2;
	r->map_len = len;
	r->resident = size;
	r->thp = thp;
	r->huge = huge;
	r->cold = true;
	r->lap_end = size;
	return r;
}

static uint32_t gen_of(const uint32_t *gen_word)
{
	return __atomic_load_n(gen_word, __ATOMIC_ACQUIRE);
}

struct pp_ring *pp_ring_get(struct pp_rings *set, const uint32_t *gen_word, uint32_t capacity)
{
	uint32_t gen = gen_of(gen_word);
	struct tl_entry *slot;
	struct pp_ring *r;

	for (int i = 0; i < TL_RINGS; i++) {
		struct tl_entry *e = &tl_rings[i];

		if (e->set == set && e->gen == gen)
			return e->ring;
	}
	/* Evict an entry of an owner that is gone, else round robin. */
	slot = &tl_rings[tl_next++ % TL_RINGS];
	for (int i = 0; i < TL_RINGS; i++) {
		struct tl_entry *e = &tl_rings[i];

		if (!e->set || gen_of(e->gen_word) != e->gen) {
			slot = e;
			break;
		}
	}
	if (!tl_tid)
		tl_tid = pp_sys_gettid();

	/* Ours already (the cache forgot it)? */
	if (!list_trylock(set))
		return NULL;
	for (r = set->head; r && r->owner != tl_tid; r = r->next)
		;
	list_unlock(set);
	if (!r) {
		r = ring_create(capacity);
		if (!r)
			return NULL;
		r->owner = tl_tid;
		if (!list_trylock(set)) {
			pp_pool_unmap(r->data, r->map_len);
			return NULL;
		}
		r->next = set->head;
		set->head = r;
		list_unlock(set);
	}
	*slot = (struct tl_entry){ .set = set, .gen_word = gen_word, .gen = gen, .ring = r };
	return r;
}

/* Confirms that every push so far went into pipe @ino. */
static bool verify_identity(struct pp_ring *r, int fd, uint64_t ino, struct pp_ring_checks *c)
{
	uint64_t now;

	c->identity++;
	if (pp_sys_pipe_ino(fd, &now) || now != ino)
		return false;
	r->verified_slots = r->pushed_slots;
	return true;
}

long pp_ring_reserve(struct pp_ring *r, size_t len, int fd, int stage_fd, uint64_t ino,
		     uint32_t capacity_max, struct pp_ring_checks *checks)
{
	size_t page = pp_page_size();
	size_t off = r->head, first, last;
	uint64_t newest_bytes = 0, newest_slots = 0, cap_slots = capacity_max / page;
	int queued, staged = 0;

	len = round_up(len, page);
	if (len > r->max_chunk)
		return -EBUSY;
	if (off + len > r->size)
		off = 0;
	first = off / page;
	last = (off + len) / page;
	for (size_t i = first; i < last; i++) {
		if (r->mark_slots[i] > newest_slots) {
			newest_slots = r->mark_slots[i];
			newest_bytes = r->mark_bytes[i];
		}
	}
	if (!newest_slots)
		return (long)off; /* never pushed */
	/*
	 * The pipe holds at most capacity/page slots and is FIFO: that many
	 * pushes after the region, all into this pipe, prove it consumed.
	 */
	if (cap_slots && r->pushed_slots - newest_slots >= cap_slots) {
		if (r->verified_slots >= newest_slots + cap_slots)
			return (long)off;
		if (!verify_identity(r, fd, ino, checks))
			return -ESTALE;
		return (long)off;
	}
	/* Exact test: fewer bytes queued than we pushed after the region. */
	if (!verify_identity(r, fd, ino, checks))
		return -ESTALE;
	checks->fionread++;
	if (pp_fault(PP_FAULT_FIONREAD))
		return -EBUSY;
	if (stage_fd >= 0) {
		if (pp_sys_ioctl(stage_fd, FIONREAD, &staged) || staged < 0)
			return -EBUSY;
	}
	if (pp_sys_ioctl(fd, FIONREAD, &queued) == 0 && queued >= 0 &&
	    (uint64_t)queued + (uint64_t)staged <= r->pushed_bytes - newest_bytes)
		return (long)off;
	return -EBUSY;
}

void pp_ring_pushed(struct pp_ring *r, size_t off, size_t bytes)
{
	size_t page = pp_page_size();

	while (bytes) {
		size_t n = bytes < page ? bytes : page;
		size_t i = off / page;

		r->pushed_bytes += n;
		r->pushed_slots++;
		r->mark_bytes[i] = r->pushed_bytes;
		r->mark_slots[i] = r->pushed_slots;
		off += n;
		bytes -= n;
	}
}

void pp_ring_commit(struct pp_ring *r, size_t off, size_t len)
{
	r->head = off + round_up(len, pp_page_size());
	if (r->head >= r->size)
		r->head = 0;
}

/* Every page of the ring is fresh: nobody's, it may be written at once. */
static void forget_marks(struct pp_ring *r)
{
	size_t npages = r->size / pp_page_size();

	for (size_t i = 0; i < npages; i++)
		r->mark_slots[i] = r->mark_bytes[i] = 0;
}

/*
 * Gives the ring fresh pages of the other kind. Safe at any time, like
 * trimming: the pipe keeps the pages it holds. The next lap pays the
 * faults (as any new ring does) and is not counted.
 */
static void switch_backing(struct pp_ring *r, bool huge)
{
	size_t header = r->map_len - r->size;

	if (!pp_pool_replace(r->data, r->size, huge)) {
		pp_debug("ring %p: cannot switch to %s pages", (void *)r->data,
			 huge ? "huge" : "4 KiB");
		return;
	}
	/* The same advice on the header, so that the two stay one mapping. */
	madvise(r->data + r->size, header, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	forget_marks(r);
	r->huge = huge;
	r->cold = true;
}

void pp_ring_account(struct pp_ring *r, uint64_t ns, size_t bytes)
{
	int want;
	bool next;

	if (!r->thp)
		return;
	want = pp_thp_want();
	if (want >= 0 && r->huge != (bool)want) {
		switch_backing(r, want);
		return;
	}
	if (!ns) {
		/* Not timed: whatever lap comes next starts from scratch. */
		r->cold = true;
		r->lap_ns = r->lap_bytes = 0;
		if (r->pushed_bytes >= r->lap_end)
			r->lap_end = r->pushed_bytes + r->size;
		return;
	}
	r->lap_ns += ns;
	r->lap_bytes += bytes;
	if (r->pushed_bytes < r->lap_end)
		return;
	r->lap_end = r->pushed_bytes + r->size;
	if (r->cold) {
		/* Faults were paid this lap: measure the next one on the same pages. */
		r->cold = false;
		r->lap_ns = r->lap_bytes = 0;
		return;
	}
	if (r->lap_ns < PP_THP_LAP_MIN_NS)
		return; /* too short to tell: the lap goes on for another fill */
	next = pp_thp_lap(r->huge, r->lap_ns, r->lap_bytes);
	r->lap_ns = r->lap_bytes = 0;
	if (next != r->huge)
		switch_backing(r, next);
}

static uint64_t trimmed_bytes; /* given back by trimming, in all */

void pp_rings_trim(struct pp_rings *set, const struct pp_ring_trim *t)
{
	uint64_t now = t->now, idle = t->idle;
	size_t page = pp_page_size(), keep = t->keep;

	if (!list_trylock(set))
		return;
	for (struct pp_ring *r = set->head; r; r = r->next) {
		size_t npages;

		/* Claim it first: the owner writes its fields only while busy. */
		if (__atomic_exchange_n(&r->busy, 1, __ATOMIC_ACQUIRE))
			continue;
		if (r->resident <= keep || r->last_use_ns > now || now - r->last_use_ns < idle) {
			__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
			continue;
		}
		/* Keep the pages the next write will use; drop the rest. */
		if (keep >= r->size)
			keep = r->size;
		__atomic_add_fetch(&trimmed_bytes, r->resident - keep, __ATOMIC_RELAXED);
		if (r->head + keep <= r->size) {
			madvise(r->data, r->head, MADV_DONTNEED);
			madvise(r->data + r->head + keep, r->size - r->head - keep, MADV_DONTNEED);
		} else {
			size_t wrap = r->head + keep - r->size;

			madvise(r->data + wrap, r->head - wrap, MADV_DONTNEED);
		}
		/* Fresh pages are nobody's: they may be written at once. */
		npages = r->size / page;
		r->cold = true;
		for (size_t i = 0; i < npages; i++) {
			size_t off = i * page;
			bool kept = r->head + keep <= r->size ?
					    off >= r->head && off < r->head + keep :
					    off >= r->head || off < r->head + keep - r->size;

			if (!kept)
				r->mark_slots[i] = r->mark_bytes[i] = 0;
		}
		r->resident = keep;
		__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
	}
	list_unlock(set);
}

void pp_ring_trim_plan(struct pp_ring_trim *t, uint64_t now_ns, bool pressure)
{
	*t = (struct pp_ring_trim){
		.now = now_ns,
		.idle = pp_cfg.idle_ms * 1000000ull,
		.keep = round_up(pp_cfg.pool_keep, pp_page_size()),
	};
	/* Under pressure: everything not written since the last look goes. */
	if (pressure) {
		t->idle /= 2;
		t->keep = 0;
	}
}

uint64_t pp_rings_trimmed_bytes(void)
{
	return __atomic_load_n(&trimmed_bytes, __ATOMIC_RELAXED);
}

PP_COMMON void pp_rings_free(struct pp_rings *set)
{
	struct pp_ring *r, *next;

	/* Nobody is inside the engine for the owner any more: no lock needed. */
	r = set->head;
	set->head = NULL;
	for (; r; r = next) {
		next = r->next;
		pp_pool_unmap(r->data, r->map_len);
	}
}

PP_COMMON void pp_rings_forget(struct pp_rings *set)
{
	/* Written only when there is something to forget: no copy-on-write for nothing. */
	if (set->lock)
		set->lock = 0;
	if (set->head)
		set->head = NULL;
}

void pp_ring_after_fork_child(void)
{
	for (int i = 0; i < TL_RINGS; i++)
		tl_rings[i] = (struct tl_entry){ 0 };
	tl_tid = 0;
	pp_pool_reset();
}
