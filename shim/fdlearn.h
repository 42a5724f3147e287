/* SPDX-License-Identifier: MIT */
/*
 * Learning what an fd is when the fd table has no entry for it: a pipe
 * end this process did not make with pipe() (handed on through exec, a
 * FIFO opened by path, an end reopened through /proc/self/fd or
 * /dev/stdin, one received with SCM_RIGHTS, a dup made inside libc).
 * What the fd is comes from the kernel, once, before anything acts on
 * it: the pipe's inode (fstat) and its open file's access mode and flags
 * (F_GETFL). An fd is a write end when its open file is open for
 * writing, never because of the kind of fd it usually is: vmsplice() on
 * an fd open only for reading moves bytes out of the pipe. What was
 * learned stays in the fd's entry for the fd's life (an open file's
 * access mode never changes), and an fd that is no pipe libppipe can
 * take is remembered as plain, so that a number is asked about once.
 *
 * Layer: operations (may use: operations, engine, pipes, resources, base).
 */
#ifndef PP_FDLEARN_H
#define PP_FDLEARN_H

#include "pipe.h"

/* Why an fd is being learned: what may come of it. */
enum pp_learn {
	/*
	 * A large write or a span: an end handed on through exec, an fd of a
	 * pipe this process tracks, or any pipe under PPIPE_READERS=trust.
	 */
	PP_LEARN_WRITE,
	/*
	 * Reader safety (splice, tee, SCM_RIGHTS, a dup2 over a tracked fd):
	 * the same, read ends included.
	 */
	PP_LEARN_READERS,
	/*
	 * F_SETFL, FIONBIO: only an end handed on through exec, whose open
	 * file other processes share (no system call otherwise).
	 */
	PP_LEARN_FLAGS,
};

/*
 * The pipe @fd refers to, entered (the caller leaves it), with @end set
 * from the fd's access mode, once @fd is in the fd table; NULL for any
 * other fd, at no system call where nothing could come of it. Call only
 * for an fd pp_fdt_enter() found no pipe for. Not in a vfork child.
 */
struct pp_pipe *pp_fd_learn(int fd, enum pp_end *end, enum pp_learn why);

#endif
