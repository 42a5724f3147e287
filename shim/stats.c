// SPDX-License-Identifier: MIT
/*
 * Statistics: the closed-pipe totals, the write-latency histogram, and the
 * JSON report PPIPE_STATS asks for at exit. The report is formatted by a
 * pure function into a caller's buffer; pp_stats_emit() maps one, writes
 * it with raw system calls (write(2) and open(2) are interposed) and
 * unmaps it. Nothing here allocates from the heap. A report is whole or
 * absent: a file per process gets its name only once written, and an
 * append after a report cut short starts a line of its own.
 */
#include "stats.h"

#include "compiler.h"
#include "config.h"
#include "log.h"
#include "solo.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PPIPE_VERSION
#define PPIPE_VERSION "unknown"
#endif

PP_HOT bool pp_wrote_large;
struct pp_counters pp_totals_closed;
struct pp_latency pp_latency_all;
struct pp_wb_counters pp_wb;

static const char *const pp_counter_names[] = {
#define PP_X(name, desc) #name,
	PP_COUNTERS(PP_X)
#undef PP_X
};

_Static_assert(ARRAY_SIZE(pp_counter_names) == PP_CNT_COUNT, "one name per counter");

static inline void fold_one(const struct pp_counters *c, unsigned int i)
{
	uint64_t v = __atomic_load_n(&c->v[i], __ATOMIC_RELAXED);

	if (v) {
		pp_mark_used(PP_USED_STATS);
		pp_solo_fetch_add(&pp_totals_closed.v[i], v, __ATOMIC_RELAXED);
	}
}

PP_COMMON void pp_stats_fold(const struct pp_counters *c)
{
	uint64_t large = 0;

	/*
	 * Most pipes only ever take writes below PPIPE_MIN_WRITE: their two
	 * counters, then one test of all the others at once (every pipe()
	 * of every process ends here).
	 */
	fold_one(c, PP_CNT_writes_passthrough);
	fold_one(c, PP_CNT_bytes_passthrough);
#define PP_X(name, desc)                                  \
	if (PP_CNT_##name != PP_CNT_writes_passthrough && \
	    PP_CNT_##name != PP_CNT_bytes_passthrough)    \
		large |= __atomic_load_n(&c->v[PP_CNT_##name], __ATOMIC_RELAXED);
	PP_COUNTERS(PP_X)
#undef PP_X
	if (!large)
		return;
	for (unsigned int i = 0; i < PP_CNT_COUNT; i++)
		if (i != PP_CNT_writes_passthrough && i != PP_CNT_bytes_passthrough)
			fold_one(c, i);
}

/*
 * Closed pipes that carried bytes: a slot is claimed by a fetch-and-add
 * on closed_n and published by its ready flag, so any thread (or signal
 * handler) closing a pipe may add one while a report reads the table.
 */
static struct {
	struct pp_fd_report r;
	int ready;
} closed[PP_CLOSED_MAX];
static uint64_t closed_n;

PP_COMMON long pp_stats_fold_closed(const struct pp_counters *c)
{
	uint64_t i;

	pp_stats_fold(c);
	if (!__atomic_load_n(&c->v[PP_CNT_bytes_accelerated], __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&c->v[PP_CNT_bytes_passthrough], __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&c->v[PP_CNT_bytes_stdio], __ATOMIC_RELAXED))
		return -1;
	i = pp_solo_fetch_add(&closed_n, 1, __ATOMIC_RELAXED);
	return i < PP_CLOSED_MAX ? (long)i : -1;
}

PP_COMMON void pp_stats_list_closed(long i, uint64_t ino, const char *path, const char *reason,
				    const char *last_fallback, const struct pp_counters *c)
{
	struct pp_fd_report *r = &closed[i].r;

	r->fd = -1;
	r->inode = (unsigned long)ino;
	r->path = path;
	r->reason = reason;
	r->last_fallback = last_fallback;
	for (unsigned int k = 0; k < PP_CNT_COUNT; k++)
		r->cnt.v[k] = __atomic_load_n(&c->v[k], __ATOMIC_RELAXED);
	__atomic_store_n(&closed[i].ready, 1, __ATOMIC_RELEASE);
}

size_t pp_stats_closed(struct pp_fd_report *out, uint64_t *unlisted)
{
	uint64_t n = __atomic_load_n(&closed_n, __ATOMIC_RELAXED);
	size_t k = 0;

	*unlisted = n > PP_CLOSED_MAX ? n - PP_CLOSED_MAX : 0;
	for (uint64_t i = 0; i < n && i < PP_CLOSED_MAX; i++)
		if (__atomic_load_n(&closed[i].ready, __ATOMIC_ACQUIRE))
			out[k++] = closed[i].r;
	return k;
}

/* Zeroes @len bytes at @p unless they are zero already (no copy-on-write after fork for nothing). */
static void clear_if_set(void *p, size_t len)
{
	const uint64_t *w = p;

	for (size_t i = 0; i < len / sizeof(*w); i++) {
		if (w[i]) {
			memset(p, 0, len);
			return;
		}
	}
}

PP_COMMON void pp_stats_after_fork_child(void)
{
	uint64_t n = closed_n < PP_CLOSED_MAX ? closed_n : PP_CLOSED_MAX;
	clear_if_set(&pp_totals_closed, sizeof(pp_totals_closed));
	if (pp_latency_all.count)
		memset(&pp_latency_all, 0, sizeof(pp_latency_all));
	for (uint64_t i = 0; i < n; i++)
		closed[i].ready = 0;
	if (closed_n)
		closed_n = 0;
}

/* ---- latency: values 0..7 exact, then 4 buckets per power of two ---- */

#define PP_LAT_EXACT 8
/* Buckets in use: 8 exact, 4 for each of the powers 2^3 .. 2^63. */
#define PP_LAT_USED (PP_LAT_EXACT + 4 * (64 - 3))

_Static_assert(PP_LAT_USED <= PP_LAT_BUCKETS, "PP_LAT_BUCKETS covers every uint64_t");

unsigned int pp_latency_bucket(uint64_t ns)
{
	unsigned int e;

	if (ns < PP_LAT_EXACT)
		return (unsigned int)ns;
	e = 63 - (unsigned int)__builtin_clzll(ns); /* 3..63 */
	return PP_LAT_EXACT + (e - 3) * 4 + (unsigned int)((ns >> (e - 2)) & 3);
}

uint64_t pp_latency_bucket_upper(unsigned int b)
{
	unsigned int e, sub;

	if (b < PP_LAT_EXACT)
		return b;
	if (b >= PP_LAT_USED)
		return UINT64_MAX;
	e = 3 + (b - PP_LAT_EXACT) / 4;
	sub = (b - PP_LAT_EXACT) % 4;
	/* The bucket holds [(4 + sub) << (e - 2), (5 + sub) << (e - 2)). */
	return ((uint64_t)(4 + sub) << (e - 2)) + ((UINT64_C(1) << (e - 2)) - 1);
}

void pp_latency_record(struct pp_latency *l, uint64_t ns)
{
	pp_mark_used(PP_USED_STATS);
	uint64_t max = __atomic_load_n(&l->max_ns, __ATOMIC_RELAXED);

	__atomic_fetch_add(&l->count, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&l->sum_ns, ns, __ATOMIC_RELAXED);
	__atomic_fetch_add(&l->bucket[pp_latency_bucket(ns)], 1, __ATOMIC_RELAXED);
	while (ns > max && !__atomic_compare_exchange_n(&l->max_ns, &max, ns, true,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

uint64_t pp_latency_quantile(const struct pp_latency *l, double q)
{
	uint64_t total = 0, rank, seen = 0, max = __atomic_load_n(&l->max_ns, __ATOMIC_RELAXED);
	double want;

	for (unsigned int b = 0; b < PP_LAT_BUCKETS; b++)
		total += __atomic_load_n(&l->bucket[b], __ATOMIC_RELAXED);
	if (!total)
		return 0;
	if (!(q > 0)) /* also NaN */
		q = 0;
	if (q > 1)
		q = 1;
	/*
	 * rank = ceil(q * total), at least 1: the smallest value with q of
	 * them at or below it. A fraction below 1e-7 is rounding noise:
	 * 0.07 * 100 is 7.000000000000001 in binary, and that is rank 7.
	 */
	want = q * (double)total;
	if (want >= (double)total) {
		rank = total;
	} else {
		rank = (uint64_t)want;
		if (want - (double)rank > 1e-7)
			rank++;
	}
	if (rank < 1)
		rank = 1;
	if (rank > total)
		rank = total;
	for (unsigned int b = 0; b < PP_LAT_BUCKETS; b++) {
		seen += __atomic_load_n(&l->bucket[b], __ATOMIC_RELAXED);
		if (seen >= rank) {
			uint64_t upper = pp_latency_bucket_upper(b);

			return upper < max ? upper : max;
		}
	}
	return max; /* the buckets moved under us */
}

/* ---- JSON ---- */

/*
 * Output cursor: @pos counts every byte the report needs, while only the
 * first @len land in @buf, so one pass both formats and measures.
 */
struct pp_out {
	char *buf;
	size_t len, pos;
};

static void pp_out_mem(struct pp_out *o, const char *s, size_t n)
{
	if (o->pos < o->len) {
		size_t room = o->len - o->pos;

		memcpy(o->buf + o->pos, s, n < room ? n : room);
	}
	o->pos += n;
}

static void pp_out_str(struct pp_out *o, const char *s)
{
	pp_out_mem(o, s, strlen(s));
}

static void pp_out_u64(struct pp_out *o, uint64_t v)
{
	char t[20];
	size_t i = sizeof(t);

	do {
		t[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	pp_out_mem(o, t + i, sizeof(t) - i);
}

static void pp_out_i64(struct pp_out *o, int64_t v)
{
	if (v < 0) {
		pp_out_mem(o, "-", 1);
		pp_out_u64(o, -(uint64_t)v);
	} else {
		pp_out_u64(o, (uint64_t)v);
	}
}

/* Length of the well-formed UTF-8 sequence at @s (RFC 3629), 0 if there is none. */
static size_t pp_utf8_len(const unsigned char *s)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t n;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0; /* overlong */
	else if (c == 0xed)
		hi = 0x9f; /* surrogates */
	else if (c == 0xf0)
		lo = 0x90; /* overlong */
	else if (c == 0xf4)
		hi = 0x8f; /* above U+10FFFF */
	if (s[1] < lo || s[1] > hi)
		return 0;
	/* A NUL is no continuation byte, so this never reads past the string. */
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/* A JSON string (RFC 8259); bytes that are not UTF-8 become U+FFFD. NULL is null. */
static void pp_out_json_str(struct pp_out *o, const char *str)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)str;

	if (!s) {
		pp_out_str(o, "null");
		return;
	}
	pp_out_mem(o, "\"", 1);
	while (*s) {
		const unsigned char *run = s;
		char esc[6] = { '\\', 'u', '0', '0', 0, 0 };
		size_t n;

		/* Copy the longest run that needs no escaping in one go. */
		while (*s >= 0x20 && *s < 0x80 && *s != '"' && *s != '\\')
			s++;
		if (s > run)
			pp_out_mem(o, (const char *)run, (size_t)(s - run));
		if (!*s)
			break;
		switch (*s) {
		case '"':
			pp_out_mem(o, "\\\"", 2);
			break;
		case '\\':
			pp_out_mem(o, "\\\\", 2);
			break;
		case '\b':
			pp_out_mem(o, "\\b", 2);
			break;
		case '\f':
			pp_out_mem(o, "\\f", 2);
			break;
		case '\n':
			pp_out_mem(o, "\\n", 2);
			break;
		case '\r':
			pp_out_mem(o, "\\r", 2);
			break;
		case '\t':
			pp_out_mem(o, "\\t", 2);
			break;
		default:
			if (*s < 0x20) {
				esc[4] = hex[*s >> 4];
				esc[5] = hex[*s & 15];
				pp_out_mem(o, esc, sizeof(esc));
				break;
			}
			n = pp_utf8_len(s);
			if (n) {
				pp_out_mem(o, (const char *)s, n);
				s += n;
				continue;
			}
			pp_out_str(o, "\\ufffd");
			break;
		}
		s++;
	}
	pp_out_mem(o, "\"", 1);
}

static void pp_out_key(struct pp_out *o, const char *key)
{
	pp_out_mem(o, "\"", 1);
	pp_out_str(o, key);
	pp_out_mem(o, "\":", 2);
}

/* Every counter as "name":value, comma-separated, in PP_COUNTERS order. */
static void pp_out_counters(struct pp_out *o, const struct pp_counters *c)
{
	for (unsigned int i = 0; i < PP_CNT_COUNT; i++) {
		if (i)
			pp_out_mem(o, ",", 1);
		pp_out_key(o, pp_counter_names[i]);
		pp_out_u64(o, c->v[i]);
	}
}

static void pp_out_latency(struct pp_out *o, const struct pp_latency *l)
{
	static const struct pp_latency none;
	uint64_t count, sum;
	bool first = true;

	if (!l)
		l = &none;
	count = __atomic_load_n(&l->count, __ATOMIC_RELAXED);
	sum = __atomic_load_n(&l->sum_ns, __ATOMIC_RELAXED);
	pp_out_str(o, "{\"count\":");
	pp_out_u64(o, count);
	pp_out_str(o, ",\"avg\":");
	pp_out_u64(o, count ? sum / count : 0);
	pp_out_str(o, ",\"p50\":");
	pp_out_u64(o, pp_latency_quantile(l, 0.50));
	pp_out_str(o, ",\"p99\":");
	pp_out_u64(o, pp_latency_quantile(l, 0.99));
	pp_out_str(o, ",\"max\":");
	pp_out_u64(o, __atomic_load_n(&l->max_ns, __ATOMIC_RELAXED));
	pp_out_str(o, ",\"buckets\":[");
	for (unsigned int b = 0; b < PP_LAT_BUCKETS; b++) {
		uint64_t n = __atomic_load_n(&l->bucket[b], __ATOMIC_RELAXED);

		if (!n)
			continue;
		pp_out_str(o, first ? "[" : ",[");
		pp_out_u64(o, pp_latency_bucket_upper(b));
		pp_out_mem(o, ",", 1);
		pp_out_u64(o, n);
		pp_out_mem(o, "]", 1);
		first = false;
	}
	pp_out_str(o, "]}");
}

/* An fd's entry, or (@with_fd false) a closed pipe's. */
static void pp_out_fd(struct pp_out *o, const struct pp_fd_report *f, bool with_fd)
{
	if (with_fd) {
		pp_out_str(o, "{\"fd\":");
		pp_out_i64(o, f->fd);
		pp_out_mem(o, ",", 1);
	} else {
		pp_out_mem(o, "{", 1);
	}
	pp_out_str(o, "\"inode\":");
	pp_out_u64(o, f->inode);
	if (with_fd) {
		pp_out_str(o, ",\"end\":");
		pp_out_json_str(o, f->write_end ? "write" : "read");
	}
	pp_out_str(o, ",\"path\":");
	pp_out_json_str(o, f->path);
	pp_out_str(o, ",\"reason\":");
	pp_out_json_str(o, f->reason);
	pp_out_str(o, ",\"last_fallback\":");
	pp_out_json_str(o, f->last_fallback);
	pp_out_mem(o, ",", 1);
	pp_out_counters(o, &f->cnt);
	pp_out_mem(o, "}", 1);
}

/* Formats @r into @buf (at most @len bytes, no NUL); returns the length it needs. */
static size_t pp_stats_render(const struct pp_stats_report *r, char *buf, size_t len)
{
	struct pp_out o = { .buf = buf, .len = buf ? len : 0 };

	pp_out_str(&o, "{\"pid\":");
	pp_out_i64(&o, r->pid);
	pp_out_str(&o, ",\"version\":");
	pp_out_json_str(&o, PPIPE_VERSION);
	pp_out_str(&o, ",\"image\":");
	{
		char image[sizeof(r->image) + 1] = "";

		memcpy(image, r->image, sizeof(r->image));
		pp_out_json_str(&o, image[0] ? image : NULL);
	}
	if (r->exec_image) {
		pp_out_str(&o, ",\"exec\":{\"image\":");
		pp_out_json_str(&o, r->exec_image);
		pp_out_str(&o, ",\"pipes\":[");
		for (int i = 0; i < r->exec_npipes; i++) {
			if (i)
				pp_out_mem(&o, ",", 1);
			pp_out_u64(&o, r->exec_pipes[i]);
		}
		pp_out_str(&o, "]}");
	}
	pp_out_str(&o, ",\"mode\":");
	pp_out_json_str(&o, pp_mode_name(pp_cfg.mode));
	pp_out_str(&o, ",\"engine\":");
	pp_out_json_str(&o, r->engine);
	pp_out_str(&o, ",\"engine_reason\":");
	pp_out_json_str(&o, r->engine_reason);
	pp_out_str(&o, ",\"thp\":");
	pp_out_json_str(&o, r->thp);
	pp_out_str(&o, ",\"write_behind\":{\"state\":");
	pp_out_json_str(&o, r->write_behind);
	pp_out_str(&o, ",\"stages\":");
	pp_out_u64(&o, r->wb.stages);
	pp_out_str(&o, ",\"staged_bytes\":");
	pp_out_u64(&o, r->wb.staged_bytes);
	pp_out_str(&o, ",\"moved_bytes\":");
	pp_out_u64(&o, r->wb.moved_bytes);
	pp_out_str(&o, ",\"splices\":");
	pp_out_u64(&o, r->wb.splices);
	pp_out_str(&o, ",\"dropped_bytes\":");
	pp_out_u64(&o, r->wb.dropped_bytes);
	pp_out_str(&o, ",\"errors_reported\":");
	pp_out_u64(&o, r->wb.errors_reported);
	pp_out_str(&o, ",\"flush_waits\":");
	pp_out_u64(&o, r->wb.flush_waits);
	pp_out_mem(&o, "}", 1);
	pp_out_str(&o, ",\"pool\":{\"bytes\":");
	pp_out_u64(&o, r->pool_bytes);
	pp_out_str(&o, ",\"peak\":");
	pp_out_u64(&o, r->pool_peak);
	pp_out_str(&o, ",\"trimmed_bytes\":");
	pp_out_u64(&o, r->pool_trimmed_bytes);
	pp_out_str(&o, ",\"pressure_episodes\":");
	pp_out_u64(&o, r->pressure_episodes);
	pp_out_str(&o, ",\"exited_rings_reused\":");
	pp_out_u64(&o, r->exited_rings_reused);
	pp_out_str(&o, ",\"exited_rings_freed\":");
	pp_out_u64(&o, r->exited_rings_freed);
	pp_out_mem(&o, "}", 1);
	pp_out_str(&o, ",\"registry\":");
	if (r->registry.slots_max) {
		const char *sep = "{";

#define PP_X(name, desc)                  \
	pp_out_str(&o, sep);              \
	pp_out_json_str(&o, #name);       \
	pp_out_mem(&o, ":", 1);           \
	pp_out_u64(&o, r->registry.name); \
	sep = ",";
		PP_REGISTRY_FIELDS(PP_X)
#undef PP_X
		pp_out_mem(&o, "}", 1);
	} else {
		pp_out_str(&o, "null");
	}
	pp_out_str(&o, ",\"registry_missing\":");
	pp_out_json_str(&o, r->registry_missing);
	pp_out_str(&o, ",\"totals\":{");
	pp_out_counters(&o, &r->totals);
	pp_out_str(&o, "},\"latency_ns\":");
	pp_out_latency(&o, r->latency);
	pp_out_str(&o, ",\"fds\":[");
	for (size_t i = 0; r->fds && i < r->nfds; i++) {
		if (i)
			pp_out_mem(&o, ",", 1);
		pp_out_fd(&o, &r->fds[i], true);
	}
	pp_out_str(&o, "],\"closed_pipes\":[");
	for (size_t i = 0; r->closed && i < r->nclosed; i++) {
		if (i)
			pp_out_mem(&o, ",", 1);
		pp_out_fd(&o, &r->closed[i], false);
	}
	pp_out_str(&o, "],\"closed_pipes_unlisted\":");
	pp_out_u64(&o, r->closed_unlisted);
	pp_out_str(&o, "}\n");
	return o.pos;
}

long pp_stats_format(const struct pp_stats_report *r, char *buf, size_t len)
{
	size_t n;

	if (!buf || !len)
		return -ENOSPC;
	n = pp_stats_render(r, buf, len);
	if (n >= len || n > LONG_MAX)
		return -ENOSPC;
	buf[n] = '\0';
	return (long)n;
}

/* ---- output ---- */

/*
 * Expands "%p" to @pid and "%%" to "%" in @dest. Returns 1 if a "%p" was
 * expanded (a file per process), 0 if not, -1 if the result does not fit.
 */
static int pp_stats_path(const char *dest, long pid, char *path, size_t len)
{
	char num[24];
	size_t o = 0, nlen = 0;
	unsigned long v = pid > 0 ? (unsigned long)pid : 0;
	int per_process = 0;

	do {
		num[sizeof(num) - ++nlen] = (char)('0' + v % 10);
		v /= 10;
	} while (v);

	for (const char *s = dest; *s; s++) {
		const char *piece = s;
		size_t n = 1;

		if (s[0] == '%' && s[1] == 'p') {
			piece = num + sizeof(num) - nlen;
			n = nlen;
			per_process = 1;
			s++;
		} else if (s[0] == '%' && s[1] == '%') {
			s++;
		}
		if (n >= len - o)
			return -1;
		memcpy(path + o, piece, n);
		o += n;
	}
	path[o] = '\0';
	return per_process;
}

/* Writes all of @buf to @fd; 0 or -errno. */
static int pp_write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		long n = PP_SYSCALL(SYS_write, fd, buf, len);

		if (n == -EINTR)
			continue;
		if (n < 0)
			return (int)n;
		if (n == 0)
			return -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * A report formatted into a mapped buffer: @text, @len bytes, with a
 * newline at @text - 1 for an append that must start a line of its own.
 */
struct pp_report_buf {
	char *map;
	size_t size;
	char *text;
	size_t len;
};

/* Formats @r into @b; 0, or -1 after a warning. */
static int pp_report_map(const struct pp_stats_report *r, struct pp_report_buf *b)
{
	long page = sysconf(_SC_PAGESIZE), n;
	size_t size;

	/* Measure, then leave room for latency buckets that fill meanwhile. */
	if (page <= 0)
		page = 4096;
	size = pp_stats_render(r, NULL, 0) + 2 + 65536;
	for (int attempt = 0;; attempt++) {
		size = (size + (size_t)page - 1) & ~((size_t)page - 1);
		b->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			      0);
		if (b->map == MAP_FAILED) {
			pp_warn("PPIPE_STATS: cannot map %zu bytes for the report: %s", size,
				pp_strerror(errno));
			return -1;
		}
		n = pp_stats_format(r, b->map + 1, size - 1);
		if (n >= 0)
			break;
		munmap(b->map, size);
		if (attempt == 2) {
			pp_warn("PPIPE_STATS: the report keeps growing; no statistics written");
			return -1;
		}
		size *= 2;
	}
	b->map[0] = '\n';
	b->size = size;
	b->text = b->map + 1;
	b->len = (size_t)n;
	return 0;
}

static void pp_report_unmap(struct pp_report_buf *b)
{
	munmap(b->map, b->size);
}

/* Formats @r and writes it to @fd in one write(2); @where names @fd in a warning. */
static void pp_stats_write(int fd, const char *where, const struct pp_stats_report *r)
{
	struct pp_report_buf b;
	int e;

	if (pp_report_map(r, &b))
		return;
	e = pp_write_all(fd, b.text, b.len);
	if (e)
		pp_warn("PPIPE_STATS: cannot write to %s: %s", where, pp_strerror(-e));
	pp_report_unmap(&b);
}

/*
 * A file per process: the report is written into an unnamed file in the
 * directory and linked to @path when complete, so that a process killed
 * while writing leaves no file rather than half a report. Returns 0, or
 * -errno for the caller to append instead: -EEXIST when the name is
 * taken (a pid used again), or no O_TMPFILE there, or a write error.
 */
static int pp_stats_whole(char *path, const struct pp_report_buf *b)
{
	long fd = pp_sys_tmpfile_for(path, O_WRONLY | O_CLOEXEC), r;

	if (fd < 0)
		return (int)fd;
	r = pp_write_all((int)fd, b->text, b->len);
	if (!r)
		r = pp_sys_link_tmpfile((int)fd, path);
	pp_sys_close((int)fd);
	return (int)r;
}

/*
 * An appended report starts a line of its own: after one that was cut
 * (its writer killed mid-write), a newline first. Only a regular file is
 * looked at, by a second, read-only fd on the same inode (@fd is
 * write-only: opened for reading, a FIFO nobody reads would not refuse
 * it); a concurrent append may at worst leave an empty line.
 */
static bool pp_needs_newline(int fd, const char *path)
{
	struct stat st, st2;
	bool cut = false;
	long rfd;
	char last;

	if (PP_SYSCALL(SYS_fstat, fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0)
		return false;
	rfd = PP_SYSCALL(SYS_openat, AT_FDCWD, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (rfd < 0)
		return false;
	if (!PP_SYSCALL(SYS_fstat, rfd, &st2) && st2.st_ino == st.st_ino &&
	    st2.st_dev == st.st_dev && st2.st_size > 0)
		cut = PP_SYSCALL(SYS_pread64, rfd, &last, 1, st2.st_size - 1) == 1 && last != '\n';
	pp_sys_close((int)rfd);
	return cut;
}

void pp_stats_emit(const char *dest, const struct pp_stats_report *r)
{
	long pid = r->pid > 0 ? r->pid : PP_SYSCALL(SYS_getpid), fd;
	struct pp_report_buf b;
	char path[PATH_MAX];
	int saved = errno, per_process, e;

	if (!dest || !dest[0] || !strcmp(dest, "0"))
		return;
	if (!strcmp(dest, "1")) {
		pp_stats_write(2, "stderr", r);
		goto out;
	}
	per_process = pp_stats_path(dest, pid, path, sizeof(path));
	if (per_process < 0) {
		pp_warn("PPIPE_STATS: the path is too long; no statistics written");
		goto out;
	}
	if (pp_report_map(r, &b))
		goto out;
	if (per_process && !pp_stats_whole(path, &b))
		goto done;
	/*
	 * Appended. Non-blocking, so that a FIFO nobody reads never holds the
	 * process at exit (ENXIO); a report fits in a pipe that somebody does
	 * read.
	 */
	fd = PP_SYSCALL(SYS_openat, AT_FDCWD, path,
			O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
	if (fd < 0) {
		pp_warn("PPIPE_STATS: cannot open %s: %s", path,
			fd == -ENXIO ? "a FIFO nobody reads" : pp_strerror((int)-fd));
		goto done;
	}
	/* One write: appends from many processes to one file do not interleave. */
	e = pp_needs_newline((int)fd, path) ? pp_write_all((int)fd, b.text - 1, b.len + 1) :
					      pp_write_all((int)fd, b.text, b.len);
	if (e)
		pp_warn("PPIPE_STATS: cannot write to %s: %s", path, pp_strerror(-e));
	pp_sys_close((int)fd);
done:
	pp_report_unmap(&b);
out:
	errno = saved;
}

void pp_stats_emit_fd(int fd, const struct pp_stats_report *r)
{
	int saved = errno;
	char where[32];

	snprintf(where, sizeof(where), "fd %d", fd);
	pp_stats_write(fd, where, r);
	errno = saved;
}

/*
 * The last note written: execvp() and posix_spawnp() try each directory of
 * PATH in turn, and each failed try would write the same note again. (A
 * vfork child writes it into its parent's memory: it names the child's
 * pid, so the parent's own notes are never taken for it.)
 */
static struct {
	long pid;
	char comm[16];
	uint64_t first;
	int n;
} last_note;

PP_COMMON void pp_stats_exec_note(long pid, const char comm[16], const uint64_t *inos, int n)
{
	char line[4096], path[PATH_MAX], image[17];
	struct pp_stats_report r = { .exec_image = image, .exec_pipes = inos, .exec_npipes = n };
	const char *dest = pp_cfg.stats;
	int saved = errno;
	long fd, len;

	/* A report file only: on stderr the line would be the program's output. */
	if (!dest[0] || !strcmp(dest, "0") || !strcmp(dest, "1") || n <= 0)
		return;
	r.pid = (pid_t)(pid > 0 ? pid : PP_SYSCALL(SYS_getpid));
	if (last_note.pid == r.pid && last_note.n == n && last_note.first == inos[0] &&
	    !memcmp(last_note.comm, comm, sizeof(last_note.comm)))
		goto out;
	last_note.pid = r.pid;
	last_note.n = n;
	last_note.first = inos[0];
	memcpy(last_note.comm, comm, sizeof(last_note.comm));
	memcpy(image, comm, 16);
	image[16] = 0;
	len = pp_stats_format(&r, line, sizeof(line));
	if (len <= 0 || pp_stats_path(dest, r.pid, path, sizeof(path)) < 0)
		goto out;
	/* One small append: lines of many processes do not interleave. */
	fd = PP_SYSCALL(SYS_openat, AT_FDCWD, path,
			O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
	if (fd < 0)
		goto out;
	pp_write_all((int)fd, line, (size_t)len);
	pp_sys_close((int)fd);
out:
	errno = saved;
}
