/* SPDX-License-Identifier: MIT */
/*
 * Messages on stderr, prefixed "libppipe[pid]: ". Formatting goes to a
 * stack buffer and out with one raw write(2), so logging is safe from any
 * context, allocates nothing and never recurses into the shim.
 *
 * Layer: base (may use: base).
 */
#ifndef PP_LOG_H
#define PP_LOG_H

#include "compiler.h"

#include <stdbool.h>
#include <stddef.h>

/* Always printed (configuration warnings, fatal conditions). */
void pp_warn(const char *fmt, ...) PP_PRINTF(1, 2);
/* Whether pp_debug() prints: the options set it once they are read (config.c). */
void pp_log_set_debug(bool on);
extern bool pp_log_debug_on;
void pp_debug_print(const char *fmt, ...) PP_PRINTF(1, 2);
void pp_debug_once_print(int *once, const char *fmt, ...) PP_PRINTF(2, 3);
/*
 * Printed only with PPIPE_DEBUG=1. The test is inline: without it, a call
 * costs one load from the page loading writes anyway, and no page of the
 * printing code (a page fault in a program that just started).
 */
#define pp_debug(...)                                                              \
	do {                                                                       \
		if (unlikely(__atomic_load_n(&pp_log_debug_on, __ATOMIC_RELAXED))) \
			pp_debug_print(__VA_ARGS__);                               \
	} while (0)
/* Printed once per @once flag, only with PPIPE_DEBUG=1. */
#define pp_debug_once(once, ...)                                                   \
	do {                                                                       \
		if (unlikely(__atomic_load_n(&pp_log_debug_on, __ATOMIC_RELAXED))) \
			pp_debug_once_print((once), __VA_ARGS__);                  \
	} while (0)
/* Writes @len bytes to @fd with the raw system call, retrying on EINTR. */
void pp_log_raw(int fd, const char *buf, size_t len);
/*
 * The English description of @err ("No such file or directory"), without
 * the locale machinery or allocation strerror() may use.
 */
const char *pp_strerror(int err);

#endif
