/* SPDX-License-Identifier: MIT */
/*
 * The libc functions libppipe interposes, reached through real_<name>().
 * They are bound once, by pp_real_bind() from the constructor. A call that
 * arrives before that (another library's constructor) goes to the raw
 * system call, so it works at any time and never recurses.
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

struct pp_real {
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	int (*pipe)(int[2]);
	int (*pipe2)(int[2], int);
	int (*close)(int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*fcntl64)(int, int, ...);
	pid_t (*fork)(void);
	void (*_exit)(int);
	void (*_Exit)(int);
	ssize_t (*splice)(int, loff_t *, int, loff_t *, size_t, unsigned int);
	ssize_t (*tee)(int, int, size_t, unsigned int);
	ssize_t (*vmsplice)(int, const struct iovec *, size_t, unsigned int);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execveat)(int, const char *, char *const[], char *const[], int);
	int (*fexecve)(int, char *const[], char *const[]);
	int (*posix_spawn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			   const posix_spawnattr_t *, char *const[], char *const[]);
	int (*posix_spawnp)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			    const posix_spawnattr_t *, char *const[], char *const[]);
	int (*close_range)(unsigned int, unsigned int, int);
	int (*execv)(const char *, char *const[]);
	int (*execvp)(const char *, char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*system)(const char *);
	void *(*popen)(const char *, const char *);
	int (*fclose)(void *);
	int (*ioctl)(int, unsigned long, ...);
	void (*closefrom)(int);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
};

extern struct pp_real pp_real;

/*
 * Binds every entry with dlsym(RTLD_NEXT). Called from the constructor,
 * and first by any interposer without a raw system call to fall back on
 * (fclose, exec, spawn...) that runs before it: another library's
 * constructor. Binding twice is harmless; it happens once.
 */
void pp_real_bind(void);

/* The bound entry @name, binding first if needed; NULL if libc lacks it. */
#define PP_REAL(name) (pp_real.name ? pp_real.name : (pp_real_bind(), pp_real.name))

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
