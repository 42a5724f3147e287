// SPDX-License-Identifier: MIT
/*
 * diff-stdio: stdio streams writing into pipes, as a program sees them.
 *
 * fwrite() of many sizes and item sizes, after bytes already buffered;
 * fputs() and the _unlocked forms; every buffering (glibc's default,
 * setvbuf buffers of 5000 bytes, 64 KiB and 1 MiB, line-buffered,
 * unbuffered); fwrite() and write() mixed on one fd; four threads
 * fwrite()ing records to one FILE (none may land inside another); a
 * stream set FSETLOCKING_BYCALLER; a full non-blocking pipe; a reader
 * that closes mid-write, with SIGPIPE caught and with it fatal; a signal
 * that interrupts a blocked fwrite(); fdopen() on a pipe end, stdout on a
 * pipe and freopen() of it; popen(); wide, cookie and memory streams;
 * bytes still buffered at fork(), exit(), _exit() and fclose(). For each:
 * what the call returned, ferror(), errno, the signals, and every byte a
 * reader got, in order.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wchar.h>

static unsigned char *src;
static uint64_t pos; /* where the current case's stream is */

/* The next @len bytes of stream @seed, for a write. */
static const unsigned char *next_bytes(uint64_t seed, size_t len)
{
	t_fill(src, len, seed, pos);
	return src;
}

static const char *errname(int e)
{
	return e ? t_errname(e) : "0";
}

/* fwrite() of @size x @count bytes of stream @seed; logs what a program sees. */
static size_t put(FILE *f, uint64_t seed, size_t size, size_t count, const char *what)
{
	size_t r;
	int e;

	errno = 0;
	r = fwrite(next_bytes(seed, size * count), size, count, f);
	e = errno;
	t_log("%s: fwrite(%zu x %zu) -> %zu, ferror %d, errno %s", what, size, count, r, ferror(f),
	      r == count ? "-" : errname(e));
	pos += r * size;
	return r;
}

/* A pipe with a reader of stream @seed; the write end as a stream made by fdopen() in @mode. */
struct piped {
	int fds[2];
	FILE *f;
	struct t_reader rd;
};

static void piped_open(struct piped *p, uint64_t seed, const char *mode)
{
	t_pipe(p->fds, O_CLOEXEC);
	t_reader_start(&p->rd, p->fds[0], 65536, seed, 0, 0);
	t_close(p->fds[0]);
	p->f = fdopen(p->fds[1], mode);
	if (!p->f)
		t_die("fdopen");
	pos = 0;
}

static void piped_close(struct piped *p, const char *what)
{
	int r = fclose(p->f);

	t_log("%s: fclose -> %d", what, r);
	t_reader_finish(&p->rd, what, pos);
}

/* Sizes of writes and of items: below, at and above a buffer, PIPE_BUF, the threshold. */
static void sizes(void)
{
	static const size_t lens[] = { 1,     100,   4095,   4096,   4097,	   8192,
				       10240, 16384, 20000,  65536,  65537,	   131072,
				       T_MIB, 99999, 262144, 300000, 3 * T_MIB + 7 };
	static const size_t items[] = { 1, 3, 4096, 0 };
	struct piped p;

	piped_open(&p, 11, "w");
	for (size_t i = 0; i < T_ARRAY_SIZE(lens); i++)
		for (size_t k = 0; k < T_ARRAY_SIZE(items); k++) {
			size_t size = items[k] ? items[k] : lens[i];
			size_t count = items[k] ? lens[i] / items[k] : 1;
			char what[80];

			if (!count)
				continue;
			snprintf(what, sizeof(what), "default buffer, %zu bytes as %zu x %zu",
				 lens[i], count, size);
			put(p.f, 11, size, count, what);
		}
	put(p.f, 11, 0, 5, "zero-size items");
	put(p.f, 11, 5, 0, "zero items");
	piped_close(&p, "sizes");
}

/* Each buffering, with odd amounts already buffered before the large writes. */
static void bufferings(void)
{
	static const struct {
		const char *name;
		int mode;
		size_t size;
	} bufs[] = {
		{ "setvbuf 5000", _IOFBF, 5000 },   { "setvbuf 65536", _IOFBF, 65536 },
		{ "setvbuf 1 MiB", _IOFBF, T_MIB }, { "line-buffered", _IOLBF, 4096 },
		{ "unbuffered", _IONBF, 0 },	    { "setvbuf 4096 own", _IOFBF, 4096 },
	};

	for (size_t b = 0; b < T_ARRAY_SIZE(bufs); b++) {
		struct piped p;
		char *mine = bufs[b].size ? malloc(bufs[b].size) : NULL;

		piped_open(&p, 12, "w");
		if (setvbuf(p.f, mine, bufs[b].mode, bufs[b].size))
			t_die("setvbuf");
		for (size_t n = 1; n <= 3 * T_MIB; n = n * 7 + 4093) {
			put(p.f, 12, 1, 777, bufs[b].name);
			put(p.f, 12, 1, n, bufs[b].name);
		}
		/* The pattern has newlines of its own: the line-buffered stream flushes at them. */
		put(p.f, 12, 1, 40000, bufs[b].name);
		piped_close(&p, bufs[b].name);
		free(mine);
	}
}

/* A reader that hashes all it reads, for bytes that are not one pattern stream. */
struct hashed {
	uint64_t bytes, fnv;
};

static pid_t hash_reader(int rfd, struct hashed *h)
{
	pid_t pid = t_fork();

	if (!pid) {
		unsigned char *buf = t_map(65536);
		ssize_t n;

		t_close_all_but(&rfd, 1);
		h->fnv = T_FNV_INIT;
		while ((n = read(rfd, buf, 65536)) > 0) {
			h->fnv = t_fnv(h->fnv, buf, (size_t)n);
			h->bytes += (uint64_t)n;
		}
		_exit(0);
	}
	return pid;
}

/* fputs() and the _unlocked forms; a stream the caller locks itself. */
static void strings_and_unlocked(void)
{
	struct hashed *h = t_shared(sizeof(*h));
	uint64_t fnv = T_FNV_INIT, sent = 0;
	char *s = malloc(200001);
	int fds[2];
	FILE *f;
	pid_t rp;

	t_pipe(fds, O_CLOEXEC);
	rp = hash_reader(fds[0], h);
	t_close(fds[0]);
	f = fdopen(fds[1], "w");
	for (size_t n = 10; n <= 200000; n = n * 5 + 3) {
		int r;

		/* The pattern's bytes with their low bit set: a string has no NUL. */
		t_fill(s, n, 13, sent);
		for (size_t i = 0; i < n; i++)
			s[i] |= 1;
		s[n] = 0;
		r = n % 2 ? fputs(s, f) : fputs_unlocked(s, f);
		t_log("fputs%s %zu -> %d", n % 2 ? "" : "_unlocked", n, r);
		fnv = t_fnv(fnv, s, n);
		sent += n;
	}
	flockfile(f);
	t_fill(src, 70000, 13, sent);
	t_log("under flockfile: fwrite_unlocked 70000 -> %zu", fwrite_unlocked(src, 1, 70000, f));
	funlockfile(f);
	fnv = t_fnv(fnv, src, 70000);
	sent += 70000;
	__fsetlocking(f, FSETLOCKING_BYCALLER);
	t_fill(src, 90000, 13, sent);
	t_log("FSETLOCKING_BYCALLER: fwrite 90000 -> %zu", fwrite(src, 1, 90000, f));
	fnv = t_fnv(fnv, src, 90000);
	sent += 90000;
	t_log("strings: fclose -> %d", fclose(f));
	t_wait(rp);
	t_log("strings: reader got %llu bytes, %s", (unsigned long long)h->bytes,
	      h->bytes == sent && h->fnv == fnv ? "intact" : "BAD");
	t_check(h->bytes == sent && h->fnv == fnv, "strings");
	free(s);
}

/* write() on the stream's fd between fwrite()s: it overtakes what the stream holds. */
static void mixed_with_write(void)
{
	int fds[2];
	struct t_reader rd;
	FILE *f;
	uint64_t wpos = 0;

	t_pipe(fds, O_CLOEXEC);
	t_reader_start(&rd, fds[0], 65536, 14, 0, 0);
	t_close(fds[0]);
	f = fdopen(fds[1], "w");
	/* 100 bytes stay in the buffer; write() sends 64 KiB ahead of them. */
	t_fill(src, 100, 14, 65536);
	t_log("mixed: fwrite 100 -> %zu", fwrite(src, 1, 100, f));
	t_fill(src, 65536, 14, 0);
	t_log("mixed: write 65536 -> %s", t_res(write(fds[1], src, 65536), errno));
	wpos = 65636;
	/* A large fwrite: the 100 held bytes go first. */
	t_fill(src, 200000, 14, wpos);
	t_log("mixed: fwrite 200000 -> %zu", fwrite(src, 1, 200000, f));
	wpos += 200000;
	/* What the stream still holds goes before the next write(). */
	t_log("mixed: fflush -> %d", fflush(f));
	t_fill(src, 70000, 14, wpos);
	t_log("mixed: write 70000 -> %s", t_res(write(fds[1], src, 70000), errno));
	wpos += 70000;
	t_log("mixed: fclose -> %d", fclose(f));
	t_reader_finish(&rd, "mixed", wpos);
}

/* Four threads, one FILE: each fwrite() of a record is whole in the pipe. */
struct thread_arg {
	FILE *f;
	unsigned int w;
	size_t rec;
	int records;
};

static void *thread_writer(void *arg)
{
	struct thread_arg *a = arg;
	unsigned char *buf = malloc(a->rec);

	for (int i = 0; i < a->records; i++) {
		t_tag_fill(buf, a->rec, a->w, (uint64_t)i * a->rec);
		if (fwrite(buf, 1, a->rec, a->f) != a->rec)
			break;
	}
	free(buf);
	return NULL;
}

static void threads(void)
{
	static const size_t recs[] = { 20000, 65536, 4096 * 3 + 1, 200 };
	int fds[2];
	struct t_demux *d = t_shared(sizeof(*d));
	struct thread_arg args[4];
	pthread_t th[4];
	pid_t pid;
	FILE *f;

	t_pipe(fds, O_CLOEXEC);
	t_demux_init(d, 4);
	for (unsigned int w = 0; w < 4; w++)
		d->rec_size[w] = recs[w];
	pid = t_fork();
	if (!pid) {
		unsigned char *buf = t_map(65536);
		ssize_t n;

		t_close(fds[1]);
		while ((n = read(fds[0], buf, 65536)) > 0)
			t_demux_feed(d, buf, (size_t)n);
		t_demux_end(d);
		_exit(0);
	}
	t_close(fds[0]);
	f = fdopen(fds[1], "w");
	for (unsigned int w = 0; w < 4; w++) {
		args[w] = (struct thread_arg){ f, w, recs[w], w == 3 ? 3000 : 60 };
		pthread_create(&th[w], NULL, thread_writer, &args[w]);
	}
	for (unsigned int w = 0; w < 4; w++)
		pthread_join(th[w], NULL);
	fclose(f);
	t_wait(pid);
	for (unsigned int w = 0; w < 4; w++) {
		uint64_t want = recs[w] * (uint64_t)args[w].records;

		t_log("threads: writer %u: %llu bytes, %s", w, (unsigned long long)d->pos[w],
		      d->pos[w] == want && d->fnv[w] == t_tag_fnv(w, want) ? "intact" : "BAD");
		t_check(d->pos[w] == want && d->fnv[w] == t_tag_fnv(w, want), "thread %u", w);
	}
	t_log("threads: torn=%llu bad=%llu foreign=%llu", (unsigned long long)d->torn,
	      (unsigned long long)d->bad, (unsigned long long)d->foreign);
	t_check(!d->torn && !d->bad && !d->foreign, "records torn or bad");
}

/* A non-blocking pipe nobody reads: the count that fits, EAGAIN, and what the buffer keeps. */
static void full_nonblocking(void)
{
	static const size_t bufsz[] = { 0, 5000, 65536 };

	for (size_t b = 0; b < T_ARRAY_SIZE(bufsz); b++) {
		int fds[2];
		FILE *f;
		size_t got = 0, queued;
		unsigned char *back = t_map(4 * T_MIB);
		char what[64];

		snprintf(what, sizeof(what), "non-blocking, buffer %zu", bufsz[b]);
		t_pipe(fds, O_CLOEXEC | O_NONBLOCK);
		f = fdopen(fds[1], "w");
		if (bufsz[b])
			setvbuf(f, NULL, _IOFBF, bufsz[b]);
		pos = 0;
		put(f, 15, 1, 300, what);
		put(f, 15, 1, T_MIB, what);
		queued = (size_t)t_fionread(fds[0]);
		t_log("%s: the pipe holds %zu", what, queued);
		clearerr(f);
		put(f, 15, 1, 50000, what);
		/* Read back what the pipe holds: the stream's bytes from its start, in order. */
		for (ssize_t n; (n = read(fds[0], back + got, 4 * T_MIB - got)) > 0;)
			got += (size_t)n;
		t_log("%s: read back %zu, %s", what, got,
		      t_verify(back, got, 15, 0) == got ? "in order" : "BAD");
		t_check(t_verify(back, got, 15, 0) == got, "non-blocking order");
		/* What fflush then says of the bytes the stream still holds. */
		errno = 0;
		t_log("%s: fflush -> %d, errno %s", what, fflush(f), errname(errno));
		fclose(f);
		t_close(fds[0]);
		munmap(back, 4 * T_MIB);
	}
}

/* The reader goes after 100000 bytes: EPIPE (SIGPIPE caught), or death by SIGPIPE. */
static void reader_closes(void)
{
	for (int fatal = 0; fatal < 2; fatal++) {
		struct {
			size_t r;
			int err, ferr, sigs;
		} *res = t_shared(sizeof(*res));
		int fds[2];
		pid_t rp, wp;

		t_pipe(fds, O_CLOEXEC);
		rp = t_fork();
		if (!rp) {
			unsigned char *buf = t_map(100000);

			t_close(fds[1]);
			t_read_full(fds[0], buf, 100000);
			_exit(t_verify(buf, 100000, 16, 0) == 100000 ? 0 : 3);
		}
		wp = t_fork();
		if (!wp) {
			FILE *f;

			t_close(fds[0]);
			t_sigaction(SIGPIPE, fatal ? SIG_DFL : t_sig_counter, true);
			f = fdopen(fds[1], "w");
			t_fill(src, 4 * T_MIB, 16, 0);
			errno = 0;
			res->r = fwrite(src, 1, 4 * T_MIB, f);
			res->err = errno;
			res->ferr = ferror(f);
			res->sigs = t_sig_count[SIGPIPE];
			_exit(0);
		}
		t_close(fds[0]);
		t_close(fds[1]);
		t_log("reader closes: reader %s", t_status(t_wait(rp)));
		t_log("reader closes, SIGPIPE %s: writer %s", fatal ? "fatal" : "caught",
		      t_status(t_wait(wp)));
		if (!fatal) {
			t_log("reader closes: fwrite -> %s, ferror %d, errno %s, SIGPIPE %d times",
			      res->r >= 100000 && res->r < 4 * T_MIB ? "partial>=100000" : "other",
			      res->ferr, errname(res->err), res->sigs);
		}
	}
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* Signals without SA_RESTART interrupt an fwrite() blocked on a full pipe. */
static void interrupted(void)
{
	int fds[2];
	FILE *f;
	size_t r, got = 0;
	unsigned char *back = t_map(4 * T_MIB);
	int e;

	t_pipe(fds, O_CLOEXEC);
	f = fdopen(fds[1], "w");
	t_sigaction(SIGALRM, on_alarm, false);
	t_fill(src, 4 * T_MIB, 17, 0);
	/*
	 * A write that moved bytes returns their count at a signal, and
	 * glibc writes again: a second signal ends that one, with EINTR.
	 */
	setitimer(ITIMER_REAL, &(struct itimerval){ { 0, 100000 }, { 0, 200000 } }, NULL);
	errno = 0;
	r = fwrite(src, 1, 4 * T_MIB, f);
	e = errno;
	setitimer(ITIMER_REAL, &(struct itimerval){ { 0, 0 }, { 0, 0 } }, NULL);
	t_log("interrupted: fwrite -> %s, ferror %d, errno %s",
	      r > 0 && r < 4 * T_MIB ? "partial" : "other", ferror(f), errname(e));
	t_set_nonblock(fds[0], true);
	for (ssize_t n; (n = read(fds[0], back + got, 65536)) > 0;)
		got += (size_t)n;
	t_log("interrupted: the pipe held what fwrite counted (less what the buffer keeps): %s",
	      got <= r && r - got < 65536 && t_verify(back, got, 17, 0) == got ? "yes" : "no");
	t_sigaction(SIGALRM, SIG_DFL, true);
	clearerr(f);
	__fpurge(f);
	fclose(f);
	t_close(fds[0]);
	munmap(back, 4 * T_MIB);
}

/* stdout on a pipe, written; freopen() of it onto another pipe, written again. */
static void standard_output(void)
{
	int a[2], b[2], saved = dup(1);
	struct t_reader ra, rb;
	char path[64];
	uint64_t n1;

	t_pipe(a, O_CLOEXEC);
	t_pipe(b, O_CLOEXEC);
	t_reader_start(&ra, a[0], 65536, 18, 0, 0);
	t_reader_start(&rb, b[0], 65536, 19, 0, 0);
	t_close(a[0]);
	t_close(b[0]);
	fflush(stdout);
	dup2(a[1], 1);
	t_close(a[1]);
	pos = 0;
	put(stdout, 18, 1, 123457, "stdout");
	put(stdout, 18, 4, 300000, "stdout");
	n1 = pos;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", b[1]);
	if (!freopen(path, "w", stdout))
		t_die("freopen");
	t_close(b[1]);
	pos = 0;
	put(stdout, 19, 1, 500001, "freopen'd stdout");
	fflush(stdout);
	dup2(saved, 1);
	t_close(saved);
	t_reader_finish(&ra, "stdout", n1);
	t_reader_finish(&rb, "freopen'd stdout", pos);
}

/* popen()'s stream: libc's own pipe to a shell's cat. */
static void popened(void)
{
	char cmd[4200], path[4100];
	FILE *p;
	int st;
	size_t r;

	snprintf(path, sizeof(path), "%s/popen.out", t_tmpdir());
	snprintf(cmd, sizeof(cmd), "exec cat > '%s'", path);
	p = popen(cmd, "w");
	if (!p)
		t_die("popen");
	t_fill(src, 2 * T_MIB, 20, 0);
	r = fwrite(src, 1, 2 * T_MIB, p);
	st = pclose(p);
	t_log("popen: fwrite 2 MiB -> %zu, pclose -> %s", r, t_status(st));
	{
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		unsigned char *back = t_map(2 * T_MIB);
		ssize_t n = t_read_full(fd, back, 2 * T_MIB);

		t_log("popen: the file holds %s, %s", t_res(n, errno),
		      n == (ssize_t)(2 * T_MIB) && t_verify(back, 2 * T_MIB, 20, 0) == 2 * T_MIB ?
			      "intact" :
			      "BAD");
		close(fd);
		munmap(back, 2 * T_MIB);
	}
}

static ssize_t cookie_write(void *c, const char *buf, size_t n)
{
	uint64_t *h = c;

	*h = t_fnv(*h, buf, n);
	return (ssize_t)n;
}

/* Streams that are no fd's: a cookie stream, fmemopen(), open_memstream(); and a wide one. */
static void other_streams(void)
{
	cookie_io_functions_t io = { .write = cookie_write };
	uint64_t h = T_FNV_INIT;
	FILE *c = fopencookie(&h, "w", io), *m;
	char *mem = malloc(300000), *ms = NULL;
	size_t msz = 0;
	struct piped p;

	t_fill(src, 200000, 21, 0);
	t_log("cookie: fwrite 200000 -> %zu", fwrite(src, 1, 200000, c));
	fclose(c);
	t_log("cookie: %s", h == t_pattern_fnv(21, 0, 200000) ? "intact" : "BAD");
	m = fmemopen(mem, 300000, "w");
	t_log("fmemopen: fwrite 200000 -> %zu", fwrite(src, 1, 200000, m));
	fclose(m);
	t_log("fmemopen: %s", t_verify(mem, 200000, 21, 0) == 200000 ? "intact" : "BAD");
	m = open_memstream(&ms, &msz);
	t_log("open_memstream: fwrite 200000 -> %zu", fwrite(src, 1, 200000, m));
	fclose(m);
	t_log("open_memstream: %zu bytes, %s", msz,
	      t_verify(ms, msz, 21, 0) == msz ? "intact" : "BAD");
	free(ms);
	free(mem);

	piped_open(&p, 22, "w");
	t_log("wide: fwide -> %d", fwide(p.f, 1));
	errno = 0;
	t_log("wide: fwrite 100000 -> %zu, ferror %d",
	      fwrite(next_bytes(22, 100000), 1, 100000, p.f), ferror(p.f));
	piped_close(&p, "wide");
}

/* Bytes still in the buffer when the process forks, exits, _exits, or closes the stream. */
static void held_bytes(void)
{
	static const char *const how[] = { "fork", "exit", "_exit", "fclose" };

	for (size_t k = 0; k < T_ARRAY_SIZE(how); k++) {
		int fds[2];
		struct t_reader rd;
		uint64_t want;
		pid_t pid;

		t_pipe(fds, O_CLOEXEC);
		t_reader_start(&rd, fds[0], 65536, 23, 0, 0);
		t_close(fds[0]);
		pid = t_fork();
		if (!pid) {
			FILE *f = fdopen(fds[1], "w");

			pos = 0;
			put(f, 23, 1, 100000, how[k]);
			if (k == 0) {
				/* The child of this fork holds the 1696 bytes too: only one writes on. */
				pid_t c = fork();

				if (!c) {
					put(f, 23, 1, 70000, how[k]);
					exit(0);
				}
				waitpid(c, NULL, 0);
				__fpurge(f);
				_exit(0);
			}
			if (k == 1)
				exit(0);
			if (k == 2)
				_exit(0);
			fclose(f);
			_exit(0);
		}
		t_close(fds[1]);
		t_log("%s: writer %s", how[k], t_status(t_wait(pid)));
		/* 100000 = 24 x 4096 + 1696: _exit() loses the 1696 the buffer holds. */
		want = k == 0 ? 170000 : k == 2 ? 100000 - 1696 : 100000;
		t_reader_finish(&rd, how[k], want);
	}
}

int main(void)
{
	t_init("diff-stdio");
	src = t_map(4 * T_MIB);
	signal(SIGPIPE, SIG_IGN);
	sizes();
	bufferings();
	strings_and_unlocked();
	mixed_with_write();
	threads();
	full_nonblocking();
	reader_closes();
	interrupted();
	standard_output();
	popened();
	other_streams();
	held_bytes();
	return t_finish();
}
