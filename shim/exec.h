/* SPDX-License-Identifier: MIT */
/*
 * Pipe ends across exec (DESIGN.md 3, registry.h). Before an exec, the
 * pipes whose ends the new image inherits are charged in the registry and
 * the image is told where the registry is; if the exec fails, that is
 * undone. When libppipe starts in an image, it takes over the pipe ends
 * it holds and lifts its charges. Where the new image cannot be described
 * (no registry, no /proc, too many pipes), the pipes it inherits are
 * marked unsafe as before: plain writes for good.
 */
#ifndef PP_EXEC_H
#define PP_EXEC_H

#include "registry.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct pp_exec_ctx {
	struct pp_exec_charge charge;
	bool released; /* this image's holds were handed to the new one */
	bool spawn; /* the image is a posix_spawn() child */
};

/* Room an environment copy needs: entries of @envp plus two. */
size_t pp_exec_env_slots(char *const envp[]);

/*
 * Prepares an exec of a program the kernel will call @comm (the basename
 * of the path, or the fd number for fexecve). Returns the environment to
 * pass: @envp, or @out (pp_exec_env_slots(envp) entries) when the
 * registry's variable was added.
 */
char **pp_exec_prepare(struct pp_exec_ctx *x, const char *path, char *const envp[], char **out);
/* The exec returned (it failed): undo pp_exec_prepare. Keeps errno. */
void pp_exec_failed(struct pp_exec_ctx *x);

/*
 * The same for posix_spawn(): the image is a child, and with @any_fd
 * (file actions) it may get any fd of ours, close-on-exec or not. Then
 * pp_exec_spawned() with the child's pid, or -1 when the spawn failed.
 */
char **pp_exec_prepare_spawn(struct pp_exec_ctx *x, const char *path, char *const envp[],
			     char **out, bool any_fd);
void pp_exec_spawned(struct pp_exec_ctx *x, pid_t child);

/* At start-up: take over the pipe ends this image inherited. */
void pp_exec_adopt(void);

#endif
