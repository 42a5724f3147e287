// SPDX-License-Identifier: MIT
/*
 * lifecycle-cost: what libppipe adds to the life of a pipe and to an
 * exec, the two places its registry works. Prints nanoseconds per
 *   pipe: pipe() + close() of both ends;
 *   exec: fork + execve of PROGRAM (default /bin/true) + wait, with no
 *         pipe, then with one pipe end the program inherits.
 * Run it with and without LD_PRELOAD and compare; it asserts nothing.
 *
 * usage: lifecycle-cost [PIPES [EXECS [PROGRAM]]]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double execs(long n, const char *prog, int inherit)
{
	char *argv[] = { (char *)prog, NULL };
	int p[2] = { -1, -1 };
	double t0;

	if (inherit && pipe(p))
		exit(99);
	t0 = now();
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		int st;

		if (pid < 0)
			exit(99);
		if (!pid) {
			execve(prog, argv, environ);
			_exit(127);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			exit(99);
	}
	t0 = (now() - t0) / (double)n;
	if (inherit) {
		close(p[0]);
		close(p[1]);
	}
	return t0;
}

int main(int argc, char **argv)
{
	long pipes = argc > 1 ? atol(argv[1]) : 20000;
	long n = argc > 2 ? atol(argv[2]) : 300;
	const char *prog = argc > 3 ? argv[3] : "/bin/true";
	double t0 = now();

	for (long i = 0; i < pipes; i++) {
		int p[2];

		if (pipe(p))
			return 99;
		close(p[0]);
		close(p[1]);
	}
	printf("pipe+close: %.0f ns\n", (now() - t0) / (double)pipes);
	printf("fork+exec+wait, no pipe: %.0f ns\n", execs(n, prog, 0));
	printf("fork+exec+wait, one inherited pipe: %.0f ns\n", execs(n, prog, 1));
	return 0;
}
