// SPDX-License-Identifier: MIT
/*
 * The verification stream and the produced stream (ppipe-bench --produce):
 * interleaving at any byte boundary passes, and a flipped, lost,
 * duplicated or foreign byte fails.
 */
#include "check.h"
#include "stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WRITERS = 5, PER_WRITER = 100003 };

static unsigned char src[WRITERS][PER_WRITER];
static unsigned char mixed[WRITERS * PER_WRITER + 1];
static struct stream_check chk;
static uint64_t written[STREAM_MAX_WRITERS];
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static int words; /* the produced stream, else the verification stream */

static uint64_t next_rand(void)
{
	return check_rand(&rng);
}

/* Interleaves the writers' streams in random runs of 1..9000 bytes. */
static size_t interleave(void)
{
	size_t pos[WRITERS] = { 0 }, out = 0, left = WRITERS * (size_t)PER_WRITER;

	while (left) {
		unsigned int w = next_rand() % WRITERS;
		size_t n = 1 + next_rand() % 9000;

		if (n > PER_WRITER - pos[w])
			n = PER_WRITER - pos[w];
		memcpy(mixed + out, src[w] + pos[w], n);
		pos[w] += n;
		out += n;
		left -= n;
	}
	return out;
}

/* Feeds @len bytes in random read sizes; returns the checker's verdict. */
static int check(size_t len)
{
	if (words)
		stream_check_init_words(&chk, WRITERS);
	else
		stream_check_init(&chk, WRITERS);
	for (size_t off = 0; off < len;) {
		size_t n = 1 + next_rand() % 70000;

		if (n > len - off)
			n = len - off;
		if (stream_check_feed(&chk, mixed + off, n))
			return -1;
		off += n;
	}
	return stream_check_finish(&chk, written);
}

static void expect(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "FAIL: %s%s (%s)\n", words ? "produced stream: " : "", what,
			chk.error);
		failures++;
	}
}

static void checks(void)
{
	size_t len;

	for (unsigned int w = 0; w < WRITERS; w++) {
		/* Generated in odd-sized pieces, as partial writes would. */
		for (uint64_t pos = 0; pos < PER_WRITER;) {
			size_t n = 1 + next_rand() % 5000;

			if (n > PER_WRITER - pos)
				n = PER_WRITER - pos;
			if (words)
				stream_words_fill(w, pos, src[w] + pos, n);
			else
				stream_fill(w, pos, src[w] + pos, n);
			pos += n;
		}
		written[w] = PER_WRITER;
	}
	/* Different writers' streams differ. */
	expect(memcmp(src[0], src[1], 4096) != 0, "writer streams differ");

	len = interleave();
	expect(check(len) == 0, "clean interleaved stream passes");

	mixed[len / 2] ^= 0x01;
	expect(check(len) != 0, "flipped low bit fails");
	mixed[len / 2] ^= 0x01;

	mixed[len / 3] ^= 0x10;
	expect(check(len) != 0, "flipped writer bit fails");
	mixed[len / 3] ^= 0x10;

	memmove(mixed + 1000, mixed + 1001, len - 1001);
	expect(check(len - 1) != 0, "lost byte fails");
	len = interleave();

	memmove(mixed + 5001, mixed + 5000, len - 5000);
	expect(check(len + 1) != 0, "duplicated byte fails");
	len = interleave();

	expect(check(len - 1) != 0, "missing tail fails at finish");

	mixed[7] = (unsigned char)(0xf0 | (mixed[7] & 15));
	expect(check(len) != 0, "byte of an unknown writer fails");
	expect(strstr(chk.error, "writer 15") != NULL, "error names the unknown writer");
}

int main(void)
{
	unsigned char whole[4096], piece[4096];
	unsigned int nibbles = 0;

	checks();
	words = 1;
	checks();
	/* The produced stream is the same whatever offsets it is made from. */
	stream_words_fill(3, 5, whole, sizeof(whole));
	for (size_t off = 0; off < sizeof(piece);) {
		size_t n = 1 + next_rand() % 13;

		if (n > sizeof(piece) - off)
			n = sizeof(piece) - off;
		stream_words_fill(3, 5 + off, piece + off, n);
		off += n;
	}
	expect(memcmp(whole, piece, sizeof(whole)) == 0, "pieces make the same stream");
	/* Writer 0's bytes take every data nibble. */
	stream_words_fill(0, 0, whole, sizeof(whole));
	for (size_t k = 0; k < sizeof(whole); k++)
		nibbles |= 1u << whole[k];
	expect(nibbles == 0xffff, "every data nibble occurs");

	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
