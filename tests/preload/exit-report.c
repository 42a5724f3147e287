// SPDX-License-Identifier: MIT
/*
 * exit-report: processes that end without exit() still write their
 * PPIPE_STATS report, exactly once, and a vfork child never does.
 * Run by test-exit-report.py, which reads the reports.
 *
 *   exit-report tree exit|_exit|_Exit
 *       A reader child and a writer child on one pipe, both ending with
 *       _exit(); a vfork child that ends with _exit(127) as a failed exec
 *       would; the parent writes before and after them and ends as told.
 *       Each report must count only its own process's bytes.
 *       Prints "<role> <pid>" for the parent, reader, writer and vfork child.
 *   exit-report late
 *       exit(0) writes the report; then an atexit handler registered before
 *       libppipe's (exitlate.c) calls _exit(5): the report must not be
 *       written twice.
 *   exit-report signal
 *       exit(0) with PPIPE_STATS naming a FIFO nobody reads: the report
 *       must not wait for a reader. If it did, SIGALRM's handler would end
 *       the process with _exit(3), which must not wait for the report its
 *       own thread holds either.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WRITER_BYTES (512u << 10)
#define PARENT_BYTES (256u << 10)
#define CHUNK (128u << 10)

static char buf[CHUNK];
extern int exitlate_status; /* exitlate.c */

static void die(const char *what)
{
	fprintf(stderr, "exit-report: %s: %s\n", what, strerror(errno));
	exit(99);
}

static void write_all(int fd, size_t len)
{
	while (len) {
		size_t n = len < sizeof(buf) ? len : sizeof(buf);
		ssize_t r = write(fd, buf, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("write");
		len -= (size_t)r;
	}
}

static void wait_for(pid_t pid, int want)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != want) {
		fprintf(stderr, "exit-report: child %d: status %#x, want exit %d\n", (int)pid, st,
			want);
		exit(1);
	}
}

static int tree(const char *ending)
{
	pid_t reader, writer, vchild;
	int fds[2];

	memset(buf, 'x', sizeof(buf));
	if (pipe(fds))
		die("pipe");
	reader = fork();
	if (reader < 0)
		die("fork");
	if (!reader) {
		close(fds[1]);
		while (read(fds[0], buf, sizeof(buf)) > 0)
			;
		_exit(0);
	}
	close(fds[0]);
	write_all(fds[1], PARENT_BYTES / 2);
	writer = fork();
	if (writer < 0)
		die("fork");
	if (!writer) {
		write_all(fds[1], WRITER_BYTES);
		_exit(0);
	}
	wait_for(writer, 0);
	/* What posix_spawn or Python's subprocess do when the exec fails. */
	vchild = vfork();
	if (vchild < 0)
		die("vfork");
	if (!vchild)
		_exit(127);
	wait_for(vchild, 127);
	write_all(fds[1], PARENT_BYTES / 2);
	close(fds[1]);
	wait_for(reader, 0);
	printf("parent %d\nreader %d\nwriter %d\nvfork %d\n", (int)getpid(), (int)reader,
	       (int)writer, (int)vchild);
	fflush(stdout);
	if (!strcmp(ending, "_exit"))
		_exit(0);
	if (!strcmp(ending, "_Exit"))
		_Exit(0);
	exit(0);
}

static void on_alarm(int sig)
{
	(void)sig;
	_exit(3);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "tree") && argc > 2)
		return tree(argv[2]);
	if (!strcmp(mode, "late")) {
		int fds[2];

		/* Something to report: one large write into a pipe nobody reads. */
		if (pipe(fds))
			die("pipe");
		write_all(fds[1], 20000);
		exitlate_status = 5;
		exit(0);
	}
	if (!strcmp(mode, "signal")) {
		signal(SIGALRM, on_alarm);
		alarm(1);
		exit(0);
	}
	fprintf(stderr, "usage: exit-report tree exit|_exit|_Exit | late | signal\n");
	return 2;
}
