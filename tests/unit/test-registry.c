// SPDX-License-Identifier: MIT
/*
 * The pipe registry (shim/registry.h), without a preload: a System V
 * segment made at the first slot asked for, marked for removal and open to
 * its user alone, with no fd left in the process; slots found, held and
 * freed (a freed slot in the middle of a probe sequence ends nobody's
 * search); every hold recorded as its process's; exec records charged,
 * undone and claimed (by the image they describe only: pid, command name
 * and time must match, and the charges then turn into holds); a segment
 * of the wrong size, owner, mode, key or header refused at join; and a
 * registry that other processes of the tree scribbled on (indices out of
 * range, corrupt counts, every record taken) handled without a crash.
 * Claims run in fork children: an image claims once. What the sweeps give
 * back (killed holders, unclaimed records) is test-registry-sweep's.
 */
#include "config.h"
#include "fdtable.h"
#include "init.h"
#include "pipe.h"
#include "real.h"
#include "registry.h"
#include "sys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "registry_layout.h"

static struct reg_header *hdr; /* the test's own mapping of the segment */
static int seg_id;

/* The first slot of @ino's probe sequence (a home slot), in the shim's mapping. */
static struct pp_shared *t_home(uint64_t ino)
{
	return reg_slot_at(reg_probe(reg_hash(ino), 0));
}

/*
 * The index of slot @s of the shim's first mapping of the segment (a
 * claim maps it again, elsewhere: pointers kept from before are still
 * those of the first), noted when it was made.
 */
static const struct pp_shared *home0, *other0;

static uint32_t t_index(const struct pp_shared *s)
{
	if (s >= home0 && s < home0 + REG_HOME_SLOTS)
		return (uint32_t)(s - home0);
	return REG_HOME_SLOTS + (uint32_t)(s - other0);
}

static struct reg_rec *t_rec_at(struct reg_header *h, uint32_t i)
{
	return (struct reg_rec *)((char *)h + REG_RECS_OFFSET) + i;
}
static char comm[16]; /* this program's command name */

static int run_child(void (*fn)(void *), void *arg)
{
	int status = -1;
	pid_t pid = fork();

	if (pid == 0) {
		failures = 0;
		/* What libppipe's fork handler does (init.c is not what this test is about). */
		pp_reg_fork_child(false);
		fn(arg);
		/* What libppipe's exit does (init.c is not what this test is about). */
		pp_reg_release_all();
		_exit(failures ? 1 : 0);
	}
	if (pid < 0)
		return -1;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Joins the registry @c describes, and claims this image's record. */
static int join_and_claim(const struct pp_exec_charge *c)
{
	char var[160];
	char *envp[] = { var, NULL };
	int r;

	snprintf(var, sizeof(var), "%s", c->env);
	r = pp_reg_join(envp);
	if (r) {
		fprintf(stderr, "join %s: %d\n", var, r);
		return -100;
	}
	return pp_reg_exec_claim();
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

/* The entries of this process's own records that name @s, of kind @kind. */
static int entries_of(const struct pp_shared *s, uint32_t kind, pid_t owner)
{
	int n = 0;

	for (uint32_t i = 0; i < REG_RECS; i++) {
		struct reg_rec *r = t_rec_at(hdr, i);

		if (OWN_STATE(r->own) == REC_FREE || OWN_PID(r->own) != owner)
			continue;
		for (int k = 0; k < REC_ENTRIES; k++)
			n += r->ent[k] && ENT_SLOT(r->ent[k]) == t_index(s) &&
			     ENT_KIND(r->ent[k]) == kind && ENT_INO(r->ent[k]) == (uint32_t)s->ino;
	}
	return n;
}

static void test_create(void)
{
	struct pp_exec_charge c;
	struct shmid_ds ds;
	struct pp_shared *s;
	int fds = count_fds();

	CHECK(!pp_reg_find(7) && !pp_reg_get(7, false), "nothing before the first slot");
	CHECK(pp_reg_exec_begin(&c, comm, NULL, NULL, 0, PP_EXEC_SELF) == -ENOENT,
	      "no exec record without a registry");
	CHECK(!pp_reg_get(0, true) && !pp_reg_get(UINT64_MAX, true) &&
		      !pp_reg_get(1ull << 32, true),
	      "inodes 0, the tombstone and beyond 32 bits are never slots");

	s = pp_reg_get(7, true);
	CHECK(s && s->ino == 7 && s->holders == 1 && !s->pending && !s->unsafe,
	      "a new slot, one holder");
	home0 = reg_home_slots();
	other0 = reg_other_slots();
	CHECK(count_fds() == fds, "no fd of the registry's: %d fds, %d before", count_fds(), fds);
	/* The segment: found through the variable an exec would get. */
	CHECK(pp_reg_exec_begin(&c, comm, NULL, NULL, 0, PP_EXEC_SELF) == 0 &&
		      sscanf(c.env, "PPIPE_REGISTRY=%d.", &seg_id) == 1,
	      "the exec variable names the segment: %s", c.env);
	pp_reg_exec_failed(&c);
	CHECK(shmctl(seg_id, IPC_STAT, &ds) == 0, "the segment: %s", strerror(errno));
	CHECK((ds.shm_perm.mode & 0777) == 0600 && (ds.shm_perm.mode & SHM_DEST) &&
		      ds.shm_perm.uid == geteuid() && ds.shm_perm.cuid == geteuid(),
	      "open to its user alone, and removed with its last process: mode %o",
	      (unsigned)ds.shm_perm.mode);
	hdr = shmat(seg_id, NULL, 0);
	if (hdr == (void *)-1) {
		perror("shmat");
		exit(99);
	}
	CHECK(entries_of(s, ENT_HOLD, getpid()) == 1, "the hold is recorded as this process's");
	pp_reg_put(s);
	CHECK(!pp_reg_find(7) && t_home(7)->ino != 7, "freed with its last holder");
	CHECK(entries_of(t_home(7), ENT_HOLD, getpid()) == 0, "and its entry");
}

/* What the test scribbles through must be what registry.c wrote. */
static void layout_check(void)
{
	struct pp_shared *s = pp_reg_get(11, true);
	struct pp_exec_charge c;
	uint64_t ino = 11;
	struct reg_rec *r;

	CHECK(hdr->magic == REG_MAGIC && hdr->version == REG_VERSION && hdr->slots == REG_SLOTS &&
		      hdr->recs == REG_RECS && hdr->rec_size == sizeof(struct reg_rec) &&
		      hdr->slot_size == sizeof(struct pp_shared) && hdr->entries == REC_ENTRIES,
	      "registry.c's header changed: update registry-layout.h");
	CHECK(s == t_home(11), "registry.c's hash changed: update t_home()");
	CHECK(pp_reg_exec_begin(&c, "layout", &s, &ino, 1, PP_EXEC_SELF) == 0 && c.rec >= 0,
	      "a record");
	r = t_rec_at(hdr, (uint32_t)c.rec);
	CHECK(OWN_PID(r->own) == getpid() && OWN_STATE(r->own) == REC_EXEC &&
		      !strcmp(r->comm, "layout") &&
		      r->ent[0] == ENT(reg_slot_index(s), ENT_CHARGE, 11) && r->seen_ns &&
		      r->made_ns,
	      "registry.c's exec record changed: update registry-layout.h");
	pp_reg_exec_failed(&c);
	CHECK(OWN_STATE(r->own) == REC_FREE && !r->ent[0], "undone: the record is free");
	pp_reg_put(s);
	if (failures) {
		fprintf(stderr, "the layout is not what this test knows: stopping\n");
		exit(1);
	}
}

/* An inode other than @ino whose probe sequence starts in the same slot. */
static uint64_t collider(uint64_t ino, uint64_t from)
{
	for (uint64_t c = from;; c++)
		if (c != ino && t_home(c) == t_home(ino))
			return c;
}

/* One whose whole probe sequence is @ino's: among the home slots, and among the others. */
static uint64_t full_collider(uint64_t ino, uint64_t from)
{
	uint32_t nh = reg_nhome();

	for (uint64_t c = from;; c++)
		if (c != ino && t_home(c) == t_home(ino) &&
		    reg_probe(reg_hash(c), nh) == reg_probe(reg_hash(ino), nh))
			return c;
}

/* Holders, finds, tombstones, and a full probe sequence. */
static void test_slots(void)
{
	uint64_t a = 1000, b = collider(a, 2000), x = collider(a, b + 1);
	struct pp_shared *sa = pp_reg_get(a, true), *sb = pp_reg_get(b, true), *sx;

	CHECK(sa && sb && reg_slot_index(sb) == reg_probe(reg_hash(a), 1),
	      "a collision takes the next slot");
	CHECK(reg_slot_index(sa) < REG_HOME_SLOTS && reg_slot_index(sb) < REG_HOME_SLOTS,
	      "the first pipes take home slots: %u, %u", reg_slot_index(sa), reg_slot_index(sb));
	CHECK(pp_reg_get(a, true) == sa && sa->holders == 2, "found again: one holder more (%u)",
	      sa->holders);
	CHECK(entries_of(sa, ENT_HOLD, getpid()) == 2, "two holds on record");
	CHECK(pp_reg_find(a) == sa && sa->holders == 2, "find takes nothing");
	pp_reg_put(sa);
	CHECK(pp_reg_find(a) == sa && sa->holders == 1, "one holder left");

	/* Charged, no holder: kept. */
	__atomic_store_n(&sa->pending, 1, __ATOMIC_RELAXED);
	pp_reg_put(sa);
	CHECK(pp_reg_find(a) == sa, "a pending charge keeps the slot");
	__atomic_store_n(&sa->pending, 0, __ATOMIC_RELAXED);
	CHECK(sa->holders == 0, "no holder below zero: %u", sa->holders);
	/* A put of a hold this process does not have on record changes nothing. */
	sa->holders = 1;
	pp_reg_put(sa);
	CHECK(sa->holders == 1, "a hold not on record is not ours to give back: %u", sa->holders);
	sa->holders = 0;
	sa->ino = UINT64_MAX;
	CHECK(!pp_reg_find(a), "freed");

	/* A tombstone in the middle of b's probe sequence ends nobody's search. */
	CHECK(pp_reg_find(b) == sb, "b found past a freed slot");
	sx = pp_reg_get(x, true);
	CHECK(sx == sa, "a new inode takes the freed slot");
	CHECK(pp_reg_get(b, false) == sb && sb->holders == 2, "b taken again past it");
	pp_reg_put(sb);
	pp_reg_put(sb);
	pp_reg_put(sx);

	/* Every slot of a probe sequence garbage: full, for a new inode and a find. */
	{
		uint64_t y = full_collider(a, x + 1);
		static uint64_t saved[REG_HOME_SLOTS + REG_PROBES];
		uint32_t n = 0, i;

		while ((i = reg_probe(reg_hash(a), n)) != UINT32_MAX) {
			saved[n++] = reg_slot_at(i)->ino;
			reg_slot_at(i)->ino = 0xdead0000 + n;
		}
		CHECK(n == REG_HOME_SLOTS + REG_PROBES, "a probe sequence of %u slots", n);
		CHECK(!pp_reg_get(y, true) && !pp_reg_find(y), "a full probe sequence: no slot");
		for (uint32_t k = 0; k < n; k++)
			reg_slot_at(reg_probe(reg_hash(a), k))->ino = saved[k];
	}
	CHECK(pp_reg_slot_at(-1, a) == NULL && pp_reg_slot_at(REG_SLOTS, a) == NULL,
	      "slot_at: out of range");
	sa = pp_reg_get(a, true);
	CHECK(pp_reg_slot_at(reg_slot_index(sa), a) == sa &&
		      !pp_reg_slot_at(reg_slot_index(sa), a + 1),
	      "slot_at: only while it holds that inode");
	CHECK(pp_reg_hold(sa, a) && sa->holders == 2 && !pp_reg_hold(sa, a + 1),
	      "a hold on an existing slot, for its inode only");
	pp_reg_put(sa);
	pp_reg_put(sa);
}

/* Whether @list ("a,b,...") names exactly this process's live records. */
static bool own_records_named(const char *list)
{
	int named = 0, own = 0;

	for (const char *c = list; *c;) {
		char *end;
		unsigned long i = strtoul(c, &end, 10);

		if (end == c || i >= REG_RECS ||
		    OWN_PID(t_rec_at(hdr, (uint32_t)i)->own) != getpid() ||
		    OWN_STATE(t_rec_at(hdr, (uint32_t)i)->own) != REC_LIVE)
			return false;
		named++;
		c = *end == ',' ? end + 1 : end;
	}
	for (uint32_t i = 0; i < REG_RECS; i++)
		own += OWN_PID(t_rec_at(hdr, i)->own) == getpid() &&
		       OWN_STATE(t_rec_at(hdr, i)->own) == REC_LIVE;
	return named && named == own;
}

/* Records: charged, undone, refused when they cannot be made. */
static void test_records(void)
{
	uint64_t inos[PP_EXEC_MAX_PIPES + 1], key;
	struct pp_shared *sl[PP_EXEC_MAX_PIPES + 1];
	struct pp_exec_charge c, d;
	char want[96];
	int rec, id;

	for (int i = 0; i <= PP_EXEC_MAX_PIPES; i++) {
		inos[i] = 5000 + (uint64_t)i;
		sl[i] = pp_reg_get(inos[i], true);
	}
	CHECK(pp_reg_exec_begin(&c, comm, sl, inos, PP_EXEC_MAX_PIPES + 1, PP_EXEC_SELF) == -E2BIG,
	      "more pipes than a record holds");

	/* One slot that no longer holds the inode named: not charged. */
	inos[1] = 9999;
	CHECK(pp_reg_exec_begin(&c, comm, sl, inos, 3, PP_EXEC_SELF) == 0 && c.rec >= 0, "begin");
	inos[1] = 5001;
	CHECK(sl[0]->pending == 1 && sl[1]->pending == 0 && sl[2]->pending == 1,
	      "charged: %u %u %u", sl[0]->pending, sl[1]->pending, sl[2]->pending);
	CHECK(entries_of(sl[0], ENT_CHARGE, getpid()) == 1 &&
		      !entries_of(sl[1], ENT_CHARGE, getpid()),
	      "the charges are on record");
	key = hdr->key;
	snprintf(want, sizeof(want), "PPIPE_REGISTRY=%d.%016" PRIx64 ":%d:", seg_id, key, c.rec);
	CHECK(!strncmp(c.env, want, strlen(want)) && own_records_named(c.env + strlen(want)),
	      "env %s, want %s and this process's records", c.env, want);
	rec = c.rec;
	pp_reg_exec_failed(&c);
	CHECK(!sl[0]->pending && !sl[2]->pending && c.rec == -1, "undone");

	/* No pipes: the variable, no record; a vfork child's or a spawned child's names no records. */
	CHECK(pp_reg_exec_begin(&d, comm, NULL, NULL, 0, PP_EXEC_SELF) == 0 && d.rec == -1 &&
		      sscanf(d.env, "PPIPE_REGISTRY=%d.", &id) == 1 && id == seg_id &&
		      strstr(d.env, ":-:"),
	      "no record without pipes: %s", d.env);
	pp_reg_exec_failed(&d);
	CHECK(pp_reg_exec_begin(&d, comm, sl, inos, 1, PP_EXEC_VFORK_CHILD) == 0 &&
		      !strchr(strchr(d.env, ':') + 1, ':'),
	      "a vfork child hands on no records of its parent's: %s", d.env);
	pp_reg_exec_failed(&d);
	CHECK(pp_reg_exec_begin(&d, comm, sl, inos, 1, PP_EXEC_SPAWN_CHILD) == 0 &&
		      !strchr(strchr(d.env, ':') + 1, ':'),
	      "nor does a spawn: %s", d.env);
	pp_reg_exec_failed(&d);
	CHECK(pp_reg_exec_begin(&c, comm, sl, inos, 1, PP_EXEC_SELF) == 0 && c.rec == rec,
	      "the freed record is the first free one again: %d", c.rec);
	pp_reg_exec_failed(&c);

	/* Every record in use (or scribbled so): no room, nothing charged. */
	{
		static uint64_t saved[REG_RECS];

		for (uint32_t i = 0; i < REG_RECS; i++) {
			saved[i] = t_rec_at(hdr, i)->own;
			/* BUSY, by this process: no sweep takes them. */
			t_rec_at(hdr, i)->own = OWN(7, REC_BUSY, getpid());
		}
		CHECK(pp_reg_exec_begin(&c, comm, sl, inos, 1, PP_EXEC_SELF) == -ENOSPC,
		      "no free record");
		CHECK(!sl[0]->pending, "nothing charged");
		CHECK(!pp_reg_get(77777, true) && !pp_reg_find(77777),
		      "a new pipe cannot be held without a record of it");
		for (uint32_t i = 0; i < REG_RECS; i++)
			t_rec_at(hdr, i)->own = saved[i];
	}
	for (int i = 0; i <= PP_EXEC_MAX_PIPES; i++)
		pp_reg_put(sl[i]);
}

struct claim_case {
	const char *comm; /* the record's command name */
	bool by_parent; /* the record names the parent's pid */
	uint64_t age_ns; /* the record made this long ago */
	bool garbage; /* its entries scribbled */
	int want; /* what the claim returns */
};

static uint64_t claim_inos[3] = { 7001, 7002, 7003 };
static struct pp_shared *claim_slots[3];
static struct pp_exec_charge parent_charge;

static void claim_child(void *arg)
{
	const struct claim_case *k = arg;
	struct pp_exec_charge c;
	uint32_t holders[3];
	struct reg_rec *r;
	int got;

	for (int i = 0; i < 3; i++)
		holders[i] = claim_slots[i]->holders;
	if (k->by_parent) {
		c = parent_charge;
	} else if (pp_reg_exec_begin(&c, k->comm, claim_slots, claim_inos, 3, PP_EXEC_SELF)) {
		CHECK(0, "begin");
		return;
	}
	for (int i = 0; i < 3; i++)
		CHECK(claim_slots[i]->pending == 1, "pipe %d charged", i);
	r = t_rec_at(hdr, (uint32_t)c.rec);
	r->made_ns -= k->age_ns;
	if (k->garbage) {
		r->ent[0] = ENT(70000, ENT_CHARGE, 7001); /* out of range */
		r->ent[1] = ENT(t_index(claim_slots[1]), ENT_CHARGE, 1); /* not the slot's pipe */
		r->ent[5] = ENT(t_index(claim_slots[0]), 9, 7001); /* no kind */
	}
	got = join_and_claim(&c);
	CHECK(got == k->want, "claim: %d, want %d", got, k->want);
	if (k->want < 0) {
		for (int i = 0; i < 3; i++)
			CHECK(claim_slots[i]->pending == 1 && claim_slots[i]->holders == holders[i],
			      "pipe %d stays pending, not held", i);
		CHECK(pp_reg_claimed_left() == 0 && pp_reg_claimed_take(claim_inos[0]) == -ENOENT,
		      "nothing claimed");
		if (!k->by_parent)
			pp_reg_exec_failed(&c);
		return;
	}
	/* Claimed: the charges are this image's holds now (scribbled entries: none). */
	for (int i = 0; k->garbage && i < 2; i++)
		CHECK(claim_slots[i]->pending == 1 && claim_slots[i]->holders == holders[i],
		      "pipe %d, scribbled in the record: stays pending", i);
	for (int i = k->garbage ? 2 : 0; i < 3; i++)
		CHECK(claim_slots[i]->pending == 0 && claim_slots[i]->holders == holders[i] + 1 &&
			      entries_of(claim_slots[i], ENT_HOLD, getpid()) == 1,
		      "pipe %d: pending %u, holders %u (was %u), on record as held", i,
		      claim_slots[i]->pending, claim_slots[i]->holders, holders[i]);
	CHECK(OWN_STATE(r->own) == REC_LIVE && OWN_PID(r->own) == getpid(),
	      "the record is this image's own now");
	CHECK(join_and_claim(&c) == -ESRCH, "a record is claimed once");
	if (k->garbage) {
		/* The scribbled charges were the record's: nobody's now, a sweep's to find. */
		for (int i = 0; i < 2; i++)
			claim_slots[i]->pending = 0;
		return;
	}
	CHECK(pp_reg_claimed_left() == 3, "three to take over: %d", pp_reg_claimed_left());
	CHECK(pp_reg_claimed_take(7002) == t_index(claim_slots[1]), "taken: its slot index");
	CHECK(pp_reg_claimed_take(7002) == -ENOENT, "once");
	CHECK(pp_reg_claimed_left() == 2, "two left: %d", pp_reg_claimed_left());
	/* A fork child's holds recorded and given back (exit, exec): the untaken only. */
	pp_reg_fork_prepare();
	pp_reg_claimed_fork();
	CHECK(claim_slots[0]->holders == holders[0] + 2 &&
		      claim_slots[1]->holders == holders[1] + 1,
	      "one more hold on the untaken: %u %u", claim_slots[0]->holders,
	      claim_slots[1]->holders);
	CHECK(entries_of(claim_slots[0], ENT_HOLD, 0) == 1,
	      "recorded as the child's, which has no name yet");
	{
		pid_t child = fork();

		if (child == 0) {
			pp_reg_fork_child(true);
			/* Named by the parent as soon as fork() returned there. */
			for (int i = 0;
			     i < 100 && entries_of(claim_slots[0], ENT_HOLD, getpid()) != 1; i++)
				usleep(10000);
			_exit(entries_of(claim_slots[0], ENT_HOLD, getpid()) == 1 ? 0 : 1);
		}
		pp_reg_fork_parent(child);
		CHECK(child > 0, "fork");
		waitpid(child, &got, 0);
		CHECK(WIFEXITED(got) && !WEXITSTATUS(got), "the child named its record");
	}
	/*
	 * Exit: everything this process holds goes (here the taken one too,
	 * whose pipe object this test does not have). The child's holds stay
	 * until a sweep.
	 */
	pp_reg_release_all();
	CHECK(claim_slots[0]->holders == holders[0] + 1 && claim_slots[1]->holders == holders[1] &&
		      claim_slots[2]->holders == holders[2] + 1,
	      "given back: %u %u %u (the child's stay)", claim_slots[0]->holders,
	      claim_slots[1]->holders, claim_slots[2]->holders);
	CHECK(pp_reg_claimed_left() == 0, "nothing left to take over");
	/* The child's record: nobody will give it back but a sweep (it was killed). */
	while (pp_reg_sweep_now())
		;
	CHECK(claim_slots[0]->holders == holders[0] && claim_slots[2]->holders == holders[2],
	      "the dead child's holds swept: %u %u", claim_slots[0]->holders,
	      claim_slots[2]->holders);
}

static void test_claims(void)
{
	const struct claim_case cases[] = {
		{ .comm = comm, .want = 3 },
		{ .comm = "someone-else", .want = -ESRCH },
		{ .comm = comm, .by_parent = true, .want = -ESRCH },
		{ .comm = comm, .age_ns = 11000000000ull, .want = -ESRCH },
		{ .comm = comm, .garbage = true, .want = 1 },
	};

	for (int i = 0; i < 3; i++)
		claim_slots[i] = pp_reg_get(claim_inos[i], true);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct claim_case *k = &cases[i];
		int st;

		if (k->by_parent && pp_reg_exec_begin(&parent_charge, comm, claim_slots, claim_inos,
						      3, PP_EXEC_SELF)) {
			CHECK(0, "begin in the parent");
			continue;
		}
		st = run_child(claim_child, (void *)k);
		CHECK(st == 0, "claim case %zu (%s%s%s): child status %d", i, k->comm,
		      k->by_parent ? ", the parent's pid" : "", k->age_ns ? ", too old" : "", st);
		if (k->by_parent)
			pp_reg_exec_failed(&parent_charge);
		for (int j = 0; j < 3; j++)
			CHECK(claim_slots[j]->holders == 1,
			      "case %zu: pipe %d: the child's holds went with it: %u (pending %u)",
			      i, j, claim_slots[j]->holders, claim_slots[j]->pending);
		for (int j = 0; j < 3; j++)
			CHECK(!claim_slots[j]->pending && !claim_slots[j]->unsafe,
			      "case %zu: pipe %d: pending %u", i, j, claim_slots[j]->pending);
	}
}

/*
 * A posix_spawn child: the record names it once it exists (the child's
 * claim waits for that, a while). Named: claimed; never named: not.
 */
static void spawn_case(bool named)
{
	struct pp_exec_charge c;
	int status = -1, go[2];
	char byte = 0;
	pid_t pid;

	if (pipe(go) ||
	    pp_reg_exec_begin(&c, comm, claim_slots, claim_inos, 3, PP_EXEC_SPAWN_CHILD)) {
		CHECK(0, "begin");
		return;
	}
	CHECK(OWN_PID(t_rec_at(hdr, (uint32_t)c.rec)->own) == 0, "no pid yet");
	pid = fork();
	if (pid == 0) {
		int got;

		failures = 0;
		pp_reg_fork_child(false);
		/* The parent names this child first (no race with the claim's wait). */
		if (read(go[0], &byte, 1) != 1)
			_exit(2);
		got = join_and_claim(&c);
		CHECK(got == (named ? 3 : -ESRCH), "spawned child, %s: claim %d",
		      named ? "named" : "never named", got);
		pp_reg_release_all();
		_exit(failures ? 1 : 0);
	}
	if (named)
		pp_reg_exec_spawned(&c, pid);
	CHECK(!named || c.rec == -1, "the parent's part is done");
	if (write(go[1], &byte, 1) != 1)
		perror("write");
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "spawned child: status %d", status);
	for (int j = 0; j < 3; j++)
		CHECK(claim_slots[j]->holders == 1 && claim_slots[j]->pending == !named,
		      "pipe %d: holders %u pending %u", j, claim_slots[j]->holders,
		      claim_slots[j]->pending);
	if (!named)
		pp_reg_exec_failed(&c);
	close(go[0]);
	close(go[1]);
}

static void test_spawn(void)
{
	spawn_case(true);
	spawn_case(false);
	for (int j = 0; j < 3; j++)
		CHECK(!claim_slots[j]->pending, "pipe %d: undone", j);
}

static int join_var(const char *value)
{
	char var[128];
	char *envp[] = { "PATH=/bin", var, NULL };

	snprintf(var, sizeof(var), "PPIPE_REGISTRY=%s", value);
	return pp_reg_join(envp);
}

static int join_seg(int id, uint64_t key, const char *tail)
{
	char v[96];

	snprintf(v, sizeof(v), "%d.%016" PRIx64 "%s", id, key, tail);
	return join_var(v);
}

/* A segment of @size and @mode whose first bytes are @head (NULL: zeros). */
static int make_seg(size_t size, int mode, const struct reg_header *head)
{
	int id = shmget(IPC_PRIVATE, size, IPC_CREAT | mode);
	void *m;

	if (id < 0 || (m = shmat(id, NULL, 0)) == (void *)-1) {
		perror("shm");
		exit(99);
	}
	if (head)
		memcpy(m, head, sizeof(*head));
	shmdt(m);
	return id;
}

static void drop_seg(int id)
{
	shmctl(id, IPC_RMID, NULL);
}

static void join_good(void *arg)
{
	int id = *(int *)arg, fds = count_fds();

	CHECK(join_seg(id, hdr->key, ":-") == 0, "an intact copy is joined");
	CHECK(count_fds() == fds, "and leaves no fd");
}

/* A scribbled, foreign or open segment is refused at join, and the registry in use stays. */
static void test_join_refused(void)
{
	struct reg_header h = *hdr;
	char *no_var[] = { "PATH=/bin", NULL };
	char *empty[] = { "PPIPE_REGISTRY=", NULL };
	size_t size = REG_SIZE;
	const struct {
		const char *what;
		size_t off;
		uint32_t value;
	} bad[] = {
		{ "version", offsetof(struct reg_header, version), 2 },
		{ "slots", offsetof(struct reg_header, slots), 1u << 20 },
		{ "records", offsetof(struct reg_header, recs), 1u << 20 },
		{ "slot size", offsetof(struct reg_header, slot_size), 8 },
		{ "record size", offsetof(struct reg_header, rec_size), 4096 },
		{ "entries", offsetof(struct reg_header, entries), 4 },
	};
	int id;

	CHECK(pp_reg_join(no_var) == -ENOENT && pp_reg_join(empty) == -ENOENT, "no variable");
	CHECK(pp_reg_join(NULL) == -ENOENT, "no environment");
	CHECK(join_var("12") == -EINVAL && join_var("12.") == -EINVAL &&
		      join_var("x.0000000000000001") == -EINVAL &&
		      join_var("12.00000000000000g1") == -EINVAL &&
		      join_seg(seg_id, hdr->key, ":-x") == -EINVAL &&
		      join_seg(seg_id, hdr->key, ":8192") == -EINVAL &&
		      join_seg(seg_id, hdr->key, ":12x") == -EINVAL,
	      "a malformed variable");
	CHECK(join_seg(seg_id, hdr->key, "") == -EINVAL &&
		      join_seg(seg_id, hdr->key, ":") == -EINVAL &&
		      join_seg(seg_id, hdr->key, ":-:") == -EINVAL &&
		      join_seg(seg_id, hdr->key, ":-:1,2,3,4,5,6,7,8,9") == -EINVAL,
	      "no record field, or too many records handed on");
	CHECK(join_seg(seg_id, hdr->key ^ 2, ":-") == -EINVAL, "the wrong key");
	CHECK(join_seg(999999999, hdr->key, ":-") == -EINVAL, "no such segment");
	id = make_seg(4096, 0600, &h);
	CHECK(join_seg(id, h.key, ":-") == -EINVAL, "the wrong size");
	drop_seg(id);
	id = make_seg(size, 0600, NULL);
	CHECK(join_seg(id, h.key, ":-") == -EINVAL, "no header");
	drop_seg(id);
	id = make_seg(size, 0644, &h);
	CHECK(join_seg(id, h.key, ":-") == -EINVAL, "readable by others");
	drop_seg(id);
	id = make_seg(size, 0660, &h);
	CHECK(join_seg(id, h.key, ":-") == -EINVAL, "writable by its group");
	drop_seg(id);
	if (geteuid() == 0) {
		struct shmid_ds ds;

		id = make_seg(size, 0600, &h);
		shmctl(id, IPC_STAT, &ds);
		ds.shm_perm.uid = 65534;
		CHECK(shmctl(id, IPC_SET, &ds) == 0, "chown: %s", strerror(errno));
		CHECK(join_seg(id, h.key, ":-") == -EINVAL, "another user's");
		drop_seg(id);
	}
	h.magic ^= 1;
	id = make_seg(size, 0600, &h);
	CHECK(join_seg(id, h.key, ":-") == -EINVAL, "the wrong magic");
	drop_seg(id);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		h = *hdr;
		memcpy((char *)&h + bad[i].off, &bad[i].value, sizeof(uint32_t));
		id = make_seg(size, 0600, &h);
		CHECK(join_seg(id, h.key, ":-") == -EINVAL, "the wrong %s", bad[i].what);
		drop_seg(id);
	}
	CHECK(pp_reg_find(claim_inos[0]) == claim_slots[0], "the registry in use stays");

	/* The same header, intact: joined (in a child, which then has that registry). */
	h = *hdr;
	id = make_seg(size, 0600, &h);
	CHECK(run_child(join_good, &id) == 0, "an intact copy is joined");
	drop_seg(id);
}

/* Counters scribbled to anything: holders and charges never wrap below zero. */
static void test_counters(void)
{
	struct pp_shared *s = pp_reg_get(8001, true);
	struct pp_exec_charge c;
	uint64_t ino = 8001;

	s->holders = 0;
	pp_reg_put(s);
	CHECK(s->holders == 0 && !pp_reg_find(8001), "no holder below zero: %u", s->holders);
	s = pp_reg_get(8001, true);
	CHECK(pp_reg_exec_begin(&c, comm, &s, &ino, 1, PP_EXEC_SELF) == 0, "begin");
	s->pending = 0;
	pp_reg_exec_failed(&c);
	CHECK(s->pending == 0 && s->holders == 1, "no charge below zero: %u/%u", s->pending,
	      s->holders);
	s->holders = 0xffffffffu;
	pp_reg_put(s);
	CHECK(pp_reg_find(8001) == s && s->holders == 0xfffffffeu, "garbage counts: kept");
	s->holders = 0;
	s->ino = UINT64_MAX;
}

int main(void)
{
	const char *fn = (const char *)getauxval(AT_EXECFN);

	pp_real_start();
	pp_config_defaults(&pp_cfg);
	pp_comm_copy(comm, pp_base_name(fn ? fn : ""));

	test_create();
	layout_check();
	test_slots();
	test_records();
	test_claims();
	test_spawn();
	test_join_refused();
	test_counters();
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
