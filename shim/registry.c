// SPDX-License-Identifier: MIT
/*
 * The pipe registry (see registry.h). Everything here uses raw system
 * calls: it runs inside pipe(), exec() and, in a vfork child, on memory
 * shared with the parent.
 */
#include "registry.h"

#include "compiler.h"
#include "fault.h"
#include "sys.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/auxv.h>
#include <time.h>

#define REG_MAGIC 0x3167657270697070ull /* "ppipreg1" */
#define REG_VERSION 2
#define REG_SLOTS 65536u
#define REG_RECS 4096u
#define REG_PROBES 512u /* longest probe sequence: beyond it the registry is full */
#define REG_TOMB UINT64_MAX /* a slot freed in the middle of a probe sequence */
#define REG_VAR "PPIPE_REGISTRY="

struct reg_header {
	uint64_t magic;
	uint32_t version, slots, recs, slot_size, rec_size, pad;
	uint64_t next_nonce;
};

struct exec_rec {
	uint64_t nonce; /* 0: free */
	uint64_t exec_ns; /* CLOCK_MONOTONIC when the exec was prepared */
	int32_t pid;
	uint32_t n;
	char comm[16];
	uint32_t slot[PP_EXEC_MAX_PIPES];
	uint64_t ino[PP_EXEC_MAX_PIPES];
};

/*
 * Layout: the header, the exec records right after it (a new record is the
 * first free one, so the records in use stay on the first pages, which an
 * exec'ing child and the image it becomes touch together with the header),
 * then the pipe slots, page-aligned.
 */
#define REG_HEADER_SIZE 64u
#define REG_SLOTS_OFFSET                                                                 \
	(((size_t)REG_HEADER_SIZE + (size_t)REG_RECS * sizeof(struct exec_rec) + 4095) & \
	 ~(size_t)4095)
#define REG_SIZE (REG_SLOTS_OFFSET + (size_t)REG_SLOTS * sizeof(struct pp_shared))

PP_HOT static struct reg_header *reg;
PP_HOT static int reg_fd = -1;
static uint64_t reg_ino; /* of the memfd, to recognise it when reopened */

static struct pp_shared *slots(void)
{
	return (struct pp_shared *)((char *)reg + REG_SLOTS_OFFSET);
}

static struct exec_rec *recs(void)
{
	return (struct exec_rec *)((char *)reg + REG_HEADER_SIZE);
}

PP_COMMON int pp_reg_fd(void)
{
	return __atomic_load_n(&reg_fd, __ATOMIC_ACQUIRE);
}

/* Moves @fd to libppipe's own range of numbers (where it stays if it cannot). */
static int move_high(int fd, bool cloexec)
{
	long nfd = pp_sys_dup_spare(fd, cloexec);

	if (nfd < 0)
		return fd;
	pp_sys_close(fd);
	return (int)nfd;
}

static void *map_fd(int fd)
{
	void *m = (void *)PP_SYSCALL(SYS_mmap, NULL, REG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
				     fd, 0);

	return (long)m < 0 && (long)m > -4096 ? NULL : m;
}

static uint64_t fd_ino(int fd)
{
	struct stat st;

	return PP_SYSCALL(SYS_fstat, fd, &st) ? 0 : st.st_ino;
}

/*
 * A new fd of the registry that the new image inherits. The program may
 * have closed ours (a child closing every fd before exec, as Python's
 * subprocess does): the parent still holds it, so it is reopened from
 * there, and taken only if it is the same memfd.
 */
static long inheritable_fd(void)
{
	char path[64] = "/proc/";
	long fd = pp_sys_dup_spare(pp_reg_fd(), false);
	size_t k;

	if (fd != -EBADF)
		return fd;
	k = strlen(path);
	pp_utoa((unsigned long)PP_SYSCALL(SYS_getppid), path + k);
	k = strlen(path);
	memcpy(path + k, "/fd/", 5);
	pp_utoa((unsigned long)pp_reg_fd(), path + k + 4);
	fd = PP_SYSCALL(SYS_open, path, O_RDWR);
	if (fd < 0)
		return fd;
	if (!reg_ino || fd_ino((int)fd) != reg_ino) {
		pp_sys_close((int)fd);
		return -EBADF;
	}
	return move_high((int)fd, false);
}

/* Makes this tree's registry, on the first pipe. */
static struct reg_header *reg_create(void)
{
	static int creating;
	struct reg_header *h;
	long fd;

	if (__atomic_exchange_n(&creating, 1, __ATOMIC_ACQUIRE))
		return NULL; /* another thread (or a handler in this one) is at it */
	h = __atomic_load_n(&reg, __ATOMIC_ACQUIRE);
	if (h)
		goto out;
	fd = PP_SYSCALL(SYS_memfd_create, "libppipe-registry", MFD_CLOEXEC);
	if (fd < 0)
		goto out;
	if (PP_SYSCALL(SYS_ftruncate, (int)fd, REG_SIZE) || !(h = map_fd((int)fd))) {
		pp_sys_close((int)fd);
		h = NULL;
		goto out;
	}
	h->version = REG_VERSION;
	h->slots = REG_SLOTS;
	h->recs = REG_RECS;
	h->slot_size = sizeof(struct pp_shared);
	h->rec_size = sizeof(struct exec_rec);
	h->magic = REG_MAGIC;
	reg_ino = fd_ino((int)fd);
	__atomic_store_n(&reg_fd, move_high((int)fd, true), __ATOMIC_RELEASE);
	__atomic_store_n(&reg, h, __ATOMIC_RELEASE);
out:
	__atomic_store_n(&creating, 0, __ATOMIC_RELEASE);
	return h;
}

static uint32_t hash(uint64_t ino)
{
	return (uint32_t)((ino * 0x9e3779b97f4a7c15ull) >> 40);
}

PP_COMMON struct pp_shared *pp_reg_find(uint64_t ino)
{
	struct reg_header *h = __atomic_load_n(&reg, __ATOMIC_ACQUIRE);

	if (!h || !ino || ino == REG_TOMB)
		return NULL;
	for (uint32_t i = 0, at = hash(ino); i < REG_PROBES; i++) {
		struct pp_shared *s = &slots()[(at + i) % REG_SLOTS];
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
	__atomic_store_n(&s->holders, 1, __ATOMIC_RELEASE);
}

/* Counters in shared memory never go below zero, whoever wrote them. */
static void dec(uint32_t *v)
{
	uint32_t cur = __atomic_load_n(v, __ATOMIC_RELAXED);

	while (cur && !__atomic_compare_exchange_n(v, &cur, cur - 1, true, __ATOMIC_ACQ_REL,
						   __ATOMIC_RELAXED))
		;
}

PP_COMMON struct pp_shared *pp_reg_get(uint64_t ino, bool create)
{
	struct reg_header *h = __atomic_load_n(&reg, __ATOMIC_ACQUIRE);
	struct pp_shared *s = pp_reg_find(ino);

	if (s) {
		__atomic_fetch_add(&s->holders, 1, __ATOMIC_ACQ_REL);
		/* Freed meanwhile? Then it is not ours to use, nor our hold. */
		if (__atomic_load_n(&s->ino, __ATOMIC_ACQUIRE) == ino)
			return s;
		dec(&s->holders);
		return NULL;
	}
	if (!create || !ino || ino == REG_TOMB || pp_fault(PP_FAULT_REGISTRY))
		return NULL;
	if (!h && !(h = reg_create()))
		return NULL;
	/* A new pipe: the first free or freed slot of its probe sequence. */
	for (uint32_t i = 0, at = hash(ino); i < REG_PROBES; i++) {
		uint64_t cur;

		s = &slots()[(at + i) % REG_SLOTS];
		cur = __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE);
		if (cur && cur != REG_TOMB)
			continue;
		if (__atomic_compare_exchange_n(&s->ino, &cur, ino, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			slot_reset(s);
			return s;
		}
	}
	return NULL;
}

PP_COMMON static void slot_maybe_free(struct pp_shared *s)
{
	uint64_t ino = __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE);

	if (__atomic_load_n(&s->holders, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&s->pending, __ATOMIC_ACQUIRE) || !ino || ino == REG_TOMB)
		return;
	__atomic_compare_exchange_n(&s->ino, &ino, REG_TOMB, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_RELAXED);
}

PP_COMMON void pp_reg_put(struct pp_shared *s)
{
	if (!s)
		return;
	dec(&s->holders);
	slot_maybe_free(s);
}

/* A slot pointer only ever comes from our own index arithmetic. */
static struct pp_shared *slot_at(uint32_t i)
{
	return i < REG_SLOTS ? &slots()[i] : NULL;
}

/* ---- exec records ---- */

/*
 * A claim must come soon after the exec it names: the image to come claims
 * its record while it starts. Together with the pid and the command name
 * this tells the image apart from a later process that got the same pid
 * and inherited the variable through a program that does not run
 * libppipe (a static one): that would take long enough for its pid to
 * come round again.
 */
#define REG_CLAIM_WINDOW_NS (10ull * 1000000000ull)

static void rec_uncharge(struct exec_rec *r, uint32_t n)
{
	for (uint32_t i = 0; i < n && i < PP_EXEC_MAX_PIPES; i++) {
		struct pp_shared *s = slot_at(r->slot[i]);

		if (s && __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE) == r->ino[i]) {
			dec(&s->pending);
			slot_maybe_free(s);
		}
	}
}

PP_COMMON int pp_reg_exec_begin(struct pp_exec_charge *c, const char *comm,
				struct pp_shared *const *slot, const uint64_t *inos, int n,
				bool for_child)
{
	struct reg_header *h = __atomic_load_n(&reg, __ATOMIC_ACQUIRE);
	struct exec_rec *r = NULL;
	long fd;

	c->rec = -1;
	c->fd = -1;
	c->env[0] = 0;
	if (!h || pp_reg_fd() < 0)
		return -ENOENT;
	if (n > PP_EXEC_MAX_PIPES)
		return -E2BIG;
	/* The registry fd the new image maps: inherited, so not close-on-exec. */
	fd = inheritable_fd();
	if (fd < 0)
		return (int)fd;
	for (uint32_t i = 0; i < REG_RECS && n; i++) {
		uint64_t zero = 0;

		if (__atomic_load_n(&recs()[i].nonce, __ATOMIC_RELAXED) ||
		    !__atomic_compare_exchange_n(&recs()[i].nonce, &zero, UINT64_MAX, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		r = &recs()[i];
		c->rec = (int)i;
		break;
	}
	if (n && !r) {
		pp_sys_close((int)fd);
		return -ENOSPC;
	}
	if (r) {
		/* A spawned child's pid comes once it exists. */
		r->pid = for_child ? 0 : (int32_t)PP_SYSCALL(SYS_getpid);
		r->exec_ns = pp_mono_ns();
		pp_comm_copy(r->comm, comm);
		r->n = 0;
		for (int i = 0; i < n; i++) {
			struct pp_shared *s = slot[i];

			if (!s || __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE) != inos[i])
				continue;
			/* Charged before the exec: no moment without a holder on record. */
			__atomic_fetch_add(&s->pending, 1, __ATOMIC_ACQ_REL);
			r->slot[r->n] = (uint32_t)(s - slots());
			r->ino[r->n] = inos[i];
			r->n++;
		}
		/* Any odd value marks it in use (the header's counter is not written: one page less). */
		__atomic_store_n(&r->nonce, r->exec_ns | 1, __ATOMIC_RELEASE);
	}
	c->fd = (int)fd;
	memcpy(c->env, REG_VAR, sizeof(REG_VAR) - 1);
	pp_utoa((unsigned long)fd, c->env + sizeof(REG_VAR) - 1);
	if (c->rec >= 0) {
		char *e = c->env;

		while (*e)
			e++;
		*e = ':';
		pp_utoa((unsigned long)c->rec, e + 1);
	}
	return 0;
}

PP_COMMON void pp_reg_exec_failed(struct pp_exec_charge *c)
{
	if (c->rec >= 0 && (uint32_t)c->rec < REG_RECS && reg) {
		struct exec_rec *r = &recs()[c->rec];

		rec_uncharge(r, r->n);
		__atomic_store_n(&r->nonce, 0, __ATOMIC_RELEASE);
	}
	if (c->fd >= 0)
		pp_sys_close(c->fd);
	c->rec = -1;
	c->fd = -1;
}

PP_COMMON void pp_reg_exec_spawned(struct pp_exec_charge *c, pid_t pid)
{
	if (c->rec >= 0 && (uint32_t)c->rec < REG_RECS && reg) {
		struct exec_rec *r = &recs()[c->rec];

		/* The child takes the record by its pid. */
		__atomic_store_n(&r->pid, (int32_t)pid, __ATOMIC_RELEASE);
	}
	/* A child that exited at once leaves its record unclaimed: plain. */
	if (c->fd >= 0)
		pp_sys_close(c->fd);
	c->rec = -1;
	c->fd = -1;
}

/* The record the exec that made this image named (PPIPE_REGISTRY=fd:rec). */
PP_HOT static int32_t joined_rec = -1;

/*
 * Holds this image took by claiming its record: one per pipe it was
 * handed, given to the pipe's object when an fd of it is taken over, or
 * back to the registry at exit or exec. Fork children inherit the list
 * (the parent takes their holds).
 */
static struct {
	uint32_t slot;
	uint64_t ino;
	int taken; /* handed to a pipe object, or given back (atomic) */
} claimed[PP_EXEC_MAX_PIPES];
PP_HOT static int nclaimed;

/*
 * Tries to claim record @r for this process once. Returns 1 when it was
 * ours (the charges turned into this image's holds), 2 when it is a
 * spawned child's record whose pid is not filled in yet, 0 when it is not
 * ours.
 */
PP_START static int claim_once(struct exec_rec *r, int32_t pid, const char comm[16])
{
	uint64_t nonce = __atomic_load_n(&r->nonce, __ATOMIC_ACQUIRE);
	int32_t rpid;
	uint32_t n;

	if (!nonce || nonce == UINT64_MAX || !pp_comm_equal(r->comm, comm))
		return 0;
	rpid = __atomic_load_n(&r->pid, __ATOMIC_ACQUIRE);
	if (!rpid)
		return 2;
	if (rpid != pid ||
	    pp_mono_ns() - __atomic_load_n(&r->exec_ns, __ATOMIC_RELAXED) > REG_CLAIM_WINDOW_NS)
		return 0;
	/* Ours: lift the charges once, whoever else looks. */
	if (!__atomic_compare_exchange_n(&r->nonce, &nonce, UINT64_MAX, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return 0;
	n = __atomic_load_n(&r->n, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < n && i < PP_EXEC_MAX_PIPES; i++) {
		struct pp_shared *s = slot_at(r->slot[i]);

		/* Inode 0 is a free slot's: an entry no exec wrote (a scribbled count). */
		if (!s || !r->ino[i] || __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE) != r->ino[i])
			continue;
		/* The hold first: the slot never looks unheld in between. */
		__atomic_fetch_add(&s->holders, 1, __ATOMIC_ACQ_REL);
		dec(&s->pending);
		claimed[nclaimed].slot = r->slot[i];
		claimed[nclaimed].ino = r->ino[i];
		claimed[nclaimed].taken = 0;
		nclaimed++;
	}
	__atomic_store_n(&r->nonce, 0, __ATOMIC_RELEASE);
	return 1;
}

/* The name the kernel gave this image: the base name of the file exec'd, 15 bytes at most. */
PP_START static void exec_comm(char comm[16])
{
	const char *fn = (const char *)getauxval(AT_EXECFN);

	pp_comm_copy(comm, fn ? pp_base_name(fn) : "");
}

PP_START int pp_reg_exec_claim(void)
{
	struct timespec pause = { 0, 200000 };
	char comm[16];
	int32_t pid = (int32_t)PP_SYSCALL(SYS_getpid);
	int r = 0;

	if (!reg || joined_rec < 0 || (uint32_t)joined_rec >= REG_RECS)
		return 0;
	exec_comm(comm);
	/*
	 * A posix_spawn() parent fills in its child's pid when the spawn
	 * returns, which may be just after the child got here: wait for it,
	 * 200 ms at most.
	 */
	for (int i = 0; i < 1000 && (r = claim_once(&recs()[joined_rec], pid, comm)) == 2; i++)
		PP_SYSCALL(SYS_nanosleep, &pause, NULL);
	return r == 1 ? nclaimed : -ESRCH;
}

PP_COMMON long pp_reg_claimed_take(uint64_t ino)
{
	for (int i = 0; i < nclaimed; i++) {
		int no = 0;

		if (claimed[i].ino == ino &&
		    __atomic_compare_exchange_n(&claimed[i].taken, &no, 1, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			return claimed[i].slot;
	}
	return -ENOENT;
}

PP_COMMON struct pp_shared *pp_reg_claimed_slot(uint64_t ino)
{
	for (int i = 0; i < nclaimed; i++)
		if (claimed[i].ino == ino && !__atomic_load_n(&claimed[i].taken, __ATOMIC_ACQUIRE))
			return slot_at(claimed[i].slot);
	return NULL;
}

PP_COMMON struct pp_shared *pp_reg_slot_at(long slot, uint64_t ino)
{
	struct pp_shared *s = slot >= 0 && reg ? slot_at((uint32_t)slot) : NULL;

	return s && __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE) == ino ? s : NULL;
}

PP_COMMON int pp_reg_claimed_left(void)
{
	int n = 0;

	if (likely(!__atomic_load_n(&nclaimed, __ATOMIC_RELAXED)))
		return 0;
	for (int i = 0; i < nclaimed; i++)
		n += !__atomic_load_n(&claimed[i].taken, __ATOMIC_RELAXED);
	return n;
}

PP_COMMON void pp_reg_claimed_hold(int delta)
{
	if (likely(!__atomic_load_n(&nclaimed, __ATOMIC_RELAXED)))
		return;
	for (int i = 0; i < nclaimed; i++) {
		struct pp_shared *s;

		if (__atomic_load_n(&claimed[i].taken, __ATOMIC_ACQUIRE) ||
		    !(s = pp_reg_slot_at(claimed[i].slot, claimed[i].ino)))
			continue;
		if (delta > 0) {
			__atomic_fetch_add(&s->holders, 1, __ATOMIC_ACQ_REL);
		} else {
			dec(&s->holders);
			slot_maybe_free(s);
		}
	}
}

void pp_reg_occupancy(struct pp_reg_occupancy *o)
{
	struct reg_header *h = __atomic_load_n(&reg, __ATOMIC_ACQUIRE);

	*o = (struct pp_reg_occupancy){ 0 };
	if (!h)
		return;
	o->slots_max = REG_SLOTS;
	o->records_max = REG_RECS;
	for (uint32_t i = 0; i < REG_SLOTS; i++) {
		uint64_t ino = __atomic_load_n(&slots()[i].ino, __ATOMIC_RELAXED);

		o->slots += ino && ino != REG_TOMB;
	}
	for (uint32_t i = 0; i < REG_RECS; i++)
		o->records += !!__atomic_load_n(&recs()[i].nonce, __ATOMIC_RELAXED);
}

/* ---- joining at start-up ---- */

PP_START int pp_reg_join(char **envp)
{
	const char *v = NULL;
	struct reg_header *h;
	struct stat st;
	long fd = 0, rec = -1;

	for (char **e = envp; e && *e; e++)
		if (!strncmp(*e, REG_VAR, sizeof(REG_VAR) - 1))
			v = *e + sizeof(REG_VAR) - 1;
	if (!v || !*v)
		return -ENOENT;
	for (; *v && *v != ':'; v++) {
		if (*v < '0' || *v > '9' || fd > (1 << 20))
			return -EINVAL;
		fd = fd * 10 + (*v - '0');
	}
	if (*v == ':') {
		for (v++, rec = 0; *v >= '0' && *v <= '9' && rec < REG_RECS; v++)
			rec = rec * 10 + (*v - '0');
		if (*v || rec >= REG_RECS)
			return -EINVAL;
	}
	/* Only a memfd of exactly our size and layout is taken. */
	if (PP_SYSCALL(SYS_fstat, (int)fd, &st) || !S_ISREG(st.st_mode) ||
	    (size_t)st.st_size != REG_SIZE)
		return -EINVAL;
	h = map_fd((int)fd);
	if (!h)
		return -ENOMEM;
	if (h->magic != REG_MAGIC || h->version != REG_VERSION || h->slots != REG_SLOTS ||
	    h->recs != REG_RECS || h->slot_size != sizeof(struct pp_shared) ||
	    h->rec_size != sizeof(struct exec_rec)) {
		PP_SYSCALL(SYS_munmap, h, REG_SIZE);
		return -EINVAL;
	}
	/*
	 * The number stays where the exec'ing process put it (high, out of
	 * the program's way), close-on-exec now: an exec of ours hands a fresh
	 * one on.
	 */
	/* The record is this image's to claim only once the file is known good. */
	joined_rec = (int32_t)rec;
	reg_ino = st.st_ino;
	pp_sys_fcntl((int)fd, F_SETFD, FD_CLOEXEC);
	__atomic_store_n(&reg_fd, (int)fd, __ATOMIC_RELEASE);
	__atomic_store_n(&reg, h, __ATOMIC_RELEASE);
	return 0;
}
