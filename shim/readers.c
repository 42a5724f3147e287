// SPDX-License-Identifier: MIT
#include "readers.h"

#include "faultguard.h"
#include "fdlearn.h"
#include "fdtable.h"
#include "pipe.h"
#include "sys.h"

#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>

/*
 * @fd's pipe, entered: tracked, or learned now (an inherited end, an end
 * of one of our pipes reopened or duplicated out of sight: fdlearn.h).
 */
static struct pp_pipe *enter_any(int fd, enum pp_end *end)
{
	struct pp_pipe *p = pp_fdt_enter(fd, end);

	return p ? p : pp_fd_learn(fd, end, PP_LEARN_READERS);
}

void pp_readers_before_splice(int fd)
{
	enum pp_end end;
	struct pp_pipe *p = enter_any(fd, &end);

	if (!p)
		return;
	/*
	 * Pages leave through any fd open for reading: a read end, or a
	 * write end opened O_RDWR (a FIFO, a reopen), which the kernel
	 * reads through as well.
	 */
	if (end == PP_END_READ || pp_file_readable(pp_sys_fcntl(fd, F_GETFL, 0)))
		pp_pipe_mark_unsafe(p, "spliced or teed out of");
	pp_pipe_leave(p);
}

void pp_readers_learn(int fd)
{
	enum pp_end end;
	struct pp_pipe *p;

	if (pp_fdt_tracked(fd) || pp_fdt_is_plain(fd))
		return;
	p = pp_fd_learn(fd, &end, PP_LEARN_READERS);
	if (p)
		pp_pipe_leave(p);
}

/* The fds a message hands on with SCM_RIGHTS, read as the kernel reads them. */
struct sent_fds {
	const struct msghdr *msg;
	int n;
	int fd[253]; /* the kernel's SCM_MAX_FD: a message with more is refused */
};

static void collect_sent(void *arg)
{
	struct sent_fds *s = arg;
	struct msghdr m = *s->msg; /* one read of the header: what follows is walked in a copy */
	struct cmsghdr *c;

	if (!m.msg_control || m.msg_controllen < sizeof(struct cmsghdr) ||
	    pp_user_bad(m.msg_control, m.msg_controllen))
		return;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		const unsigned char *data = CMSG_DATA(c);
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n && s->n < (int)(sizeof(s->fd) / sizeof(s->fd[0])); i++)
			memcpy(&s->fd[s->n++], data + i * sizeof(int), sizeof(int));
	}
}

void pp_readers_before_send(const struct msghdr *msg)
{
	struct sent_fds s = { .msg = msg };

	/*
	 * A header or control buffer that cannot be read is the kernel's
	 * EFAULT, and then nothing is sent: it is left to say so.
	 */
	if (!msg || pp_user_bad(msg, sizeof(*msg)) || pp_user_guarded(collect_sent, &s))
		return;
	for (int i = 0; i < s.n; i++) {
		enum pp_end end;
		struct pp_pipe *p = enter_any(s.fd[i], &end);

		if (!p)
			continue;
		pp_pipe_mark_unsafe(p, "end sent to another process (SCM_RIGHTS)");
		pp_pipe_leave(p);
	}
}
