// SPDX-License-Identifier: MIT
#include "uring.h"

#include "config.h"
#include "fault.h"
#include "log.h"
#include "once.h"
#include "stage.h"
#include "sys.h"

#include <errno.h>
#include <stdint.h>

PP_HOT int pp_uring_state; /* enum pp_once: started and working */
static const char *reason = "not started";

const char *pp_uring_reason(void)
{
	return __atomic_load_n(&reason, __ATOMIC_ACQUIRE);
}

_Static_assert(PP_ONCE_YES == 2, "uring.h's pp_uring_started() reads the state as a number");

#if PP_HAVE_URING

#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>

#include <dlfcn.h>

/*
 * liburing is not linked: most processes never use write-behind, and the
 * dynamic linker would load it into every one of them. The service opens
 * it when it starts, and the functions below go through this table (the
 * header's inline helpers need nothing from the library).
 */
#define PP_LIBURING_SONAME "liburing.so.2"
static struct {
	int (*queue_init)(unsigned int, struct io_uring *, unsigned int);
	void (*queue_exit)(struct io_uring *);
	struct io_uring_probe *(*get_probe_ring)(struct io_uring *);
	void (*free_probe)(struct io_uring_probe *);
	int (*submit)(struct io_uring *);
	int (*submit_and_wait)(struct io_uring *, unsigned int);
} lib;
#define io_uring_queue_init lib.queue_init
#define io_uring_queue_exit lib.queue_exit
#define io_uring_get_probe_ring lib.get_probe_ring
#define io_uring_free_probe lib.free_probe
#define io_uring_submit lib.submit
#define io_uring_submit_and_wait lib.submit_and_wait

/* Opens liburing once (never closed: the service may use it until exit). NULL or why not. */
static const char *open_liburing(void)
{
	void *h;

	if (lib.submit_and_wait)
		return NULL;
	h = dlopen(PP_LIBURING_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return "cannot load " PP_LIBURING_SONAME;
#define BIND(field, name)                                 \
	if (!(*(void **)&lib.field = dlsym(h, name))) {   \
		lib.submit_and_wait = NULL;               \
		return PP_LIBURING_SONAME " lacks " name; \
	}
	BIND(queue_init, "io_uring_queue_init")
	BIND(queue_exit, "io_uring_queue_exit")
	BIND(get_probe_ring, "io_uring_get_probe_ring")
	BIND(free_probe, "io_uring_free_probe")
	BIND(submit, "io_uring_submit")
	BIND(submit_and_wait, "io_uring_submit_and_wait")
#undef BIND
	return NULL;
}

#define QUEUE_DEPTH (2 * PP_STAGE_MAX)
#define UD_WAKE 0 /* the eventfd read; stages are index + 1 */
#define UD_TIMER UINT64_MAX /* the linger timer (stage.h) */

static struct io_uring ring;
static int wake_fd = -1;
static uint64_t wake_buf;
/* 1 while the service is (about to be) asleep in io_uring_enter: kicks must write wake_fd. */
static int waiting;
/* The thread that stops the service (pp_uring_stop_if_owns), 0 none: no new stage meanwhile. */
static int stopping;
/* The thread that starts it, 0 none. */
static int starting;
/* The service is asked to end (atomic); it sets @stopped (a futex word) when it has. */
static int stop_req;
static uint32_t stopped;
int pp_uring_timer_armed;
static struct __kernel_timespec linger = { 0, (long long)PP_STAGE_LINGER_NS };

void pp_uring_kick(void)
{
	uint64_t one = 1;

	if (__atomic_load_n(&waiting, __ATOMIC_SEQ_CST) &&
	    __atomic_exchange_n(&waiting, 0, __ATOMIC_SEQ_CST))
		PP_SYSCALL(SYS_write, wake_fd, &one, sizeof(one));
}

static void arm_wake(void)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

	io_uring_prep_read(sqe, wake_fd, &wake_buf, sizeof(wake_buf), 0);
	io_uring_sqe_set_data64(sqe, UD_WAKE);
}

/*
 * The target cannot take the bytes (its readers went away, or worse):
 * what is in S is dropped, as a plain write's bytes would never have
 * gone in, and the error (-errno) waits for the next write or close.
 */
static void drop_staged(struct pp_stage *st, int err)
{
	static char sink[65536];
	uint64_t pend = pp_stage_pending(st);

	__atomic_store_n(&st->err, err, __ATOMIC_RELEASE);
	while (pend) {
		long n = PP_SYSCALL(SYS_read, st->sfd_r, sink,
				    pend < sizeof(sink) ? pend : sizeof(sink));

		if (n <= 0)
			break;
		pend -= (uint64_t)n;
		PP_WB_ADD(dropped_bytes, (uint64_t)n);
		__atomic_add_fetch(&st->out, (uint64_t)n, __ATOMIC_RELEASE);
	}
	if (pend) { /* S cannot be read: account the bytes as gone all the same */
		PP_WB_ADD(dropped_bytes, pend);
		__atomic_add_fetch(&st->out, pend, __ATOMIC_RELEASE);
	}
	pp_stage_wake(st);
	pp_debug("write-behind: pipe inode %llu refused staged bytes (%s); the next write or "
		 "close reports it",
		 (unsigned long long)st->ino, strerror(-err));
}

/*
 * Moves what @st holds with splice() from the service itself, never
 * waiting: when the target is full, io_uring polls it for room. A few
 * rounds at most, so that one busy pipe does not hold up the others.
 * Returns true when bytes are left and no poll is armed: the service
 * must come back without sleeping.
 */
static bool splice_inline(struct pp_stage *st, int idx)
{
	long n = 0;

	/* A writer moving them now kicks the service if it leaves any. */
	if (!pp_stage_mover_try(st))
		return false;
	if (pp_fault(PP_FAULT_LAG)) {
		struct timespec lag = { 0, 20000000 };

		nanosleep(&lag, NULL); /* tests: a slow service */
	}
	for (int round = 0; round < 8 && (n = pp_stage_move_once(st)) > 0; round++)
		;
	if (n == -EAGAIN) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

		if (!sqe) {
			pp_stage_mover_release(st);
			return true; /* the queue is full: after this submission */
		}
		/* In flight before the lock goes: the dup of the pipe stays (stage.h). */
		io_uring_prep_poll_add(sqe, st->tfd, POLLOUT);
		io_uring_sqe_set_data64(sqe, (uint64_t)idx + 1);
		__atomic_store_n(&st->inflight, 1, __ATOMIC_SEQ_CST);
		pp_stage_mover_release(st);
		return false;
	}
	if (n < 0 && n != -EINTR)
		drop_staged(st, (int)n);
	pp_stage_mover_release(st);
	return pp_stage_pending(st) != 0;
}

/*
 * Moves on (inline) or submits a splice for (async) every stage that holds
 * bytes and has nothing in flight. Returns the stages that still hold
 * bytes with nothing in flight: the service must not sleep on them.
 */
static unsigned int submit_ready(void)
{
	unsigned int busy = 0;
	bool linger_left = false;
	uint64_t now = 0;

	for (int i = 0; i < PP_STAGE_MAX; i++) {
		struct pp_stage *st = &pp_stages[i];
		int s = __atomic_load_n(&st->state, __ATOMIC_ACQUIRE);
		uint64_t pend;

		if ((s != PP_STAGE_OPEN && s != PP_STAGE_RETIRED) ||
		    __atomic_load_n(&st->inflight, __ATOMIC_RELAXED))
			continue;
		/* Its pipe went without the engine seeing it close: delivered, then closed. */
		if (s == PP_STAGE_OPEN && pp_stage_retire_orphan(st))
			s = PP_STAGE_RETIRED;
		pend = pp_stage_pending(st);
		if (!pend) {
			/* Read before the slot is free: a writer may take it at once. */
			uint64_t ino = st->ino;

			if (s == PP_STAGE_RETIRED && pp_stage_try_reap(st))
				pp_debug("write-behind: stage of pipe inode %llu closed",
					 (unsigned long long)ino);
			else if (s == PP_STAGE_OPEN &&
				 __atomic_load_n(&st->tfd, __ATOMIC_ACQUIRE) >= 0) {
				/* Drained: the dup goes once no write came for a while (stage.h). */
				if (!now)
					now = pp_mono_ns();
				if (now - __atomic_load_n(&st->used_ns, __ATOMIC_ACQUIRE) >=
				    PP_STAGE_LINGER_NS)
					pp_stage_drop_target(st);
				if (__atomic_load_n(&st->tfd, __ATOMIC_ACQUIRE) >= 0)
					linger_left = true;
			}
			continue;
		}
		if (pp_cfg.uring_splice == PP_URING_SPLICE_INLINE) {
			busy += splice_inline(st, i);
			continue;
		}
		if (!pp_stage_mover_try(st))
			continue; /* a writer moves them: it kicks if it leaves any */
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

		if (!sqe) {
			pp_stage_mover_release(st);
			busy++;
			break;
		}
		if (pend > st->cap_s)
			pend = st->cap_s;
		io_uring_prep_splice(sqe, st->sfd_r, -1, st->tfd, -1, (unsigned int)pend, 0);
		io_uring_sqe_set_data64(sqe, (uint64_t)i + 1);
		__atomic_store_n(&st->inflight, 1, __ATOMIC_SEQ_CST);
	}
	/* A drained stage still holds its dup: come back when it may go. */
	if (linger_left && !__atomic_load_n(&pp_uring_timer_armed, __ATOMIC_ACQUIRE)) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

		if (!sqe)
			return busy + 1;
		io_uring_prep_timeout(sqe, &linger, 0, 0);
		io_uring_sqe_set_data64(sqe, UD_TIMER);
		__atomic_store_n(&pp_uring_timer_armed, 1, __ATOMIC_RELEASE);
	}
	return busy;
}

static void complete(struct io_uring_cqe *cqe)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	struct pp_stage *st;
	int res = cqe->res;

	if (ud == UD_WAKE) {
		arm_wake();
		return;
	}
	if (ud == UD_TIMER) {
		__atomic_store_n(&pp_uring_timer_armed, 0, __ATOMIC_RELEASE);
		return;
	}
	st = &pp_stages[ud - 1];
	if (pp_cfg.uring_splice == PP_URING_SPLICE_INLINE) {
		/* The target has room (or an error the next splice will tell). */
		__atomic_store_n(&st->inflight, 0, __ATOMIC_SEQ_CST);
		return;
	}
	if (res > 0 && pp_fault(PP_FAULT_SPLICE))
		res = -EPIPE; /* tests: as if the readers were gone (nothing moved) */
	if (res > 0)
		pp_stage_moved(st, (uint64_t)res);
	else if (res != -EINTR && res != -EAGAIN && res != -ECANCELED && res != 0)
		drop_staged(st, res);
	pp_stage_mover_release(st);
	__atomic_store_n(&st->inflight, 0, __ATOMIC_SEQ_CST);
}

/* Moves a fresh fd of ours above the program's numbers. */
static int to_spare(int fd)
{
	long r = pp_sys_dup_spare(fd, true);

	if (r < 0)
		return fd;
	pp_sys_close(fd);
	return (int)r;
}

/*
 * Sets up the ring, in the service thread: the ring and everything its
 * requests leave behind (task work) belong to this thread, never to one
 * of the program's, whose blocking calls task work would interrupt (a
 * blocked pipe write returns short).
 */
static const char *setup(void)
{
	struct io_uring_probe *probe;
	bool splice;
	int r;

	if (pp_fault(PP_FAULT_URING))
		return "io_uring_setup refused (test fault)";
	r = io_uring_queue_init(QUEUE_DEPTH, &ring, 0);
	if (r < 0)
		return r == -EPERM ? "io_uring_setup refused: EPERM (io_uring_disabled, seccomp?)" :
		       r == -ENOSYS ? "io_uring_setup refused: ENOSYS (kernel without io_uring, "
				      "or a filter)" :
				      "io_uring_setup failed";
	probe = io_uring_get_probe_ring(&ring);
	splice = probe && io_uring_opcode_supported(probe, IORING_OP_SPLICE) &&
		 io_uring_opcode_supported(probe, IORING_OP_POLL_ADD) &&
		 io_uring_opcode_supported(probe, IORING_OP_READ);
	if (probe)
		io_uring_free_probe(probe);
	if (!splice) {
		io_uring_queue_exit(&ring);
		return "IORING_OP_SPLICE, POLL_ADD or READ not supported by this kernel";
	}
	ring.ring_fd = ring.enter_ring_fd = to_spare(ring.ring_fd);
	wake_fd = (int)PP_SYSCALL(SYS_eventfd2, 0, EFD_CLOEXEC);
	if (wake_fd < 0) {
		io_uring_queue_exit(&ring);
		return "no eventfd for the io_uring service";
	}
	wake_fd = to_spare(wake_fd);
	return NULL;
}

static const char *setup_why;
static uint32_t setup_done;

static void *service(void *arg)
{
	const char *why = setup();

	(void)arg;
	__atomic_store_n(&setup_why, why, __ATOMIC_RELEASE);
	__atomic_store_n(&setup_done, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &setup_done, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	if (why)
		return NULL;
	arm_wake();
	while (!__atomic_load_n(&stop_req, __ATOMIC_ACQUIRE)) {
		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0;

		unsigned int busy = submit_ready();

		/* Announce the sleep, then look once more: a kick in between is seen. */
		if (!busy) {
			__atomic_store_n(&waiting, 1, __ATOMIC_SEQ_CST);
			busy = submit_ready();
		}
		if (busy) {
			/* Bytes left to move: submit what is queued, reap, go round. */
			__atomic_store_n(&waiting, 0, __ATOMIC_SEQ_CST);
			io_uring_submit(&ring);
		} else if (io_uring_submit_and_wait(&ring, 1) < 0) {
			/* EINTR (signals are blocked, but ptrace may stop us): again. */
		}
		__atomic_store_n(&waiting, 0, __ATOMIC_SEQ_CST);
		io_uring_for_each_cqe(&ring, head, cqe)
		{
			complete(cqe);
			seen++;
		}
		io_uring_cq_advance(&ring, seen);
	}
	/* Nothing is staged any more (pp_uring_stop_if_owns): the ring and its fds go. */
	io_uring_queue_exit(&ring);
	pp_sys_close(wake_fd);
	wake_fd = -1;
	__atomic_store_n(&pp_uring_timer_armed, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&stopped, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &stopped, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	return NULL;
}

static const char *start_service(void)
{
	const char *why = open_liburing();
	sigset_t all, old;
	pthread_t tid;
	int r;

	if (why)
		return why;

	/* The service takes no signal: they are the program's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&tid, NULL, service, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r)
		return "the io_uring service thread could not start";
	pthread_detach(tid);
	while (!__atomic_load_n(&setup_done, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, &setup_done, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	return __atomic_load_n(&setup_why, __ATOMIC_ACQUIRE);
}

static const char *start(void)
{
	const char *why;

	__atomic_store_n(&starting, (int)pp_sys_gettid(), __ATOMIC_RELEASE);
	why = start_service();
	__atomic_store_n(&starting, 0, __ATOMIC_RELEASE);
	return why;
}

static void start_told(const char *why)
{
	if (why)
		pp_debug("PPIPE_MODE=uring: %s; the vmsplice engine writes directly", why);
	else
		pp_debug("PPIPE_MODE=uring: write-behind, with an io_uring service thread");
}

bool pp_uring_ready(void)
{
	pp_mark_used(PP_USED_URING);
	if (unlikely(__atomic_load_n(&stopping, __ATOMIC_ACQUIRE)))
		return false;
	return pp_once_run(&pp_uring_state, &reason, start, "io_uring service running", start_told);
}

static bool fd_in(int fd, unsigned int lo, unsigned int hi)
{
	return fd >= 0 && (unsigned int)fd >= lo && (unsigned int)fd <= hi;
}

bool pp_uring_stop_if_owns(unsigned int lo, unsigned int hi)
{
	int self = (int)pp_sys_gettid();

	for (;;) {
		int s = __atomic_load_n(&pp_uring_state, __ATOMIC_ACQUIRE), zero = 0;
		int who = __atomic_load_n(&stopping, __ATOMIC_ACQUIRE);

		/* A signal handler inside this thread's own start or stop: never wait for itself. */
		if (who == self ||
		    (s == PP_ONCE_RUNNING && __atomic_load_n(&starting, __ATOMIC_ACQUIRE) == self))
			return false;
		if (s == PP_ONCE_RUNNING || who) {
			sched_yield(); /* another thread starts or stops it: a few system calls */
			continue;
		}
		if (s != PP_ONCE_YES || (!fd_in(ring.ring_fd, lo, hi) && !fd_in(wake_fd, lo, hi)))
			return false;
		if (__atomic_compare_exchange_n(&stopping, &zero, self, false, __ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED))
			return true;
	}
}

void pp_uring_stop(void)
{
	uint64_t one = 1;

	__atomic_store_n(&stop_req, 1, __ATOMIC_SEQ_CST);
	PP_SYSCALL(SYS_write, wake_fd, &one, sizeof(one));
	while (!__atomic_load_n(&stopped, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, &stopped, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	/* As never started: the next write that stages starts a new service. */
	__atomic_store_n(&stop_req, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stopped, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&waiting, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&setup_done, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&setup_why, NULL, __ATOMIC_RELAXED);
	__atomic_store_n(&reason, "stopped: the program closed its fds", __ATOMIC_RELEASE);
	__atomic_store_n(&pp_uring_state, PP_ONCE_UNKNOWN, __ATOMIC_RELEASE);
	__atomic_store_n(&stopping, 0, __ATOMIC_RELEASE);
}

PP_COMMON void pp_uring_after_fork_child(void)
{
	bool ok;

	/* Never started: nothing to forget, and no page to write. */
	if (__atomic_load_n(&pp_uring_state, __ATOMIC_RELAXED) == PP_ONCE_UNKNOWN)
		return;
	if (pp_once_decided(&pp_uring_state, &ok) && ok) {
		/* The ring is the parent's: forget it here (its mapping stays, unused). */
		pp_sys_close(ring.ring_fd);
		pp_sys_close(wake_fd);
		wake_fd = -1;
		waiting = 0;
	}
	setup_done = 0;
	setup_why = NULL;
	stopping = starting = stop_req = 0;
	stopped = 0;
	pp_uring_timer_armed = 0;
	pp_uring_state = PP_ONCE_UNKNOWN;
	reason = "not started";
}

#else /* !PP_HAVE_URING */

int pp_uring_timer_armed;

void pp_uring_kick(void)
{
}

bool pp_uring_ready(void)
{
	__atomic_store_n(&reason, "built without liburing", __ATOMIC_RELEASE);
	return false;
}

bool pp_uring_stop_if_owns(unsigned int lo, unsigned int hi)
{
	(void)lo;
	(void)hi;
	return false;
}

void pp_uring_stop(void)
{
}

PP_COMMON void pp_uring_after_fork_child(void)
{
}

#endif
