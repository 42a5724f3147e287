// SPDX-License-Identifier: MIT
/*
 * tree-bytes: a process tree whose statistics are known to the byte, for
 * test-ppipe-run.py. Run with libppipe, PPIPE_MIN_WRITE=4097 and
 * PPIPE_THP=off.
 *
 *   pipe D: its read end goes to a spawned "true" (posix_spawn, no file
 *           actions) whose environment drops LD_PRELOAD: it never runs
 *           libppipe, so the pipe stays plain; 2 writes of 20000 bytes,
 *           passed through
 *   pipe A: 1 MiB, written by a fork child in one write into the empty
 *           1 MiB pipe (a fresh ring takes all of it): 1 MiB accelerated
 *   pipe B: 100 writes of 1000 bytes, read by a fork child: passed
 *           through, "writes below PPIPE_MIN_WRITE"
 *   pipe C: non-blocking, a write of 100 bytes, then 3 of 20000 (not a
 *           page multiple, into a pipe that is not empty): passed
 *           through, "non-blocking, pipe not empty and size not
 *           page-aligned"
 * Processes that report: this one, the writer of A, the reader of B.
 * Exits 77 when a pipe cannot be made 1 MiB large.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1u << 20)

extern char **environ;
static char buf[MIB];

static void die(const char *what)
{
	fprintf(stderr, "tree-bytes: %s: %s\n", what, strerror(errno));
	exit(99);
}

static void write_n(int fd, size_t len, int times)
{
	for (int i = 0; i < times; i++)
		if (write(fd, buf, len) != (ssize_t)len)
			die("write");
}

static void wait_ok(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		die("child");
}

int main(void)
{
	char *argv[] = { "true", NULL }, *env[64];
	int a[2], b[2], c[2], d[2], n = 0;
	pid_t pid;

	for (char **e = environ; *e && n < 63; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11))
			env[n++] = *e;
	env[n] = NULL;
	if (pipe2(d, O_CLOEXEC) || fcntl(d[0], F_SETFD, 0))
		die("pipe D");
	if (posix_spawnp(&pid, "true", NULL, NULL, argv, env))
		die("posix_spawnp true");
	wait_ok(pid);
	write_n(d[1], 20000, 2);
	close(d[0]);
	close(d[1]);

	if (pipe2(a, O_CLOEXEC))
		die("pipe A");
	if (fcntl(a[1], F_SETPIPE_SZ, MIB) < (int)MIB) {
		fprintf(stderr, "tree-bytes: SKIP: no 1 MiB pipe here\n");
		return 77;
	}
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		write_n(a[1], MIB, 1);
		_exit(0);
	}
	wait_ok(pid);
	close(a[1]);
	while (read(a[0], buf, sizeof(buf)) > 0)
		;
	close(a[0]);

	if (pipe2(b, O_CLOEXEC))
		die("pipe B");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		close(b[1]);
		while (read(b[0], buf, sizeof(buf)) > 0)
			;
		_exit(0);
	}
	close(b[0]);
	write_n(b[1], 1000, 100);
	close(b[1]);
	wait_ok(pid);

	if (pipe2(c, O_CLOEXEC | O_NONBLOCK))
		die("pipe C");
	write_n(c[1], 100, 1);
	write_n(c[1], 20000, 3);
	close(c[0]);
	close(c[1]);
	return 0;
}
