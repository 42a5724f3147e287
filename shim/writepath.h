/* SPDX-License-Identifier: MIT */
/*
 * write() and writev(): the only calls on the hot path. Any write to an fd
 * that is not a tracked pipe costs one comparison and one array load
 * before the real call; one below PPIPE_MIN_WRITE to a tracked pipe two
 * relaxed atomic adds more (it is counted as passed through).
 *
 * Layer: operations (may use: operations, engine, pipes, resources, base).
 */
#ifndef PP_WRITEPATH_H
#define PP_WRITEPATH_H

#include <sys/types.h>
#include <sys/uio.h>

ssize_t pp_write(int fd, const void *buf, size_t n);
ssize_t pp_writev(int fd, const struct iovec *iov, int iovcnt);

#endif
