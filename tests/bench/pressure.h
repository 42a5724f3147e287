/* SPDX-License-Identifier: MIT */
/*
 * Memory pressure for ppipe-bench, in one of two modes.
 *
 * memcg (the default): the benchmark runs in a memory cgroup that a helper
 * keeps at its limit with page cache, so the pipe's page charges have to
 * reclaim in the charging task. The helper fills the cgroup once, then only
 * tops it up, with its CPU time held to a budget (a share of one CPU) and
 * measured: on a small machine a helper that spins takes a CPU from the
 * writer and reader, and the run then measures CPU contention instead.
 *
 * hog: the kernel series' method, a global stress-ng --vm over half of
 * RAM, no cgroup. Whether it reaches direct reclaim depends on the
 * machine's RAM; its CPU use is reported, not bounded.
 *
 * Either way the counters are taken before and after the run: the system's
 * and the memory cgroup's reclaim, the time the benchmark's own tasks
 * stalled on memory (cgroup v2 memory.pressure of a cgroup that holds only
 * the benchmark) and the CPU time of the helpers.
 */
#ifndef PPIPE_BENCH_PRESSURE_H
#define PPIPE_BENCH_PRESSURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum pressure_mode { PRESSURE_NONE, PRESSURE_MEMCG, PRESSURE_HOG };

#define PRESSURE_FILLER_CPU_PCT 15

struct pressure_counters {
	uint64_t wall_ns;
	/* /proc/vmstat: the whole system */
	uint64_t pgscan_direct;
	uint64_t pgsteal_direct;
	uint64_t allocstall;
	uint64_t pgscan_kswapd;
	/* the memory cgroup: v2 memory.stat, memory.events(.local); v1 memory.failcnt */
	uint64_t memcg_pgscan_direct;
	uint64_t memcg_pgsteal_direct;
	uint64_t memcg_max;
	uint64_t memcg_max_local;
	uint64_t memcg_failcnt;
	/* memory.pressure "some" total of the cgroup that holds only the benchmark */
	uint64_t bench_stall_us;
	/* CPU time of the helpers (the filler, or stress-ng and its workers) */
	uint64_t helper_cpu_us;
};

struct pressure {
	int active;
	enum pressure_mode mode;
	const char *method; /* "cgroup-v2", "cgroup-v1" or "global" */
	char memcg[256]; /* the memory cgroup with the limit, "" in hog mode */
	char memcg_home[512]; /* cgroup.procs of the memory cgroup we came from */
	char acct[256]; /* cgroup v2 with bench/ and helpers/ in it, "" when none */
	char acct_home[512]; /* cgroup.procs of the v2 cgroup we came from */
	int acct_is_memcg; /* cgroup v2 only: acct and memcg are one */
	char stressor[256]; /* what makes the pressure, in words */
	const char *cpu_from; /* "cgroup", "task" or NULL: where helper_cpu_us comes from */
	int have_stall; /* bench_stall_us is measured */
	unsigned int filler_cpu_pct;
	pid_t stress_pid;
	pid_t filler_pid;
	uint64_t limit;
	struct pressure_counters before, after;
};

/* "memcg" or "hog" to a mode; PRESSURE_NONE for anything else. */
enum pressure_mode pressure_mode_parse(const char *name);
const char *pressure_mode_name(enum pressure_mode mode);

/*
 * Starts the pressure: @limit is the memory cgroup's limit in bytes, and
 * @filler_cpu_pct the filler's CPU budget in percent of one CPU (memcg
 * mode). Must be called before any thread or child is created, so that all
 * of them run inside the cgroups. Returns 0, or -1 with a one-line reason
 * in @err.
 */
int pressure_start(struct pressure *p, enum pressure_mode mode, uint64_t limit,
		   unsigned int filler_cpu_pct, char *err, size_t errlen);
/* Stops it, takes the "after" counters and removes the cgroups. */
void pressure_stop(struct pressure *p);

/* What the run's direct reclaim evidence covers: "benchmark", "cgroup" or "system". */
const char *pressure_reclaim_scope(const struct pressure *p);
/* True when the counters of that scope show direct reclaim during the run. */
int pressure_saw_direct_reclaim(const struct pressure *p);
/* The helpers' CPU time over the run's wall time (1.0 = one CPU), or < 0 if unknown. */
double pressure_helper_cpu_share(const struct pressure *p);

/* Exposed for tests: the value of @key in a "key value" per line file. */
int pressure_read_stat(const char *path, const char *key, uint64_t *out);
/* Exposed for tests: the "some" line's total= (us) of a PSI file such as memory.pressure. */
int pressure_read_psi_some(const char *path, uint64_t *out);

#endif
