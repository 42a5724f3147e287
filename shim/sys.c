// SPDX-License-Identifier: MIT
/* Raw system-call helpers that need more than one line (see sys.h). */
#include "sys.h"

#include <fcntl.h>
#include <sys/stat.h>

PP_HOT static int spare_base; /* lowest fd number for libppipe's own fds */

PP_COMMON void pp_sys_spare_fds_from(int base)
{
	spare_base = base;
}

PP_COMMON long pp_sys_dup_spare(int fd, bool cloexec)
{
	int cmd = cloexec ? F_DUPFD_CLOEXEC : F_DUPFD;
	long r = pp_sys_fcntl(fd, cmd, (unsigned long)spare_base);

	/* The soft limit was lowered below the range since: anywhere, then. */
	if (r == -EINVAL && spare_base)
		r = pp_sys_fcntl(fd, cmd, 0);
	return r;
}

PP_COMMON long pp_sys_pipe_ino(int fd, uint64_t *ino)
{
	struct stat st;
	long r = PP_SYSCALL(SYS_fstat, fd, &st);

	if (r)
		return r;
	if (!S_ISFIFO(st.st_mode))
		return -EBADFD;
	*ino = st.st_ino;
	return 0;
}
