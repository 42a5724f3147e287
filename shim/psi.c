// SPDX-License-Identifier: MIT
/*
 * Memory pressure, as the kernel's pressure stall information (PSI)
 * reports it: the "some" line's total= is the microseconds during which
 * at least one task waited for memory. The write path calls pp_psi_poll()
 * about every PPIPE_IDLE_MS / 2 (never more often, never from a thread of
 * ours, no fd kept open): it reads the file, and the stall time since the
 * last reading, as a share of the wall time, is the pressure. At or above
 * PPIPE_PSI percent, rings not written since the last reading give all
 * their memory back. Busy rings and new ones are left alone: a ring's
 * pages are charged once, where a plain pipe write allocates and charges
 * a page per 4 KiB under pipe->mutex, which is what pressure makes slow
 * (docs/design.md, "Ring memory and memory pressure").
 *
 * The file is PPIPE_PSI_FILE if set, else the process's own cgroup v2
 * memory.pressure (what its memory.max makes it wait for), in the v2
 * hierarchy at /sys/fs/cgroup or, beside v1 controllers, at
 * /sys/fs/cgroup/unified; else the system's /proc/pressure/memory. Raw
 * system calls, no allocation.
 */
#include "psi.h"

#include "config.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Where the cgroup v2 hierarchy is mounted: alone, or beside v1 ("hybrid"). */
static const char *const cgroup_roots[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };

static char path[320];
static bool path_known, unavailable;
static uint64_t last_total_us, last_ns;
static bool active;
static uint64_t episodes;
static int polling; /* one reader of the file at a time, and not re-entered */

/* Reads up to @len - 1 bytes of file @name, NUL-terminated; -1 if unreadable. */
static long read_small(const char *name, char *buf, size_t len)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, name, O_RDONLY | O_CLOEXEC);
	long n;

	if (fd < 0)
		return -1;
	n = syscall(SYS_read, fd, buf, len - 1);
	syscall(SYS_close, fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

/* The "some ... total=N" value of a pressure file's text; false if absent. */
bool pp_psi_parse_some_total(const char *text, uint64_t *total_us)
{
	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n'), *t;
		uint64_t v = 0;

		if (!end)
			end = line + strlen(line);
		if (!strncmp(line, "some ", 5)) {
			for (t = line; t + 6 <= end && strncmp(t, "total=", 6); t++)
				;
			if (t + 6 > end || t[6] < '0' || t[6] > '9')
				return false;
			for (t += 6; t < end && *t >= '0' && *t <= '9'; t++)
				v = v * 10 + (uint64_t)(*t - '0');
			*total_us = v;
			return true;
		}
		line = *end ? end + 1 : NULL;
	}
	return false;
}

/*
 * The "0::" line of a /proc/PID/cgroup: the cgroup v2 path. Beside v1
 * controllers that line comes last, after one line per controller, so the
 * file is scanned in small reads rather than read into one buffer it may
 * not fit.
 */
bool pp_psi_cgroup_v2_path(int fd, char *out, size_t len)
{
	static const char key[] = "0::";
	const int in_path = (int)sizeof(key) - 1;
	int at = 0; /* chars of key matched at this line's start; -1: another line */
	size_t n = 0;
	char chunk[128];
	long got;

	while ((got = syscall(SYS_read, fd, chunk, sizeof(chunk))) > 0) {
		for (long i = 0; i < got; i++) {
			char c = chunk[i];

			if (at == in_path && c == '\n')
				goto found;
			if (at == in_path) {
				if (n + 1 >= len)
					return false;
				out[n++] = c;
			} else if (c == '\n') {
				at = 0;
			} else {
				at = at >= 0 && c == key[at] ? at + 1 : -1;
			}
		}
	}
	if (at != in_path)
		return false;
found:
	out[n] = 0;
	return n > 0 && out[0] == '/';
}

static bool cgroup_rel(char *out, size_t len)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	bool found;

	if (fd < 0)
		return false;
	found = pp_psi_cgroup_v2_path(fd, out, len);
	syscall(SYS_close, fd);
	return found;
}

/* The memory.pressure of cgroup @rel under @root into @out, if it fits. */
static bool pressure_file(char *out, size_t len, const char *root, const char *rel)
{
	if (strlen(root) + strlen(rel) + strlen("/memory.pressure") + 1 > len)
		return false;
	strcpy(out, root);
	strcat(out, rel);
	strcat(out, strcmp(rel, "/") ? "/memory.pressure" : "memory.pressure");
	return true;
}

static void choose_path(void)
{
	char buf[256], rel[256];
	bool found = false;

	path_known = true;
	if (pp_cfg.psi_file[0]) {
		strncpy(path, pp_cfg.psi_file, sizeof(path) - 1);
		found = true;
	} else if (cgroup_rel(rel, sizeof(rel))) {
		for (size_t i = 0; i < sizeof(cgroup_roots) / sizeof(cgroup_roots[0]) && !found;
		     i++)
			found = pressure_file(path, sizeof(path), cgroup_roots[i], rel) &&
				read_small(path, buf, sizeof(buf)) > 0;
	}
	if (!found)
		strcpy(path, "/proc/pressure/memory");
	if (read_small(path, buf, sizeof(buf)) <= 0 ||
	    !pp_psi_parse_some_total(buf, &last_total_us)) {
		unavailable = true;
		pp_debug("psi: %s unreadable: rings shrink only when idle", path);
		return;
	}
	pp_debug("psi: watching %s, pressure at %lld%% stall", path, (long long)pp_cfg.psi);
}

static bool poll_locked(uint64_t now_ns)
{
	char buf[256];
	uint64_t total, stall, wall;
	bool was = active;

	if (unavailable)
		return false;
	if (!path_known) {
		choose_path();
		last_ns = now_ns;
		return false;
	}
	if (read_small(path, buf, sizeof(buf)) <= 0 || !pp_psi_parse_some_total(buf, &total))
		return was;
	stall = total >= last_total_us ? total - last_total_us : 0;
	wall = now_ns > last_ns ? (now_ns - last_ns) / 1000 : 0;
	last_total_us = total;
	last_ns = now_ns;
	if (!wall)
		return was;
	__atomic_store_n(&active, stall * 100 >= wall * (uint64_t)pp_cfg.psi, __ATOMIC_RELAXED);
	if (active && !was) {
		__atomic_add_fetch(&episodes, 1, __ATOMIC_RELAXED);
		pp_debug("psi: memory pressure (%llu us stalled in %llu us): shrinking rings",
			 (unsigned long long)stall, (unsigned long long)wall);
	} else if (was && !active) {
		pp_debug("psi: pressure is over");
	}
	return active;
}

bool pp_psi_poll(uint64_t now_ns)
{
	int saved;
	bool on;

	if (!pp_cfg.psi)
		return false;
	if (__atomic_exchange_n(&polling, 1, __ATOMIC_ACQUIRE))
		return pp_psi_active();
	saved = errno; /* inside the application's write() */
	on = poll_locked(now_ns);
	errno = saved;
	__atomic_store_n(&polling, 0, __ATOMIC_RELEASE);
	return on;
}

bool pp_psi_active(void)
{
	return __atomic_load_n(&active, __ATOMIC_RELAXED);
}

uint64_t pp_psi_episodes(void)
{
	return __atomic_load_n(&episodes, __ATOMIC_RELAXED);
}

void pp_psi_after_fork_child(void)
{
	/* The child has its own cgroup membership to come: look again (if it ever looked). */
	if (path_known || unavailable || active || polling) {
		path_known = unavailable = active = false;
		polling = 0;
	}
}
