// SPDX-License-Identifier: MIT
#include "vfork.h"

#include "sys.h"

#include <dlfcn.h>
#include <unistd.h>

__thread int pp_tl_vfork __attribute__((tls_model("initial-exec")));
static long own_pid;

/* Bound at load; the trampoline below jumps to it. */
__attribute__((visibility("hidden"))) void *pp_real_vfork;

void pp_vfork_note_pid(void)
{
	__atomic_store_n(&own_pid, PP_SYSCALL(SYS_getpid), __ATOMIC_RELAXED);
	if (!pp_real_vfork)
		pp_real_vfork = dlsym(RTLD_NEXT, "vfork");
}

bool pp_vfork_other_process(void)
{
	long pid = __atomic_load_n(&own_pid, __ATOMIC_RELAXED);

	return pid && PP_SYSCALL(SYS_getpid) != pid;
}

bool pp_vfork_check(void)
{
	long pid = __atomic_load_n(&own_pid, __ATOMIC_RELAXED);

	if (pid && PP_SYSCALL(SYS_getpid) != pid)
		return true;
	pp_tl_vfork = 0; /* the parent, back from the child's exec or exit */
	return false;
}

/* Used when libc's vfork could not be found: fork() is a valid vfork(). */
__attribute__((visibility("hidden"))) pid_t pp_vfork_fallback(void);
pid_t pp_vfork_fallback(void)
{
	return fork();
}

/*
 * vfork itself cannot be wrapped by a C function: the child would return
 * through a frame the parent returns through again later. The trampoline
 * raises the flag and jumps to libc's vfork, adding no frame of its own.
 */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	movq pp_tl_vfork@gottpoff(%rip), %rax\n"
	"	movl $1, %fs:(%rax)\n"
	"	movq pp_real_vfork(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n"
	"	jmp *%rax\n"
	"1:	jmp pp_vfork_fallback\n"
	".size vfork, .-vfork\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, %function\n"
	"vfork:\n"
	"	mrs x16, tpidr_el0\n"
	"	adrp x17, :gottprel:pp_tl_vfork\n"
	"	ldr x17, [x17, #:gottprel_lo12:pp_tl_vfork]\n"
	"	mov w15, #1\n"
	"	str w15, [x16, x17]\n"
	"	adrp x16, pp_real_vfork\n"
	"	ldr x16, [x16, #:lo12:pp_real_vfork]\n"
	"	cbz x16, 1f\n"
	"	br x16\n"
	"1:	b pp_vfork_fallback\n"
	".size vfork, .-vfork\n");
#endif
