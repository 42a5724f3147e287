/* SPDX-License-Identifier: MIT */
/*
 * Memory pressure that reaches the writer. A global memory hog mostly
 * keeps kswapd busy; the pipe writer only pays when its own page charges
 * have to reclaim. So the benchmark moves itself into a memory cgroup
 * whose limit is kept full: stress-ng holds anonymous memory in it, and a
 * helper keeps re-reading a sparse file so the rest is page cache. Every
 * page the pipe then charges must be reclaimed from that cache, in the
 * charging task. When no cgroup can be made (not root, no memory
 * controller) it falls back to the seeds' global stress-ng run.
 *
 * Either way it reports the reclaim counters before and after, so that a
 * run that saw no direct reclaim says so.
 */
#ifndef PPIPE_BENCH_PRESSURE_H
#define PPIPE_BENCH_PRESSURE_H

#include <stdint.h>
#include <sys/types.h>

struct pressure_counters {
	uint64_t pgscan_direct;
	uint64_t pgsteal_direct;
	uint64_t allocstall;
	uint64_t pgscan_kswapd;
	/* cgroup: v2 memory.stat pgscan_direct, or v1 memory.failcnt */
	uint64_t memcg_reclaim;
	/* cgroup v2 memory.events "max" (times the limit was hit) */
	uint64_t memcg_max_events;
};

struct pressure {
	int active;
	const char *method; /* "cgroup-v2", "cgroup-v1" or "global" */
	char cgroup[256]; /* our cgroup directory, "" when global */
	char parent_procs[512];
	char filler_path[256];
	char stressor[256];
	pid_t stress_pid;
	pid_t filler_pid;
	uint64_t limit;
	struct pressure_counters before, after;
};

/*
 * Starts the pressure with a cgroup limit of @limit bytes. Must be called
 * before any thread or child is created, so that all of them run inside
 * the cgroup. Returns 0, or -1 with a one-line reason in @err.
 */
int pressure_start(struct pressure *p, uint64_t limit, char *err, size_t errlen);
/* Stops it, takes the "after" counters and removes the cgroup. */
void pressure_stop(struct pressure *p);
/* True when the counters show reclaim in the allocating tasks. */
int pressure_saw_direct_reclaim(const struct pressure *p);

/* Exposed for tests: the value of @key in a "key value" per line file. */
int pressure_read_stat(const char *path, const char *key, uint64_t *out);

#endif
