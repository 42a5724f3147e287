// SPDX-License-Identifier: MIT
/*
 * The vmsplice engine (docs/design.md, "How a write goes"): copy the caller's bytes into the
 * thread's ring, outside any kernel lock, and vmsplice() the ring pages
 * into the pipe, so the kernel allocates nothing under pipe->mutex.
 *
 * Every decision that could change what a reader sees is taken before
 * the first byte moves; once bytes have moved, errors follow the kernel's
 * partial-write rules (the count, never the error).
 *
 * Layer: engine (may use: engine, pipes, resources, base).
 */
#include "engine_core.h"

#include "compiler.h"
#include "config.h"
#include "faultguard.h"
#include "fdtable.h"
#include "pipe.h"
#include "psi.h"
#include "real.h"
#include "ring.h"
#include "stats.h"
#include "sys.h"
#include "thp.h"
#include "turn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/*
 * The kernel's write() reports EFAULT (or a partial count) for a bad
 * source buffer; a memcpy would crash instead. So every source range is
 * checked first; on any doubt the real call does the write, and produces
 * the kernel's own answer.
 */
static bool source_readable(const struct iovec *iov, int iovcnt)
{
	size_t page = pp_page_size();

	for (int i = 0; i < iovcnt; i++) {
		uintptr_t lo, hi;

		if (!iov[i].iov_len)
			continue;
		lo = (uintptr_t)iov[i].iov_base & ~(page - 1);
		hi = (uintptr_t)iov[i].iov_base + iov[i].iov_len;
		if (hi < lo || pp_sys_madvise((void *)lo, hi - lo, MADV_POPULATE_READ))
			return false;
	}
	return true;
}

/*
 * Nothing was written: the caller makes the real call. @kind says why
 * (the pipe's last fallback, which PPIPE_DEBUG tells); see decline() for
 * a reason that also changes what the statistics say of the pipe.
 */
static ssize_t fall_back(struct pp_pipe *p, const char *kind)
{
	pp_count(&p->cnt, PP_CNT_fallbacks, 1);
	__atomic_store_n(&p->last_fallback, kind ? kind : "unknown", __ATOMIC_RELAXED);
	return PP_DECLINE;
}

/*
 * The rest of the iovec walk, written with the real call: the cut
 * segment first, then the caller's remaining iovecs as they are (so no
 * iovec limit of ours applies). A short first part ends it, as a short
 * write() would.
 */
static ssize_t write_rest(int fd, const struct iovec *iov, int iovcnt, int idx, size_t off)
{
	ssize_t first = 0, rest;

	if (idx < iovcnt && off) {
		size_t len = iov[idx].iov_len - off;

		first = real_write(fd, (const char *)iov[idx].iov_base + off, len);
		if (first < 0 || (size_t)first < len)
			return first;
		idx++;
	}
	if (idx >= iovcnt)
		return first;
	rest = iovcnt - idx == 1 ? real_write(fd, iov[idx].iov_base, iov[idx].iov_len) :
				   real_writev(fd, iov + idx, iovcnt - idx);
	if (rest < 0)
		return first ? first : rest;
	return first + rest;
}

/*
 * One accelerated write in flight: everything a cancellation in one of
 * its waits has to put right, since the caller's own clean-up never runs.
 */
struct write_op {
	struct pp_pipe *p;
	struct pp_ring *r; /* claimed (busy) while the op runs; NULL once released */
	int fd; /* the caller's fd */
	int wfd; /* where the bytes go: fd for the first call, then the pin */
	int pin; /* our dup of the call's open file, or -1 */
	uint32_t epoch; /* of fd when the call began */
	unsigned int calls; /* system calls made on the file so far */
	uint64_t t0; /* start, when latency is recorded */
	size_t done; /* bytes of finished regions in the pipe */
	size_t roff; /* the region being pushed */
	size_t pushed; /* bytes of it in the pipe */
	bool in_region;
	bool turn; /* holds the pipe's turn (turn.h) */
	struct pp_outlet out; /* out.st: the pages go to the pipe or the engine's outlet */
	bool staging; /* the pipe was full: the rest of this write goes through the outlet */
	bool nonblock; /* the write end's file is non-blocking: never wait (design.md) */
	unsigned int *span_kind; /* a span's (ppipe.h) being committed: cancellation closes it */
};

/* Gives the ring back after the op: the next write of this thread may run. */
static void op_release_ring(struct write_op *op, uint64_t now)
{
	if (!op->r)
		return;
	if (op->in_region) {
		pp_ring_commit(op->r, op->roff, op->pushed);
		op->done += op->pushed;
		op->in_region = false;
	}
	pp_ring_release(op->r, now);
	op->r = NULL;
}

/*
 * write() holds its open file until it returns: a close() or dup2() of
 * the fd by another thread meanwhile changes nothing for it. vmsplice()
 * holds it only for one call, so before a second call on the same file
 * the op takes a reference of its own: a dup of the fd, checked to be
 * the file of the first call (no interposed close/dup2 of the fd since
 * the call began, and the same pipe). Closed when the op ends, so the
 * reader's EOF comes exactly when a plain write would have let it.
 * Returns 0, -ESTALE when the fd no longer names the call's file, or
 * -errno when no fd could be had.
 */
static int op_pin(struct write_op *op)
{
	uint64_t ino;
	long pin;

	if (op->pin >= 0)
		return 0;
	pin = pp_fault(PP_FAULT_DUPFD) ?: pp_sys_dup_brief(op->fd);
	if (pin < 0)
		return pin == -EBADF ? -ESTALE : (int)pin;
	if (pp_fdt_epoch(op->fd) != op->epoch || pp_sys_pipe_ino((int)pin, &ino) ||
	    ino != pp_pipe_ino(op->p)) {
		pp_sys_close((int)pin);
		return -ESTALE;
	}
	op->pin = (int)pin;
	op->wfd = (int)pin;
	return 0;
}

static void op_end_outlet(struct write_op *op)
{
	if (op->out.st) {
		op->out.ops->end(&op->out);
		op->out.st = NULL;
	}
}

static void op_unpin(struct write_op *op)
{
	if (op->pin < 0)
		return;
	pp_sys_close(op->pin);
	op->pin = -1;
	op->wfd = op->fd;
}

/*
 * pthread_cancel() acted in a wait: what moved stays in the pipe (as with
 * write()), the ring and the pipe are released, and the bytes counted.
 */
static void op_cancelled(void *arg)
{
	struct write_op *op = arg;
	int saved = errno;

	if (op->turn) {
		pp_turn_give(&op->p->turn);
		op->turn = false;
	}
	op_release_ring(op, pp_now_ns());
	if (op->span_kind)
		*op->span_kind = 0;
	op_unpin(op);
	op_end_outlet(op);
	if (op->done) {
		pp_count(&op->p->cnt, PP_CNT_writes_accelerated, 1);
		pp_count(&op->p->cnt, PP_CNT_bytes_accelerated, op->done);
		pp_count(&op->p->cnt, PP_CNT_bytes_vmspliced, op->done);
	}
	pp_pipe_leave(op->p);
	errno = saved;
}

/*
 * The two places an accelerated write sleeps, and so its cancellation
 * points, as the kernel's write() is one: a blocking vmsplice() (nothing
 * moved yet; @v set) or poll() for room (bytes moved; @v NULL). The libc
 * wrappers are cancellation points; the handler cleans up behind them.
 * Returns what the call returned, or -errno.
 */
static long wait_cancellable(struct write_op *op, int fd, const struct iovec *v)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int saved = errno;
	long r;

	pthread_cleanup_push(op_cancelled, op);
	r = v ? real_vmsplice(fd, v, 1, 0) : poll(&pfd, 1, -1);
	if (r < 0)
		r = -errno;
	pthread_cleanup_pop(0);
	errno = saved;
	return r;
}

/*
 * The pipe is full. vmsplice() ignores the file's O_NONBLOCK and waits
 * only once, so the write() semantics are rebuilt here:
 *   - a non-blocking file: -EAGAIN (the caller returns what moved);
 *   - nothing moved yet: 1, wait in a blocking vmsplice(), where the
 *     kernel applies SA_RESTART exactly as write() would;
 *   - bytes moved: wait in poll(), which a signal always interrupts, so
 *     the call returns the partial count as write() does instead of
 *     being restarted into a wait nobody may end.
 * Returns 0 when there is room, 1 (see above), or -errno.
 */
static long wait_writable(struct write_op *op, int fd, bool moved)
{
	long fl = pp_sys_fcntl(fd, F_GETFL, 0);
	long r;

	if (fl >= 0 && (fl & O_NONBLOCK)) {
		/* Set behind libppipe's back on the file pipe() made: follow it. */
		if (!pp_fdt_asks_flags(op->fd))
			pp_pipe_set_nonblock(op->p, true);
		return -EAGAIN;
	}
	/* Cleared behind libppipe's back (a raw fcntl): this write waits, as write() would. */
	op->nonblock = false;
	if (!moved)
		return 1;
	r = wait_cancellable(op, fd, NULL);
	/* POLLERR: no readers; the next vmsplice reports EPIPE and SIGPIPE. */
	return r < 0 ? r : 0;
}

/* Every half idle period, one writer looks for idle rings to trim. */
static void maybe_trim(uint64_t now)
{
	static uint64_t last;
	uint64_t prev = __atomic_load_n(&last, __ATOMIC_RELAXED);

	if (now - prev < pp_cfg.idle_ms * 500000ull ||
	    !__atomic_compare_exchange_n(&last, &prev, now, false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return;
	if (prev)
		pp_pipes_trim_rings(now, pp_psi_poll(now));
}

/* The pipe's turn, waited for with the op's clean-up covering the wait: see turn.h. */
static int op_take_turn(struct write_op *op)
{
	int r;

	pthread_cleanup_push(op_cancelled, op);
	r = pp_turn_take(&op->p->turn);
	pthread_cleanup_pop(0);
	op->turn = !r;
	return r;
}

static void op_give_turn(struct write_op *op)
{
	if (op->turn) {
		pp_turn_give(&op->p->turn);
		op->turn = false;
	}
}

/* write_rest() to the call's file, with write()'s cancellation point covered. */
static ssize_t rest_cancellable(struct write_op *op, const struct iovec *iov, int iovcnt, int idx,
				size_t off)
{
	ssize_t n;

	pthread_cleanup_push(op_cancelled, op);
	n = write_rest(op->wfd, iov, iovcnt, idx, off);
	pthread_cleanup_pop(0);
	return n;
}

static ssize_t decline(struct pp_pipe *p, const char *why)
{
	if (why)
		__atomic_store_n(&p->reason, why, __ATOMIC_RELAXED);
	return fall_back(p, why);
}

/*
 * A non-blocking write met a full pipe after moving bytes: whether its
 * file is still non-blocking (then the count stands, as write()'s does).
 * Asked of the fd, without a pin: a file the fd no longer names can only
 * end the write early, with its exact count. False: the file is blocking
 * after all (a raw fcntl), and the write waits for room as write() would.
 */
static bool nonblock_still(struct write_op *op)
{
	long fl = pp_sys_fcntl(op->wfd, F_GETFL, 0);

	if (fl < 0 || (fl & O_NONBLOCK))
		return true;
	op->nonblock = false;
	return false;
}

/* Returned by push_region when no pin could be had: the real call goes on. */
#define PP_NO_PIN 1
/*
 * Returned by push_region when a signal ended the wait for the pipe's
 * turn before any byte moved. Whether a plain write() would have been
 * restarted (SA_RESTART) cannot be told from here: the real call waits
 * for room itself, which is what a write the signal reached just before
 * it began would have done.
 */
#define PP_TURN_INTR 2

/* The pin, or why not: 0, -ESTALE (the call's file is gone), or PP_NO_PIN. */
static long op_ensure_pin(struct write_op *op)
{
	int r = op_pin(op);

	return r == 0 || r == -ESTALE ? r : PP_NO_PIN;
}

/* Before every system call on the file but the first one: the pin. */
static long op_next_call(struct write_op *op)
{
	/* The outlet's fds are its own: nobody can take them from under the write. */
	return op->calls++ && !op->out.st ? op_ensure_pin(op) : 0;
}

/*
 * Pushes the reserved region [roff, roff + chunk) into the pipe, waiting
 * for room as write() would. Returns 0 when all of it is in, -errno
 * (op->pushed says how much is), PP_DECLINE when the fd turned out not to
 * be a pipe before anything moved, -ESTALE when the fd was closed under
 * the call, or PP_NO_PIN when the rest must take the real call.
 */
static long push_region(struct write_op *op, size_t chunk, unsigned int *vflags)
{
	struct pp_ring *r = op->r;

	while (op->pushed < chunk) {
		struct iovec v = { r->data + op->roff + op->pushed, chunk - op->pushed };
		long n;

		/*
		 * An outlet takes only what the pipe cannot take now: with
		 * nothing held before it, a write goes straight in.
		 */
		if (op->out.st && !op->staging) {
			n = op->out.ops->catch_up(&op->out);
			if (n < 0)
				return n; /* the kernel's SIGPIPE came with it: this write's error */
			op->staging = n != 0;
		}
		if (op->out.st && !op->staging) {
			n = pp_sys_vmsplice(op->out.pipe_fd, &v, 1, SPLICE_F_NONBLOCK);
			pp_count(&op->p->cnt, PP_CNT_vmsplice_calls, 1);
			if (n > 0) {
				pp_ring_pushed(r, op->roff + op->pushed, (size_t)n);
				op->pushed += (size_t)n;
				continue;
			}
			if (n != -EAGAIN) {
				if (!op->done && !op->pushed &&
				    (n == -EBADF || n == -EINVAL || n == -ENOMEM || n == -EFAULT))
					return PP_DECLINE;
				return n ? n : -EIO;
			}
			op->staging = true;
		}
		/*
		 * The readers went away under held bytes: pass on no more. The
		 * count so far stands; the error is the next call's.
		 */
		if (op->out.st && (n = op->out.ops->error(&op->out, op->done || op->pushed)))
			return n;
		n = op_next_call(op);
		if (n)
			return n;
		if (op->out.st)
			n = op->out.ops->push(&op->out, &v);
		else if (*vflags)
			n = pp_sys_vmsplice(op->wfd, &v, 1, *vflags);
		else
			n = wait_cancellable(op, op->wfd, &v);
		pp_count(&op->p->cnt, PP_CNT_vmsplice_calls, 1);
		*vflags = SPLICE_F_NONBLOCK;
		if (n > 0) {
			pp_ring_pushed(r, op->roff + op->pushed, (size_t)n);
			op->pushed += (size_t)n;
			/* vmsplice() stops short only at a full pipe. */
			if (op->nonblock && op->pushed < chunk && nonblock_still(op))
				return -EAGAIN;
			continue;
		}
		/*
		 * A non-blocking write: a full pipe ends it. With nothing
		 * moved the real call answers (pp_core_write).
		 */
		if (n == -EAGAIN && op->nonblock &&
		    ((!op->done && !op->pushed) || nonblock_still(op)))
			return n;
		if (n == -EAGAIN && !op->turn && !op->nonblock && pp_turns_on(&op->p->turn)) {
			/*
			 * The pipe is full: wait for room in turns (turn.h).
			 * The holder may leave room behind: try again first.
			 * A signal that ends this wait would have ended a
			 * plain write() waiting for room: EINTR, or the count.
			 */
			long t = op_take_turn(op);

			if (!t)
				continue;
			if (t == -EINTR && !op->done && !op->pushed)
				return PP_TURN_INTR;
			if (t != -EDEADLK)
				return t;
			/* This thread holds it already (a handler in a write): wait without. */
		}
		if (n == -EAGAIN) {
			n = op_next_call(op);
			if (n)
				return n;
			n = wait_writable(op, op->wfd, op->done + op->pushed > 0);
			if (n == 0)
				continue; /* room now */
			if (n == 1 && op->out.st) {
				/*
				 * An outlet's push never waits (write-behind holds
				 * its stage's lock there): poll. A signal with nothing
				 * moved hands the write to the real call, which
				 * restarts or not as the handler asked.
				 */
				n = wait_cancellable(op, op->wfd, NULL);
				if (n >= 0)
					continue;
				if (n == -EINTR && !op->done && !op->pushed)
					return PP_TURN_INTR;
				return n;
			}
			if (n == 1) {
				*vflags = 0; /* nothing moved yet: the kernel's own wait */
				continue;
			}
		} else if (!op->done && !op->pushed &&
			   (n == -EBADF || n == -EINVAL || n == -ENOMEM || n == -EFAULT)) {
			/*
			 * Nothing moved: not a pipe after all, or the kernel
			 * could not take our pages; the real call decides.
			 */
			return PP_DECLINE;
		}
		/* EINTR, EPIPE (SIGPIPE already raised once), EAGAIN, ENOMEM... */
		return n ? n : -EIO;
	}
	return 0;
}

/*
 * A non-blocking write (docs/design.md, "Non-blocking writes") gives what
 * a plain write() would give only where the kernel's merge into the last
 * buffer cannot happen: the ring takes whole pages, and an unaligned
 * tail (total % page) goes with the real call, which is exact when the
 * pipe was empty (nothing to merge into). Returns 0 with *@body, the bytes
 * the ring may take, or PP_DECLINE.
 */
static ssize_t nonblock_plan(struct pp_pipe *p, int fd, size_t total, bool outlet, size_t *body)
{
	size_t tail = total & (pp_page_size() - 1);
	int queued = -1;

	/* Write-behind takes what a full pipe refuses; a non-blocking write must not. */
	if (outlet)
		return fall_back(p, "non-blocking write end");
	if (tail && (pp_fault(PP_FAULT_FIONREAD) || pp_sys_ioctl(fd, FIONREAD, &queued) || queued))
		return fall_back(p, "non-blocking, pipe not empty and size not page-aligned");
	*body = total - tail;
	return 0;
}

/*
 * Between two regions of a non-blocking write: 0 when the pipe has room
 * for more, else -EAGAIN (the count so far stands; a pipe whose readers
 * are gone fails the next write, as the kernel's would). A file found
 * blocking after all waits here for room, as write() would. No region is
 * copied that a full pipe would refuse.
 */
static long nonblock_room(struct write_op *op)
{
	struct pollfd pfd = { .fd = op->wfd, .events = POLLOUT };
	struct timespec zero = { 0, 0 };
	long n = PP_SYSCALL(SYS_ppoll, &pfd, 1, &zero, NULL, 8);

	if (n == 1 && (pfd.revents & (POLLERR | POLLNVAL)))
		return -EAGAIN;
	if (n == 1 && (pfd.revents & POLLOUT))
		return 0;
	return nonblock_still(op) ? -EAGAIN : 0;
}

/*
 * An accelerated write that moved nothing: the real call does it (the fd
 * lost its file under us, no pin, a signal in the turn wait, a full
 * non-blocking pipe, or @stopped: why the ring took nothing), else the
 * error as write() gives it.
 */
static ssize_t nothing_moved(struct write_op *op, long ret, const char *stopped)
{
	struct pp_pipe *p = op->p;

	if (ret == -ESTALE)
		return fall_back(p, "fd closed during the write");
	if (ret == PP_NO_PIN)
		return fall_back(p, "no fd to hold the write's file");
	if (ret == PP_TURN_INTR)
		return fall_back(p, "a signal ended the wait for the pipe's turn");
	/*
	 * A non-blocking write into a full pipe: the real call says EAGAIN,
	 * and wakes the readers as only the kernel's write does then (an
	 * edge-triggered epoll reader sees it).
	 */
	if (ret == -EAGAIN && op->nonblock)
		return fall_back(p, "non-blocking write end, pipe full");
	if (ret >= 0)
		return fall_back(p, pp_pipe_unsafe(p) ? "readers no longer known" : stopped);
	return ret;
}

/* An accelerated write of op->done bytes, @vmspliced of them by vmsplice, ended at @now. */
static void op_counted(const struct write_op *op, size_t vmspliced, uint64_t now)
{
	struct pp_pipe *p = op->p;

	pp_count(&p->cnt, PP_CNT_writes_accelerated, 1);
	pp_count(&p->cnt, PP_CNT_bytes_accelerated, op->done);
	pp_count(&p->cnt, PP_CNT_bytes_vmspliced, vmspliced);
	if (op->nonblock)
		pp_count(&p->cnt, PP_CNT_writes_nonblocking, 1);
	if (op->t0)
		pp_latency_record(&pp_latency_all, now - op->t0);
}

/*
 * Whether the write end is non-blocking, or -errno when the write must
 * take the real call (packet mode; not open for writing; F_GETFL failed).
 * The pipe's state follows O_NONBLOCK of the open file pipe() made; an fd
 * learned otherwise (reopened, a pipe we did not create: fdlearn.h) may
 * name another open file, which anyone may share: the kernel
 * is asked each time (nonblock_plan needs the kernel's partial counts),
 * and its access mode with it, so that no fd open only for reading ever
 * reaches vmsplice(), which would move bytes out of the pipe.
 */
static int write_end_nonblock(struct pp_pipe *p, int fd, const char **why)
{
	long fl;

	if (p->created_here && !pp_fdt_asks_flags(fd))
		return pp_pipe_nonblock(p);
	fl = pp_sys_fcntl(fd, F_GETFL, 0);
	if (fl < 0) {
		*why = NULL;
		return -EBADF;
	}
	if (!pp_file_writable(fl)) {
		*why = "fd not open for writing";
		return -EBADF;
	}
	if (fl & O_DIRECT) {
		*why = "packet mode (O_DIRECT)";
		return -EINVAL;
	}
	return (fl & O_NONBLOCK) != 0;
}

/*
 * The reuse rule counts every push of a ring as one into its pipe, and an
 * identity check proves that only of the fd it asks (ring.c). So when a
 * write comes through another fd of the pipe than the ring's last one,
 * both are asked before it pushes: the last one, unless libppipe saw it
 * closed or replaced since (its epoch moved: what it pushed went in while
 * it named the pipe, as far as anyone can tell), then the new one. One fd
 * of a pipe switched to another pipe behind libppipe's back (a raw dup3)
 * is then seen before a check of another fd could vouch for its pushes,
 * and the pages it pushed there are never written again. A write through
 * the same fd as the last costs a comparison.
 */
bool pp_core_writer(struct pp_ring *r, int fd, uint32_t epoch, uint64_t ino,
		    struct pp_ring_checks *c)
{
	uint64_t now;

	if (likely(r->writer_fd == fd && r->writer_epoch == epoch))
		return true;
	if (r->writer_fd >= 0 && pp_fdt_epoch(r->writer_fd) == r->writer_epoch) {
		c->identity++;
		if (pp_sys_pipe_ino(r->writer_fd, &now) || now != ino)
			return false;
	}
	c->identity++;
	if (pp_sys_pipe_ino(fd, &now) || now != ino)
		return false;
	r->writer_fd = fd;
	r->writer_epoch = epoch;
	return true;
}

ssize_t pp_core_write(struct pp_pipe *p, int fd, const struct iovec *iov, int iovcnt, size_t total,
		      const struct pp_outlet_ops *ops)
{
	struct write_op op = { .p = p,
			       .fd = fd,
			       .wfd = fd,
			       .pin = -1,
			       .epoch = pp_fdt_epoch(fd),
			       /* Latency: for a report or the counters file's seconds. */
			       .t0 = pp_cfg.stats[0] || pp_cfg.counters[0] ? pp_now_ns() : 0 };
	struct pp_ring_checks checks = { 0 };
	unsigned int vflags = SPLICE_F_NONBLOCK;
	uint64_t now;
	const char *stopped = "ring still referenced"; /* if nothing moved */
	uint32_t capacity;
	struct pp_ring *r;
	size_t off = 0, body = total, page = pp_page_size(), vmspliced;
	int idx = 0;
	long ret;

	pp_mark_used(PP_USED_ENGINE);
	/* The inode every check of the fd compares against: pipe() did not ask. */
	if (unlikely(!pp_pipe_ino(p)) && !pp_fdt_learn_ino(p, fd))
		return decline(p, "its inode could not be had");
	/* While another thread runs the start-up probe, this write just takes the real call. */
	if (!pp_engine_ready())
		return pp_engine_decided() ? decline(p, pp_engine_reason()) :
					     fall_back(p, "start-up probe still running");
	if (pp_pipe_unsafe(p))
		return fall_back(p, "readers no longer known");
	/*
	 * Whether the write end is non-blocking: its partial counts must be
	 * the kernel's (nonblock_plan). Pipes we did not create may share
	 * their open file with anyone: ask the kernel each time.
	 */
	{
		const char *why = "";
		int nb = write_end_nonblock(p, fd, &why);

		if (nb < 0)
			return why ? decline(p, why) : fall_back(p, "F_GETFL failed");
		op.nonblock = nb;
	}
	if (op.nonblock && (ret = nonblock_plan(p, fd, total, ops != NULL, &body)))
		return ret;
	/* pipe() does not ask: most pipes never see a large write. */
	capacity = pp_pipe_capacity(p, fd);
	if (ops) {
		/* The engine's outlet for this write (write-behind: the pipe's stage). */
		op.out.ops = ops;
		ret = ops->begin(&op.out, p, fd);
		if (ret == PP_DECLINE)
			return decline(p, op.out.why);
		if (ret)
			return ret;
		if (op.out.st) {
			op.wfd = op.out.in_fd;
			capacity += op.out.capacity;
		}
	}
	r = pp_ring_get(&p->rings, &p->gen, capacity);
	if (!r) {
		op_end_outlet(&op);
		/* Writes that get no ring still look after the idle rings, and PSI. */
		maybe_trim(pp_now_ns());
		return decline(p, "no ring: pool cap reached or mapping failed");
	}
	if (__atomic_exchange_n(&r->busy, 1, __ATOMIC_ACQUIRE)) {
		op_end_outlet(&op);
		return fall_back(p, "ring in use: a span open, or a signal handler inside a write");
	}
	/* Pushes straight into the pipe through @fd (an outlet's go through its own fd). */
	if (!op.out.st && !pp_core_writer(r, fd, op.epoch, pp_pipe_ino(p), &checks)) {
		__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
		op_end_outlet(&op);
		pp_count(&p->cnt, PP_CNT_identity_checks, checks.identity);
		pp_pipe_mark_unsafe(p, "fd switched to another file behind libppipe");
		return fall_back(p, "fd switched to another file behind libppipe");
	}
	op.r = r;
	/* The huge-page verdict is measured in writes' time: see thp.c. */
	if (!op.t0 && r->thp && pp_thp_timing())
		op.t0 = pp_now_ns();
	/* Without the fault guard, check the source ranges by system call. */
	if (!pp_faultguard_ready() && !source_readable(iov, iovcnt)) {
		__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
		op_end_outlet(&op);
		pp_count(&p->cnt, PP_CNT_efaults, 1);
		return fall_back(p, "source buffer faulted");
	}

	ret = 0;
	while (op.done < body) {
		size_t chunk = body - op.done;
		long roff;

		if (chunk > r->max_chunk)
			chunk = r->max_chunk;
		if (op.nonblock) {
			/* Whole pages, and never more than the pipe holds. */
			if (capacity && chunk > capacity)
				chunk = capacity;
			chunk &= ~(page - 1);
			if (op.done && (ret = nonblock_room(&op)))
				break;
		}
		/* The reuse checks ask the file too: after a first call, the pinned one. */
		if (op.calls && !op.out.st && (ret = op_ensure_pin(&op)))
			break;
		/*
		 * The pinned file is the pipe (op_pin() checked it): the reuse
		 * rule's identity check of it would only say so again. The first
		 * region of every write still asks the fd itself (ring.c).
		 */
		if (op.pin >= 0 && op.wfd == op.pin)
			pp_ring_verified(r);
		roff = op.out.st ? pp_ring_reserve(r, chunk, op.out.pipe_fd, op.out.in_fd,
						   pp_pipe_ino(p), capacity, &checks) :
				   pp_ring_reserve(r, chunk, op.wfd, -1, pp_pipe_ino(p), capacity,
						   &checks);
		if (roff == -ESTALE) {
			/*
			 * The fd was switched to another object behind our
			 * back: what the ring pushed since is unaccounted,
			 * so no page of it may be written again.
			 */
			pp_pipe_mark_unsafe(p, "fd switched to another file behind libppipe");
			break;
		}
		if (roff < 0) {
			pp_count(&p->cnt, PP_CNT_ring_waits, 1);
			break;
		}
		/*
		 * After the reuse verdict, before overwriting: a reader that
		 * turned unknown after the pages were consumed is seen here.
		 */
		if (pp_pipe_unsafe(p))
			break;
		if (pp_faultguard_ready()) {
			int cidx = idx;
			size_t coff = off;

			if (pp_copy_guarded(r->data + roff, iov, &idx, &off, chunk)) {
				/* The real call answers for the rest, as the kernel would. */
				pp_count(&p->cnt, PP_CNT_efaults, 1);
				stopped = "source buffer faulted";
				idx = cidx;
				off = coff;
				break;
			}
		} else {
			pp_copy_iov(r->data + roff, iov, &idx, &off, chunk);
		}
		op.roff = (size_t)roff;
		op.pushed = 0;
		op.in_region = true;
		ret = push_region(&op, chunk, &vflags);
		op_give_turn(&op);
		if (ret == PP_DECLINE) {
			op.in_region = false;
			op_release_ring(&op, pp_now_ns());
			op_end_outlet(&op);
			/* A retry after a wait may be refused too: its pin goes with it. */
			op_unpin(&op);
			return decline(p, "vmsplice refused the fd");
		}
		pp_ring_commit(r, op.roff, op.pushed);
		op.done += op.pushed;
		op.in_region = false;
		if (ret || op.pushed < chunk)
			break;
	}
	/* One clock read serves the idle time, the latency and the trim check. */
	now = pp_now_ns();
	if (r->thp && op.done)
		pp_ring_account(r, op.t0 && pp_thp_timing() ? now - op.t0 : 0, op.done);
	if (op.done)
		pp_turn_account(&p->turn, pp_pipe_ino(p), op.done, now);
	op_release_ring(&op, now);
	pp_count(&p->cnt, PP_CNT_fionread_checks, checks.fionread);
	pp_count(&p->cnt, PP_CNT_identity_checks, checks.identity);

	/*
	 * Nothing moved: the real call does the write (the fd lost its file
	 * under us, no pin, or the ring is still referenced), else the error
	 * as write() gives it. Bytes moved: the count.
	 */
	if (!op.done) {
		op_unpin(&op);
		op_end_outlet(&op);
		return nothing_moved(&op, ret, stopped);
	}
	vmspliced = op.done;
	if ((ret == 0 || ret == PP_NO_PIN) && op.done < total) {
		if (ret == PP_NO_PIN)
			pp_count(&p->cnt, PP_CNT_fallbacks, 1);
		/*
		 * The ring could not take the rest: the real call writes it,
		 * after what the outlet holds, through its own fd.
		 */
		if (op.out.st) {
			op.out.ops->settle(&op.out);
			op.wfd = op.out.pipe_fd;
		}
		ssize_t n = rest_cancellable(&op, iov, iovcnt, idx, off);

		if (n > 0)
			op.done += (size_t)n;
		now = pp_now_ns();
	}
	op_unpin(&op);
	op_end_outlet(&op);
	op_counted(&op, vmspliced, now);
	maybe_trim(now);
	return (ssize_t)op.done;
}

ssize_t pp_core_commit(struct pp_pipe *p, int fd, struct pp_ring *r, size_t off, size_t n,
		       unsigned int *span_kind)
{
	struct write_op op = { .p = p,
			       .r = r,
			       .fd = fd,
			       .wfd = fd,
			       .pin = -1,
			       .epoch = pp_fdt_epoch(fd),
			       .roff = off,
			       .in_region = true,
			       .span_kind = span_kind,
			       .t0 = pp_cfg.stats[0] || pp_cfg.counters[0] ? pp_now_ns() : 0 };
	unsigned int vflags = SPLICE_F_NONBLOCK;
	const char *why = "";
	size_t body = n;
	uint64_t now;
	long ret;
	int nb;

	/* Below the threshold a plain write may merge into the last buffer: the real call. */
	if (n < pp_cfg.min_write || !pp_engine_ready())
		return fall_back(p, "span commit below PPIPE_MIN_WRITE, or no engine");
	if (pp_pipe_unsafe(p))
		return fall_back(p, "readers no longer known");
	nb = write_end_nonblock(p, fd, &why);
	if (nb < 0)
		return why ? decline(p, why) : fall_back(p, "F_GETFL failed");
	op.nonblock = nb;
	/*
	 * A non-blocking rest from inside a page (a partial commit before
	 * it): vmsplice would fill the pipe's free slots with part pages and
	 * stop short of write()'s count. The real call gives it exactly.
	 */
	if (op.nonblock && (off & (pp_page_size() - 1)))
		return fall_back(p, "non-blocking span rest from inside a page");
	if (op.nonblock && (ret = nonblock_plan(p, fd, n, false, &body)))
		return ret;
	ret = push_region(&op, body, &vflags);
	op_give_turn(&op);
	/* The span keeps its region: the caller moves the ring's head when it closes. */
	op.in_region = false;
	op.done = op.pushed;
	if (ret == PP_DECLINE) {
		op_unpin(&op);
		return decline(p, "vmsplice refused the fd");
	}
	if (!op.done) {
		op_unpin(&op);
		return nothing_moved(&op, ret, "ring still referenced");
	}
	/* A non-blocking span's unaligned tail: the real call, into a pipe that was empty. */
	if ((ret == 0 || ret == PP_NO_PIN) && op.done < n) {
		struct iovec tail = { r->data + off + op.done, n - op.done };
		ssize_t t = rest_cancellable(&op, &tail, 1, 0, 0);

		if (t > 0)
			op.done += (size_t)t;
	}
	op_unpin(&op);
	now = pp_now_ns();
	pp_turn_account(&p->turn, pp_pipe_ino(p), op.done, now);
	pp_count(&p->cnt, PP_CNT_span_commits, 1);
	op_counted(&op, op.pushed, now);
	return (ssize_t)op.done;
}

/* The engine in use; init.c chooses it before the first write. */
PP_HOT const struct pp_engine_ops *pp_engine = &pp_engine_vmsplice;
PP_HOT int pp_engine_live;

/* The vmsplice engine: every page straight into the pipe; it holds nothing, so no hook ever runs. */
static ssize_t vmsplice_write(struct pp_pipe *p, int fd, const struct iovec *iov, int iovcnt,
			      size_t total)
{
	return pp_core_write(p, fd, iov, iovcnt, total, NULL);
}

static int flush_nothing(struct pp_pipe *p, bool signals)
{
	(void)p;
	(void)signals;
	return 0;
}

static int holds_nothing(struct pp_pipe *p)
{
	(void)p;
	return 0;
}

static void settle_nothing(struct pp_pipe *p)
{
	(void)p;
}

static int close_nothing(struct pp_pipe *p, bool last)
{
	(void)p;
	(void)last;
	return 0;
}

static bool owns_no_fd(unsigned int lo, unsigned int hi)
{
	(void)lo;
	(void)hi;
	return false;
}

static void nothing(void)
{
}

static void exec_nothing(bool bounded)
{
	(void)bounded;
}

static const char *no_state(void)
{
	return NULL;
}

const struct pp_engine_ops pp_engine_vmsplice = {
	.name = "vmsplice",
	.write = vmsplice_write,
	.flush = flush_nothing,
	.flush_nowait = holds_nothing,
	.take_error = holds_nothing,
	.settle = settle_nothing,
	.close_end = close_nothing,
	.fds_closing = owns_no_fd,
	.fork_prepare = nothing,
	.fork_child = nothing,
	.exec = exec_nothing,
	.flush_all = nothing,
	.state = no_state,
};
