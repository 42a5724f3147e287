/* SPDX-License-Identifier: MIT */
/*
 * A number of this process's JSON statistics (the PPIPE_STATS report, as
 * ppipe_stats_dump() writes it), for the tests that look at what the
 * public struct does not carry.
 */
#ifndef PPIPE_TEST_STATSJSON_H
#define PPIPE_TEST_STATSJSON_H

#include <stdint.h>

/* The number after the first "@key": of the report; dies if there is none. */
uint64_t t_stats_json(const char *key);

#endif
