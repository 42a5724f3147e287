// SPDX-License-Identifier: MIT
#include "stream.h"

#include <stdio.h>
#include <string.h>

#define SEQ_NIBBLES 16
#define SUM_NIBBLES 8
#define PAYLOAD_NIBBLES (STREAM_FRAME - SEQ_NIBBLES - SUM_NIBBLES)

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static void frame_build(unsigned int w, uint64_t seq, unsigned char out[STREAM_FRAME])
{
	unsigned char tag = (unsigned char)(w << 4);
	uint64_t p = mix64(seq * STREAM_MAX_WRITERS + w + 1);
	uint32_t sum = 2166136261u;
	unsigned int i;

	for (i = 0; i < SEQ_NIBBLES; i++)
		out[i] = (seq >> (4 * (SEQ_NIBBLES - 1 - i))) & 15;
	for (i = 0; i < PAYLOAD_NIBBLES; i++)
		out[SEQ_NIBBLES + i] = ((p >> (4 * (i % 16))) ^ (i >> 4)) & 15;
	for (i = 0; i < SEQ_NIBBLES + PAYLOAD_NIBBLES; i++)
		sum = (sum ^ out[i]) * 16777619u;
	for (i = 0; i < SUM_NIBBLES; i++)
		out[SEQ_NIBBLES + PAYLOAD_NIBBLES + i] = (sum >> (4 * (SUM_NIBBLES - 1 - i))) & 15;
	for (i = 0; i < STREAM_FRAME; i++)
		out[i] |= tag;
}

void stream_fill(unsigned int w, uint64_t pos, unsigned char *buf, size_t len)
{
	unsigned char frame[STREAM_FRAME];

	while (len) {
		uint64_t seq = pos / STREAM_FRAME;
		size_t off = pos % STREAM_FRAME;
		size_t n = STREAM_FRAME - off;

		if (n > len)
			n = len;
		frame_build(w, seq, frame);
		memcpy(buf, frame + off, n);
		buf += n;
		pos += n;
		len -= n;
	}
}

/*
 * The produced stream's words: an odd step per (writer, word) added up
 * (so a writer makes its next word with one addition, and a reader any
 * word with one multiplication), folded, the data in the low nibbles and
 * the writer in the high ones.
 */
#define WORD_STEP 0x9e3779b97f4a7c15ull
#define WORD_NIBBLES 0x0f0f0f0f0f0f0f0full
#define WORD_BYTES 0x0101010101010101ull

static uint64_t word_seed(unsigned int w, uint64_t k)
{
	return (k * STREAM_MAX_WRITERS + w + 1) * WORD_STEP;
}

static uint64_t word_make(unsigned int w, uint64_t z)
{
	return ((z ^ (z >> 29)) & WORD_NIBBLES) | WORD_BYTES * (uint64_t)((w & 15) << 4);
}

static void word_bytes(uint64_t v, unsigned char out[8])
{
	for (int i = 0; i < 8; i++)
		out[i] = (unsigned char)(v >> (8 * i));
}

void stream_words_fill(unsigned int w, uint64_t pos, unsigned char *buf, size_t len)
{
	uint64_t k = pos / 8, z = word_seed(w, k);
	unsigned char part[8];
	size_t off = pos % 8;

	/* A first word cut by @pos, then whole ones, then the start of one. */
	if (off) {
		size_t n = 8 - off < len ? 8 - off : len;

		word_bytes(word_make(w, z), part);
		memcpy(buf, part + off, n);
		buf += n;
		len -= n;
		z += STREAM_MAX_WRITERS * WORD_STEP;
	}
	for (; len >= 8; len -= 8, buf += 8) {
		uint64_t v = word_make(w, z);

#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		v = __builtin_bswap64(v);
#endif
		memcpy(buf, &v, 8);
		z += STREAM_MAX_WRITERS * WORD_STEP;
	}
	if (len) {
		word_bytes(word_make(w, z), part);
		memcpy(buf, part, len);
	}
}

void stream_check_init(struct stream_check *c, unsigned int writers)
{
	memset(c, 0, sizeof(*c));
	c->writers = writers;
	for (unsigned int w = 0; w < writers && w < STREAM_MAX_WRITERS; w++)
		frame_build(w, 0, c->frame[w]);
}

void stream_check_init_words(struct stream_check *c, unsigned int writers)
{
	memset(c, 0, sizeof(*c));
	c->writers = writers;
	c->words = 1;
	for (unsigned int w = 0; w < writers && w < STREAM_MAX_WRITERS; w++)
		word_bytes(word_make(w, word_seed(w, 0)), c->frame[w]);
}

/* Reads the sequence number out of a received frame prefix, for the report. */
static void describe_mismatch(struct stream_check *c, unsigned int w, unsigned char want,
			      unsigned char got)
{
	uint64_t pos = c->pos[w];
	unsigned int unit = c->words ? 8 : STREAM_FRAME;

	snprintf(c->error, sizeof(c->error),
		 "writer %u, stream offset %llu (%s %llu, byte %u): expected 0x%02x, got 0x%02x "
		 "(a byte of writer %u)",
		 w, (unsigned long long)pos, c->words ? "word" : "frame",
		 (unsigned long long)(pos / unit), (unsigned int)(pos % unit), want, got,
		 (unsigned int)(got >> 4));
}

int stream_check_feed(struct stream_check *c, const unsigned char *buf, size_t len)
{
	if (c->failed)
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned int w = buf[i] >> 4;
		uint64_t pos;
		unsigned char want;

		if (w >= c->writers) {
			snprintf(c->error, sizeof(c->error),
				 "byte 0x%02x names writer %u, but only %u writers exist", buf[i],
				 w, c->writers);
			c->failed = 1;
			return -1;
		}
		pos = c->pos[w];
		if (c->words) {
			if (pos / 8 != c->frame_no[w]) {
				c->frame_no[w] = pos / 8;
				word_bytes(word_make(w, word_seed(w, pos / 8)), c->frame[w]);
			}
			want = c->frame[w][pos % 8];
		} else {
			if (pos / STREAM_FRAME != c->frame_no[w]) {
				c->frame_no[w] = pos / STREAM_FRAME;
				frame_build(w, c->frame_no[w], c->frame[w]);
			}
			want = c->frame[w][pos % STREAM_FRAME];
		}
		if (buf[i] != want) {
			describe_mismatch(c, w, want, buf[i]);
			c->failed = 1;
			return -1;
		}
		c->pos[w] = pos + 1;
	}
	return 0;
}

int stream_check_finish(struct stream_check *c, const uint64_t *written)
{
	if (c->failed)
		return -1;
	for (unsigned int w = 0; w < c->writers; w++) {
		if (c->pos[w] == written[w])
			continue;
		snprintf(c->error, sizeof(c->error),
			 "writer %u wrote %llu bytes but the readers received %llu", w,
			 (unsigned long long)written[w], (unsigned long long)c->pos[w]);
		c->failed = 1;
		return -1;
	}
	return 0;
}
