// SPDX-License-Identifier: MIT
/* Raw system-call helpers that need more than one line (see sys.h). */
#include "sys.h"

#include "solo.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>

PP_HOT static int spare_base; /* lowest fd number for libppipe's own fds */

PP_COMMON void pp_sys_spare_fds_from(int base)
{
	spare_base = base;
}

/* A dup landed in the spare range: the fd table covers it, and grows no more for it. */
PP_HOT static int spare_table;

PP_COMMON long pp_sys_dup_spare(int fd, bool cloexec)
{
	int cmd = cloexec ? F_DUPFD_CLOEXEC : F_DUPFD;
	long r = pp_sys_fcntl(fd, cmd, (unsigned long)spare_base);

	/* The soft limit was lowered below the range since: anywhere, then. */
	if (r == -EINVAL && spare_base)
		r = pp_sys_fcntl(fd, cmd, 0);
	if (r >= spare_base && spare_base && !__atomic_load_n(&spare_table, __ATOMIC_RELAXED))
		__atomic_store_n(&spare_table, 1, __ATOMIC_RELAXED);
	return r;
}

/* The last fd of the table a process starts with (the kernel's NR_OPEN_DEFAULT, 64). */
#define FIRST_TABLE_TOP 63

PP_COMMON long pp_sys_dup_brief(int fd)
{
	if (pp_solo() || __atomic_load_n(&spare_table, __ATOMIC_RELAXED) ||
	    spare_base <= FIRST_TABLE_TOP)
		return pp_sys_dup_spare(fd, true);
	return pp_sys_fcntl(fd, F_DUPFD_CLOEXEC, FIRST_TABLE_TOP);
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

PP_COMMON bool pp_sys_anon_pipe(int fd)
{
	struct statfs sf;

	return !PP_SYSCALL(SYS_fstatfs, fd, &sf) && sf.f_type == PIPEFS_MAGIC;
}

long pp_sys_tmpfile_for(char *path, int flags)
{
	char *slash = strrchr(path, '/');
	long fd;

	if (!slash)
		return PP_SYSCALL(SYS_openat, AT_FDCWD, ".", O_TMPFILE | flags, 0644);
	if (slash == path)
		return PP_SYSCALL(SYS_openat, AT_FDCWD, "/", O_TMPFILE | flags, 0644);
	*slash = '\0';
	fd = PP_SYSCALL(SYS_openat, AT_FDCWD, path, O_TMPFILE | flags, 0644);
	*slash = '/';
	return fd;
}

long pp_sys_link_tmpfile(int fd, const char *path)
{
	char proc[40] = "/proc/self/fd/";
	long r;

	pp_utoa((unsigned long)fd, proc + strlen(proc));
	r = PP_SYSCALL(SYS_linkat, AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
	/* No /proc: the fd itself, which needs CAP_DAC_READ_SEARCH. */
	if (r == -ENOENT)
		r = PP_SYSCALL(SYS_linkat, fd, "", AT_FDCWD, path, AT_EMPTY_PATH);
	return r;
}
