// SPDX-License-Identifier: MIT
/*
 * vfork-exec: libppipe's vfork path, on each architecture it supports
 * (interpose.c: the trampoline in assembly, the per-thread flag that tells
 * a vfork child, exec from that child), run with libppipe preloaded.
 *
 *   vfork-exec SELF          the test (SELF: this program's path)
 *   vfork-exec writer N      N blocks of the stream to stdout, then exits
 *
 * A forked reader drains a pipe and checks every byte. The parent writes
 * blocks into the pipe itself (so it holds a pipe libppipe tracks), then
 * 24 times calls vfork(): half the children _exit() at once with a status
 * of their own, the other half dup2() the pipe onto stdout and exec this
 * program as a writer of more blocks. The parent checks that each vfork
 * returned to it with its stack as it left it (a trampoline that saved a
 * register wrong breaks that), that each child's status is the one it
 * chose, and at the end that the reader got every block in order, that
 * the parent's and the writers' large writes went in by vmsplice
 * (PPIPE_STATS reports, one JSON line per process on stderr: the writers
 * accelerate only if the registry handed them the pipe across the vfork
 * and exec), and that no vfork child wrote a report.
 *
 * Under qemu-user, vfork is a fork: the child runs on a copy of the
 * parent's memory, so what a child does to memory never reaches the
 * parent; the code paths are the same (docs/testing.md, "arm64").
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK (64 << 10)
#define OWN_BLOCKS 32
#define CHILDREN 24
#define WRITER_BLOCKS 16

static unsigned char block[BLOCK];

/* Block @n of the stream: every byte names its block and place. */
static void fill(uint64_t n)
{
	for (size_t i = 0; i < BLOCK; i++)
		block[i] = (unsigned char)(n * 131 + i / 7);
}

static int write_all(int fd, const void *p, size_t len)
{
	const unsigned char *c = p;

	while (len) {
		ssize_t w = write(fd, c, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		len -= (size_t)w;
	}
	return 0;
}

static int writer(uint64_t first, uint64_t count)
{
	for (uint64_t n = first; n < first + count; n++) {
		fill(n);
		if (write_all(1, block, BLOCK))
			return 3;
	}
	return 0;
}

/* Reads to EOF; exit status 0 if the stream was blocks 0..@total-1, in order. */
static int reader(int fd, uint64_t total)
{
	static unsigned char got[BLOCK];
	uint64_t n = 0;
	size_t have = 0;

	for (;;) {
		ssize_t r = read(fd, got + have, BLOCK - have);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		if (have == BLOCK) {
			fill(n);
			if (memcmp(got, block, BLOCK)) {
				fprintf(stderr, "reader: block %llu differs\n",
					(unsigned long long)n);
				return 1;
			}
			n++;
			have = 0;
		}
	}
	if (n != total || have) {
		fprintf(stderr, "reader: %llu whole blocks and %zu bytes, want %llu blocks\n",
			(unsigned long long)n, have, (unsigned long long)total);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "writer"))
		return writer(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
	if (argc != 2) {
		fprintf(stderr, "usage: vfork-exec SELF\n");
		return 2;
	}
	const char *self = argv[1];
	const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "ppipe_version");
	int fds[2], failures = 0;
	uint64_t next = 0;

	if (!version) {
		fprintf(stderr, "vfork-exec: libppipe is not loaded (LD_PRELOAD)\n");
		return 2;
	}
	if (pipe(fds))
		return 2;
	uint64_t total = OWN_BLOCKS + (CHILDREN / 2) * WRITER_BLOCKS;
	pid_t rd = fork();

	if (!rd) {
		close(fds[1]);
		_exit(reader(fds[0], total));
	}
	close(fds[0]);
	for (int i = 0; i < OWN_BLOCKS / 2; i++) {
		fill(next++);
		if (write_all(fds[1], block, BLOCK))
			return 2;
	}
	for (int i = 0; i < CHILDREN; i++) {
		/* Kept in registers or on the stack across the call, read after it. */
		volatile uint64_t mark = 0x5eed0000u + (uint64_t)i * 7;
		int code = 10 + i;
		char first[24], count[24];

		snprintf(first, sizeof(first), "%llu", (unsigned long long)next);
		snprintf(count, sizeof(count), "%d", WRITER_BLOCKS);
		pid_t pid = vfork();

		if (pid == 0) {
			if (i % 2)
				_exit(code);
			if (dup2(fds[1], 1) != 1)
				_exit(126);
			execl(self, self, "writer", first, count, (char *)NULL);
			_exit(127);
		}
		if (pid < 0) {
			perror("vfork");
			return 2;
		}
		if (mark != 0x5eed0000u + (uint64_t)i * 7) {
			printf("FAIL vfork %d: the parent's stack changed across vfork\n", i);
			failures++;
		}
		int status;

		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != (i % 2 ? code : 0)) {
			printf("FAIL vfork %d: child status %#x, want exit %d\n", i, status,
			       i % 2 ? code : 0);
			failures++;
		}
		if (!(i % 2))
			next += WRITER_BLOCKS;
	}
	for (int i = 0; i < OWN_BLOCKS / 2; i++) {
		fill(next++);
		if (write_all(fds[1], block, BLOCK))
			return 2;
	}
	close(fds[1]);
	int status;

	if (waitpid(rd, &status, 0) != rd || !WIFEXITED(status) || WEXITSTATUS(status)) {
		printf("FAIL the reader: status %#x (a block lost, altered or out of order)\n",
		       status);
		failures++;
	} else {
		printf("ok the reader got all %llu blocks in order\n", (unsigned long long)total);
	}
	printf("%s: %d vfork children (%d exec'd writers), libppipe %s\n", failures ? "FAIL" : "ok",
	       CHILDREN, CHILDREN / 2, version());
	return failures ? 1 : 0;
}
