// SPDX-License-Identifier: MIT
#include "fdlearn.h"

#include "config.h"
#include "exec.h"
#include "fdtable.h"
#include "pipe.h"
#include "sys.h"
#include "vfork.h"

#include <fcntl.h>

/*
 * Another fd of a pipe this process made or was handed: it joins the
 * pipe's object as what its access mode makes it. Its open file may be
 * another than the one pipe() made (a reopen), so its writes ask the
 * kernel for its flags. Those objects are all pipes of pipefs, whose
 * inode numbers are unique among live pipes; a pipe adopted under trust
 * may be a FIFO, whose number is its file system's, and is not looked at.
 */
static struct pp_pipe *own_pipe(int fd, uint64_t ino, enum pp_end end)
{
	struct pp_pipe *p = pp_fdt_find_ino(ino);

	if (p && !p->created_here) {
		pp_pipe_leave(p);
		p = NULL;
	}
	if (p)
		pp_fdt_set(fd, p, end, true);
	return p;
}

/*
 * PPIPE_READERS=trust: a pipe this process did not create (inherited, a
 * FIFO) is tracked from the first fd of it that needs it. Its fds ask the
 * kernel for their flags at each large write (created_here is false).
 */
static struct pp_pipe *adopt(int fd, uint64_t ino, enum pp_end end)
{
	struct pp_pipe *p;
	long cap = 0;

	if (end == PP_END_WRITE)
		cap = pp_sys_fcntl(fd, F_GETPIPE_SZ, 0);
	p = pp_pipe_new(ino, false, cap > 0 ? (int)cap : 0);
	if (!p)
		return NULL;
	p->accel = true;
	p->reason = "PPIPE_READERS=trust";
	pp_fdt_set(fd, p, end, true);
	return pp_fdt_enter(fd, &end);
}

struct pp_pipe *pp_fd_learn(int fd, enum pp_end *end, enum pp_learn why)
{
	bool trust = why != PP_LEARN_FLAGS && pp_cfg.readers == PP_READERS_TRUST &&
		     (why != PP_LEARN_WRITE || pp_fd_selected(fd));
	bool own = why != PP_LEARN_FLAGS && pp_pipes_live() > 0, tree;
	struct pp_pipe *p = NULL;
	uint64_t ino;
	long fl;

	if (pp_in_vfork_child() || (!trust && !own && !pp_exec_may_take_over()))
		return NULL;
	if (pp_fdt_init() || pp_fdt_is_plain(fd))
		return NULL;
	if (pp_sys_pipe_ino(fd, &ino)) {
		pp_fdt_mark_plain(fd);
		return NULL;
	}
	fl = pp_sys_fcntl(fd, F_GETFL, 0);
	if (fl < 0)
		return NULL; /* closed under us: the real call says so */
	*end = pp_file_writable(fl) ? PP_END_WRITE : PP_END_READ;
	/* A FIFO is never a pipe made in the tree, whatever its inode number. */
	tree = (own || pp_exec_may_take_over()) && pp_sys_anon_pipe(fd);
	if (tree)
		p = pp_exec_take_over(fd, ino, fl, *end);
	if (!p && tree && own)
		p = own_pipe(fd, ino, *end);
	if (!p && trust)
		p = adopt(fd, ino, *end);
	/*
	 * Nothing will take it, for the fd's life: the pipes this image was
	 * handed are all claimed at start-up, and its own have their inodes.
	 * Under trust only a write learns that for good (an fd not in
	 * PPIPE_FDS): a splice before must not keep a FIFO's write end from
	 * its first large write.
	 */
	if (!p && (!trust || why == PP_LEARN_WRITE))
		pp_fdt_mark_plain(fd);
	return p;
}
