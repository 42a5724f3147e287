// SPDX-License-Identifier: MIT
/*
 * PPIPE_DEBUG=1 says once per pipe and process which path the pipe took
 * on its first large write (accelerated, or plain and why), and once per
 * process each kind of fallback; small writes say nothing. Run with
 * LD_PRELOAD=libppipe and PPIPE_MIN_WRITE=4097, with PPIPE_DEBUG=1 (the
 * lines are counted) or PPIPE_DEBUG=0 (there must be none). The program
 * sends its own stderr to a file and reads the lines back.
 *
 *   pipe A, read by a child: 6 large writes, accelerated
 *   pipes B and C, non-blocking, never empty: 3 large writes each of a
 *           size that is no page multiple, plain
 *   pipe E, the same, written by a signal handler: plain
 *   pipe F, non-blocking, empty: a large write, accelerated
 *   a fork child: A and B again, as a process of its own
 */
#include "helpers.h"

#include <fcntl.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LARGE 20000

static char buf[65536];
static int pipe_e[2];
static char *log_text;

static void write_large(int fd, int times)
{
	for (int i = 0; i < times; i++)
		if (write(fd, buf, LARGE) != LARGE)
			t_die("write fd %d", fd);
}

/* Into a non-blocking pipe that is not empty: the real call (a byte first). */
static void write_unaligned(int fd, int times)
{
	if (write(fd, buf, 1) != 1)
		t_die("write fd %d", fd);
	write_large(fd, times);
}

static void on_usr1(int sig)
{
	(void)sig;
	write_unaligned(pipe_e[1], 1);
}

static unsigned long ino_of(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		t_die("fstat");
	return (unsigned long)st.st_ino;
}

/* Lines of the log that match @pattern (an extended regex). */
static int count(const char *pattern)
{
	regex_t re;
	int n = 0;

	if (regcomp(&re, pattern, REG_EXTENDED | REG_NEWLINE))
		t_die("regcomp %s", pattern);
	for (const char *p = log_text; *p;) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char line[1024];

		snprintf(line, sizeof(line), "%.*s", (int)len, p);
		n += !regexec(&re, line, 0, NULL, 0);
		p += len + (end != NULL);
	}
	regfree(&re);
	return n;
}

static void expect(int want, const char *what, const char *fmt, ...) T_PRINTF(3, 4);
static void expect(int want, const char *what, const char *fmt, ...)
{
	char pattern[512];
	va_list ap;
	int got;

	va_start(ap, fmt);
	vsnprintf(pattern, sizeof(pattern), fmt, ap);
	va_end(ap);
	got = count(pattern);
	t_log("%s: %d line%s", what, got, got == 1 ? "" : "s");
	t_check(got == want, "%s: %d lines, want %d (/%s/)", what, got, want, pattern);
}

int main(void)
{
	const char *dbg = getenv("PPIPE_DEBUG");
	int on = dbg && !strcmp(dbg, "1");
	int a[2], b[2], c[2], f[2], logfd = t_tmpfile();
	unsigned long ia, ib, ic, ie, iff;
	pid_t reader, child;
	long len;

	t_init("debug-lines");
	if (dup2(logfd, 2) != 2)
		t_die("dup2 stderr");
	t_pipe(a, 0);
	t_pipe(b, O_NONBLOCK);
	t_pipe(c, O_NONBLOCK);
	t_pipe(pipe_e, O_NONBLOCK);
	t_pipe(f, O_NONBLOCK);
	ia = ino_of(a[1]);
	ib = ino_of(b[1]);
	ic = ino_of(c[1]);
	ie = ino_of(pipe_e[1]);
	iff = ino_of(f[1]);

	reader = t_fork();
	if (!reader) {
		t_close(a[1]);
		while (read(a[0], buf, sizeof(buf)) > 0)
			;
		_exit(0);
	}
	t_close(a[0]);
	for (int i = 0; i < 10; i++)
		if (write(a[1], buf, 100) != 100)
			t_die("small write");
	write_large(a[1], 6);
	write_unaligned(b[1], 2);
	t_drain(b[0]);
	write_unaligned(b[1], 1);
	write_unaligned(c[1], 3);
	write_large(f[1], 1);
	signal(SIGUSR1, on_usr1);
	raise(SIGUSR1);

	child = t_fork();
	if (!child) {
		write_large(a[1], 2);
		t_drain(b[0]);
		write_unaligned(b[1], 2);
		_exit(t_failed() ? T_EXIT_FAIL : 0);
	}
	t_check(t_wait(child) == 0, "child");
	t_close(a[1]);
	t_wait(reader);

	len = lseek(logfd, 0, SEEK_END);
	log_text = calloc(1, (size_t)len + 1);
	if (!log_text || pread(logfd, log_text, (size_t)len, 0) != len)
		t_die("read the log");

	expect(on ? 1 : 0, "A, parent",
	       "^libppipe\\[%d\\]: pipe inode %lu \\(fd %d\\): accelerated ", (int)getpid(), ia,
	       a[1]);
	expect(on ? 1 : 0, "A, child",
	       "^libppipe\\[%d\\]: pipe inode %lu \\(fd %d\\): accelerated ", (int)child, ia, a[1]);
	expect(on ? 2 : 0, "B, parent and child",
	       "^libppipe\\[[0-9]+\\]: pipe inode %lu \\(fd %d\\): plain writes: non-blocking", ib,
	       b[1]);
	expect(on ? 1 : 0, "C",
	       "^libppipe\\[[0-9]+\\]: pipe inode %lu \\(fd %d\\): plain writes: non-blocking", ic,
	       c[1]);
	expect(on ? 1 : 0, "E, from a signal handler",
	       "^libppipe\\[[0-9]+\\]: pipe inode %lu \\(fd %d\\): plain writes: non-blocking", ie,
	       pipe_e[1]);
	expect(on ? 1 : 0, "F, non-blocking, empty",
	       "^libppipe\\[[0-9]+\\]: pipe inode %lu \\(fd %d\\): accelerated ", iff, f[1]);
	expect(on ? 7 : 0, "first paths in all", "^libppipe\\[[0-9]+\\]: pipe inode [0-9]+ \\(fd ");
	expect(on ? 1 : 0, "non-blocking fallback, parent",
	       "^libppipe\\[%d\\]: fallback: non-blocking, pipe not empty", (int)getpid());
	expect(on ? 1 : 0, "non-blocking fallback, child",
	       "^libppipe\\[%d\\]: fallback: non-blocking, pipe not empty", (int)child);
	expect(0, "lines not from libppipe", "^[^l]");
	return t_finish();
}
