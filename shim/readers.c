// SPDX-License-Identifier: MIT
#include "readers.h"

#include "exec.h"
#include "fdtable.h"
#include "pipe.h"
#include "sys.h"

#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>

/* @fd's pipe, entered: tracked, or an inherited end taken over now. */
static struct pp_pipe *enter_any(int fd, enum pp_end *end)
{
	struct pp_pipe *p = pp_fdt_enter(fd, end);

	return p ? p : pp_exec_take_over(fd, end);
}

void pp_readers_before_splice(int fd)
{
	enum pp_end end;
	struct pp_pipe *p = enter_any(fd, &end);

	if (!p)
		return;
	if (end == PP_END_READ)
		pp_pipe_mark_unsafe(p, "spliced or teed out of");
	pp_pipe_leave(p);
}

void pp_readers_before_send(const struct msghdr *msg)
{
	struct cmsghdr *c;

	if (!msg || !msg->msg_control || msg->msg_controllen < sizeof(struct cmsghdr))
		return;
	for (c = CMSG_FIRSTHDR((struct msghdr *)msg); c; c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		const unsigned char *data = CMSG_DATA(c);
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			enum pp_end end;
			struct pp_pipe *p;
			int fd;

			memcpy(&fd, data + i * sizeof(int), sizeof(fd));
			p = enter_any(fd, &end);
			if (!p)
				continue;
			pp_pipe_mark_unsafe(p, "end sent to another process (SCM_RIGHTS)");
			pp_pipe_leave(p);
		}
	}
}
