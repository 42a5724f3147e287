/* SPDX-License-Identifier: MIT */
/*
 * The stream ppipe-stage sends (and ppipe-soak sends and checks): a
 * pseudo-random pattern of PATTERN_PERIOD bytes, repeated, so that byte i
 * of the stream is pattern[i % PATTERN_PERIOD]. The period is an odd number
 * of pages, so no ring or pipe size (powers of two) is a multiple of it: a
 * page written again while a reader still needed it, a lost, repeated or
 * altered byte all show as bytes that differ from the pattern at their
 * offset.
 */
#ifndef PPIPE_BENCH_PATTERN_H
#define PPIPE_BENCH_PATTERN_H

#include <stddef.h>

#define PATTERN_PERIOD (257u * 4096u)

/* Fills @buf with bytes [0, @len) of the stream (the pattern, repeated). */
void pattern_fill(unsigned char *buf, size_t len);

#endif
