// SPDX-License-Identifier: MIT
/*
 * The exported libc names, one line each: everything else is in the
 * module that owns the call. Variadic and wrapper-only calls (fcntl, the
 * exec family, system, popen) are unpacked here.
 *
 * Layer: interpose (may use: interpose, operations, engine, pipes, resources, base).
 */
/*
 * Without this the headers would rename fcntl to fcntl64 and the two
 * definitions below would collide; both names must be exported.
 */
#undef _FILE_OFFSET_BITS

#include "compiler.h"
#include "exec.h"
#include "faultguard.h"
#include "fdops.h"
#include "init.h"
#include "readers.h"
#include "real.h"
#include "sys.h"
#include "vfork.h"
#include "writepath.h"

#include <dlfcn.h>
#include <alloca.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

PP_COMMON PP_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	return pp_write(fd, buf, n);
}

PP_COMMON PP_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	return pp_writev(fd, iov, iovcnt);
}

PP_COMMON PP_EXPORT int pipe(int fds[2])
{
	return pp_pipe2(fds, 0);
}

PP_COMMON PP_EXPORT int pipe2(int fds[2], int flags)
{
	return pp_pipe2(fds, flags);
}

PP_COMMON PP_EXPORT int close(int fd)
{
	return pp_close(fd);
}

PP_COMMON PP_EXPORT int dup(int fd)
{
	return pp_dup(fd);
}

PP_COMMON PP_EXPORT int dup2(int fd, int fd2)
{
	return pp_dup2(fd, fd2);
}

PP_COMMON PP_EXPORT int dup3(int fd, int fd2, int flags)
{
	return pp_dup3(fd, fd2, flags);
}

PP_COMMON PP_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	return pp_close_range(first, last, flags);
}

PP_COMMON PP_EXPORT void closefrom(int low)
{
	pp_closefrom(low);
}

PP_COMMON PP_EXPORT pid_t fork(void)
{
	/*
	 * What the child may call, bound once here rather than in every
	 * child: libc's functions, and those of stdio where pipes may cross.
	 */
	pp_real_bind_all();
	if (pp_pipes_live())
		pp_stdio_bind();
	return pp_fork();
}

/* Processes that end without exit() (fork children, os._exit) report too. */
PP_COMMON PP_EXPORT void _exit(int status)
{
	pp_exit(status, false);
}

PP_COMMON PP_EXPORT void _Exit(int status)
{
	pp_exit(status, true);
}

/* Every fcntl command takes an int, a pointer or nothing: read one word. */
#define FCNTL_ARG(cmd, arg)                      \
	do {                                     \
		va_list ap;                      \
		va_start(ap, cmd);               \
		arg = va_arg(ap, unsigned long); \
		va_end(ap);                      \
	} while (0)

PP_COMMON PP_EXPORT int fcntl(int fd, int cmd, ...)
{
	unsigned long arg;

	FCNTL_ARG(cmd, arg);
	return pp_fcntl(fd, cmd, arg);
}

PP_COMMON PP_EXPORT int fcntl64(int fd, int cmd, ...)
{
	unsigned long arg;

	FCNTL_ARG(cmd, arg);
	return pp_fcntl(fd, cmd, arg);
}

/* Only FIONBIO matters to libppipe: it switches O_NONBLOCK. */
PP_COMMON PP_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	int r;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	r = PP_REAL(ioctl) ? pp_real.ioctl(fd, req, arg) : (int)syscall(SYS_ioctl, fd, req, arg);
	if (r == 0 && req == FIONBIO && arg) {
		int saved = errno;

		pp_ioctl_fionbio(fd, arg);
		errno = saved;
	}
	return r;
}

/*
 * splice(), tee() and vmsplice() into a pipe come after what write-behind
 * staged for it (fdops.h). A call of no bytes returns at once, as the
 * kernel's does.
 */
PP_COMMON PP_EXPORT ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
				   unsigned int flags)
{
	int e;

	pp_readers_before_splice(in);
	if (len && (e = pp_splice_into(out, in, flags))) {
		errno = -e;
		return -1;
	}
	return real_splice(in, off_in, out, off_out, len, flags);
}

PP_COMMON PP_EXPORT ssize_t tee(int in, int out, size_t len, unsigned int flags)
{
	int e;

	pp_readers_before_splice(in);
	if (len && (e = pp_splice_into(out, in, flags))) {
		errno = -e;
		return -1;
	}
	return real_tee(in, out, len, flags);
}

PP_COMMON PP_EXPORT ssize_t vmsplice(int fd, const struct iovec *iov, size_t cnt,
				     unsigned int flags)
{
	int e;

	/* Nothing to move, or an array the kernel refuses at once: no wait for staged bytes. */
	if (pp_iov_moves_bytes(iov, cnt) && (e = pp_splice_into(fd, PP_SPLICE_VMSPLICE, flags))) {
		errno = -e;
		return -1;
	}
	return real_vmsplice(fd, iov, cnt, flags);
}

/*
 * sendfile() into a pipe (Linux 5.12 and later) comes after what
 * write-behind staged for it, as splice() does. Not in the start-up
 * table: libc's sendfile() is the bare system call, and so is this.
 */
static ssize_t sendfile_into(int out, int in, off_t *off, size_t count)
{
	int e;

	if (count && (e = pp_splice_into(out, PP_SPLICE_SENDFILE, 0))) {
		errno = -e;
		return -1;
	}
	return syscall(SYS_sendfile, out, in, off, count);
}

PP_COMMON PP_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	return sendfile_into(out, in, off, count);
}

PP_COMMON PP_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t count)
{
	return sendfile_into(out, in, off, count);
}

/* A pipe end sent to another process: its readers can no longer be known. */
PP_COMMON PP_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	pp_readers_before_send(msg);
	return PP_REAL(sendmsg) ? pp_real.sendmsg(fd, msg, flags) :
				  syscall(SYS_sendmsg, fd, msg, flags);
}

PP_COMMON PP_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return pp_sigaction(sig, act, old);
}

PP_COMMON PP_EXPORT __sighandler_t signal(int sig, __sighandler_t handler)
{
	return pp_signal(sig, handler);
}

/* ---- exec and spawn: pipe ends leave for a new program image ---- */

#define CALL_REAL(name, ...) (PP_REAL(name) ? pp_real.name(__VA_ARGS__) : (errno = ENOSYS, -1))

/*
 * Runs the real exec @call with the environment @envp as prepared for the
 * image @path will become (exec.h); undoes that if the exec returns.
 */
#define EXEC_PREPARED(path, envp, call)                               \
	({                                                            \
		struct pp_exec_ctx x_;                                \
		char *const *in_ = (envp);                            \
		size_t n_ = pp_exec_env_slots(in_);                   \
		char **env_ = alloca((n_ ? n_ : 1) * sizeof(char *)); \
		int r_;                                               \
		env_ = pp_exec_prepare(&x_, (path), in_, env_, n_);   \
		r_ = (call);                                          \
		pp_exec_failed(&x_);                                  \
		r_;                                                   \
	})

PP_COMMON PP_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return EXEC_PREPARED(path, envp, CALL_REAL(execve, path, argv, env_));
}

PP_COMMON PP_EXPORT int execv(const char *path, char *const argv[])
{
	return EXEC_PREPARED(path, environ, CALL_REAL(execve, path, argv, env_));
}

PP_COMMON PP_EXPORT int execvp(const char *file, char *const argv[])
{
	return EXEC_PREPARED(file, environ, CALL_REAL(execvpe, file, argv, env_));
}

PP_COMMON PP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return EXEC_PREPARED(file, envp, CALL_REAL(execvpe, file, argv, env_));
}

/* The kernel names an image run from an fd after the fd's number. */
static const char *fd_name(int fd, char *buf)
{
	pp_utoa(fd >= 0 ? (unsigned long)fd : 0, buf);
	return buf;
}

PP_COMMON PP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	char name[16];

	return EXEC_PREPARED(fd_name(fd, name), envp, CALL_REAL(fexecve, fd, argv, env_));
}

PP_COMMON PP_EXPORT int execveat(int dirfd, const char *path, char *const argv[],
				 char *const envp[], int flags)
{
	char name[16];
	const char *comm = pp_exec_path_empty(path) ? fd_name(dirfd, name) : path;

	return EXEC_PREPARED(comm, envp, CALL_REAL(execveat, dirfd, path, argv, env_, flags));
}

/* execl, execlp, execle: gather the list into an argv on the stack. */
#define GATHER_ARGV(first, last_named, argv, want_envp, envp) \
	do {                                                  \
		va_list ap;                                   \
		size_t n = 1;                                 \
		va_start(ap, last_named);                     \
		while (va_arg(ap, char *))                    \
			n++;                                  \
		va_end(ap);                                   \
		argv = alloca((n + 1) * sizeof(char *));      \
		argv[0] = (char *)(first);                    \
		va_start(ap, last_named);                     \
		for (size_t i = 1; i <= n; i++)               \
			argv[i] = va_arg(ap, char *);         \
		if (want_envp)                                \
			envp = va_arg(ap, char **);           \
		va_end(ap);                                   \
	} while (0)

PP_COMMON PP_EXPORT int execl(const char *path, const char *arg, ...)
{
	char **argv, **envp = NULL;

	GATHER_ARGV(arg, arg, argv, 0, envp);
	(void)envp;
	return execv(path, argv);
}

PP_COMMON PP_EXPORT int execlp(const char *file, const char *arg, ...)
{
	char **argv, **envp = NULL;

	GATHER_ARGV(arg, arg, argv, 0, envp);
	(void)envp;
	return execvp(file, argv);
}

PP_COMMON PP_EXPORT int execle(const char *path, const char *arg, ...)
{
	char **argv, **envp = NULL;

	GATHER_ARGV(arg, arg, argv, 1, envp);
	return execve(path, argv, envp);
}

/*
 * posix_spawn runs its child's exec inside libc, out of our sight: the
 * parent prepares the child's record and names it once the child exists.
 */
#define SPAWN_PREPARED(path, fa, envp, call)                                            \
	({                                                                              \
		struct pp_exec_ctx x_;                                                  \
		char *const *in_ = (envp);                                              \
		size_t n_ = pp_exec_env_slots(in_);                                     \
		char **env_ = alloca((n_ ? n_ : 1) * sizeof(char *));                   \
		pid_t child_ = -1;                                                      \
		int r_;                                                                 \
		env_ = pp_exec_prepare_spawn(&x_, (path), in_, env_, n_, (fa) != NULL); \
		r_ = (call);                                                            \
		pp_exec_spawned(&x_, r_ == 0 ? child_ : -1);                            \
		if (r_ == 0 && pid)                                                     \
			*pid = child_;                                                  \
		r_;                                                                     \
	})

PP_COMMON PP_EXPORT int posix_spawn(pid_t *pid, const char *path,
				    const posix_spawn_file_actions_t *fa,
				    const posix_spawnattr_t *attr, char *const argv[],
				    char *const envp[])
{
	return SPAWN_PREPARED(path, fa, envp,
			      PP_REAL(posix_spawn) ?
				      pp_real.posix_spawn(&child_, path, fa, attr, argv, env_) :
				      ENOSYS);
}

PP_COMMON PP_EXPORT int posix_spawnp(pid_t *pid, const char *file,
				     const posix_spawn_file_actions_t *fa,
				     const posix_spawnattr_t *attr, char *const argv[],
				     char *const envp[])
{
	return SPAWN_PREPARED(file, fa, envp,
			      PP_REAL(posix_spawnp) ?
				      pp_real.posix_spawnp(&child_, file, fa, attr, argv, env_) :
				      ENOSYS);
}

PP_COMMON PP_EXPORT int system(const char *command)
{
	pp_exec_mark_inherited(false);
	return PP_REAL(system) ? pp_real.system(command) : -1;
}

PP_COMMON PP_EXPORT FILE *popen(const char *command, const char *type)
{
	pp_exec_mark_inherited(false);
	return PP_REAL(popen) ? (FILE *)pp_real.popen(command, type) : NULL;
}

/*
 * vfork(): the child runs on this process's memory until it execs or
 * exits (vfork.h).
 */
PP_HOT static void *real_vfork;

/* Used when libc's vfork could not be found: fork() is a valid vfork(). */
PP_COMMON static pid_t vfork_fallback(void)
{
	return fork();
}

/*
 * Called by the trampoline below in the parent, just before libc's vfork:
 * raises the flag and returns where to jump. libc's vfork is looked up at
 * the first vfork, not at load.
 */
__attribute__((visibility("hidden"))) void *pp_vfork_enter(void);
PP_COMMON void *pp_vfork_enter(void)
{
	void *fn = __atomic_load_n(&real_vfork, __ATOMIC_ACQUIRE);

	if (!fn) {
		fn = dlsym(RTLD_NEXT, "vfork");
		if (!fn)
			fn = (void *)vfork_fallback;
		__atomic_store_n(&real_vfork, fn, __ATOMIC_RELEASE);
	}
	pp_exec_before_vfork();
	pp_vfork_raise();
	return fn;
}

/*
 * vfork itself cannot be wrapped by a C function: the child would return
 * through a frame the parent returns through again later. The trampoline
 * calls pp_vfork_enter() (a call that has returned before the vfork) and
 * jumps to libc's vfork, adding no frame of its own.
 */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	subq $8, %rsp\n" /* the call wants a 16-byte aligned stack */
	"	call pp_vfork_enter\n"
	"	addq $8, %rsp\n"
	"	jmp *%rax\n"
	".size vfork, .-vfork\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, %function\n"
	"vfork:\n"
	"	stp x29, x30, [sp, #-16]!\n"
	"	bl pp_vfork_enter\n"
	"	ldp x29, x30, [sp], #16\n"
	"	br x0\n"
	".size vfork, .-vfork\n");
#endif
