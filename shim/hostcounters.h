/* SPDX-License-Identifier: MIT */
/*
 * The host-wide counters file (PPIPE_COUNTERS): one file of fixed size per
 * user, to which each process that made a write of PPIPE_MIN_WRITE bytes
 * or more into a tracked pipe adds its totals when it ends. Its size never
 * grows with the number of processes, and a process that made no such
 * write never touches it. ppipe-stats-sum reads it (Prometheus text or
 * JSON).
 *
 * The file, version 1, in the host's byte order, PP_HOST_FILE_SIZE bytes:
 *
 *   0       struct pp_host_header (64 bytes): magic "PPIPECNT", version,
 *           the layout (header size, shards, shard size, slots, name and
 *           help sizes), the number of slots in use, the owner's uid, the
 *           time it was made
 *   64      names: PP_HOST_SLOTS entries of PP_HOST_NAME bytes, NUL-padded;
 *           the first `used` name the counters, in slot order
 *   2112    help: PP_HOST_SLOTS entries of PP_HOST_HELP bytes, NUL-padded
 *   ...     zeros up to PP_HOST_HEADER
 *   12288   PP_HOST_SHARDS shards of PP_HOST_SHARD bytes, each
 *           PP_HOST_SLOTS uint64_t: a counter is the sum of its slot over
 *           the shards. No shard crosses a page.
 *
 * A counter's name says its unit: "_bytes" at the end counts bytes, "_ns"
 * nanoseconds (shown as seconds), anything else events. Names are matched,
 * not positions: a process adds each of its counters to the slot of the
 * same name, and counters the file does not name are left out, so a file
 * made by another libppipe version keeps counting what both know.
 *
 * A writer locks one shard with a non-blocking OFD write lock on the
 * shard's bytes (F_OFD_SETLK), preads it, adds, pwrites it and unlocks;
 * if the shard is locked it tries the next, from pid % PP_HOST_SHARDS on,
 * PP_HOST_TRIES shards at most, and then gives up: a process never waits
 * at its end for another one (which may be stopped while holding a lock).
 * A reader takes an OFD read lock on each shard. No mmap: a file someone
 * truncates cannot raise SIGBUS; pread and pwrite only.
 *
 * A file is only written when it is a regular file (opened with
 * O_NOFOLLOW), owned by the effective uid, not writable by group or
 * others, of exactly PP_HOST_FILE_SIZE bytes, with this magic, version
 * and layout and that uid in its header. A new file is made unnamed in
 * its directory (O_TMPFILE), written whole, and only then linked to its
 * name; a creator that loses the race adds to the winner's file.
 * Everything here uses raw system calls, allocates nothing from the heap,
 * keeps errno and is bounded in time: it runs in _exit(), possibly from a
 * signal handler.
 *
 * Layer: base (may use: base).
 */
#ifndef PP_HOSTCOUNTERS_H
#define PP_HOSTCOUNTERS_H

#include "stats.h"

#include <stddef.h>
#include <stdint.h>

/*
 * X(name, help, value): every counter of the file, and what a process
 * adds to it: @value is an expression of the process's report
 * `const struct pp_stats_report *r` (stats.h). One line adds a counter;
 * a name is at most PP_HOST_NAME - 1 characters, a help PP_HOST_HELP - 1.
 */
#define PP_HOST_COUNTERS(X)                                                                        \
	X(processes, "processes that made a write of PPIPE_MIN_WRITE or more into a tracked pipe", \
	  1)                                                                                       \
	X(processes_accelerated, "of them, processes that accelerated any bytes",                  \
	  r->totals.v[PP_CNT_bytes_accelerated] != 0)                                              \
	X(writes_accelerated, "writes that went into their pipe by vmsplice",                      \
	  r->totals.v[PP_CNT_writes_accelerated])                                                  \
	X(accelerated_bytes, "bytes those writes moved", r->totals.v[PP_CNT_bytes_accelerated])    \
	X(writes_passthrough, "writes into tracked pipes that took the real call, small ones too", \
	  r->totals.v[PP_CNT_writes_passthrough])                                                  \
	X(passthrough_bytes, "bytes those writes moved", r->totals.v[PP_CNT_bytes_passthrough])    \
	X(passthrough_large_bytes,                                                                 \
	  "of them, bytes of writes of PPIPE_MIN_WRITE or more (plain pipes, fallbacks)",          \
	  r->totals.v[PP_CNT_bytes_passthrough_large])                                             \
	X(fallbacks, "large writes that tried the fast path and took the real call",               \
	  r->totals.v[PP_CNT_fallbacks])                                                           \
	X(efaults, "writes whose source buffer faulted", r->totals.v[PP_CNT_efaults])              \
	X(ring_waits, "writes that found their ring still referenced by the pipe",                 \
	  r->totals.v[PP_CNT_ring_waits])                                                          \
	X(accelerated_write_ns, "time spent in accelerated writes",                                \
	  r->latency ? r->latency->sum_ns : 0)                                                     \
	X(pressure_episodes, "times memory pressure (PSI) began", r->pressure_episodes)

enum pp_host_counter {
#define PP_X(name, help, value) PP_HOST_##name,
	PP_HOST_COUNTERS(PP_X)
#undef PP_X
		PP_HOST_COUNT
};

#define PP_HOST_MAGIC "PPIPECNT"
#define PP_HOST_VERSION 1
#define PP_HOST_SLOTS 64 /* counters a file can name */
#define PP_HOST_NAME 32 /* bytes of a name, its NUL included */
#define PP_HOST_HELP 96 /* bytes of a help line, its NUL included */
#define PP_HOST_HEADER 12288 /* bytes before the first shard */
#define PP_HOST_SHARDS 32
#define PP_HOST_SHARD (PP_HOST_SLOTS * 8) /* bytes */
#define PP_HOST_FILE_SIZE (PP_HOST_HEADER + PP_HOST_SHARDS * PP_HOST_SHARD)
#define PP_HOST_TRIES 8 /* shards a writer tries before it gives up */
#define PP_HOST_PATH_MAX 512 /* bytes of an expanded path, its NUL included */
/* Where the tables start. */
#define PP_HOST_NAMES_AT 64
#define PP_HOST_HELPS_AT (PP_HOST_NAMES_AT + PP_HOST_SLOTS * PP_HOST_NAME)

struct pp_host_header {
	char magic[8]; /* PP_HOST_MAGIC, no NUL */
	uint32_t version; /* PP_HOST_VERSION */
	uint32_t header_size; /* PP_HOST_HEADER */
	uint32_t shards; /* PP_HOST_SHARDS */
	uint32_t shard_size; /* PP_HOST_SHARD */
	uint32_t slots; /* PP_HOST_SLOTS */
	uint32_t name_size; /* PP_HOST_NAME */
	uint32_t help_size; /* PP_HOST_HELP */
	uint32_t used; /* slots named, at most PP_HOST_SLOTS */
	uint32_t uid; /* the owner: the effective uid of its creator */
	uint32_t reserved0;
	uint64_t created; /* when it was made: seconds since the Epoch */
	uint8_t reserved[8];
};

_Static_assert(sizeof(struct pp_host_header) == PP_HOST_NAMES_AT, "the header is 64 bytes");
_Static_assert(PP_HOST_HELPS_AT + PP_HOST_SLOTS * PP_HOST_HELP <= PP_HOST_HEADER,
	       "the tables fit in the header");
_Static_assert(PP_HOST_HEADER % 4096 == 0 && 4096 % PP_HOST_SHARD == 0, "no shard crosses a page");
_Static_assert(PP_HOST_COUNT <= PP_HOST_SLOTS, "every counter has a slot");

/* What a process adds, from its report: PP_HOST_COUNTERS' values. */
void pp_host_values(const struct pp_stats_report *r, uint64_t out[PP_HOST_COUNT]);

/*
 * Expands @pattern ("%u" = the effective uid, "%%" = "%") into @path
 * (@len bytes). Returns 0, or -ENAMETOOLONG.
 */
int pp_host_path(const char *pattern, char *path, size_t len);

/*
 * Adds @values to the counters file @pattern names, making the file if
 * there is none. Returns 0, -EAGAIN when PP_HOST_TRIES shards were locked
 * by others (nothing added), or another -errno: the file is not one to
 * write (-EPERM: not a regular file of ours, or writable by others;
 * -EPROTO: size, magic, version, layout or uid wrong), or a system call
 * failed. Says why with PPIPE_DEBUG=1. Async-signal-safe; errno is kept.
 */
int pp_host_add(const char *pattern, const uint64_t values[PP_HOST_COUNT]);

#endif
