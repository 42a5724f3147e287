// SPDX-License-Identifier: MIT
/*
 * Statistics: latency buckets and quantiles, folding, the closed pipes
 * listed, the reset in a fork child, the JSON report
 * (checked by a strict JSON syntax check and by its exact text), buffers
 * too small for it, string escaping, and pp_stats_emit to files and stderr.
 */
#include "config.h"
#include "log.h"
#include "stats.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"

#define U(x) ((unsigned long long)(x))

/* ---- a strict JSON syntax check (RFC 8259) ---- */

static const char *js_value(const char *p, int depth);

static const char *js_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

static bool js_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static const char *js_string(const char *p)
{
	if (*p++ != '"')
		return NULL;
	for (;;) {
		unsigned char c = (unsigned char)*p++;

		if (c == '"')
			return p;
		if (c < 0x20)
			return NULL; /* includes the NUL at the end */
		if (c != '\\')
			continue;
		c = (unsigned char)*p++;
		if (c == 'u') {
			for (int i = 0; i < 4; i++)
				if (!js_hex(*p++))
					return NULL;
		} else if (!strchr("\"\\/bfnrt", c) || !c) {
			return NULL;
		}
	}
}

static const char *js_digits(const char *p)
{
	if (*p < '0' || *p > '9')
		return NULL;
	while (*p >= '0' && *p <= '9')
		p++;
	return p;
}

static const char *js_number(const char *p)
{
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (!(p = js_digits(p)))
		return NULL;
	if (*p == '.' && !(p = js_digits(p + 1)))
		return NULL;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(p = js_digits(p)))
			return NULL;
	}
	return p;
}

static const char *js_members(const char *p, int depth, char close, bool keys)
{
	p = js_ws(p + 1);
	if (*p == close)
		return p + 1;
	for (;;) {
		if (keys) {
			if (!(p = js_string(p)))
				return NULL;
			p = js_ws(p);
			if (*p++ != ':')
				return NULL;
		}
		if (!(p = js_value(p, depth + 1)))
			return NULL;
		p = js_ws(p);
		if (*p == close)
			return p + 1;
		if (*p++ != ',')
			return NULL;
		p = js_ws(p);
	}
}

static const char *js_value(const char *p, int depth)
{
	if (depth > 32)
		return NULL;
	p = js_ws(p);
	switch (*p) {
	case '{':
		return js_members(p, depth, '}', true);
	case '[':
		return js_members(p, depth, ']', false);
	case '"':
		return js_string(p);
	case 't':
		return strncmp(p, "true", 4) ? NULL : p + 4;
	case 'f':
		return strncmp(p, "false", 5) ? NULL : p + 5;
	case 'n':
		return strncmp(p, "null", 4) ? NULL : p + 4;
	default:
		return js_number(p);
	}
}

/* Is @s one JSON object, then exactly one newline, then the end? */
static bool json_line(const char *s)
{
	const char *end;

	if (*s != '{')
		return false;
	end = js_value(s, 0);
	return end && !strcmp(end, "\n");
}

/*
 * Occurrences of @needle in @hay. Not a strstr() loop: ASan's strstr
 * measures the whole haystack on every call, which made counting the fds
 * of a 1 MiB report quadratic (most of a minute under ASan).
 */
static unsigned int count_of(const char *hay, const char *needle)
{
	size_t len = strlen(needle);
	unsigned int n = 0;

	for (const char *p = hay; *p; p++)
		if (*p == *needle && !strncmp(p, needle, len))
			n++;
	return n;
}

/* ---- latency ---- */

static struct pp_latency lat;

static void test_buckets(void)
{
	uint64_t v;

	for (uint64_t i = 0; i < 8; i++)
		CHECK(pp_latency_bucket(i) == i && pp_latency_bucket_upper((unsigned int)i) == i,
		      "exact %llu", U(i));
	CHECK(pp_latency_bucket(UINT64_MAX) < PP_LAT_BUCKETS, "top %u",
	      pp_latency_bucket(UINT64_MAX));
	CHECK(pp_latency_bucket_upper(pp_latency_bucket(UINT64_MAX)) == UINT64_MAX, "top upper");
	for (unsigned int b = 1; b <= pp_latency_bucket(UINT64_MAX); b++) {
		uint64_t lo = pp_latency_bucket_upper(b - 1) + 1, hi = pp_latency_bucket_upper(b);

		CHECK(hi >= lo, "bucket %u empty", b);
		CHECK(pp_latency_bucket(lo) == b && pp_latency_bucket(hi) == b,
		      "bucket %u holds [%llu,%llu]", b, U(lo), U(hi));
		/* 4 sub-buckets per power of two: at most a quarter wide. */
		CHECK(hi - lo <= lo / 4, "bucket %u [%llu,%llu] too wide", b, U(lo), U(hi));
	}
	CHECK(pp_latency_bucket(8) == 8 && pp_latency_bucket(9) == 8 && pp_latency_bucket(10) == 9,
	      "8..10");
	CHECK(pp_latency_bucket(16) == 12 && pp_latency_bucket_upper(12) == 19, "16");
	/* Every value lands in a bucket whose bounds hold it. */
	v = 0;
	for (int i = 0; i < 100000; i++) {
		unsigned int b = pp_latency_bucket(v);
		uint64_t lo = b ? pp_latency_bucket_upper(b - 1) + 1 : 0;

		CHECK(lo <= v && v <= pp_latency_bucket_upper(b), "v=%llu b=%u", U(v), b);
		v = v < 1000 ? v + 1 : v + v / 331 + 1;
		if (v < 1000)
			break; /* wrapped */
	}
}

static void test_quantiles(void)
{
	memset(&lat, 0, sizeof(lat));
	CHECK(pp_latency_quantile(&lat, 0.5) == 0, "empty");
	for (uint64_t v = 1; v <= 100; v++)
		pp_latency_record(&lat, v);
	CHECK(lat.count == 100 && lat.sum_ns == 5050 && lat.max_ns == 100, "count/sum/max");
	/* 50 is in [48,55], 99 in [96,111] (clamped to the max). */
	CHECK(pp_latency_quantile(&lat, 0.5) == 55, "p50=%llu", U(pp_latency_quantile(&lat, 0.5)));
	CHECK(pp_latency_quantile(&lat, 0.99) == 100, "p99=%llu",
	      U(pp_latency_quantile(&lat, 0.99)));
	CHECK(pp_latency_quantile(&lat, 1.0) == 100, "p100");
	CHECK(pp_latency_quantile(&lat, 0.07) == 7, "p7 exact");
	CHECK(pp_latency_quantile(&lat, 0.0) == 1, "p0");
	CHECK(pp_latency_quantile(&lat, -3) == 1, "q<0");
	CHECK(pp_latency_quantile(&lat, 7) == 100, "q>1");
	CHECK(pp_latency_quantile(&lat, __builtin_nan("")) == 1, "NaN");

	memset(&lat, 0, sizeof(lat));
	for (int i = 0; i < 98; i++)
		pp_latency_record(&lat, 46000);
	pp_latency_record(&lat, 55000);
	pp_latency_record(&lat, 55000);
	/* 46000 is in [40960,49151]; 55000 in [49152,57343], clamped to 55000. */
	CHECK(pp_latency_quantile(&lat, 0.5) == 49151, "p50=%llu",
	      U(pp_latency_quantile(&lat, 0.5)));
	CHECK(pp_latency_quantile(&lat, 0.98) == 49151, "p98");
	CHECK(pp_latency_quantile(&lat, 0.99) == 55000, "p99=%llu",
	      U(pp_latency_quantile(&lat, 0.99)));

	memset(&lat, 0, sizeof(lat));
	pp_latency_record(&lat, 0);
	CHECK(pp_latency_quantile(&lat, 0.5) == 0 && lat.count == 1 && lat.bucket[0] == 1, "zero");
	pp_latency_record(&lat, UINT64_MAX);
	CHECK(pp_latency_quantile(&lat, 1) == UINT64_MAX && lat.max_ns == UINT64_MAX, "huge");
}

enum { THREADS = 4, PER_THREAD = 50000 };

static void *recorder(void *arg)
{
	uint64_t base = (uint64_t)(uintptr_t)arg;

	for (uint64_t i = 0; i < PER_THREAD; i++)
		pp_latency_record(&lat, base + i);
	return NULL;
}

static void test_record_threads(void)
{
	pthread_t t[THREADS];
	uint64_t sum = 0, in_buckets = 0;

	memset(&lat, 0, sizeof(lat));
	for (uintptr_t i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, recorder, (void *)(i * 1000000));
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	for (uint64_t i = 0; i < THREADS; i++)
		sum += PER_THREAD * i * 1000000 + (uint64_t)PER_THREAD * (PER_THREAD - 1) / 2;
	for (int b = 0; b < PP_LAT_BUCKETS; b++)
		in_buckets += lat.bucket[b];
	CHECK(lat.count == THREADS * PER_THREAD && in_buckets == lat.count, "count %llu",
	      U(lat.count));
	CHECK(lat.sum_ns == sum, "sum %llu != %llu", U(lat.sum_ns), U(sum));
	CHECK(lat.max_ns == (THREADS - 1) * 1000000 + PER_THREAD - 1, "max %llu", U(lat.max_ns));
}

static void test_fold(void)
{
	struct pp_counters a = { { 0 } }, b = { { 0 } };

	a.v[PP_CNT_writes_accelerated] = 3;
	a.v[PP_CNT_bytes_accelerated] = 3 << 20;
	b.v[PP_CNT_writes_accelerated] = 1;
	b.v[PP_CNT_efaults] = 2;
	pp_count(&b, PP_CNT_fallbacks, 5);
	pp_stats_fold(&a);
	pp_stats_fold(&b);
	CHECK(pp_totals_closed.v[PP_CNT_writes_accelerated] == 4, "writes");
	CHECK(pp_totals_closed.v[PP_CNT_bytes_accelerated] == 3 << 20, "bytes");
	CHECK(pp_totals_closed.v[PP_CNT_efaults] == 2 && pp_totals_closed.v[PP_CNT_fallbacks] == 5,
	      "efaults/fallbacks");
	CHECK(pp_totals_closed.v[PP_CNT_ring_waits] == 0, "untouched");
}

/* A pipe is gone, as pipe.h's pp_pipe_report_closed() says so. */
static void fold_pipe(uint64_t ino, const char *path, const char *reason, const char *last_fallback,
		      const struct pp_counters *c)
{
	long entry = pp_stats_fold_closed(c);

	if (entry >= 0)
		pp_stats_list_closed(entry, ino, path, reason, last_fallback, c);
}

/* Closed pipes: folded into the totals; listed if bytes went in, up to PP_CLOSED_MAX. */
static void test_fold_pipe(void)
{
	static struct pp_fd_report listed[PP_CLOSED_MAX];
	struct pp_counters idle = { { 0 } }, used = { { 0 } };
	uint64_t before = pp_totals_closed.v[PP_CNT_fallbacks], unlisted = 99;
	size_t n;

	idle.v[PP_CNT_fallbacks] = 1;
	used.v[PP_CNT_bytes_passthrough] = 4000;
	used.v[PP_CNT_writes_passthrough] = 4;
	fold_pipe(1, "vmsplice", "created here", NULL, &idle);
	fold_pipe(2, "passthrough", "spliced", "readers no longer known", &used);
	n = pp_stats_closed(listed, &unlisted);
	CHECK(pp_totals_closed.v[PP_CNT_fallbacks] == before + 1, "folded");
	CHECK(n == 1 && unlisted == 0, "%zu listed, %llu unlisted", n, U(unlisted));
	CHECK(n == 1 && listed[0].fd == -1 && listed[0].inode == 2 &&
		      !strcmp(listed[0].path, "passthrough") &&
		      !strcmp(listed[0].reason, "spliced") &&
		      !strcmp(listed[0].last_fallback, "readers no longer known") &&
		      listed[0].cnt.v[PP_CNT_bytes_passthrough] == 4000,
	      "the pipe that carried bytes is listed as it was");
	for (int i = 0; i < PP_CLOSED_MAX + 2; i++)
		fold_pipe(100 + (uint64_t)i, "vmsplice", "created here", NULL, &used);
	n = pp_stats_closed(listed, &unlisted);
	CHECK(n == PP_CLOSED_MAX && unlisted == 3 && listed[PP_CLOSED_MAX - 1].inode == 100 + 254,
	      "%zu listed, %llu unlisted", n, U(unlisted));

	/* A fork child starts with nothing of its parent's. */
	pp_stats_after_fork_child();
	n = pp_stats_closed(listed, &unlisted);
	CHECK(n == 0 && unlisted == 0 && pp_totals_closed.v[PP_CNT_bytes_passthrough] == 0 &&
		      pp_latency_all.count == 0,
	      "after fork: %zu listed, %llu unlisted", n, U(unlisted));
	fold_pipe(5, "vmsplice", "created here", NULL, &used);
	n = pp_stats_closed(listed, &unlisted);
	CHECK(n == 1 && listed[0].inode == 5, "listing starts again");
	pp_stats_after_fork_child();
}

/* ---- the report ---- */

static const char *const counter_names[] = {
#define PP_X(name, desc) #name,
	PP_COUNTERS(PP_X)
#undef PP_X
};

static char buf[1 << 20];

/* A process with one accelerated and one pass-through fd, and a closed pipe. */
static void make_report(struct pp_stats_report *r, struct pp_fd_report fds[3])
{
	memset(&lat, 0, sizeof(lat));
	for (int i = 0; i < 3; i++)
		pp_latency_record(&lat, 5);
	pp_latency_record(&lat, 1000);
	pp_latency_record(&lat, 1000);

	memset(fds, 0, 3 * sizeof(fds[0]));
	fds[0].fd = 1;
	fds[0].inode = 123456789;
	fds[0].write_end = 1;
	fds[0].path = "vmsplice";
	fds[0].reason = "accelerated";
	for (int i = 0; i < PP_CNT_COUNT; i++)
		fds[0].cnt.v[i] = 100 + (uint64_t)i;
	fds[1].fd = 7;
	fds[1].inode = 42;
	fds[1].write_end = 0;
	fds[1].path = "passthrough";
	fds[1].reason = "readers unknown";
	fds[1].last_fallback = "readers no longer known";
	fds[1].cnt.v[PP_CNT_writes_passthrough] = 9;
	fds[2].fd = -1;
	fds[2].inode = 77;
	fds[2].path = "passthrough";
	fds[2].reason = "read end inherited across exec";
	fds[2].last_fallback = "readers no longer known";
	fds[2].cnt.v[PP_CNT_bytes_passthrough] = 5000;

	memset(r, 0, sizeof(*r));
	r->pid = 4242;
	r->engine = "vmsplice";
	r->engine_reason = "probe: pages shared";
	r->thp = "off: PPIPE_THP=off";
	r->write_behind = "on";
	r->wb = (struct pp_wb_counters){ 1, 2, 3, 4, 5, 6, UINT64_MAX };
	r->pool_bytes = 1 << 21;
	r->pool_peak = 3 << 20;
	r->pool_trimmed_bytes = UINT64_MAX - 1;
	r->pressure_episodes = 2;
	r->exited_rings_reused = 7;
	r->exited_rings_freed = 8;
	r->registry = (struct pp_stats_registry){ 3, 32768, 4, 8192, 5, 6, 7, 8, 9, UINT64_MAX };
	for (int i = 0; i < PP_CNT_COUNT; i++)
		r->totals.v[i] = fds[0].cnt.v[i] + fds[1].cnt.v[i];
	r->totals.v[PP_CNT_bytes_accelerated] = UINT64_MAX;
	r->latency = &lat;
	r->fds = fds;
	r->nfds = 2;
	r->closed = fds + 2;
	r->nclosed = 1;
	r->closed_unlisted = 3;
}

static void test_format(void)
{
	struct pp_stats_report r;
	struct pp_fd_report fds[3];
	char key[64];
	long n;

	pp_config_defaults(&pp_cfg);
	make_report(&r, fds);
	n = pp_stats_format(&r, buf, sizeof(buf));
	CHECK(n > 0 && (size_t)n == strlen(buf), "length %ld vs %zu", n, strlen(buf));
	CHECK(json_line(buf), "not one JSON object and a newline:\n%s", buf);
	CHECK(count_of(buf, "\n") == 1, "one line");
	CHECK(!strncmp(buf, "{\"pid\":4242,\"version\":\"", 23), "starts: %.40s", buf);
	CHECK(strstr(buf,
		     ",\"mode\":\"auto\",\"engine\":\"vmsplice\","
		     "\"engine_reason\":\"probe: pages shared\",\"thp\":\"off: PPIPE_THP=off\","
		     "\"write_behind\":{\"state\":\"on\",\"stages\":1,\"staged_bytes\":2,"
		     "\"moved_bytes\":3,\"splices\":4,\"dropped_bytes\":5,\"errors_reported\":6,"
		     "\"flush_waits\":18446744073709551615},"
		     "\"pool\":{\"bytes\":2097152,\"peak\":3145728,"
		     "\"trimmed_bytes\":18446744073709551614,\"pressure_episodes\":2,"
		     "\"exited_rings_reused\":7,\"exited_rings_freed\":8},"
		     "\"registry\":{\"slots\":3,\"slots_max\":32768,\"records\":4,"
		     "\"records_max\":8192,\"reclaimed\":5,\"reclaimed_holds\":6,"
		     "\"expired_charges\":7,\"healed\":8,\"full\":9,"
		     "\"sweeps\":18446744073709551615},"
		     "\"registry_missing\":null,\"totals\":{"),
	      "header: %s", buf);
	/* Every counter: in the totals, both fds and the closed pipe, in PP_COUNTERS order. */
	for (int i = 0; i < PP_CNT_COUNT; i++) {
		snprintf(key, sizeof(key), "\"%s\":", counter_names[i]);
		CHECK(count_of(buf, key) == 4, "%s appears %u times", key, count_of(buf, key));
	}
	CHECK(strstr(buf, "\"totals\":{\"writes_accelerated\":100,\"bytes_accelerated\":"
			  "18446744073709551615,\"writes_passthrough\":111,"),
	      "totals: %s", buf);
	CHECK(strstr(buf, "\"latency_ns\":{\"count\":5,\"avg\":403,\"p50\":5,\"p99\":1000,"
			  "\"max\":1000,\"buckets\":[[5,3],[1023,2]]},"),
	      "latency: %s", buf);
	CHECK(strstr(buf, "\"fds\":[{\"fd\":1,\"inode\":123456789,\"end\":\"write\",\"path\":"
			  "\"vmsplice\",\"reason\":\"accelerated\",\"last_fallback\":null,"
			  "\"writes_accelerated\":100,"),
	      "fd 1: %s", buf);
	CHECK(strstr(buf,
		     "},{\"fd\":7,\"inode\":42,\"end\":\"read\",\"path\":\"passthrough\","
		     "\"reason\":\"readers unknown\",\"last_fallback\":\"readers no longer known\","
		     "\"writes_accelerated\":0,"
		     "\"bytes_accelerated\":0,\"writes_passthrough\":9,"),
	      "fd 7: %s", buf);
	CHECK(strstr(buf,
		     "\"bytes_vmspliced\":0,\"span_commits\":0,\"stdio_writes\":0,\"bytes_stdio\":0}],\"closed_pipes\":[{\"inode\":77,\"path\":"
		     "\"passthrough\",\"reason\":\"read end inherited across exec\","
		     "\"last_fallback\":\"readers no longer known\",\"writes_accelerated\":0,"
		     "\"bytes_accelerated\":0,\"writes_passthrough\":0,\"bytes_passthrough\":5000,"),
	      "closed pipe: %s", buf);
	CHECK(strstr(buf,
		     "\"bytes_vmspliced\":0,\"span_commits\":0,\"stdio_writes\":0,\"bytes_stdio\":0}],\"closed_pipes_unlisted\":3}\n"),
	      "end: %s", buf);

	/* Mode follows the configuration. */
	pp_cfg.mode = PP_MODE_URING;
	pp_stats_format(&r, buf, sizeof(buf));
	CHECK(strstr(buf, "\"mode\":\"uring\""), "mode uring");
	pp_cfg.mode = PP_MODE_AUTO;
}

/* The smallest report, compared as a whole. */
static void test_format_exact(void)
{
	struct pp_stats_report r = { .pid = 1 };
	char want[2048], version[64] = "", *p = want;
	const char *v;
	long n;

	/* The version is whatever the build said (PPIPE_VERSION); take it from the output. */
	n = pp_stats_format(&r, buf, sizeof(buf));
	v = buf + strlen("{\"pid\":1,\"version\":\"");
	CHECK(n > 0 && !strncmp(buf, "{\"pid\":1,\"version\":\"", (size_t)(v - buf)) &&
		      strchr(v, '"'),
	      "version: %s", buf);
	if (strchr(v, '"') && (size_t)(strchr(v, '"') - v) < sizeof(version))
		memcpy(version, v, (size_t)(strchr(v, '"') - v));
	CHECK(version[0], "empty version");

	p += sprintf(
		p,
		"{\"pid\":1,\"version\":\"%s\",\"image\":null,\"mode\":\"auto\",\"engine\":null,"
		"\"engine_reason\":null,\"thp\":null,"
		"\"write_behind\":{\"state\":null,\"stages\":0,\"staged_bytes\":0,"
		"\"moved_bytes\":0,\"splices\":0,\"dropped_bytes\":0,\"errors_reported\":0,"
		"\"flush_waits\":0},"
		"\"pool\":{\"bytes\":0,\"peak\":0,\"trimmed_bytes\":0,"
		"\"pressure_episodes\":0,\"exited_rings_reused\":0,"
		"\"exited_rings_freed\":0},\"registry\":null,\"registry_missing\":null,"
		"\"totals\":{",
		version);
	for (int i = 0; i < PP_CNT_COUNT; i++)
		p += sprintf(p, "%s\"%s\":0", i ? "," : "", counter_names[i]);
	sprintf(p, "},\"latency_ns\":{\"count\":0,\"avg\":0,\"p50\":0,\"p99\":0,\"max\":0,"
		   "\"buckets\":[]},\"fds\":[],\"closed_pipes\":[],\"closed_pipes_unlisted\":0}\n");
	n = pp_stats_format(&r, buf, sizeof(buf));
	CHECK(n == (long)strlen(want) && !strcmp(buf, want), "\n got  %s want %s", buf, want);
	CHECK(json_line(buf), "empty report is JSON");

	/* Negative numbers (an fd of -1) stay JSON. */
	struct pp_fd_report f = { .fd = -1, .path = "passthrough", .reason = "closed" };
	r.pid = 2147483647;
	r.fds = &f;
	r.nfds = 1;
	pp_stats_format(&r, buf, sizeof(buf));
	CHECK(json_line(buf) && strstr(buf, "{\"fd\":-1,") && strstr(buf, "\"pid\":2147483647,"),
	      "negative fd: %s", buf);

	/* The program's name, and an exec's note: the image it hands pipes to, escaped. */
	{
		static const uint64_t pipes[2] = { 7, 18446744073709551615ull };
		struct pp_stats_report e = { .pid = 3,
					     .image = "sh",
					     .exec_image = "a\"b",
					     .exec_pipes = pipes,
					     .exec_npipes = 2 };

		pp_stats_format(&e, buf, sizeof(buf));
		CHECK(json_line(buf) &&
			      strstr(buf, "\"image\":\"sh\",\"exec\":{\"image\":\"a\\\"b\","
					  "\"pipes\":[7,18446744073709551615]},\"mode\":"),
		      "exec note: %s", buf);
		e.exec_image = NULL;
		pp_stats_format(&e, buf, sizeof(buf));
		CHECK(!strstr(buf, "\"exec\""), "no note, no exec: %s", buf);
	}
}

static void test_small_buffers(void)
{
	static char small[1 << 16];
	struct pp_stats_report r;
	struct pp_fd_report fds[3];
	long n, m;

	make_report(&r, fds);
	n = pp_stats_format(&r, buf, sizeof(buf));
	CHECK(n > 0 && (size_t)n + 64 < sizeof(small), "report size %ld", n);
	CHECK(pp_stats_format(&r, NULL, 100) == -ENOSPC, "NULL buffer");
	for (long len = 0; len <= n + 1; len++) {
		memset(small, 0xa5, sizeof(small));
		m = pp_stats_format(&r, small, (size_t)len);
		if (len <= n) {
			CHECK(m == -ENOSPC, "len %ld of %ld fit (%ld)", len, n, m);
		} else {
			CHECK(m == n && !memcmp(small, buf, (size_t)n + 1), "len %ld", len);
		}
		for (size_t i = (size_t)len; i < (size_t)n + 64; i++) {
			if ((unsigned char)small[i] != 0xa5) {
				CHECK(0, "len %ld: wrote byte %zu", len, i);
				break;
			}
		}
	}
}

static void test_escapes(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "plain", "\"plain\"" },
		{ "", "\"\"" },
		{ "q\"b\\s/", "\"q\\\"b\\\\s/\"" },
		{ "\n\r\t\b\f", "\"\\n\\r\\t\\b\\f\"" },
		{ "\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\"" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
		  "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"" },
		{ "bad\xff", "\"bad\\ufffd\"" },
		{ "cut\xc3", "\"cut\\ufffd\"" },
		{ "cut\xe2\x82", "\"cut\\ufffd\\ufffd\"" },
		{ "over\xc0\xaf", "\"over\\ufffd\\ufffd\"" },
		{ "over\xe0\x80\xaf", "\"over\\ufffd\\ufffd\\ufffd\"" },
		{ "surr\xed\xa0\x80", "\"surr\\ufffd\\ufffd\\ufffd\"" },
		{ "big\xf4\x90\x80\x80", "\"big\\ufffd\\ufffd\\ufffd\\ufffd\"" },
		{ "max\xf4\x8f\xbf\xbf", "\"max\xf4\x8f\xbf\xbf\"" },
		{ "lone\x80x", "\"lone\\ufffdx\"" },
	};
	struct pp_fd_report f = { .fd = 3, .path = NULL };
	struct pp_stats_report r = { .pid = 9, .fds = &f, .nfds = 1 };
	char want[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		f.reason = cases[i].in;
		CHECK(pp_stats_format(&r, buf, sizeof(buf)) > 0, "case %zu", i);
		snprintf(want, sizeof(want), "\"path\":null,\"reason\":%s,", cases[i].out);
		CHECK(strstr(buf, want), "case %zu: want %s in\n%s", i, want, buf);
		CHECK(json_line(buf), "case %zu not JSON", i);
	}
	r.engine_reason = "a \"quoted\"\nreason";
	pp_stats_format(&r, buf, sizeof(buf));
	CHECK(strstr(buf, "\"engine_reason\":\"a \\\"quoted\\\"\\nreason\""), "engine_reason: %s",
	      buf);
	CHECK(json_line(buf) && count_of(buf, "\n") == 1, "still one line");

	/* The checker itself rejects what it should. */
	CHECK(!json_line("{\"a\":1}"), "no newline");
	CHECK(!json_line("{\"a\":1,}\n"), "trailing comma");
	CHECK(!json_line("{\"a\":\"\x01\"}\n"), "raw control");
	CHECK(!json_line("{\"a\":01}\n"), "leading zero");
	CHECK(!json_line("{\"a\":[1 2]}\n"), "missing comma");
	CHECK(!json_line("{\"a\":1}}\n"), "extra brace");
	CHECK(json_line("{\"a\":[1,-2.5e3,true,null,{}],\"b\":\"\\u00e9\"}\n"), "valid");
}

/* ---- pp_stats_emit ---- */

static size_t read_file(const char *path, char *dst, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;
	size_t n = 0;

	if (fd < 0)
		return 0;
	while (n < len - 1 && (r = read(fd, dst + n, len - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	dst[n] = '\0';
	return n;
}

static bool write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	bool ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);

	if (fd >= 0)
		close(fd);
	return ok;
}

static int dir_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static void test_emit(void)
{
	static char file[1 << 20], twice[2 << 20];
	char dir[] = "/tmp/test-stats-XXXXXX", dest[256], path[512];
	struct pp_stats_report r;
	struct pp_fd_report fds[3];
	const char *err;
	struct stat st;
	long n;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(99);
	}
	make_report(&r, fds);
	n = pp_stats_format(&r, buf, sizeof(buf));

	/* %p is the report's pid; the file is appended to. */
	snprintf(dest, sizeof(dest), "%s/stats-%%p.json", dir);
	snprintf(path, sizeof(path), "%s/stats-4242.json", dir);
	capture_begin();
	errno = 321;
	pp_stats_emit(dest, &r);
	CHECK(errno == 321, "errno kept");
	err = capture_end();
	CHECK(!*err, "emit printed: %s", err);
	CHECK(read_file(path, file, sizeof(file)) == (size_t)n && !strcmp(file, buf),
	      "file holds the report");
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == (0644 & ~(unsigned int)umask(022)),
	      "mode %o", st.st_mode & 0777);
	pp_stats_emit(dest, &r);
	snprintf(twice, sizeof(twice), "%s%s", buf, buf);
	CHECK(read_file(path, file, sizeof(file)) == 2 * (size_t)n && !strcmp(file, twice),
	      "appended");
	unlink(path);
	CHECK(dir_entries(dir) == 0, "%d entries left: a stray file", dir_entries(dir));

	/*
	 * A shared file whose last report was cut short (its writer killed):
	 * the next report starts with a newline, so that it stands whole on
	 * its own line; an empty file, or one that ends a line, gets none.
	 */
	snprintf(dest, sizeof(dest), "%s/shared.json", dir);
	snprintf(twice, sizeof(twice), "{\"pid\":1,\"ver");
	CHECK(write_file(dest, twice), "cut report");
	pp_stats_emit(dest, &r);
	snprintf(twice, sizeof(twice), "{\"pid\":1,\"ver\n%s", buf);
	CHECK(read_file(dest, file, sizeof(file)) == strlen(twice) && !strcmp(file, twice),
	      "after a cut line: %s", file);
	pp_stats_emit(dest, &r);
	snprintf(twice + strlen(twice), sizeof(twice) - strlen(twice), "%s", buf);
	CHECK(read_file(dest, file, sizeof(file)) == strlen(twice) && !strcmp(file, twice),
	      "after a whole line: no newline first");
	CHECK(write_file(dest, ""), "empty file");
	pp_stats_emit(dest, &r);
	CHECK(read_file(dest, file, sizeof(file)) == (size_t)n && !strcmp(file, buf),
	      "an empty file: the report alone");
	unlink(dest);
	/* The same for a file per process whose name is taken (a pid used again). */
	snprintf(dest, sizeof(dest), "%s/stats-%%p.json", dir);
	CHECK(write_file(path, "{\"cut"), "cut report at the pid's name");
	pp_stats_emit(dest, &r);
	snprintf(twice, sizeof(twice), "{\"cut\n%s", buf);
	CHECK(read_file(path, file, sizeof(file)) == strlen(twice) && !strcmp(file, twice),
	      "pid's name taken: appended on a line of its own: %s", file);
	unlink(path);

	/* "%%" is a percent sign; a pid of 0 means the caller's. */
	snprintf(dest, sizeof(dest), "%s/100%%%%-%%p", dir);
	r.pid = 0;
	pp_stats_emit(dest, &r);
	snprintf(path, sizeof(path), "%s/100%%-%d", dir, (int)getpid());
	CHECK(read_file(path, file, sizeof(file)) > 0 && json_line(file), "%%%% and pid 0: %s",
	      path);
	unlink(path);
	r.pid = 4242;

	/* "1" is stderr; "0", "" and NULL write nothing. */
	capture_begin();
	pp_stats_emit("1", &r);
	err = capture_end();
	CHECK(!strcmp(err, buf), "stderr: %s", err);
	capture_begin();
	pp_stats_emit("0", &r);
	pp_stats_emit("", &r);
	pp_stats_emit(NULL, &r);
	err = capture_end();
	CHECK(!*err, "off printed: %s", err);

	/* A path that cannot be opened: one warning. */
	snprintf(dest, sizeof(dest), "%s/no/such/dir/s-%%p", dir);
	capture_begin();
	errno = 0;
	pp_stats_emit(dest, &r);
	CHECK(errno == 0, "errno kept on failure");
	err = capture_end();
	CHECK(count_of(err, "\n") == 1 && strstr(err, "libppipe[") &&
		      strstr(err, "PPIPE_STATS: cannot open ") &&
		      strstr(err, "/no/such/dir/s-4242: No such file or directory\n"),
	      "open failure: %s", err);

	/* A path longer than PATH_MAX once %p is expanded: one warning. */
	static char huge[8192];
	memset(huge, 'p', sizeof(huge) - 1);
	for (size_t i = 0; i + 2 < sizeof(huge); i += 2)
		memcpy(huge + i, "%p", 2);
	capture_begin();
	pp_stats_emit(huge, &r);
	err = capture_end();
	CHECK(count_of(err, "\n") == 1 && strstr(err, "too long"), "long path: %s", err);

	/* pp_stats_emit_fd: to an open fd, and one warning for a closed one. */
	snprintf(path, sizeof(path), "%s/by-fd", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0, "open %s", path);
	errno = 55;
	pp_stats_emit_fd(fd, &r);
	CHECK(errno == 55, "emit_fd kept errno");
	close(fd);
	CHECK(read_file(path, file, sizeof(file)) == (size_t)n && !strcmp(file, buf), "by fd");
	unlink(path);
	capture_begin();
	pp_stats_emit_fd(fd, &r);
	err = capture_end();
	CHECK(count_of(err, "\n") == 1 && strstr(err, "cannot write to fd ") &&
		      strstr(err, "Bad file descriptor\n"),
	      "closed fd: %s", err);

	/* Many fds: the report outgrows any fixed buffer and still comes out whole. */
	enum { MANY = 20000 };
	static struct pp_fd_report many[MANY];
	static char bigfile[16 << 20];
	for (int i = 0; i < MANY; i++) {
		many[i] = fds[i & 1];
		many[i].fd = i;
	}
	r.fds = many;
	r.nfds = MANY;
	snprintf(dest, sizeof(dest), "%s/many", dir);
	pp_stats_emit(dest, &r);
	n = (long)read_file(dest, bigfile, sizeof(bigfile));
	CHECK(n > (1 << 20) && json_line(bigfile) && count_of(bigfile, "{\"fd\":") == MANY,
	      "many fds: %ld bytes", n);
	unlink(dest);
	rmdir(dir);
}

int main(void)
{
	test_buckets();
	test_quantiles();
	test_record_threads();
	test_fold();
	test_fold_pipe();
	test_format();
	test_format_exact();
	test_small_buffers();
	test_escapes();
	test_emit();
	if (failures) {
		fprintf(stderr, "test-stats: %d failure(s)\n", failures);
		return 1;
	}
	printf("test-stats: all passed\n");
	return 0;
}
