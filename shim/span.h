/* SPDX-License-Identifier: MIT */
/*
 * Spans (include/ppipe.h): what the rest of the library tells them.
 *
 * Layer: interpose (may use: interpose, operations, engine, pipes, resources, base).
 */
#ifndef PP_SPAN_H
#define PP_SPAN_H

/*
 * In a fork child: the forking thread's open ring spans are its parent's
 * (the child cannot commit them, and the rings were not inherited), so
 * its exit must not give them back here.
 */
void pp_span_after_fork_child(void);

#endif
