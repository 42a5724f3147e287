// SPDX-License-Identifier: MIT
/*
 * Shared pieces of the differential semantics tests; see helpers.h.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static FILE *t_out;
static int t_out_fd = -1;
static bool t_fail_seen;
static const char *t_name = "?";

volatile sig_atomic_t t_sig_count[65];

void t_init(const char *name)
{
	const char *path = getenv("T_TRANSCRIPT");

	t_name = name;
	if (path && *path) {
		t_out = fopen(path, "ae");
		if (!t_out) {
			fprintf(stderr, "%s: cannot open %s: %s\n", name, path, strerror(errno));
			exit(T_EXIT_ERROR);
		}
	} else {
		t_out = stdout;
	}
	t_out_fd = fileno(t_out);
	t_log("test %s", name);
}

__attribute__((format(printf, 2, 0))) static void t_vlog(const char *prefix, const char *fmt,
							 va_list ap)
{
	int saved = errno;

	if (!t_out)
		t_out = stdout;
	fputs(prefix, t_out);
	vfprintf(t_out, fmt, ap);
	fputc('\n', t_out);
	fflush(t_out);
	errno = saved;
}

void t_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	t_vlog("", fmt, ap);
	va_end(ap);
}

bool t_check(bool ok, const char *fmt, ...)
{
	va_list ap;

	if (ok)
		return true;
	t_fail_seen = true;
	va_start(ap, fmt);
	t_vlog("FAIL: ", fmt, ap);
	va_end(ap);
	return false;
}

void t_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	t_vlog("SKIP: ", fmt, ap);
	va_end(ap);
	exit(T_EXIT_SKIP);
}

void t_die(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	va_start(ap, fmt);
	t_vlog("ERROR: ", fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: setup failed (errno %s)\n", t_name, t_errname(e));
	exit(T_EXIT_ERROR);
}

bool t_failed(void)
{
	return t_fail_seen;
}

int t_finish(void)
{
	t_log("result: %s", t_fail_seen ? "FAIL" : "pass");
	if (t_out && t_out != stdout)
		fclose(t_out);
	else
		fflush(stdout);
	t_out = NULL;
	return t_fail_seen ? T_EXIT_FAIL : T_EXIT_PASS;
}

const char *t_errname(int e)
{
	static char other[8][16];
	static unsigned int next;
	const char *n = strerrorname_np(e);

	if (n)
		return n;
	char *b = other[next++ % 8];
	snprintf(b, sizeof(other[0]), "E%d", e);
	return b;
}

const char *t_signame(int sig)
{
	static char other[8][16];
	static unsigned int next;
	const char *n = sigabbrev_np(sig);

	if (n) {
		char *b = other[next++ % 8];
		snprintf(b, sizeof(other[0]), "SIG%s", n);
		return b;
	}
	char *b = other[next++ % 8];
	snprintf(b, sizeof(other[0]), "signal %d", sig);
	return b;
}

static char t_resbuf[8][48];
static unsigned int t_resnext;

const char *t_res(ssize_t r, int err)
{
	char *b = t_resbuf[t_resnext++ % 8];

	if (r < 0)
		snprintf(b, sizeof(t_resbuf[0]), "%zd %s", r, t_errname(err));
	else
		snprintf(b, sizeof(t_resbuf[0]), "%zd", r);
	return b;
}

const char *t_status(int status)
{
	char *b = t_resbuf[t_resnext++ % 8];

	if (WIFEXITED(status))
		snprintf(b, sizeof(t_resbuf[0]), "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(b, sizeof(t_resbuf[0]), "killed by %s", t_signame(WTERMSIG(status)));
	else
		snprintf(b, sizeof(t_resbuf[0]), "status %#x", status);
	return b;
}

/* splitmix64's finaliser: one 64-bit word of pattern per 8 stream bytes. */
static inline uint64_t t_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static inline uint64_t t_word(uint64_t seed, uint64_t block)
{
	return t_mix(block * 0xd1342543de82ef95ULL + seed * 0x2545f4914f6cdd1dULL);
}

unsigned char t_pattern_byte(uint64_t seed, uint64_t pos)
{
	return (unsigned char)(t_word(seed, pos >> 3) >> ((pos & 7) * 8));
}

void t_fill(void *buf, size_t len, uint64_t seed, uint64_t pos)
{
	unsigned char *p = buf;
	size_t i = 0;

	while (i < len && ((pos + i) & 7))
		p[i] = t_pattern_byte(seed, pos + i), i++;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = t_word(seed, (pos + i) >> 3);

		for (int k = 0; k < 8; k++)
			p[i + k] = (unsigned char)(w >> (k * 8));
	}
	for (; i < len; i++)
		p[i] = t_pattern_byte(seed, pos + i);
}

size_t t_verify(const void *buf, size_t len, uint64_t seed, uint64_t pos)
{
	const unsigned char *p = buf;
	unsigned char tmp[4096];

	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof(tmp) ? len - done : sizeof(tmp);

		t_fill(tmp, n, seed, pos + done);
		if (memcmp(tmp, p + done, n)) {
			for (size_t i = 0; i < n; i++)
				if (tmp[i] != p[done + i])
					return done + i;
		}
		done += n;
	}
	return len;
}

void t_scribble(void *buf, size_t len)
{
	memset(buf, 0xa5, len);
}

uint64_t t_fnv(uint64_t h, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

uint64_t t_pattern_fnv(uint64_t seed, uint64_t pos, size_t len)
{
	unsigned char tmp[4096];
	uint64_t h = T_FNV_INIT;

	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof(tmp) ? len - done : sizeof(tmp);

		t_fill(tmp, n, seed, pos + done);
		h = t_fnv(h, tmp, n);
		done += n;
	}
	return h;
}

void *t_map(size_t len)
{
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		       0);

	if (p == MAP_FAILED)
		t_die("mmap %zu", len);
	return p;
}

void *t_shared(size_t len)
{
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		       0);

	if (p == MAP_FAILED)
		t_die("mmap shared %zu", len);
	return p;
}

void t_buf_alloc(struct t_buf *b, size_t len, size_t offset)
{
	size_t body = (offset + len + T_PAGE - 1) & ~(T_PAGE - 1);

	b->map_len = body + T_PAGE;
	b->map = t_map(b->map_len);
	if (mprotect((char *)b->map + body, T_PAGE, PROT_NONE))
		t_die("mprotect guard");
	/* The buffer ends right at the guard page when offset + len is page aligned. */
	b->p = (unsigned char *)b->map + offset;
	b->len = len;
}

void t_buf_free(struct t_buf *b)
{
	munmap(b->map, b->map_len);
	b->map = NULL;
	b->p = NULL;
}

void t_pipe(int fds[2], int flags)
{
	if (pipe2(fds, flags))
		t_die("pipe2(%#x)", flags);
}

void t_close(int fd)
{
	if (close(fd))
		t_die("close(%d)", fd);
}

void t_set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK))
		t_die("F_SETFL O_NONBLOCK");
}

int t_pipe_size_set(int fd, int size)
{
	int r = fcntl(fd, F_SETPIPE_SZ, size);

	return r < 0 ? -errno : r;
}

int t_fionread(int fd)
{
	int n = -1;

	if (ioctl(fd, FIONREAD, &n))
		t_die("FIONREAD");
	return n;
}

ssize_t t_write_all(int fd, const void *buf, size_t len)
{
	return t_write_all_by(write, fd, buf, len);
}

ssize_t t_write_all_by(ssize_t (*put)(int, const void *, size_t), int fd, const void *buf,
		       size_t len)
{
	const unsigned char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t r = put(fd, p + done, len - done);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return done ? (ssize_t)done : -errno;
		}
		done += (size_t)r;
	}
	return (ssize_t)done;
}

uint64_t t_write_stream(int fd, void *buf, size_t chunk, uint64_t seed, uint64_t pos, uint64_t end,
			const char *what)
{
	for (; pos < end; pos += chunk) {
		ssize_t r;

		t_fill(buf, chunk, seed, pos);
		r = write(fd, buf, chunk);
		if (r != (ssize_t)chunk) {
			t_log("write to %s at %llu -> %s", what, (unsigned long long)pos,
			      t_res(r, errno));
			break;
		}
	}
	return pos;
}

ssize_t t_read_full(int fd, void *buf, size_t len)
{
	unsigned char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t r = read(fd, p + done, len - done);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

size_t t_drain(int fd)
{
	static unsigned char sink[65536];
	int fl = fcntl(fd, F_GETFL);
	size_t total = 0;

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK))
		t_die("drain F_SETFL");
	for (;;) {
		ssize_t r = read(fd, sink, sizeof(sink));

		if (r <= 0)
			break;
		total += (size_t)r;
	}
	fcntl(fd, F_SETFL, fl);
	return total;
}

static int t_cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

void t_close_all_but(const int *keep, int nkeep)
{
	int k[16];
	int n = 0;
	unsigned int from = 3;

	if (nkeep > 14)
		t_die("t_close_all_but: too many fds");
	for (int i = 0; i < nkeep; i++)
		if (keep[i] >= 3)
			k[n++] = keep[i];
	if (t_out_fd >= 3)
		k[n++] = t_out_fd;
	qsort(k, (size_t)n, sizeof(k[0]), t_cmp_int);
	for (int i = 0; i < n; i++) {
		if ((unsigned int)k[i] > from)
			close_range(from, (unsigned int)k[i] - 1, 0);
		from = (unsigned int)k[i] + 1;
	}
	close_range(from, ~0U, 0);
}

static const char *t_tmp_base(void)
{
	const char *d = getenv("TMPDIR");

	return d && *d ? d : "/tmp";
}

int t_tmpfile(void)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/ppipe-test-XXXXXX", t_tmp_base());
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		t_die("mkostemp in %s", t_tmp_base());
	unlink(path);
	return fd;
}

const char *t_tmpdir(void)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/ppipe-test-XXXXXX", t_tmp_base());
	if (!mkdtemp(path))
		t_die("mkdtemp in %s", t_tmp_base());
	return path;
}

pid_t t_fork(void)
{
	pid_t pid;

	if (t_out)
		fflush(t_out);
	pid = fork();
	if (pid < 0)
		t_die("fork");
	return pid;
}

int t_wait(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			t_die("waitpid");
	return status;
}

void t_sigaction(int sig, void (*handler)(int), bool restart)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL))
		t_die("sigaction(%d)", sig);
}

void t_sig_counter(int sig)
{
	if (sig > 0 && sig < 65)
		t_sig_count[sig]++;
}

void t_usleep(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void t_read_result_add(struct t_read_result *res, const void *buf, size_t n, uint64_t seed,
		       uint64_t pos)
{
	if (res->first_bad == UINT64_MAX) {
		size_t bad = t_verify(buf, n, seed, pos + res->bytes);

		if (bad < n)
			res->first_bad = res->bytes + bad;
	}
	res->fnv = t_fnv(res->fnv, buf, n);
	res->bytes += n;
}

void t_reader_start(struct t_reader *r, int rfd, size_t read_size, uint64_t seed, uint64_t pos,
		    long delay_us)
{
	r->res = t_shared(sizeof(*r->res));
	memset(r->res, 0, sizeof(*r->res));
	r->pid = t_fork();
	if (r->pid)
		return;

	struct t_read_result *res = r->res;
	unsigned char *buf = t_map(read_size);

	t_close_all_but(&rfd, 1);
	res->fnv = T_FNV_INIT;
	res->first_bad = UINT64_MAX;
	if (delay_us)
		t_usleep(delay_us);
	for (;;) {
		ssize_t n = read(rfd, buf, read_size);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			res->err = errno;
			break;
		}
		if (n == 0)
			break;
		res->reads++;
		t_read_result_add(res, buf, (size_t)n, seed, pos);
	}
	res->done = 1;
	_exit(0);
}

bool t_reader_finish(struct t_reader *r, const char *what, uint64_t expect_bytes)
{
	int status = t_wait(r->pid);
	struct t_read_result *res = r->res;
	bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && res->done && !res->err &&
		  res->bytes == expect_bytes && res->first_bad == UINT64_MAX;

	t_log("%s: read=%llu fnv=%016llx %s", what, (unsigned long long)res->bytes,
	      (unsigned long long)res->fnv, ok ? "ok" : "BAD");
	if (!ok) {
		if (res->first_bad != UINT64_MAX)
			t_check(false, "%s: first wrong byte at offset %llu", what,
				(unsigned long long)res->first_bad);
		else
			t_check(false, "%s: reader %s err=%s bytes=%llu expected=%llu", what,
				t_status(status), res->err ? t_errname(res->err) : "-",
				(unsigned long long)res->bytes, (unsigned long long)expect_bytes);
	}
	munmap(res, sizeof(*res));
	r->res = NULL;
	return ok;
}

static inline unsigned char t_tag_byte(unsigned int w, uint64_t pos, uint64_t *cache_blk,
				       uint64_t *cache_val)
{
	uint64_t blk = pos >> 3;

	if (blk != *cache_blk) {
		*cache_blk = blk;
		*cache_val = t_word(1000 + w, blk);
	}
	return (unsigned char)((w << 4) | ((*cache_val >> ((pos & 7) * 8)) & 0x0f));
}

void t_tag_fill(void *buf, size_t len, unsigned int w, uint64_t pos)
{
	unsigned char *p = buf;
	uint64_t blk = UINT64_MAX, val = 0;

	for (size_t i = 0; i < len; i++)
		p[i] = t_tag_byte(w, pos + i, &blk, &val);
}

uint64_t t_tag_fnv(unsigned int w, uint64_t len)
{
	unsigned char tmp[4096];
	uint64_t h = T_FNV_INIT;

	for (uint64_t done = 0; done < len;) {
		size_t n = len - done < sizeof(tmp) ? (size_t)(len - done) : sizeof(tmp);

		t_tag_fill(tmp, n, w, done);
		h = t_fnv(h, tmp, n);
		done += n;
	}
	return h;
}

void t_demux_init(struct t_demux *d, unsigned int writers)
{
	memset(d, 0, sizeof(*d));
	d->writers = writers;
	for (unsigned int w = 0; w < T_MAX_WRITERS; w++)
		d->fnv[w] = T_FNV_INIT;
	d->cur = -1;
}

static void t_demux_run_end(struct t_demux *d)
{
	if (d->cur >= 0 && d->rec_size[d->cur] && d->pos[d->cur] % d->rec_size[d->cur])
		d->torn++;
}

void t_demux_feed(struct t_demux *d, const void *buf, size_t len)
{
	static __thread uint64_t blk[T_MAX_WRITERS], val[T_MAX_WRITERS];
	static __thread bool primed;
	const unsigned char *p = buf;

	if (!primed) {
		for (unsigned int w = 0; w < T_MAX_WRITERS; w++)
			blk[w] = UINT64_MAX;
		primed = true;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned int w = p[i] >> 4;

		if (w >= d->writers) {
			d->foreign++;
			continue;
		}
		if ((int)w != d->cur) {
			t_demux_run_end(d);
			d->cur = (int)w;
		}
		if (p[i] != t_tag_byte(w, d->pos[w], &blk[w], &val[w]))
			d->bad++;
		d->fnv[w] = (d->fnv[w] ^ p[i]) * 0x100000001b3ULL;
		d->pos[w]++;
	}
}

void t_demux_end(struct t_demux *d)
{
	t_demux_run_end(d);
	d->cur = -1;
}

#if defined(__x86_64__)
#define T_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define T_AUDIT_ARCH AUDIT_ARCH_AARCH64
#elif defined(__i386__)
#define T_AUDIT_ARCH AUDIT_ARCH_I386
#endif

int t_seccomp_deny(int nr1, int nr2, int err)
{
#ifdef T_AUDIT_ARCH
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, T_AUDIT_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)nr1, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)nr2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K,
			 SECCOMP_RET_ERRNO | ((unsigned int)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { (unsigned short)T_ARRAY_SIZE(f), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
#else
	(void)nr1, (void)nr2, (void)err;
	errno = ENOSYS;
	return -1;
#endif
}
