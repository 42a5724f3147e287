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
/* Printed only with PPIPE_DEBUG=1. */
void pp_debug(const char *fmt, ...) PP_PRINTF(1, 2);
/* Printed once per @once flag, only with PPIPE_DEBUG=1. */
void pp_debug_once(int *once, const char *fmt, ...) PP_PRINTF(2, 3);
/* Writes @len bytes to @fd with the raw system call, retrying on EINTR. */
void pp_log_raw(int fd, const char *buf, size_t len);
/*
 * The English description of @err ("No such file or directory"), without
 * the locale machinery or allocation strerror() may use.
 */
const char *pp_strerror(int err);

#endif
