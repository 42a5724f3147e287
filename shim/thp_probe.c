// SPDX-License-Identifier: MIT
/*
 * Whether rings should be backed by transparent huge pages. It depends on
 * the kernel: on 6.1 a THP-backed ring made vmsplice several times slower,
 * on 6.18 it is faster. PPIPE_THP=auto measures, once per process and
 * only when a ring big enough for a huge page is first wanted: the same
 * 1 MiB is vmspliced through a scratch pipe and read back, from a huge
 * page region and from a 4 KiB page region, alternately. Huge pages are
 * used only when they win clearly. System calls and the vDSO clock only,
 * no allocation: this may run inside a write from a signal handler.
 */
#include "config.h"
#include "log.h"
#include "once.h"
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define REGION (2ul << 20)
#define CHUNK (64ul << 10)
#define PASS (1ul << 20) /* bytes pushed per timed pass */
#define ROUNDS 3
/* Huge pages must be at least this much faster, in percent of the 4 KiB time. */
#define WIN_PCT 90

static int state = PP_ONCE_UNKNOWN; /* YES: huge pages win */
static const char *verdict = "not measured yet";
static char verdict_buf[80];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* "never" in the system's THP mode: nothing to measure. */
static bool thp_disabled_here(void)
{
	char buf[128];
	long n;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/sys/kernel/mm/transparent_hugepage/enabled",
			      O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return true;
	n = syscall(SYS_read, fd, buf, sizeof(buf) - 1);
	syscall(SYS_close, fd);
	if (n <= 0)
		return true;
	buf[n] = 0;
	for (char *s = buf; *s; s++)
		if (s[0] == '[' && s[1] == 'n' && s[2] == 'e')
			return true;
	return false;
}

/* A populated, 2 MiB-aligned region of REGION bytes, huge-page backed or not. */
static char *region_map(bool huge)
{
	char *p = pp_map_aligned(REGION, true);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, REGION, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	pp_populate(p, REGION);
	return p;
}

/* Nanoseconds to push @src through the pipe and read it back; 0 on error. */
static uint64_t one_pass(int rfd, int wfd, char *src, char *sink)
{
	uint64_t t0 = now_ns();

	for (size_t off = 0; off < PASS; off += CHUNK) {
		struct iovec v = { src + off, CHUNK };

		while (v.iov_len) {
			long n = syscall(SYS_vmsplice, wfd, &v, 1, 0);

			if (n <= 0)
				return 0;
			v.iov_base = (char *)v.iov_base + n;
			v.iov_len -= (size_t)n;
		}
		for (size_t got = 0; got < CHUNK;) {
			long n = syscall(SYS_read, rfd, sink + got, CHUNK - got);

			if (n <= 0)
				return 0;
			got += (size_t)n;
		}
	}
	return now_ns() - t0;
}

static void set_verdict(const char *what, uint64_t huge_ns, uint64_t small_ns)
{
	/* "<what>: huge pages took NNN% of the 4 KiB page time" */
	static const char mid[] = ": huge pages took ";
	static const char tail[] = "% of the 4 KiB page time";
	uint64_t pct = small_ns ? huge_ns * 100 / small_ns : 0;
	char num[24];
	size_t n = 0, len = 0;

	do
		num[n++] = (char)('0' + pct % 10);
	while ((pct /= 10) && n < sizeof(num));
	for (const char *s = what; *s && len < sizeof(verdict_buf) - 1; s++)
		verdict_buf[len++] = *s;
	for (const char *s = mid; *s && len < sizeof(verdict_buf) - 1; s++)
		verdict_buf[len++] = *s;
	while (n && len < sizeof(verdict_buf) - 1)
		verdict_buf[len++] = num[--n];
	for (const char *s = tail; *s && len < sizeof(verdict_buf) - 1; s++)
		verdict_buf[len++] = *s;
	verdict_buf[len] = 0;
	verdict = verdict_buf;
}

static bool measure(void)
{
	char *huge = NULL, *small = NULL, *sink = NULL;
	uint64_t best_huge = UINT64_MAX, best_small = UINT64_MAX;
	bool win = false;
	int fds[2];

	if (thp_disabled_here()) {
		verdict = "off: transparent huge pages are disabled on this system";
		return false;
	}
	if (syscall(SYS_pipe2, fds, O_CLOEXEC)) {
		verdict = "off: no scratch pipe to measure with";
		return false;
	}
	/* 64 KiB chunks fit a default pipe; a bigger one just waits less. */
	syscall(SYS_fcntl, fds[1], F_SETPIPE_SZ, 1 << 20);
	huge = region_map(true);
	small = region_map(false);
	sink = (char *)syscall(SYS_mmap, NULL, CHUNK, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!huge || !small || sink == MAP_FAILED) {
		verdict = "off: no memory to measure with";
		goto out;
	}
	/* A warm-up pass each, then alternate and keep the best of each. */
	one_pass(fds[0], fds[1], huge, sink);
	one_pass(fds[0], fds[1], small, sink);
	for (int i = 0; i < ROUNDS; i++) {
		uint64_t h = one_pass(fds[0], fds[1], huge, sink);
		uint64_t s = one_pass(fds[0], fds[1], small, sink);

		if (!h || !s) {
			verdict = "off: the scratch pipe failed";
			goto out;
		}
		best_huge = h < best_huge ? h : best_huge;
		best_small = s < best_small ? s : best_small;
	}
	win = best_huge * 100 < best_small * WIN_PCT;
	set_verdict(win ? "on, measured" : "off, measured", best_huge, best_small);
out:
	if (sink && sink != MAP_FAILED)
		syscall(SYS_munmap, sink, CHUNK);
	if (small)
		syscall(SYS_munmap, small, REGION);
	if (huge)
		syscall(SYS_munmap, huge, REGION);
	syscall(SYS_close, fds[0]);
	syscall(SYS_close, fds[1]);
	return win;
}

bool pp_thp_wanted(void)
{
	enum pp_once s;
	int saved;
	bool win;

	if (pp_cfg.thp != PP_THP_AUTO)
		return pp_cfg.thp == PP_THP_ON;
	/* While another thread (or this one, interrupted) measures: small pages. */
	s = pp_once_begin(&state);
	if (s != PP_ONCE_UNKNOWN)
		return s == PP_ONCE_YES;
	saved = errno;
	win = measure();
	errno = saved;
	pp_debug("thp: %s", verdict);
	pp_once_end(&state, win);
	return win;
}

const char *pp_thp_verdict(void)
{
	bool win;

	if (pp_cfg.thp != PP_THP_AUTO)
		return pp_cfg.thp == PP_THP_ON ? "on: PPIPE_THP=on" : "off: PPIPE_THP=off";
	return pp_once_decided(&state, &win) ? verdict : "not measured: no ring needed huge pages";
}

void pp_thp_after_fork_child(void)
{
	/* The measurement holds for the child too; only an unfinished one is retried. */
	if (__atomic_load_n(&state, __ATOMIC_RELAXED) == PP_ONCE_RUNNING)
		state = PP_ONCE_UNKNOWN;
}
