// SPDX-License-Identifier: MIT
#include "faultguard.h"

#include "compiler.h"
#include "log.h"
#include "once.h"
#include "real.h"
#include "ring.h"
#include "syscall.h"

#include <errno.h>
#include <setjmp.h>
#include <string.h>
#include <unistd.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

PP_HOT static sigaction_fn real_sigaction;
PP_HOT static int installed; /* enum pp_once: the handlers are in place */
/* The application's view of SIGSEGV ([0]) and SIGBUS ([1]). */
static struct sigaction app_act[2];
static int app_lock;
static __thread sigjmp_buf *tl_jmp __attribute__((tls_model("initial-exec")));
/* Signals whose handler, as the application installed it, runs without SA_RESTART (bit sig - 1). */
PP_HOT static uint64_t
	norestart; /* written as a shell's children reset signals: on the page they write anyway */

static int slot_of(int sig)
{
	return sig == SIGSEGV ? 0 : sig == SIGBUS ? 1 : -1;
}

static void lock_app(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
	while (__atomic_exchange_n(&app_lock, 1, __ATOMIC_ACQUIRE))
		;
}

static void unlock_app(const sigset_t *old)
{
	__atomic_store_n(&app_lock, 0, __ATOMIC_RELEASE);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* A fault that is not ours: do what the application asked for. */
static void forward(int sig, siginfo_t *si, void *uc)
{
	struct sigaction act = app_act[slot_of(sig)];
	sigset_t mask, old;

	if (!(act.sa_flags & SA_SIGINFO) &&
	    (act.sa_handler == SIG_DFL || act.sa_handler == SIG_IGN)) {
		/*
		 * The default action: a fault re-executes and now kills as
		 * it would have; a signal sent by kill() is raised again.
		 */
		struct sigaction dfl = { .sa_handler = SIG_DFL };

		real_sigaction(sig, &dfl, NULL);
		if (si->si_code <= 0)
			raise(sig);
		return;
	}
	mask = act.sa_mask;
	if (!(act.sa_flags & SA_NODEFER))
		sigaddset(&mask, sig);
	pthread_sigmask(SIG_BLOCK, &mask, &old);
	if (act.sa_flags & SA_RESETHAND) {
		app_act[slot_of(sig)] = (struct sigaction){ .sa_handler = SIG_DFL };
	}
	if (act.sa_flags & SA_SIGINFO)
		act.sa_sigaction(sig, si, uc);
	else
		act.sa_handler(sig);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *j = tl_jmp;

	if (j) {
		tl_jmp = NULL;
		siglongjmp(*j, 1);
	}
	forward(sig, si, uc);
}

PP_START void pp_faultguard_bind(void)
{
	if (!real_sigaction)
		real_sigaction = PP_REAL(sigaction);
}

/*
 * Puts our handler in place of the application's, which it records. Under
 * the lock pp_sigaction() takes, so that a handler the application
 * installs meanwhile is either recorded or the one recorded here.
 */
static bool install(void)
{
	/* SA_NODEFER and an empty mask: leaving by siglongjmp restores nothing. */
	struct sigaction ours = { .sa_sigaction = on_fault,
				  .sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | SA_RESTART };
	struct sigaction old[2];
	sigset_t saved;
	bool ok;

	pp_faultguard_bind();
	if (!real_sigaction)
		return false;
	sigemptyset(&ours.sa_mask);
	lock_app(&saved);
	ok = !real_sigaction(SIGSEGV, &ours, &old[0]);
	if (ok && real_sigaction(SIGBUS, &ours, &old[1])) {
		real_sigaction(SIGSEGV, &old[0], NULL);
		ok = false;
	}
	if (ok) {
		app_act[0] = old[0];
		app_act[1] = old[1];
	}
	unlock_app(&saved);
	if (!ok)
		pp_debug("cannot install the fault handler: source buffers are checked by madvise");
	return ok;
}

bool pp_faultguard_ready(void)
{
	enum pp_once s = pp_once_begin(&installed);

	if (s != PP_ONCE_UNKNOWN)
		return s == PP_ONCE_YES;
	pp_once_end(&installed, install());
	return __atomic_load_n(&installed, __ATOMIC_ACQUIRE) == PP_ONCE_YES;
}

static bool handlers_in_place(void)
{
	return __atomic_load_n(&installed, __ATOMIC_ACQUIRE) == PP_ONCE_YES;
}

/* Out of line, so nothing it changes lives across the jump in pp_copy_guarded. */
__attribute__((noinline)) void pp_copy_iov(char *dst, const struct iovec *iov, int *idx,
					   size_t *off, size_t len)
{
	while (len) {
		size_t n = iov[*idx].iov_len - *off;

		if (!n) {
			(*idx)++;
			*off = 0;
			continue;
		}
		if (n > len)
			n = len;
		memcpy(dst, (const char *)iov[*idx].iov_base + *off, n);
		dst += n;
		*off += n;
		len -= n;
	}
}

int pp_copy_guarded(char *dst, const struct iovec *iov, int *idx, size_t *off, size_t len)
{
	sigjmp_buf jb;

	if (sigsetjmp(jb, 0))
		return -EFAULT;
	__atomic_store_n(&tl_jmp, &jb, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	pp_copy_iov(dst, iov, idx, off, len);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&tl_jmp, NULL, __ATOMIC_RELAXED);
	return 0;
}

bool pp_user_unmapped(uintptr_t a, size_t len)
{
	unsigned char vec[64];
	size_t page = pp_page_size();
	uintptr_t at = a & ~(uintptr_t)(page - 1), end = a + len;

	while (at < end) {
		size_t n = end - at < sizeof(vec) * page ? end - at : sizeof(vec) * page;

		/*
		 * ENOMEM: a page of it no mapping covers, or no process can
		 * have. Any other answer leaves the read to the guard.
		 */
		if (PP_SYSCALL(SYS_mincore, at, n, vec) == -ENOMEM)
			return true;
		at += n;
	}
	return false;
}

PP_COMMON int pp_user_guarded(void (*fn)(void *), void *arg)
{
	sigjmp_buf jb, *outer;

	if (!handlers_in_place()) {
		fn(arg);
		return 0;
	}
	outer = __atomic_load_n(&tl_jmp, __ATOMIC_RELAXED);
	if (sigsetjmp(jb, 0)) {
		__atomic_store_n(&tl_jmp, outer, __ATOMIC_RELAXED);
		return -EFAULT;
	}
	__atomic_store_n(&tl_jmp, &jb, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	fn(arg);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&tl_jmp, outer, __ATOMIC_RELAXED);
	return 0;
}

/*
 * @act is now @sig's disposition: a handler without SA_RESTART, or not.
 * Written only when that changes: a shell's fork child sets a dozen
 * dispositions to what they already were, and the page written would be a
 * copy-on-write fault.
 */
PP_COMMON static void note_restart(int sig, const struct sigaction *act)
{
	uint64_t bit, was;

	if (sig < 1 || sig > 64)
		return;
	bit = 1ull << (sig - 1);
	was = __atomic_load_n(&norestart, __ATOMIC_RELAXED);
	if (((act->sa_flags & SA_SIGINFO) ||
	     (act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN)) &&
	    !(act->sa_flags & SA_RESTART)) {
		if (!(was & bit))
			__atomic_or_fetch(&norestart, bit, __ATOMIC_RELAXED);
	} else if (was & bit) {
		__atomic_and_fetch(&norestart, ~bit, __ATOMIC_RELAXED);
	}
}

PP_COMMON bool pp_signals_interrupt(void)
{
	return __atomic_load_n(&norestart, __ATOMIC_RELAXED) != 0;
}

PP_COMMON int pp_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	int slot = slot_of(sig);
	sigset_t saved;

	int r = 0;

	pp_faultguard_bind();
	if (!real_sigaction)
		return errno = ENOSYS, -1;
	if (slot < 0) {
		r = real_sigaction(sig, act, old);
		if (!r && act)
			note_restart(sig, act);
		return r;
	}
	/* Recorded once our handler is in place; until then, the kernel's own. */
	lock_app(&saved);
	if (handlers_in_place()) {
		if (old)
			*old = app_act[slot];
		if (act)
			app_act[slot] = *act;
	} else {
		r = real_sigaction(sig, act, old);
	}
	unlock_app(&saved);
	if (!r && act)
		note_restart(sig, act);
	return r;
}

PP_COMMON __sighandler_t pp_signal(int sig, __sighandler_t handler)
{
	struct sigaction act = { .sa_handler = handler, .sa_flags = SA_RESTART }, old;

	sigemptyset(&act.sa_mask);
	if (pp_sigaction(sig, &act, &old))
		return SIG_ERR;
	return old.sa_handler;
}
