// SPDX-License-Identifier: MIT
/*
 * diff-epipe: writes to a pipe without readers, SIGPIPE and EPIPE.
 *
 * With the read end closed, a write of any size (10 B, 1 MiB, a writev)
 * raises exactly one SIGPIPE and fails with EPIPE; with SIGPIPE at its
 * default the process dies of it; a write of 0 bytes returns 0 and raises
 * nothing. With SIGPIPE blocked it stays pending.
 *
 * When the last reader goes away while a blocking write is in progress,
 * what the kernel does (Linux 6.x, transcribed from a plain pipe): if the
 * write had already put bytes into the pipe, it returns that partial count
 * AND raises SIGPIPE once (the signal is sent whenever the writer finds no
 * readers, even when it returns a count); the next write then fails with
 * EPIPE and raises SIGPIPE once more. If nothing had been written yet, it
 * fails with EPIPE and one SIGPIPE. The count of a partial write depends
 * on how far the writer got before the reader closed, so the transcript
 * prints "partial>0" and checks bounds: at least what the reader consumed,
 * at most that plus the pipe's capacity. One case waits until the pipe is
 * full before the reader closes, which makes the count exact (65536).
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG (4 * T_MIB)

static unsigned char *src;

enum disp { D_DEFAULT, D_IGNORE, D_HANDLER, D_HANDLER_RESTART, D_BLOCKED };
static const char *const disp_name[] = { "default", "ignored", "handler", "handler+SA_RESTART",
					 "blocked" };

static void set_disp(enum disp d)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigprocmask(d == D_BLOCKED ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
	if (d == D_DEFAULT || d == D_BLOCKED)
		t_sigaction(SIGPIPE, SIG_DFL, false);
	else if (d == D_IGNORE)
		t_sigaction(SIGPIPE, SIG_IGN, false);
	else
		t_sigaction(SIGPIPE, t_sig_counter, d == D_HANDLER_RESTART);
	t_sig_count[SIGPIPE] = 0;
}

/* SIGPIPEs received: handler deliveries, or the pending one when blocked (consumed). */
static int sigpipes(enum disp d)
{
	if (d == D_BLOCKED) {
		sigset_t set;
		int n = 0;

		sigpending(&set);
		if (sigismember(&set, SIGPIPE)) {
			sigset_t one;
			siginfo_t si;
			struct timespec zero = { 0, 0 };

			sigemptyset(&one);
			sigaddset(&one, SIGPIPE);
			while (sigtimedwait(&one, &si, &zero) == SIGPIPE)
				n++;
		}
		return n;
	}
	int n = t_sig_count[SIGPIPE];

	t_sig_count[SIGPIPE] = 0;
	return n;
}

struct outcome {
	ssize_t r;
	int err;
	int sigs;
	int done;
};

enum op { OP_W0, OP_W10, OP_W1M, OP_WV1M };
static const char *const op_name[] = { "write 0", "write 10", "write 1MiB", "writev 1MiB" };

static ssize_t do_op(int fd, enum op op)
{
	struct iovec iov[3] = { { src, 1000 }, { src + 5000, 0 }, { src + 8000, T_MIB - 1000 } };

	switch (op) {
	case OP_W0:
		return write(fd, src, 0);
	case OP_W10:
		return write(fd, src, 10);
	case OP_W1M:
		return write(fd, src, T_MIB);
	case OP_WV1M:
		return writev(fd, iov, 3);
	}
	return -1;
}

/* The read end is closed before the write. Runs in a child (SIGPIPE may kill it). */
static void closed_reader(enum disp d, enum op op)
{
	struct outcome *o = t_shared(sizeof(*o));
	pid_t pid = t_fork();

	if (!pid) {
		int p[2];

		set_disp(d);
		t_pipe(p, 0);
		t_close(p[0]);
		errno = 0;
		o->r = do_op(p[1], op);
		o->err = errno;
		o->sigs = sigpipes(d);
		/* A second failing write: one more signal, not a sticky state. */
		if (op != OP_W0) {
			do_op(p[1], op);
			o->sigs += 100 * sigpipes(d);
		}
		o->done = 1;
		exit(0);
	}
	int st = t_wait(pid);

	if (o->done)
		t_log("no reader, SIGPIPE %s: %s -> %s, SIGPIPE x%d then x%d, child %s",
		      disp_name[d], op_name[op], t_res(o->r, o->err), o->sigs % 100, o->sigs / 100,
		      t_status(st));
	else
		t_log("no reader, SIGPIPE %s: %s -> child %s", disp_name[d], op_name[op],
		      t_status(st));
	munmap(o, sizeof(*o));
}

/*
 * A reader that consumes @consume bytes (after waiting until the pipe holds
 * @wait_for bytes, if not 0) and exits, closing the last read end.
 */
static pid_t partial_reader(int rfd, size_t consume, int wait_for)
{
	pid_t pid = t_fork();

	if (pid)
		return pid;
	t_close_all_but(&rfd, 1);
	while (wait_for && t_fionread(rfd) < wait_for)
		t_usleep(1000);
	static unsigned char buf[65536];
	size_t got = 0;

	while (got < consume) {
		size_t n = consume - got < sizeof(buf) ? consume - got : sizeof(buf);
		ssize_t r = read(rfd, buf, n);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	_exit(got == consume ? 0 : 1);
}

/*
 * The reader goes away during a blocking 4 MiB write. @consume: bytes it
 * reads first; @prefill: the pipe is filled before the write (so nothing
 * of it can be written); @wait_full: the reader waits for a full pipe.
 */
static void vanishing_reader(enum disp d, size_t consume, bool prefill, bool wait_full)
{
	struct outcome *o = t_shared(2 * sizeof(*o));
	pid_t pid = t_fork();

	if (!pid) {
		int p[2];

		set_disp(d);
		t_pipe(p, 0);
		if (prefill) {
			t_set_nonblock(p[1], true);
			if (write(p[1], src, 65536) != 65536)
				t_die("prefill");
			t_set_nonblock(p[1], false);
		}
		pid_t rd = partial_reader(p[0], consume, wait_full ? 65536 : 0);

		t_close(p[0]);
		errno = 0;
		o[0].r = write(p[1], src, BIG);
		o[0].err = errno;
		o[0].sigs = sigpipes(d);
		errno = 0;
		o[1].r = write(p[1], src, 10);
		o[1].err = errno;
		o[1].sigs = sigpipes(d);
		o[0].done = WEXITSTATUS(t_wait(rd)) == 0 ? 1 : 2;
		exit(0);
	}
	int st = t_wait(pid);
	char what[128];

	snprintf(what, sizeof(what), "reader reads %zu%s%s and closes, SIGPIPE %s", consume,
		 prefill ? " of a full pipe" : "", wait_full ? " once the pipe is full" : "",
		 disp_name[d]);
	if (!o[0].done) {
		t_log("%s: child %s", what, t_status(st));
		munmap(o, 2 * sizeof(*o));
		return;
	}
	const char *res;
	char exact[32];

	if (o[0].r < 0) {
		res = t_res(o[0].r, o[0].err);
	} else if (wait_full && !consume) {
		snprintf(exact, sizeof(exact), "%zd", o[0].r);
		res = exact;
	} else {
		res = o[0].r == BIG ? "full" : o[0].r > 0 ? "partial>0" : "0";
		t_check(o[0].r >= (ssize_t)consume && o[0].r <= (ssize_t)(consume + 65536 + 8192),
			"%s: partial count %zd out of bounds", what, o[0].r);
	}
	t_log("%s: write 4MiB -> %s SIGPIPE x%d; next write 10 -> %s SIGPIPE x%d; reader %s", what,
	      res, o[0].sigs, t_res(o[1].r, o[1].err), o[1].sigs, o[0].done == 1 ? "ok" : "short");
	munmap(o, 2 * sizeof(*o));
}

/* More than one reader: the pipe breaks when the last one goes. */
static void two_readers(void)
{
	int p[2], e;
	ssize_t r;

	t_sigaction(SIGPIPE, t_sig_counter, false);
	t_sig_count[SIGPIPE] = 0;
	t_pipe(p, O_NONBLOCK);
	int r2 = dup(p[0]);

	t_close(p[0]);
	r = write(p[1], src, T_MIB);
	e = errno;
	t_log("two readers, one closed: write 1MiB -> %s SIGPIPE x%d", t_res(r, e),
	      (int)t_sig_count[SIGPIPE]);
	t_close(r2);
	r = write(p[1], src, T_MIB);
	e = errno;
	t_log("both closed (data still in the pipe): write 1MiB -> %s SIGPIPE x%d", t_res(r, e),
	      (int)t_sig_count[SIGPIPE]);
	t_close(p[1]);
	t_sigaction(SIGPIPE, SIG_DFL, false);
}

int main(void)
{
	static const enum disp all[] = { D_DEFAULT, D_IGNORE, D_HANDLER, D_HANDLER_RESTART,
					 D_BLOCKED };

	t_init("diff-epipe");
	src = (unsigned char *)t_map(BIG + T_PAGE) + 1;
	t_fill(src, BIG, 7, 0);
	for (size_t di = 0; di < T_ARRAY_SIZE(all); di++)
		for (int op = OP_W0; op <= OP_WV1M; op++)
			closed_reader(all[di], (enum op)op);
	for (size_t di = 0; di < T_ARRAY_SIZE(all); di++) {
		vanishing_reader(all[di], 100000, false, false);
		vanishing_reader(all[di], 0, true, false);
		vanishing_reader(all[di], 0, false, true);
		vanishing_reader(all[di], 65536 + 3, false, true);
	}
	two_readers();
	return t_finish();
}
