/* SPDX-License-Identifier: MIT */
/*
 * Reader safety (docs/design.md, "The readers"). A pipe reuses pages only while every
 * process that holds its read end is known to copy what it reads. Pipes
 * created by pipe()/pipe2() here start out known: this process and its
 * fork children run libppipe, and programs they exec are followed through
 * the registry (exec.c: a pipe is pending until the new image confirms).
 * Three things make the readers unknown for good, and each marks the pipe
 * unsafe for every process of the tree, before the call that could let a
 * page escape:
 *   - an exec libppipe cannot describe (system(), popen(), no registry:
 *     exec.c's pp_exec_mark_inherited) while an end
 *     would be inherited: the new program may splice pages out, or switch
 *     the shared open file to O_NONBLOCK or packet mode unseen;
 *   - splice() or tee() from a read end in this process (both pass page
 *     references on instead of copying);
 *   - an end sent to another process with SCM_RIGHTS.
 * Fds of our pipes that the fd table did not see made (an end reopened
 * through /proc/self/fd, a dup made inside libc) are learned here first
 * (fdlearn.h), by inode.
 * An unsafe pipe takes the plain write path from then on; pages already
 * in it are never written again. io_uring's SPLICE and TEE operations are
 * not seen (README.md, "Limits").
 *
 * Layer: operations (may use: operations, engine, pipes, resources, base).
 */
#ifndef PP_READERS_H
#define PP_READERS_H

#include <stdbool.h>

struct msghdr;
/* Before sendmsg(): pipe ends passed with SCM_RIGHTS leave our sight. */
void pp_readers_before_send(const struct msghdr *msg);

/* Before splice()/tee() out of @fd. */
void pp_readers_before_splice(int fd);

/*
 * Before dup2()/dup3() of @fd over a tracked fd (a shell's `< /dev/stdin`):
 * an end of one of our pipes that reached this process out of sight
 * (reopened, duplicated inside libc) joins the fd table first, so that the
 * copy carries it, and an exec that hands it on charges it.
 */
void pp_readers_learn(int fd);

#endif
