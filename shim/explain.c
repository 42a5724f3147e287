// SPDX-License-Identifier: MIT
#include "explain.h"

#include "compiler.h"
#include "config.h"
#include "engine.h"
#include "log.h"
#include "pipe.h"
#include "sys.h"

#include <string.h>

/*
 * Kinds of fallback already said, by their text: a slot is claimed by the
 * first write that falls back for a new kind (compare-and-swap, so any
 * thread or signal handler may). More kinds than slots are said each time.
 */
#define KINDS 16

static struct kind {
	const char *text;
	int said;
} kinds[KINDS];

static int *said_flag(const char *text)
{
	for (int i = 0; i < KINDS; i++) {
		const char *cur = __atomic_load_n(&kinds[i].text, __ATOMIC_ACQUIRE);

		if (!cur && __atomic_compare_exchange_n(&kinds[i].text, &cur, text, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return &kinds[i].said;
		if (cur == text || !strcmp(cur, text))
			return &kinds[i].said;
	}
	return NULL;
}

void pp_explain_fallback(struct pp_pipe *p, const char *kind)
{
	int *said;

	if (!kind)
		kind = "unknown";
	__atomic_store_n(&p->last_fallback, kind, __ATOMIC_RELAXED);
	if (likely(!pp_cfg.debug))
		return;
	said = said_flag(kind);
	if (!said)
		pp_debug("fallback: %s: the real call instead", kind);
	else
		pp_debug_once(said, "fallback: %s: the real call instead (said once per process)",
			      kind);
}

/* Inherited pipes already explained, by inode (more than this are explained each time). */
#define TOLD 32
static uint64_t told[TOLD];

void pp_explain_untracked(int fd, const char *why)
{
	uint64_t ino;

	if (pp_sys_pipe_ino(fd, &ino))
		return;
	for (int i = 0; i < TOLD; i++) {
		uint64_t cur = __atomic_load_n(&told[i], __ATOMIC_ACQUIRE);

		if (cur == ino)
			return;
		if (!cur && __atomic_compare_exchange_n(&told[i], &cur, ino, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			break;
		if (cur == ino)
			return;
	}
	pp_debug("pipe inode %llu (fd %d): plain writes: inherited, %s", (unsigned long long)ino,
		 fd, why);
}

void pp_explain_path(struct pp_pipe *p, int fd, ssize_t r)
{
	unsigned long long ino = (unsigned long long)pp_pipe_ino(p);
	const char *why;

	if (__atomic_load_n(&p->path_told, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&p->path_told, 1, __ATOMIC_RELAXED))
		return;
	if (r != PP_DECLINE) {
		pp_debug("pipe inode %llu (fd %d): accelerated by vmsplice (%s)", ino, fd,
			 pp_pipe_reason(p));
		return;
	}
	/* Plain for good: the pipe's reason. Else what this write fell back for. */
	if (strcmp(pp_pipe_path(p, &why), "passthrough"))
		why = __atomic_load_n(&p->last_fallback, __ATOMIC_RELAXED);
	pp_debug("pipe inode %llu (fd %d): plain writes: %s", ino, fd, why ? why : "unknown");
}

void pp_explain_after_fork_child(void)
{
	for (int i = 0; i < KINDS; i++)
		if (kinds[i].said)
			kinds[i].said = 0;
	for (int i = 0; i < TOLD; i++)
		if (told[i])
			told[i] = 0;
}
