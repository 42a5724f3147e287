/* SPDX-License-Identifier: MIT */
/*
 * Reader safety (DESIGN.md 3). A pipe reuses pages only while every
 * process that holds its read end is known to copy what it reads. Pipes
 * created by pipe()/pipe2() here start out known: this process and its
 * fork children run libppipe. Three things make the readers unknown, and
 * each marks the pipe unsafe for every process of the tree, before the
 * call that could let a page escape:
 *   - exec or spawn while a read end would be inherited (the new program
 *     starts without our bookkeeping, so it may splice pages out), or a
 *     write end (it could switch the shared open file to O_NONBLOCK or
 *     packet mode without our seeing it);
 *   - splice() or tee() from a read end in this process (both pass page
 *     references on instead of copying).
 * An unsafe pipe takes the plain write path from then on; pages already
 * in it are never written again. io_uring's SPLICE and TEE operations are
 * not seen (see the README's limits).
 */
#ifndef PP_READERS_H
#define PP_READERS_H

#include <stdbool.h>

/*
 * Before an exec or spawn: marks every pipe whose read end this process
 * holds without FD_CLOEXEC (or at all, when @any_fd may be inherited, as
 * with spawn file actions) unsafe.
 */
void pp_readers_before_exec(bool any_fd);

struct msghdr;
/* Before sendmsg(): pipe ends passed with SCM_RIGHTS leave our sight. */
void pp_readers_before_send(const struct msghdr *msg);

/* Before splice()/tee() out of @fd. */
void pp_readers_before_splice(int fd);

#endif
