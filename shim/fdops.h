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
/*
 * A stdio stream's fd is about to be closed or replaced inside libc
 * (fclose, freopen): libppipe forgets it, as at close().
 */
void pp_stream_closing(void *stream);
void pp_closefrom(int low);
/*
 * Before a write end's file changes (F_SETFL, F_SETPIPE_SZ): what
 * write-behind staged for the pipe goes first while it moves (stage.h).
 * Nothing when write-behind never ran.
 */
void pp_settle_write_end(int fd);
/* pp_splice_into()'s @in for vmsplice(): its flags alone say whether it blocks. */
#define PP_SPLICE_VMSPLICE (-1)
/* pp_splice_into()'s @in for sendfile(): @out's O_NONBLOCK alone says so. */
#define PP_SPLICE_SENDFILE (-2)
/*
 * Before splice(), tee(), vmsplice() or sendfile() put bytes into @out, a
 * write end whose pipe may have bytes staged by write-behind: they go
 * first, as before a small write. A call that blocks waits until they are
 * in; a non-blocking one (SPLICE_F_NONBLOCK in @flags, or O_NONBLOCK on
 * @out or on @in when that is a pipe, as the kernel decides) never waits
 * and gets -EAGAIN while any is staged. Returns 0 to go on with the call, or
 * the -errno it returns instead (an error the staged bytes met: reported
 * once, with its SIGPIPE). Keeps errno. Nothing when write-behind never ran.
 */
int pp_splice_into(int out, int in, unsigned int flags);
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
