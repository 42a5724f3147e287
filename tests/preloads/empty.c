// SPDX-License-Identifier: MIT
/*
 * libppipe-empty: a preload library that does nothing at all: no
 * interposed symbol, no constructor, no dependency beyond what every
 * shared object gets. Preloading it costs what the dynamic linker does for
 * any library (finding, mapping and relocating it), the floor under every
 * preload; the overhead matrix of ppipe-compare runs it beside libppipe so
 * that libppipe's own share of a process start or an exec can be told
 * from that floor.
 */

/* A translation unit must declare something; this stays hidden. */
const int ppipe_empty_library = 1;
