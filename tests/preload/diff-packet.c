// SPDX-License-Identifier: MIT
/*
 * diff-packet: packet-mode pipes (O_DIRECT), where every write is cut into
 * packets of at most PIPE_BUF bytes and each read() returns one packet
 * (the rest of a packet that does not fit in the read buffer is lost).
 *
 * The reader prints the length of every read; since each packet is its
 * own pipe buffer, that list does not depend on scheduling. A library
 * that pushes its own pages into a packet-mode pipe (vmsplice does not
 * mark them as packets) would show merged reads here. Also: O_DIRECT set
 * and cleared with F_SETFL on an ordinary pipe, O_DIRECT on the read end
 * only, writev, small read buffers, and non-blocking counts.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_READS 4096

struct lens {
	int n;
	int err;
	uint64_t bytes, fnv;
	int len[MAX_READS];
};

static unsigned char *src;

/* A child that reads @rfd until EOF with @rsize-byte reads, recording each length. */
static pid_t len_reader(int rfd, size_t rsize, struct lens *l)
{
	memset(l, 0, sizeof(*l));
	pid_t pid = t_fork();

	if (pid)
		return pid;
	t_close_all_but(&rfd, 1);
	static unsigned char buf[T_MIB];

	l->fnv = T_FNV_INIT;
	for (;;) {
		ssize_t r = read(rfd, buf, rsize);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			l->err = errno;
			break;
		}
		if (r == 0)
			break;
		if (l->n < MAX_READS)
			l->len[l->n] = (int)r;
		l->n++;
		l->fnv = t_fnv(l->fnv, buf, (size_t)r);
		l->bytes += (uint64_t)r;
	}
	_exit(0);
}

/* Prints the read lengths compactly: "4096x17 368" for runs of equal lengths. */
static void print_lens(const char *what, const struct lens *l)
{
	char line[4096];
	size_t at = 0;

	for (int i = 0; i < l->n && i < MAX_READS && at < sizeof(line) - 64;) {
		int j = i;

		while (j < l->n && j < MAX_READS && l->len[j] == l->len[i])
			j++;
		if (j - i > 1)
			at += (size_t)snprintf(line + at, sizeof(line) - at, " %dx%d", l->len[i],
					       j - i);
		else
			at += (size_t)snprintf(line + at, sizeof(line) - at, " %d", l->len[i]);
		i = j;
	}
	line[at] = 0;
	t_log("%s: %d reads, %llu bytes, fnv=%016llx%s; lengths:%s", what, l->n,
	      (unsigned long long)l->bytes, (unsigned long long)l->fnv,
	      l->err ? t_errname(l->err) : "", line);
}

static void blocking_packets(const char *what, int flags, bool setfl_direct, size_t rsize)
{
	static const size_t sizes[] = { 100, 4096, 5000, 70000, 1, T_MIB + 13, 8192, 4097 };
	struct lens *l = t_shared(sizeof(*l));
	int p[2];

	t_pipe(p, flags);
	if (setfl_direct && fcntl(p[1], F_SETFL, O_DIRECT))
		t_die("F_SETFL O_DIRECT");
	pid_t pid = len_reader(p[0], rsize, l);

	t_close(p[0]);
	uint64_t pos = 0;
	char res[512];
	size_t at = 0;

	for (size_t i = 0; i < T_ARRAY_SIZE(sizes); i++) {
		t_fill(src, sizes[i], 30, pos);
		ssize_t r = write(p[1], src, sizes[i]);

		at += (size_t)snprintf(res + at, sizeof(res) - at, " %s", t_res(r, errno));
		t_scribble(src, sizes[i]);
		pos += r > 0 ? (uint64_t)r : 0;
	}
	struct iovec iov[4] = {
		{ src, 10 }, { src + 100, 5000 }, { src + 6000, 0 }, { src + 7000, 3000 }
	};

	t_fill(src, 10, 30, pos);
	t_fill(src + 100, 5000, 30, pos + 10);
	t_fill(src + 7000, 3000, 30, pos + 5010);
	ssize_t r = writev(p[1], iov, 4);

	at += (size_t)snprintf(res + at, sizeof(res) - at, " writev %s", t_res(r, errno));
	t_close(p[1]);
	t_wait(pid);
	t_log("%s: writes%s", what, res);
	print_lens(what, l);
	munmap(l, sizeof(*l));
}

static void nonblocking_packets(void)
{
	static const size_t sizes[] = { 100, 70000, 1, 4096 };
	int p[2];

	t_pipe(p, O_DIRECT | O_NONBLOCK);
	for (size_t i = 0; i < T_ARRAY_SIZE(sizes); i++) {
		ssize_t r = write(p[1], src, sizes[i]);

		t_log("packet, non-blocking: write %zu -> %s fionread=%d", sizes[i],
		      t_res(r, errno), t_fionread(p[0]));
	}
	t_drain(p[0]);
	ssize_t r = write(p[1], src, T_MIB);

	t_log("packet, non-blocking, empty: write 1MiB -> %s fionread=%d", t_res(r, errno),
	      t_fionread(p[0]));
	t_close(p[0]);
	t_close(p[1]);
}

/* Packets written, then O_DIRECT cleared: do later bytes merge with them? */
static void toggled(void)
{
	struct lens *l = t_shared(sizeof(*l));
	int p[2];

	static const struct {
		int flags;
		size_t len;
	} seq[] = {
		{ O_DIRECT, 5000 }, { 0, 100 }, { 0, 5000 }, { O_DIRECT, 100 }, { O_DIRECT, 65536 },
	};
	char res[256];
	size_t at = 0;

	t_pipe(p, 0);
	for (size_t i = 0; i < T_ARRAY_SIZE(seq); i++) {
		if (fcntl(p[1], F_SETFL, seq[i].flags | O_NONBLOCK))
			t_die("F_SETFL");
		ssize_t r = write(p[1], src, seq[i].len);

		at += (size_t)snprintf(res + at, sizeof(res) - at, " %s%zu=%s",
				       seq[i].flags ? "packet " : "", seq[i].len, t_res(r, errno));
	}
	t_log("O_DIRECT on, off, on again: writes%s", res);
	t_set_nonblock(p[1], false);
	pid_t pid = len_reader(p[0], 65536, l);

	t_close(p[0]);
	t_close(p[1]);
	t_wait(pid);
	print_lens("O_DIRECT on, off, on again", l);
	munmap(l, sizeof(*l));
}

int main(void)
{
	t_init("diff-packet");
	src = (unsigned char *)t_map(2 * T_MIB) + 1;
	blocking_packets("pipe2(O_DIRECT), reads of 65536", O_DIRECT, false, 65536);
	blocking_packets("pipe2(O_DIRECT), reads of 1000", O_DIRECT, false, 1000);
	blocking_packets("pipe2(O_DIRECT), reads of 1MiB", O_DIRECT, false, T_MIB);
	blocking_packets("F_SETFL O_DIRECT later, reads of 65536", 0, true, 65536);
	nonblocking_packets();
	toggled();

	/* O_DIRECT on the read end only: the writer's flag is what counts. */
	struct lens *l = t_shared(sizeof(*l));
	int p[2];

	t_pipe(p, 0);
	if (fcntl(p[0], F_SETFL, O_DIRECT))
		t_die("F_SETFL O_DIRECT read end");
	t_set_nonblock(p[1], true);
	ssize_t r1 = write(p[1], src, 5000);
	ssize_t r2 = write(p[1], src, 70000);

	t_log("O_DIRECT on the read end only: write 5000 -> %s, 70000 -> %s", t_res(r1, errno),
	      t_res(r2, errno));
	t_set_nonblock(p[1], false);
	pid_t pid = len_reader(p[0], 65536, l);

	t_close(p[0]);
	t_close(p[1]);
	t_wait(pid);
	print_lens("O_DIRECT on the read end only", l);
	return t_finish();
}
