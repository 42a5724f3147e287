/* SPDX-License-Identifier: MIT */
/*
 * stderr capture for unit tests: between capture_begin() and
 * capture_end(), fd 2 goes into a 1 MiB pipe; capture_end() returns what
 * was written (up to 1 MiB).
 */
#ifndef PPIPE_TEST_CAPTURE_H
#define PPIPE_TEST_CAPTURE_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char out[1 << 20];
static int saved_fd = -1, pipe_rd = -1;

static void capture_begin(void)
{
	int p[2];

	fflush(stderr);
	if (pipe2(p, O_CLOEXEC)) {
		perror("pipe2");
		exit(99);
	}
	fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	saved_fd = dup(2);
	dup2(p[1], 2);
	close(p[1]);
	pipe_rd = p[0];
}

static const char *capture_end(void)
{
	size_t n = 0;
	ssize_t r;

	dup2(saved_fd, 2);
	close(saved_fd);
	while (n < sizeof(out) - 1 && (r = read(pipe_rd, out + n, sizeof(out) - 1 - n)) > 0)
		n += (size_t)r;
	close(pipe_rd);
	out[n] = '\0';
	return out;
}

#endif
