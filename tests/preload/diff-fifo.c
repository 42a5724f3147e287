// SPDX-License-Identifier: MIT
/*
 * diff-fifo: named pipes. Their fds come from open(), not pipe(), so a
 * library must recognise them by what they are.
 *
 * A writer and a reader process open a FIFO by name and move large
 * writes and writevs through it (the name is unlinked half-way, which
 * changes nothing); a FIFO opened O_RDWR by one process is written
 * non-blocking (exact capacity) and blocking to a reader that opened it
 * separately; O_WRONLY|O_NONBLOCK without a reader fails with ENXIO at
 * open(); the reader closing gives EPIPE.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static unsigned char *src;
static char path[4200];

/* A child that opens the FIFO for reading and reads it to EOF, checking stream @seed. */
static pid_t fifo_reader(size_t rsize, uint64_t seed, struct t_read_result *res)
{
	memset(res, 0, sizeof(*res));
	pid_t pid = t_fork();

	if (pid)
		return pid;
	t_close_all_but(NULL, 0);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		_exit(3);
	unsigned char *buf = t_map(rsize);

	res->fnv = T_FNV_INIT;
	res->first_bad = UINT64_MAX;
	for (;;) {
		ssize_t r = read(fd, buf, rsize);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			res->err = errno;
			break;
		}
		if (r == 0)
			break;
		t_read_result_add(res, buf, (size_t)r, seed, 0);
	}
	res->done = 1;
	_exit(0);
}

static void finish(pid_t pid, struct t_read_result *res, const char *what, uint64_t want)
{
	int st = t_wait(pid);
	bool ok = res->done && !res->err && res->bytes == want && res->first_bad == UINT64_MAX;

	t_log("%s: reader %s read=%llu fnv=%016llx %s", what, t_status(st),
	      (unsigned long long)res->bytes, (unsigned long long)res->fnv, ok ? "ok" : "BAD");
	t_check(ok, "%s: reader got %llu bytes, first bad %llu, expected %llu", what,
		(unsigned long long)res->bytes, (unsigned long long)res->first_bad,
		(unsigned long long)want);
}

static ssize_t put(int fd, uint64_t seed, uint64_t *pos, size_t len, const char *what)
{
	t_fill(src, len, seed, *pos);
	errno = 0;
	ssize_t r = write(fd, src, len);

	t_log("%s: write %zu -> %s", what, len, t_res(r, errno));
	t_scribble(src, len);
	if (r > 0)
		*pos += (uint64_t)r;
	return r;
}

static void two_processes(struct t_read_result *res)
{
	uint64_t pos = 0;
	pid_t rp = fifo_reader(65536, 900, res);
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		t_die("open fifo for writing");
	struct stat st;

	fstat(fd, &st);
	t_log("fifo write end: S_ISFIFO=%d", S_ISFIFO(st.st_mode));
	put(fd, 900, &pos, T_MIB + 1, "fifo");
	put(fd, 900, &pos, 100, "fifo");
	if (unlink(path))
		t_die("unlink");
	put(fd, 900, &pos, 5 * T_MIB, "fifo, name unlinked");

	struct iovec iov[3] = { { src, 70000 }, { src + 80000, 0 }, { src + 90000, 4097 } };

	t_fill(src, 70000, 900, pos);
	t_fill(src + 90000, 4097, 900, pos + 70000);
	ssize_t r = writev(fd, iov, 3);

	t_log("fifo: writev 74097 -> %s", t_res(r, errno));
	pos += r > 0 ? (uint64_t)r : 0;
	t_close(fd);
	finish(rp, res, "two processes", pos);
	if (mkfifo(path, 0600))
		t_die("mkfifo again");
}

static void rdwr(struct t_read_result *res)
{
	uint64_t pos = 0;
	int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		t_die("open fifo O_RDWR");
	put(fd, 901, &pos, T_MIB, "O_RDWR|O_NONBLOCK, nobody else");
	put(fd, 901, &pos, 10, "O_RDWR|O_NONBLOCK, full");
	unsigned char *back = t_map(65536);
	ssize_t n = t_read_full(fd, back, 65536);

	t_log("O_RDWR: read back %s, %s", t_res(n, errno),
	      n == 65536 && t_verify(back, 65536, 901, 0) == 65536 ? "ok" : "BAD");
	t_check(n == 65536 && t_verify(back, 65536, 901, 0) == 65536, "O_RDWR read back");
	munmap(back, 65536);

	/* Now blocking, with a reader that opened the FIFO itself. */
	t_set_nonblock(fd, false);
	pos = 0;
	pid_t rp = fifo_reader(4096, 902, res);

	put(fd, 902, &pos, 3 * T_MIB, "O_RDWR, blocking, reader attached");
	put(fd, 902, &pos, 65537, "O_RDWR, blocking, reader attached");
	t_close(fd);
	finish(rp, res, "O_RDWR writer", pos);
}

static void no_reader(void)
{
	int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	t_log("open O_WRONLY|O_NONBLOCK without a reader -> %s", t_res(fd < 0 ? -1 : 0, errno));
	if (fd >= 0)
		t_close(fd);

	/* A reader that opens, reads 100000 bytes and goes away. */
	pid_t pid = t_fork();

	if (!pid) {
		t_close_all_but(NULL, 0);
		int rfd = open(path, O_RDONLY | O_CLOEXEC);
		static unsigned char buf[100000];

		if (rfd < 0 || t_read_full(rfd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			_exit(1);
		_exit(0);
	}
	t_sigaction(SIGPIPE, t_sig_counter, false);
	t_sig_count[SIGPIPE] = 0;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		t_die("open fifo");
	ssize_t r = write(fd, src, 4 * T_MIB);
	int e = errno;
	int s1 = t_sig_count[SIGPIPE];
	int st = t_wait(pid);

	t_log("reader leaves after 100000: write 4MiB -> %s, SIGPIPE x%d (reader %s)",
	      r > 0 && r < (ssize_t)(4 * T_MIB) ? "partial>0" : t_res(r, e), s1, t_status(st));
	r = write(fd, src, T_MIB);
	t_log("next write 1MiB -> %s, SIGPIPE x%d", t_res(r, errno), (int)t_sig_count[SIGPIPE]);
	t_close(fd);
	t_sigaction(SIGPIPE, SIG_DFL, false);
}

int main(void)
{
	t_init("diff-fifo");
	src = (unsigned char *)t_map(5 * T_MIB + T_PAGE) + 7;
	snprintf(path, sizeof(path), "%s/fifo", t_tmpdir());
	if (mkfifo(path, 0600))
		t_die("mkfifo");
	struct t_read_result *res = t_shared(sizeof(*res));

	two_processes(res);
	rdwr(res);
	no_reader();
	unlink(path);
	*strrchr(path, '/') = 0;
	rmdir(path);
	return t_finish();
}
