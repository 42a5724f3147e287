// SPDX-License-Identifier: MIT
/* Raw system-call helpers that need more than one line (see sys.h). */
#include "sys.h"

#include <sys/stat.h>

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
