// SPDX-License-Identifier: MIT
/*
 * libppipe-corrupt: a deliberately broken preload for the tests. Every Nth
 * write() of more than one byte to a pipe is damaged, so that the
 * benchmark's verification can be shown to catch it:
 *   PPIPE_TEST_CORRUPT=flip   one bit of one byte is flipped (default)
 *   PPIPE_TEST_CORRUPT=drop   the first byte is not sent, but counted
 *   PPIPE_TEST_CORRUPT=dup    the first byte is sent twice
 *   PPIPE_TEST_CORRUPT_EVERY  N (default 50)
 * The caller's buffer is never modified.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef ssize_t (*write_fn)(int, const void *, size_t);

static write_fn next_write;
static unsigned long every = 50;
static const char *how = "flip";
static unsigned long counter;

__attribute__((constructor)) static void corrupt_init(void)
{
	const char *e = getenv("PPIPE_TEST_CORRUPT_EVERY");

	next_write = (write_fn)dlsym(RTLD_NEXT, "write");
	if (e && strtoul(e, NULL, 10) > 0)
		every = strtoul(e, NULL, 10);
	if (getenv("PPIPE_TEST_CORRUPT"))
		how = getenv("PPIPE_TEST_CORRUPT");
}

static int is_pipe(int fd)
{
	struct stat st;

	return !fstat(fd, &st) && S_ISFIFO(st.st_mode);
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	unsigned char *copy;
	ssize_t r;

	if (n < 2 || !is_pipe(fd) || __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) % every)
		return next_write(fd, buf, n);
	copy = malloc(n + 1);
	if (!copy)
		return next_write(fd, buf, n);
	memcpy(copy, buf, n);
	if (!strcmp(how, "drop")) {
		r = next_write(fd, copy + 1, n - 1);
		r = r < 0 ? r : r + 1;
	} else if (!strcmp(how, "dup")) {
		memmove(copy + 1, copy, n);
		r = next_write(fd, copy, n);
	} else {
		copy[n / 2] ^= 0x01;
		r = next_write(fd, copy, n);
	}
	free(copy);
	return r;
}
