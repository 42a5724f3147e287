// SPDX-License-Identifier: MIT
#include "pressure.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TMPFS_MAGIC_VALUE 0x01021994
#define CG_PREFIX "ppipe-bench."
/* The filler's CPU budget is enforced per period of this length. */
#define FILLER_PERIOD_NS (10 * 1000 * 1000ull)
/* It reads this much per pread(): small, so that no read overshoots the budget by much. */
#define FILLER_CHUNK (64 << 10)

enum pressure_mode pressure_mode_parse(const char *name)
{
	if (!strcmp(name, "memcg"))
		return PRESSURE_MEMCG;
	if (!strcmp(name, "hog"))
		return PRESSURE_HOG;
	return PRESSURE_NONE;
}

const char *pressure_mode_name(enum pressure_mode mode)
{
	return mode == PRESSURE_MEMCG ? "memcg" : mode == PRESSURE_HOG ? "hog" : "none";
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int pressure_read_stat(const char *path, const char *key, uint64_t *out)
{
	char line[256];
	size_t klen = strlen(key);
	FILE *f = fopen(path, "re");
	int ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) || (line[klen] != ' ' && line[klen] != '\t'))
			continue;
		*out = strtoull(line + klen + 1, NULL, 10);
		ret = 0;
		break;
	}
	fclose(f);
	return ret;
}

int pressure_read_psi_some(const char *path, uint64_t *out)
{
	char line[256];
	FILE *f = fopen(path, "re");
	int ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *total = strstr(line, " total=");

		if (strncmp(line, "some ", 5) || !total)
			continue;
		*out = strtoull(total + 7, NULL, 10);
		ret = 0;
		break;
	}
	fclose(f);
	return ret;
}

static int read_u64_file(const char *path, uint64_t *out)
{
	char buf[64];
	FILE *f = fopen(path, "re");
	int ok;

	if (!f)
		return -1;
	ok = fgets(buf, sizeof(buf), f) != NULL;
	fclose(f);
	if (!ok)
		return -1;
	*out = strtoull(buf, NULL, 10);
	return 0;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;
	int saved;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	saved = errno;
	close(fd);
	errno = saved;
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* @dir/@name into @out; -1 if it does not fit. */
static int path_in(char *out, size_t len, const char *dir, const char *name)
{
	int n = snprintf(out, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Moves process @pid into the cgroup directory @dir. */
static int join_cgroup(const char *dir, pid_t pid)
{
	char path[640], num[32];

	if (path_in(path, sizeof(path), dir, "cgroup.procs"))
		return -1;
	snprintf(num, sizeof(num), "%d", (int)pid);
	return write_file(path, num);
}

static int file_has_word(const char *path, const char *word)
{
	char buf[512];
	FILE *f = fopen(path, "re");
	int found = 0;

	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f)) {
		for (char *tok = strtok(buf, " \n"); tok; tok = strtok(NULL, " \n"))
			found |= !strcmp(tok, word);
	}
	fclose(f);
	return found;
}

static int in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (!path)
		path = "/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");

		if (n && n < sizeof(buf) - strlen(prog) - 2) {
			snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, prog);
			if (!access(buf, X_OK))
				return 1;
		}
		path += n;
		if (*path == ':')
			path++;
	}
	return 0;
}

static void sum_allocstall(uint64_t *out)
{
	static const char *const keys[] = { "allocstall_dma", "allocstall_dma32",
					    "allocstall_normal", "allocstall_movable",
					    "allocstall_device" };
	uint64_t v;

	*out = 0;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!pressure_read_stat("/proc/vmstat", keys[i], &v))
			*out += v;
}

/* CPU time of a task from /proc/PID/schedstat (ns on the CPU), in us. */
static int task_cpu_us(pid_t pid, uint64_t *out)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	if (read_u64_file(path, out))
		return -1;
	*out /= 1000;
	return 0;
}

static void take_counters(struct pressure *p, struct pressure_counters *c)
{
	char path[320];

	memset(c, 0, sizeof(*c));
	c->wall_ns = mono_ns();
	pressure_read_stat("/proc/vmstat", "pgscan_direct", &c->pgscan_direct);
	pressure_read_stat("/proc/vmstat", "pgsteal_direct", &c->pgsteal_direct);
	pressure_read_stat("/proc/vmstat", "pgscan_kswapd", &c->pgscan_kswapd);
	sum_allocstall(&c->allocstall);
	if (!strcmp(p->method, "cgroup-v2")) {
		snprintf(path, sizeof(path), "%s/memory.stat", p->memcg);
		pressure_read_stat(path, "pgscan_direct", &c->memcg_pgscan_direct);
		pressure_read_stat(path, "pgsteal_direct", &c->memcg_pgsteal_direct);
		snprintf(path, sizeof(path), "%s/memory.events", p->memcg);
		pressure_read_stat(path, "max", &c->memcg_max);
		snprintf(path, sizeof(path), "%s/memory.events.local", p->memcg);
		pressure_read_stat(path, "max", &c->memcg_max_local);
	} else if (!strcmp(p->method, "cgroup-v1")) {
		snprintf(path, sizeof(path), "%s/memory.failcnt", p->memcg);
		read_u64_file(path, &c->memcg_failcnt);
	}
	if (p->acct[0]) {
		snprintf(path, sizeof(path), "%s/bench/memory.pressure", p->acct);
		p->have_stall = !pressure_read_psi_some(path, &c->bench_stall_us);
		snprintf(path, sizeof(path), "%s/helpers/cpu.stat", p->acct);
		if (!pressure_read_stat(path, "usage_usec", &c->helper_cpu_us))
			p->cpu_from = "cgroup";
	}
	if (!p->cpu_from && p->filler_pid > 0 && !task_cpu_us(p->filler_pid, &c->helper_cpu_us))
		p->cpu_from = "task";
}

/* The root of the cgroup v2 hierarchy, pure or beside v1 ("unified"). */
static int find_v2_root(char *root, size_t len)
{
	if (!access("/sys/fs/cgroup/cgroup.controllers", F_OK)) {
		snprintf(root, len, "/sys/fs/cgroup");
		return 0;
	}
	if (!access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK)) {
		snprintf(root, len, "/sys/fs/cgroup/unified");
		return 0;
	}
	return -1;
}

/* Finds the memory controller's hierarchy; returns its version or 0. */
static int find_memcg_root(char *root, size_t len)
{
	if (file_has_word("/sys/fs/cgroup/cgroup.controllers", "memory")) {
		snprintf(root, len, "/sys/fs/cgroup");
		return 2;
	}
	if (file_has_word("/sys/fs/cgroup/unified/cgroup.controllers", "memory")) {
		snprintf(root, len, "/sys/fs/cgroup/unified");
		return 2;
	}
	if (!access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK)) {
		snprintf(root, len, "/sys/fs/cgroup/memory");
		return 1;
	}
	return 0;
}

/* Our current cgroup in the hierarchy of @version, relative to its root. */
static int current_cgroup(int version, char *rel, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/self/cgroup", "re");
	int ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':');
		char *path = ctl ? strchr(ctl + 1, ':') : NULL;
		int match;

		if (!path)
			continue;
		*path++ = '\0';
		*ctl++ = '\0';
		path[strcspn(path, "\n")] = '\0';
		if (version == 2)
			match = !strcmp(line, "0") && !*ctl;
		else
			match = !!strstr(ctl, "memory");
		if (match) {
			snprintf(rel, len, "%s", path);
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

/* Removes @dir's bench/ and helpers/ cgroups, then @dir. */
static void remove_cgroup(const char *dir)
{
	char path[640];

	if (!path_in(path, sizeof(path), dir, "bench"))
		rmdir(path);
	if (!path_in(path, sizeof(path), dir, "helpers"))
		rmdir(path);
	rmdir(dir);
}

/* Removes cgroups left behind by benchmark runs that died. */
static void reap_stale_cgroups(const char *root)
{
	DIR *d = opendir(root);
	struct dirent *de;
	char path[512];

	if (!d)
		return;
	while ((de = readdir(d))) {
		long pid;

		if (strncmp(de->d_name, CG_PREFIX, strlen(CG_PREFIX)))
			continue;
		pid = strtol(de->d_name + strlen(CG_PREFIX), NULL, 10);
		if (pid > 0 && kill((pid_t)pid, 0) && errno == ESRCH) {
			snprintf(path, sizeof(path), "%s/%s", root, de->d_name);
			remove_cgroup(path);
		}
	}
	closedir(d);
}

/* The cgroup.procs file of the cgroup @rel of @version's hierarchy at @root. */
static void home_procs(char *out, size_t len, const char *root, const char *rel)
{
	snprintf(out, len, "%s%s/cgroup.procs", root, strcmp(rel, "/") ? rel : "");
}

/*
 * The memory cgroup with the limit, which we join. On cgroup v2 it also
 * becomes the accounting cgroup, with bench/ and helpers/ in it. Returns 0,
 * -1 when there is no memory cgroup to make, -2 with @err set on a failure.
 */
static int make_memcg(struct pressure *p, char *err, size_t errlen)
{
	char root[128], rel[256], path[400], num[32];
	int version = find_memcg_root(root, sizeof(root));

	if (!version || current_cgroup(version, rel, sizeof(rel)))
		return -1;
	reap_stale_cgroups(root);
	if (version == 2) {
		snprintf(path, sizeof(path), "%s/cgroup.subtree_control", root);
		write_file(path, "+memory");
	}
	snprintf(p->memcg, sizeof(p->memcg), "%s/%s%d", root, CG_PREFIX, (int)getpid());
	if (mkdir(p->memcg, 0755) && errno != EEXIST) {
		p->memcg[0] = '\0';
		return -1;
	}
	snprintf(num, sizeof(num), "%" PRIu64, p->limit);
	snprintf(path, sizeof(path), "%s/%s", p->memcg,
		 version == 2 ? "memory.max" : "memory.limit_in_bytes");
	if (write_file(path, num)) {
		snprintf(err, errlen, "cannot set %s: %s", path, strerror(errno));
		goto out_rmdir;
	}
	p->method = version == 2 ? "cgroup-v2" : "cgroup-v1";
	if (version == 2) {
		/* The v2 accounting cgroup is this one; make_acct joins it. */
		snprintf(p->acct, sizeof(p->acct), "%s", p->memcg);
		home_procs(p->acct_home, sizeof(p->acct_home), root, rel);
		p->acct_is_memcg = 1;
		return 0;
	}
	home_procs(p->memcg_home, sizeof(p->memcg_home), root, rel);
	if (join_cgroup(p->memcg, getpid())) {
		snprintf(err, errlen, "cannot join %s: %s", p->memcg, strerror(errno));
		p->memcg_home[0] = '\0';
		goto out_rmdir;
	}
	return 0;

out_rmdir:
	rmdir(p->memcg);
	p->memcg[0] = p->acct[0] = '\0';
	return -2;
}

/*
 * The cgroup v2 that keeps the benchmark (bench/) apart from the helpers
 * (helpers/): the benchmark's own memory stall and the helpers' CPU time
 * are read from them. Without cgroup v2 the run goes on without them.
 */
static int make_acct(struct pressure *p, char *err, size_t errlen)
{
	char root[128], rel[256], path[400];

	if (!p->acct[0]) {
		if (find_v2_root(root, sizeof(root)) || current_cgroup(2, rel, sizeof(rel)))
			return 0;
		reap_stale_cgroups(root);
		snprintf(p->acct, sizeof(p->acct), "%s/%s%d", root, CG_PREFIX, (int)getpid());
		if (mkdir(p->acct, 0755) && errno != EEXIST) {
			p->acct[0] = '\0';
			return 0;
		}
		home_procs(p->acct_home, sizeof(p->acct_home), root, rel);
	}
	snprintf(path, sizeof(path), "%s/bench", p->acct);
	if (mkdir(path, 0755) && errno != EEXIST)
		goto fail;
	snprintf(path, sizeof(path), "%s/helpers", p->acct);
	if (mkdir(path, 0755) && errno != EEXIST)
		goto fail;
	snprintf(path, sizeof(path), "%s/bench", p->acct);
	if (join_cgroup(path, getpid()))
		goto fail;
	return 0;

fail:
	if (p->acct_is_memcg) {
		/* Without it the benchmark would not be in the memory cgroup. */
		snprintf(err, errlen, "cannot join %s: %s", path, strerror(errno));
		return -1;
	}
	remove_cgroup(p->acct);
	p->acct[0] = p->acct_home[0] = '\0';
	return 0;
}

/* Back to where we came from, and the cgroups removed. */
static void leave_cgroups(struct pressure *p)
{
	char num[32];

	snprintf(num, sizeof(num), "%d", (int)getpid());
	if (p->acct[0]) {
		write_file(p->acct_home, num);
		remove_cgroup(p->acct);
	}
	if (p->memcg[0] && !p->acct_is_memcg) {
		if (p->memcg_home[0])
			write_file(p->memcg_home, num);
		rmdir(p->memcg);
	}
	p->acct[0] = p->memcg[0] = '\0';
}

/* A child moves itself into helpers/, before it does any work. */
static void join_helpers(const struct pressure *p)
{
	char path[320];

	if (!p->acct[0])
		return;
	snprintf(path, sizeof(path), "%s/helpers", p->acct);
	join_cgroup(path, getpid());
}

/* A sparse file on a disk file system: reading it fills the page cache. */
static int open_filler_file(uint64_t size)
{
	static const char *const dirs[] = { "/var/tmp", "/tmp", "." };
	char path[256];
	struct statfs sfs;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		int fd;

		if (statfs(dirs[i], &sfs) || sfs.f_type == TMPFS_MAGIC_VALUE)
			continue;
		snprintf(path, sizeof(path), "%s/ppipe-bench-fill.XXXXXX", dirs[i]);
		fd = mkostemp(path, O_CLOEXEC);
		if (fd < 0)
			continue;
		unlink(path);
		if (ftruncate(fd, (off_t)size)) {
			close(fd);
			continue;
		}
		/*
		 * No readahead: it fills (and reclaim then empties) the cache in
		 * large folios, which left the cgroup hundreds of KiB below its
		 * limit between the filler's reads, room enough for a plain
		 * pipe's writer to charge its pages without ever reclaiming.
		 * Page by page, the filler keeps the cgroup within a few pages
		 * of the limit.
		 */
		posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
		return fd;
	}
	return -1;
}

/*
 * Child: fills the cgroup with page cache by reading @fd (twice the limit
 * long), tells the parent through @ready, then keeps reading it round and
 * round, which takes every page the benchmark frees below the limit. In
 * each period it reads until it has used its CPU budget (less what it
 * overran before), then sleeps to the period's end: a bound of @pct percent
 * of one CPU that does not depend on a CPU controller.
 */
static void run_filler(const struct pressure *p, int fd, int ready, unsigned int pct)
{
	static char buf[FILLER_CHUNK];
	uint64_t size = p->limit * 2, off = 0;
	uint64_t budget = FILLER_PERIOD_NS * pct / 100;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Told apart from the benchmark in ps, top and traces. */
	prctl(PR_SET_NAME, "ppipe-filler");
	join_helpers(p);
	while (off < p->limit) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)off);

		if (n <= 0)
			break;
		off += (uint64_t)n;
	}
	if (write(ready, "1", 1) != 1)
		_exit(1);
	close(ready);
	for (uint64_t debt = 0;;) {
		uint64_t t0 = mono_ns(), c0 = thread_cpu_ns(), used;
		struct timespec until;

		while (debt < budget && thread_cpu_ns() - c0 < budget - debt &&
		       mono_ns() - t0 < FILLER_PERIOD_NS) {
			ssize_t n = pread(fd, buf, sizeof(buf), (off_t)off);

			off = n > 0 && off + (uint64_t)n < size ? off + (uint64_t)n : 0;
		}
		/*
		 * A read that reclaims can overrun the period's budget by far; the
		 * overrun is paid back in the periods that follow, so that the
		 * budget bounds the average, not only each period's start.
		 */
		used = thread_cpu_ns() - c0;
		debt = debt + used > budget ? debt + used - budget : 0;
		t0 += FILLER_PERIOD_NS;
		until.tv_sec = (time_t)(t0 / 1000000000ull);
		until.tv_nsec = (long)(t0 % 1000000000ull);
		if (pct < 100)
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL);
	}
}

static int start_filler(struct pressure *p, unsigned int pct, char *err, size_t errlen)
{
	struct pollfd pfd;
	int fd, ready[2], status;
	char c;

	fd = open_filler_file(p->limit * 2);
	if (fd < 0) {
		snprintf(err, errlen, "no disk-backed directory for the page-cache filler");
		return -1;
	}
	if (pipe2(ready, O_CLOEXEC)) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		close(fd);
		return -1;
	}
	p->filler_pid = fork();
	if (!p->filler_pid) {
		close(ready[0]);
		run_filler(p, fd, ready[1], pct);
		_exit(0);
	}
	close(fd);
	close(ready[1]);
	if (p->filler_pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(ready[0]);
		return -1;
	}
	/* Filling takes a fraction of a second; a minute means it is stuck. */
	pfd = (struct pollfd){ .fd = ready[0], .events = POLLIN };
	if (poll(&pfd, 1, 60000) != 1 || read(ready[0], &c, 1) != 1) {
		close(ready[0]);
		if (waitpid(p->filler_pid, &status, WNOHANG) == p->filler_pid)
			p->filler_pid = -1;
		snprintf(err, errlen, "the page-cache filler did not fill the cgroup");
		return -1;
	}
	close(ready[0]);
	snprintf(p->stressor, sizeof(p->stressor), "page-cache filler, %u%% of one CPU at most",
		 pct);
	return 0;
}

static pid_t spawn_stressor(struct pressure *p, char *err, size_t errlen)
{
	/* Outlives no crashed benchmark for long: it stops by itself. */
	static const char timeout[] = "3600s";
	pid_t pid;

	snprintf(p->stressor, sizeof(p->stressor), "stress-ng --vm 2 --vm-bytes 50%% --vm-keep");
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -1;
	}
	if (!pid) {
		int devnull = open("/dev/null", O_RDWR);

		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		join_helpers(p);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
		}
		execlp("stress-ng", "stress-ng", "--vm", "2", "--vm-bytes", "50%", "--vm-keep",
		       "--timeout", timeout, "--quiet", (char *)NULL);
		fprintf(stderr, "ppipe-bench: exec stress-ng: %s\n", strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);
	return pid;
}

/*
 * Ends child @pid, or with @group its whole process group: stress-ng's
 * workers, which are ours to reap as well because we are their subreaper.
 */
static void stop_child(pid_t pid, int group)
{
	struct timespec tick = { .tv_sec = 0, .tv_nsec = 10 * 1000 * 1000 };
	pid_t who = group ? -pid : pid;

	if (pid <= 0)
		return;
	kill(who, SIGTERM);
	for (int i = 0; i < 300; i++) {
		pid_t got = waitpid(who, NULL, WNOHANG);

		if (got < 0 || (!group && got == pid))
			return;
		if (!got)
			nanosleep(&tick, NULL);
	}
	kill(who, SIGKILL);
	while (waitpid(who, NULL, 0) > 0 && group)
		;
}

/* stress-ng's workers leave its group a moment after it: helpers/ must be empty. */
static void wait_helpers_gone(const struct pressure *p)
{
	struct timespec tick = { .tv_sec = 0, .tv_nsec = 10 * 1000 * 1000 };
	char path[320], buf[16];

	if (!p->acct[0])
		return;
	snprintf(path, sizeof(path), "%s/helpers/cgroup.procs", p->acct);
	for (int i = 0; i < 300; i++) {
		FILE *f = fopen(path, "re");
		int empty = !f || !fgets(buf, sizeof(buf), f);

		if (f)
			fclose(f);
		if (empty)
			return;
		nanosleep(&tick, NULL);
	}
}

int pressure_start(struct pressure *p, enum pressure_mode mode, uint64_t limit,
		   unsigned int filler_cpu_pct, char *err, size_t errlen)
{
	struct timespec settle = { .tv_sec = 0, .tv_nsec = 500 * 1000 * 1000 };
	int status;

	memset(p, 0, sizeof(*p));
	p->mode = mode;
	p->limit = limit;
	p->filler_cpu_pct = filler_cpu_pct;
	p->method = "global";
	p->stress_pid = p->filler_pid = -1;
	if (mode == PRESSURE_HOG && !in_path("stress-ng")) {
		snprintf(err, errlen,
			 "--memory-pressure=hog needs stress-ng, which is not in PATH "
			 "(Debian: apt-get install stress-ng)");
		return -1;
	}
	if (mode == PRESSURE_MEMCG) {
		int ret = make_memcg(p, err, errlen);

		if (ret == -1)
			snprintf(err, errlen,
				 "--memory-pressure=memcg needs a memory cgroup it can make "
				 "(root, a memory controller); --memory-pressure=hog needs none");
		if (ret)
			return -1;
	}
	if (make_acct(p, err, errlen))
		goto out_cgroups;
	if (mode == PRESSURE_MEMCG) {
		if (start_filler(p, filler_cpu_pct, err, errlen))
			goto out_filler;
	} else {
		/*
		 * stress-ng's workers outlive it by a moment; as their subreaper
		 * we reap them, so that none is left when the run ends.
		 */
		prctl(PR_SET_CHILD_SUBREAPER, 1);
		p->stress_pid = spawn_stressor(p, err, errlen);
		if (p->stress_pid < 0)
			goto out_cgroups;
		/* Let stress-ng map its memory. */
		nanosleep(&settle, NULL);
		if (waitpid(p->stress_pid, &status, WNOHANG) == p->stress_pid) {
			snprintf(err, errlen, "stress-ng exited at once (status %d)", status);
			p->stress_pid = -1;
			goto out_cgroups;
		}
	}
	take_counters(p, &p->before);
	p->active = 1;
	return 0;

out_filler:
	stop_child(p->filler_pid, 0);
out_cgroups:
	wait_helpers_gone(p);
	leave_cgroups(p);
	if (mode == PRESSURE_HOG)
		prctl(PR_SET_CHILD_SUBREAPER, 0);
	return -1;
}

void pressure_stop(struct pressure *p)
{
	if (!p->active)
		return;
	take_counters(p, &p->after);
	stop_child(p->stress_pid, 1);
	stop_child(p->filler_pid, 0);
	wait_helpers_gone(p);
	leave_cgroups(p);
	if (p->mode == PRESSURE_HOG)
		prctl(PR_SET_CHILD_SUBREAPER, 0);
	p->active = 0;
}

const char *pressure_reclaim_scope(const struct pressure *p)
{
	if (p->have_stall)
		return "benchmark";
	return p->mode == PRESSURE_MEMCG ? "cgroup" : "system";
}

int pressure_saw_direct_reclaim(const struct pressure *p)
{
	const struct pressure_counters *a = &p->before, *z = &p->after;
	int system = z->pgscan_direct > a->pgscan_direct || z->allocstall > a->allocstall;
	int cgroup = z->memcg_pgscan_direct > a->memcg_pgscan_direct ||
		     z->memcg_max > a->memcg_max || z->memcg_failcnt > a->memcg_failcnt;
	int seen = p->mode == PRESSURE_MEMCG ? cgroup : system;

	/*
	 * The benchmark's own stall on memory, in a run whose cgroup (or
	 * system) reclaimed: its tasks waited for reclaim, not only the helpers.
	 */
	if (p->have_stall)
		return seen && z->bench_stall_us > a->bench_stall_us;
	return seen;
}

double pressure_helper_cpu_share(const struct pressure *p)
{
	uint64_t wall = p->after.wall_ns - p->before.wall_ns;

	if (!p->cpu_from || !wall || p->after.helper_cpu_us < p->before.helper_cpu_us)
		return -1;
	return (double)(p->after.helper_cpu_us - p->before.helper_cpu_us) * 1000.0 / (double)wall;
}
