// SPDX-License-Identifier: MIT
/*
 * diff-sighandler: large writes from a signal handler, interrupting large
 * writes to the same pipe.
 *
 * write() is async-signal-safe, so a handler may call it at any moment,
 * including while the main program is inside write() on the same pipe.
 * A library that holds a lock or a per-thread buffer across its write path
 * must cope (no deadlock, no mixed-up bytes). The main program streams
 * 16 MiB (writer 0 of a tagged stream) into pipe A; a 2 ms interval timer
 * runs a handler that writes a 70000-byte block of writer 1 into pipe A
 * and a 100000-byte block of another stream into pipe B. The handler runs
 * a number of times that depends on timing, so the transcript says only
 * that it ran, that every one of its writes was full, and that both pipes'
 * readers got exactly what was written, intact.
 *
 * Storm mode (T_STORM_US=50 in the environment): the timer fires every 50
 * us instead, the main program streams 64 MiB, the handler writes 5000
 * and 20000 bytes, and with
 * T_NO_RESTART=1 it is installed without SA_RESTART, so the main writes
 * see EINTR and partial counts as well.
 *
 * The handler writes only while its bytes in pipe A do not exceed the main
 * program's: at 50 us a handler that always wrote would move gigabytes
 * while the main program waits its turn, and the test would measure how
 * fast this machine runs handlers rather than whether the bytes survive.
 * Every signal still interrupts whatever the main program is doing.
 */
#include "helpers.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t MAIN_TOTAL = 16 * T_MIB;
static size_t H_A = 70000, H_B = 100000;
#define SEED_B 1400

static int fd_a = -1, fd_b = -1;
static unsigned char *hbuf_a, *hbuf_b;
static volatile sig_atomic_t signals, runs, short_writes, stop;
static uint64_t hpos_a, hpos_b;
static _Atomic uint64_t main_pos; /* the main program's bytes in pipe A */

static void handler(int sig)
{
	int saved = errno;

	(void)sig;
	signals++;
	if (stop || hpos_a > atomic_load_explicit(&main_pos, memory_order_relaxed)) {
		errno = saved;
		return;
	}
	runs++;
	t_tag_fill(hbuf_a, H_A, 1, hpos_a);
	/* helpers.c's write() loop, also in the API build: handlers may not call the API. */
	if ((t_write_all)(fd_a, hbuf_a, H_A) != (ssize_t)H_A)
		short_writes++;
	hpos_a += H_A;
	t_fill(hbuf_b, H_B, SEED_B, hpos_b);
	if ((t_write_all)(fd_b, hbuf_b, H_B) != (ssize_t)H_B)
		short_writes++;
	hpos_b += H_B;
	errno = saved;
}

struct demux_report {
	struct t_demux d;
	int done;
};

int main(void)
{
	int a[2], b[2];

	t_init("diff-sighandler");
	hbuf_a = (unsigned char *)t_map(H_A + T_PAGE) + 1;
	hbuf_b = (unsigned char *)t_map(H_B + T_PAGE) + 2;
	unsigned char *mbuf = (unsigned char *)t_map(T_MIB + T_PAGE) + 3;
	struct demux_report *rep = t_shared(sizeof(*rep));

	t_pipe(a, 0);
	t_pipe(b, 0);
	pid_t ra = t_fork();

	if (!ra) {
		t_close_all_but(&a[0], 1);
		t_demux_init(&rep->d, 2);
		static unsigned char buf[65536];

		for (;;) {
			ssize_t r = read(a[0], buf, sizeof(buf));

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			t_demux_feed(&rep->d, buf, (size_t)r);
		}
		rep->done = 1;
		_exit(0);
	}
	struct t_reader rb;

	t_reader_start(&rb, b[0], 65536, SEED_B, 0, 0);
	t_close(a[0]);
	t_close(b[0]);
	fd_a = a[1];
	fd_b = b[1];

	const char *storm = getenv("T_STORM_US");
	long us = storm ? atol(storm) : 2000;

	if (storm) {
		H_A = 5000;
		H_B = 20000;
		MAIN_TOTAL = 64 * T_MIB;
	}
	t_sigaction(SIGALRM, handler, !getenv("T_NO_RESTART"));
	struct itimerval it = { { 0, us }, { 0, us } };

	if (setitimer(ITIMER_REAL, &it, NULL))
		t_die("setitimer");
	uint64_t pos = 0, partial = 0;

	while (pos < MAIN_TOTAL) {
		size_t n = 262147;

		if (n > MAIN_TOTAL - pos)
			n = (size_t)(MAIN_TOTAL - pos);
		t_tag_fill(mbuf, n, 0, pos);
		ssize_t r = write(fd_a, mbuf, n);

		t_scribble(mbuf, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			t_die("main write");
		if ((size_t)r < n)
			partial++;
		pos += (uint64_t)r;
		atomic_store_explicit(&main_pos, pos, memory_order_relaxed);
	}
	stop = 1;
	struct itimerval off = { { 0, 0 }, { 0, 0 } };

	setitimer(ITIMER_REAL, &off, NULL);
	t_close(fd_a);
	t_close(fd_b);
	int st = t_wait(ra);
	int n = runs;

	t_log("handler ran: %s; its writes all full: %s", n > 0 ? "yes" : "no",
	      short_writes ? "NO" : "yes");
	t_check(n > 0 && !short_writes, "handler runs=%d short=%d", n, (int)short_writes);
	fprintf(stderr,
		"diff-sighandler: %d signals, the handler wrote in %d of them, main's writes cut "
		"%llu times\n",
		(int)signals, n, (unsigned long long)partial);
	bool ok0 = rep->done && rep->d.pos[0] == MAIN_TOTAL &&
		   rep->d.fnv[0] == t_tag_fnv(0, MAIN_TOTAL);
	bool ok1 = rep->done && rep->d.pos[1] == hpos_a && rep->d.fnv[1] == t_tag_fnv(1, hpos_a);

	t_log("pipe A (reader %s): main's bytes=%llu fnv=%016llx %s; handler's bytes == runs x "
	      "%zu: %s, stream %s; bad=%llu foreign=%llu",
	      t_status(st), (unsigned long long)rep->d.pos[0], (unsigned long long)rep->d.fnv[0],
	      ok0 ? "ok" : "BAD", H_A, rep->d.pos[1] == (uint64_t)n * H_A ? "yes" : "NO",
	      ok1 ? "ok" : "BAD", (unsigned long long)rep->d.bad,
	      (unsigned long long)rep->d.foreign);
	t_check(ok0 && ok1 && !rep->d.bad && !rep->d.foreign, "pipe A damaged");

	/* Pipe B: the handler's count varies, so print the verdict, not the count. */
	int stb = t_wait(rb.pid);
	bool okb = WIFEXITED(stb) && rb.res->done && !rb.res->err && rb.res->bytes == hpos_b &&
		   rb.res->first_bad == UINT64_MAX;

	t_log("pipe B: reader got exactly the handler's runs x %zu bytes, intact: %s", H_B,
	      okb ? "yes" : "NO");
	t_check(okb, "pipe B: read %llu, wrote %llu, first bad %llu",
		(unsigned long long)rb.res->bytes, (unsigned long long)hpos_b,
		(unsigned long long)rb.res->first_bad);
	(void)partial;
	return t_finish();
}
