/* SPDX-License-Identifier: MIT */
/*
 * A program that refers to libc names libppipe interposes, each with the
 * glibc version the link gave it (write@GLIBC_2.2.5 on x86_64,
 * write@GLIBC_2.17 on aarch64), and to libppipe's own call by its version
 * (ppipe_version@LIBPPIPE_0.1). Taking each address makes the dynamic
 * linker bind every name at start-up (no lazy binding), which
 * LD_DEBUG=bindings shows: test-interpose.py reads there where each went.
 *
 * It prints libppipe's version, and the name of the object write() came
 * from, so that the binding is seen from inside too.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <ppipe.h>

/* volatile: the compiler must keep every reference, and take each address. */
static void *volatile refs[] = {
	(void *)write,	  (void *)writev,    (void *)pipe,	    (void *)pipe2,
	(void *)close,	  (void *)dup,	     (void *)dup2,	    (void *)dup3,
	(void *)fcntl,	  (void *)fork,	     (void *)vfork,	    (void *)_exit,
	(void *)execve,	  (void *)execvp,    (void *)posix_spawn,   (void *)splice,
	(void *)vmsplice, (void *)sigaction, (void *)fwrite,	    (void *)fputs,
	(void *)printf,	  (void *)fflush,    (void *)ppipe_version,
};

int main(void)
{
	Dl_info info;
	const char *v = ppipe_version();
	const char *from = "?";

	if (dladdr(refs[0], &info) && info.dli_fname)
		from = strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1 :
						      info.dli_fname;
	printf("ppipe_version %s; write from %s; %zu names\n", v ? v : "(none)", from,
	       sizeof(refs) / sizeof(refs[0]));
	return v ? 0 : 1;
}
