/* SPDX-License-Identifier: MIT */
/*
 * Statistics. Counters live in each pipe object (relaxed atomics, so only
 * threads writing the same pipe share a cache line) and are folded into
 * the process totals when the pipe goes away. At exit, PPIPE_STATS gets
 * one JSON object per process:
 *   {"pid":..., "version":..., "mode":..., "engine":..., "engine_reason":...,
 *    "write_behind": {"state":..., "stages":.., "staged_bytes":.., "moved_bytes":..,
 *                     "splices":.., "dropped_bytes":.., "errors_reported":..,
 *                     "flush_waits":..},
 *    "registry": {<PP_REGISTRY_FIELDS>} or null,
 *    "registry_missing": why the process went without one (pp_reg_missing) or null,
 *    "totals": {<every counter>},
 *    "latency_ns": {"count":..,"avg":..,"p50":..,"p99":..,"max":..,
 *                   "buckets":[[upper_ns,count],...]},
 *    "fds": [{"fd":..,"inode":..,"end":"write"|"read","path":"vmsplice"|"passthrough",
 *             "reason":"...","last_fallback":"..."|null, <every counter>}, ...],
 *    "closed_pipes": [{"inode":..,"path":..,"reason":..,"last_fallback":..,
 *                      <every counter>}, ...],
 *    "closed_pipes_unlisted": N}
 * "fds" are the tracked fds open at the time; "closed_pipes" the pipes this
 * process closed after writing into them (the first PP_CLOSED_MAX; the
 * rest are only counted). Together they tell each pipe's story.
 *
 * Layer: base (may use: base).
 */
#ifndef PP_STATS_H
#define PP_STATS_H

#include "compiler.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* X(name, description): every counter, in JSON order. */
#define PP_COUNTERS(X)                                                                          \
	X(writes_accelerated, "write/writev calls that went into the pipe by vmsplice")         \
	X(bytes_accelerated, "bytes those calls moved")                                         \
	X(writes_passthrough, "write/writev calls on tracked pipes that took the real call")    \
	X(bytes_passthrough, "bytes those calls moved")                                         \
	X(bytes_passthrough_large, "of them, bytes of writes of PPIPE_MIN_WRITE or more")       \
	X(fallbacks, "accelerated attempts that fell back to the real call")                    \
	X(vmsplice_calls, "vmsplice system calls issued")                                       \
	X(fionread_checks, "FIONREAD checks of the reuse rule")                                 \
	X(identity_checks, "fstat checks that an fd still names its pipe")                      \
	X(ring_waits, "writes that found their ring still referenced by the pipe")              \
	X(efaults, "writes whose source buffer faulted")                                        \
	X(writes_nonblocking, "of the accelerated writes, those to a non-blocking write end")   \
	X(bytes_vmspliced, "of bytes_accelerated, bytes vmsplice put in (the rest: real call)") \
	X(span_commits, "of the accelerated writes, spans committed in place (ppipe.h)")        \
	X(stdio_writes, "fwrite/fputs calls on a stream of the pipe that libppipe made")        \
	X(bytes_stdio, "bytes stdio calls left to libc, written out of sight (PPIPE_STATS...)")

enum pp_counter {
#define PP_X(name, desc) PP_CNT_##name,
	PP_COUNTERS(PP_X)
#undef PP_X
		PP_CNT_COUNT
};

struct pp_counters {
	uint64_t v[PP_CNT_COUNT];
};

static inline void pp_count(struct pp_counters *c, enum pp_counter i, uint64_t n)
{
	__atomic_fetch_add(&c->v[i], n, __ATOMIC_RELAXED);
}

/*
 * The same without a locked instruction, for the path every write below
 * PPIPE_MIN_WRITE to a tracked pipe takes: exact for a pipe one thread
 * writes at a time; threads writing the same pipe at the same instant may
 * lose a count (never a byte).
 */
static inline void pp_count_quick(struct pp_counters *c, enum pp_counter i, uint64_t n)
{
	__atomic_store_n(&c->v[i], __atomic_load_n(&c->v[i], __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELAXED);
}

/*
 * This process made a write of PPIPE_MIN_WRITE bytes or more into a
 * tracked pipe (accelerated, fallen back or plain): set once, with a
 * plain store, by the large-write path; cleared in a fork child. Only
 * such a process adds itself to the PPIPE_COUNTERS file at its end.
 */
extern bool pp_wrote_large;

/* Relaxed atomics: a plain load and store on x86-64 and aarch64, no locked instruction. */
static inline bool pp_large_written(void)
{
	return __atomic_load_n(&pp_wrote_large, __ATOMIC_RELAXED);
}

static inline void pp_note_large_write(void)
{
	if (unlikely(!pp_large_written()))
		__atomic_store_n(&pp_wrote_large, true, __ATOMIC_RELAXED);
}

/* Latency of accelerated writes: log2 buckets with 4 sub-buckets. */
#define PP_LAT_BUCKETS 256

struct pp_latency {
	uint64_t count, sum_ns, max_ns;
	uint64_t bucket[PP_LAT_BUCKETS];
};

/* Records one accelerated write's latency (relaxed atomics; any thread). */
void pp_latency_record(struct pp_latency *l, uint64_t ns);
/* Bucket of @ns, and the largest value that bucket holds. */
unsigned int pp_latency_bucket(uint64_t ns);
uint64_t pp_latency_bucket_upper(unsigned int b);
/* Value at quantile @q (0..1]: the upper bound of its bucket, clamped to max. */
uint64_t pp_latency_quantile(const struct pp_latency *l, double q);

/* Process totals of pipes that are gone. */
extern struct pp_counters pp_totals_closed;
extern struct pp_latency pp_latency_all;

/* Adds @c to the closed-pipe totals. */
void pp_stats_fold(const struct pp_counters *c);
/*
 * A pipe is gone, in two steps, so that its path and reason are looked up
 * only for a pipe that is listed: pp_stats_fold_closed() adds its counters
 * @c to the totals and returns the "closed_pipes" entry it is to fill (-1:
 * no byte was written into it, or the list is full), which
 * pp_stats_list_closed() fills with its @path, @reason and @last_fallback
 * (static strings). Async-signal-safe.
 */
long pp_stats_fold_closed(const struct pp_counters *c);
void pp_stats_list_closed(long entry, uint64_t ino, const char *path, const char *reason,
			  const char *last_fallback, const struct pp_counters *c);
/*
 * In a fork child: the totals, latencies and closed pipes start from zero,
 * so that each process reports what it did itself and a tree's reports add
 * up. (The caller clears the live pipes' counters.)
 */
void pp_stats_after_fork_child(void);

/* One fd's line in the report, or (fd -1) a closed pipe's. */
struct pp_fd_report {
	int fd;
	unsigned long inode;
	int write_end; /* 1: write end, 0: read end */
	const char *path; /* "vmsplice" or "passthrough" */
	const char *reason; /* why: "accelerated", "readers unknown", "O_DIRECT", ... */
	const char *last_fallback; /* why its last large write took the real call, or NULL */
	struct pp_counters cnt;
};

/* Closed pipes listed in a report; more are only counted. */
#define PP_CLOSED_MAX 256

/*
 * The closed pipes listed so far: their number, at most PP_CLOSED_MAX,
 * copied to @out; *@unlisted gets the number of those that did not fit.
 */
size_t pp_stats_closed(struct pp_fd_report *out, uint64_t *unlisted);

/* Write-behind (PPIPE_MODE=uring, stage.h), process-wide: relaxed atomics. */
struct pp_wb_counters {
	uint64_t stages; /* staging pipes opened */
	uint64_t staged_bytes; /* bytes writes left in staging pipes */
	uint64_t moved_bytes; /* of them, spliced on into their pipes */
	uint64_t splices; /* splices that moved bytes on */
	uint64_t dropped_bytes; /* dropped: their pipe's readers were gone */
	uint64_t errors_reported; /* deferred errors handed to a write or close */
	uint64_t flush_waits; /* flushes that had to wait for staged bytes */
};
extern struct pp_wb_counters pp_wb;

/*
 * X(name, description): what the report says of the registry this
 * process's tree shares (registry.h), tree-wide: "registry" in the JSON,
 * null without one.
 */
#define PP_REGISTRY_FIELDS(X)                                                               \
	X(slots, "pipe slots in use now")                                                   \
	X(slots_max, "pipe slots there are")                                                \
	X(records, "process records in use now")                                            \
	X(records_max, "process records there are")                                         \
	X(reclaimed, "records of processes gone (or images that never claimed) given back") \
	X(reclaimed_holds, "holds those records gave back")                                 \
	X(expired_charges, "charges of images that never claimed, made plain verdicts")     \
	X(healed, "counts a sweep found without an owner and set right")                    \
	X(full, "times a pipe or a fork child's hold found no room")                        \
	X(sweeps, "sweeps run")

struct pp_stats_registry {
#define PP_X(name, desc) uint64_t name;
	PP_REGISTRY_FIELDS(PP_X)
#undef PP_X
};

struct pp_stats_report {
	pid_t pid;
	char image[16]; /* the program's name as the kernel gives it; "" (null) unknown */
	/* An exec's note (pp_stats_exec_note): the image it hands pipes to, and those pipes. */
	const char *exec_image;
	const uint64_t *exec_pipes;
	int exec_npipes;
	const char *engine; /* "vmsplice", "passthrough" */
	const char *engine_reason; /* e.g. "vmsplice copies on this kernel" */
	const char *thp; /* huge pages for rings, and why: "on, measured: ..." */
	const char *write_behind; /* "on" or why not (PPIPE_MODE=uring); NULL otherwise */
	struct pp_wb_counters wb;
	uint64_t pool_bytes, pool_peak; /* ring memory mapped now, at most */
	uint64_t pool_trimmed_bytes; /* given back by trimming, in all */
	uint64_t pressure_episodes; /* times memory pressure (PSI) began */
	uint64_t exited_rings_reused; /* rings of exited threads taken over by others */
	uint64_t exited_rings_freed; /* and unmapped */
	struct pp_stats_registry registry; /* all 0 (null in the JSON) without one */
	const char *registry_missing; /* why there is none, when it tried to make one; NULL */
	struct pp_counters totals; /* closed pipes + live ones, summed by the caller */
	const struct pp_latency *latency;
	const struct pp_fd_report *fds;
	size_t nfds;
	const struct pp_fd_report *closed; /* closed pipes (fd, write_end unused) */
	size_t nclosed;
	uint64_t closed_unlisted; /* closed pipes not in @closed */
};

/*
 * Formats @r as one JSON object plus a newline into @buf (size @len).
 * Returns the length, or -ENOSPC if it did not fit (or @buf is NULL). Pure: no I/O, no malloc.
 * The output is NUL-terminated (not counted), and the NUL must fit too.
 * NULL strings are written as null; "mode" is pp_cfg.mode, "version"
 * PPIPE_VERSION (a -D of the build, "unknown" without).
 */
long pp_stats_format(const struct pp_stats_report *r, char *buf, size_t len);

/*
 * Writes @r where PPIPE_STATS says: "1" = stderr, otherwise a path in
 * which "%p" becomes the pid and "%%" a "%". "" and "0" write nothing.
 * A path with "%p" (a file per process) gets the report whole or not at
 * all: written into an unnamed file of its directory (O_TMPFILE) and
 * linked to the name when complete; where the name is taken (a pid used
 * again) or O_TMPFILE is missing, it is appended as to any other path
 * (O_WRONLY|O_CREAT|O_APPEND|O_NONBLOCK, 0644), in one write(2), so
 * appends from several processes do not mix, and after a file's last
 * line was cut short (a writer killed) with a newline first. A failure
 * prints one warning. Allocates with mmap only.
 */
void pp_stats_emit(const char *dest, const struct pp_stats_report *r);
/* Writes @r to an open fd (ppipe_stats_dump). */
void pp_stats_emit_fd(int fd, const struct pp_stats_report *r);

/*
 * An exec handed the @n pipes @inos to the image the kernel calls @comm,
 * which runs as @pid (0: this process): one line in the PPIPE_STATS file
 * (a path only), a report with nothing in it (every field there, every
 * count 0, so that whoever reads reports reads it too) and
 * "exec":{"image":..,"pipes":[..]}. A line of the same pid after it says
 * the image ran libppipe; none, that it did not (or was killed): what it
 * wrote into those pipes was out of sight (ppipe-stats-sum says so).
 * Stack and system calls only: a vfork child may call it.
 */
void pp_stats_exec_note(long pid, const char comm[16], const uint64_t *inos, int n);

#endif
