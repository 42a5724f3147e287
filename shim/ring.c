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
/*
 * Which thread this is, for its rings: the kernel reuses a tid once its
 * thread is gone, a serial is never given twice, so a thread that got
 * the tid of an exited one never takes that one's ring for its own.
 */
static __thread uint64_t tl_serial __attribute__((tls_model("initial-exec")));
static uint64_t serials; /* the last serial given */

static uint64_t exited_reused, exited_freed; /* rings of exited threads, in all */
/* The pool refused a ring: the next trim asks about every ring's owner. */
static int pool_refused;

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
		pp_cpu_relax();
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
 * capacity stays what it was. @size gets the data bytes, @len the whole.
 */
static void ring_geometry(uint32_t capacity, size_t *size, size_t *len)
{
	size_t page = pp_page_size();
	size_t sz = pp_cfg.ring_size ? pp_cfg.ring_size : 2 * (size_t)capacity;

	if (sz < 32 * page)
		sz = 32 * page;
	sz = round_up(sz, page);
	*size = sz;
	*len = round_up(sizeof(struct pp_ring) + 2 * (sz / page) * sizeof(uint64_t), page) + sz;
}

static struct pp_ring *ring_create(size_t size, size_t len)
{
	size_t npages = size / pp_page_size();
	struct pp_ring *r;
	bool thp, huge;
	char *base;

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
	r->writer_fd = -1;
	return r;
}

/* Unmaps the rings of list @r (linked by next), which nobody can reach any more. */
static void rings_unmap(struct pp_ring *r)
{
	while (r) {
		struct pp_ring *next = r->next; /* the struct lives in the mapping */

		pp_pool_unmap(r->data, r->map_len);
		r = next;
	}
}

/* This thread's tid and serial, given once (a signal handler may get there first). */
static void thread_identity(void)
{
	uint64_t none = 0;

	if (!tl_tid)
		tl_tid = pp_sys_gettid();
	if (!tl_serial)
		__atomic_compare_exchange_n(&tl_serial, &none,
					    __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED),
					    false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* This thread's ring in @set, or NULL; under the list lock. */
static struct pp_ring *find_own(struct pp_rings *set)
{
	struct pp_ring *r = set->head;

	while (r && r->owner_serial != tl_serial)
		r = r->next;
	return r;
}

/*
 * Rings whose owner may have exited, as they were when gathered under the
 * list lock, to be asked about without it: tgkill() is a system call, and
 * the lock is only ever tried by writers (list_trylock).
 */
#define GONE_BATCH 16
struct owner_check {
	struct pp_ring *r;
	uint64_t serial;
	long tid, pid;
	bool gone;
};

static void check_of(struct owner_check *c, const struct pp_ring *r)
{
	*c = (struct owner_check){
		.r = (struct pp_ring *)r,
		.serial = r->owner_serial,
		.tid = r->owner,
		.pid = r->owner_pid,
	};
}

/*
 * Whether @c's owner has exited: no thread @tid in this process (@pid),
 * or this very thread has its tid now and is not its owner (tids are
 * reused). A ring made by another process that shares this memory (a
 * CLONE_VM child) is not for this one to judge. Async-signal-safe.
 */
static bool owner_gone(const struct owner_check *c, long pid)
{
	if (c->pid != pid || c->serial == tl_serial)
		return false;
	if (c->tid == tl_tid)
		return true;
	return PP_SYSCALL(SYS_tgkill, pid, c->tid, 0) == -ESRCH;
}

/*
 * Under the list lock, for the rings of @c still in @set as they were
 * gathered (same serial: a ring changes hands only under this lock):
 * with @want_size, this thread takes over the first whose owner is gone
 * and that holds @want_size data bytes, and returns it; the others of
 * that size stay for the next thread that needs one (a pool that churns
 * threads then maps nothing), trimming unmaps them once idle. Rings of
 * gone owners that are smaller, or all of them without @want_size, leave
 * the list for @freed. For the rings whose owner is still there, @trim
 * sets when to ask again.
 */
static struct pp_ring *settle_owners(struct pp_rings *set, struct owner_check *c, int n,
				     size_t want_size, const struct pp_ring_trim *trim,
				     struct pp_ring **freed)
{
	struct pp_ring **link = &set->head, *r, *took = NULL;
	uint64_t gap_max = 64 * pp_cfg.idle_ms * 1000000ull;

	while ((r = *link)) {
		int i = 0;

		while (i < n && (c[i].r != r || c[i].serial != r->owner_serial))
			i++;
		if (i == n) {
			link = &r->next;
			continue;
		}
		if (!c[i].gone) {
			if (trim) {
				r->check_at = trim->now + r->check_gap;
				r->check_gap =
					2 * r->check_gap < gap_max ? 2 * r->check_gap : gap_max;
			}
			link = &r->next;
			continue;
		}
		if (want_size && r->size >= want_size && took) {
			link = &r->next;
			continue;
		}
		/*
		 * Its owner never writes it again (busy may still say it was
		 * inside a write when it went: pthread_exit() in a handler);
		 * the exchange orders its last writes before what follows.
		 */
		__atomic_exchange_n(&r->busy, 1, __ATOMIC_ACQUIRE);
		if (want_size && r->size >= want_size) {
			r->owner = tl_tid;
			r->owner_pid = c[i].pid;
			r->owner_serial = tl_serial;
			r->check_use = r->check_at = r->check_gap = 0;
			__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
			__atomic_add_fetch(&exited_reused, 1, __ATOMIC_RELAXED);
			took = r;
			link = &r->next;
			continue;
		}
		*link = r->next;
		r->next = *freed;
		*freed = r;
		__atomic_add_fetch(&exited_freed, 1, __ATOMIC_RELAXED);
	}
	return took;
}

static int told_gone;

/*
 * A ring for this thread, which has none in @set (@c: the @n others, as
 * gathered): one whose owner exited, taken over as it is, or a new one.
 * Rings of exited owners too small for the pipe now are unmapped. The reuse rule's
 * evidence is the ring's own: every push it records went into this pipe
 * (the owner's writes were checked like this thread's will be), so it
 * holds for whichever thread writes the ring next.
 */
static struct pp_ring *ring_for_thread(struct pp_rings *set, uint32_t capacity,
				       struct owner_check *c, int n)
{
	long pid = PP_SYSCALL(SYS_getpid);
	struct pp_ring *r = NULL, *mine, *freed = NULL;
	size_t size, len;
	int gone = 0;

	ring_geometry(capacity, &size, &len);
	for (int i = 0; i < n; i++)
		gone += c[i].gone = owner_gone(&c[i], pid);
	if (gone) {
		if (!list_trylock(set))
			return NULL;
		/* A signal handler of this thread may have got it one meanwhile. */
		r = find_own(set);
		if (!r)
			r = settle_owners(set, c, n, size, NULL, &freed);
		list_unlock(set);
		rings_unmap(freed);
		pp_debug_once(&told_gone, "rings of exited threads: taken over by a thread that "
					  "needs one, else unmapped (said once)");
		if (r)
			return r;
	}
	r = ring_create(size, len);
	if (!r) {
		__atomic_store_n(&pool_refused, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	r->owner = tl_tid;
	r->owner_pid = pid;
	r->owner_serial = tl_serial;
	if (!list_trylock(set)) {
		pp_pool_unmap(r->data, r->map_len);
		return NULL;
	}
	mine = find_own(set);
	if (!mine) {
		r->next = set->head;
		set->head = r;
	}
	list_unlock(set);
	if (mine) {
		pp_pool_unmap(r->data, r->map_len);
		r = mine;
	}
	return r;
}

static uint32_t gen_of(const uint32_t *gen_word)
{
	return __atomic_load_n(gen_word, __ATOMIC_ACQUIRE);
}

/* The calling thread's ring in @set, found in the list or given it (the cache missed). */
static __attribute__((noinline)) struct pp_ring *ring_lookup(struct pp_rings *set,
							     uint32_t capacity)
{
	struct owner_check c[GONE_BATCH];
	struct pp_ring *r;
	int n = 0;

	thread_identity();
	/* Ours already (the cache forgot it)? */
	if (!list_trylock(set))
		return NULL;
	r = find_own(set);
	if (!r) {
		/* The others, whose owners may be gone: see ring_for_thread(). */
		for (struct pp_ring *o = set->head; o && n < GONE_BATCH; o = o->next)
			check_of(&c[n++], o);
	}
	list_unlock(set);
	return r ? r : ring_for_thread(set, capacity, c, n);
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
	r = ring_lookup(set, capacity);
	if (!r)
		return NULL;
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

	/* A push from inside a page (a span's rest, ppipe.h) takes a slot for each page it touches. */
	while (bytes) {
		size_t n = page - off % page;
		size_t i = off / page;

		if (n > bytes)
			n = bytes;
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
	/*
	 * Rounded from the end, not by the length: from inside a page, off +
	 * round_up(len) would leave the head inside a page, and the next
	 * region would start there, neither page-aligned nor covered by the
	 * reuse rule's check of its last page.
	 */
	r->head = round_up(off + len, pp_page_size());
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

/* Gives @r's memory back down to @keep bytes; the caller has claimed it (busy). */
static void trim_ring(struct pp_ring *r, size_t keep)
{
	size_t page = pp_page_size(), npages = r->size / page;

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
}

/*
 * Whether trimming asks now if @r's owner still exists (claimed, so its
 * last use is stable): once it has been idle for a while, then after a
 * gap that doubles while the owner is there (settle_owners()); every ring
 * after the pool refused one.
 */
static bool owner_check_due(struct pp_ring *r, const struct pp_ring_trim *t, bool idle)
{
	if (t->any_owner)
		return true;
	if (!idle)
		return false;
	if (r->check_use != r->last_use_ns) {
		r->check_use = r->last_use_ns;
		r->check_at = 0;
		r->check_gap = pp_cfg.idle_ms * 1000000ull;
	}
	return t->now >= r->check_at;
}

void pp_rings_trim(struct pp_rings *set, const struct pp_ring_trim *t)
{
	struct owner_check c[GONE_BATCH];
	struct pp_ring *freed = NULL;
	uint64_t now = t->now;
	long pid;
	int n = 0, gone = 0;

	if (!list_trylock(set))
		return;
	for (struct pp_ring *r = set->head; r; r = r->next) {
		bool idle;

		/* Claim it first: the owner writes its fields only while busy. */
		if (__atomic_exchange_n(&r->busy, 1, __ATOMIC_ACQUIRE))
			continue;
		idle = r->last_use_ns <= now && now - r->last_use_ns >= t->idle;
		if (n < GONE_BATCH && owner_check_due(r, t, idle))
			check_of(&c[n++], r);
		if (idle && r->resident > t->keep)
			trim_ring(r, t->keep);
		__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
	}
	list_unlock(set);
	if (!n)
		return;
	/* The owners are asked without the lock; what they say is applied under it. */
	pid = PP_SYSCALL(SYS_getpid);
	for (int i = 0; i < n; i++)
		gone += c[i].gone = owner_gone(&c[i], pid);
	if (!list_trylock(set))
		return; /* the next trim asks again */
	settle_owners(set, c, n, 0, t, &freed);
	list_unlock(set);
	if (gone)
		pp_debug_once(&told_gone, "rings of exited threads: taken over by a thread that "
					  "needs one, else unmapped (said once)");
	rings_unmap(freed);
}

void pp_ring_trim_plan(struct pp_ring_trim *t, uint64_t now_ns, bool pressure)
{
	*t = (struct pp_ring_trim){
		.now = now_ns,
		.idle = pp_cfg.idle_ms * 1000000ull,
		.keep = round_up(pp_cfg.pool_keep, pp_page_size()),
		/* The pool refused a ring since the last trim: ask about every owner. */
		.any_owner = __atomic_exchange_n(&pool_refused, 0, __ATOMIC_RELAXED) != 0,
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

uint64_t pp_rings_exited_reused(void)
{
	return __atomic_load_n(&exited_reused, __ATOMIC_RELAXED);
}

uint64_t pp_rings_exited_freed(void)
{
	return __atomic_load_n(&exited_freed, __ATOMIC_RELAXED);
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

uint64_t pp_ring_self_serial(void)
{
	return tl_serial;
}

void pp_ring_after_fork_child(void)
{
	for (int i = 0; i < TL_RINGS; i++)
		tl_rings[i] = (struct tl_entry){ 0 };
	tl_tid = 0;
	tl_serial = 0;
	/* What this process does from here on (no page written for nothing). */
	if (pool_refused)
		pool_refused = 0;
	if (exited_reused || exited_freed)
		exited_reused = exited_freed = 0;
	pp_pool_reset();
}
