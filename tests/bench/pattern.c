// SPDX-License-Identifier: MIT
#include "pattern.h"

#include <stdint.h>
#include <string.h>

#define PATTERN_SEED 0x5eed0f5717ea3ull

void pattern_fill(unsigned char *buf, size_t len)
{
	uint64_t x = PATTERN_SEED;
	size_t first = len < PATTERN_PERIOD ? len : PATTERN_PERIOD;

	for (size_t i = 0; i < first; i += 8) {
		uint64_t z = (x += 0x9e3779b97f4a7c15ull);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		memcpy(buf + i, &z, first - i < 8 ? first - i : 8);
	}
	for (size_t off = first; off < len;) {
		size_t n = len - off < PATTERN_PERIOD ? len - off : PATTERN_PERIOD;

		memcpy(buf + off, buf + off - PATTERN_PERIOD, n);
		off += n;
	}
}
