// SPDX-License-Identifier: MIT
#include "exec.h"

#include "fdtable.h"
#include "init.h"
#include "log.h"
#include "pipe.h"
#include "readers.h"
#include "stage.h"
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
 */
static int for_each_open_fd(void (*fn)(int, void *), void *arg)
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
	int n;
	bool any_fd; /* close-on-exec fds count too (spawn file actions) */
};

static void mark_slot_unsafe(struct pp_shared *s)
{
	__atomic_store_n(&s->unsafe, 1, __ATOMIC_RELEASE);
}

/* A registered pipe whose end survives the exec. */
static void note_inherited(int fd, void *arg)
{
	struct inherited *in = arg;
	long fl = pp_sys_fcntl(fd, F_GETFD, 0);
	struct pp_shared *s;
	uint64_t ino;

	if (fl < 0 || (!in->any_fd && (fl & FD_CLOEXEC)) || pp_sys_pipe_ino(fd, &ino))
		return;
	s = pp_reg_find(ino);
	if (!s)
		return;
	for (int i = 0; i < in->n; i++)
		if (in->inos[i] == ino)
			return;
	if (in->n == PP_EXEC_MAX_PIPES) {
		mark_slot_unsafe(s); /* more than a record describes */
		return;
	}
	in->inos[in->n++] = ino;
}

static void mark_all(int fd, struct pp_pipe *p, enum pp_end end, void *arg)
{
	(void)fd;
	(void)end;
	(void)arg;
	pp_pipe_mark_unsafe(p, "inherited across an exec libppipe could not describe");
}

size_t pp_exec_env_slots(char *const envp[])
{
	size_t n = 0;

	while (envp && envp[n])
		n++;
	return n + 2;
}

static const char *base_name(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;

	return b ? b + 1 : path ? path : "";
}

/*
 * @spawn: the image will be a child posix_spawn() makes (this process
 * stays), and with @any_fd its file actions may hand it any fd.
 */
static char **prepare(struct pp_exec_ctx *x, const char *path, char *const envp[], char **out,
		      bool spawn, bool any_fd)
{
	struct inherited in = { .n = 0, .any_fd = any_fd };
	bool preload = false;
	size_t k = 0;

	x->charge.rec = -1;
	x->charge.fd = -1;
	x->released = false;
	x->spawn = spawn;
	if (!pp_active())
		return (char **)envp;
	if (for_each_open_fd(note_inherited, &in) ||
	    pp_reg_exec_begin(&x->charge, base_name(path), in.inos, in.n, spawn)) {
		/* The new image cannot be described: what it gets turns plain. */
		for (int i = 0; i < in.n; i++) {
			struct pp_shared *s = pp_reg_find(in.inos[i]);

			if (s)
				mark_slot_unsafe(s);
		}
		if (pp_in_vfork_child())
			pp_fdt_for_each(mark_all, NULL); /* our table is the parent's */
		else
			pp_readers_before_exec(any_fd);
		return (char **)envp;
	}
	/* A vfork child, or a spawning parent, keeps its holds. */
	if (!spawn && !pp_in_vfork_child()) {
		pp_pipes_exec_release();
		x->released = true;
	}
	/*
	 * The registry's variable goes only where a preload may read it: a
	 * program whose environment has no LD_PRELOAD cannot confirm anything
	 * (its pipes stay pending, plain), and should not see our variable.
	 */
	for (size_t i = 0; envp && envp[i]; i++) {
		if (!strncmp(envp[i], "LD_PRELOAD=", 11))
			preload = true;
		if (strncmp(envp[i], REG_VAR, sizeof(REG_VAR) - 1))
			out[k++] = envp[i];
	}
	if (preload)
		out[k++] = x->charge.env;
	out[k] = NULL;
	return out;
}

/*
 * The new image writes after what this one staged (stage.h), and exec
 * ends the service: deliver first.
 */
char **pp_exec_prepare(struct pp_exec_ctx *x, const char *path, char *const envp[], char **out)
{
	/* A vfork child's exec leaves the parent and its service in place. */
	pp_stages_flush_all(pp_vfork_other_process());
	return prepare(x, path, envp, out, false, false);
}

char **pp_exec_prepare_spawn(struct pp_exec_ctx *x, const char *path, char *const envp[],
			     char **out, bool any_fd)
{
	pp_stages_flush_all(true);
	return prepare(x, path, envp, out, true, any_fd);
}

void pp_exec_spawned(struct pp_exec_ctx *x, pid_t child)
{
	int saved = errno;

	if (child > 0)
		pp_reg_exec_spawned(&x->charge, child);
	else
		pp_reg_exec_failed(&x->charge);
	errno = saved;
}

void pp_exec_failed(struct pp_exec_ctx *x)
{
	int saved = errno;

	if (x->released)
		pp_pipes_exec_reacquire();
	pp_reg_exec_failed(&x->charge);
	x->released = false;
	errno = saved;
}

/* ---- at start-up ---- */

struct adopted {
	struct {
		uint64_t ino;
		struct pp_pipe *p;
	} seen[64];
	int n;
};

/*
 * Takes over one fd of a registered pipe. Whatever stops that makes the
 * pipe unsafe for good: the claim that follows would otherwise vouch for
 * an end whose splice() and tee() this image does not see.
 */
static void adopt_fd(int fd, void *arg)
{
	struct adopted *a = arg;
	struct pp_shared *s;
	struct pp_pipe *p = NULL;
	uint64_t ino;
	long fl, cap;

	if (pp_sys_pipe_ino(fd, &ino) || !(s = pp_reg_find(ino)))
		return;
	for (int i = 0; i < a->n && !p; i++)
		if (a->seen[i].ino == ino)
			p = a->seen[i].p;
	if (!p && a->n < (int)(sizeof(a->seen) / sizeof(a->seen[0]))) {
		cap = pp_fault(PP_FAULT_GETPIPESZ) ?: pp_sys_fcntl(fd, F_GETPIPE_SZ, 0);
		p = pp_pipe_adopt(ino, cap > 0 ? (int)cap : 0);
		if (p) {
			a->seen[a->n].ino = ino;
			a->seen[a->n++].p = p;
		}
	}
	fl = pp_sys_fcntl(fd, F_GETFL, 0);
	if (!p || fl < 0 || fd >= pp_fdt_size()) {
		mark_slot_unsafe(s);
		return;
	}
	if ((fl & O_ACCMODE) == O_RDONLY) {
		pp_fdt_set(fd, p, PP_END_READ);
		return;
	}
	if (fl & O_DIRECT)
		pp_pipe_mark_unsafe(p, "packet mode (O_DIRECT)");
	pp_pipe_set_nonblock(p, fl & O_NONBLOCK);
	pp_fdt_set(fd, p, PP_END_WRITE);
}

void pp_exec_adopt(void)
{
	struct adopted a = { .n = 0 };

	/* Every end first (so our splice() and tee() see them), then the claim. */
	if (for_each_open_fd(adopt_fd, &a))
		return;
	pp_reg_exec_claim();
	pp_debug("joined the pipe registry: %d inherited pipe(s) taken over", a.n);
}
