// SPDX-License-Identifier: MIT
/*
 * diff-pipesize: F_SETPIPE_SZ between and during large writes.
 *
 * The writer streams 64 KiB and larger writes through one pipe and changes
 * its size 64K -> 1M -> 16K -> 1M, each time after the reader has emptied
 * the pipe and stopped reading (it acknowledges every phase and waits to
 * be told to go on), so the results are exact: the fcntl return values,
 * F_GETPIPE_SZ, and a non-blocking probe write that shows the new capacity
 * (a library that sized its buffers for the old capacity must follow).
 * Shrinking below what the pipe holds fails with EBUSY; growing with data
 * inside works. Then a second process flips the size between 64K and 1M
 * while the writer is busy; those results depend on timing, so only "each
 * was 0 or EBUSY" and the data are checked. The reader checks the whole
 * stream.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SEED 700

static unsigned char *src;
static uint64_t pos;
static int data_w, ctl_w, ack_r;

/*
 * The reader takes orders on @ctl: a position means "read up to there,
 * acknowledge on @ack, then stop reading until the next order"; UINT64_MAX
 * means "read whatever comes" (until the next order). While it is stopped
 * the pipe is the writer's alone, so the writer's probes are exact. Once
 * @ctl is closed it reads to EOF.
 */
static pid_t phase_reader(int rfd, int ctl, int ack, struct t_read_result *res)
{
	pid_t pid = t_fork();

	if (pid)
		return pid;
	int keep[3] = { rfd, ctl, ack };

	t_close_all_but(keep, 3);
	static unsigned char buf[65536 + 13];
	uint64_t target = 0;
	bool ctl_open = true, want_ack = false;

	res->fnv = T_FNV_INIT;
	res->first_bad = UINT64_MAX;
	for (;;) {
		if (ctl_open && res->bytes >= target) {
			char c = 'a';

			if (want_ack && write(ack, &c, 1) != 1)
				_exit(1);
			want_ack = false;
			if (t_read_full(ctl, &target, sizeof(target)) != sizeof(target))
				ctl_open = false, target = UINT64_MAX;
			else
				want_ack = target != UINT64_MAX;
			continue;
		}
		struct pollfd pf[2] = { { rfd, POLLIN, 0 }, { ctl, POLLIN, 0 } };

		if (poll(pf, ctl_open ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (ctl_open && (pf[1].revents & (POLLIN | POLLHUP))) {
			if (t_read_full(ctl, &target, sizeof(target)) != sizeof(target))
				ctl_open = false, target = UINT64_MAX;
			else
				want_ack = target != UINT64_MAX;
			continue;
		}
		if (!(pf[0].revents & (POLLIN | POLLHUP)))
			continue;
		size_t n = sizeof(buf);

		if (target - res->bytes < n)
			n = (size_t)(target - res->bytes);
		ssize_t r = read(rfd, buf, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			res->err = errno;
			_exit(1);
		}
		if (r == 0)
			break;
		t_read_result_add(res, buf, (size_t)r, SEED, 0);
	}
	res->done = 1;
	_exit(0);
}

static ssize_t put(size_t len, bool nonblock)
{
	if (nonblock)
		t_set_nonblock(data_w, true);
	t_fill(src, len, SEED, pos);
	ssize_t r = write(data_w, src, len);
	int e = errno;

	t_scribble(src, len);
	if (nonblock)
		t_set_nonblock(data_w, false);
	if (r > 0)
		pos += (uint64_t)r;
	errno = e;
	return r;
}

/* Waits until the reader has read everything written so far and stopped: the pipe is empty. */
static void phase_end(void)
{
	char c;

	if (write(ctl_w, &pos, sizeof(pos)) != sizeof(pos) || t_read_full(ack_r, &c, 1) != 1)
		t_die("phase handshake");
}

/* Lets the reader read freely again. */
static void go(void)
{
	uint64_t any = UINT64_MAX;

	if (write(ctl_w, &any, sizeof(any)) != sizeof(any))
		t_die("go");
}

static void setsz(int size)
{
	int r = t_pipe_size_set(data_w, size);

	t_log("F_SETPIPE_SZ %d -> %s; F_GETPIPE_SZ %d", size, r < 0 ? t_res(-1, -r) : t_res(r, 0),
	      fcntl(data_w, F_GETPIPE_SZ));
}

static void stream(const char *what, int n64k, int nbig, size_t big)
{
	bool ok = true;

	for (int i = 0; i < n64k; i++)
		ok &= put(65536, false) == 65536;
	for (int i = 0; i < nbig; i++)
		ok &= put(big, false) == (ssize_t)big;
	t_log("%s: %d x 64KiB + %d x %zu blocking writes: %s", what, n64k, nbig, big,
	      ok ? "all full" : "SHORT");
	t_check(ok, "%s: a blocking write came back short", what);
}

static void probe(size_t len)
{
	ssize_t r = put(len, true);

	t_log("  non-blocking probe write %zu -> %s", len, t_res(r, errno));
}

int main(void)
{
	struct t_read_result *res;
	int p[2], ctl[2], ack[2];

	t_init("diff-pipesize");
	src = (unsigned char *)t_map(5 * T_MIB + T_PAGE) + 3;
	res = t_shared(sizeof(*res));
	t_pipe(p, 0);
	t_pipe(ctl, 0);
	t_pipe(ack, 0);
	pid_t rp = phase_reader(p[0], ctl[0], ack[1], res);

	t_close(p[0]);
	t_close(ctl[0]);
	t_close(ack[1]);
	data_w = p[1];
	ctl_w = ctl[1];
	ack_r = ack[0];

	t_log("initial F_GETPIPE_SZ %d", fcntl(data_w, F_GETPIPE_SZ));
	probe(T_MIB);
	go();
	stream("64K pipe", 16, 2, T_MIB + 3);
	phase_end();

	setsz(1048576);
	probe(2 * T_MIB);
	go();
	stream("1M pipe", 16, 4, T_MIB + 3);
	phase_end();

	setsz(16384);
	probe(T_MIB);
	go();
	stream("16K pipe", 16, 2, 100000);
	phase_end();

	probe(40000);
	setsz(4096);
	setsz(1048576);
	probe(2 * T_MIB);
	go();
	stream("1M pipe again", 16, 1, 5 * T_MIB);
	phase_end();
	t_close(ctl_w);

	/* A second process flips the size while this one writes. */
	int *flips = t_shared(4 * sizeof(int));
	pid_t flipper = t_fork();

	if (!flipper) {
		int sizes[2] = { 65536, 1048576 };

		for (int i = 0; i < 2000 && !flips[3]; i++) {
			int r = t_pipe_size_set(data_w, sizes[i % 2]);

			flips[r >= 0 ? 0 : r == -EBUSY ? 1 : 2]++;
			t_usleep(100);
		}
		_exit(0);
	}
	bool ok = true;

	for (int i = 0; i < 16; i++)
		ok &= put(i % 2 ? 65536 : T_MIB + 7, false) > 0;
	flips[3] = 1;
	t_wait(flipper);
	t_log("concurrent resizes: results in {ok, EBUSY}: %s; writes: %s", flips[2] ? "NO" : "yes",
	      ok ? "ok" : "FAILED");
	t_check(!flips[2] && ok, "concurrent resizes: %d unexpected fcntl errors", flips[2]);
	t_close(data_w);
	t_close(ack_r);

	int st = t_wait(rp);

	t_log("reader %s: read=%llu fnv=%016llx %s", t_status(st), (unsigned long long)res->bytes,
	      (unsigned long long)res->fnv,
	      res->done && res->bytes == pos && res->first_bad == UINT64_MAX ? "ok" : "BAD");
	t_check(res->done && res->bytes == pos && res->first_bad == UINT64_MAX,
		"reader got %llu bytes (first bad %llu), writer wrote %llu",
		(unsigned long long)res->bytes, (unsigned long long)res->first_bad,
		(unsigned long long)pos);
	return t_finish();
}
