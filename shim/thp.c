// SPDX-License-Identifier: MIT
/*
 * The huge-page verdict, taken from the process's own traffic.
 *
 * Whether huge pages make rings faster depends on the kernel, and a
 * synthetic probe got it wrong: on Debian's 6.1 (measured in an emulated
 * guest), 1 MiB writes from a huge-page ring ran at a quarter of the
 * speed of a 4 KiB-page ring once the reader ran concurrently and the
 * ring had been faulted in by its own copies, while a probe that read
 * its own pre-faulted bytes back saw huge pages win; on 6.18 they win
 * either way. So nothing is assumed: rings that can hold huge pages start
 * on 4 KiB pages and take turns at both backings, a lap at a time (a lap
 * is the ring's size pushed into the pipe). A lap's sample is the time
 * the ring's writes spent inside write() per MiB: the copy, the faults of
 * steady traffic, vmsplice() and any wait for the reader, what the
 * application sees. The lap after a switch (and a ring's first, and one
 * after trimming) pays fresh page faults and is not counted; the next
 * one on the same pages is.
 *
 * A verdict for huge pages is then watched: in the emulated 6.1 guest,
 * some huge pages ran at full speed for a few laps and others at a
 * quarter of it, so a trial can be lucky. For WATCH_LAPS laps after it,
 * each huge-page lap is compared with the 4 KiB-page laps of the trial;
 * STRIKES laps in a row slower by DOUBT_PCT open a second trial, and
 * doubt after that one turns huge pages off for good.
 *
 * Called from inside writes, possibly in a signal handler: atomics and
 * system calls only, no allocation, no lock.
 */
#include "thp.h"

#include "config.h"
#include "fault.h"
#include "log.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HUGE_SIZE (2ul << 20)
/*
 * The rule, from laps measured on 6.18 and in the 6.1 guest (docs/design.md,
 * "Huge pages"): the median huge-page lap time over the median 4 KiB-page
 * lap time, over the first laps of each side (medians: one lap that the
 * scheduler stretched changes nothing). After EARLY_LAPS each: off at EARLY_OFF_PCT or
 * more, on at EARLY_ON_PCT or less; else after LAPS each: on below
 * ON_PCT. Huge pages must win clearly: where they make no difference
 * (the lucky pages of the 6.1 guest) they only cost memory, a whole
 * 2 MiB resident at the first touch, and risk the unlucky ones.
 */
#define EARLY_LAPS 3
#define LAPS 5
#define EARLY_OFF_PCT 200
#define EARLY_ON_PCT 80
#define ON_PCT 95
/* The watch after an "on" verdict. */
#define WATCH_LAPS 64
#define DOUBT_PCT 200
#define STRIKES 3
#define MAX_TRIALS 2
/*
 * PPIPE_TEST_THP_SLOW: the side named there is measured this many times
 * slower, far beyond what noise does to a lap (on a busy machine 4 KiB-page
 * laps took 13 times, once 25 times, the huge ones: a fourfold slowdown of
 * the huge side then still gave "on"). In "watch", 4 KiB-page laps in
 * trials, then huge-page laps while watched.
 */
#define TEST_SLOWDOWN 1000
#define TEST_WATCH_TRIAL_SLOWDOWN 4
#define TEST_WATCH_SLOWDOWN 1000

enum { OPEN, DECIDING, ON, OFF };

static int state = OPEN;
static int thp_usable = -1; /* the system's THP mode allows them; -1 not read yet */
static int asked; /* a ring that could hold huge pages was made */
static uint32_t trials = 1; /* trials opened so far */
/* The trial: laps claimed and samples stored per side (0: 4 KiB pages, 1: huge). */
static uint32_t taken[2], filled[2];
static uint64_t sample[2][LAPS]; /* ns per MiB */
/* The watch: the trial's 4 KiB-page time per MiB, laps watched, slow ones in a row. */
static uint64_t ref_small;
static uint32_t watched, strikes;
/* A buffer per verdict: a reader of the last one never sees the next one being written. */
static char verdict_buf[3][160];
static unsigned int conclusions; /* verdicts written: at most three (two trials, an undo) */
static const char *verdict = "";

bool pp_thp_eligible(size_t size)
{
	return pp_cfg.thp != PP_THP_OFF && size >= HUGE_SIZE && size % HUGE_SIZE == 0;
}

/* "never" in the system's THP mode, or no THP at all: nothing to measure. */
static bool system_allows(void)
{
	char buf[128];
	long n;
	int fd, v = __atomic_load_n(&thp_usable, __ATOMIC_RELAXED);

	if (v >= 0)
		return v;
	v = 0;
	fd = (int)syscall(SYS_openat, AT_FDCWD, "/sys/kernel/mm/transparent_hugepage/enabled",
			  O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = syscall(SYS_read, fd, buf, sizeof(buf) - 1);
		syscall(SYS_close, fd);
		if (n > 0) {
			v = 1;
			for (long i = 0; i + 2 < n; i++)
				if (buf[i] == '[' && buf[i + 1] == 'n' && buf[i + 2] == 'e')
					v = 0;
		}
	}
	__atomic_store_n(&thp_usable, v, __ATOMIC_RELAXED);
	return v;
}

/* A verdict line being written: its buffer and length. */
struct line {
	char *buf;
	size_t len;
};

static void put(struct line *l, const char *s)
{
	while (*s && l->len < sizeof(verdict_buf[0]) - 1)
		l->buf[l->len++] = *s++;
	l->buf[l->len] = 0;
}

static void put_num(struct line *l, uint64_t v)
{
	char num[24];
	size_t n = 0;

	do
		num[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < sizeof(num));
	while (n && l->len < sizeof(verdict_buf[0]) - 1)
		l->buf[l->len++] = num[--n];
	l->buf[l->len] = 0;
}

/*
 * Moves the state from @from to ON or OFF with a verdict line "<on|off>
 * @what <pct>% @tail" (or just @what when @pct is 0); only one caller
 * gets to do it.
 */
static void conclude(int from, bool huge, const char *what, uint64_t pct, const char *tail)
{
	struct line l = { NULL, 0 };

	if (!__atomic_compare_exchange_n(&state, &from, DECIDING, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return;
	/* Each verdict its own buffer: a reader of the last one never sees it rewritten. */
	l.buf = verdict_buf[conclusions++ % 3];
	if (pct) {
		put(&l, huge ? "on" : "off");
		put(&l, what);
		put_num(&l, pct);
		put(&l, tail);
	} else {
		put(&l, what);
	}
	__atomic_store_n(&verdict, l.buf, __ATOMIC_RELAXED);
	pp_debug("thp: %s", verdict);
	__atomic_store_n(&state, huge ? ON : OFF, __ATOMIC_RELEASE);
}

int pp_thp_want(void)
{
	int s;

	if (pp_cfg.thp != PP_THP_AUTO)
		return pp_cfg.thp == PP_THP_ON;
	s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	if (s == ON || s == OFF)
		return s == ON;
	if (!__atomic_load_n(&asked, __ATOMIC_RELAXED))
		__atomic_store_n(&asked, 1, __ATOMIC_RELAXED);
	if (!system_allows()) {
		conclude(OPEN, false, "off: transparent huge pages are disabled on this system", 0,
			 NULL);
		return 0;
	}
	return -1;
}

bool pp_thp_timing(void)
{
	int s;

	if (pp_cfg.thp != PP_THP_AUTO)
		return false;
	s = __atomic_load_n(&state, __ATOMIC_RELAXED);
	return s == OPEN || (s == ON && __atomic_load_n(&watched, __ATOMIC_RELAXED) < WATCH_LAPS);
}

/* The median of @n values (n <= LAPS), from a sorted copy. */
static uint64_t median(const uint64_t *v, int n)
{
	uint64_t a[LAPS];

	for (int i = 0; i < n; i++) {
		int j = i;

		for (; j > 0 && a[j - 1] > v[i]; j--)
			a[j] = a[j - 1];
		a[j] = v[i];
	}
	return n % 2 ? a[n / 2] : (a[n / 2 - 1] + a[n / 2]) / 2;
}

/*
 * Median huge-page time in percent of the median 4 KiB-page time over the
 * first @n laps of each side (at least 1), and that 4 KiB-page median in
 * @small; 0 while one of the laps is still being stored by another thread.
 */
static uint64_t pct_of(int n, uint64_t *small)
{
	uint64_t h[LAPS], sm[LAPS], pct;

	for (int i = 0; i < n; i++) {
		h[i] = __atomic_load_n(&sample[1][i], __ATOMIC_ACQUIRE);
		sm[i] = __atomic_load_n(&sample[0][i], __ATOMIC_ACQUIRE);
		if (!h[i] || !sm[i])
			return 0;
	}
	*small = median(sm, n);
	pct = median(h, n) * 100 / *small;
	return pct ? pct : 1; /* huge pages 100 times faster: not "still being stored" */
}

/* Decides if the laps so far allow it. */
static void judge(void)
{
	uint32_t n = __atomic_load_n(&filled[0], __ATOMIC_ACQUIRE);
	uint32_t h = __atomic_load_n(&filled[1], __ATOMIC_ACQUIRE);
	const char *tail = "% of the 4 KiB-page time (medians of 5 laps each)";
	uint64_t pct = 0, ref = 0;
	bool huge;

	_Static_assert(EARLY_LAPS == 3 && LAPS == 5, "the verdict lines name the lap counts");
	n = h < n ? h : n;
	if (n >= LAPS && (pct = pct_of(LAPS, &ref))) {
		huge = pct < ON_PCT;
	} else if (n >= EARLY_LAPS && (pct = pct_of(EARLY_LAPS, &ref)) &&
		   (pct >= EARLY_OFF_PCT || pct <= EARLY_ON_PCT)) {
		huge = pct <= EARLY_ON_PCT;
		tail = "% of the 4 KiB-page time (medians of 3 laps each)";
	} else {
		return;
	}
	__atomic_store_n(&ref_small, ref, __ATOMIC_RELAXED);
	conclude(OPEN, huge, ", measured on this process's writes: huge-page laps took ", pct,
		 tail);
}

/* An "on" verdict in doubt: a second trial, or off for good after it. */
static void doubt(uint64_t pct)
{
	int from = ON;

	if (__atomic_load_n(&trials, __ATOMIC_RELAXED) >= MAX_TRIALS) {
		conclude(ON, false, ", undone after the verdict: huge-page laps took ", pct,
			 "% of the 4 KiB-page time, 3 laps in a row");
		return;
	}
	if (!__atomic_compare_exchange_n(&state, &from, DECIDING, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return;
	/* A lap of the last trial still being stored may land in this one: one sample of ten. */
	for (int side = 0; side < 2; side++) {
		__atomic_store_n(&taken[side], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&filled[side], 0, __ATOMIC_RELAXED);
		for (int i = 0; i < LAPS; i++)
			__atomic_store_n(&sample[side][i], 0, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&watched, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&strikes, 0, __ATOMIC_RELAXED);
	__atomic_add_fetch(&trials, 1, __ATOMIC_RELAXED);
	pp_debug("thp: huge-page laps took %llu%% of the trial's 4 KiB-page time: measuring again",
		 (unsigned long long)pct);
	__atomic_store_n(&state, OPEN, __ATOMIC_RELEASE);
}

/* A huge-page lap after an "on" verdict. */
static void watch(uint64_t per_mib)
{
	uint64_t ref = __atomic_load_n(&ref_small, __ATOMIC_RELAXED);

	if (__atomic_fetch_add(&watched, 1, __ATOMIC_RELAXED) >= WATCH_LAPS || !ref)
		return;
	if (per_mib * 100 < ref * DOUBT_PCT)
		__atomic_store_n(&strikes, 0, __ATOMIC_RELAXED);
	else if (__atomic_add_fetch(&strikes, 1, __ATOMIC_RELAXED) >= STRIKES)
		doubt(per_mib * 100 / ref);
}

/*
 * PPIPE_TEST_THP_SLOW: "huge" or "small" slows that side's laps down;
 * "watch" slows 4 KiB-page laps down in trials (the verdict is on) and
 * huge-page laps a thousand times while they are watched (it is doubted,
 * whatever the trial measured: a busy machine once made its 4 KiB-page
 * laps 25 times the huge ones, and a 16-fold watch slowdown then stayed
 * below the doubt threshold).
 */
static uint64_t test_slowdown(bool huge, bool watching)
{
	if (likely(pp_fault_thp_slow < 0))
		return 1;
	if (pp_fault_thp_slow == PP_FAULT_THP_WATCH)
		return huge ? (watching ? TEST_WATCH_SLOWDOWN : 1) : TEST_WATCH_TRIAL_SLOWDOWN;
	return pp_fault_thp_slow == huge ? TEST_SLOWDOWN : 1;
}

bool pp_thp_lap(bool huge, uint64_t ns, uint64_t bytes)
{
	int side = huge, want = pp_thp_want();
	uint64_t per_mib;
	uint32_t t0, t1, i;

	if (!ns || !bytes)
		return want >= 0 ? want : huge;
	per_mib = (uint64_t)((unsigned __int128)ns * (1u << 20) / bytes);
	per_mib *= test_slowdown(huge, want == 1);
	per_mib = per_mib ? per_mib : 1;
	pp_debug("thp: a lap on %s pages: %llu ns per MiB in write()", huge ? "huge" : "4 KiB",
		 (unsigned long long)per_mib);
	if (want == 1 && huge)
		watch(per_mib);
	if (want >= 0)
		return pp_thp_want();
	i = __atomic_fetch_add(&taken[side], 1, __ATOMIC_RELAXED);
	if (i < LAPS) {
		__atomic_store_n(&sample[side][i], per_mib, __ATOMIC_RELEASE);
		__atomic_add_fetch(&filled[side], 1, __ATOMIC_RELEASE);
	}
	judge();
	if ((want = pp_thp_want()) >= 0)
		return want;
	/*
	 * The side short of samples; at a tie, the same one again (4 KiB,
	 * huge, huge, 4 KiB, 4 KiB, ...: half the switches, each of which
	 * costs an uncounted lap).
	 */
	t0 = __atomic_load_n(&taken[0], __ATOMIC_RELAXED);
	t1 = __atomic_load_n(&taken[1], __ATOMIC_RELAXED);
	return t0 == t1 ? huge : t1 < t0;
}

const char *pp_thp_verdict(void)
{
	int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	uint32_t s = __atomic_load_n(&filled[0], __ATOMIC_RELAXED);
	uint32_t h = __atomic_load_n(&filled[1], __ATOMIC_RELAXED);

	if (pp_cfg.thp != PP_THP_AUTO)
		return pp_cfg.thp == PP_THP_ON ? "on: PPIPE_THP=on" : "off: PPIPE_THP=off";
	if (st == ON || st == OFF)
		return __atomic_load_n(&verdict, __ATOMIC_RELAXED);
	if (!__atomic_load_n(&asked, __ATOMIC_RELAXED))
		return "not measured: no ring needed huge pages";
	if (!s && !h)
		return "measuring: no ring has finished a counted lap yet";
	return h < s ? "measuring: more huge-page laps needed" :
		       "measuring: more 4 KiB-page laps needed";
}

void pp_thp_after_fork_child(void)
{
	/* The samples hold for the child too; a verdict being written is written again. */
	if (__atomic_load_n(&state, __ATOMIC_RELAXED) == DECIDING)
		state = OPEN;
}
