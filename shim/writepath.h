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

#include "compiler.h"
#include "config.h"
#include "exec.h"
#include "fdtable.h"
#include "pipe.h"

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

/*
 * Whether a large write to @fd may take libppipe's path: a tracked pipe,
 * or an fd libppipe may still learn about (inherited ends, trust mode,
 * PPIPE_DEBUG's explanations). One load of the fd's entry otherwise.
 */
static inline bool pp_write_may_matter(int fd)
{
	return pp_fdt_tracked(fd) || pp_exec_takeover_armed || pp_cfg.readers == PP_READERS_TRUST ||
	       unlikely(pp_cfg.debug);
}

ssize_t pp_write(int fd, const void *buf, size_t n);
ssize_t pp_writev(int fd, const struct iovec *iov, int iovcnt);
/*
 * Whether vmsplice(fd, @iov, @cnt) into a pipe would move bytes (and so
 * wait for room): false when the array's lengths add up to nothing or
 * the kernel refuses it before it looks at the pipe (an array it cannot
 * read, too many entries). Reads the array as the kernel does (faultguard.h).
 */
bool pp_iov_moves_bytes(const struct iovec *iov, size_t cnt);

/*
 * The pipe a large write to @fd would take libppipe's path for, entered
 * (the caller leaves it), and which end @fd is: a tracked pipe, an
 * inherited end taken over now, any pipe under PPIPE_READERS=trust. NULL
 * for any other fd. Spans (span.c) go where a write goes.
 */
struct pp_pipe *pp_write_enter(int fd, enum pp_end *end);

#endif
