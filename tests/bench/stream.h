/* SPDX-License-Identifier: MIT */
/*
 * The verification stream. Each writer w emits an endless, deterministic
 * byte stream; a write of S bytes sends the next S bytes of it. Every byte
 * carries its writer in the high nibble and four bits of data in the low
 * one, so a reader can take the pipe's bytes apart again one by one, no
 * matter where the kernel (or a preload library) let writers interleave.
 *
 * The data nibbles form 64-byte frames: a 64-bit frame sequence number,
 * 40 nibbles of payload derived from (writer, sequence) and a 32-bit
 * checksum over both. The reader regenerates each writer's stream and
 * compares byte by byte, so a lost, duplicated, reordered or altered byte
 * is caught at the first byte where it shows.
 */
#ifndef PPIPE_BENCH_STREAM_H
#define PPIPE_BENCH_STREAM_H

#include <stddef.h>
#include <stdint.h>

#define STREAM_MAX_WRITERS 16
#define STREAM_FRAME 64

/* Fills @buf with bytes [@pos, @pos + @len) of writer @w's stream. */
void stream_fill(unsigned int w, uint64_t pos, unsigned char *buf, size_t len);

/*
 * The produced stream (ppipe-bench --produce copy|api): what a producer
 * makes afresh for every write, for a few operations per 8 bytes, well
 * below the cost of the copy it is measured against. Byte i of writer w's
 * stream is byte i % 8 (least significant first) of word i / 8, a mix of
 * (w, i / 8) whose bytes carry w in their high nibble like the
 * verification stream's: a reader takes the pipe's bytes apart the same
 * way and checks each one against its offset.
 */
void stream_words_fill(unsigned int w, uint64_t pos, unsigned char *buf, size_t len);

/*
 * Reader side. Plain data (no pointers) so that it can live in memory
 * shared between processes.
 */
struct stream_check {
	unsigned int writers;
	int failed;
	int words; /* the produced stream (stream_check_init_words), else the frames */
	uint64_t pos[STREAM_MAX_WRITERS];
	/* The frame (the produced stream: the word) each writer's pos is in, and its bytes. */
	uint64_t frame_no[STREAM_MAX_WRITERS];
	unsigned char frame[STREAM_MAX_WRITERS][STREAM_FRAME];
	char error[256];
};

void stream_check_init(struct stream_check *c, unsigned int writers);
/* The same for the produced stream (stream_words_fill). */
void stream_check_init_words(struct stream_check *c, unsigned int writers);
/*
 * Checks the next @len bytes read from the pipe. Returns 0, or -1 once the
 * stream has failed (the first failure is described in c->error).
 */
int stream_check_feed(struct stream_check *c, const unsigned char *buf, size_t len);
/* Checks that the reader saw exactly written[w] bytes of every writer. */
int stream_check_finish(struct stream_check *c, const uint64_t *written);

#endif
