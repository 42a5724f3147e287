// SPDX-License-Identifier: MIT
#include "real.h"

#include "compiler.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

PP_HOT struct pp_real pp_real;

PP_START void pp_real_bind(void)
{
	static int bound;

	if (__atomic_exchange_n(&bound, 1, __ATOMIC_ACQ_REL))
		return;
#define BIND(name) pp_real.name = (__typeof__(pp_real.name))dlsym(RTLD_NEXT, #name)
	BIND(write);
	BIND(writev);
	BIND(read);
	BIND(readv);
	BIND(pipe);
	BIND(pipe2);
	BIND(close);
	BIND(dup);
	BIND(dup2);
	BIND(dup3);
	BIND(fcntl);
	BIND(fcntl64);
	BIND(fork);
	BIND(_exit);
	BIND(_Exit);
	BIND(splice);
	BIND(tee);
	BIND(vmsplice);
	BIND(execve);
	BIND(execveat);
	BIND(fexecve);
	BIND(posix_spawn);
	BIND(posix_spawnp);
	BIND(close_range);
	BIND(execv);
	BIND(execvp);
	BIND(execvpe);
	BIND(system);
	BIND(popen);
	BIND(fclose);
	BIND(ioctl);
	BIND(closefrom);
	BIND(sendmsg);
#undef BIND
}

/*
 * Before pp_real_bind() (or if a symbol is missing) the raw system call
 * stands in; the glibc wrappers add nothing the shim relies on.
 */
#define RAW(ret, call) ((ret)syscall call)

PP_COMMON ssize_t real_write(int fd, const void *buf, size_t n)
{
	return pp_real.write ? pp_real.write(fd, buf, n) : RAW(ssize_t, (SYS_write, fd, buf, n));
}

PP_COMMON ssize_t real_writev(int fd, const struct iovec *iov, int cnt)
{
	return pp_real.writev ? pp_real.writev(fd, iov, cnt) :
				RAW(ssize_t, (SYS_writev, fd, iov, cnt));
}

PP_COMMON ssize_t real_read(int fd, void *buf, size_t n)
{
	return pp_real.read ? pp_real.read(fd, buf, n) : RAW(ssize_t, (SYS_read, fd, buf, n));
}

PP_COMMON ssize_t real_readv(int fd, const struct iovec *iov, int cnt)
{
	return pp_real.readv ? pp_real.readv(fd, iov, cnt) :
			       RAW(ssize_t, (SYS_readv, fd, iov, cnt));
}

PP_COMMON int real_pipe2(int fds[2], int flags)
{
	if (pp_real.pipe2)
		return pp_real.pipe2(fds, flags);
	return RAW(int, (SYS_pipe2, fds, flags));
}

PP_COMMON int real_close(int fd)
{
	return pp_real.close ? pp_real.close(fd) : RAW(int, (SYS_close, fd));
}

PP_COMMON int real_dup(int fd)
{
	return pp_real.dup ? pp_real.dup(fd) : RAW(int, (SYS_dup, fd));
}

PP_COMMON int real_dup2(int fd, int fd2)
{
	return pp_real.dup2 ? pp_real.dup2(fd, fd2) : RAW(int, (SYS_dup2, fd, fd2));
}

PP_COMMON int real_dup3(int fd, int fd2, int flags)
{
	return pp_real.dup3 ? pp_real.dup3(fd, fd2, flags) : RAW(int, (SYS_dup3, fd, fd2, flags));
}

PP_COMMON int real_fcntl(int fd, int cmd, unsigned long arg)
{
	return pp_real.fcntl ? pp_real.fcntl(fd, cmd, arg) : RAW(int, (SYS_fcntl, fd, cmd, arg));
}

PP_COMMON pid_t real_fork(void)
{
	/* No raw fallback: a raw fork would skip glibc's atfork and TLS fix-ups. */
	if (!PP_REAL(fork)) {
		errno = ENOSYS;
		return -1;
	}
	return pp_real.fork();
}

ssize_t real_splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
		    unsigned int flags)
{
	return pp_real.splice ? pp_real.splice(in, off_in, out, off_out, len, flags) :
				RAW(ssize_t, (SYS_splice, in, off_in, out, off_out, len, flags));
}

ssize_t real_tee(int in, int out, size_t len, unsigned int flags)
{
	return pp_real.tee ? pp_real.tee(in, out, len, flags) :
			     RAW(ssize_t, (SYS_tee, in, out, len, flags));
}

ssize_t real_vmsplice(int fd, const struct iovec *iov, size_t cnt, unsigned int flags)
{
	return pp_real.vmsplice ? pp_real.vmsplice(fd, iov, cnt, flags) :
				  RAW(ssize_t, (SYS_vmsplice, fd, iov, cnt, flags));
}

int real_close_range(unsigned int first, unsigned int last, int flags)
{
	return pp_real.close_range ? pp_real.close_range(first, last, flags) :
				     RAW(int, (SYS_close_range, first, last, flags));
}

PP_COMMON void real_exit(int status, bool upper)
{
	void (*fn)(int) = upper ? pp_real._Exit : pp_real._exit;

	if (fn)
		fn(status);
	for (;;)
		syscall(SYS_exit_group, status);
}
