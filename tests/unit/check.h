/* SPDX-License-Identifier: MIT */
/* The unit tests' one assertion: report and count, keep going. */
#ifndef PPIPE_TEST_CHECK_H
#define PPIPE_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                           \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                              \
			fprintf(stderr, "\n");                                     \
			failures++;                                                \
		}                                                                  \
	} while (0)

/* xorshift64: the tests' reproducible random numbers, from the seed in @state. */
static inline uint64_t check_rand(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

#endif
