// SPDX-License-Identifier: MIT
/*
 * static-copy: copies stdin to stdout, one write() per read() (so writes
 * into a pipe are large ones, up to the pipe's capacity). Linked
 * statically, so LD_PRELOAD has no effect on it: a pipe end it holds is
 * held by a program libppipe cannot see into, and must stay plain.
 *
 * Built with -DCOPY_REPORT and linked dynamically it is syspre-copy, which
 * first says on stderr how it runs (test-system-preload.py runs it setuid,
 * and in a mount namespace whose /etc names no preload):
 *
 *   syspre-copy: pid=PID at_secure=0|1 uid=UID euid=EUID libppipe=0|1
 *
 * libppipe=1 when a loaded object's name contains "libppipe".
 *
 * With an argument, it first writes one byte to that path (a FIFO the
 * writer's side waits on), so that a test can start the writer only once
 * this program runs: its exec, which makes the pipe plain, has happened.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#ifdef COPY_REPORT
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

static int find_libppipe(struct dl_phdr_info *info, size_t size, void *found)
{
	(void)size;
	if (info->dlpi_name && strstr(info->dlpi_name, "libppipe")) {
		*(int *)found = 1;
		return 1;
	}
	return 0;
}

static void report(void)
{
	int lib = 0;

	dl_iterate_phdr(find_libppipe, &lib);
	fprintf(stderr, "syspre-copy: pid=%d at_secure=%lu uid=%d euid=%d libppipe=%d\n",
		(int)getpid(), getauxval(AT_SECURE), (int)getuid(), (int)geteuid(), lib);
	fflush(stderr);
}
#endif

int main(int argc, char **argv)
{
	static char buf[1 << 20];

	if (argc > 1) {
		int fd = open(argv[1], O_WRONLY);

		if (fd < 0 || write(fd, "1", 1) != 1)
			return 2;
		close(fd);
	}

#ifdef COPY_REPORT
	report();
#endif
	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(1, buf + off, (size_t)(n - off));

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return 1;
			off += w;
		}
	}
}
