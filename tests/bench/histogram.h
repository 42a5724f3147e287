/* SPDX-License-Identifier: MIT */
/*
 * Latency histogram with log-linear buckets: exact below 128, then 64
 * sub-buckets per power of two, so any recorded value is reported within
 * 1/64 (1.6%) of itself. Fine enough to tell 46 us from 55 us, coarse
 * enough (3776 counters, 30 KiB) to keep one per writer.
 */
#ifndef PPIPE_BENCH_HISTOGRAM_H
#define PPIPE_BENCH_HISTOGRAM_H

#include <stdint.h>

#define HIST_SUB_BITS 6
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 1) * HIST_SUB)

struct histogram {
	uint64_t count;
	uint64_t sum;
	uint64_t min;
	uint64_t max;
	uint64_t bucket[HIST_BUCKETS];
};

/* Bucket index of @v; monotonic in @v. */
static inline unsigned int hist_index(uint64_t v)
{
	unsigned int e, k;

	if (v < 2 * HIST_SUB)
		return (unsigned int)v;
	e = 63u - (unsigned int)__builtin_clzll(v);
	k = e - HIST_SUB_BITS + 1;
	return (k << HIST_SUB_BITS) + (unsigned int)((v >> (k - 1)) - HIST_SUB);
}

static inline void hist_record(struct histogram *h, uint64_t v)
{
	if (!h->count || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->count++;
	h->sum += v;
	h->bucket[hist_index(v)]++;
}

void hist_init(struct histogram *h);
/* Smallest and largest value that land in bucket @idx. */
uint64_t hist_bucket_low(unsigned int idx);
uint64_t hist_bucket_high(unsigned int idx);
/* Adds every sample of @src to @dst. */
void hist_merge(struct histogram *dst, const struct histogram *src);
/*
 * The value at quantile @q (0 < q <= 1): the midpoint of the bucket that
 * holds the ceil(q * count)-th smallest sample, clamped to [min, max].
 * Returns 0 for an empty histogram.
 */
uint64_t hist_quantile(const struct histogram *h, double q);
/* Mean of the recorded values, 0 when empty. */
uint64_t hist_mean(const struct histogram *h);

#endif
