/* SPDX-License-Identifier: MIT */
/* Small compiler helpers shared by every shim file. */
#ifndef PP_COMPILER_H
#define PP_COMPILER_H

#define PP_EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define PP_PRINTF(f, a) __attribute__((format(printf, f, a)))

#endif
