// SPDX-License-Identifier: MIT
/*
 * uring-contract SCENARIO: the write-behind contract of PPIPE_MODE=uring
 * (docs/design.md, "Write-behind"), one scenario per run, under LD_PRELOAD with
 * PPIPE_MODE=uring (test-uring.py runs them all).
 *
 * Most scenarios stage bytes on purpose: the pipe (64 KiB) is filled,
 * then a 64 KiB block A is written, which the pipe cannot take: with
 * write-behind the call returns at once with A staged (the transcript
 * checks that the pipe still holds 64 KiB, so A really is behind it).
 * Then comes the event of the scenario, and after it a block B through
 * the path the scenario names. A reader that starts late reads the pipe
 * to EOF and checks one continuous pattern stream: A reaching the pipe
 * after B, or not at all, is a wrong byte or a short stream.
 *
 *   small      B is a small write() (below PPIPE_MIN_WRITE)
 *   otherfd    B is a small write() through a dup of the write end
 *   splice     B is splice()d in from another pipe
 *   vmsplice   B is the program's own vmsplice()
 *   tee        B is tee()d in from another pipe
 *   sendfile   B is sendfile()d in from a file (Linux 5.12 and later: skipped
 *              where sendfile() refuses a pipe)
 *   splice-late, vmsplice-late, tee-late
 *              the same, with a reader that starts only after 1.5 s: longer
 *              than the bounded waits of F_SETFL or fork, and the call still
 *              waits until A is in
 *   splice-nonblock
 *              B is splice()d in with SPLICE_F_NONBLOCK: EAGAIN while A is
 *              staged (to the program the pipe is still full of A), then, as
 *              an event loop retries on POLLOUT, B once A is in
 *   tee-nonblock
 *              the same by tee() from a pipe whose read end is O_NONBLOCK
 *              (the kernel makes that tee non-blocking too)
 *   small-nonblock, sendfile-nonblock
 *              the same by a small write() or a sendfile() once the write
 *              end was made O_NONBLOCK behind libppipe's back (a raw fcntl
 *              system call)
 *   vmsplice-nonblock
 *              the same by vmsplice() with SPLICE_F_NONBLOCK
 *   small-eintr
 *              B is a small write() that a SIGALRM handler without
 *              SA_RESTART interrupts while A is staged: -1 EINTR, as from a
 *              plain pipe still full of A; then B again, after A
 *   small-restart
 *              the same with SA_RESTART: the write goes on and returns B's
 *              count once A is in
 *   zero       write(), writev(), vmsplice(), splice() and tee() of nothing,
 *              which a plain pipe answers with 0 at once, full or not: they
 *              return 0 without waiting for A (the driver checks that the
 *              process never waited), with a reader that starts late
 *   stdio      B goes through a stdio stream on a dup of the write end: its
 *              first half by fwrite() and fflush(), its second by fwrite()
 *              and fclose() (glibc writes both from inside libc)
 *   freopen    B is fwrite() to a stdio stream on a dup of the write end
 *              before A (it waits in the stream's buffer); after A,
 *              freopen() points the stream at /dev/null: glibc writes B
 *              and closes the dup from inside libc
 *   setfl      F_SETFL (O_NONBLOCK on, then off) before B
 *   setpipesz  F_SETPIPE_SZ (1 MiB) before B
 *   close      the write end is closed after A: the reader gets A, then EOF
 *   dup2       /dev/null is dup2()ed over the write end after A: A, then EOF
 *   fork       a fork child writes B
 *   exec       an exec'd program (this one, as "child") writes B
 *   spawn      a posix_spawn()ed program writes B
 *   exit       the writer (a child) calls exit() after A: A, then EOF
 *   _exit      the same with _exit()
 *   flush      ppipe_flush() after A: once it returns, A is in the pipe
 *   epipe      the reader leaves without reading: A is dropped, the next
 *              write fails with EPIPE and one SIGPIPE, the one after it too
 *              (the kernel's own answer by then)
 *   epipe-close the same, reported by close(): -1 EPIPE and one SIGPIPE
 *   epipe-stdio the same, met by a stdio stream: its fflush() reports the
 *              staged bytes' EPIPE (one SIGPIPE), then fails with its own
 *              write's (a second), as two plain writes would
 *   reqresp    a request bigger than the pipe, then a blocking read of the
 *              reply from another pipe: the staged tail must reach the
 *              server without the writer calling libppipe again
 *   threads    thread 1 writes large blocks, each followed (happens-before,
 *              through a mutex) by a block of thread 2: order in the pipe
 *   probe      A arrives (write-behind is working here, or not: the driver
 *              reads the statistics)
 *   refused    io_uring_setup() refused by a seccomp filter (EPERM) before
 *              the first write: the vmsplice engine writes A, and it arrives
 */
#include "helpers.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define SEED 4711
#define CAP 65536
#define BLOCK 65536
#define SMALL 100
/*
 * The reader starts late enough that what the writer does meanwhile (a
 * spawn, on a loaded machine) stays behind a full pipe: 50 ms proved too
 * short beside a build.
 */
#define READER_DELAY_US 200000
/* The late reader: past write-behind's bound (1 s) on waits that may give up. */
#define LATE_READER_US 1500000

static long reader_delay_us = READER_DELAY_US;

extern char **environ;

static unsigned char *buf;
static const char *self; /* this program, for exec and spawn */
static uint64_t pos; /* stream bytes written so far */

/* The next @n bytes of the stream into @fd with write(); returns what write() did. */
static ssize_t put(int fd, size_t n)
{
	ssize_t r;

	t_fill(buf, n, SEED, pos);
	r = t_write_all(fd, buf, n);
	if (r > 0)
		pos += (uint64_t)r;
	return r;
}

struct scene {
	int w, r; /* the pipe */
	struct t_reader rd;
};

static bool expect_staged = true;

/* A 64 KiB pipe, a late reader, and the pipe filled. */
static void fill_pipe(struct scene *s)
{
	int p[2];

	t_pipe(p, 0);
	s->w = p[1];
	s->r = p[0];
	t_pipe_size_set(s->w, CAP);
	t_reader_start(&s->rd, s->r, 65536, SEED, 0, reader_delay_us);
	t_check(put(s->w, CAP) == CAP, "fill");
}

/* Block A staged behind the filled pipe. */
static void put_a(struct scene *s)
{
	t_check(put(s->w, BLOCK) == BLOCK, "block A");
	if (expect_staged)
		t_check(t_fionread(s->r) == CAP, "A was not staged: the pipe holds %d",
			t_fionread(s->r));
}

static void stage_a(struct scene *s)
{
	fill_pipe(s);
	put_a(s);
}

static void finish(struct scene *s, const char *what)
{
	t_close(s->r);
	t_reader_finish(&s->rd, what, pos);
}

static void sc_small(struct scene *s)
{
	t_check(put(s->w, SMALL) == SMALL, "small B");
	t_close(s->w);
	finish(s, "A, then the small write B");
}

static void sc_otherfd(struct scene *s)
{
	int d = dup(s->w);

	t_check(put(d, SMALL) == SMALL, "B through the dup");
	t_close(d);
	t_close(s->w);
	finish(s, "A, then B through another fd of the pipe");
}

static void sc_splice(struct scene *s)
{
	int q[2];

	t_pipe(q, 0);
	t_check(put(q[1], SMALL) == SMALL, "B into the other pipe");
	t_check(splice(q[0], NULL, s->w, NULL, SMALL, 0) == SMALL, "splice B");
	t_close(q[0]);
	t_close(q[1]);
	t_close(s->w);
	finish(s, "A, then B spliced in");
}

static void sc_vmsplice(struct scene *s)
{
	static unsigned char b[SMALL];
	struct iovec v = { b, SMALL };

	t_fill(b, SMALL, SEED, pos);
	t_check(vmsplice(s->w, &v, 1, 0) == SMALL, "vmsplice B");
	pos += SMALL;
	t_close(s->w);
	finish(s, "A, then B vmspliced in");
}

static void sc_tee(struct scene *s)
{
	int q[2];

	t_pipe(q, 0);
	t_check(put(q[1], SMALL) == SMALL, "B into the other pipe");
	t_check(tee(q[0], s->w, SMALL, 0) == SMALL, "tee B");
	t_close(q[0]);
	t_close(q[1]);
	t_close(s->w);
	finish(s, "A, then B teed in");
}

static void sc_sendfile(struct scene *s)
{
	static unsigned char b[SMALL];
	FILE *f = tmpfile();
	ssize_t n;

	if (!f)
		t_die("tmpfile");
	t_fill(b, SMALL, SEED, pos);
	t_check(fwrite(b, 1, SMALL, f) == SMALL && fflush(f) == 0, "B into the file");
	n = sendfile(s->w, fileno(f), &(off_t){ 0 }, SMALL);
	if (n < 0 && errno == EINVAL)
		t_skip("sendfile() into a pipe needs Linux 5.12");
	t_check(n == SMALL, "sendfile B: %zd (%s)", n, t_errname(errno));
	pos += SMALL;
	fclose(f);
	t_close(s->w);
	finish(s, "A, then B sent from a file");
}

enum nonblocking_way { BY_SPLICE, BY_TEE, BY_VMSPLICE, BY_WRITE, BY_SENDFILE };

/* One non-blocking try of @way to put B (in @q's pipe, in buf, or in @file) into the scene's pipe. */
static ssize_t try_b(struct scene *s, enum nonblocking_way way, const int q[2], int file)
{
	struct iovec v = { buf, SMALL };

	switch (way) {
	case BY_SPLICE:
		return splice(q[0], NULL, s->w, NULL, SMALL, SPLICE_F_NONBLOCK);
	case BY_TEE:
		return tee(q[0], s->w, SMALL, 0);
	case BY_VMSPLICE:
		return vmsplice(s->w, &v, 1, SPLICE_F_NONBLOCK);
	case BY_WRITE:
		return write(s->w, buf, SMALL);
	case BY_SENDFILE:
		return sendfile(s->w, file, &(off_t){ 0 }, SMALL);
	}
	return -1;
}

/*
 * B by a non-blocking call (@way: a splice or vmsplice with
 * SPLICE_F_NONBLOCK, a tee from a non-blocking pipe, a write() or a
 * sendfile() to the write end made non-blocking by a raw system call):
 * EAGAIN while A is staged, then B once A is in, retried on POLLOUT as an
 * event loop does (the pipe may show room while A is still on its way).
 */
static void put_b_nonblocking(struct scene *s, enum nonblocking_way way)
{
	static const char *const hows[] = { "splice", "tee", "vmsplice", "write", "sendfile" };
	struct pollfd pfd = { .fd = s->w, .events = POLLOUT };
	const char *how = hows[way];
	int q[2], tries = 0;
	FILE *file = NULL;
	ssize_t n;

	t_pipe(q, way == BY_TEE ? O_NONBLOCK : 0);
	t_fill(buf, SMALL, SEED, pos);
	t_check(put(q[1], SMALL) == SMALL, "B into the other pipe");
	if (way == BY_SENDFILE &&
	    (!(file = tmpfile()) || fwrite(buf, 1, SMALL, file) != SMALL || fflush(file)))
		t_die("B into a file");
	if (way == BY_WRITE || way == BY_SENDFILE)
		t_check(syscall(SYS_fcntl, s->w, F_SETFL, O_NONBLOCK) == 0, "raw F_SETFL");
	for (;; tries++) {
		n = try_b(s, way, q, file ? fileno(file) : -1);
		if (n != -1 || errno != EAGAIN)
			break;
		t_check(poll(&pfd, 1, -1) == 1, "poll for POLLOUT");
		usleep(1000);
	}
	if (n < 0 && errno == EINVAL && way == BY_SENDFILE)
		t_skip("sendfile() into a pipe needs Linux 5.12");
	t_check(tries > 0, "non-blocking %s of B with A staged: %zd, not EAGAIN", how, n);
	t_check(n == SMALL, "non-blocking %s of B once A was in: %zd (%s)", how, n,
		t_errname(errno));
	t_log("%s of B: EAGAIN %d times, then %zd", how, tries, n);
	if (file)
		fclose(file);
	t_close(q[0]);
	t_close(q[1]);
	t_close(s->w);
	finish(s, "A, then B put in without blocking");
}

static void sc_splice_nonblock(struct scene *s)
{
	put_b_nonblocking(s, BY_SPLICE);
}

static void sc_tee_nonblock(struct scene *s)
{
	put_b_nonblocking(s, BY_TEE);
}

static void sc_small_nonblock(struct scene *s)
{
	put_b_nonblocking(s, BY_WRITE);
}

static void sc_vmsplice_nonblock(struct scene *s)
{
	put_b_nonblocking(s, BY_VMSPLICE);
}

static void sc_sendfile_nonblock(struct scene *s)
{
	put_b_nonblocking(s, BY_SENDFILE);
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/* B by a small write() that SIGALRM comes into, 200 ms in: A waits for the late reader. */
static void small_under_alarm(struct scene *s, bool restart)
{
	struct itimerval once = { .it_value = { 0, 200000 } };
	ssize_t r;

	t_sigaction(SIGALRM, on_alarm, restart);
	if (setitimer(ITIMER_REAL, &once, NULL))
		t_die("setitimer");
	t_fill(buf, SMALL, SEED, pos);
	r = write(s->w, buf, SMALL);
	if (restart) {
		t_check(r == SMALL, "B, restarted: %s", t_res(r, errno));
		if (r == SMALL)
			pos += SMALL;
	} else {
		t_check(r < 0 && errno == EINTR, "B, interrupted: %s, want EINTR", t_res(r, errno));
		t_check(put(s->w, SMALL) == SMALL, "B again");
	}
	t_check(alarms == 1, "the handler ran %d times, want once", (int)alarms);
	t_close(s->w);
	finish(s, "A, then the small write B");
}

static void sc_small_eintr(struct scene *s)
{
	small_under_alarm(s, false);
}

static void sc_small_restart(struct scene *s)
{
	small_under_alarm(s, true);
}

static void sc_zero(struct scene *s)
{
	static unsigned char b[1];
	struct iovec none[2] = { { b, 0 }, { b, 0 } };
	int q[2];

	t_pipe(q, 0);
	t_check(write(q[1], b, 1) == 1, "a byte in the other pipe");
	t_check(write(s->w, b, 0) == 0, "write() of nothing: %s", t_errname(errno));
	t_check(writev(s->w, none, 2) == 0, "writev() of nothing: %s", t_errname(errno));
	t_check(vmsplice(s->w, none, 2, 0) == 0, "vmsplice() of nothing: %s", t_errname(errno));
	t_check(splice(q[0], NULL, s->w, NULL, 0, 0) == 0, "splice() of nothing: %s",
		t_errname(errno));
	t_check(tee(q[0], s->w, 0, 0) == 0, "tee() of nothing: %s", t_errname(errno));
	t_close(q[0]);
	t_close(q[1]);
	t_close(s->w);
	finish(s, "A, then nothing");
}

static void sc_stdio(struct scene *s)
{
	static unsigned char b[SMALL];
	FILE *f = fdopen(dup(s->w), "w");

	if (!f)
		t_die("fdopen");
	t_fill(b, SMALL, SEED, pos);
	t_check(fwrite(b, 1, SMALL / 2, f) == SMALL / 2 && fflush(f) == 0,
		"B's first half by fwrite and fflush");
	t_check(fwrite(b + SMALL / 2, 1, SMALL - SMALL / 2, f) == SMALL - SMALL / 2 && !fclose(f),
		"B's second half by fwrite and fclose");
	pos += SMALL;
	t_close(s->w);
	finish(s, "A, then B through a stdio stream");
}

/* B waits in the stream's buffer while A is written and staged; freopen() writes it. */
static void sc_freopen(struct scene *s)
{
	static unsigned char b[SMALL];
	FILE *f;

	fill_pipe(s);
	if (!(f = fdopen(dup(s->w), "w")))
		t_die("fdopen");
	t_fill(b, SMALL, SEED, pos + BLOCK);
	t_check(fwrite(b, 1, SMALL, f) == SMALL, "B by fwrite, into the stream's buffer");
	put_a(s);
	f = freopen("/dev/null", "w", f);
	t_check(f != NULL, "freopen");
	pos += SMALL;
	if (f)
		fclose(f);
	t_close(s->w);
	finish(s, "A, then B written by freopen");
}

static void sc_setfl(struct scene *s)
{
	t_set_nonblock(s->w, true);
	t_set_nonblock(s->w, false);
	t_check(put(s->w, SMALL) == SMALL, "small B");
	t_close(s->w);
	finish(s, "A, then F_SETFL, then B");
}

static void sc_setpipesz(struct scene *s)
{
	t_check(fcntl(s->w, F_SETPIPE_SZ, 1 << 20) >= 0, "F_SETPIPE_SZ");
	t_check(put(s->w, SMALL) == SMALL, "small B");
	t_close(s->w);
	finish(s, "A, then F_SETPIPE_SZ, then B");
}

static void sc_close(struct scene *s)
{
	t_check(close(s->w) == 0, "close");
	finish(s, "A, then EOF after close");
}

static void sc_dup2(struct scene *s)
{
	int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);

	t_check(nul >= 0 && dup2(nul, s->w) == s->w, "dup2 over the write end");
	t_close(nul);
	t_close(s->w);
	finish(s, "A, then EOF after dup2 over the write end");
}

static void sc_fork(struct scene *s)
{
	pid_t c = t_fork();

	if (!c) {
		_exit(put(s->w, SMALL) == SMALL ? 0 : 1);
	}
	t_check(WIFEXITED(t_wait(c)), "fork child");
	pos += SMALL;
	t_close(s->w);
	finish(s, "A, then B from a fork child");
}

/* "child FD POS": writes the SMALL bytes of the stream at POS to FD. */
static int child_main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	pos = strtoull(argv[3], NULL, 10);
	return put(atoi(argv[2]), SMALL) == SMALL ? 0 : 1;
}

static void child_args(char *argv[5], char fdbuf[16], char posbuf[24], const char *prog, int fd)
{
	snprintf(fdbuf, 16, "%d", fd);
	snprintf(posbuf, 24, "%llu", (unsigned long long)pos);
	argv[0] = (char *)prog;
	argv[1] = (char *)"child";
	argv[2] = fdbuf;
	argv[3] = posbuf;
	argv[4] = NULL;
}

static void sc_exec(struct scene *s)
{
	char fdbuf[16], posbuf[24], *argv[5];
	pid_t c;

	child_args(argv, fdbuf, posbuf, self, s->w);
	c = t_fork();
	if (!c) {
		execv("/proc/self/exe", argv);
		_exit(3);
	}
	t_check(WIFEXITED(t_wait(c)), "exec'd child");
	pos += SMALL;
	t_close(s->w);
	finish(s, "A, then B from an exec'd program");
}

static void sc_spawn(struct scene *s)
{
	char fdbuf[16], posbuf[24], *argv[5];
	pid_t c;

	child_args(argv, fdbuf, posbuf, self, s->w);
	t_check(posix_spawn(&c, "/proc/self/exe", NULL, NULL, argv, environ) == 0, "spawn");
	t_check(WIFEXITED(t_wait(c)), "spawned child");
	pos += SMALL;
	t_close(s->w);
	finish(s, "A, then B from a spawned program");
}

static void writer_exits(bool raw)
{
	int p[2];
	struct t_reader rd;
	pid_t c;

	t_pipe(p, 0);
	t_pipe_size_set(p[1], CAP);
	t_reader_start(&rd, p[0], 65536, SEED, 0, READER_DELAY_US);
	c = t_fork();
	if (!c) {
		bool ok = put(p[1], CAP) == CAP && put(p[1], BLOCK) == BLOCK;

		if (raw)
			_exit(ok ? 0 : 1);
		exit(ok ? 0 : 1);
	}
	t_close(p[1]);
	t_close(p[0]);
	t_check(WIFEXITED(t_wait(c)), "writer");
	pos = CAP + BLOCK;
	t_reader_finish(&rd, raw ? "A, then EOF after _exit" : "A, then EOF after exit", pos);
}

/*
 * ppipe_flush(): a reader takes the fill, then pauses; once ppipe_flush()
 * returns, the pipe holds all of A.
 */
static void sc_flush(struct scene *unused)
{
	(void)unused;
	int p[2], ctl[2];
	pid_t c;

	t_pipe(p, 0);
	t_pipe(ctl, 0);
	t_pipe_size_set(p[1], CAP);
	c = t_fork();
	if (!c) {
		static unsigned char in[CAP + BLOCK / 2];
		char go;
		bool ok;

		t_close(p[1]);
		t_close(ctl[1]);
		t_usleep(READER_DELAY_US);
		ok = t_read_full(p[0], in, CAP) == CAP;
		ok = ok && read(ctl[0], &go, 1) == 1;
		ok = ok && t_read_full(p[0], in + CAP, BLOCK / 2) == BLOCK / 2;
		_exit(ok && t_verify(in, CAP + BLOCK / 2, SEED, 0) == CAP + BLOCK / 2 ? 0 : 1);
	}
	t_close(ctl[0]);
	t_check(put(p[1], CAP) == CAP && put(p[1], BLOCK / 2) == BLOCK / 2, "fill and A");
	t_check(t_fionread(p[0]) == CAP, "A was not staged");
	int (*flush)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "ppipe_flush");

	t_check(flush && flush(p[1]) == 0, "ppipe_flush: %s", flush ? t_errname(errno) : "absent");
	t_check(t_fionread(p[0]) == BLOCK / 2, "after ppipe_flush the pipe holds %d, not just A",
		t_fionread(p[0]));
	t_check(t_write_all(ctl[1], "g", 1) == 1, "go");
	t_close(p[1]);
	t_close(p[0]);
	t_close(ctl[1]);
	t_check(t_wait(c) == 0, "the reader did not get the fill, then A");
}

/*
 * A 64 KiB pipe whose only reader (a child) leaves without reading while A
 * is staged behind the full pipe; SIGPIPE counted. Returns the write end.
 */
static int readers_gone_after_a(void)
{
	int p[2];
	pid_t c;

	t_sigaction(SIGPIPE, t_sig_counter, true);
	t_pipe(p, 0);
	t_pipe_size_set(p[1], CAP);
	c = t_fork();
	if (!c) {
		t_close(p[1]);
		t_usleep(READER_DELAY_US);
		_exit(0);
	}
	t_close(p[0]);
	t_check(put(p[1], CAP) == CAP && put(p[1], BLOCK) == BLOCK, "fill and A");
	t_wait(c);
	return p[1];
}

static void sc_epipe(struct scene *unused)
{
	(void)unused;
	ssize_t r;
	int w, e;

	w = readers_gone_after_a();
	/* A was staged and its reader left: the next write reports it, once. */
	errno = 0;
	r = write(w, buf, SMALL);
	e = errno;
	t_log("write after the reader left -> %s, SIGPIPE x%d", t_res(r, e),
	      (int)t_sig_count[SIGPIPE]);
	t_check(r == -1 && e == EPIPE && t_sig_count[SIGPIPE] == 1, "deferred EPIPE");
	errno = 0;
	r = write(w, buf, BLOCK);
	e = errno;
	t_log("the next one -> %s, SIGPIPE x%d", t_res(r, e), (int)t_sig_count[SIGPIPE]);
	t_check(r == -1 && e == EPIPE && t_sig_count[SIGPIPE] == 2, "EPIPE after it");
	t_close(w);
}

/*
 * The readers leave while A is staged; F_SETFL (which waits while the
 * staged bytes move, and dropped ones count as gone) lets the service meet
 * the error; then close() reports it: -1 EPIPE, with one SIGPIPE.
 */
static void sc_epipe_close(struct scene *unused)
{
	int w, r, e;

	(void)unused;
	w = readers_gone_after_a();
	t_set_nonblock(w, false);
	errno = 0;
	r = close(w);
	e = errno;
	t_log("close after the reader left -> %s, SIGPIPE x%d", t_res(r, e),
	      (int)t_sig_count[SIGPIPE]);
	t_check(r == -1 && e == EPIPE && t_sig_count[SIGPIPE] == 1, "deferred EPIPE at close");
}

static void sc_epipe_stdio(struct scene *unused)
{
	int w, r, e;
	FILE *f;

	(void)unused;
	w = readers_gone_after_a();
	f = fdopen(dup(w), "w");
	if (!f)
		t_die("fdopen");
	t_check(fwrite(buf, 1, SMALL, f) == SMALL, "B into the stream's buffer");
	errno = 0;
	r = fflush(f);
	e = errno;
	t_log("fflush after the reader left -> %s, SIGPIPE x%d", t_res(r, e),
	      (int)t_sig_count[SIGPIPE]);
	t_check(r == EOF && e == EPIPE && t_sig_count[SIGPIPE] == 2, "EPIPE at fflush");
	fclose(f);
	t_close(w);
}

static void sc_reqresp(struct scene *unused)
{
	(void)unused;
	int req[2], resp[2];
	pid_t c;
	char reply[8];

	t_pipe(req, 0);
	t_pipe(resp, 0);
	t_pipe_size_set(req[1], CAP);
	c = t_fork();
	if (!c) {
		static unsigned char in[4 * BLOCK];
		bool ok;

		t_close(req[1]);
		t_close(resp[0]);
		t_usleep(READER_DELAY_US); /* so that the request's tail is staged */
		ok = t_read_full(req[0], in, sizeof(in)) == (ssize_t)sizeof(in) &&
		     t_verify(in, sizeof(in), SEED, 0) == sizeof(in);
		_exit(t_write_all(resp[1], ok ? "ok" : "no", 2) == 2 ? 0 : 1);
	}
	t_close(req[0]);
	t_close(resp[1]);
	t_check(put(req[1], 4 * BLOCK) == 4 * BLOCK, "request");
	/* Block in read(): nobody but the service can move the staged tail. */
	t_check(t_read_full(resp[0], reply, 2) == 2, "reply");
	t_log("request of 256 KiB, reply: %.2s", reply);
	t_close(req[1]);
	t_close(resp[0]);
	t_check(WIFEXITED(t_wait(c)), "server");
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn, tfd;

#define ROUNDS 40

static void *second(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		pthread_mutex_lock(&mu);
		while (turn != 1)
			pthread_cond_wait(&cv, &mu);
		t_check(put(tfd, SMALL + (size_t)i * 1000) > 0, "thread 2");
		turn = 0;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

static void sc_threads(struct scene *unused)
{
	(void)unused;
	struct scene s;
	pthread_t t;

	stage_a(&s);
	tfd = s.w;
	pthread_create(&t, NULL, second, NULL);
	for (int i = 0; i < ROUNDS; i++) {
		pthread_mutex_lock(&mu);
		while (turn != 0)
			pthread_cond_wait(&cv, &mu);
		t_check(put(tfd, BLOCK + (size_t)i * 4096) > 0, "thread 1");
		turn = 1;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
	}
	pthread_join(t, NULL);
	t_close(s.w);
	finish(&s, "thread 1's blocks, each before thread 2's next");
}

static void sc_exit(struct scene *unused)
{
	(void)unused;
	writer_exits(false);
}

static void sc_raw_exit(struct scene *unused)
{
	(void)unused;
	writer_exits(true);
}

static void sc_probe(struct scene *s)
{
	t_close(s->w);
	finish(s, "A arrives");
}

static const struct {
	const char *name;
	void (*run)(struct scene *s);
	bool stages_a; /* runs on a scene with A staged (stage_a) */
	bool late; /* its reader starts after LATE_READER_US */
} scenarios[] = {
	{ "small", sc_small, true },
	{ "otherfd", sc_otherfd, true },
	{ "splice", sc_splice, true },
	{ "vmsplice", sc_vmsplice, true },
	{ "tee", sc_tee, true },
	{ "sendfile", sc_sendfile, true },
	{ "splice-late", sc_splice, true, true },
	{ "vmsplice-late", sc_vmsplice, true, true },
	{ "tee-late", sc_tee, true, true },
	{ "splice-nonblock", sc_splice_nonblock, true, true },
	{ "tee-nonblock", sc_tee_nonblock, true, true },
	{ "small-nonblock", sc_small_nonblock, true, true },
	{ "vmsplice-nonblock", sc_vmsplice_nonblock, true, true },
	{ "sendfile-nonblock", sc_sendfile_nonblock, true, true },
	{ "small-eintr", sc_small_eintr, true, true },
	{ "small-restart", sc_small_restart, true, true },
	{ "zero", sc_zero, true, true },
	{ "stdio", sc_stdio, true },
	{ "freopen", sc_freopen, false },
	{ "setfl", sc_setfl, true },
	{ "setpipesz", sc_setpipesz, true },
	{ "close", sc_close, true },
	{ "dup2", sc_dup2, true },
	{ "fork", sc_fork, true },
	{ "exec", sc_exec, true },
	{ "spawn", sc_spawn, true },
	{ "probe", sc_probe, true },
	{ "refused", sc_probe, true },
	{ "exit", sc_exit, false },
	{ "_exit", sc_raw_exit, false },
	{ "flush", sc_flush, false },
	{ "epipe", sc_epipe, false },
	{ "epipe-close", sc_epipe_close, false },
	{ "epipe-stdio", sc_epipe_stdio, false },
	{ "reqresp", sc_reqresp, false },
	{ "threads", sc_threads, false },
};

int main(int argc, char **argv)
{
	struct scene s;
	const char *sc = argc > 1 && argv[1] ? argv[1] : "";

	buf = t_map(8 * BLOCK);
	self = argv[0];
	if (!strcmp(sc, "child"))
		return child_main(argc, argv);
	t_init("uring-contract");
	t_log("scenario %s", sc);
	if (!strcmp(sc, "refused")) {
		if (t_seccomp_deny(__NR_io_uring_setup, __NR_io_uring_setup, EPERM))
			t_skip("no seccomp filter here: %s", t_errname(errno));
		expect_staged = false;
	}
	for (size_t i = 0; i < T_ARRAY_SIZE(scenarios); i++) {
		if (strcmp(sc, scenarios[i].name))
			continue;
		if (scenarios[i].late)
			reader_delay_us = LATE_READER_US;
		if (scenarios[i].stages_a)
			stage_a(&s);
		scenarios[i].run(&s);
		return t_finish();
	}
	t_check(false, "unknown scenario %s", sc);
	return t_finish();
}
