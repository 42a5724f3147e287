// SPDX-License-Identifier: MIT
/*
 * freopen-forget: freopen() closes its stream's fd inside libc and puts
 * the new file at that number. libppipe must forget the fd there, as at
 * close(): a large write to the new file is then plain from the start (no
 * attempt through the old pipe's ring, no fallback), and the pipe the
 * number named before stays accelerated for its other ends. The new file
 * is a FIFO, another pipe, read only at the end: a library that still took
 * the fd for the first pipe pushed that write from the first pipe's ring,
 * counted it as the first pipe's, and wrote the pages again while the FIFO
 * held them (its bytes arrived corrupted).
 * Run with LD_PRELOAD=libppipe and PPIPE_MIN_WRITE=4097; reads the
 * counters with ppipe_stats_get().
 */
#include "helpers.h"

#include <ppipe.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LARGE 65536
#define NLARGE 8
#define SEED 31

static unsigned char buf[LARGE], back[LARGE];

int main(void)
{
	int (*stats_get)(struct ppipe_stats *);
	struct ppipe_stats before = { .size = sizeof(before) }, after = { .size = sizeof(after) };
	struct t_reader reader;
	char dir[] = "/tmp/freopen-forget.XXXXXX", fifo[64];
	struct stat st, pst;
	int fr;
	uint64_t pos = 0;
	int fds[2], d;
	FILE *f;

	t_init("freopen-forget");
	stats_get = (int (*)(struct ppipe_stats *))dlsym(RTLD_DEFAULT, "ppipe_stats_get");
	if (!stats_get)
		t_die("libppipe is not preloaded");
	t_pipe(fds, 0);
	t_reader_start(&reader, fds[0], LARGE, SEED, 0, 0);

	/* A stream on a second write end of the pipe, written once: libppipe knows the fd. */
	if ((d = dup(fds[1])) < 0 || !(f = fdopen(d, "w")))
		t_die("dup, fdopen");
	t_fill(buf, LARGE, SEED, pos);
	t_check(write(d, buf, LARGE) == LARGE, "large write to the dup");
	pos += LARGE;

	/* freopen: the same number, now a FIFO (with a reader); a large write there. */
	if (!mkdtemp(dir))
		t_die("mkdtemp");
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	if (mkfifo(fifo, 0600) || (fr = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		t_die("mkfifo, open");
	f = freopen(fifo, "w", f);
	t_check(f && fileno(f) == d, "freopen kept the fd number");
	t_check(fstat(d, &st) == 0 && S_ISFIFO(st.st_mode) && fstat(fds[1], &pst) == 0 &&
			st.st_ino != pst.st_ino,
		"the fd is the FIFO now");
	t_check(stats_get(&before) == 0, "ppipe_stats_get");
	t_fill(buf, LARGE, SEED + 1, 0);
	t_check(write(d, buf, LARGE) == LARGE, "large write to the FIFO");
	t_check(stats_get(&after) == 0, "ppipe_stats_get");
	t_check(after.fallbacks == before.fallbacks &&
			after.writes_accelerated == before.writes_accelerated,
		"the write to the FIFO was plain from the start: %llu fallback(s)",
		(unsigned long long)(after.fallbacks - before.fallbacks));

	/* The pipe's own write end: every large write still accelerated. */
	t_check(stats_get(&before) == 0, "ppipe_stats_get");
	for (int i = 0; i < NLARGE; i++) {
		t_fill(buf, LARGE, SEED, pos);
		t_check(write(fds[1], buf, LARGE) == LARGE, "large write %d", i);
		pos += LARGE;
	}
	t_check(stats_get(&after) == 0, "ppipe_stats_get");
	t_log("after freopen: %llu of %d large writes accelerated",
	      (unsigned long long)(after.writes_accelerated - before.writes_accelerated), NLARGE);
	t_check(after.writes_accelerated - before.writes_accelerated == NLARGE,
		"the pipe stayed accelerated");
	/* Read only now: pages the FIFO still held must not have been written again. */
	t_check(read(fr, back, LARGE) == LARGE && t_verify(back, LARGE, SEED + 1, 0) == LARGE,
		"the FIFO's bytes, intact");

	if (f)
		fclose(f);
	t_close(fr);
	unlink(fifo);
	rmdir(dir);
	t_close(fds[1]);
	t_close(fds[0]);
	t_reader_finish(&reader, "the pipe's bytes", pos);
	return t_finish();
}
