/* SPDX-License-Identifier: MIT */
/*
 * The calls that create pipes or change what an fd number refers to.
 * Each makes the real call and keeps the fd cache in step with it.
 * Return values and errno are exactly the real call's.
 *
 * Layer: operations (may use: operations, engine, pipes, resources, base).
 */
#ifndef PP_FDOPS_H
#define PP_FDOPS_H

int pp_pipe2(int fds[2], int flags);
int pp_close(int fd);
int pp_dup(int fd);
int pp_dup2(int fd, int fd2);
int pp_dup3(int fd, int fd2, int flags);
int pp_fcntl(int fd, int cmd, unsigned long arg);
int pp_close_range(unsigned int first, unsigned int last, int flags);
int pp_fclose(void *stream);
void pp_closefrom(int low);
/*
 * Before a write end's file changes (F_SETFL, F_SETPIPE_SZ) or bytes reach
 * its pipe another way (splice, tee, vmsplice): what write-behind staged
 * for the pipe goes first (stage.h). Nothing when write-behind never ran.
 */
void pp_settle_write_end(int fd);
/*
 * Before stdio writes to @fd from inside libc, where libppipe cannot see
 * it (interpose_stdio.c): what write-behind staged for @fd's pipe goes
 * first, however long that takes, as before a small write; an error the
 * staged bytes met is reported as there (SIGPIPE) and the stdio call then
 * meets its own. @fd < 0: every stage (a flush of every stream). Keeps
 * errno. Nothing when write-behind never ran.
 */
void pp_flush_write_end(int fd);
/* After a successful ioctl(fd, FIONBIO, on). */
int pp_ioctl_fionbio(int fd, const int *on);

#endif
