// SPDX-License-Identifier: MIT
/*
 * ppipe-overhead: what a preloaded library costs where it cannot help.
 * Each case repeats one everyday operation N times and prints one JSON
 * line with the nanoseconds and the minor page faults per operation (this
 * process's and its waited-for children's: counts are stable where times
 * are not, so tests budget them); run it with and without
 * LD_PRELOAD and divide (ppipe-compare's overhead matrix does, alternating
 * the two sides). It asserts nothing about time.
 *
 *   start   posix_spawn() PROGRAM (default /bin/true) and wait: the cost of
 *           loading the library into a new process. The driver itself
 *           stays plain: -p LIB puts LD_PRELOAD=LIB into the children's
 *           environment only.
 *   fork    fork(), _exit() in the child, wait.
 *   exec    fork(), execve() PROGRAM in the child, wait (the child inherits
 *           the environment, and so a preload).
 *   pipe    pipe(), one 64-byte write and read, close both ends.
 *   small   SIZE-byte writes (default 1) into a pipe that a thread drains.
 *   shell   bash runs N times `echo "line $i" | cat | wc -c`.
 *
 * usage: ppipe-overhead [-p LIB] [-s SIZE] CASE N [PROGRAM]
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char *child_preload; /* -p: LD_PRELOAD of the children only */
static size_t small_size = 1; /* -s */

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Minor page faults so far: this process's and its waited-for children's. */
static long minor_faults(void)
{
	struct rusage self, kids;

	if (getrusage(RUSAGE_SELF, &self) || getrusage(RUSAGE_CHILDREN, &kids))
		return 0;
	return self.ru_minflt + kids.ru_minflt;
}

static void die(const char *what)
{
	fprintf(stderr, "ppipe-overhead: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void wait_ok(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "ppipe-overhead: child %d ended with status 0x%x\n", (int)pid, st);
		exit(2);
	}
}

/* The environment of the children: ours, with -p's LD_PRELOAD instead of any other (made once). */
static char **child_env(void)
{
	static char var[4096];
	static char **env;
	size_t n = 0, k = 0;

	if (!child_preload)
		return environ;
	if (env)
		return env;
	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		die("calloc");
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11))
			env[k++] = environ[i];
	snprintf(var, sizeof(var), "LD_PRELOAD=%s", child_preload);
	env[k++] = var;
	return env;
}

static double case_start(long n, const char *prog)
{
	char *argv[] = { (char *)prog, NULL };
	char **env = child_env();
	double t0 = now_ns();

	for (long i = 0; i < n; i++) {
		pid_t pid;
		int e = posix_spawn(&pid, prog, NULL, NULL, argv, env);

		if (e) {
			errno = e;
			die(prog);
		}
		wait_ok(pid);
	}
	return now_ns() - t0;
}

static double case_fork(long n)
{
	double t0 = now_ns();

	for (long i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0)
			die("fork");
		if (!pid)
			_exit(0);
		wait_ok(pid);
	}
	return now_ns() - t0;
}

static double case_exec(long n, const char *prog)
{
	char *argv[] = { (char *)prog, NULL };
	char **env = child_env();
	double t0 = now_ns();

	for (long i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0)
			die("fork");
		if (!pid) {
			execve(prog, argv, env);
			_exit(127);
		}
		wait_ok(pid);
	}
	return now_ns() - t0;
}

static double case_pipe(long n)
{
	char buf[64] = { 0 };
	double t0 = now_ns();

	for (long i = 0; i < n; i++) {
		int p[2];

		if (pipe(p))
			die("pipe");
		if (write(p[1], buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
		    read(p[0], buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			die("pipe write/read");
		close(p[0]);
		close(p[1]);
	}
	return now_ns() - t0;
}

static void *drain(void *arg)
{
	static char sink[1 << 16];
	int fd = *(int *)arg;

	while (read(fd, sink, sizeof(sink)) > 0)
		;
	return NULL;
}

static double case_small(long n)
{
	static char buf[1 << 16];
	pthread_t reader;
	int p[2];
	double t;

	if (small_size > sizeof(buf)) {
		fprintf(stderr, "ppipe-overhead: -s at most %zu\n", sizeof(buf));
		exit(2);
	}
	if (pipe(p))
		die("pipe");
	if (pthread_create(&reader, NULL, drain, &p[0]))
		die("pthread_create");
	t = now_ns();
	for (long i = 0; i < n; i++)
		if (write(p[1], buf, small_size) != (ssize_t)small_size)
			die("write");
	t = now_ns() - t;
	close(p[1]);
	pthread_join(reader, NULL);
	close(p[0]);
	return t;
}

static double case_shell(long n)
{
	char script[256];
	char *argv[] = { "bash", "-c", script, NULL };
	double t0;
	pid_t pid;
	int e;

	snprintf(script, sizeof(script),
		 "i=0; while [ $i -lt %ld ]; do i=$((i+1)); echo \"line $i\" | cat | wc -c; "
		 "done >/dev/null",
		 n);
	t0 = now_ns();
	e = posix_spawnp(&pid, "bash", NULL, NULL, argv, child_env());
	if (e) {
		errno = e;
		die("bash");
	}
	wait_ok(pid);
	return now_ns() - t0;
}

static void usage(void)
{
	fprintf(stderr, "usage: ppipe-overhead [-p LIB] [-s SIZE] "
			"start|fork|exec|pipe|small|shell N [PROGRAM]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *name, *prog = "/bin/true";
	double ns;
	long n, faults;
	int c;

	while ((c = getopt(argc, argv, "p:s:")) != -1) {
		if (c == 'p')
			child_preload = optarg;
		else if (c == 's')
			small_size = strtoul(optarg, NULL, 10);
		else
			usage();
	}
	if (argc - optind < 2)
		usage();
	name = argv[optind];
	n = strtol(argv[optind + 1], NULL, 10);
	if (n <= 0 || !small_size)
		usage();
	if (argc - optind > 2)
		prog = argv[optind + 2];
	signal(SIGPIPE, SIG_DFL);
	faults = minor_faults();
	if (!strcmp(name, "start"))
		ns = case_start(n, prog);
	else if (!strcmp(name, "fork"))
		ns = case_fork(n);
	else if (!strcmp(name, "exec"))
		ns = case_exec(n, prog);
	else if (!strcmp(name, "pipe"))
		ns = case_pipe(n);
	else if (!strcmp(name, "small"))
		ns = case_small(n);
	else if (!strcmp(name, "shell"))
		ns = case_shell(n);
	else
		usage();
	faults = minor_faults() - faults;
	printf("{\"case\":\"%s\",\"n\":%ld,\"size\":%zu,\"ns_per_op\":%.1f,"
	       "\"minflt_per_op\":%.2f}\n",
	       name, n, !strcmp(name, "small") ? small_size : (size_t)0, ns / (double)n,
	       (double)faults / (double)n);
	return 0;
}
