// SPDX-License-Identifier: MIT
/*
 * The host-wide counters file (shim/hostcounters.c), linked directly:
 * a new file's header and size; exact totals from many processes adding
 * at once to a file none of them found (one file made, no stray one);
 * files that must be left alone (truncated, oversized, foreign magic,
 * another version, layout or uid, a symbolic link, another owner, group
 * writable, a FIFO, a directory), each unchanged and the adder back
 * (a hang ends the test by SIGALRM); a shard locked by a stopped process;
 * the size and the blocks after 1 and 100,000 adds; counters matched by
 * name in a file of another version; %u; errno kept.
 */
#include "hostcounters.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define U(x) ((unsigned long long)(x))

/* Seconds any one add may take before SIGALRM ends the test: a hang, not a timing. */
#define HANG_S 20

static char dir[64];
static char path[128];

/* What add number @k adds: a different value per counter. */
static void values(uint64_t v[PP_HOST_COUNT], uint64_t k)
{
	for (int i = 0; i < PP_HOST_COUNT; i++)
		v[i] = k * (uint64_t)(i + 1);
}

static const char *const names[] = {
#define PP_X(name, help, value) #name,
	PP_HOST_COUNTERS(PP_X)
#undef PP_X
};

/* The whole file, into @buf (PP_HOST_FILE_SIZE + 1 bytes); returns its length or -1. */
static long slurp(const char *p, char *buf)
{
	int fd = open(p, O_RDONLY | O_NONBLOCK);
	long n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, PP_HOST_FILE_SIZE + 1);
	close(fd);
	return n;
}

/* Each of our counters' total in @p, by name; 0 if the file is not one. */
static int totals(const char *p, uint64_t out[PP_HOST_COUNT])
{
	static char buf[PP_HOST_FILE_SIZE + 1];
	struct pp_host_header h;

	memset(out, 0, PP_HOST_COUNT * sizeof(out[0]));
	if (slurp(p, buf) != PP_HOST_FILE_SIZE)
		return 0;
	memcpy(&h, buf, sizeof(h));
	if (memcmp(h.magic, PP_HOST_MAGIC, 8) || h.version != PP_HOST_VERSION)
		return 0;
	for (unsigned int i = 0; i < h.used; i++) {
		const char *name = buf + PP_HOST_NAMES_AT + i * PP_HOST_NAME;

		for (int k = 0; k < PP_HOST_COUNT; k++) {
			if (strcmp(name, names[k]))
				continue;
			for (int s = 0; s < PP_HOST_SHARDS; s++) {
				uint64_t v;

				memcpy(&v, buf + PP_HOST_HEADER + s * PP_HOST_SHARD + i * 8,
				       sizeof(v));
				out[k] += v;
			}
		}
	}
	return 1;
}

static int entries(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *e;
	int n = 0;

	if (!dp)
		return -1;
	while ((e = readdir(dp)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(dp);
	return n;
}

static int add(uint64_t k)
{
	uint64_t v[PP_HOST_COUNT];
	int r;

	values(v, k);
	alarm(HANG_S);
	r = pp_host_add(path, v);
	alarm(0);
	return r;
}

static void test_new_file(void)
{
	static char buf[PP_HOST_FILE_SIZE + 1];
	uint64_t t[PP_HOST_COUNT];
	struct pp_host_header h;
	struct stat st;
	int r;

	errno = 4321;
	r = add(1);
	CHECK(r == 0 && errno == 4321, "first add: %d, errno %d", r, errno);
	CHECK(!stat(path, &st) && S_ISREG(st.st_mode) && st.st_size == PP_HOST_FILE_SIZE &&
		      st.st_uid == geteuid() && !(st.st_mode & 022),
	      "the new file: mode %o, %lld bytes", st.st_mode, (long long)st.st_size);
	CHECK(entries(dir) == 1, "%d entries in the directory, want the one file", entries(dir));
	CHECK(slurp(path, buf) == PP_HOST_FILE_SIZE, "read it");
	memcpy(&h, buf, sizeof(h));
	CHECK(!memcmp(h.magic, "PPIPECNT", 8) && h.version == 1 && h.header_size == 12288 &&
		      h.shards == PP_HOST_SHARDS && h.shard_size == PP_HOST_SHARD &&
		      h.slots == PP_HOST_SLOTS && h.name_size == PP_HOST_NAME &&
		      h.help_size == PP_HOST_HELP && h.used == PP_HOST_COUNT &&
		      h.uid == geteuid() && h.created > 1600000000,
	      "header: version %u, used %u, uid %u", h.version, h.used, h.uid);
	CHECK(!strcmp(buf + PP_HOST_NAMES_AT, "processes") &&
		      strstr(buf + PP_HOST_HELPS_AT, "processes that made"),
	      "first name and help: %s / %s", buf + PP_HOST_NAMES_AT, buf + PP_HOST_HELPS_AT);
	CHECK(totals(path, t) && t[PP_HOST_processes] == 1 &&
		      t[PP_HOST_COUNT - 1] == (uint64_t)PP_HOST_COUNT,
	      "totals after one add: %llu processes", U(t[PP_HOST_processes]));
	unlink(path);
}

/* Many processes add at once, none of them finding a file: one is made, and nothing is lost. */
static void test_concurrent(void)
{
	enum { PROCS = 8, ADDS = 400 };
	int go[2], done[2];
	uint64_t t[PP_HOST_COUNT], added = 0, busy = 0;
	pid_t pids[PROCS];

	if (pipe(go) || pipe(done))
		abort();
	for (int i = 0; i < PROCS; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			uint64_t mine[2] = { 0, 0 };
			char c;

			close(go[1]);
			if (read(go[0], &c, 1) < 0)
				_exit(2);
			for (int k = 0; k < ADDS; k++) {
				int r = add((uint64_t)(i + 1));

				if (r == 0)
					mine[0] += (uint64_t)(i + 1);
				else if (r == -EAGAIN)
					mine[1]++;
				else
					_exit(3);
			}
			_exit(write(done[1], mine, sizeof(mine)) == sizeof(mine) ? 0 : 4);
		}
	}
	close(go[0]);
	close(go[1]); /* all start at once */
	for (int i = 0; i < PROCS; i++) {
		int status;

		waitpid(pids[i], &status, 0);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "adder %d: status %d", i,
		      status);
	}
	close(done[1]);
	for (;;) {
		uint64_t mine[2];

		if (read(done[0], mine, sizeof(mine)) != sizeof(mine))
			break;
		added += mine[0];
		busy += mine[1];
	}
	close(done[0]);
	CHECK(entries(dir) == 1, "%d entries after the race, want one file", entries(dir));
	CHECK(totals(path, t), "the file is whole");
	/* Each successful add of k added k * (i + 1) to counter i: exact, nothing lost. */
	for (int i = 0; i < PP_HOST_COUNT; i++)
		CHECK(t[i] == added * (uint64_t)(i + 1), "%s: %llu, want %llu", names[i], U(t[i]),
		      U(added * (uint64_t)(i + 1)));
	CHECK(busy < PROCS * ADDS / 10, "%llu adds of %d gave up", U(busy), PROCS * ADDS);
	printf("concurrent: %d processes x %d adds, %llu gave up (all shards tried locked)\n",
	       PROCS, ADDS, U(busy));
	unlink(path);
}

/* Makes a good file at @p, with one add in it. */
static void make_good(const char *p)
{
	char saved[sizeof(path)];

	memcpy(saved, path, sizeof(path));
	if (p != path)
		snprintf(path, sizeof(path), "%s", p);
	CHECK(add(1) == 0, "made %s", p);
	memcpy(path, saved, sizeof(path));
}

static void patch(const char *p, long off, const void *data, size_t n)
{
	int fd = open(p, O_WRONLY);

	CHECK(fd >= 0 && pwrite(fd, data, n, off) == (ssize_t)n, "patch %s", p);
	close(fd);
}

/* The adder returns, with an error, and @p (or what it points to) is as it was. */
static void expect_left_alone(const char *what, const char *p)
{
	static char before[PP_HOST_FILE_SIZE + 1], after[PP_HOST_FILE_SIZE + 1];
	struct stat st1, st2;
	long n1 = -1, n2 = -1;
	int r;

	CHECK(!lstat(p, &st1), "%s: lstat", what);
	if (S_ISREG(st1.st_mode) || S_ISLNK(st1.st_mode))
		n1 = slurp(p, before);
	r = add(7);
	CHECK(r < 0, "%s: add returned %d, want an error", what, r);
	CHECK(!lstat(p, &st2) && st1.st_mode == st2.st_mode && st1.st_ino == st2.st_ino &&
		      st1.st_size == st2.st_size && st1.st_mtim.tv_sec == st2.st_mtim.tv_sec &&
		      st1.st_mtim.tv_nsec == st2.st_mtim.tv_nsec,
	      "%s: changed (mode %o -> %o, size %lld -> %lld)", what, st1.st_mode, st2.st_mode,
	      (long long)st1.st_size, (long long)st2.st_size);
	if (S_ISREG(st1.st_mode) || S_ISLNK(st1.st_mode)) {
		n2 = slurp(p, after);
		CHECK(n1 == n2 && (n1 < 0 || !memcmp(before, after, (size_t)n1)),
		      "%s: content changed", what);
	}
	CHECK(entries(dir) >= 1, "%s: the directory lost its entry", what);
}

static void test_left_alone(void)
{
	char target[160];
	uint32_t v32;
	int fd;

	/* Truncated, and one byte too long. */
	make_good(path);
	CHECK(!truncate(path, PP_HOST_FILE_SIZE - 1000), "truncate");
	expect_left_alone("truncated", path);
	unlink(path);
	make_good(path);
	fd = open(path, O_WRONLY | O_APPEND);
	CHECK(fd >= 0 && write(fd, "x", 1) == 1, "grow");
	close(fd);
	expect_left_alone("oversized", path);
	unlink(path);

	/* The header: magic, version, layout, uid. */
	make_good(path);
	patch(path, 0, "PPIPEXXX", 8);
	expect_left_alone("foreign magic", path);
	unlink(path);
	make_good(path);
	v32 = 2;
	patch(path, offsetof(struct pp_host_header, version), &v32, 4);
	expect_left_alone("version 2", path);
	unlink(path);
	make_good(path);
	v32 = PP_HOST_SHARDS / 2;
	patch(path, offsetof(struct pp_host_header, shards), &v32, 4);
	expect_left_alone("another layout (shards)", path);
	unlink(path);
	make_good(path);
	v32 = (uint32_t)geteuid() + 1;
	patch(path, offsetof(struct pp_host_header, uid), &v32, 4);
	expect_left_alone("another uid in the header", path);
	unlink(path);
	make_good(path);
	v32 = PP_HOST_SLOTS + 1;
	patch(path, offsetof(struct pp_host_header, used), &v32, 4);
	expect_left_alone("more names than slots", path);
	unlink(path);

	/* A JSON report where the file should be. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(fd >= 0 && write(fd, "{\"pid\":1}\n", 10) == 10, "a JSON file");
	close(fd);
	expect_left_alone("a JSON report", path);
	unlink(path);

	/* A symbolic link to a good file: neither is written. */
	snprintf(target, sizeof(target), "%s/target", dir);
	make_good(target);
	CHECK(!symlink(target, path), "symlink");
	expect_left_alone("symbolic link", path);
	expect_left_alone("symbolic link's target", target);
	unlink(path);
	unlink(target);

	/* Group-writable; another owner (root only). */
	make_good(path);
	CHECK(!chmod(path, 0664), "chmod");
	expect_left_alone("group-writable", path);
	CHECK(!chmod(path, 0646), "chmod");
	expect_left_alone("writable by others", path);
	unlink(path);
	if (geteuid() == 0) {
		make_good(path);
		CHECK(!chown(path, 65534, 65534), "chown nobody");
		expect_left_alone("owned by nobody", path);
		unlink(path);
	} else {
		printf("skipped: a file of another owner (needs root)\n");
	}

	/* A FIFO nobody reads, and one somebody reads: never opened for writing. */
	CHECK(!mkfifo(path, 0644), "mkfifo");
	expect_left_alone("FIFO nobody reads", path);
	{
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			char c;
			/* Would return 0 (EOF) if the adder opened the FIFO for writing. */
			int rfd = open(path, O_RDONLY);

			_exit(rfd >= 0 && read(rfd, &c, 1) == 1 && c == 'q' ? 0 : 1);
		}
		usleep(100000); /* the reader is probably in open() now; either way is a test */
		expect_left_alone("FIFO somebody reads", path);
		fd = open(path, O_WRONLY);
		CHECK(fd >= 0 && write(fd, "q", 1) == 1, "FIFO: the test's byte");
		close(fd);
		waitpid(pid, &status, 0);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "FIFO: the reader saw something before the test's byte");
	}
	unlink(path);

	/* A directory; a missing directory. */
	CHECK(!mkdir(path, 0755), "mkdir");
	expect_left_alone("directory", path);
	rmdir(path);
	{
		char saved[sizeof(path)];
		int r;

		memcpy(saved, path, sizeof(path));
		snprintf(path, sizeof(path), "%s/no/such/dir/c", dir);
		r = add(1);
		CHECK(r == -ENOENT, "missing directory: %d", r);
		memcpy(path, saved, sizeof(path));
	}
	CHECK(entries(dir) == 0, "%d entries left", entries(dir));
}

/* Holds OFD write locks on shards [@from, @from + @n) and stops; returns its pid. */
static pid_t stopped_holder(int from, int n)
{
	int ready[2];
	pid_t pid;
	char c;

	if (pipe(ready))
		abort();
	pid = fork();
	if (pid == 0) {
		int fd = open(path, O_RDWR);

		for (int i = 0; fd >= 0 && i < n; i++) {
			struct flock fl = {
				.l_type = F_WRLCK,
				.l_whence = SEEK_SET,
				.l_start = PP_HOST_HEADER +
					   ((from + i) % PP_HOST_SHARDS) * PP_HOST_SHARD,
				.l_len = PP_HOST_SHARD,
			};
			if (fcntl(fd, F_OFD_SETLK, &fl))
				_exit(1);
		}
		if (fd < 0 || write(ready[1], "r", 1) != 1)
			_exit(1);
		raise(SIGSTOP);
		_exit(0);
	}
	close(ready[1]);
	CHECK(read(ready[0], &c, 1) == 1, "the holder took its locks");
	close(ready[0]);
	{
		int status;

		waitpid(pid, &status, WUNTRACED);
		CHECK(WIFSTOPPED(status), "the holder stopped");
	}
	return pid;
}

static void end_holder(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void test_stopped_holder(void)
{
	int first = (int)(getpid() % PP_HOST_SHARDS);
	uint64_t t[PP_HOST_COUNT];
	pid_t holder;
	int r;

	make_good(path);
	/* The shard this process tries first, and the next few: it goes on past them. */
	holder = stopped_holder(first, PP_HOST_TRIES - 1);
	r = add(5);
	CHECK(r == 0, "%d shards locked by a stopped process: add returned %d", PP_HOST_TRIES - 1,
	      r);
	CHECK(totals(path, t) && t[PP_HOST_processes] == 1 + 5, "added past them: %llu",
	      U(t[PP_HOST_processes]));
	end_holder(holder);

	/* Every shard it would try: it gives up, and changes nothing. */
	holder = stopped_holder(first, PP_HOST_TRIES);
	expect_left_alone("every shard tried locked", path);
	r = add(5);
	CHECK(r == -EAGAIN, "all tried shards locked: add returned %d, want -EAGAIN", r);
	end_holder(holder);
	CHECK(add(5) == 0, "after the holder is gone");
	unlink(path);
}

/* Disk use does not grow with the number of processes. */
static void test_fixed_size(void)
{
	enum { ADDS = 100000 };
	uint64_t t[PP_HOST_COUNT];
	struct stat one, many;
	int fails = 0;

	CHECK(add(1) == 0, "first add");
	CHECK(!stat(path, &one), "stat");
	for (int k = 1; k < ADDS; k++)
		fails += add(1) != 0;
	CHECK(!stat(path, &many), "stat");
	CHECK(!fails, "%d adds failed", fails);
	CHECK(one.st_size == many.st_size && one.st_blocks == many.st_blocks &&
		      many.st_size == PP_HOST_FILE_SIZE,
	      "size %lld -> %lld bytes, %lld -> %lld blocks", (long long)one.st_size,
	      (long long)many.st_size, (long long)one.st_blocks, (long long)many.st_blocks);
	CHECK(totals(path, t) && t[PP_HOST_processes] == ADDS && t[1] == 2 * (uint64_t)ADDS,
	      "%llu processes after %d adds", U(t[PP_HOST_processes]), ADDS);
	printf("fixed size: %lld bytes, %lld blocks after 1 and %d adds\n", (long long)many.st_size,
	       (long long)many.st_blocks, ADDS);
	unlink(path);
}

/* A file of another version: slots matched by name, others untouched. */
static void test_by_name(void)
{
	static char buf[PP_HOST_FILE_SIZE + 1];
	char n0[PP_HOST_NAME] = { 0 }, n1[PP_HOST_NAME] = { 0 }, future[PP_HOST_NAME] = { 0 };
	uint64_t t[PP_HOST_COUNT], slot2 = 0;

	make_good(path);
	/* Slots 0 and 1 swap names; slot 2 becomes a counter this version does not know. */
	memcpy(n0, names[1], strlen(names[1]));
	memcpy(n1, names[0], strlen(names[0]));
	memcpy(future, "future_counter", 14);
	patch(path, PP_HOST_NAMES_AT, n0, PP_HOST_NAME);
	patch(path, PP_HOST_NAMES_AT + PP_HOST_NAME, n1, PP_HOST_NAME);
	patch(path, PP_HOST_NAMES_AT + 2 * PP_HOST_NAME, future, PP_HOST_NAME);
	CHECK(add(10) == 0, "add to a file of another version");
	CHECK(totals(path, t), "read");
	/* make_good's add wrote 1 and 2 into slots 0 and 1, which now carry each other's name. */
	CHECK(t[0] == 2 + 10 && t[1] == 1 + 20, "by name: %s %llu, %s %llu", names[0], U(t[0]),
	      names[1], U(t[1]));
	CHECK(t[2] == 0, "%s has no slot now: %llu", names[2], U(t[2]));
	CHECK(slurp(path, buf) == PP_HOST_FILE_SIZE, "read");
	for (int s = 0; s < PP_HOST_SHARDS; s++) {
		uint64_t v;

		memcpy(&v, buf + PP_HOST_HEADER + s * PP_HOST_SHARD + 2 * 8, sizeof(v));
		slot2 += v;
	}
	CHECK(slot2 == 3, "the unknown counter's slot: %llu, want 3 (as it was)", U(slot2));
	unlink(path);
}

static void test_path(void)
{
	char out[64], want[64], tiny[8];

	CHECK(!pp_host_path("/x/c-%u-%%u-%", out, sizeof(out)), "expand");
	snprintf(want, sizeof(want), "/x/c-%u-%%u-%%", (unsigned int)geteuid());
	CHECK(!strcmp(out, want), "'%s', want '%s'", out, want);
	CHECK(pp_host_path("/long/path", tiny, sizeof(tiny)) == -ENAMETOOLONG, "too long");
	CHECK(!pp_host_path("1234567", tiny, sizeof(tiny)) && !strcmp(tiny, "1234567"), "fits");
}

/* What a process adds, from its report. */
static void test_values(void)
{
	struct pp_latency lat = { .count = 2, .sum_ns = 3000000000ull };
	struct pp_stats_report r = { .latency = &lat, .pressure_episodes = 4 };
	uint64_t v[PP_HOST_COUNT];

	r.totals.v[PP_CNT_writes_accelerated] = 3;
	r.totals.v[PP_CNT_bytes_accelerated] = 3 << 20;
	r.totals.v[PP_CNT_bytes_passthrough] = 5000;
	r.totals.v[PP_CNT_bytes_passthrough_large] = 4000;
	r.totals.v[PP_CNT_fallbacks] = 1;
	pp_host_values(&r, v);
	CHECK(v[PP_HOST_processes] == 1 && v[PP_HOST_processes_accelerated] == 1 &&
		      v[PP_HOST_writes_accelerated] == 3 &&
		      v[PP_HOST_accelerated_bytes] == 3 << 20 &&
		      v[PP_HOST_passthrough_bytes] == 5000 &&
		      v[PP_HOST_passthrough_large_bytes] == 4000 && v[PP_HOST_fallbacks] == 1 &&
		      v[PP_HOST_accelerated_write_ns] == 3000000000ull &&
		      v[PP_HOST_pressure_episodes] == 4,
	      "values from a report");
	r.totals.v[PP_CNT_bytes_accelerated] = 0;
	r.latency = NULL;
	pp_host_values(&r, v);
	CHECK(v[PP_HOST_processes_accelerated] == 0 && v[PP_HOST_accelerated_write_ns] == 0,
	      "nothing accelerated");
}

/* "%u" in the option: the file is the effective uid's. */
static void test_uid_pattern(void)
{
	char saved[sizeof(path)], want[sizeof(path) + 16];
	uint64_t t[PP_HOST_COUNT];

	memcpy(saved, path, sizeof(path));
	snprintf(path, sizeof(path), "%s/c-%%u", dir);
	CHECK(add(1) == 0, "add to c-%%u");
	snprintf(want, sizeof(want), "%s/c-%u", dir, (unsigned int)geteuid());
	CHECK(totals(want, t) && t[PP_HOST_processes] == 1, "%s holds the add", want);
	unlink(want);
	memcpy(path, saved, sizeof(path));
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ppipe-counters-XXXXXX");
	if (!mkdtemp(dir))
		return 99;
	snprintf(path, sizeof(path), "%s/counters", dir);
	/* Why each file is left alone, in the log (PPIPE_DEBUG's lines). */
	pp_log_set_debug(true);
	test_path();
	test_values();
	test_new_file();
	test_uid_pattern();
	test_concurrent();
	test_left_alone();
	test_stopped_holder();
	test_by_name();
	test_fixed_size();
	rmdir(dir);
	if (failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return 1;
	}
	printf("all passed\n");
	return 0;
}
