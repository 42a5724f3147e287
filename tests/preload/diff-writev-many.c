// SPDX-License-Identifier: MIT
/*
 * diff-writev-many: a blocking writev of many iovecs into a pipe nobody
 * reads yet, larger than libppipe's ring (run with PPIPE_RING_SIZE=64K):
 * the part the ring cannot take must still be written in full, every
 * iovec of it, as writev() does for a blocking pipe with room.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

#define SEGS 300
#define SEG 3000

int main(void)
{
	static unsigned char data[SEGS * SEG];
	struct iovec iov[SEGS];
	struct t_reader rd;
	int p[2];
	ssize_t r;

	t_init("diff-writev-many");
	t_fill(data, sizeof(data), 7, 0);
	for (int i = 0; i < SEGS; i++)
		iov[i] = (struct iovec){ data + (size_t)i * SEG, SEG };
	t_pipe(p, O_CLOEXEC);
	t_log("F_SETPIPE_SZ 1M -> %d", t_pipe_size_set(p[1], 1 << 20));
	r = writev(p[1], iov, SEGS);
	t_log("writev %d x %d -> %s", SEGS, SEG, t_res(r, errno));
	t_reader_start(&rd, p[0], 65536, 7, 0, 0);
	t_close(p[0]);
	t_close(p[1]);
	t_reader_finish(&rd, "reader", r > 0 ? (uint64_t)r : 0);
	return t_finish();
}
