// SPDX-License-Identifier: MIT
/*
 * diff-ctor: pipes used from another library's constructor, before
 * libppipe's own constructor ran, behave as without libppipe, and no fd
 * is left open by either library.
 */
#include "helpers.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <unistd.h>

extern char ctor_report[512];

/* Open fds above 2, not counting the one reading the directory. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.' && atoi(e->d_name) > 2 && atoi(e->d_name) != dirfd(d);
	if (d)
		closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	int extra;

	(void)argc;
	/* Start again with only stdin, stdout and stderr, so any extra fd is a leak. */
	if (!getenv("DIFF_CTOR_CLEAN")) {
		close_range(3, ~0U, 0);
		setenv("DIFF_CTOR_CLEAN", "1", 1);
		execv("/proc/self/exe", argv);
		return T_EXIT_ERROR;
	}
	extra = count_fds();
	t_init("diff-ctor");
	t_log("constructor: %s", ctor_report);
	t_check(extra == 0, "fds left open before main: %d", extra);
	t_log("fds left open before main: %d", extra);
	return T_EXIT_PASS;
}
