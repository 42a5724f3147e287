/* SPDX-License-Identifier: MIT */
/* The unit tests' one assertion: report and count, keep going. */
#ifndef PPIPE_TEST_CHECK_H
#define PPIPE_TEST_CHECK_H

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

#endif
