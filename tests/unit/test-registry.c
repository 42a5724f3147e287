// SPDX-License-Identifier: MIT
/*
 * The pipe registry (shim/registry.h), without a preload: created at the
 * first slot asked for, slots found, held and freed (a freed slot in the
 * middle of a probe sequence ends nobody's search), exec records charged,
 * undone and claimed (by the image they describe only: pid, command name
 * and time must match, and the charges then turn into holds), and a
 * registry that other processes of the tree scribbled on: a file of the
 * wrong size or header is refused at join, and garbage in records and
 * slots (indices out of range, corrupt counts, every slot or record taken)
 * is ignored without a crash. Claims run in fork children: an image
 * claims once.
 */
#include "config.h"
#include "fdtable.h"
#include "init.h"
#include "pipe.h"
#include "real.h"
#include "registry.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/*
 * The file's layout as registry.c writes it (its header and records are
 * private to it): the test scribbles through these. layout_check() fails
 * first if registry.c changed them.
 */
struct t_header {
	uint64_t magic;
	uint32_t version, slots, recs, slot_size, rec_size, pad;
	uint64_t next_nonce;
};
struct t_rec {
	uint64_t nonce, exec_ns;
	int32_t pid;
	uint32_t n;
	char comm[16];
	uint32_t slot[PP_EXEC_MAX_PIPES];
	uint64_t ino[PP_EXEC_MAX_PIPES];
};
#define T_HEADER_SIZE 64
#define T_SLOTS 65536u

static struct t_header *hdr; /* our own mapping of the registry file */
static size_t reg_size;
static struct pp_shared *base; /* the registry's slot 0, in the shim's mapping */
static char comm[16]; /* this program's command name */
static int spare_base; /* where libppipe's own fd numbers start (fdtable.h) */

static struct t_rec *rec_at(int i)
{
	return (struct t_rec *)((char *)hdr + T_HEADER_SIZE) + i;
}

/* registry.c's hash: the slot a new inode is tried in first. */
static uint32_t home(uint64_t ino)
{
	return (uint32_t)((ino * 0x9e3779b97f4a7c15ull) >> 40) % T_SLOTS;
}

/* An inode other than @ino whose probe sequence starts in the same slot. */
static uint64_t collider(uint64_t ino, uint64_t from)
{
	for (uint64_t c = from;; c++)
		if (c != ino && home(c) == home(ino))
			return c;
}

static int run_child(void (*fn)(void *), void *arg)
{
	int status = -1;
	pid_t pid = fork();

	if (pid == 0) {
		failures = 0;
		fn(arg);
		/* What libppipe's exit does (init.c is not what this test is about). */
		pp_reg_claimed_hold(-1);
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
	char var[64];
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

static void test_create(void)
{
	struct pp_exec_charge c;
	struct pp_shared *s;
	struct stat st;
	char link[64], path[64];
	ssize_t n;
	int fd;

	CHECK(pp_reg_fd() == -1 && !pp_reg_find(7) && !pp_reg_get(7, false),
	      "nothing before the first slot");
	CHECK(pp_reg_exec_begin(&c, comm, NULL, NULL, 0, false) == -ENOENT && c.fd == -1,
	      "no exec record without a registry");
	CHECK(!pp_reg_get(0, true) && !pp_reg_get(UINT64_MAX, true) && pp_reg_fd() == -1,
	      "inodes 0 and the tombstone are never slots");

	s = pp_reg_get(7, true);
	fd = pp_reg_fd();
	CHECK(s && s->ino == 7 && s->holders == 1 && !s->pending && !s->unsafe,
	      "a new slot, one holder");
	CHECK(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC), "the registry's fd: close-on-exec");
	CHECK(fd >= spare_base, "in libppipe's own range of numbers: %d, from %d", fd, spare_base);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	CHECK(strstr(link, "memfd:libppipe-registry"), "a memfd: %s", link);
	CHECK(!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size > 0, "of a size");
	reg_size = (size_t)st.st_size;
	hdr = mmap(NULL, reg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (hdr == MAP_FAILED) {
		perror("mmap");
		exit(99);
	}
	base = s - home(7);
	pp_reg_put(s);
	CHECK(!pp_reg_find(7) && s->ino != 7, "freed with its last holder");
}

/* What the test scribbles through must be what registry.c wrote. */
static void layout_check(void)
{
	struct pp_shared *s = pp_reg_get(11, true);
	struct pp_exec_charge c;
	uint64_t ino = 11;
	struct t_rec *r;

	CHECK(hdr->magic == 0x3167657270697070ull && hdr->version == 2 && hdr->slots == T_SLOTS &&
		      hdr->rec_size == sizeof(struct t_rec) &&
		      hdr->slot_size == sizeof(struct pp_shared),
	      "registry.c's header changed: update struct t_header");
	CHECK(s == base + home(11), "registry.c's hash changed: update home()");
	CHECK(pp_reg_exec_begin(&c, "layout", &s, &ino, 1, false) == 0 && c.rec >= 0, "a record");
	r = rec_at(c.rec);
	CHECK(r->pid == getpid() && r->n == 1 && !strcmp(r->comm, "layout") &&
		      r->slot[0] == (uint32_t)(s - base) && r->ino[0] == 11 && (r->nonce & 1),
	      "registry.c's exec record changed: update struct t_rec");
	pp_reg_exec_failed(&c);
	pp_reg_put(s);
	if (failures) {
		fprintf(stderr, "the layout is not what this test knows: stopping\n");
		exit(1);
	}
}

/* Holders, finds, tombstones, and a full probe sequence. */
static void test_slots(void)
{
	uint64_t a = 1000, b = collider(a, 2000), x = collider(a, b + 1);
	struct pp_shared *sa = pp_reg_get(a, true), *sb = pp_reg_get(b, true), *sx;

	CHECK(sa && sb == sa + 1, "a collision takes the next slot");
	CHECK(pp_reg_get(a, true) == sa && sa->holders == 2, "found again: one holder more (%u)",
	      sa->holders);
	CHECK(pp_reg_find(a) == sa && sa->holders == 2, "find takes nothing");
	pp_reg_put(sa);
	CHECK(pp_reg_find(a) == sa && sa->holders == 1, "one holder left");

	/* Charged, no holder: kept. */
	__atomic_store_n(&sa->pending, 1, __ATOMIC_RELAXED);
	pp_reg_put(sa);
	CHECK(pp_reg_find(a) == sa, "a pending charge keeps the slot");
	__atomic_store_n(&sa->pending, 0, __ATOMIC_RELAXED);
	pp_reg_put(sa);
	CHECK(!pp_reg_find(a) && sa->holders == 0, "freed, and no holder below zero: %u",
	      sa->holders);

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
		uint64_t y = collider(a, x + 1);
		uint64_t saved[512];

		for (uint32_t i = 0; i < 512; i++) {
			struct pp_shared *s = &base[(home(a) + i) % T_SLOTS];

			saved[i] = s->ino;
			s->ino = 0xdead0000 + i;
		}
		CHECK(!pp_reg_get(y, true) && !pp_reg_find(y), "a full probe sequence: no slot");
		for (uint32_t i = 0; i < 512; i++)
			base[(home(a) + i) % T_SLOTS].ino = saved[i];
	}
	CHECK(pp_reg_slot_at(-1, a) == NULL && pp_reg_slot_at(T_SLOTS, a) == NULL,
	      "slot_at: out of range");
	sa = pp_reg_get(a, true);
	CHECK(pp_reg_slot_at(sa - base, a) == sa && !pp_reg_slot_at(sa - base, a + 1),
	      "slot_at: only while it holds that inode");
	pp_reg_put(sa);
}

/* Records: charged, undone, refused when they cannot be made. */
static void test_records(void)
{
	uint64_t inos[PP_EXEC_MAX_PIPES + 1];
	struct pp_shared *sl[PP_EXEC_MAX_PIPES + 1];
	struct pp_exec_charge c, d;
	struct stat st1, st2;
	char want[48];
	int rec, fd;

	for (int i = 0; i <= PP_EXEC_MAX_PIPES; i++) {
		inos[i] = 5000 + (uint64_t)i;
		sl[i] = pp_reg_get(inos[i], true);
	}
	CHECK(pp_reg_exec_begin(&c, comm, sl, inos, PP_EXEC_MAX_PIPES + 1, false) == -E2BIG,
	      "more pipes than a record holds");

	/* One slot that no longer holds the inode named: not charged. */
	inos[1] = 9999;
	CHECK(pp_reg_exec_begin(&c, comm, sl, inos, 3, false) == 0 && c.rec >= 0, "begin");
	inos[1] = 5001;
	CHECK(sl[0]->pending == 1 && sl[1]->pending == 0 && sl[2]->pending == 1,
	      "charged: %u %u %u", sl[0]->pending, sl[1]->pending, sl[2]->pending);
	snprintf(want, sizeof(want), "PPIPE_REGISTRY=%d:%d", c.fd, c.rec);
	CHECK(!strcmp(c.env, want), "env %s, want %s", c.env, want);
	CHECK(c.fd >= 0 && !(fcntl(c.fd, F_GETFD) & FD_CLOEXEC), "an inheritable fd");
	CHECK(!fstat(c.fd, &st1) && !fstat(pp_reg_fd(), &st2) && st1.st_ino == st2.st_ino,
	      "of the registry");
	rec = c.rec;
	fd = c.fd;
	pp_reg_exec_failed(&c);
	CHECK(!sl[0]->pending && !sl[2]->pending && c.fd == -1 && c.rec == -1, "undone");
	CHECK(fcntl(fd, F_GETFD) < 0, "its fd closed");

	/* No pipes: an fd, no record. */
	CHECK(pp_reg_exec_begin(&d, comm, NULL, NULL, 0, false) == 0 && d.rec == -1 &&
		      !strchr(d.env, ':'),
	      "no record without pipes: %s", d.env);
	pp_reg_exec_failed(&d);
	CHECK(pp_reg_exec_begin(&c, comm, sl, inos, 1, false) == 0 && c.rec == rec,
	      "the freed record is the first free one again: %d", c.rec);
	pp_reg_exec_failed(&c);

	/* Every record in use (or scribbled so): no room, nothing charged, no fd left. */
	{
		static uint64_t saved[4096];
		int fds_before = dup(0), fds_after;

		close(fds_before);
		for (int i = 0; i < 4096; i++) {
			saved[i] = rec_at(i)->nonce;
			rec_at(i)->nonce = 0x5555;
		}
		CHECK(pp_reg_exec_begin(&c, comm, sl, inos, 1, false) == -ENOSPC, "no free record");
		CHECK(!sl[0]->pending, "nothing charged");
		fds_after = dup(0);
		close(fds_after);
		CHECK(fds_after == fds_before, "no fd left open: %d, was %d", fds_after,
		      fds_before);
		for (int i = 0; i < 4096; i++)
			rec_at(i)->nonce = saved[i];
	}
	for (int i = 0; i <= PP_EXEC_MAX_PIPES; i++)
		pp_reg_put(sl[i]);
}

struct claim_case {
	const char *comm; /* the record's command name */
	bool by_parent; /* the record names the parent's pid */
	uint64_t age_ns; /* the record made this long ago */
	bool garbage; /* its slot indices and count scribbled */
	bool count_only; /* only its count scribbled: the unused entries stay zero */
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
	int got;

	for (int i = 0; i < 3; i++)
		holders[i] = claim_slots[i]->holders;
	if (k->by_parent) {
		c = parent_charge;
	} else if (pp_reg_exec_begin(&c, k->comm, claim_slots, claim_inos, 3, false)) {
		CHECK(0, "begin");
		return;
	}
	for (int i = 0; i < 3; i++)
		CHECK(claim_slots[i]->pending == 1, "pipe %d charged", i);
	rec_at(c.rec)->exec_ns -= k->age_ns;
	if (k->garbage) {
		for (int i = 0; i < PP_EXEC_MAX_PIPES; i++)
			if (i != 1 && i != 2)
				rec_at(c.rec)->slot[i] = 70000 + (uint32_t)i; /* out of range */
		rec_at(c.rec)->ino[1] = 1; /* not the slot's pipe */
		rec_at(c.rec)->n = 0xffffffffu;
	}
	if (k->count_only) {
		/* Entries 3.. as a record never written there has them: slot 0, inode 0. */
		for (int i = 3; i < PP_EXEC_MAX_PIPES; i++) {
			rec_at(c.rec)->slot[i] = 0;
			rec_at(c.rec)->ino[i] = 0;
		}
		rec_at(c.rec)->n = 0xffffffffu;
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
		CHECK(claim_slots[i]->pending == 0 && claim_slots[i]->holders == holders[i] + 1,
		      "pipe %d: pending %u, holders %u (was %u)", i, claim_slots[i]->pending,
		      claim_slots[i]->holders, holders[i]);
	CHECK(rec_at(c.rec)->nonce == 0, "the record is free again");
	CHECK(join_and_claim(&c) == -ESRCH, "a record is claimed once");
	if (k->garbage)
		return;
	CHECK(pp_reg_claimed_left() == 3, "three to take over: %d", pp_reg_claimed_left());
	CHECK(pp_reg_claimed_slot(7002) && pp_reg_claimed_slot(7002)->ino == 7002,
	      "the slot of one");
	CHECK(pp_reg_claimed_take(7002) == claim_slots[1] - base, "taken: its slot index");
	CHECK(pp_reg_claimed_take(7002) == -ENOENT && !pp_reg_claimed_slot(7002), "once");
	CHECK(pp_reg_claimed_left() == 2, "two left: %d", pp_reg_claimed_left());
	/* A fork child's holds taken and given back (exit, exec): the untaken only. */
	pp_reg_claimed_hold(1);
	CHECK(claim_slots[0]->holders == holders[0] + 2 &&
		      claim_slots[1]->holders == holders[1] + 1,
	      "one more hold on the untaken: %u %u", claim_slots[0]->holders,
	      claim_slots[1]->holders);
	pp_reg_claimed_hold(-1);
	CHECK(claim_slots[0]->holders == holders[0] + 1 &&
		      claim_slots[2]->holders == holders[2] + 1,
	      "given back: %u %u", claim_slots[0]->holders, claim_slots[2]->holders);
	CHECK(claim_slots[1]->holders == holders[1] + 1, "the taken one is the pipe's: %u",
	      claim_slots[1]->holders);
	pp_reg_put(claim_slots[1]);
}

static void test_claims(void)
{
	const struct claim_case cases[] = {
		{ .comm = comm, .want = 3 },
		{ .comm = "someone-else", .want = -ESRCH },
		{ .comm = comm, .by_parent = true, .want = -ESRCH },
		{ .comm = comm, .age_ns = 11000000000ull, .want = -ESRCH },
		{ .comm = comm, .garbage = true, .want = 1 },
		{ .comm = comm, .count_only = true, .want = 3 },
	};

	for (int i = 0; i < 3; i++)
		claim_slots[i] = pp_reg_get(claim_inos[i], true);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct claim_case *k = &cases[i];
		int st;

		if (k->by_parent &&
		    pp_reg_exec_begin(&parent_charge, comm, claim_slots, claim_inos, 3, false)) {
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
		if (!k->garbage)
			for (int j = 0; j < 3; j++)
				CHECK(!claim_slots[j]->pending, "case %zu: pipe %d: pending %u", i,
				      j, claim_slots[j]->pending);
		for (int j = 0; j < 3; j++)
			claim_slots[j]->pending = 0;
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

	if (pipe(go) || pp_reg_exec_begin(&c, comm, claim_slots, claim_inos, 3, true)) {
		CHECK(0, "begin");
		return;
	}
	CHECK(rec_at(c.rec)->pid == 0, "no pid yet");
	pid = fork();
	if (pid == 0) {
		int got;

		failures = 0;
		/* The parent names this child first (no race with the claim's wait). */
		if (read(go[0], &byte, 1) != 1)
			_exit(2);
		got = join_and_claim(&c);
		CHECK(got == (named ? 3 : -ESRCH), "spawned child, %s: claim %d",
		      named ? "named" : "never named", got);
		pp_reg_claimed_hold(-1);
		_exit(failures ? 1 : 0);
	}
	if (named)
		pp_reg_exec_spawned(&c, pid);
	CHECK(!named || (c.fd == -1 && c.rec == -1), "the parent's part is done");
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

/* A memfd of @size whose first bytes are @head (NULL: zeros). */
static int make_file(size_t size, const struct t_header *head)
{
	int fd = memfd_create("not-a-registry", 0);

	if (fd < 0 || ftruncate(fd, (off_t)size) ||
	    (head && pwrite(fd, head, sizeof(*head), 0) != sizeof(*head))) {
		perror("memfd");
		exit(99);
	}
	return fd;
}

static int join_fd(int fd, const char *tail)
{
	char var[64];
	char *envp[] = { "PATH=/bin", var, NULL };

	snprintf(var, sizeof(var), "PPIPE_REGISTRY=%d%s", fd, tail);
	return pp_reg_join(envp);
}

static void join_good(void *arg)
{
	int fd = *(int *)arg;

	CHECK(join_fd(fd, "") == 0 && pp_reg_fd() == fd, "an intact copy is joined");
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC, "close-on-exec once joined");
}

/* A scribbled or foreign file is refused at join, and the registry in use stays. */
static void test_join_refused(void)
{
	int keep = pp_reg_fd(), fd, p[2];
	struct t_header h = *hdr;
	char *no_var[] = { "PATH=/bin", NULL };
	char *empty[] = { "PPIPE_REGISTRY=", NULL };
	const struct {
		const char *what;
		size_t off;
		uint32_t value;
	} bad[] = {
		{ "version", offsetof(struct t_header, version), 3 },
		{ "slots", offsetof(struct t_header, slots), 1u << 20 },
		{ "records", offsetof(struct t_header, recs), 1u << 20 },
		{ "slot size", offsetof(struct t_header, slot_size), 8 },
		{ "record size", offsetof(struct t_header, rec_size), 4096 },
	};

	CHECK(pp_reg_join(no_var) == -ENOENT && pp_reg_join(empty) == -ENOENT, "no variable");
	CHECK(pp_reg_join(NULL) == -ENOENT, "no environment");
	CHECK(join_fd(keep, "x") == -EINVAL && join_fd(keep, ":4096") == -EINVAL &&
		      join_fd(keep, ":12x") == -EINVAL && join_fd(9999999, "") == -EINVAL,
	      "a malformed variable");
	fd = make_file(4096, &h);
	CHECK(join_fd(fd, "") == -EINVAL, "the wrong size");
	close(fd);
	fd = make_file(reg_size, NULL);
	CHECK(join_fd(fd, "") == -EINVAL, "no header");
	close(fd);
	h.magic ^= 1;
	fd = make_file(reg_size, &h);
	CHECK(join_fd(fd, "") == -EINVAL, "the wrong magic");
	close(fd);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		h = *hdr;
		memcpy((char *)&h + bad[i].off, &bad[i].value, sizeof(uint32_t));
		fd = make_file(reg_size, &h);
		CHECK(join_fd(fd, "") == -EINVAL, "the wrong %s", bad[i].what);
		close(fd);
	}
	if (pipe(p) == 0) {
		CHECK(join_fd(p[0], "") == -EINVAL, "not a file");
		close(p[0]);
		close(p[1]);
	}
	CHECK(join_fd(200, "") == -EINVAL, "not open");
	CHECK(pp_reg_fd() == keep && pp_reg_find(claim_inos[0]) == claim_slots[0],
	      "the registry in use stays");

	/* The same header, intact: joined (in a child, which then has that registry). */
	h = *hdr;
	fd = make_file(reg_size, &h);
	CHECK(run_child(join_good, &fd) == 0, "an intact copy is joined");
	close(fd);
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
	CHECK(pp_reg_exec_begin(&c, comm, &s, &ino, 1, false) == 0, "begin");
	s->pending = 0;
	rec_at(c.rec)->n = 0xffffffffu;
	pp_reg_exec_failed(&c);
	CHECK(s->pending == 0 && s->holders == 1, "no charge below zero: %u/%u", s->pending,
	      s->holders);
	s->holders = 0xffffffffu;
	pp_reg_put(s);
	CHECK(pp_reg_find(8001) == s && s->holders == 0xfffffffeu, "garbage counts: kept");
	s->holders = 1;
	pp_reg_put(s);
}

int main(void)
{
	const char *fn = (const char *)getauxval(AT_EXECFN);
	struct rlimit rl;

	pp_real_bind();
	pp_config_defaults(&pp_cfg);
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur >= 128)
		spare_base = rl.rlim_cur / 2 > 512 ? 512 : (int)(rl.rlim_cur / 2);
	pp_fdt_map(); /* libppipe's own fd numbers */
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
