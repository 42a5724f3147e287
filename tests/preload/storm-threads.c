// SPDX-License-Identifier: MIT
/*
 * storm-threads: 32 writer threads and 8 readers on 4 pipes, with write
 * sizes from 1 byte to 4 MiB, while another thread flips O_NONBLOCK on
 * the write ends, changes the pipes' sizes and dup2()s another fd of the
 * same pipe over the fd the writers use. Every byte is checked: each
 * pipe's writers send tagged streams, its two readers take turns and take
 * them apart, and each writer's stream must arrive whole, in order and
 * unaltered. Runs with or without libppipe; exits T_EXIT_FAIL on damage.
 *
 * With "spawn", the pipes are inheritable and one more thread forks
 * children that exit at once, forks children that exec /bin/true, and
 * posix_spawn()s /bin/true, all the while: every child holds every pipe
 * end for a moment, and the exec'd ones hand them to a new image.
 *
 * With "memory", the storm runs in a memory cgroup of LIMIT bytes (512M
 * by default) that a page-cache filler keeps full (the benchmark's
 * pressure.c, its filler let run without a CPU budget): every page the writers charge (ring
 * pages, pipe buffers) has to be reclaimed in the writing thread, which
 * is the stall libppipe's PSI shrinker answers. Without a cgroup (not
 * root, no memory controller) the run is skipped: pressure.c's other
 * mode, a global hog, would squeeze the whole machine and still not make
 * the writers reclaim. One line sums it up, with the cgroup's reclaim
 * counters before and after.
 *
 * usage: storm-threads [SECONDS [spawn | memory [LIMIT]]]   (3 seconds by default)
 */
#include "cli.h"
#include "helpers.h"
#include "pressure.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PIPES 4
#define WRITERS 32
#define READERS 8
#define MAX_WRITE (4u << 20)

struct pipe_state {
	int rfd, wfd, wdup;
	pthread_mutex_t rlock;
	struct t_demux d;
	uint64_t written[WRITERS / PIPES];
	uint64_t flips, resizes, dups;
};

static struct pipe_state pipes[PIPES];
static volatile int stop;
static uint64_t forks, execs, spawns;
static struct pressure pr;
extern char **environ;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Sizes spread over every order of magnitude from 1 B to 4 MiB. */
static size_t pick_size(uint64_t *s)
{
	unsigned int bits = (unsigned int)(rnd(s) % 23);

	return 1 + (size_t)(rnd(s) % ((1ull << bits) > MAX_WRITE ? MAX_WRITE : (1ull << bits)));
}

static void *writer(void *arg)
{
	int w = (int)(long)arg, id = w / PIPES;
	struct pipe_state *ps = &pipes[w % PIPES];
	unsigned char *buf = t_map(MAX_WRITE);
	uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w + 1), pos = 0;

	while (!stop) {
		size_t n = pick_size(&seed), off = 0;

		t_tag_fill(buf, n, (unsigned int)id, pos);
		while (off < n) {
			ssize_t r = write(ps->wfd, buf + off, n - off);

			if (r < 0 && errno == EAGAIN) {
				struct pollfd pfd = { .fd = ps->wfd, .events = POLLOUT };

				poll(&pfd, 1, 100);
				continue;
			}
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				t_die("writer %d: write", w);
			off += (size_t)r;
		}
		pos += n;
	}
	ps->written[id] = pos;
	return NULL;
}

static void *reader(void *arg)
{
	struct pipe_state *ps = &pipes[(long)arg % PIPES];
	unsigned char *buf = t_map(1u << 20);

	for (;;) {
		ssize_t r;

		pthread_mutex_lock(&ps->rlock);
		r = read(ps->rfd, buf, 1u << 20);
		if (r > 0)
			t_demux_feed(&ps->d, buf, (size_t)r);
		pthread_mutex_unlock(&ps->rlock);
		if (r == 0)
			return NULL;
		if (r < 0 && errno != EINTR)
			t_die("read");
	}
}

static void *chaos(void *arg)
{
	static const int sizes[] = { 65536, 262144, 1 << 20 };
	uint64_t seed = 12345;

	(void)arg;
	while (!stop) {
		struct pipe_state *ps = &pipes[rnd(&seed) % PIPES];
		long fl = fcntl(ps->wfd, F_GETFL);

		switch (rnd(&seed) % 3) {
		case 0:
			if (fl >= 0 && !fcntl(ps->wfd, F_SETFL, fl ^ O_NONBLOCK))
				ps->flips++;
			break;
		case 1:
			/* Shrinking below what the pipe holds fails (EBUSY): fine. */
			if (fcntl(ps->wfd, F_SETPIPE_SZ, sizes[rnd(&seed) % 3]) > 0)
				ps->resizes++;
			break;
		default:
			/* Another fd of the same pipe over the writers' fd. */
			if (dup2(ps->wdup, ps->wfd) == ps->wfd)
				ps->dups++;
			break;
		}
		t_usleep(1000);
	}
	return NULL;
}

static void reap(pid_t pid)
{
	if (pid < 0)
		t_die("fork");
	t_wait(pid);
}

/* Children that come and go while the writers write. */
static void *spawner(void *arg)
{
	char *argv[] = { "true", NULL };

	(void)arg;
	while (!stop) {
		pid_t pid = fork();

		if (!pid)
			_exit(0);
		reap(pid);
		forks++;
		pid = fork();
		if (!pid) {
			execve("/bin/true", argv, environ);
			_exit(127);
		}
		reap(pid);
		execs++;
		if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ))
			t_die("posix_spawn");
		reap(pid);
		spawns++;
	}
	return NULL;
}

/* A storm that dies half way (t_die) leaves no hog and no cgroup behind. */
static void stop_pressure(void)
{
	pressure_stop(&pr);
}

/* Before any thread: all of them, and every ring, are charged to the cgroup. */
static void start_pressure(const char *arg)
{
	uint64_t limit = 512u << 20;
	char err[256];

	if (arg && (cli_parse_size(arg, &limit) || limit < (64u << 20)))
		t_die("memory: '%s' is not a byte count of at least 64M", arg);
	if (geteuid())
		t_skip("memory: making a memory cgroup needs root");
	/* A correctness storm, not a measurement: the filler may take a whole CPU. */
	if (pressure_start(&pr, PRESSURE_MEMCG, limit, 100, err, sizeof(err)))
		t_skip("memory: %s", err);
	atexit(stop_pressure);
}

static void print_pressure(double secs, uint64_t written, uint64_t verified, uint64_t lost)
{
	const struct pressure_counters *a = &pr.before, *z = &pr.after;

	fprintf(stderr,
		"storm-threads: memory: %g s, %" PRIu64 " bytes written, %" PRIu64
		" verified, %" PRIu64 " lost; %s limit %" PRIu64 ": memcg %s %" PRIu64 "->%" PRIu64
		", max events %" PRIu64 "->%" PRIu64 ", pgscan_direct %" PRIu64 "->%" PRIu64
		", allocstall %" PRIu64 "->%" PRIu64 "; reclaim %s\n",
		secs, written, verified, lost, pr.method, pr.limit,
		strcmp(pr.method, "cgroup-v2") ? "failcnt" : "pgscan_direct",
		strcmp(pr.method, "cgroup-v2") ? a->memcg_failcnt : a->memcg_pgscan_direct,
		strcmp(pr.method, "cgroup-v2") ? z->memcg_failcnt : z->memcg_pgscan_direct,
		a->memcg_max, z->memcg_max, a->pgscan_direct, z->pgscan_direct, a->allocstall,
		z->allocstall, pressure_saw_direct_reclaim(&pr) ? "seen" : "NOT SEEN");
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3;
	bool spawn = argc > 2 && !strcmp(argv[2], "spawn");
	bool memory = argc > 2 && !strcmp(argv[2], "memory");
	pthread_t w[WRITERS], r[READERS], c, sp;
	struct timespec run = { (time_t)secs, (long)((secs - (time_t)secs) * 1e9) };

	t_init("storm-threads");
	if (memory)
		start_pressure(argc > 3 ? argv[3] : NULL);
	for (int i = 0; i < PIPES; i++) {
		int p[2];

		t_pipe(p, spawn ? 0 : O_CLOEXEC);
		pipes[i].rfd = p[0];
		pipes[i].wfd = p[1];
		pipes[i].wdup = dup(p[1]);
		t_pipe_size_set(p[1], 1 << 20);
		pthread_mutex_init(&pipes[i].rlock, NULL);
		t_demux_init(&pipes[i].d, WRITERS / PIPES);
	}
	for (long i = 0; i < READERS; i++)
		if (pthread_create(&r[i], NULL, reader, (void *)i))
			t_die("pthread_create");
	for (long i = 0; i < WRITERS; i++)
		if (pthread_create(&w[i], NULL, writer, (void *)i))
			t_die("pthread_create");
	if (pthread_create(&c, NULL, chaos, NULL))
		t_die("pthread_create");
	if (spawn && pthread_create(&sp, NULL, spawner, NULL))
		t_die("pthread_create");
	nanosleep(&run, NULL);
	stop = 1;
	pthread_join(c, NULL);
	if (spawn) {
		pthread_join(sp, NULL);
		fprintf(stderr, "storm-threads: %llu forks, %llu fork+execs, %llu spawns\n",
			(unsigned long long)forks, (unsigned long long)execs,
			(unsigned long long)spawns);
	}
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	for (int i = 0; i < PIPES; i++) {
		t_close(pipes[i].wfd);
		t_close(pipes[i].wdup);
	}
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	pressure_stop(&pr);

	uint64_t total = 0, verified = 0, lost = 0;

	for (int i = 0; i < PIPES; i++) {
		struct pipe_state *ps = &pipes[i];

		t_demux_end(&ps->d);
		for (int id = 0; id < WRITERS / PIPES; id++) {
			total += ps->written[id];
			if (ps->d.pos[id] < ps->written[id])
				lost += ps->written[id] - ps->d.pos[id];
			if (t_check(ps->d.pos[id] == ps->written[id] &&
					    ps->d.fnv[id] ==
						    t_tag_fnv((unsigned int)id, ps->written[id]),
				    "pipe %d writer %d: wrote %llu, read %llu", i, id,
				    (unsigned long long)ps->written[id],
				    (unsigned long long)ps->d.pos[id]))
				verified += ps->written[id];
		}
		t_check(!ps->d.bad && !ps->d.foreign, "pipe %d: %llu bad, %llu foreign bytes", i,
			(unsigned long long)ps->d.bad, (unsigned long long)ps->d.foreign);
		fprintf(stderr,
			"storm-threads: pipe %d: %llu O_NONBLOCK flips, %llu resizes, %llu dup2s\n",
			i, (unsigned long long)ps->flips, (unsigned long long)ps->resizes,
			(unsigned long long)ps->dups);
	}
	fprintf(stderr, "storm-threads: %llu bytes verified\n", (unsigned long long)verified);
	if (memory)
		print_pressure(secs, total, verified, lost);
	t_log("every writer's stream intact: %s", t_failed() ? "NO" : "yes");
	return t_finish();
}
