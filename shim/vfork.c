// SPDX-License-Identifier: MIT
#include "vfork.h"

#include "exec.h"
#include "fdtable.h"
#include "pipe.h"
#include "sys.h"

#include <dlfcn.h>
#include <unistd.h>

__thread int pp_tl_vfork __attribute__((tls_model("initial-exec")));
/* The pid of the process that last called vfork(), recorded just before. */
PP_HOT static long own_pid;

PP_HOT static void *real_vfork;

PP_COMMON bool pp_vfork_check(void)
{
	long pid = __atomic_load_n(&own_pid, __ATOMIC_RELAXED);

	if (pid && PP_SYSCALL(SYS_getpid) != pid)
		return true;
	pp_tl_vfork = 0; /* the parent, back from the child's exec or exit */
	return false;
}

/* Used when libc's vfork could not be found: fork() is a valid vfork(). */
PP_COMMON static pid_t vfork_fallback(void)
{
	return fork();
}

/*
 * Called by the trampoline below in the parent, just before libc's vfork:
 * raises the flag and returns where to jump. libc's vfork is looked up at
 * the first vfork, not at load.
 */
__attribute__((visibility("hidden"))) void *pp_vfork_enter(void);
PP_COMMON void *pp_vfork_enter(void)
{
	void *fn = __atomic_load_n(&real_vfork, __ATOMIC_ACQUIRE);

	if (!fn) {
		fn = dlsym(RTLD_NEXT, "vfork");
		if (!fn)
			fn = (void *)vfork_fallback;
		__atomic_store_n(&real_vfork, fn, __ATOMIC_RELEASE);
	}
	/* The child may exec with our pipe ends: their state must be where it can follow. */
	if (pp_pipes_live()) {
		pp_fdt_learn_all();
		pp_pipes_share_all();
		pp_exec_system_preload();
	}
	__atomic_store_n(&own_pid, PP_SYSCALL(SYS_getpid), __ATOMIC_RELAXED);
	pp_tl_vfork = 1;
	return fn;
}

/*
 * vfork itself cannot be wrapped by a C function: the child would return
 * through a frame the parent returns through again later. The trampoline
 * calls pp_vfork_enter() (a call that has returned before the vfork) and
 * jumps to libc's vfork, adding no frame of its own.
 */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	subq $8, %rsp\n" /* the call wants a 16-byte aligned stack */
	"	call pp_vfork_enter\n"
	"	addq $8, %rsp\n"
	"	jmp *%rax\n"
	".size vfork, .-vfork\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, %function\n"
	"vfork:\n"
	"	stp x29, x30, [sp, #-16]!\n"
	"	bl pp_vfork_enter\n"
	"	ldp x29, x30, [sp], #16\n"
	"	br x0\n"
	".size vfork, .-vfork\n");
#endif
