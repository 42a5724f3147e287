// SPDX-License-Identifier: MIT
#include "vfork.h"

#include "syscall.h"

__thread int pp_tl_vfork __attribute__((tls_model("initial-exec")));
/* The pid of the process that last called vfork(), recorded just before. */
PP_HOT static long own_pid;

PP_COMMON bool pp_vfork_check(void)
{
	long pid = __atomic_load_n(&own_pid, __ATOMIC_RELAXED);

	if (pid && PP_SYSCALL(SYS_getpid) != pid)
		return true;
	pp_tl_vfork = 0; /* the parent, back from the child's exec or exit */
	return false;
}

PP_COMMON void pp_vfork_raise(void)
{
	__atomic_store_n(&own_pid, PP_SYSCALL(SYS_getpid), __ATOMIC_RELAXED);
	pp_tl_vfork = 1;
}
