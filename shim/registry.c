// SPDX-License-Identifier: MIT
/*
 * The pipe registry (see registry.h). Everything here uses raw system
 * calls: it runs inside pipe(), exec() and, in a vfork child, on memory
 * shared with the parent.
 */
#include "registry.h"

#include "fault.h"
#include "fdtable.h"
#include "pipe.h"
#include "sys.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#define REG_MAGIC 0x3167657270697070ull /* "ppipreg1" */
#define REG_VERSION 1
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
	uint64_t starttime; /* of the process, clock ticks after boot */
	int32_t pid;
	uint32_t n;
	char comm[16];
	uint32_t slot[PP_EXEC_MAX_PIPES];
	uint64_t ino[PP_EXEC_MAX_PIPES];
};

#define REG_HEADER_SIZE 4096u
#define REG_SIZE                                                          \
	(REG_HEADER_SIZE + (size_t)REG_SLOTS * sizeof(struct pp_shared) + \
	 (size_t)REG_RECS * sizeof(struct exec_rec))

static struct reg_header *reg;
static int reg_fd = -1;
static uint64_t reg_ino; /* of the memfd, to recognise it when reopened */

static struct pp_shared *slots(void)
{
	return (struct pp_shared *)((char *)reg + REG_HEADER_SIZE);
}

static struct exec_rec *recs(void)
{
	return (struct exec_rec *)((char *)slots() + (size_t)REG_SLOTS * sizeof(struct pp_shared));
}

int pp_reg_fd(void)
{
	return __atomic_load_n(&reg_fd, __ATOMIC_ACQUIRE);
}

/* Moves @fd to libppipe's own range of numbers (where it stays if it cannot). */
static int move_high(int fd, bool cloexec)
{
	long nfd = pp_fdt_dup_spare(fd, cloexec);

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
	long fd = pp_fdt_dup_spare(pp_reg_fd(), false);
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

struct pp_shared *pp_reg_find(uint64_t ino)
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

struct pp_shared *pp_reg_get(uint64_t ino, bool create)
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

static void slot_maybe_free(struct pp_shared *s)
{
	uint64_t ino = __atomic_load_n(&s->ino, __ATOMIC_ACQUIRE);

	if (__atomic_load_n(&s->holders, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&s->pending, __ATOMIC_ACQUIRE) || !ino || ino == REG_TOMB)
		return;
	__atomic_compare_exchange_n(&s->ino, &ino, REG_TOMB, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_RELAXED);
}

void pp_reg_put(struct pp_shared *s)
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
 * A process's start time (field 22 of /proc/PID/stat, which exec keeps)
 * and command name (which exec sets); @pid 0 is this process. Returns 0
 * or -errno.
 */
static int proc_identity(long pid, uint64_t *start, char comm[16])
{
	char buf[1024], path[48] = "/proc/", *p, *end;
	long fd, n;
	int field;

	if (pid)
		pp_utoa((unsigned long)pid, path + 6);
	else
		memcpy(path + 6, "self", 5);
	memcpy(path + strlen(path), "/stat", 6);
	fd = PP_SYSCALL(SYS_open, path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return (int)fd;
	n = PP_SYSCALL(SYS_read, (int)fd, buf, sizeof(buf) - 1);
	pp_sys_close((int)fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	p = strchr(buf, '(');
	end = strrchr(buf, ')');
	if (!p || !end || end < p || end - p - 1 > 15)
		return -EIO;
	memset(comm, 0, 16);
	memcpy(comm, p + 1, (size_t)(end - p - 1));
	/* Field 3 starts after ") "; the start time is field 22. */
	p = end + 2;
	for (field = 3; field < 22 && *p; p++)
		if (*p == ' ')
			field++;
	if (field != 22)
		return -EIO;
	*start = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		*start = *start * 10 + (uint64_t)(*p - '0');
	return 0;
}

static int self_identity(uint64_t *start, char comm[16])
{
	return proc_identity(0, start, comm);
}

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

int pp_reg_exec_begin(struct pp_exec_charge *c, const char *comm, const uint64_t *inos, int n,
		      bool for_child)
{
	struct reg_header *h = __atomic_load_n(&reg, __ATOMIC_ACQUIRE);
	struct exec_rec *r = NULL;
	uint64_t start, nonce;
	char own[16];
	long fd;
	int ret;

	c->rec = -1;
	c->fd = -1;
	c->env[0] = 0;
	if (!h || pp_reg_fd() < 0)
		return -ENOENT;
	if (n > PP_EXEC_MAX_PIPES)
		return -E2BIG;
	if (!for_child && (ret = self_identity(&start, own)))
		return ret;
	/* The registry fd the new image maps: inherited, so not close-on-exec. */
	fd = inheritable_fd();
	if (fd < 0)
		return (int)fd;
	nonce = __atomic_add_fetch(&h->next_nonce, 1, __ATOMIC_RELAXED) | 1;
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
		/* A spawned child's pid and start time come once it exists. */
		r->pid = for_child ? 0 : (int32_t)PP_SYSCALL(SYS_getpid);
		r->starttime = for_child ? 0 : start;
		memset(r->comm, 0, sizeof(r->comm));
		strncpy(r->comm, comm, sizeof(r->comm) - 1);
		r->n = 0;
		for (int i = 0; i < n; i++) {
			struct pp_shared *s = pp_reg_find(inos[i]);

			if (!s)
				continue;
			/* Charged before the exec: no moment without a holder on record. */
			__atomic_fetch_add(&s->pending, 1, __ATOMIC_ACQ_REL);
			r->slot[r->n] = (uint32_t)(s - slots());
			r->ino[r->n] = inos[i];
			r->n++;
		}
		__atomic_store_n(&r->nonce, nonce, __ATOMIC_RELEASE);
	}
	c->fd = (int)fd;
	memcpy(c->env, REG_VAR, sizeof(REG_VAR) - 1);
	pp_utoa((unsigned long)fd, c->env + sizeof(REG_VAR) - 1);
	if (c->rec >= 0) {
		size_t k = strlen(c->env);

		c->env[k] = ':';
		pp_utoa((unsigned long)c->rec, c->env + k + 1);
	}
	return 0;
}

void pp_reg_exec_failed(struct pp_exec_charge *c)
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

void pp_reg_exec_spawned(struct pp_exec_charge *c, pid_t pid)
{
	uint64_t start;
	char comm[16];

	if (c->rec >= 0 && (uint32_t)c->rec < REG_RECS && reg &&
	    !proc_identity(pid, &start, comm)) {
		struct exec_rec *r = &recs()[c->rec];

		/* The start time first: the child takes the record by its pid. */
		__atomic_store_n(&r->starttime, start, __ATOMIC_RELEASE);
		__atomic_store_n(&r->pid, (int32_t)pid, __ATOMIC_RELEASE);
	}
	/* A child that exited at once leaves its record unclaimed: plain. */
	if (c->fd >= 0)
		pp_sys_close(c->fd);
	c->rec = -1;
	c->fd = -1;
}

/* The record the exec that made this image named (PPIPE_REGISTRY=fd:rec). */
static int32_t joined_rec = -1;

/*
 * Tries to claim record @r for this process once. Returns 1 when it was
 * ours (the charges are lifted), 2 when it is a spawned child's record
 * whose pid is not filled in yet, 0 when it is not ours.
 */
static int claim_once(struct exec_rec *r, int32_t pid, uint64_t start, const char comm[16])
{
	uint64_t nonce = __atomic_load_n(&r->nonce, __ATOMIC_ACQUIRE);
	int32_t rpid;

	if (!nonce || nonce == UINT64_MAX || memcmp(r->comm, comm, 16))
		return 0;
	rpid = __atomic_load_n(&r->pid, __ATOMIC_ACQUIRE);
	if (!rpid)
		return 2;
	if (rpid != pid || __atomic_load_n(&r->starttime, __ATOMIC_ACQUIRE) != start)
		return 0;
	/* Ours: lift the charges once, whoever else looks. */
	if (!__atomic_compare_exchange_n(&r->nonce, &nonce, UINT64_MAX, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return 0;
	rec_uncharge(r, __atomic_load_n(&r->n, __ATOMIC_RELAXED));
	__atomic_store_n(&r->nonce, 0, __ATOMIC_RELEASE);
	return 1;
}

void pp_reg_exec_claim(void)
{
	struct timespec pause = { 0, 200000 };
	uint64_t start;
	char comm[16];
	int32_t pid = (int32_t)PP_SYSCALL(SYS_getpid);

	if (!reg || joined_rec < 0 || (uint32_t)joined_rec >= REG_RECS ||
	    self_identity(&start, comm))
		return;
	/*
	 * A posix_spawn() parent fills in its child's pid when the spawn
	 * returns, which may be just after the child got here: wait for it,
	 * 200 ms at most.
	 */
	for (int i = 0; i < 1000 && claim_once(&recs()[joined_rec], pid, start, comm) == 2; i++)
		PP_SYSCALL(SYS_nanosleep, &pause, NULL);
}

/* ---- joining at start-up ---- */

int pp_reg_join(char **envp)
{
	const char *v = NULL;
	struct reg_header *h;
	struct stat st;
	long fd = 0;

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
		long rec = 0;

		for (v++; *v >= '0' && *v <= '9' && rec < REG_RECS; v++)
			rec = rec * 10 + (*v - '0');
		if (*v || rec >= REG_RECS)
			return -EINVAL;
		joined_rec = (int32_t)rec;
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
	/* The inherited number goes back to the program; ours is close-on-exec. */
	reg_ino = st.st_ino;
	__atomic_store_n(&reg_fd, move_high((int)fd, true), __ATOMIC_RELEASE);
	__atomic_store_n(&reg, h, __ATOMIC_RELEASE);
	return 0;
}
