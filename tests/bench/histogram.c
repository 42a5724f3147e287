// SPDX-License-Identifier: MIT
#include "histogram.h"

#include <math.h>
#include <string.h>

void hist_init(struct histogram *h)
{
	memset(h, 0, sizeof(*h));
}

uint64_t hist_bucket_low(unsigned int idx)
{
	unsigned int k;

	if (idx < 2 * HIST_SUB)
		return idx;
	k = idx >> HIST_SUB_BITS;
	return (uint64_t)((idx & (HIST_SUB - 1)) + HIST_SUB) << (k - 1);
}

uint64_t hist_bucket_high(unsigned int idx)
{
	unsigned int k;

	if (idx < 2 * HIST_SUB)
		return idx;
	k = idx >> HIST_SUB_BITS;
	return hist_bucket_low(idx) + ((1ull << (k - 1)) - 1);
}

void hist_merge(struct histogram *dst, const struct histogram *src)
{
	if (!src->count)
		return;
	if (!dst->count || src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	dst->count += src->count;
	dst->sum += src->sum;
	for (unsigned int i = 0; i < HIST_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
}

uint64_t hist_quantile(const struct histogram *h, double q)
{
	uint64_t rank, seen = 0;

	if (!h->count)
		return 0;
	if (q <= 0)
		return h->min;
	rank = (uint64_t)ceil(q * (double)h->count);
	if (rank < 1)
		rank = 1;
	if (rank > h->count)
		rank = h->count;
	for (unsigned int i = 0; i < HIST_BUCKETS; i++) {
		uint64_t lo, hi, mid;

		seen += h->bucket[i];
		if (seen < rank)
			continue;
		lo = hist_bucket_low(i);
		hi = hist_bucket_high(i);
		mid = lo + (hi - lo) / 2;
		if (mid < h->min)
			mid = h->min;
		if (mid > h->max)
			mid = h->max;
		return mid;
	}
	return h->max;
}

uint64_t hist_mean(const struct histogram *h)
{
	return h->count ? h->sum / h->count : 0;
}
