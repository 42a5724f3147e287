// SPDX-License-Identifier: MIT
/*
 * The public API's contracts, called the way an application that links
 * libppipe would (here it is preloaded and looked up): ppipe_stats_get()
 * fills exactly as much of the struct as the caller says it has, so a
 * program built against the version 1 header keeps working; too small or
 * NULL is EINVAL; ppipe_stats_dump() and ppipe_flush() give EBADF for a
 * closed fd.
 */
#include "helpers.h"

#include <ppipe.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SENTINEL 0xa5

int main(void)
{
	int (*stats_get)(struct ppipe_stats *) =
		(int (*)(struct ppipe_stats *))dlsym(RTLD_DEFAULT, "ppipe_stats_get");
	int (*stats_dump)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "ppipe_stats_dump");
	int (*flush)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "ppipe_flush");
	const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "ppipe_version");
	union {
		struct ppipe_stats st;
		unsigned char bytes[sizeof(struct ppipe_stats) + 64];
	} u;
	char want[32];
	bool untouched = true;
	int fds[2], r;

	t_init("api-stats");
	if (!stats_get || !stats_dump || !flush || !version)
		t_die("libppipe is not preloaded");
	snprintf(want, sizeof(want), "%d.%d.%d", PPIPE_VERSION_MAJOR, PPIPE_VERSION_MINOR,
		 PPIPE_VERSION_PATCH);
	t_check(!strcmp(version(), want), "version %s, header says %s", version(), want);

	/* Some activity, so the counters are not all zero. */
	t_pipe(fds, 0);
	{
		static char buf[64 << 10];

		t_fill(buf, sizeof(buf), 1, 0);
		t_check(t_write_all(fds[1], buf, sizeof(buf)) == (ssize_t)sizeof(buf), "write");
		t_check(t_read_full(fds[0], buf, sizeof(buf)) == (ssize_t)sizeof(buf), "read");
	}

	errno = 0;
	r = stats_get(NULL);
	t_log("NULL: %s", t_res(r, errno));
	t_check(r == -1 && errno == EINVAL, "NULL must be EINVAL");

	memset(&u, SENTINEL, sizeof(u));
	u.st.size = PPIPE_STATS_SIZE_V1 - 1;
	errno = 0;
	r = stats_get(&u.st);
	t_log("one byte short of version 1: %s", t_res(r, errno));
	t_check(r == -1 && errno == EINVAL && u.bytes[sizeof(size_t)] == SENTINEL,
		"too small must be EINVAL, nothing written");

	/* A version 1 caller: filled up to pool_peak, not one byte further. */
	memset(&u, SENTINEL, sizeof(u));
	u.st.size = PPIPE_STATS_SIZE_V1;
	r = stats_get(&u.st);
	for (size_t i = PPIPE_STATS_SIZE_V1; i < sizeof(u.bytes); i++)
		untouched &= u.bytes[i] == SENTINEL;
	t_log("version 1 size: %s, size %s, bytes past it %s", t_res(r, 0),
	      u.st.size == PPIPE_STATS_SIZE_V1 ? "kept" : "changed",
	      untouched ? "untouched" : "written");
	t_check(r == 0 && u.st.size == PPIPE_STATS_SIZE_V1 && untouched,
		"a version 1 caller gets exactly version 1's fields");
	t_check(u.st.version == 3 && u.st.writes_accelerated >= 1 &&
			u.st.bytes_accelerated >= sizeof(u.bytes) - 64,
		"version 1 fields: version %u, %llu writes", u.st.version,
		(unsigned long long)u.st.writes_accelerated);

	/* This header's size, and a bigger one from a newer header: all we have. */
	memset(&u, SENTINEL, sizeof(u));
	u.st.size = sizeof(u.bytes);
	r = stats_get(&u.st);
	t_log("a newer caller's size: %s, size %s", t_res(r, 0),
	      u.st.size == sizeof(struct ppipe_stats) ? "ours" : "other");
	t_check(r == 0 && u.st.size == sizeof(struct ppipe_stats) &&
			u.bytes[sizeof(struct ppipe_stats)] == SENTINEL,
		"a bigger caller gets our struct, nothing past it");

	t_close(fds[0]);
	t_close(fds[1]);
	errno = 0;
	r = stats_dump(fds[1]);
	t_log("dump to a closed fd: %s", t_res(r, errno));
	t_check(r == -1 && errno == EBADF, "dump to a closed fd must be EBADF");
	errno = 0;
	r = flush(fds[1]);
	t_log("flush a closed fd: %s", t_res(r, errno));
	t_check(r == -1 && errno == EBADF, "flush of a closed fd must be EBADF");
	return t_finish();
}
