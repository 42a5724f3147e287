/* SPDX-License-Identifier: MIT */
/*
 * vfork() children. A child made by vfork() runs on its parent's memory
 * until it execs or exits, and runs no fork handler: whatever libppipe's
 * interposers do there (close, dup2, write...) would change the parent's
 * fd table, pipes and rings. So vfork is interposed to record the pid and
 * raise a per-thread flag (the child shares the parent's thread-local
 * storage), and while it is up, each interposer asks the kernel whether
 * this is the parent (which lowers the flag) or the child (which then
 * only makes real calls). Threads that never vfork pay one thread-local
 * load. (A CLONE_VM child made by clone() directly is not told apart;
 * libc's own, posix_spawn's, run none of libppipe's code.)
 *
 * Layer: base (may use: base).
 */
#ifndef PP_VFORK_H
#define PP_VFORK_H

#include "compiler.h"

#include <stdbool.h>

extern __thread int pp_tl_vfork __attribute__((tls_model("initial-exec")));

/*
 * Called by the vfork() interposer just before libc's vfork: records this
 * process's pid and raises the calling thread's flag.
 */
void pp_vfork_raise(void);
/* Slow path of pp_in_vfork_child. */
bool pp_vfork_check(void);

/* True in a vfork child that has not exec'd yet. */
static inline bool pp_in_vfork_child(void)
{
	return unlikely(pp_tl_vfork) && pp_vfork_check();
}

#endif
