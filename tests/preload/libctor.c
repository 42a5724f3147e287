// SPDX-License-Identifier: MIT
/*
 * A library whose constructor uses pipes before libppipe's constructor has
 * run (it is a dependency of the program, so it is initialised first): the
 * calls must work, and leave no fd behind.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char ctor_report[512];

__attribute__((constructor)) static void early_pipes(void)
{
	static char out[100000], in[100000];
	int fds[2], n = 0, fd2;
	ssize_t w, r, got = 0;
	FILE *f;

	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (char)(i * 7 + 3);
	if (pipe(fds)) {
		snprintf(ctor_report, sizeof(ctor_report), "pipe failed");
		return;
	}
	n += snprintf(ctor_report + n, sizeof(ctor_report) - n, "setpipe=%d ",
		      fcntl(fds[1], F_SETPIPE_SZ, 1 << 20) >= (1 << 20));
	w = write(fds[1], out, sizeof(out));
	while (got < w && (r = read(fds[0], in + got, sizeof(in) - got)) > 0)
		got += r;
	n += snprintf(ctor_report + n, sizeof(ctor_report) - n, "write=%zd read=%zd same=%d ", w,
		      got, got == w && !memcmp(in, out, sizeof(out)));
	fd2 = dup(fds[1]);
	n += snprintf(ctor_report + n, sizeof(ctor_report) - n, "dup=%d ", fd2 >= 0);
	close(fd2);
	close(fds[0]);
	close(fds[1]);
	f = fopen("/proc/self/status", "r");
	n += snprintf(ctor_report + n, sizeof(ctor_report) - n, "fopen=%d fclose=%d", f != NULL,
		      f ? fclose(f) == 0 : 0);
}
