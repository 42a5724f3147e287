/* SPDX-License-Identifier: MIT */
/*
 * Configuration: every PPIPE_* option, parsed once at load from the
 * environment. options.def is the one list of options: config.c's
 * defaults, parsers, table dump and checks are generated from it by
 * X-macros. struct pp_config below is written by hand, for its comments;
 * config.c checks at compile time that every row has its field, of the
 * C type its option type needs.
 *
 * Layer: base (may use: base).
 */
#ifndef PP_CONFIG_H
#define PP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pp_mode { PP_MODE_AUTO, PP_MODE_VMSPLICE, PP_MODE_URING, PP_MODE_OFF };
enum pp_uring_splice { PP_URING_SPLICE_INLINE, PP_URING_SPLICE_ASYNC };
enum pp_readers { PP_READERS_VERIFY, PP_READERS_TRUST };
enum pp_thp { PP_THP_AUTO, PP_THP_ON, PP_THP_OFF };
enum pp_turns { PP_TURNS_AUTO, PP_TURNS_ON, PP_TURNS_OFF };

/* Highest fd number a PPIPE_FDS list can name. */
#define PP_FDS_LIST_MAX 1024

struct pp_fdset {
	bool all; /* "all" */
	bool none; /* "none" */
	uint64_t bits[PP_FDS_LIST_MAX / 64]; /* a list: 1,stdout,7 */
};

struct pp_config {
	struct pp_fdset fds; /* PPIPE_FDS */
	enum pp_mode mode; /* PPIPE_MODE */
	uint64_t min_write; /* PPIPE_MIN_WRITE, bytes */
	enum pp_readers readers; /* PPIPE_READERS */
	char stats[256]; /* PPIPE_STATS: "" or "0" off, "1" stderr, else a path (%p = pid) */
	char counters[256]; /* PPIPE_COUNTERS: "" off, else a path (%u = effective uid) */
	bool debug; /* PPIPE_DEBUG */
	bool verbose; /* PPIPE_VERBOSE */
	uint64_t ring_size; /* PPIPE_RING_SIZE, bytes per ring; 0 = 2 x pipe capacity */
	uint64_t pool_max; /* PPIPE_POOL_MAX, bytes for the whole process */
	uint64_t pool_keep; /* PPIPE_POOL_KEEP, bytes an idle pipe keeps */
	int64_t idle_ms; /* PPIPE_IDLE_MS, idle time before a pipe is trimmed */
	int64_t numa_node; /* PPIPE_NUMA_NODE, -1 = the writer's node */
	int64_t psi; /* PPIPE_PSI, percent of time stalled on memory; 0 = ignore */
	char psi_file[256]; /* PPIPE_PSI_FILE: "" = cgroup's, else /proc/pressure/memory */
	enum pp_thp thp; /* PPIPE_THP */
	enum pp_turns turns; /* PPIPE_TURNS */
	uint64_t uring_stage; /* PPIPE_URING_STAGE, bytes of a write-behind staging pipe */
	enum pp_uring_splice uring_splice; /* PPIPE_URING_SPLICE */
	/*
	 * Not an option: statistics or explanations were asked for (PPIPE_STATS,
	 * PPIPE_COUNTERS, PPIPE_DEBUG), so what libppipe leaves to libc is
	 * counted too (stdio's writes: stdiowrite.h).
	 */
	bool watch;
};

extern struct pp_config pp_cfg;

/* Initialised (init.c) and not switched off: calls may be intercepted. */
extern bool pp_is_active;
static inline bool pp_active(void)
{
	return __atomic_load_n(&pp_is_active, __ATOMIC_ACQUIRE);
}

/*
 * What this process has used so far. The fork handlers, exec and exit
 * look here first and skip what was never used: they run in every
 * process libppipe is loaded into, and a page read for nothing in a fork
 * child is a page fault.
 */
enum pp_used_bit {
	PP_USED_ENGINE = 1, /* the write engine ran: probe, rings, pool, huge pages, PSI */
	PP_USED_STATS = 2, /* counters were folded into the process totals */
	PP_USED_PIPES = 4, /* a pipe object was made */
	PP_USED_URING = 8, /* write-behind's service was asked for */
};
extern unsigned int pp_used;
static inline void pp_mark_used(unsigned int bit)
{
	if (!(__atomic_load_n(&pp_used, __ATOMIC_RELAXED) & bit))
		__atomic_fetch_or(&pp_used, bit, __ATOMIC_RELAXED);
}
static inline bool pp_was_used(unsigned int bit)
{
	return __atomic_load_n(&pp_used, __ATOMIC_RELAXED) & bit;
}

/*
 * Parses the PPIPE_* variables of @envp (NULL-terminated, like environ)
 * into pp_cfg. Never fails: a bad value prints one line on stderr naming
 * the variable, the value and what is used instead. Calls no function
 * that libppipe interposes other than write(2) on fd 2 through
 * pp_log_raw(). Returns whether @envp has any PPIPE_ variable at all
 * (an option, a test's, the registry's): without one, nothing else at
 * start-up needs to look.
 */
bool pp_config_load(char *const *envp);

/*
 * pp_config_load() with the AT_SECURE decision made by the caller (for
 * tests): @secure ignores PPIPE_STATS paths, as for setuid programs.
 */
void pp_config_load_env(char *const *envp, bool secure);

/* Resets pp_cfg to the defaults (for tests). */
void pp_config_defaults(struct pp_config *c);

/*
 * Pure parsers, unit-tested without preload. Each returns 0 and stores
 * the value, or -EINVAL and leaves *out alone.
 */
int pp_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int pp_parse_bool(const char *s, bool *out);
int pp_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);
int pp_parse_fdset(const char *s, struct pp_fdset *out);
/* @names: NULL-terminated, case ignored; stores the index of the match. */
int pp_parse_enum(const char *s, const char *const *names, unsigned int *out);

/* The option names of enum values ("auto", "verify", ...), "?" if out of range. */
const char *pp_mode_name(enum pp_mode m);
const char *pp_readers_name(enum pp_readers r);
const char *pp_thp_name(enum pp_thp t);

/* Is @fd selected by PPIPE_FDS? */
static inline bool pp_fd_selected(int fd)
{
	if (pp_cfg.fds.all)
		return true;
	if (pp_cfg.fds.none || fd < 0 || fd >= PP_FDS_LIST_MAX)
		return false;
	return (pp_cfg.fds.bits[fd / 64] >> (fd % 64)) & 1;
}

/* Writes the resolved option table to @fd (PPIPE_VERBOSE, ppipe_options_dump). */
void pp_config_dump(int fd);

#endif
