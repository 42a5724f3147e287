/* SPDX-License-Identifier: MIT */
/*
 * Shared pieces of the differential semantics tests (diff-*.c).
 *
 * Every diff-* program exercises one behaviour of pipes and prints a
 * transcript of everything a program could observe: return values, errno
 * names, signals and how often they came, byte counts and checksums of what
 * a reader got, file types. run-diff.py runs each program twice, on plain
 * pipes and with LD_PRELOAD=<library>, and the two transcripts must be
 * identical. So a transcript must be deterministic on plain pipes: never
 * print timings, pids, addresses or fd numbers that depend on the
 * environment, and where the kernel's exact result depends on scheduling,
 * print a normalised form ("partial>0") plus the invariants that hold in
 * every schedule (bytes read == bytes the writer says it wrote).
 *
 * Besides the transcript, each program checks the invariants a plain pipe
 * always satisfies (no byte lost, records never torn) and exits
 * T_EXIT_FAIL if one does not hold, so a broken library fails even where
 * the transcript would happen to match.
 *
 * The transcript goes to the file named by $T_TRANSCRIPT (appended, one
 * flushed line per t_log), or to stdout when it is unset. It is never
 * written from a signal handler, and child processes do not log: they
 * report through shared memory and the parent prints.
 */
#ifndef PPIPE_TEST_HELPERS_H
#define PPIPE_TEST_HELPERS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define T_EXIT_PASS 0
#define T_EXIT_FAIL 1
#define T_EXIT_SKIP 77
#define T_EXIT_ERROR 99

#define T_PAGE 4096UL
#define T_KIB 1024UL
#define T_MIB (1024UL * 1024UL)
#define T_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define T_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* Opens the transcript. Call first in main(). */
void t_init(const char *name);
/* One transcript line (a newline is added), flushed at once. */
void t_log(const char *fmt, ...) T_PRINTF(1, 2);
/*
 * An invariant: logs "FAIL: ..." and marks the run failed when @ok is false.
 * Returns @ok.
 */
bool t_check(bool ok, const char *fmt, ...) T_PRINTF(2, 3);
/* The program cannot run here: logs "SKIP: ..." and exits T_EXIT_SKIP. */
__attribute__((noreturn)) void t_skip(const char *fmt, ...) T_PRINTF(1, 2);
/*
 * A setup step failed (fork, mmap, ...): logs "ERROR: ... (errno)" and
 * exits T_EXIT_ERROR. Not for the behaviour under test.
 */
__attribute__((noreturn)) void t_die(const char *fmt, ...) T_PRINTF(1, 2);
/* Logs the verdict and returns the exit code for main(). */
int t_finish(void);
/* True once a check has failed. */
bool t_failed(void);

/* "EAGAIN" for EAGAIN; "E<number>" for anything glibc has no name for. */
const char *t_errname(int e);
/* "SIGPIPE" for SIGPIPE. */
const char *t_signame(int sig);
/*
 * A system call's result as the transcript shows it: "4096" or
 * "-1 EAGAIN". The text lives in one of 8 rotating static buffers.
 */
const char *t_res(ssize_t r, int err);
/* A wait status: "exit 0", "killed by SIGPIPE". Same buffers as t_res. */
const char *t_status(int status);

/* Byte @pos of the pattern stream @seed. */
unsigned char t_pattern_byte(uint64_t seed, uint64_t pos);
/* Fills @buf with bytes [@pos, @pos + @len) of stream @seed. */
void t_fill(void *buf, size_t len, uint64_t seed, uint64_t pos);
/* Index of the first byte of @buf that differs from the stream, or @len. */
size_t t_verify(const void *buf, size_t len, uint64_t seed, uint64_t pos);
/* Overwrites @buf with junk (what a program may do once write() returned). */
void t_scribble(void *buf, size_t len);

/* FNV-1a 64 over @len bytes, continuing from @h (start with T_FNV_INIT). */
#define T_FNV_INIT 0xcbf29ce484222325ULL
uint64_t t_fnv(uint64_t h, const void *buf, size_t len);
/* FNV-1a 64 of bytes [@pos, @pos + @len) of stream @seed. */
uint64_t t_pattern_fnv(uint64_t seed, uint64_t pos, size_t len);

/*
 * A buffer that starts @offset bytes after a page boundary, in a mapping of
 * its own whose last page is inaccessible (a read past the buffer's end
 * faults at the next page boundary at the latest).
 */
struct t_buf {
	unsigned char *p; /* the usable bytes */
	size_t len;
	void *map;
	size_t map_len;
};
void t_buf_alloc(struct t_buf *b, size_t len, size_t offset);
void t_buf_free(struct t_buf *b);
/* Anonymous memory: private, or shared with children forked later. */
void *t_map(size_t len);
void *t_shared(size_t len);

/* Pipes and fds: each dies on an unexpected failure. */
void t_pipe(int fds[2], int flags);
void t_close(int fd);
void t_set_nonblock(int fd, bool on);
/* F_SETPIPE_SZ; returns the new size or -errno. */
int t_pipe_size_set(int fd, int size);
int t_fionread(int fd);
/* Writes all of @buf, looping over short writes; returns bytes written or -errno. */
ssize_t t_write_all(int fd, const void *buf, size_t len);
/* The same, each write made by @put (the API mode's writes: api-write.h). */
ssize_t t_write_all_by(ssize_t (*put)(int, const void *, size_t), int fd, const void *buf,
		       size_t len);
/*
 * Writes the pattern stream of @seed from @pos up to @end into @fd, in
 * write()s of @chunk bytes made in @buf; logs the first that falls short
 * ("write to @what at POS -> RESULT"). Returns where the stream stopped.
 */
uint64_t t_write_stream(int fd, void *buf, size_t chunk, uint64_t seed, uint64_t pos, uint64_t end,
			const char *what);
/* Reads exactly @len bytes unless EOF comes first; returns bytes or -errno. */
ssize_t t_read_full(int fd, void *buf, size_t len);
/* Reads and discards until EAGAIN or EOF (the fd is made non-blocking meanwhile). */
size_t t_drain(int fd);
/* Closes every fd >= 3 except the transcript's and those in @keep. */
void t_close_all_but(const int *keep, int nkeep);

/* An unlinked temporary file in $TMPDIR (or /tmp), open O_RDWR. */
int t_tmpfile(void);
/* A new directory in $TMPDIR (or /tmp); the path is static. */
const char *t_tmpdir(void);

/* Processes. */
pid_t t_fork(void);
/* Waits for @pid and returns its wait status. */
int t_wait(pid_t pid);
/* A signal handler (or SIG_DFL/SIG_IGN) with or without SA_RESTART. */
void t_sigaction(int sig, void (*handler)(int), bool restart);
/*
 * Installs a seccomp filter (after PR_SET_NO_NEW_PRIVS) that fails system
 * calls @nr1 and @nr2 with @err. Returns 0, or -1 with errno (ENOSYS where
 * this architecture has no filter here).
 */
int t_seccomp_deny(int nr1, int nr2, int err);

/* Counting handler: t_sig_count[sig] grows by one per delivery. */
extern volatile sig_atomic_t t_sig_count[65];
void t_sig_counter(int sig);
/* Sleeps @us microseconds (restarting after signals). */
void t_usleep(long us);

/*
 * The reader process: a forked child that closes every other fd, reads
 * @rfd with reads of @read_size bytes until EOF, checks the bytes against
 * stream @seed from position @pos and reports through shared memory.
 * @delay_us makes it sleep before its first read (a slow consumer).
 */
struct t_read_result {
	uint64_t bytes;
	uint64_t fnv;
	uint64_t reads;
	uint64_t first_bad; /* offset of the first wrong byte, UINT64_MAX if none */
	int err; /* errno of a failed read, 0 if it ended at EOF */
	int done;
};
/* Accounts @n bytes just read at stream offset @pos + res->bytes. */
void t_read_result_add(struct t_read_result *res, const void *buf, size_t n, uint64_t seed,
		       uint64_t pos);
struct t_reader {
	pid_t pid;
	struct t_read_result *res;
};
void t_reader_start(struct t_reader *r, int rfd, size_t read_size, uint64_t seed, uint64_t pos,
		    long delay_us);
/*
 * Waits for the reader and checks that it saw exactly @expect_bytes of the
 * stream, intact. Logs "<what>: read=N fnv=... ok|BAD". Returns true if ok.
 */
bool t_reader_finish(struct t_reader *r, const char *what, uint64_t expect_bytes);

/*
 * Tagged streams, for several writers on one pipe: every byte carries its
 * writer (0..15) in the high nibble and four bits of the writer's own
 * pattern stream in the low one, so a reader can take any interleaving
 * apart again. A writer that only ever writes whole records of
 * rec_size[w] bytes with writes <= PIPE_BUF must see each record arrive
 * in one piece: t_demux counts a "torn" record whenever a run of writer
 * w's bytes ends inside a record.
 */
#define T_MAX_WRITERS 16
void t_tag_fill(void *buf, size_t len, unsigned int w, uint64_t pos);
struct t_demux {
	unsigned int writers;
	uint64_t rec_size[T_MAX_WRITERS]; /* 0: not an atomic writer */
	uint64_t pos[T_MAX_WRITERS]; /* bytes seen of each writer */
	uint64_t fnv[T_MAX_WRITERS];
	uint64_t bad; /* bytes that do not match their writer's stream */
	uint64_t foreign; /* bytes tagged with a writer >= writers */
	uint64_t torn;
	int cur; /* writer of the current run, -1 before the first byte */
};
void t_demux_init(struct t_demux *d, unsigned int writers);
void t_demux_feed(struct t_demux *d, const void *buf, size_t len);
/* Closes the last run (counts a torn last record). */
void t_demux_end(struct t_demux *d);
/* The FNV-1a of writer @w's first @len bytes, as t_demux computes it. */
uint64_t t_tag_fnv(unsigned int w, uint64_t len);

/* The API build of a diff-* program: its writes through spans (api-write.h). */
#ifdef T_API_WRITE
#include "api-write.h"
#endif

#endif
