// SPDX-License-Identifier: MIT
/*
 * idle-prog: the programs test-idle.py traces, plain and with libppipe, to
 * see what libppipe adds where it cannot help. One mode per run:
 *
 *   nothing     returns at once
 *   wait        prints "ready", then reads stdin until EOF (its maps and
 *               fds are looked at from outside meanwhile)
 *   fork        a fork child that calls _exit(0)
 *   exec        a fork child that execs /bin/true
 *   pipes N     N times: pipe, a 64-byte write, read it back, close both
 *   thread      a pipe read by a second thread, 8 MiB written into it in
 *               1 MiB writes; then prints /proc/self/fd ("fd N KIND")
 *   forkwrite   a pipe; a fork child writes 8 MiB into it in 1 MiB
 *               writes, this process reads them
 *   trackfork   a pipe of ours open across a fork whose child calls _exit(0)
 *
 * The modes that move data print "pipe R W" (the pipe's fds) and "hash
 * GOT WANT" (FNV-1a of the bytes read, and of the bytes meant); the exit
 * status is 0 when they agree, 1 when not, 99 on an error.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1u << 20)
#define TOTAL (8u * MIB)

extern char **environ;
static unsigned char wbuf[MIB], rbuf[MIB];

static void die(const char *what)
{
	fprintf(stderr, "idle-prog: %s: %s\n", what, strerror(errno));
	exit(99);
}

/* Byte @i of the data stream: the same in every run, never all zero. */
static unsigned char byte_at(uint64_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL;

	return (unsigned char)(x >> 56 ^ x >> 29);
}

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

#define FNV_START 0xcbf29ce484222325ULL

static uint64_t want_hash(void)
{
	uint64_t h = FNV_START;

	for (uint64_t i = 0; i < TOTAL; i++) {
		unsigned char b = byte_at(i);

		h = fnv(h, &b, 1);
	}
	return h;
}

/* Writes the 8 MiB in 1 MiB write() calls (a short write goes on with the rest). */
static void write_all(int fd)
{
	for (uint64_t off = 0; off < TOTAL; off += MIB) {
		size_t done = 0;

		for (size_t i = 0; i < MIB; i++)
			wbuf[i] = byte_at(off + i);
		while (done < MIB) {
			ssize_t n = write(fd, wbuf + done, MIB - done);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				die("write");
			done += (size_t)n;
		}
	}
}

static uint64_t read_all(int fd, uint64_t *count)
{
	uint64_t h = FNV_START;

	*count = 0;
	for (;;) {
		ssize_t n = read(fd, rbuf, sizeof(rbuf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("read");
		if (n == 0)
			return h;
		h = fnv(h, rbuf, (size_t)n);
		*count += (uint64_t)n;
	}
}

static int report(uint64_t got, uint64_t count)
{
	uint64_t want = want_hash();

	printf("hash %016llx %016llx bytes %llu\n", (unsigned long long)got,
	       (unsigned long long)want, (unsigned long long)count);
	return got == want && count == TOTAL ? 0 : 1;
}

static void wait_ok(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "idle-prog: child status %#x\n", st);
		exit(99);
	}
}

static int mode_wait(void)
{
	char c;

	if (write(1, "ready\n", 6) != 6)
		die("write ready");
	while (read(0, &c, 1) > 0)
		;
	return 0;
}

static int mode_fork(void)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0)
		_exit(0);
	wait_ok(pid);
	return 0;
}

static int mode_exec(void)
{
	char *argv[] = { "/bin/true", NULL };
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		execve(argv[0], argv, environ);
		_exit(127);
	}
	wait_ok(pid);
	return 0;
}

static int mode_pipes(int n)
{
	char msg[64], got[64];

	memset(msg, 'x', sizeof(msg));
	for (int i = 0; i < n; i++) {
		int p[2];

		if (pipe(p))
			die("pipe");
		if (write(p[1], msg, sizeof(msg)) != (ssize_t)sizeof(msg))
			die("write");
		if (read(p[0], got, sizeof(got)) != (ssize_t)sizeof(got))
			die("read");
		close(p[0]);
		close(p[1]);
	}
	return 0;
}

struct reader {
	int fd;
	uint64_t hash, count;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	r->hash = read_all(r->fd, &r->count);
	return NULL;
}

/* Each open fd and what it is, with the inode numbers left out. */
static void list_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d)
		die("opendir /proc/self/fd");
	while ((e = readdir(d))) {
		char path[300], target[256];
		ssize_t n;
		char *br;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n < 0)
			die("readlink");
		target[n] = 0;
		br = strchr(target, '[');
		if (br && (!strncmp(target, "pipe:", 5) || !strncmp(target, "socket:", 7) ||
			   !strncmp(target, "anon_inode:", 11)))
			*br = 0;
		printf("fd %s %s\n", e->d_name, target);
	}
	closedir(d);
}

static int mode_thread(void)
{
	struct reader r = { 0 };
	pthread_t t;
	int p[2], e;

	if (pipe(p))
		die("pipe");
	printf("pipe %d %d\n", p[0], p[1]);
	fflush(stdout);
	r.fd = p[0];
	e = pthread_create(&t, NULL, reader_main, &r);
	if (e) {
		errno = e;
		die("pthread_create");
	}
	write_all(p[1]);
	close(p[1]);
	pthread_join(t, NULL);
	close(p[0]);
	e = report(r.hash, r.count);
	list_fds();
	return e;
}

static int mode_forkwrite(void)
{
	uint64_t h, count;
	int p[2];
	pid_t pid;

	if (pipe(p))
		die("pipe");
	printf("pipe %d %d\n", p[0], p[1]);
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(p[0]);
		write_all(p[1]);
		_exit(0);
	}
	close(p[1]);
	h = read_all(p[0], &count);
	close(p[0]);
	wait_ok(pid);
	return report(h, count);
}

static int mode_trackfork(void)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0)
		_exit(0);
	wait_ok(pid);
	close(p[0]);
	close(p[1]);
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "nothing";

	if (!strcmp(m, "nothing"))
		return 0;
	if (!strcmp(m, "wait"))
		return mode_wait();
	if (!strcmp(m, "fork"))
		return mode_fork();
	if (!strcmp(m, "exec"))
		return mode_exec();
	if (!strcmp(m, "pipes"))
		return mode_pipes(argc > 2 ? atoi(argv[2]) : 100);
	if (!strcmp(m, "thread"))
		return mode_thread();
	if (!strcmp(m, "forkwrite"))
		return mode_forkwrite();
	if (!strcmp(m, "trackfork"))
		return mode_trackfork();
	fprintf(stderr, "usage: idle-prog nothing|wait|fork|exec|pipes N|thread|forkwrite|"
			"trackfork\n");
	return 99;
}
