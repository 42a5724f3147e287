// SPDX-License-Identifier: MIT
#include "fdops.h"

#include "compiler.h"
#include "config.h"
#include "engine.h"
#include "fdlearn.h"
#include "fdtable.h"
#include "log.h"
#include "pipe.h"
#include "readers.h"
#include "real.h"
#include "sys.h"
#include "vfork.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Starts tracking a pipe pipe()/pipe2() just made. */
static void track_new_pipe(const int fds[2], int flags)
{
	struct pp_pipe *p;

	if (!pp_active() || (flags & O_DIRECT) || pp_in_vfork_child() || pp_fdt_init())
		return;
	if (!pp_fd_selected(fds[1]))
		return;
	/*
	 * No system call: the inode and the capacity wait until the pipe
	 * needs them (its first large write, or crossing into another
	 * process). Most pipes never do.
	 */
	p = pp_pipe_new(0, true, 0);
	if (!p)
		return;
	p->accel = true;
	p->reason = "created here, readers known";
	if (flags & O_NONBLOCK)
		pp_pipe_set_nonblock(p, true);
	if (!pp_fdt_set_new(fds, p))
		pp_pipe_discard(p);
}

PP_COMMON int pp_pipe2(int fds[2], int flags)
{
	int r = real_pipe2(fds, flags);

	/* No system call there but the first pipe's mmap, which keeps errno. */
	if (!r)
		track_new_pipe(fds, flags);
	return r;
}

/*
 * @fd is about to be closed or replaced. An engine that holds bytes for
 * the pipe (write-behind) delivers them behind the close, and gives up
 * what would hold up the readers' EOF when it was the last write end; an
 * fd that is one of the engine's own goes the same way. Returns the
 * deferred error (-errno), or 0.
 */
PP_COMMON static int closing_pipe(int fd)
{
	enum pp_end end;
	struct pp_pipe *p = pp_fdt_enter(fd, &end);
	int e = 0;

	if (!p)
		return 0;
	if (end == PP_END_WRITE && pp_engine_holds(p))
		e = pp_engine->close_end(p, __atomic_load_n(&p->wfd_refs, __ATOMIC_RELAXED) <= 1);
	pp_pipe_leave(p);
	return e;
}

PP_COMMON static int closing(int fd)
{
	if (likely(!pp_engine_hooks()) || pp_in_vfork_child() || fd < 0)
		return 0;
	if (pp_engine->fds_closing((unsigned int)fd, (unsigned int)fd))
		return 0;
	return closing_pipe(fd);
}

#define SPLICE_FLAGS_KNOWN (SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT)

/* Whether the kernel puts bytes from @in into the pipe of @out without waiting (fdops.h). */
static bool splice_nonblocking(int out, int in, unsigned int flags)
{
	uint64_t ino;
	long fl;

	if (flags & SPLICE_F_NONBLOCK)
		return true;
	if (in == PP_SPLICE_VMSPLICE)
		return false;
	if ((fl = pp_sys_fcntl(out, F_GETFL, 0)) >= 0 && (fl & O_NONBLOCK))
		return true;
	return in >= 0 && (fl = pp_sys_fcntl(in, F_GETFL, 0)) >= 0 && (fl & O_NONBLOCK) &&
	       !pp_sys_pipe_ino(in, &ino);
}

/* How what write-behind staged goes first: while it moves, until it is in, or as a splice. */
enum staged_wait { STAGED_SETTLE, STAGED_FLUSH, STAGED_SPLICE };

/*
 * What write-behind staged for @fd's pipe goes first, as @how says (for
 * STAGED_SPLICE, @in and @flags decide whether the call may wait at all).
 * Returns the error the staged bytes met (reported, with its SIGPIPE) or
 * -EAGAIN, else 0; STAGED_SETTLE leaves the error for the next write.
 * Keeps errno.
 */
static int staged_first(int fd, enum staged_wait how, int in, unsigned int flags)
{
	int saved = errno, e = 0;
	enum pp_end end;
	struct pp_pipe *p;

	if (likely(!pp_engine_hooks()) || pp_in_vfork_child())
		return 0;
	if (fd < 0) {
		pp_engine->flush_all();
	} else if ((p = pp_fdt_enter(fd, &end))) {
		if (end == PP_END_WRITE && pp_engine_holds(p)) {
			if (how == STAGED_SETTLE)
				pp_engine->settle(p);
			else if (how == STAGED_SPLICE && splice_nonblocking(fd, in, flags))
				e = pp_engine->flush_nowait(p);
			else
				e = pp_engine->flush(p, how == STAGED_SPLICE);
		}
		pp_pipe_leave(p);
	}
	errno = saved;
	return e;
}

PP_COMMON void pp_settle_write_end(int fd)
{
	if (fd >= 0)
		staged_first(fd, STAGED_SETTLE, -1, 0);
}

PP_COMMON void pp_flush_write_end(int fd)
{
	staged_first(fd, STAGED_FLUSH, -1, 0);
}

PP_COMMON int pp_splice_into(int out, int in, unsigned int flags)
{
	/* Unknown flags: the kernel refuses the call before it looks at the pipe. */
	if (out < 0 || (flags & ~(unsigned int)SPLICE_FLAGS_KNOWN))
		return 0;
	return staged_first(out, STAGED_SPLICE, in, flags);
}

PP_COMMON int pp_close(int fd)
{
	int e = closing(fd), r;

	/* Forget first: a racing write then simply takes the real call. */
	if (!pp_in_vfork_child())
		pp_fdt_clear(fd);
	r = real_close(fd);
	/* The fd is closed either way; the error is the held bytes' (engine.h). */
	if (e && r == 0) {
		errno = -e;
		return -1;
	}
	return r;
}

PP_COMMON int pp_dup(int fd)
{
	int r = real_dup(fd);

	if (r >= 0 && !pp_in_vfork_child())
		pp_fdt_dup(fd, r);
	return r;
}

/*
 * An fd the table does not know put over one it does (a shell's `cmd <
 * /dev/stdin` reopens the pipe it replaces): learned first, so that the
 * copy is what it is (readers.h). One load of each entry otherwise.
 */
static inline void learn_over(int fd, int fd2)
{
	if (unlikely(pp_fdt_tracked(fd2)) && fd != fd2 && !pp_fdt_tracked(fd))
		pp_readers_learn(fd);
}

/*
 * dup2()/dup3() close @fd2 inside the kernel: its epoch moves first, so a
 * write in flight on @fd2 never takes the new file for the old one.
 */
PP_COMMON int pp_dup2(int fd, int fd2)
{
	int r;

	if (pp_in_vfork_child())
		return real_dup2(fd, fd2);
	learn_over(fd, fd2);
	if (fd != fd2)
		closing(fd2); /* an error there has no call left to report it */
	pp_fdt_invalidate(fd2);
	r = real_dup2(fd, fd2);
	if (r >= 0)
		pp_fdt_dup(fd, r);
	return r;
}

PP_COMMON int pp_dup3(int fd, int fd2, int flags)
{
	int r;

	if (pp_in_vfork_child())
		return real_dup3(fd, fd2, flags);
	learn_over(fd, fd2);
	if (fd != fd2)
		closing(fd2);
	pp_fdt_invalidate(fd2);
	r = real_dup3(fd, fd2, flags);
	if (r >= 0)
		pp_fdt_dup(fd, r);
	return r;
}

PP_COMMON int pp_fcntl(int fd, int cmd, unsigned long arg)
{
	int r, saved;

	if (cmd == F_SETFL || cmd == F_SETPIPE_SZ)
		pp_settle_write_end(fd);
	r = real_fcntl(fd, cmd, arg);
	saved = errno;
	enum pp_end end;
	struct pp_pipe *p;

	if (r < 0 || pp_in_vfork_child())
		return r;
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		pp_fdt_dup(fd, r);
		break;
	case F_SETFL:
		p = pp_fdt_enter(fd, &end);
		if (!p)
			p = pp_fd_learn(fd, &end, PP_LEARN_FLAGS);
		if (!p)
			break;
		/* Packet mode: vmspliced buffers would lose the packet flag. */
		if (arg & O_DIRECT)
			pp_pipe_mark_unsafe(p, "packet mode (O_DIRECT)");
		if (end == PP_END_WRITE)
			pp_pipe_set_nonblock(p, arg & O_NONBLOCK);
		pp_pipe_leave(p);
		break;
	case F_SETPIPE_SZ:
	case F_GETPIPE_SZ:
		p = pp_fdt_enter(fd, &end);
		if (p) {
			pp_pipe_note_capacity(p, r);
			pp_pipe_leave(p);
		}
		break;
	default:
		break;
	}
	errno = saved;
	return r;
}

/*
 * The fds [@first, @last] are about to be closed: each goes as close()
 * would have it go, one after the other, so that the engine sees which
 * one is a pipe's last write end (all hooks first, then all entries,
 * and two write ends of one pipe in the range each looked like one of
 * two: a write-behind stage was never retired, and held its slot and
 * fds for the life of the process).
 */
static void range_closing(unsigned int first, unsigned int last)
{
	unsigned int top = (unsigned int)pp_fdt_top();
	bool hooks = pp_engine_hooks();

	if (hooks)
		pp_engine->fds_closing(first, last);
	for (unsigned int fd = first; fd <= last && fd < top; fd++) {
		if (hooks)
			closing_pipe((int)fd);
		pp_fdt_clear((int)fd);
	}
}

int pp_close_range(unsigned int first, unsigned int last, int flags)
{
	if (!(flags & CLOSE_RANGE_CLOEXEC) && !pp_in_vfork_child())
		range_closing(first, last);
	return real_close_range(first, last, flags);
}

void pp_closefrom(int low)
{
	if (!pp_in_vfork_child())
		range_closing(low > 0 ? (unsigned int)low : 0, ~0U);
	if (PP_REAL(closefrom))
		pp_real.closefrom(low);
	else
		syscall(SYS_close_range, (unsigned int)low, ~0U, 0);
}

int pp_ioctl_fionbio(int fd, const int *on)
{
	enum pp_end end;
	struct pp_pipe *p = pp_in_vfork_child() ? NULL : pp_fdt_enter(fd, &end);

	if (!p && !pp_in_vfork_child())
		p = pp_fd_learn(fd, &end, PP_LEARN_FLAGS);
	if (!p)
		return 0;
	if (end == PP_END_WRITE)
		pp_pipe_set_nonblock(p, *on != 0);
	pp_pipe_leave(p);
	return 0;
}

/*
 * fclose() closes its fd inside libc, out of our sight: forget it here
 * (what the stream holds follows the staged bytes: interpose_stdio.c).
 */
PP_COMMON void pp_stream_closing(void *stream)
{
	int fd = stream ? fileno((FILE *)stream) : -1;

	if (fd >= 0 && !pp_in_vfork_child()) {
		closing(fd); /* stdio reports no write error of ours */
		pp_fdt_clear(fd);
	}
}

PP_COMMON int pp_fclose(void *stream)
{
	pp_stream_closing(stream);
	return PP_REAL(fclose) ? pp_real.fclose(stream) : EOF;
}
