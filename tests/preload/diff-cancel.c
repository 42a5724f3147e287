// SPDX-License-Identifier: MIT
/*
 * diff-cancel: pthread_cancel() ends a thread blocked in a large write(),
 * as write() is a cancellation point. Two waits are covered: a pipe full
 * before the write moved anything, and a pipe that filled up after the
 * write moved part of its bytes. The bytes already moved stay in the
 * pipe, and afterwards another thread writes to the same pipe, and so
 * does the cancelled thread's successor, with every byte checked. A
 * third case queues a second writer behind the blocked one (with
 * libppipe it waits for the pipe's turn, in the kernel for the pipe) and
 * cancels it first: it must end having moved nothing.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIG (1024 * 1024)
#define PIPE_SZ (64 * 1024)

struct job {
	int fd;
	const unsigned char *buf;
	size_t len;
	int close_after; /* close @fd when the write returns */
	volatile int started;
	ssize_t ret;
	int err; /* errno of the write */
};

static void *writer(void *arg)
{
	struct job *j = arg;

	j->started = 1;
	ssize_t n = write(j->fd, j->buf, j->len);

	j->err = errno;
	__atomic_store_n(&j->ret, n, __ATOMIC_RELEASE);
	if (j->close_after)
		close(j->fd);
	return NULL;
}

/* Reads @fd until EOF into @out (at most @cap bytes); returns the count. */
static size_t read_all(int fd, unsigned char *out, size_t cap)
{
	size_t got = 0;

	for (;;) {
		ssize_t n = read(fd, out + got, cap - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return got;
		got += (size_t)n;
		if (got == cap)
			return got;
	}
}

/*
 * One scenario: @before bytes of stream 1 are in the pipe (and @drain of
 * them read) when a thread writes BIG bytes of stream 2 and is cancelled.
 * Then a new thread writes BIG bytes of stream 3. The reader must get
 * stream 1's bytes, a prefix of stream 2, then all of stream 3. With
 * @queued, a second thread writing stream 4 waits behind the first and
 * is cancelled before it: none of stream 4 may arrive. With @sig, that
 * second writer first gets a SIGUSR1 whose handler was installed with
 * SA_RESTART (1) or without (2): a write waiting for room goes on
 * waiting, or fails with EINTR having moved nothing.
 */
static void on_usr1(int sig)
{
	(void)sig;
}

static void scenario(const char *name, size_t before, size_t drain, bool queued, int sig)
{
	static unsigned char src2[BIG], src3[BIG], got[3 * BIG + PIPE_SZ];
	struct job j = { 0 }, k = { 0 };
	pthread_t t;
	void *res;
	int p[2];
	size_t n, head, moved;

	t_pipe(p, O_CLOEXEC);
	t_pipe_size_set(p[1], PIPE_SZ);
	t_fill(got, before, 1, 0);
	t_check(t_write_all(p[1], got, before) == (ssize_t)before, "prefill");
	if (drain) {
		t_check(t_read_full(p[0], got, drain) == (ssize_t)drain, "drain");
		/* What the pipe holds still: stream 1 from @drain. */
	}
	t_fill(src2, BIG, 2, 0);
	t_fill(src3, BIG, 3, 0);
	j = (struct job){ .fd = p[1], .buf = src2, .len = BIG, .ret = -2 };
	if (pthread_create(&t, NULL, writer, &j))
		t_die("pthread_create");
	while (!j.started)
		t_usleep(1000);
	t_usleep(200 * 1000); /* let it block */
	if (queued) {
		static unsigned char src4[BIG];
		struct job q = { .fd = p[1], .buf = src4, .len = BIG, .ret = -2 };
		pthread_t tq;

		t_fill(src4, BIG, 4, 0);
		if (pthread_create(&tq, NULL, writer, &q))
			t_die("pthread_create");
		while (!q.started)
			t_usleep(1000);
		t_usleep(200 * 1000);
		if (sig) {
			ssize_t r;
			struct sigaction sa = { .sa_handler = on_usr1,
						.sa_flags = sig == 1 ? SA_RESTART : 0 };

			sigemptyset(&sa.sa_mask);
			sigaction(SIGUSR1, &sa, NULL);
			pthread_kill(tq, SIGUSR1);
			t_usleep(200 * 1000);
			r = __atomic_load_n(&q.ret, __ATOMIC_ACQUIRE);
			/*
			 * SA_RESTART: it waits on. Without: EINTR, or it waits
			 * on as if the signal had come just before the write
			 * (libppipe, whose wait was for the pipe's turn).
			 */
			if (sig == 1)
				t_log("%s: after SIGUSR1 the queued writer %s", name,
				      r == -2 ? "still waits" : t_res(r, q.err));
			else
				t_log("%s: after SIGUSR1 the queued writer failed with EINTR or "
				      "waits on: %s",
				      name, r == -2 || (r == -1 && q.err == EINTR) ? "yes" : "no");
		}
		if (sig == 2 && __atomic_load_n(&q.ret, __ATOMIC_ACQUIRE) != -2) {
			pthread_join(tq, &res);
		} else {
			pthread_cancel(tq);
			pthread_join(tq, &res);
			/* (Which of the two ends it took after no SA_RESTART is the schedule's.) */
			if (sig != 2)
				t_log("%s: queued writer %s", name,
				      res == PTHREAD_CANCELED ? "cancelled" : "returned");
			t_check(res == PTHREAD_CANCELED,
				"%s: the queued writer was not cancelled (%zd)", name, q.ret);
		}
	}
	pthread_cancel(t);
	pthread_join(t, &res);
	t_log("%s: writer %s", name, res == PTHREAD_CANCELED ? "cancelled" : "returned");
	t_check(res == PTHREAD_CANCELED, "%s: the blocked writer was not cancelled (%zd)", name,
		j.ret);

	/*
	 * The pipe and libppipe still work: a new thread writes all of
	 * stream 3 and closes the write end, so the reader sees EOF.
	 */
	k = (struct job){ .fd = p[1], .buf = src3, .len = BIG, .close_after = 1, .ret = -2 };
	if (pthread_create(&t, NULL, writer, &k))
		t_die("pthread_create");
	head = before - drain;
	n = read_all(p[0], got, sizeof(got));
	pthread_join(t, NULL);
	t_check(k.ret == BIG, "%s: the next write returned %zd", name, k.ret);
	/* Stream 1's rest, a prefix of stream 2 (what the cancelled write moved), stream 3. */
	t_check(n >= head + BIG && n - head - BIG <= BIG, "%s: read %zu bytes", name, n);
	moved = n >= head + BIG ? n - head - BIG : 0;
	t_check(t_verify(got, head, 1, drain) == head, "%s: stream 1 damaged", name);
	t_check(t_verify(got + head, moved, 2, 0) == moved,
		"%s: the cancelled write's bytes damaged", name);
	t_check(n >= head + BIG && t_verify(got + head + moved, BIG, 3, 0) == BIG,
		"%s: the next write's bytes damaged", name);
	t_log("%s: cancelled write moved %s, next write intact: %s", name,
	      drain ? (moved ? "part" : "nothing") : (moved ? "SOMETHING" : "nothing"),
	      t_failed() ? "no" : "yes");
	t_close(p[0]);
}

int main(void)
{
	t_init("diff-cancel");
	/* Full before the write: the wait that has not moved bytes yet. */
	scenario("full pipe", PIPE_SZ, 0, false, 0);
	/* Room for 48 KiB: the write moves them, then waits after progress. */
	scenario("after progress", PIPE_SZ, 48 * 1024, false, 0);
	/* A second writer queued behind the blocked one, cancelled first. */
	scenario("queued writer", PIPE_SZ, 0, true, 0);
	/* The queued writer gets a signal first: waits on (SA_RESTART), or EINTR. */
	scenario("queued writer, SA_RESTART signal", PIPE_SZ, 0, true, 1);
	scenario("queued writer, signal without SA_RESTART", PIPE_SZ, 0, true, 2);
	return t_finish();
}
