// SPDX-License-Identifier: MIT
/*
 * Write-behind's stages (PPIPE_MODE=uring) are given back when their pipe
 * goes, however its ends are closed. PIPES pipes, one after another, each
 * with two write ends (the second a dup): a large block goes through each
 * and is read back, then all three ends are closed at once, by
 *
 *   stage-slots close        close(), one by one
 *   stage-slots close_range  libc's close_range() over the three
 *   stage-slots raw          the close_range system call, which libppipe
 *                            does not see (the fd numbers come back with
 *                            the next pipe() and dup())
 *
 * There are more pipes than stages (64): every pipe must still get one
 * (the statistics' write_behind.stages), and the staging pipes' fds must
 * not pile up (the process's open fds come back to what they were, plus
 * the service's own and one stage, within a generous deadline).
 * Skips where write-behind cannot run (no io_uring).
 */
#include "helpers.h"
#include "statsjson.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PIPES 200
#define BLOCK (64u << 10)
#define DEADLINE_MS 10000

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		t_die("opendir /proc/self/fd");
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	static unsigned char a[BLOCK], b[BLOCK];
	const char *how = argc == 2 ? argv[1] : "";
	uint64_t stages, pos = 0;
	int base, now = 0;

	t_init("stage-slots");
	if (strcmp(how, "close") && strcmp(how, "close_range") && strcmp(how, "raw"))
		t_die("usage: stage-slots close|close_range|raw");
	base = open_fds();
	for (int i = 0; i < PIPES; i++) {
		int fds[2], w2, lo, hi;

		t_pipe(fds, 0);
		w2 = dup(fds[1]);
		if (w2 < 0)
			t_die("dup");
		t_fill(a, sizeof(a), 5, pos);
		if (t_write_all(w2, a, sizeof(a)) != (ssize_t)sizeof(a) ||
		    t_read_full(fds[0], b, sizeof(b)) != (ssize_t)sizeof(b))
			t_die("pipe %d", i);
		if (t_verify(b, sizeof(b), 5, pos) != sizeof(b))
			t_check(false, "pipe %d: the block read back differs", i);
		pos += sizeof(a);
		if (i == 0 && !t_stats_json("stages"))
			t_skip("write-behind is not running here (PPIPE_MODE=uring, io_uring?)");
		lo = fds[0] < fds[1] ? fds[0] : fds[1];
		lo = w2 < lo ? w2 : lo;
		hi = fds[0] > fds[1] ? fds[0] : fds[1];
		hi = w2 > hi ? w2 : hi;
		if (hi - lo != 2)
			t_die("the three fds are not next to each other: %d..%d", lo, hi);
		if (!strcmp(how, "close")) {
			t_close(fds[1]);
			t_close(w2);
			t_close(fds[0]);
		} else if (!strcmp(how, "close_range")) {
			if (close_range((unsigned int)lo, (unsigned int)hi, 0))
				t_die("close_range");
		} else if (syscall(SYS_close_range, lo, hi, 0)) {
			t_die("close_range system call");
		}
	}
	stages = t_stats_json("stages");
	t_log("%s: %d pipes, %llu stages opened", how, PIPES, (unsigned long long)stages);
	t_check(stages == PIPES, "every pipe got a stage: slots are given back");

	/* The service's ring and eventfd, and the stage of a pipe closed unseen: 5 more at most. */
	for (int waited = 0; (now = open_fds()) > base + 5 && waited < DEADLINE_MS; waited += 10)
		t_usleep(10000);
	t_log("open fds: %s", now <= base + 5 ? "back to what they were" : "piled up");
	t_check(now <= base + 5, "staging fds are closed: %d open, %d before", now, base);
	return t_finish();
}
