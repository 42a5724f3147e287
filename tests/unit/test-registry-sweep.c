// SPDX-License-Identifier: MIT
/*
 * What the registry's sweeps give back (shim/registry_sweep.c), on a
 * registry made small (16 records, 64 slots, as PPIPE_TEST_REGISTRY makes
 * it) so that a week of a tree's life fits in a second: the holds of fork
 * children killed with SIGKILL, of zombies, of a pid now another
 * process's; records nobody named (a fork that failed); exec records no
 * image claimed (their charges turn into plain verdicts, even while the
 * image lives: a charge is never lifted by a sweep); records whose maker
 * died half-way; counts nobody stands behind (set right only when seen
 * twice); a full registry that recovers once its holders go; and a
 * segment left behind by a process killed while making it.
 */
#include "config.h"
#include "fault.h"
#include "real.h"
#include "registry.h"
#include "registry_layout.h"
#include "sys.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define RECS 16u
#define SLOTS 64u

static struct pp_stats_registry occ(void)
{
	struct pp_stats_registry o;

	pp_reg_occupancy(&o);
	return o;
}

static void sweep_all(void)
{
	for (int i = 0; i < 8 && pp_reg_sweep_now(); i++)
		;
}

/* A fork child holding @s as libppipe's fork handlers record it; it sleeps until killed. */
static pid_t fork_holding(struct pp_shared *s)
{
	pid_t pid;

	pp_reg_fork_prepare();
	pp_reg_fork_hold(s);
	pid = fork();
	if (pid == 0) {
		pp_reg_fork_child(true);
		for (;;)
			pause();
	}
	pp_reg_fork_parent(pid);
	return pid;
}

static void kill_wait(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Three times as many killed children as there are records: each one's hold comes back. */
static void test_killed_children(void)
{
	struct pp_shared *s = pp_reg_get(101, true);
	uint64_t reclaimed = occ().reclaimed;

	CHECK(s && s->holders == 1, "a slot of ours");
	for (unsigned int i = 0; i < 3 * RECS; i++) {
		pid_t pid = fork_holding(s);

		CHECK(pid > 0 && s->holders == 2 + i % 4, "child %u holds it: %u", i, s->holders);
		kill_wait(pid);
		/* A sweep is due only on schedule, or when the registry is full. */
		if (i % 4 == 3)
			sweep_all();
	}
	sweep_all();
	CHECK(s->holders == 1, "every killed child's hold given back: %u", s->holders);
	CHECK(occ().records == 1, "only our own record left: %llu",
	      (unsigned long long)occ().records);
	CHECK(occ().reclaimed - reclaimed == 3 * RECS, "reclaimed %llu",
	      (unsigned long long)(occ().reclaimed - reclaimed));
	CHECK(occ().full == 0, "never full");
	pp_reg_put(s);
	CHECK(!pp_reg_find(101) && occ().slots == 0, "the slot went with its last holder");
}

/* A living child keeps its hold; a zombie does not; nor does a pid another process took. */
static void test_identity(void)
{
	struct pp_shared *s = pp_reg_get(102, true);
	pid_t alive = fork_holding(s), zombie = fork_holding(s), other = fork_holding(s);
	struct reg_rec *r = NULL;

	CHECK(s->holders == 4, "three children hold it: %u", s->holders);
	for (uint32_t i = 0; i < pp_reg_nrecs; i++)
		if (OWN_PID(reg_recs()[i].own) == other)
			r = &reg_recs()[i];
	CHECK(r && r->seen_ns, "the child named its record");
	/*
	 * As if the pid had been the owner's long before this child started:
	 * the child with that pid now is another process than the owner.
	 */
	if (r)
		r->seen_ns = 1;
	kill(zombie, SIGKILL);
	usleep(100000); /* dead, not reaped */
	sweep_all();
	CHECK(s->holders == 2, "the zombie's and the impostor's holds given back: %u", s->holders);
	kill_wait(alive);
	kill_wait(zombie);
	kill_wait(other);
	sweep_all();
	CHECK(s->holders == 1, "then the dead one's: %u", s->holders);
	pp_reg_put(s);
}

/* A fork that failed: the child's record names nobody, and goes once its time is up. */
static void test_unnamed(void)
{
	struct pp_shared *s = pp_reg_get(103, true);
	struct reg_rec *r = NULL;

	pp_reg_fork_prepare();
	pp_reg_fork_hold(s);
	pp_reg_fork_parent(0); /* a fork libppipe did not see return */
	for (uint32_t i = 0; i < pp_reg_nrecs; i++)
		if (OWN_STATE(reg_recs()[i].own) == REC_LIVE && !OWN_PID(reg_recs()[i].own))
			r = &reg_recs()[i];
	CHECK(r && s->holders == 2, "a record for a child that never ran");
	sweep_all();
	CHECK(s->holders == 2, "kept while young, its maker alive: %u", s->holders);
	if (r)
		r->made_ns -= 11000000000ull;
	sweep_all();
	CHECK(s->holders == 1, "given back once old: %u", s->holders);
	pp_reg_put(s);
}

/*
 * An exec whose image never claims (a static program): plain while it
 * may claim, and for good after, even while it lives. Its record is reused.
 */
static void test_unclaimed(void)
{
	struct pp_shared *s = pp_reg_get(104, true);
	int go[2], done[2];
	pid_t pid;
	int rec = -1;

	if (pipe(go) || pipe(done))
		exit(99);
	pid = fork();
	if (pid == 0) {
		struct pp_exec_charge c;
		uint64_t ino = 104;

		pp_reg_fork_child(false);
		/* The image this child "becomes" never runs libppipe: the record stays. */
		if (pp_reg_exec_begin(&c, "static-reader", &s, &ino, 1, PP_EXEC_SELF) ||
		    write(go[1], &c.rec, sizeof(c.rec)) != sizeof(c.rec))
			_exit(1);
		for (;;)
			pause();
	}
	if (read(go[0], &rec, sizeof(rec)) != sizeof(rec) || rec < 0) {
		CHECK(0, "the child's exec record");
		return;
	}
	CHECK(s->pending == 1 && !s->unsafe, "charged");
	sweep_all();
	CHECK(s->pending == 1 && !s->unsafe, "still charged within its claim window");
	reg_recs()[rec].made_ns -= 11000000000ull;
	sweep_all();
	CHECK(s->pending == 0 && s->unsafe == 1,
	      "after it: no charge, and plain for good (pending %u, unsafe %u)", s->pending,
	      s->unsafe);
	CHECK(OWN_STATE(reg_recs()[rec].own) == REC_FREE, "the record free for reuse");
	CHECK(occ().expired_charges >= 1, "counted");
	kill_wait(pid);
	sweep_all();
	CHECK(s->unsafe == 1 && pp_reg_find(104) == s, "its end gone: still plain, still held");
	pp_reg_put(s);
	CHECK(!pp_reg_find(104), "freed with its last holder");
	close(go[0]);
	close(go[1]);
	close(done[0]);
	close(done[1]);
}

/* A record its maker was still making, or taking apart, when it was killed. */
static void test_busy(void)
{
	struct pp_shared *s = pp_reg_get(105, true);
	pid_t dead = fork();
	struct reg_rec *r = NULL;

	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	for (uint32_t i = 0; i < pp_reg_nrecs && !r; i++)
		if (OWN_STATE(reg_recs()[i].own) == REC_FREE)
			r = &reg_recs()[i];
	if (!r) {
		CHECK(0, "a free record");
		return;
	}
	__atomic_fetch_add(&s->holders, 1, __ATOMIC_RELAXED);
	r->ent[3] = ENT(reg_slot_index(s), ENT_HOLD, 105);
	r->own = OWN(OWN_SEQ(r->own), REC_BUSY, dead);
	sweep_all();
	CHECK(OWN_STATE(r->own) == REC_FREE && s->holders == 1,
	      "a dead maker's half-made record given back: holders %u", s->holders);
	pp_reg_put(s);
}

/* Counts with no entry behind them: set right when seen twice; charges made plain. */
static void test_heal(void)
{
	struct pp_shared *s = pp_reg_get(106, true);
	uint64_t healed = occ().healed;

	__atomic_fetch_add(&s->holders, 2, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->pending, 1, __ATOMIC_RELAXED);
	CHECK(pp_reg_sweep_now() || 1, "a sweep");
	CHECK(s->holders == 3 && s->pending == 1 && !s->unsafe, "seen once: kept (%u, %u)",
	      s->holders, s->pending);
	pp_reg_sweep_now();
	CHECK(s->holders == 1 && s->pending == 0 && s->unsafe == 1,
	      "seen twice: set right, the charge made plain (%u, %u, %u)", s->holders, s->pending,
	      s->unsafe);
	CHECK(occ().healed - healed == 3, "counted: %llu",
	      (unsigned long long)(occ().healed - healed));
	pp_reg_put(s);
	CHECK(!pp_reg_find(106), "then freed with its last holder");
}

/* Full of living holders: the excess stays out, and gets in once they go. */
static void test_full(void)
{
	struct pp_shared *s = pp_reg_get(107, true), *t;
	pid_t kids[RECS];
	unsigned int n = 0;
	uint64_t full = occ().full;

	while (n < RECS) {
		pid_t pid = fork_holding(s);

		if (s->holders != n + 2) {
			/* No record for that child: the registry is full. */
			kill_wait(pid);
			break;
		}
		kids[n++] = pid;
	}
	CHECK(n == RECS - 1 && occ().records == RECS, "full after %u children: %llu records", n,
	      (unsigned long long)occ().records);
	CHECK(occ().full > full, "counted full");
	/* Our own record has room: a new pipe of ours still gets in. */
	t = pp_reg_get(108, true);
	CHECK(t, "a new slot while our record has room");
	pp_reg_put(t);
	for (unsigned int i = 0; i < n; i++)
		kill_wait(kids[i]);
	/*
	 * The next fork finds the registry full, sweeps and gets in (a full
	 * registry sweeps at most ten times a second: it just did).
	 */
	usleep(150000);
	{
		pid_t pid = fork_holding(s);

		CHECK(s->holders == 2, "recovered: a new child holds it (%u)", s->holders);
		kill_wait(pid);
	}
	sweep_all();
	CHECK(s->holders == 1 && occ().records == 1, "and all given back: %u, %llu records",
	      s->holders, (unsigned long long)occ().records);

	/* Slots: as many live pipes as there are; the next one waits for a close. */
	{
		struct pp_shared *held[SLOTS];
		unsigned int k = 0;

		for (uint64_t ino = 1000; k < SLOTS && (held[k] = pp_reg_get(ino, true)); ino++)
			k++;
		CHECK(k == SLOTS - 1 && occ().slots == SLOTS, "full of live pipes: %u more, %llu",
		      k, (unsigned long long)occ().slots);
		CHECK(!pp_reg_get(5001, true), "the next one stays out");
		pp_reg_put(held[0]);
		t = pp_reg_get(5001, true);
		CHECK(t, "and gets in once one closes");
		pp_reg_put(t);
		for (unsigned int i = 1; i < k; i++)
			pp_reg_put(held[i]);
	}
	pp_reg_put(s);
	CHECK(occ().slots == 0, "every slot given back: %llu", (unsigned long long)occ().slots);
}

/*
 * A segment of our size and mode left by a process killed before it
 * marked it for removal: reaped when the next registry is made.
 */
static int orphan_phase(void)
{
	struct shmid_ds ds;
	int id, status;
	pid_t pid;
	int p[2];

	if (pipe(p))
		return 99;
	pid = fork();
	if (pid == 0) {
		int oid = shmget(IPC_PRIVATE, REG_SIZE, IPC_CREAT | 0600);
		struct reg_header *h = oid >= 0 ? shmat(oid, NULL, 0) : (void *)-1;

		if (h == (void *)-1)
			_exit(1);
		h->magic = REG_MAGIC;
		if (write(p[1], &oid, sizeof(oid)) != sizeof(oid))
			_exit(1);
		_exit(0); /* killed before IPC_RMID, as it were */
	}
	if (read(p[0], &id, sizeof(id)) != sizeof(id))
		return 99;
	waitpid(pid, &status, 0);
	CHECK(shmctl(id, IPC_STAT, &ds) == 0 && ds.shm_nattch == 0, "an orphan segment");
	pp_reg_put(pp_reg_get(200, true)); /* makes this process's registry */
	CHECK(shmctl(id, IPC_STAT, &ds) != 0, "reaped when a registry was made");
	if (!shmctl(id, IPC_STAT, &ds))
		shmctl(id, IPC_RMID, NULL);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	pp_real_start();
	pp_config_defaults(&pp_cfg);
	/* What PPIPE_TEST_REGISTRY=64:16 does. */
	pp_fault_reg_slots = SLOTS;
	pp_fault_reg_recs = RECS;
	if (argc > 1 && !strcmp(argv[1], "orphan"))
		return orphan_phase();

	test_killed_children();
	test_identity();
	test_unnamed();
	test_unclaimed();
	test_busy();
	test_heal();
	test_full();
	{
		/* A fresh process without a registry for the orphan case. */
		pid_t pid = fork();
		int st = -1;

		if (pid == 0) {
			execl("/proc/self/exe", argv[0], "orphan", (char *)NULL);
			_exit(99);
		}
		waitpid(pid, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the orphan case: status %d", st);
	}
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
