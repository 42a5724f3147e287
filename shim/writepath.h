/* SPDX-License-Identifier: MIT */
/*
 * write() and writev(): the only calls on the hot path. A write below
 * PPIPE_MIN_WRITE costs one comparison before the real call; a larger one
 * to an fd that is not a tracked pipe costs one array load more.
 */
#ifndef PP_WRITEPATH_H
#define PP_WRITEPATH_H

#include <sys/types.h>
#include <sys/uio.h>

ssize_t pp_write(int fd, const void *buf, size_t n);
ssize_t pp_writev(int fd, const struct iovec *iov, int iovcnt);

#endif
