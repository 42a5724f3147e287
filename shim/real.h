/* SPDX-License-Identifier: MIT */
/*
 * The libc functions libppipe interposes, reached through real_<name>().
 * Each is bound the first time it is needed (pp_real_bind_one()), and all
 * of them before a process first forks (pp_real_bind_all()), so that a
 * program that never forks looks up only the few it calls, and no fork
 * child binds what its parent could have. A call that cannot be bound
 * goes to the raw system call, so it works at any time and never
 * recurses.
 *
 * Layer: base (may use: base).
 */
#ifndef PP_REAL_H
#define PP_REAL_H

#include <spawn.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct msghdr;
struct sigaction;

/*
 * The functions, in the order they are bound: return type, name,
 * parameters. The struct's fields and the names looked up come from this
 * one list.
 */
#define PP_REAL_FUNCS(X)                                                                         \
	X(ssize_t, write, (int, const void *, size_t))                                           \
	X(ssize_t, writev, (int, const struct iovec *, int))                                     \
	X(ssize_t, read, (int, void *, size_t))                                                  \
	X(ssize_t, readv, (int, const struct iovec *, int))                                      \
	X(int, pipe, (int[2]))                                                                   \
	X(int, pipe2, (int[2], int))                                                             \
	X(int, close, (int))                                                                     \
	X(int, dup, (int))                                                                       \
	X(int, dup2, (int, int))                                                                 \
	X(int, dup3, (int, int, int))                                                            \
	X(int, fcntl, (int, int, ...))                                                           \
	X(int, fcntl64, (int, int, ...))                                                         \
	X(pid_t, fork, (void))                                                                   \
	X(void, _exit, (int))                                                                    \
	X(void, _Exit, (int))                                                                    \
	X(ssize_t, splice, (int, loff_t *, int, loff_t *, size_t, unsigned int))                 \
	X(ssize_t, tee, (int, int, size_t, unsigned int))                                        \
	X(ssize_t, vmsplice, (int, const struct iovec *, size_t, unsigned int))                  \
	X(int, execve, (const char *, char *const[], char *const[]))                             \
	X(int, execveat, (int, const char *, char *const[], char *const[], int))                 \
	X(int, fexecve, (int, char *const[], char *const[]))                                     \
	X(int, posix_spawn,                                                                      \
	  (pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *, \
	   char *const[], char *const[]))                                                        \
	X(int, posix_spawnp,                                                                     \
	  (pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *, \
	   char *const[], char *const[]))                                                        \
	X(int, close_range, (unsigned int, unsigned int, int))                                   \
	X(int, execv, (const char *, char *const[]))                                             \
	X(int, execvp, (const char *, char *const[]))                                            \
	X(int, execvpe, (const char *, char *const[], char *const[]))                            \
	X(int, system, (const char *))                                                           \
	X(void *, popen, (const char *, const char *))                                           \
	X(int, fclose, (void *))                                                                 \
	X(int, ioctl, (int, unsigned long, ...))                                                 \
	X(void, closefrom, (int))                                                                \
	X(ssize_t, sendmsg, (int, const struct msghdr *, int))                                   \
	X(int, sigaction, (int, const struct sigaction *, struct sigaction *))

struct pp_real {
#define PP_REAL_FIELD(ret, name, params) ret(*name) params;
	PP_REAL_FUNCS(PP_REAL_FIELD)
#undef PP_REAL_FIELD
};

/* Each entry's place in the list. */
enum pp_real_index {
#define PP_REAL_INDEX(ret, name, params) PP_REAL_IDX_##name,
	PP_REAL_FUNCS(PP_REAL_INDEX)
#undef PP_REAL_INDEX
		PP_REAL_COUNT
};

extern struct pp_real pp_real;

/*
 * From the constructor: notes the objects loaded at start, which later
 * walks keep to. When one of them cannot be searched by the walk (no GNU
 * hash table), or libppipe is not in the main list (dlmopen), everything
 * is bound at once, dlsym answering, as a signal handler could not.
 */
void pp_real_start(void);
/*
 * Binds entry @k to the next definition after libppipe, as
 * dlsym(RTLD_NEXT) would: by walking the objects loaded after it and
 * looking the name up in their symbol tables (no lock, no allocation, no
 * system call), and through dlsym for what that walk cannot settle (an
 * IFUNC, a name found nowhere). Returns it; NULL: defined nowhere.
 */
void *pp_real_bind_one(enum pp_real_index k);
/* Binds every entry not bound yet, in one walk (before the first fork). */
void pp_real_bind_all(void);

/*
 * The next definition of @name after libppipe, as dlsym(RTLD_NEXT) finds
 * it, for names bound on first use: the same walk through the objects
 * loaded at start, dlsym for what it cannot settle. No lock, no
 * allocation, no system call when the walk settles it. NULL: defined
 * nowhere.
 */
void *pp_real_next(const char *name);
/*
 * The same walk for @count names at once, into @fn; without dlsym, so
 * that it takes no lock: what the walk cannot settle is NULL.
 */
void pp_real_next_many(int count, const char *const name[], void *fn[]);

/* The bound entry @name, binding first if needed; NULL if libc lacks it. */
#define PP_REAL(name) \
	(pp_real.name ? pp_real.name : ((void)pp_real_bind_one(PP_REAL_IDX_##name), pp_real.name))

ssize_t real_write(int fd, const void *buf, size_t n);
ssize_t real_writev(int fd, const struct iovec *iov, int cnt);
ssize_t real_read(int fd, void *buf, size_t n);
ssize_t real_readv(int fd, const struct iovec *iov, int cnt);
int real_pipe2(int fds[2], int flags);
int real_close(int fd);
int real_dup(int fd);
int real_dup2(int fd, int fd2);
int real_dup3(int fd, int fd2, int flags);
/* fcntl with an int or pointer argument (the callers know which). */
int real_fcntl(int fd, int cmd, unsigned long arg);
pid_t real_fork(void);
ssize_t real_splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
		    unsigned int flags);
ssize_t real_tee(int in, int out, size_t len, unsigned int flags);
ssize_t real_vmsplice(int fd, const struct iovec *iov, size_t cnt, unsigned int flags);
int real_close_range(unsigned int first, unsigned int last, int flags);
/* _exit(), or _Exit() (@upper); the exit_group system call if unbound. */
__attribute__((noreturn)) void real_exit(int status, bool upper);

#endif
