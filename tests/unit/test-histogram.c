// SPDX-License-Identifier: MIT
/* The latency histogram: bucket arithmetic, quantiles, merging. */
#include "histogram.h"

#include <stdio.h>
#include <stdlib.h>

#include "check.h"

static struct histogram h, h2;

/* Every value lands in a bucket whose bounds hold it, within 1/64. */
static void test_buckets(void)
{
	uint64_t v = 0;

	for (int i = 0; i < 200000; i++) {
		unsigned int idx = hist_index(v);
		uint64_t lo = hist_bucket_low(idx), hi = hist_bucket_high(idx);

		CHECK(idx < HIST_BUCKETS, "v=%llu idx=%u", (unsigned long long)v, idx);
		CHECK(lo <= v && v <= hi, "v=%llu in [%llu,%llu]", (unsigned long long)v,
		      (unsigned long long)lo, (unsigned long long)hi);
		CHECK((hi - lo) * 64 <= lo || hi < 128, "bucket [%llu,%llu] too wide",
		      (unsigned long long)lo, (unsigned long long)hi);
		v = v < 1000 ? v + 1 : v + v / 997 + 1;
	}
	CHECK(hist_index(UINT64_MAX) == HIST_BUCKETS - 1, "top bucket %u", hist_index(UINT64_MAX));
	for (unsigned int i = 1; i < HIST_BUCKETS; i++)
		CHECK(hist_bucket_low(i) == hist_bucket_high(i - 1) + 1, "gap before bucket %u", i);
}

/* Values below 128 are exact; 46 us and 55 us stay apart. */
static void test_quantiles(void)
{
	hist_init(&h);
	CHECK(hist_quantile(&h, 0.5) == 0, "empty histogram");
	for (uint64_t v = 1; v <= 100; v++)
		hist_record(&h, v);
	CHECK(hist_quantile(&h, 0.50) == 50, "p50=%llu",
	      (unsigned long long)hist_quantile(&h, 0.5));
	CHECK(hist_quantile(&h, 0.99) == 99, "p99=%llu",
	      (unsigned long long)hist_quantile(&h, 0.99));
	CHECK(hist_quantile(&h, 1.0) == 100, "p100");
	CHECK(hist_mean(&h) == 50, "mean=%llu", (unsigned long long)hist_mean(&h));
	CHECK(h.min == 1 && h.max == 100, "min/max");

	hist_init(&h);
	for (int i = 0; i < 98; i++)
		hist_record(&h, 46000);
	hist_record(&h, 55000);
	hist_record(&h, 55000);
	uint64_t p50 = hist_quantile(&h, 0.5), p99 = hist_quantile(&h, 0.99);

	CHECK(p50 > 45000 && p50 < 47000, "p50=%llu", (unsigned long long)p50);
	CHECK(p99 > 54000 && p99 < 56000, "p99=%llu", (unsigned long long)p99);
	CHECK(hist_quantile(&h, 0.98) < 47000, "p98 still in the 46 us bucket");

	/* Quantiles never leave [min, max]. */
	hist_init(&h);
	hist_record(&h, 1000003);
	CHECK(hist_quantile(&h, 0.5) == 1000003, "single sample clamps to itself: %llu",
	      (unsigned long long)hist_quantile(&h, 0.5));
}

/* Quantiles of random data agree with the exact order statistic. */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_random(void)
{
	enum { N = 100000 };
	static uint64_t v[N];
	const double qs[] = { 0.5, 0.9, 0.99, 0.999 };
	uint64_t x = 88172645463325252ull;

	hist_init(&h);
	hist_init(&h2);
	for (int i = 0; i < N; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		v[i] = 1000 + x % 10000000;
		hist_record(i & 1 ? &h : &h2, v[i]);
	}
	hist_merge(&h, &h2);
	CHECK(h.count == N, "merged count %llu", (unsigned long long)h.count);
	qsort(v, N, sizeof(v[0]), cmp_u64);
	CHECK(h.min == v[0] && h.max == v[N - 1], "merged min/max");
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		uint64_t exact = v[(size_t)(qs[i] * N) - 1], got = hist_quantile(&h, qs[i]);
		double err = (double)(got > exact ? got - exact : exact - got) / (double)exact;

		CHECK(err <= 1.0 / 64, "q=%g exact=%llu got=%llu", qs[i], (unsigned long long)exact,
		      (unsigned long long)got);
	}
}

int main(void)
{
	test_buckets();
	test_quantiles();
	test_random();
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
