/* SPDX-License-Identifier: MIT */
/*
 * Pipe ends across exec (docs/design.md, "The registry across fork and exec"; registry.h).
 * Before an exec, the pipes whose ends the new image inherits are charged in the registry and
 * the image is told where the registry is; if the exec fails, that is
 * undone. When libppipe starts in an image, it takes over the pipe ends
 * it holds and lifts its charges. Where the new image cannot be described
 * (no registry, no /proc, too many pipes), the pipes it inherits are
 * marked unsafe as before: plain writes for good.
 *
 * Layer: operations (may use: operations, engine, pipes, resources, base).
 */
#ifndef PP_EXEC_H
#define PP_EXEC_H

#include "pipe.h"
#include "registry.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct pp_exec_ctx {
	struct pp_exec_charge charge;
	bool spawn; /* the image is a posix_spawn() child */
	/* What it was handed, for the statistics (pp_stats_exec_note) once it has a pid. */
	char comm[16];
	int handed;
	uint64_t inos[PP_EXEC_MAX_PIPES];
};

/*
 * Room an environment copy needs: entries of @envp plus two; 0 when
 * @envp cannot be read (the exec then fails with the kernel's EFAULT).
 */
size_t pp_exec_env_slots(char *const envp[]);
/* Whether @path can be read and is "" (execveat's AT_EMPTY_PATH); false if unreadable. */
bool pp_exec_path_empty(const char *path);

/*
 * Prepares an exec of a program the kernel will call @comm (the basename
 * of the path, or the fd number for fexecve). Returns the environment to
 * pass: @envp, or @out (@slots entries, from pp_exec_env_slots(envp))
 * when the registry's variable was added. A path or environment that
 * cannot be read is left to the kernel as it is.
 */
char **pp_exec_prepare(struct pp_exec_ctx *x, const char *path, char *const envp[], char **out,
		       size_t slots);
/* The exec returned (it failed): undo pp_exec_prepare. Keeps errno. */
void pp_exec_failed(struct pp_exec_ctx *x);

/*
 * The same for posix_spawn(): the image is a child, and with @any_fd
 * (file actions) it may get any fd of ours, close-on-exec or not. Then
 * pp_exec_spawned() with the child's pid, or -1 when the spawn failed.
 */
char **pp_exec_prepare_spawn(struct pp_exec_ctx *x, const char *path, char *const envp[],
			     char **out, size_t slots, bool any_fd);
void pp_exec_spawned(struct pp_exec_ctx *x, pid_t child);

/*
 * Whether /etc/ld.so.preload names libppipe (read once): then every
 * dynamically linked program exec'd here runs it too.
 */
bool pp_exec_system_preload(void);
/* Whether a preload list (ld.so.preload's text, LD_PRELOAD's value) names libppipe. */
bool pp_preload_list_names_us(const char *s);
/*
 * Before vfork(): the child may exec with this process's pipe ends, and
 * runs on its memory, so their state moves where it can follow now.
 */
void pp_exec_before_vfork(void);
/* Whether @envp carries a registry from the image that exec'd this one. */
bool pp_exec_inherited(char **envp);
/*
 * At start-up, when @envp carries one: joins the registry and claims this
 * image's exec record (the pipes it was handed stop being pending). The
 * pipe ends themselves are taken over when first needed.
 */
void pp_exec_start(char **envp);
/*
 * Removes the registry's variable from @envp (start-up, before any thread
 * of the program runs): it is for libppipe only.
 */
void pp_exec_forget_inherited(char **envp);
/*
 * Set once this image holds pipe ends it was handed and may take over:
 * until then pp_exec_take_over() has nothing to look at.
 */
extern int pp_exec_takeover_armed;

/*
 * Before an exec libppipe cannot describe (system(), popen(), no
 * registry): marks every accelerated pipe with an end this process holds
 * without FD_CLOEXEC (or at all, when @any_fd: spawn file actions may
 * hand on any fd) unsafe, for every process of the tree. A read end: the
 * new program may splice pages out; a write end: it shares the open file
 * and may switch it to O_NONBLOCK or packet mode unseen.
 */
void pp_exec_mark_inherited(bool any_fd);

/* Why an inherited pipe that is not taken over stays plain (PPIPE_DEBUG). */
const char *pp_exec_why_plain(void);
/*
 * Whether this image holds pipe ends it was handed that it may still take
 * over, or took some: one load, no system call. pp_exec_take_over() has
 * nothing to look at otherwise.
 */
bool pp_exec_may_take_over(void);
/*
 * Takes over @fd, a pipe end of inode @ino whose open file's F_GETFL is
 * @fl, as end @end (what the caller learned of it: fdlearn.h), if it is
 * an end of a pipe this image was handed (its first large write, splice,
 * tee, F_SETFL...): returns the pipe, entered, with @fd in the fd table,
 * or NULL (not one). Not in a vfork child.
 */
struct pp_pipe *pp_exec_take_over(int fd, uint64_t ino, long fl, enum pp_end end);

#endif
