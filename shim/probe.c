// SPDX-License-Identifier: MIT
/*
 * The start-up probe: decides once whether the vmsplice engine can run.
 * It needs vmsplice to share pages (a kernel that turned vmsplice into a
 * copy would make libppipe pure overhead) and MADV_POPULATE_READ (5.14)
 * to check a caller's buffer before copying from it. Raw system calls
 * only: it runs from inside an interposed call.
 *
 * Layer: engine (may use: engine, pipes, resources, base).
 */
#include "engine.h"

#include "config.h"
#include "log.h"
#include "once.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

static int state = PP_ONCE_UNKNOWN; /* YES: the engine can run */
static const char *reason = "not probed yet";

static const char *run_probe(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	const char *why = NULL;
	struct iovec iov;
	char *buf, got = 0;
	int fds[2];
	long n;

	if (pp_cfg.mode == PP_MODE_OFF)
		return "PPIPE_MODE=off";
	buf = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return "cannot map a probe page";
	if (syscall(SYS_madvise, buf, page, MADV_POPULATE_READ)) {
		why = "no MADV_POPULATE_READ (Linux < 5.14): cannot check source buffers";
		goto out_unmap;
	}
	if (syscall(SYS_pipe2, fds, O_CLOEXEC)) {
		why = "cannot create a probe pipe";
		goto out_unmap;
	}
	memset(buf, 'A', page);
	iov = (struct iovec){ buf, page };
	n = syscall(SYS_vmsplice, fds[1], &iov, 1, 0);
	if (n != (long)page) {
		why = errno == ENOSYS || errno == EPERM ? "vmsplice is not allowed here" :
							  "vmsplice failed";
		goto out_close;
	}
	/* Change the page while the pipe holds it: shared pages show the change. */
	buf[0] = 'B';
	if (syscall(SYS_read, fds[0], &got, 1) != 1)
		why = "cannot read the probe pipe";
	else if (got != 'B')
		why = "vmsplice copies on this kernel: nothing to gain";
out_close:
	syscall(SYS_close, fds[0]);
	syscall(SYS_close, fds[1]);
out_unmap:
	munmap(buf, page);
	return why;
}

static void probe_told(const char *why)
{
	if (why)
		pp_debug("passthrough: %s", why);
}

bool pp_engine_ready(void)
{
	return pp_once_run(&state, &reason, run_probe, "vmsplice shares pages", probe_told);
}

bool pp_engine_decided(void)
{
	bool ok;

	return pp_once_decided(&state, &ok);
}

const char *pp_engine_name(void)
{
	bool ok;

	return pp_once_decided(&state, &ok) && ok ? "vmsplice" : "passthrough";
}

const char *pp_engine_reason(void)
{
	return __atomic_load_n(&reason, __ATOMIC_ACQUIRE);
}

void pp_engine_after_fork_child(void)
{
	/* A probe another thread was running did not come along: run it again. */
	if (__atomic_load_n(&state, __ATOMIC_RELAXED) == PP_ONCE_RUNNING)
		state = PP_ONCE_UNKNOWN;
}
