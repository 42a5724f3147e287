// SPDX-License-Identifier: MIT
/*
 * diff-readend: large writes to pipe ends that are not open for writing.
 *
 * The kernel answers EBADF and the pipe keeps what it holds. A library
 * that took such an fd for a write end would hand it to vmsplice(),
 * which on an fd open only for reading moves bytes out of the pipe (or
 * waits for some to come). Every way a process gets a pipe fd is tried:
 * pipe()'s read end and a dup of it, a FIFO opened for reading
 * (non-blocking and blocking), a read end received over a unix socket
 * (SCM_RIGHTS), a read end and a write end reopened for reading through
 * /proc/self/fd, an O_PATH fd of a pipe, a read end inherited through
 * fork and one inherited through exec, and a FIFO's write end replaced by
 * a read end with the dup3 system call itself (no libc function a library
 * sees) after a large write went through it. Each with the pipe empty and with
 * 100 bytes from a writer in it, the fd blocking and non-blocking, with
 * write() of 20000 bytes, 64 KiB and 1 MiB and a writev() of 64 KiB.
 * After each: the call's result, FIONREAD, a non-blocking 64 KiB write
 * through a real write end (its count shows whether the 100 bytes are
 * still there), and every byte the pipe then gives a reader. A write
 * that should fail at once but waits is cut short by an alarm, so a
 * blocking FIFO shows up in the transcript, not as a hang.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define SEED_QUEUED 3101 /* the 100 bytes waiting in the pipe */
#define SEED_AFTER 3102 /* the write through a real write end afterwards */
#define QUEUED 100

static unsigned char *src, *back;
static char self_exe[4200];

/* The write under test: @size bytes from a filled buffer, by write() or writev(). */
struct op {
	const char *name;
	size_t size;
	bool vector;
};

static const struct op ops[] = {
	{ "write 20000", 20000, false },
	{ "write 65536", 65536, false },
	{ "write 1048576", T_MIB, false },
	{ "writev 2x32768", 65536, true },
};

static void on_alarm(int sig)
{
	(void)sig;
}

static ssize_t attempt(int fd, const struct op *op)
{
	struct iovec iov[2] = { { src, op->size / 2 }, { src + op->size / 2, op->size / 2 } };
	ssize_t r;
	int e;

	t_fill(src, op->size, 3100, 0);
	alarm(1);
	errno = 0;
	r = op->vector ? writev(fd, iov, 2) : write(fd, src, op->size);
	e = errno;
	alarm(0);
	errno = e;
	return r;
}

/* Reads what the pipe holds through @rfd without waiting; checks it is QUEUED then @after bytes. */
static void check_contents(int rfd, size_t queued, size_t after, const char *what)
{
	size_t want = queued + after, got = 0;
	int fl = fcntl(rfd, F_GETFL);
	bool ok = true;

	fcntl(rfd, F_SETFL, fl | O_NONBLOCK);
	for (;;) {
		ssize_t r = read(rfd, back + got, T_MIB - got);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	fcntl(rfd, F_SETFL, fl);
	if (got != want)
		ok = false;
	else if (t_verify(back, queued, SEED_QUEUED, 0) != queued ||
		 t_verify(back + queued, after, SEED_AFTER, 0) != after)
		ok = false;
	t_log("%s: the pipe then gave %zu bytes, %s", what, got, ok ? "intact" : "BAD");
	t_check(ok, "%s: %zu bytes read back, %zu expected", what, got, want);
}

/*
 * Every write of ops[] to @bad, not open for writing, in a pipe with and
 * without QUEUED bytes, @bad blocking and not. @wfd is a write end of the
 * same pipe, @rfd a read end (either may be @bad's open file too).
 * @set_nonblock: whether F_SETFL may switch @bad (an O_PATH fd cannot).
 */
static void wrong_end(const char *origin, int bad, int wfd, int rfd, bool set_nonblock)
{
	for (int nb = 0; nb < 2; nb++) {
		int fl = fcntl(bad, F_GETFL);

		if (set_nonblock)
			fcntl(bad, F_SETFL, nb ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
		else if (nb)
			break;
		for (size_t q = 0; q <= QUEUED; q += QUEUED) {
			for (size_t i = 0; i < T_ARRAY_SIZE(ops); i++) {
				char what[200];
				ssize_t r, w;
				int e, wfl;

				snprintf(what, sizeof(what), "%s, %s, %zu queued, %s", origin,
					 nb ? "non-blocking" : "blocking", q, ops[i].name);
				if (q) {
					t_fill(back, q, SEED_QUEUED, 0);
					if (write(wfd, back, q) != (ssize_t)q)
						t_die("queue %zu bytes", q);
				}
				r = attempt(bad, &ops[i]);
				e = errno;
				t_log("%s -> %s, fionread=%d", what, t_res(r, e), t_fionread(rfd));
				t_check(r == -1 && e == EBADF, "%s: not EBADF", what);
				/* A real write end after it: the pipe still holds the queued bytes. */
				wfl = fcntl(wfd, F_GETFL);
				fcntl(wfd, F_SETFL, wfl | O_NONBLOCK);
				t_fill(src, 65536, SEED_AFTER, 0);
				w = write(wfd, src, 65536);
				e = errno;
				fcntl(wfd, F_SETFL, wfl);
				t_log("%s: then 65536 non-blocking through a write end -> %s", what,
				      t_res(w, e));
				check_contents(rfd, q, w > 0 ? (size_t)w : 0, what);
			}
		}
	}
	if (set_nonblock)
		fcntl(bad, F_SETFL, fcntl(bad, F_GETFL) & ~O_NONBLOCK);
}

/*
 * @wfd, a write end that just carried a large write, replaced by @rfd (a
 * read end of the same pipe) with the raw dup3 system call: the number
 * now names a file open only for reading, behind any library's back.
 */
static void replaced_write_end(const char *origin, int wfd, int rfd, size_t queued)
{
	char what[160];
	ssize_t r;
	int e, fl = fcntl(wfd, F_GETFL);

	fcntl(wfd, F_SETFL, fl | O_NONBLOCK);
	t_fill(src, 65536, SEED_AFTER, 0);
	r = write(wfd, src, 65536);
	e = errno;
	fcntl(wfd, F_SETFL, fl);
	snprintf(what, sizeof(what), "%s, %zu queued", origin, queued);
	t_log("%s: write 65536 non-blocking through the write end -> %s", what, t_res(r, e));
	check_contents(rfd, queued, r > 0 ? (size_t)r : 0, what);
	r = syscall(SYS_dup3, rfd, wfd, O_CLOEXEC);
	t_log("%s: raw dup3(read end, write end) -> %s", what, t_res(r < 0 ? -1 : 0, errno));
	r = attempt(wfd, &ops[1]);
	e = errno;
	t_log("%s: then through the replaced number, %s -> %s, fionread=%d", what, ops[1].name,
	      t_res(r, e), t_fionread(rfd));
	t_check(r == -1 && e == EBADF, "%s: replaced write end: not EBADF", what);
}

static void from_pipe(void)
{
	int p[2], d;

	t_pipe(p, 0);
	wrong_end("pipe() read end", p[0], p[1], p[0], true);
	d = fcntl(p[0], F_DUPFD_CLOEXEC, 10);
	wrong_end("dup of a read end", d, p[1], p[0], true);
	t_close(d);
	t_close(p[0]);
	t_close(p[1]);
}

static void from_fifo(void)
{
	const char *dir = t_tmpdir();
	char path[4200];
	int rnb, w, rb;

	snprintf(path, sizeof(path), "%s/fifo", dir);
	if (mkfifo(path, 0600))
		t_die("mkfifo");
	rnb = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	w = rnb < 0 ? -1 : open(path, O_WRONLY | O_CLOEXEC);
	/* A writer is there: a blocking open for reading returns at once. */
	rb = w < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
	if (rb < 0)
		t_die("open fifo");
	wrong_end("FIFO opened O_RDONLY|O_NONBLOCK", rnb, w, rnb, false);
	wrong_end("FIFO opened O_RDONLY", rb, w, rb, false);
	wrong_end("FIFO, either read end switched", rb, w, rnb, true);
	replaced_write_end("FIFO write end", w, rb, 0);
	t_close(rb);
	t_close(rnb);
	t_close(w);
	unlink(path);
}

/* @fd sent to this very process over a unix socket: the new fd it arrives as. */
static int pass_through_socket(int fd)
{
	char byte = 'x', ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	int sv[2], got;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		t_die("socketpair");
	memset(ctl, 0, sizeof(ctl));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(sv[0], &m, 0) != 1)
		t_die("sendmsg");
	m.msg_controllen = sizeof(ctl);
	if (recvmsg(sv[1], &m, MSG_CMSG_CLOEXEC) != 1 || !(c = CMSG_FIRSTHDR(&m)) ||
	    c->cmsg_type != SCM_RIGHTS)
		t_die("recvmsg");
	memcpy(&got, CMSG_DATA(c), sizeof(int));
	t_close(sv[0]);
	t_close(sv[1]);
	return got;
}

static void from_socket(void)
{
	int p[2], r;

	t_pipe(p, 0);
	r = pass_through_socket(p[0]);
	wrong_end("read end received over a unix socket", r, p[1], p[0], true);
	t_close(r);
	t_close(p[0]);
	t_close(p[1]);
}

static int reopen(int fd, int flags)
{
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	r = open(path, flags | O_CLOEXEC);
	if (r < 0)
		t_die("open %s", path);
	return r;
}

static void from_proc(void)
{
	int p[2], r;

	t_pipe(p, 0);
	r = reopen(p[0], O_RDONLY);
	wrong_end("read end reopened through /proc/self/fd", r, p[1], p[0], true);
	t_close(r);
	r = reopen(p[1], O_RDONLY);
	wrong_end("write end reopened for reading through /proc/self/fd", r, p[1], p[0], true);
	t_close(r);
	r = reopen(p[1], O_PATH);
	wrong_end("O_PATH fd of a write end", r, p[1], p[0], false);
	t_close(r);
	t_close(p[0]);
	t_close(p[1]);
}

/* A child of fork() writes to its copy of the read end; it reports through shared memory. */
static void from_fork(void)
{
	struct result {
		ssize_t r;
		int err;
	} *res = t_shared(sizeof(*res) * T_ARRAY_SIZE(ops) * 2);
	int p[2];

	t_pipe(p, 0);
	for (int q = 0; q < 2; q++) {
		pid_t pid;

		if (q) {
			t_fill(back, QUEUED, SEED_QUEUED, 0);
			if (write(p[1], back, QUEUED) != QUEUED)
				t_die("queue");
		}
		pid = t_fork();
		if (!pid) {
			for (size_t i = 0; i < T_ARRAY_SIZE(ops); i++) {
				res[q * T_ARRAY_SIZE(ops) + i].r = attempt(p[0], &ops[i]);
				res[q * T_ARRAY_SIZE(ops) + i].err = errno;
			}
			_exit(0);
		}
		t_log("fork child: %s", t_status(t_wait(pid)));
		for (size_t i = 0; i < T_ARRAY_SIZE(ops); i++) {
			struct result *x = &res[q * T_ARRAY_SIZE(ops) + i];

			t_log("read end inherited through fork, %d queued, %s -> %s",
			      q ? QUEUED : 0, ops[i].name, t_res(x->r, x->err));
			t_check(x->r == -1 && x->err == EBADF, "fork child: not EBADF");
		}
		check_contents(p[0], q ? QUEUED : 0, 0, "after the fork child");
	}
	t_close(p[0]);
	t_close(p[1]);
}

/*
 * This program again, through exec, with a read end (not close-on-exec):
 * the new image writes to it (and to a pipe of its own, for the fast path
 * to run there too), then the parent checks the pipe. The new image logs.
 */
static void from_exec(void)
{
	int p[2];

	t_pipe(p, 0);
	for (int q = 0; q < 2; q++) {
		char rd[16], nq[16];
		pid_t pid;

		if (q) {
			t_fill(back, QUEUED, SEED_QUEUED, 0);
			if (write(p[1], back, QUEUED) != QUEUED)
				t_die("queue");
		}
		snprintf(rd, sizeof(rd), "%d", p[0]);
		snprintf(nq, sizeof(nq), "%d", q ? QUEUED : 0);
		pid = t_fork();
		if (!pid) {
			execl(self_exe, self_exe, "exec-child", rd, nq, (char *)NULL);
			_exit(98);
		}
		t_log("exec'd image: %s", t_status(t_wait(pid)));
		check_contents(p[0], q ? QUEUED : 0, 0, "after the exec'd image");
	}
	t_close(p[0]);
	t_close(p[1]);
}

static int exec_child(int rfd, size_t queued)
{
	int extra[2];

	for (size_t i = 0; i < T_ARRAY_SIZE(ops); i++) {
		ssize_t r = attempt(rfd, &ops[i]);
		int e = errno;

		t_log("read end inherited through exec, %zu queued, %s -> %s, fionread=%d", queued,
		      ops[i].name, t_res(r, e), t_fionread(rfd));
		t_check(r == -1 && e == EBADF, "exec'd image: not EBADF");
	}
	/* The image's own pipe, written: so that the fast path ran in this image too. */
	t_pipe(extra, 0);
	t_fill(src, 32768, 7, 0);
	t_log("exec'd image: its own pipe: write 32768 -> %s",
	      t_res(write(extra[1], src, 32768), errno));
	t_log("exec'd image: read back %s", t_res(t_read_full(extra[0], back, 32768), errno));
	t_check(t_verify(back, 32768, 7, 0) == 32768, "exec'd image: own pipe");
	return t_finish();
}

int main(int argc, char **argv)
{
	ssize_t n;

	src = t_map(T_MIB);
	back = t_map(2 * T_MIB);
	t_sigaction(SIGALRM, on_alarm, false);
	signal(SIGPIPE, SIG_IGN);
	if (argc == 4 && !strcmp(argv[1], "exec-child")) {
		t_init("diff-readend (exec'd image)");
		return exec_child(atoi(argv[2]), (size_t)atoi(argv[3]));
	}
	t_init("diff-readend");
	n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	if (n <= 0)
		t_die("readlink /proc/self/exe");
	self_exe[n] = 0;
	from_pipe();
	from_fifo();
	from_socket();
	from_proc();
	from_fork();
	from_exec();
	return t_finish();
}
