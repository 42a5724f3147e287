// SPDX-License-Identifier: MIT
#include "pressure.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

static void take_counters(const struct pressure *p, struct pressure_counters *c)
{
	char path[320];

	memset(c, 0, sizeof(*c));
	pressure_read_stat("/proc/vmstat", "pgscan_direct", &c->pgscan_direct);
	pressure_read_stat("/proc/vmstat", "pgsteal_direct", &c->pgsteal_direct);
	pressure_read_stat("/proc/vmstat", "pgscan_kswapd", &c->pgscan_kswapd);
	sum_allocstall(&c->allocstall);
	if (!strcmp(p->method, "cgroup-v2")) {
		snprintf(path, sizeof(path), "%s/memory.stat", p->cgroup);
		pressure_read_stat(path, "pgscan_direct", &c->memcg_reclaim);
		snprintf(path, sizeof(path), "%s/memory.events", p->cgroup);
		pressure_read_stat(path, "max", &c->memcg_max_events);
	} else if (!strcmp(p->method, "cgroup-v1")) {
		snprintf(path, sizeof(path), "%s/memory.failcnt", p->cgroup);
		read_u64_file(path, &c->memcg_reclaim);
	}
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
		ctl++;
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
			rmdir(path);
		}
	}
	closedir(d);
}

static int make_cgroup(struct pressure *p, char *err, size_t errlen)
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
	snprintf(p->cgroup, sizeof(p->cgroup), "%s/%s%d", root, CG_PREFIX, (int)getpid());
	if (mkdir(p->cgroup, 0755) && errno != EEXIST) {
		p->cgroup[0] = '\0';
		return -1;
	}
	snprintf(num, sizeof(num), "%" PRIu64, p->limit);
	snprintf(path, sizeof(path), "%s/%s", p->cgroup,
		 version == 2 ? "memory.max" : "memory.limit_in_bytes");
	if (write_file(path, num)) {
		snprintf(err, errlen, "cannot set %s: %s", path, strerror(errno));
		goto out_rmdir;
	}
	snprintf(p->parent_procs, sizeof(p->parent_procs), "%s%s/cgroup.procs", root,
		 strcmp(rel, "/") ? rel : "");
	snprintf(path, sizeof(path), "%s/cgroup.procs", p->cgroup);
	snprintf(num, sizeof(num), "%d", (int)getpid());
	if (write_file(path, num)) {
		snprintf(err, errlen, "cannot join %s: %s", p->cgroup, strerror(errno));
		goto out_rmdir;
	}
	p->method = version == 2 ? "cgroup-v2" : "cgroup-v1";
	return 0;

out_rmdir:
	rmdir(p->cgroup);
	p->cgroup[0] = '\0';
	return -2;
}

/* A sparse file on a disk file system: reading it fills the page cache. */
static int open_filler_file(struct pressure *p)
{
	static const char *const dirs[] = { "/var/tmp", "/tmp", "." };
	struct statfs sfs;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		int fd;

		if (statfs(dirs[i], &sfs) || sfs.f_type == TMPFS_MAGIC_VALUE)
			continue;
		snprintf(p->filler_path, sizeof(p->filler_path), "%s/ppipe-bench-fill.XXXXXX",
			 dirs[i]);
		fd = mkostemp(p->filler_path, O_CLOEXEC);
		if (fd < 0)
			continue;
		unlink(p->filler_path);
		if (ftruncate(fd, (off_t)p->limit * 2)) {
			close(fd);
			continue;
		}
		return fd;
	}
	return -1;
}

/* Reads @limit bytes of the file so the cgroup is full before the run. */
static void prefill(int fd, uint64_t limit)
{
	static char buf[1 << 20];

	for (uint64_t off = 0; off < limit;) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)off);

		if (n <= 0)
			break;
		off += (uint64_t)n;
	}
}

/* Child: keeps re-reading the file so the cgroup stays full of page cache. */
static void run_filler(int fd)
{
	static char buf[1 << 20];
	off_t off = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), off);

		off = n > 0 ? off + n : 0;
	}
}

static pid_t spawn_stressor(struct pressure *p, char *err, size_t errlen)
{
	char bytes[32], timeout[32];
	pid_t pid;

	if (p->cgroup[0])
		snprintf(bytes, sizeof(bytes), "%" PRIu64 "k", p->limit / 4 / 1024);
	else
		snprintf(bytes, sizeof(bytes), "50%%");
	/* Outlives no crashed benchmark for long: it stops by itself. */
	snprintf(timeout, sizeof(timeout), "%ds", 3600);
	/*
	 * In a cgroup stress-ng only has to hold its memory (--vm-hang 0), the
	 * filler keeps the limit busy; globally it runs the seeds' hog.
	 */
	snprintf(p->stressor, sizeof(p->stressor), "stress-ng --vm %d --vm-bytes %s --vm-keep%s",
		 p->cgroup[0] ? 1 : 2, bytes, p->cgroup[0] ? " --vm-hang 0" : "");
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -1;
	}
	if (!pid) {
		int devnull = open("/dev/null", O_RDWR);

		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
		}
		if (p->cgroup[0])
			execlp("stress-ng", "stress-ng", "--vm", "1", "--vm-bytes", bytes,
			       "--vm-keep", "--vm-hang", "0", "--timeout", timeout, "--quiet",
			       (char *)NULL);
		else
			execlp("stress-ng", "stress-ng", "--vm", "2", "--vm-bytes", bytes,
			       "--vm-keep", "--timeout", timeout, "--quiet", (char *)NULL);
		fprintf(stderr, "ppipe-bench: exec stress-ng: %s\n", strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);
	return pid;
}

int pressure_start(struct pressure *p, uint64_t limit, char *err, size_t errlen)
{
	struct timespec settle = { .tv_sec = 0, .tv_nsec = 500 * 1000 * 1000 };
	int fd, status;

	memset(p, 0, sizeof(*p));
	p->limit = limit;
	p->method = "global";
	p->stress_pid = p->filler_pid = -1;
	if (!in_path("stress-ng")) {
		snprintf(err, errlen,
			 "--memory-pressure needs stress-ng, which is not in PATH "
			 "(Debian: apt-get install stress-ng)");
		return -1;
	}
	if (make_cgroup(p, err, errlen) == -2)
		return -1;
	if (p->cgroup[0]) {
		fd = open_filler_file(p);
		if (fd < 0) {
			snprintf(err, errlen, "no disk-backed directory for the page-cache filler");
			goto out_cgroup;
		}
		prefill(fd, p->limit);
		p->filler_pid = fork();
		if (!p->filler_pid)
			run_filler(fd);
		close(fd);
		if (p->filler_pid < 0) {
			snprintf(err, errlen, "fork: %s", strerror(errno));
			goto out_cgroup;
		}
	}
	p->stress_pid = spawn_stressor(p, err, errlen);
	if (p->stress_pid < 0)
		goto out_filler;
	/* Let the cgroup fill up and stress-ng map its memory. */
	nanosleep(&settle, NULL);
	if (waitpid(p->stress_pid, &status, WNOHANG) == p->stress_pid) {
		snprintf(err, errlen, "stress-ng exited at once (status %d)", status);
		p->stress_pid = -1;
		goto out_filler;
	}
	take_counters(p, &p->before);
	p->active = 1;
	return 0;

out_filler:
	if (p->filler_pid > 0) {
		kill(p->filler_pid, SIGKILL);
		waitpid(p->filler_pid, NULL, 0);
	}
out_cgroup:
	if (p->cgroup[0]) {
		char num[32];

		snprintf(num, sizeof(num), "%d", (int)getpid());
		write_file(p->parent_procs, num);
		rmdir(p->cgroup);
	}
	return -1;
}

static void stop_child(pid_t pid, int group)
{
	struct timespec tick = { .tv_sec = 0, .tv_nsec = 10 * 1000 * 1000 };

	if (pid <= 0)
		return;
	kill(group ? -pid : pid, SIGTERM);
	for (int i = 0; i < 300; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		nanosleep(&tick, NULL);
	}
	kill(group ? -pid : pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

void pressure_stop(struct pressure *p)
{
	char num[32];

	if (!p->active)
		return;
	take_counters(p, &p->after);
	stop_child(p->stress_pid, 1);
	stop_child(p->filler_pid, 0);
	if (p->cgroup[0]) {
		snprintf(num, sizeof(num), "%d", (int)getpid());
		write_file(p->parent_procs, num);
		rmdir(p->cgroup);
	}
	p->active = 0;
}

int pressure_saw_direct_reclaim(const struct pressure *p)
{
	if (p->cgroup[0])
		return p->after.memcg_reclaim > p->before.memcg_reclaim;
	return p->after.pgscan_direct > p->before.pgscan_direct ||
	       p->after.allocstall > p->before.allocstall;
}
