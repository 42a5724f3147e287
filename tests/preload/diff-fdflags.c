// SPDX-License-Identifier: MIT
/*
 * diff-fdflags: what an open file's flags and its other holders do to
 * large writes, when the flags change elsewhere than in the writing call.
 *
 * O_NONBLOCK set and cleared on a write end's open file by a fork child,
 * and by the process that sent the end to another over a unix socket,
 * seen by the other's next writes (a full pipe: the count, then EAGAIN;
 * a write whose first bytes the kernel merges into the last page);
 * O_APPEND, which a pipe ignores; packet mode (O_DIRECT) switched on by a
 * fork child, each read then one packet; a FIFO opened O_RDWR and ends
 * reopened through /proc/self/fd (for reading and for both) that the
 * process splices out of while it keeps writing: the spliced pages must
 * keep their bytes; and the SIGIO a reader with O_ASYNC (F_SETSIG, so
 * that each one is counted) gets for each write that is one on a plain
 * pipe.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static unsigned char *src, *back;

static ssize_t put(int fd, size_t n, uint64_t seed, uint64_t pos, int *err)
{
	ssize_t r;

	t_fill(src, n, seed, pos);
	errno = 0;
	r = write(fd, src, n);
	*err = errno;
	return r;
}

/* Reads what the pipe holds through @rfd without waiting: its length and whether it is @seed from 0. */
static size_t take_all(int rfd, uint64_t seed, const char *what)
{
	size_t got = 0;
	int fl = fcntl(rfd, F_GETFL);

	fcntl(rfd, F_SETFL, fl | O_NONBLOCK);
	for (;;) {
		ssize_t r = read(rfd, back + got, 4 * T_MIB - got);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	fcntl(rfd, F_SETFL, fl);
	bool ok = t_verify(back, got, seed, 0) == got;

	t_log("%s: the pipe held %zu bytes, %s", what, got, ok ? "intact" : "BAD");
	t_check(ok, "%s: bytes read back differ", what);
	return got;
}

/* A fork child that runs @fn(@fd, @on) and exits. */
static void in_child(void (*fn)(int, bool), int fd, bool on)
{
	pid_t pid = t_fork();

	if (!pid) {
		fn(fd, on);
		_exit(0);
	}
	t_wait(pid);
}

static void set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

static void set_direct(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, on ? fl | O_DIRECT : fl & ~O_DIRECT);
}

/*
 * Writes into a pipe of @wfd/@rfd that nobody reads while they run, after
 * O_NONBLOCK was set on the write end's open file elsewhere: the counts a
 * non-blocking write gets, one whose first 3616 bytes the kernel merges
 * into the page holding 100 bytes, and EAGAIN at a full pipe.
 */
static void nonblocking_now(const char *who, int wfd, int rfd)
{
	char what[160];
	ssize_t r;
	int e;

	snprintf(what, sizeof(what), "O_NONBLOCK set by %s", who);
	t_log("%s: F_GETFL has O_NONBLOCK: %d", what, !!(fcntl(wfd, F_GETFL) & O_NONBLOCK));
	r = put(wfd, T_MIB, 41, 0, &e);
	t_log("%s: write 1048576 -> %s", what, t_res(r, e));
	r = put(wfd, 65536, 41, r > 0 ? (uint64_t)r : 0, &e);
	t_log("%s: write 65536 into the full pipe -> %s", what, t_res(r, e));
	take_all(rfd, 41, what);
	if (put(wfd, 100, 42, 0, &e) != 100)
		t_die("queue 100 bytes");
	r = put(wfd, 69152, 42, 100, &e);
	t_log("%s: 100 bytes queued, write 69152 -> %s", what, t_res(r, e));
	take_all(rfd, 42, what);
}

static void by_fork_child(void)
{
	int p[2];

	t_pipe(p, 0);
	in_child(set_nonblock, p[1], true);
	nonblocking_now("a fork child", p[1], p[0]);
	in_child(set_nonblock, p[1], false);
	{
		/* A reader child takes 3 MiB while the parent writes them blocking. */
		pid_t pid = t_fork();

		if (!pid) {
			size_t got = 0;

			while (got < 3 * T_MIB) {
				ssize_t r = read(p[0], back, 65536);

				if (r <= 0)
					_exit(2);
				if (t_verify(back, (size_t)r, 43, got) != (size_t)r)
					_exit(3);
				got += (size_t)r;
			}
			_exit(0);
		}
		int e;
		ssize_t r = put(p[1], 3 * T_MIB, 43, 0, &e);

		t_log("O_NONBLOCK cleared by a fork child: write 3145728 -> %s", t_res(r, e));
		t_log("O_NONBLOCK cleared by a fork child: reader %s", t_status(t_wait(pid)));
	}
	t_close(p[0]);
	t_close(p[1]);
}

/* @fd sent over @sock, as the only thing in the message but one byte. */
static void send_fd(int sock, int fd)
{
	char byte = 'x', ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	memset(ctl, 0, sizeof(ctl));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(sock, &m, 0) != 1)
		t_die("sendmsg");
}

static int recv_fd(int sock)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)
	};
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1 || !(c = CMSG_FIRSTHDR(&m)) ||
	    c->cmsg_type != SCM_RIGHTS)
		t_die("recvmsg");
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* What the receiving process's writes returned. */
struct turn_results {
	ssize_t r[3];
	int e[3];
};

/*
 * A write end received over a unix socket, in a process that did not
 * create the pipe, written after its sender switched O_NONBLOCK on the
 * open file they share. The two processes take turns over the socket.
 */
static void by_sender(void)
{
	int p[2], sv[2];
	pid_t pid;
	char go = 'g';

	t_pipe(p, 0);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		t_die("socketpair");
	pid = t_fork();
	if (!pid) {
		/* The receiver: its own copy of nothing but the socket, then the write end. */
		t_close(p[0]);
		t_close(p[1]);
		int w = recv_fd(sv[1]), e;
		struct turn_results res = { { 0 }, { 0 } };

		if (read(sv[1], &go, 1) != 1)
			_exit(2);
		res.r[0] = put(w, T_MIB, 44, 0, &e);
		res.e[0] = e;
		res.r[1] = put(w, 65536, 44, 0, &e);
		res.e[1] = e;
		if (write(sv[1], &go, 1) != 1 || read(sv[1], &go, 1) != 1)
			_exit(3);
		/* Blocking again: all of it, while the sender reads. */
		res.r[2] = put(w, 2 * T_MIB, 45, 0, &e);
		res.e[2] = e;
		if (write(sv[1], &res, sizeof(res)) != (ssize_t)sizeof(res))
			_exit(4);
		_exit(0);
	}
	struct turn_results res;

	send_fd(sv[0], p[1]);
	set_nonblock(p[1], true);
	if (write(sv[0], &go, 1) != 1 || read(sv[0], &go, 1) != 1)
		t_die("socket turns");
	take_all(p[0], 44, "O_NONBLOCK set by the sender");
	set_nonblock(p[1], false);
	if (write(sv[0], &go, 1) != 1)
		t_die("socket turns");
	{
		size_t got = 0;

		while (got < 2 * T_MIB) {
			ssize_t r = read(p[0], back + got, 65536);

			if (r <= 0)
				break;
			got += (size_t)r;
		}
		t_log("O_NONBLOCK cleared by the sender: read %zu bytes, %s", got,
		      t_verify(back, got, 45, 0) == got ? "intact" : "BAD");
		t_check(t_verify(back, got, 45, 0) == got, "receiver's blocking write");
	}
	if (read(sv[0], &res, sizeof(res)) != (ssize_t)sizeof(res))
		t_die("receiver's results");
	t_log("O_NONBLOCK set by the sender: receiver's write 1048576 -> %s, then 65536 -> %s",
	      t_res(res.r[0], res.e[0]), t_res(res.r[1], res.e[1]));
	t_log("O_NONBLOCK cleared by the sender: receiver's write 2097152 -> %s",
	      t_res(res.r[2], res.e[2]));
	t_log("receiver: %s", t_status(t_wait(pid)));
	t_close(sv[0]);
	t_close(sv[1]);
	t_close(p[0]);
	t_close(p[1]);
}

/* O_APPEND on a write end: a pipe has no file position, and the counts are the same. */
static void append(void)
{
	int p[2], e;
	ssize_t r;

	t_pipe(p, 0);
	fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_APPEND);
	t_log("O_APPEND: F_GETFL %#o", fcntl(p[1], F_GETFL));
	r = put(p[1], 40000, 46, 0, &e);
	t_log("O_APPEND: write 40000 -> %s", t_res(r, e));
	set_nonblock(p[1], true);
	r = put(p[1], 65536, 46, 40000, &e);
	t_log("O_APPEND|O_NONBLOCK: write 65536 -> %s", t_res(r, e));
	take_all(p[0], 46, "O_APPEND");
	t_close(p[0]);
	t_close(p[1]);
}

/* Packet mode switched on by a fork child on the shared write end: each read is one packet. */
static void packets_by_child(void)
{
	int p[2], e, n = 0;
	ssize_t r;
	size_t lens[64], got = 0;

	t_pipe(p, 0);
	r = put(p[1], 32768, 47, 0, &e); /* the pipe took the fast path before */
	t_log("before packet mode: write 32768 -> %s", t_res(r, e));
	take_all(p[0], 47, "before packet mode");
	in_child(set_direct, p[1], true);
	t_log("packet mode by a fork child: F_GETFL has O_DIRECT: %d",
	      !!(fcntl(p[1], F_GETFL) & O_DIRECT));
	r = put(p[1], 20000, 48, 0, &e);
	t_log("packet mode: write 20000 -> %s", t_res(r, e));
	set_nonblock(p[0], true);
	while (n < 64 && (r = read(p[0], back + got, 65536)) > 0) {
		lens[n++] = (size_t)r;
		got += (size_t)r;
	}
	set_nonblock(p[0], false);
	char line[400] = "";

	for (int i = 0; i < n; i++)
		snprintf(line + strlen(line), sizeof(line) - strlen(line), " %zu", lens[i]);
	t_log("packet mode: reads of 65536 gave%s, %s", line,
	      t_verify(back, got, 48, 0) == got ? "intact" : "BAD");
	in_child(set_direct, p[1], false);
	r = put(p[1], 20000, 49, 0, &e);
	t_log("packet mode cleared by a fork child: write 20000 -> %s", t_res(r, e));
	take_all(p[0], 49, "packet mode cleared");
	t_close(p[0]);
	t_close(p[1]);
}

/*
 * Pages spliced out of @out into another pipe, kept there unread while
 * @wfd carries 4 MiB more through the pipe (read back by @rfd): the
 * spliced bytes must still be the ones written.
 */
static void splice_out_then_write(const char *what, int wfd, int rfd, int out)
{
	int keep[2], e;
	ssize_t r, s;

	t_pipe(keep, 0);
	t_pipe_size_set(keep[1], 1 << 20);
	r = put(wfd, 65536, 50, 0, &e);
	t_log("%s: write 65536 -> %s", what, t_res(r, e));
	s = splice(out, NULL, keep[1], NULL, 65536, SPLICE_F_NONBLOCK);
	t_log("%s: splice 65536 out of it -> %s", what, t_res(s, errno));
	for (int i = 0; i < 64; i++) {
		r = put(wfd, 65536, 51, (uint64_t)i * 65536, &e);
		if (r != 65536 || t_read_full(rfd, back, 65536) != 65536 ||
		    t_verify(back, 65536, 51, (uint64_t)i * 65536) != 65536) {
			t_log("%s: write and read back %d went wrong: %s", what, i, t_res(r, e));
			t_check(false, "%s: cycle %d", what, i);
			break;
		}
	}
	r = t_read_full(keep[0], back, (size_t)(s > 0 ? s : 0));
	t_log("%s: the spliced pages read %s, %s", what, t_res(r, errno),
	      s > 0 && r == s && t_verify(back, (size_t)s, 50, 0) == (size_t)s ? "intact" : "BAD");
	t_check(s <= 0 || (r == s && t_verify(back, (size_t)s, 50, 0) == (size_t)s),
		"%s: spliced pages changed", what);
	t_close(keep[0]);
	t_close(keep[1]);
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

static void spliced_through_other_files(void)
{
	char path[4200];
	int p[2], fd;

	t_pipe(p, 0);
	fd = reopen(p[0], O_RDONLY);
	splice_out_then_write("read end reopened through /proc/self/fd", p[1], p[0], fd);
	t_close(fd);
	t_close(p[0]);
	t_close(p[1]);

	t_pipe(p, 0);
	fd = reopen(p[1], O_RDWR);
	splice_out_then_write("write end reopened O_RDWR", p[1], p[0], fd);
	t_close(fd);
	t_close(p[0]);
	t_close(p[1]);

	snprintf(path, sizeof(path), "%s/fifo", t_tmpdir());
	if (mkfifo(path, 0600) || (fd = open(path, O_RDWR | O_CLOEXEC)) < 0)
		t_die("fifo");
	unlink(path);
	splice_out_then_write("FIFO opened O_RDWR", fd, fd, fd);
	t_close(fd);
}

/* The SIGIO (as a queued real-time signal) each write raises for a reader with O_ASYNC. */
static void sigio(void)
{
	static const struct {
		const char *name;
		size_t queued, size;
		bool nonblock;
	} cases[] = {
		{ "blocking 20000 into an empty pipe", 0, 20000, false },
		{ "blocking 65536 into an empty pipe", 0, 65536, false },
		{ "non-blocking 65536 into an empty pipe", 0, 65536, true },
		{ "non-blocking 1048576 into an empty pipe", 0, T_MIB, true },
		{ "non-blocking 20000 after 100 bytes", 100, 20000, true },
		{ "non-blocking 65536 into a full pipe", 65536, 65536, true },
	};
	int sig = SIGRTMIN + 3;
	int p[2], e;

	t_sigaction(sig, t_sig_counter, true);
	for (size_t i = 0; i < T_ARRAY_SIZE(cases); i++) {
		int before;
		ssize_t r;

		t_pipe(p, 0);
		if (fcntl(p[0], F_SETOWN, getpid()) || fcntl(p[0], F_SETSIG, sig) ||
		    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_ASYNC))
			t_die("O_ASYNC");
		if (cases[i].queued)
			put(p[1], cases[i].queued, 52, 0, &e);
		set_nonblock(p[1], cases[i].nonblock);
		before = t_sig_count[sig];
		/* write() itself: the API build's several parts would be several calls. */
		t_fill(src, cases[i].size, 52, cases[i].queued);
		r = (write)(p[1], src, cases[i].size);
		e = errno;
		t_log("SIGIO: %s -> %s, signals %d", cases[i].name, t_res(r, e),
		      t_sig_count[sig] - before);
		take_all(p[0], 52, cases[i].name);
		t_close(p[0]);
		t_close(p[1]);
	}
	t_sigaction(sig, SIG_DFL, true);
}

int main(void)
{
	t_init("diff-fdflags");
	src = t_map(4 * T_MIB);
	back = t_shared(4 * T_MIB);
	signal(SIGPIPE, SIG_IGN);
	by_fork_child();
	by_sender();
	append();
	packets_by_child();
	spliced_through_other_files();
	sigio();
	return t_finish();
}
