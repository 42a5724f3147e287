/* SPDX-License-Identifier: MIT */
/*
 * What PPIPE_DEBUG says about the write path: one line when a pipe first
 * takes a path in a process (accelerated, or plain and why), and one line
 * per kind of fallback per process. Lines go out through log.c (formatted
 * on the stack, one raw write), so a signal handler's write may print one.
 * Without PPIPE_DEBUG the cost is a flag check.
 *
 * Layer: engine (may use: engine, pipes, resources, base).
 */
#ifndef PP_EXPLAIN_H
#define PP_EXPLAIN_H

#include <sys/types.h>

struct pp_pipe;

/*
 * A write at or above PPIPE_MIN_WRITE to @p takes the real call because
 * of @kind ("ring still referenced"...): kept as the pipe's last
 * fallback, and said once per process and kind.
 */
void pp_explain_fallback(struct pp_pipe *p, const char *kind);

/*
 * A write at or above PPIPE_MIN_WRITE to @fd, the write end of @p, is
 * done: @r is what the engine returned (PP_DECLINE: the real call made
 * it). The first time in this process, says which path the pipe took.
 * Call only with PPIPE_DEBUG.
 */
void pp_explain_path(struct pp_pipe *p, int fd, ssize_t r);

/*
 * A write at or above PPIPE_MIN_WRITE to @fd, which is no pipe libppipe
 * tracks, took the real call: if @fd is a pipe this program inherited,
 * says once per pipe why it stays plain (@why, from exec.h). Call only
 * with PPIPE_DEBUG.
 */
void pp_explain_untracked(int fd, const char *why);

/* In a fork child: the child says everything once more, for itself. */
void pp_explain_after_fork_child(void);

#endif
