// SPDX-License-Identifier: MIT
/*
 * Writes below PPIPE_MIN_WRITE to a pipe libppipe tracks are counted as
 * passed through (write and writev), so that accelerated plus passed
 * through is everything written into the pipe; writes to an fd that is
 * not a tracked pipe are not counted at all. Run with LD_PRELOAD=libppipe
 * and PPIPE_MIN_WRITE=4097; reads the counters with ppipe_stats_get().
 */
#include "helpers.h"

#include <ppipe.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define SMALL 1000
#define NSMALL 100
#define NVEC 10
#define LARGE 65536
#define NLARGE 4
#define SEED 7

static unsigned char buf[LARGE];
static int (*stats_get)(struct ppipe_stats *);

static struct ppipe_stats snapshot(void)
{
	struct ppipe_stats st = { .size = sizeof(st) };

	if (stats_get(&st))
		t_die("ppipe_stats_get");
	return st;
}

int main(void)
{
	struct ppipe_stats before, after;
	uint64_t pos = 0, writes = 0, acc, pt;
	struct t_reader reader;
	int null, fds[2];

	t_init("small-writes");
	stats_get = (int (*)(struct ppipe_stats *))dlsym(RTLD_DEFAULT, "ppipe_stats_get");
	if (!stats_get)
		t_die("libppipe is not preloaded");

	/* Not a pipe: not counted, whatever the size. */
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null < 0)
		t_die("open /dev/null");
	before = snapshot();
	for (int i = 0; i < 50; i++)
		t_check(write(null, buf, SMALL) == SMALL, "write /dev/null");
	t_check(write(null, buf, LARGE) == LARGE, "large write /dev/null");
	after = snapshot();
	t_log("/dev/null: %llu writes counted",
	      (unsigned long long)(after.writes_passthrough - before.writes_passthrough +
				   after.writes_accelerated - before.writes_accelerated));
	t_check(!memcmp(&before, &after, sizeof(before)), "writes to /dev/null were counted");
	close(null);

	t_pipe(fds, 0);
	t_reader_start(&reader, fds[0], 4096, SEED, 0, 0);
	t_close(fds[0]);
	before = snapshot();
	for (int i = 0; i < NSMALL; i++, writes++) {
		t_fill(buf, SMALL, SEED, pos);
		t_check(t_write_all(fds[1], buf, SMALL) == SMALL, "small write");
		pos += SMALL;
	}
	for (int i = 0; i < NVEC; i++, writes++) {
		struct iovec iov[2] = { { buf, 300 }, { buf + 300, 300 } };

		t_fill(buf, 600, SEED, pos);
		t_check(writev(fds[1], iov, 2) == 600, "small writev");
		pos += 600;
	}
	for (int i = 0; i < NLARGE; i++, writes++) {
		t_fill(buf, LARGE, SEED, pos);
		t_check(write(fds[1], buf, LARGE) == LARGE, "large write");
		pos += LARGE;
	}
	after = snapshot();
	t_close(fds[1]);
	t_reader_finish(&reader, "reader", pos);

	acc = after.bytes_accelerated - before.bytes_accelerated;
	pt = after.bytes_passthrough - before.bytes_passthrough;
	t_log("pipe: %llu writes counted of %llu, %llu bytes of %llu",
	      (unsigned long long)(after.writes_accelerated - before.writes_accelerated +
				   after.writes_passthrough - before.writes_passthrough),
	      (unsigned long long)writes, (unsigned long long)(acc + pt), (unsigned long long)pos);
	t_check(after.writes_accelerated - before.writes_accelerated + after.writes_passthrough -
				before.writes_passthrough ==
			writes,
		"every write to the pipe is counted once");
	t_check(acc + pt == pos, "accelerated + passed through = bytes written");
	t_check(pt >= NSMALL * SMALL + NVEC * 600 && acc <= NLARGE * LARGE,
		"the small writes are passed through (%llu bytes)", (unsigned long long)pt);
	return t_finish();
}
