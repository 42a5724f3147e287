/* SPDX-License-Identifier: MIT */
/**
 * @file ppipe.h
 * @brief The few functions an application may call when it links
 * libppipe directly. Everything else libppipe does through LD_PRELOAD and
 * needs no call at all.
 */
#ifndef PPIPE_H
#define PPIPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PPIPE_VERSION_MAJOR 0
#define PPIPE_VERSION_MINOR 1
#define PPIPE_VERSION_PATCH 0

/** Returns the library's version, "major.minor.patch". */
const char *ppipe_version(void);

/**
 * Process-wide counters, a snapshot. A fork child's start from zero: they
 * count what this process did. Fields are only ever added at the end: a
 * program built against an older header gets the fields it knows.
 */
struct ppipe_stats {
	size_t size; /**< set by the caller to sizeof(struct ppipe_stats) */
	uint32_t version; /**< set by the library: 3 (see the fields' version comments) */
	uint64_t writes_accelerated; /**< write calls that went in by vmsplice */
	uint64_t bytes_accelerated; /**< bytes those calls moved */
	uint64_t writes_passthrough; /**< tracked-pipe calls made by the real call, any size */
	uint64_t bytes_passthrough; /**< bytes those calls moved */
	uint64_t fallbacks; /**< accelerated attempts that fell back */
	uint64_t pool_bytes; /**< ring memory mapped now */
	uint64_t pool_peak; /**< ring memory mapped at most */
	/* version 2 */
	uint64_t pool_trimmed_bytes; /**< ring memory given back by trimming, in all */
	uint64_t pressure_episodes; /**< times memory pressure (PSI) began */
	/*
	 * version 3: the pipe registry that the processes of this one's tree
	 * share (all 0 while it has none). Counts are the tree's, not this
	 * process's.
	 */
	uint64_t registry_slots; /**< pipes that crossed between processes, registered now */
	uint64_t registry_slots_max; /**< registry slots there are */
	uint64_t registry_records; /**< records of processes holding or handed pipes, now */
	uint64_t registry_records_max; /**< records there are */
	uint64_t registry_reclaimed; /**< records of processes gone, given back, in all */
	uint64_t registry_full; /**< times a pipe stayed plain because the registry was full */
};

/** The size of version 1 of struct ppipe_stats, the smallest accepted. */
#define PPIPE_STATS_SIZE_V1 (offsetof(struct ppipe_stats, pool_peak) + sizeof(uint64_t))

/**
 * Fills @p out with a snapshot, as much of it as the caller's size field
 * says it has room for (at least PPIPE_STATS_SIZE_V1), and sets size to
 * the bytes filled. Returns 0, or -1 with errno EINVAL when @p out is NULL
 * or too small.
 */
int ppipe_stats_get(struct ppipe_stats *out);

/**
 * Writes the JSON statistics object (the PPIPE_STATS format) to @p fd.
 * Returns 0, or -1 with errno set.
 */
int ppipe_stats_dump(int fd);

/**
 * Waits until every byte written to @p fd through libppipe has reached
 * the pipe. With PPIPE_MODE=uring (write-behind) that means the bytes
 * still staged for the pipe; the vmsplice engine writes synchronously,
 * so there it returns 0 at once for any open fd. It is the call to make
 * before handing @p fd to code that expects all earlier writes to be in
 * the pipe. Returns -1 with errno EBADF for a closed fd, or with the
 * error the staged bytes met (EPIPE, after SIGPIPE, when the readers went
 * away), reported once.
 */
int ppipe_flush(int fd);

#ifdef __cplusplus
}
#endif

#endif
