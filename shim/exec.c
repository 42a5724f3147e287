// SPDX-License-Identifier: MIT
#include "exec.h"

#include "compiler.h"
#include "engine.h"
#include "fault.h"
#include "faultguard.h"
#include "fdtable.h"
#include "config.h"
#include "log.h"
#include "pipe.h"
#include "stats.h"
#include "sys.h"
#include "vfork.h"

#include <fcntl.h>
#include <string.h>

#define REG_VAR "PPIPE_REGISTRY="

struct dirent64_raw {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/*
 * Calls @fn for every fd this process has open, as the kernel lists them
 * (raw system calls: this may run in a vfork child). Returns 0 or -errno.
 * Not inlined: its buffer would be on the stack of every exec, deeper than
 * a shell's fork child ever went (a page fault each).
 */
static __attribute__((noinline)) int for_each_open_fd(void (*fn)(int, void *), void *arg)
{
	char buf[2048] __attribute__((aligned(8)));
	long dfd = PP_SYSCALL(SYS_openat, AT_FDCWD, "/proc/self/fd",
			      O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long n;

	if (dfd < 0)
		return (int)dfd;
	while ((n = PP_SYSCALL(SYS_getdents64, (int)dfd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct dirent64_raw *d = (struct dirent64_raw *)(buf + off);
			long fd = 0;
			const char *c = d->d_name;

			off += d->d_reclen;
			if (*c < '0' || *c > '9')
				continue;
			for (; *c >= '0' && *c <= '9' && fd < (1 << 24); c++)
				fd = fd * 10 + (*c - '0');
			if (!*c && fd != dfd)
				fn((int)fd, arg);
		}
	}
	pp_sys_close((int)dfd);
	return n < 0 ? (int)n : 0;
}

/* ---- before exec ---- */

struct inherited {
	uint64_t inos[PP_EXEC_MAX_PIPES];
	struct pp_shared *slots[PP_EXEC_MAX_PIPES];
	int n;
	bool any_fd; /* close-on-exec fds count too (spawn file actions) */
};

static void mark_slot_unsafe(struct pp_shared *s)
{
	__atomic_store_n(&s->unsafe, 1, __ATOMIC_RELEASE);
}

/* Whether @fd survives the exec (close-on-exec fds do not, but with spawn file actions). */
PP_COMMON static bool survives(const struct inherited *in, int fd)
{
	long fl = pp_sys_fcntl(fd, F_GETFD, 0);

	return fl >= 0 && (in->any_fd || !(fl & FD_CLOEXEC));
}

PP_COMMON static void note_ino(struct inherited *in, uint64_t ino, struct pp_shared *s)
{
	for (int i = 0; i < in->n; i++)
		if (in->inos[i] == ino)
			return;
	if (in->n == PP_EXEC_MAX_PIPES) {
		mark_slot_unsafe(s); /* more than a record describes */
		return;
	}
	in->slots[in->n] = s;
	in->inos[in->n++] = ino;
}

/* From the kernel's list of fds: any registered pipe whose end survives the exec. */
static void note_inherited(int fd, void *arg)
{
	struct inherited *in = arg;
	struct pp_shared *s;
	uint64_t ino;

	if (!survives(in, fd) || pp_sys_pipe_ino(fd, &ino))
		return;
	s = pp_reg_find(ino);
	if (s)
		note_ino(in, ino, s);
}

/* From the fd table: a pipe of ours in the registry whose end survives the exec. */
PP_COMMON static void note_tracked(int fd, struct pp_pipe *p, enum pp_end end, void *arg)
{
	struct inherited *in = arg;

	(void)end;
	if (p->shared && survives(in, fd))
		note_ino(in, pp_pipe_ino(p), pp_pipe_sh(p));
}

/*
 * The registered pipes whose ends the new image gets. Every pipe end this
 * process has is in the fd table, but those it inherited through exec
 * and has not needed yet, and but in a vfork child (the table is its
 * parent's, which the child's dup2() and close() do not change): then the
 * kernel's list is read instead (/proc/self/fd). Returns 0 or -errno.
 */
PP_COMMON static int find_inherited(struct inherited *in)
{
	if (pp_reg_claimed_left() || pp_in_vfork_child())
		return for_each_open_fd(note_inherited, in);
	pp_fdt_for_each(note_tracked, in);
	return 0;
}

PP_COMMON static void mark_all(int fd, struct pp_pipe *p, enum pp_end end, void *arg)
{
	(void)fd;
	(void)end;
	(void)arg;
	pp_pipe_mark_unsafe(p, "inherited across an exec libppipe could not describe");
}

PP_COMMON static void mark_if_inherited(int fd, struct pp_pipe *p, enum pp_end end, void *arg)
{
	bool any_fd = *(bool *)arg;
	long fl;

	if (!p->accel)
		return;
	fl = pp_sys_fcntl(fd, F_GETFD, 0);
	if (!any_fd && (fl < 0 || (fl & FD_CLOEXEC)))
		return;
	/*
	 * A read end: the new program may splice pages out. A write end:
	 * it shares the open file and may change O_NONBLOCK behind us.
	 */
	pp_pipe_mark_unsafe(p, end == PP_END_READ ? "read end inherited across exec" :
						    "write end inherited across exec");
}

PP_COMMON void pp_exec_mark_inherited(bool any_fd)
{
	pp_fdt_for_each(mark_if_inherited, &any_fd);
}

/*
 * What an exec's caller hands it (its path and environment), read as the
 * kernel reads it: an unreadable one is the kernel's EFAULT, and the exec
 * is then left to it untouched (faultguard.h, pp_user_guarded).
 */
struct exec_args {
	const char *path;
	char *const *envp;
	char **out; /* the copy of envp, without the registry's variable */
	size_t room; /* entries out may take, its last two kept free */
	size_t n; /* entries counted, or copied to out */
	bool preload; /* an LD_PRELOAD= entry seen */
	bool bad; /* a pointer no process can read */
	char comm[16]; /* the path's basename, as the kernel names the image */
};

PP_COMMON static void count_env(void *arg)
{
	struct exec_args *a = arg;

	for (a->n = 0; a->envp; a->n++) {
		if (pp_user_bad(&a->envp[a->n], sizeof(char *))) {
			a->bad = true;
			return;
		}
		if (!a->envp[a->n])
			return;
	}
}

PP_COMMON static void read_comm(void *arg)
{
	struct exec_args *a = arg;

	if (pp_user_bad(a->path, 1))
		a->bad = true;
	else
		pp_comm_copy(a->comm, pp_base_name(a->path));
}

/* Copies envp's entries to out, but the registry's variable; notes LD_PRELOAD. */
PP_COMMON static void copy_env(void *arg)
{
	struct exec_args *a = arg;

	for (size_t i = 0; a->envp && a->envp[i]; i++) {
		const char *e = a->envp[i];

		if (pp_user_bad(e, 1) || a->n >= a->room) {
			a->bad = true; /* unreadable, or entries added since they were counted */
			return;
		}
		if (pp_has_prefix(e, "LD_PRELOAD="))
			a->preload = true;
		if (!pp_has_prefix(e, REG_VAR))
			a->out[a->n++] = (char *)e;
		if (pp_user_bad(&a->envp[i + 1], sizeof(char *))) {
			a->bad = true;
			return;
		}
	}
}

PP_COMMON size_t pp_exec_env_slots(char *const envp[])
{
	struct exec_args a = { .envp = envp };

	if (pp_user_guarded(count_env, &a) || a.bad)
		return 0;
	return a.n + 2;
}

static void read_first(void *arg)
{
	struct exec_args *a = arg;

	a->comm[0] = *a->path;
}

PP_COMMON bool pp_exec_path_empty(const char *path)
{
	struct exec_args a = { .path = path, .comm = "?" };

	return !pp_user_bad(path, 1) && !pp_user_guarded(read_first, &a) && !a.comm[0];
}

/* Whether @s names a file whose name contains "libppipe" on a line of its own words. */
PP_COMMON bool pp_preload_list_names_us(const char *s)
{
	for (const char *w = s; *w;) {
		const char *end = w;

		while (*end && *end != ' ' && *end != '\t' && *end != '\n' && *end != ':')
			end++;
		for (const char *c = w; c + 8 <= end; c++)
			if (!memcmp(c, "libppipe", 8))
				return true;
		w = *end ? end + 1 : end;
	}
	return false;
}

/*
 * Whether /etc/ld.so.preload loads libppipe into every program of this
 * mount namespace (a host or a container image that turns it on for
 * all). Read once, with raw system calls (this may be a vfork child).
 */
PP_COMMON bool pp_exec_system_preload(void)
{
	static int known; /* 0 unknown, 1 no, 2 yes */
	int k = __atomic_load_n(&known, __ATOMIC_ACQUIRE);

	if (!k) {
		char buf[4096];
		long fd = PP_SYSCALL(SYS_openat, AT_FDCWD, "/etc/ld.so.preload",
				     O_RDONLY | O_CLOEXEC);
		long n = fd >= 0 ? PP_SYSCALL(SYS_read, (int)fd, buf, sizeof(buf) - 1) : -1;

		if (fd >= 0)
			pp_sys_close((int)fd);
		buf[n > 0 ? n : 0] = 0;
		k = pp_preload_list_names_us(buf) ? 2 : 1;
		__atomic_store_n(&known, k, __ATOMIC_RELEASE);
	}
	return k == 2;
}

PP_COMMON void pp_exec_before_vfork(void)
{
	if (pp_pipes_live()) {
		pp_fdt_learn_all();
		pp_pipes_share_all();
		pp_exec_system_preload();
	}
}

/*
 * @spawn: the image will be a child posix_spawn() makes (this process
 * stays), and with @any_fd its file actions may hand it any fd.
 */
PP_COMMON static char **prepare(struct pp_exec_ctx *x, const char *path, char *const envp[],
				char **out, size_t slots, bool spawn, bool any_fd)
{
	struct inherited in = { .n = 0, .any_fd = any_fd };
	struct exec_args a = { .path = path, .envp = envp, .out = out };

	x->charge.rec = -1;
	x->spawn = spawn;
	x->handed = 0;
	/* No pipe of ours: nothing can leave with the new image. No system call. */
	if (!pp_active() || (!pp_pipes_live() && !pp_reg_claimed_left()))
		return (char **)envp;
	/* An unreadable environment or path: the kernel's EFAULT, nothing leaves. */
	if (!slots || pp_user_guarded(read_comm, &a) || a.bad)
		return (char **)envp;
	a.room = slots - 2;
	/* A vfork child's were shared before the vfork (its memory is its parent's). */
	if (!pp_in_vfork_child()) {
		pp_fdt_learn_all();
		pp_pipes_share_all();
	}
	if (find_inherited(&in) || pp_reg_exec_begin(&x->charge, a.comm, in.slots, in.inos, in.n,
						     spawn		 ? PP_EXEC_SPAWN_CHILD :
						     pp_in_vfork_child() ? PP_EXEC_VFORK_CHILD :
									   PP_EXEC_SELF)) {
		/* The new image cannot be described: what it gets turns plain. */
		for (int i = 0; i < in.n; i++)
			mark_slot_unsafe(in.slots[i]);
		if (pp_in_vfork_child())
			pp_fdt_for_each(mark_all, NULL); /* our table is the parent's */
		else
			pp_exec_mark_inherited(any_fd);
		return (char **)envp;
	}
	/* The statistics hear what the image was handed: a spawned child's pid comes later. */
	if (pp_cfg.watch && in.n) {
		memcpy(x->comm, a.comm, sizeof(x->comm));
		memcpy(x->inos, in.inos, sizeof(in.inos[0]) * (size_t)in.n);
		x->handed = in.n;
		if (!spawn)
			pp_stats_exec_note(0, x->comm, x->inos, x->handed);
		pp_debug("exec of %.16s hands on %d pipe(s): they stay plain, and what it writes "
			 "into them unseen, unless it runs libppipe",
			 a.comm, in.n);
	}
	/*
	 * The registry's variable goes only where libppipe may start and read
	 * it: an environment with LD_PRELOAD, or any image when libppipe is
	 * preloaded system-wide. A program that never runs libppipe cannot
	 * confirm anything (its pipes stay pending, plain), and should not see
	 * our variable. An environment that cannot be read (the exec fails
	 * with EFAULT, and the charge is undone) or that grew since it was
	 * counted goes as it is: the image gets no variable, and its pipes
	 * turn plain when its claim window passes.
	 */
	if (pp_user_guarded(copy_env, &a) || a.bad)
		return (char **)envp;
	if (a.preload || pp_exec_system_preload())
		out[a.n++] = x->charge.env;
	out[a.n] = NULL;
	return out;
}

/*
 * The new image writes after what this one staged (stage.h), and exec
 * ends the service: deliver first.
 */
PP_COMMON char **pp_exec_prepare(struct pp_exec_ctx *x, const char *path, char *const envp[],
				 char **out, size_t slots)
{
	/* A vfork child's exec leaves the parent and its service in place. */
	if (pp_engine_hooks())
		pp_engine->exec(pp_in_vfork_child());
	return prepare(x, path, envp, out, slots, false, false);
}

PP_COMMON char **pp_exec_prepare_spawn(struct pp_exec_ctx *x, const char *path, char *const envp[],
				       char **out, size_t slots, bool any_fd)
{
	if (pp_engine_hooks())
		pp_engine->exec(true);
	return prepare(x, path, envp, out, slots, true, any_fd);
}

PP_COMMON void pp_exec_spawned(struct pp_exec_ctx *x, pid_t child)
{
	int saved = errno;

	if (child > 0) {
		pp_reg_exec_spawned(&x->charge, child);
		if (x->handed)
			pp_stats_exec_note(child, x->comm, x->inos, x->handed);
	} else
		pp_reg_exec_failed(&x->charge);
	errno = saved;
}

PP_COMMON void pp_exec_failed(struct pp_exec_ctx *x)
{
	int saved = errno;

	pp_reg_exec_failed(&x->charge);
	errno = saved;
}

/* ---- at start-up, and when an inherited end is first needed ---- */

PP_START bool pp_exec_inherited(char **envp)
{
	for (char **e = envp; e && *e; e++)
		if (pp_has_prefix(*e, REG_VAR))
			return true;
	return false;
}

PP_START void pp_exec_forget_inherited(char **envp)
{
	char **w = envp;

	for (char **e = envp; e && *e; e++)
		if (!pp_has_prefix(*e, REG_VAR))
			*w++ = *e;
	if (w)
		*w = NULL;
}

PP_HOT int pp_exec_takeover_armed;

/* What this image made of the registry it was started with (PPIPE_DEBUG says why pipes stay plain). */
enum inherit_state { INHERIT_NONE, INHERIT_UNUSABLE, INHERIT_UNCLAIMED, INHERIT_CLAIMED };
PP_HOT static int inherit_state; /* written as the image starts: on the page it writes anyway */

PP_START void pp_exec_start(char **envp)
{
	int n;

	if (pp_reg_join(envp)) {
		inherit_state = INHERIT_UNUSABLE;
		pp_debug("the pipe registry this program was started with cannot be used: "
			 "its inherited pipes stay plain");
		return;
	}
	n = pp_reg_exec_claim();
	inherit_state = n < 0 ? INHERIT_UNCLAIMED : INHERIT_CLAIMED;
	if (n > 0)
		__atomic_store_n(&pp_exec_takeover_armed, 1, __ATOMIC_RELEASE);
	if (n < 0)
		pp_debug("pipe registry joined, but the exec record is not this image's: "
			 "its inherited pipes stay plain");
	else
		pp_debug(
			"joined the pipe registry: %d inherited pipe(s), taken over when first used",
			n);
}

const char *pp_exec_why_plain(void)
{
	switch (inherit_state) {
	case INHERIT_UNUSABLE:
		return "and the pipe registry this program was started with cannot be used";
	case INHERIT_UNCLAIMED:
		return "and the exec record naming this program was not its own (started late, or "
		       "through a program without libppipe)";
	case INHERIT_CLAIMED:
		return "but not among the pipes the exec that started this program handed over";
	default:
		return "from a program without libppipe, or from outside this process tree: "
		       "its readers are unknown";
	}
}

/* Inherited pipes already taken over, by inode: their other fds join the same object. */
static struct {
	uint64_t ino;
	uint32_t index, gen;
} taken[PP_EXEC_MAX_PIPES];
PP_HOT static int ntaken;

static struct pp_pipe *taken_pipe(uint64_t ino)
{
	for (int i = 0; i < __atomic_load_n(&ntaken, __ATOMIC_ACQUIRE); i++) {
		struct pp_pipe *p;

		if (taken[i].ino != ino || !(p = pp_pipe_at(taken[i].index)))
			continue;
		if (pp_pipe_enter(p)) {
			if (pp_pipe_gen(p) == taken[i].gen && pp_pipe_ino(p) == ino)
				return p;
			pp_pipe_leave(p);
		}
	}
	return NULL;
}

PP_COMMON bool pp_exec_may_take_over(void)
{
	return pp_reg_claimed_left() || __atomic_load_n(&ntaken, __ATOMIC_RELAXED);
}

PP_COMMON struct pp_pipe *pp_exec_take_over(int fd, uint64_t ino, long fl, enum pp_end end)
{
	struct pp_pipe *p;
	struct pp_shared *s;
	long slot;

	if (!pp_exec_may_take_over() || pp_in_vfork_child())
		return NULL;
	p = taken_pipe(ino);
	if (!p) {
		slot = pp_reg_claimed_take(ino);
		if (slot < 0)
			return NULL; /* not a pipe this image was handed */
		s = pp_reg_slot_at(slot, ino);
		p = s && !pp_fault(PP_FAULT_ADOPT) ? pp_pipe_adopt(ino, s) : NULL;
		if (!p) {
			/* Its splice() and tee() would go unseen: plain, for every process. */
			if (s) {
				mark_slot_unsafe(s);
				pp_reg_put(s);
			}
			return NULL;
		}
		if (!pp_pipe_enter(p))
			return NULL;
		{
			int k = __atomic_load_n(&ntaken, __ATOMIC_RELAXED);

			if (k < PP_EXEC_MAX_PIPES) {
				taken[k].ino = ino;
				taken[k].index = pp_pipe_index(p);
				taken[k].gen = pp_pipe_gen(p);
				__atomic_store_n(&ntaken, k + 1, __ATOMIC_RELEASE);
			}
		}
	}
	if (fd >= pp_fdt_size()) {
		pp_pipe_mark_unsafe(p, "an inherited end libppipe cannot follow");
		pp_pipe_leave(p);
		return NULL;
	}
	/*
	 * The write end's open file is, but for a reopen, the one the
	 * processes that handed it on share, whose writes follow the pipe's
	 * state: packet mode there is packet mode for them, and its
	 * O_NONBLOCK theirs. Its writes follow that state too, with no
	 * system call (docs/design.md, "What libppipe knows of an fd").
	 */
	if (end == PP_END_WRITE) {
		if (fl & O_DIRECT)
			pp_pipe_mark_unsafe(p, "packet mode (O_DIRECT)");
		pp_pipe_set_nonblock(p, fl & O_NONBLOCK);
	}
	pp_fdt_set(fd, p, end, false);
	pp_debug("pipe inode %llu (fd %d): inherited %s end taken over", (unsigned long long)ino,
		 fd, end == PP_END_READ ? "read" : "write");
	return p;
}
