// SPDX-License-Identifier: MIT
/*
 * stdio-wrappers: every stdio name libppipe exports (shim/interpose_stdio.c)
 * is libppipe's in the process, and reaches libc's function: the bytes and
 * the results are libc's. Each wrapper finds libc's definition on its first
 * call, so the calls are made where that first call happens: in fork
 * children that never called them before (the shell's subshell running a
 * builtin), for stdout and stderr reopened on files, for a byte stream and
 * for a wide one; then in the process itself. A pipe write of 256 KiB comes
 * first, so that under write-behind (PPIPE_MODE=uring) the wrappers take
 * their slow path, which flushes what is staged before calling libc.
 * Run with LD_PRELOAD=libppipe, with and without PPIPE_MODE=uring.
 */
/* Both fseeko and fseeko64 (fsetpos, fsetpos64) are called here: no renaming by the headers. */
#undef _FILE_OFFSET_BITS
#include "helpers.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wchar.h>

/* The _FORTIFY_SOURCE forms and libc's buffer overflow entry: no header declares them all. */
int __overflow(FILE *f, int c);
int __fprintf_chk(FILE *f, int flag, const char *fmt, ...);
int __printf_chk(int flag, const char *fmt, ...);
int __dprintf_chk(int fd, int flag, const char *fmt, ...);
int __vfprintf_chk(FILE *f, int flag, const char *fmt, va_list ap);
int __vprintf_chk(int flag, const char *fmt, va_list ap);
int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap);
int __fwprintf_chk(FILE *f, int flag, const wchar_t *fmt, ...);
int __wprintf_chk(int flag, const wchar_t *fmt, ...);
int __vfwprintf_chk(FILE *f, int flag, const wchar_t *fmt, va_list ap);
int __vwprintf_chk(int flag, const wchar_t *fmt, va_list ap);

static const char *const names[] = {
	"fwrite",
	"fwrite_unlocked",
	"fputs",
	"fputs_unlocked",
	"puts",
	"fputc",
	"fputc_unlocked",
	"putc",
	"putc_unlocked",
	"putchar",
	"putchar_unlocked",
	"__overflow",
	"perror",
	"vfprintf",
	"vprintf",
	"vdprintf",
	"fprintf",
	"printf",
	"dprintf",
	"__vfprintf_chk",
	"__vprintf_chk",
	"__vdprintf_chk",
	"__fprintf_chk",
	"__printf_chk",
	"__dprintf_chk",
	"fputwc",
	"putwc",
	"putwchar",
	"fputws",
	"vfwprintf",
	"vwprintf",
	"fwprintf",
	"wprintf",
	"__vfwprintf_chk",
	"__vwprintf_chk",
	"__fwprintf_chk",
	"__wprintf_chk",
	"fclose",
	"freopen",
	"freopen64",
	"fflush",
	"fflush_unlocked",
	"fcloseall",
	"fseek",
	"fseeko",
	"fseeko64",
	"fsetpos",
	"fsetpos64",
	"rewind",
};

/* The va_list forms, called through the variadic helpers below. */
static int via_vfprintf(FILE *f, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

static int via_vfprintf_chk(FILE *f, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = __vfprintf_chk(f, 1, fmt, ap);
	va_end(ap);
	return r;
}

static int via_vprintf(int chk, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = chk ? __vprintf_chk(1, fmt, ap) : vprintf(fmt, ap);
	va_end(ap);
	return r;
}

static int via_vdprintf(int fd, int chk, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = chk ? __vdprintf_chk(fd, 1, fmt, ap) : vdprintf(fd, fmt, ap);
	va_end(ap);
	return r;
}

static int via_vfwprintf(FILE *f, int chk, const wchar_t *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = chk ? __vfwprintf_chk(f, 1, fmt, ap) : vfwprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

static int via_vwprintf(int chk, const wchar_t *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = chk ? __vwprintf_chk(1, fmt, ap) : vwprintf(fmt, ap);
	va_end(ap);
	return r;
}

/* A child's failures: its exit status counts them, the parent reports. */
static int bad;

static void want(bool ok, const char *what)
{
	if (!ok) {
		bad++;
		dprintf(STDERR_FILENO, "stdio-wrappers: %s failed (errno %d)\n", what, errno);
	}
}

/* The byte calls on @f, a file read back later: each writes one token. */
#define BYTES_EXPECTED "a1a2a3a4a5a6a7a8a9b0b1b2b3b4b5b6b7b8b9c0"
static void byte_calls(FILE *f)
{
	fpos_t pos;
	fpos64_t pos64;

	want(fwrite("a1", 1, 2, f) == 2, "fwrite");
	want(fwrite_unlocked("a2", 2, 1, f) == 1, "fwrite_unlocked");
	want(fputs("a3", f) >= 0, "fputs");
	want(fputs_unlocked("a4", f) >= 0, "fputs_unlocked");
	want(fputc('a', f) == 'a' && fputc_unlocked('5', f) == '5', "fputc, fputc_unlocked");
	want(putc('a', f) == 'a' && putc_unlocked('6', f) == '6', "putc, putc_unlocked");
	want(__overflow(f, 'a') == 'a' && __overflow(f, '7') == '7', "__overflow");
	want(fprintf(f, "a%d", 8) == 2, "fprintf");
	want(via_vfprintf(f, "a%c", '9') == 2, "vfprintf");
	want(__fprintf_chk(f, 1, "b%d", 0) == 2, "__fprintf_chk");
	want(via_vfprintf_chk(f, "b%s", "1") == 2, "__vfprintf_chk");
	want(fflush(f) == 0 && fflush_unlocked(f) == 0, "fflush, fflush_unlocked");
	/* The fd calls go around the stream: it seeks to the end after them. */
	want(dprintf(fileno(f), "b%d", 2) == 2, "dprintf");
	want(via_vdprintf(fileno(f), 0, "b%d", 3) == 2, "vdprintf");
	want(__dprintf_chk(fileno(f), 1, "b%d", 4) == 2, "__dprintf_chk");
	want(via_vdprintf(fileno(f), 1, "b%d", 5) == 2, "__vdprintf_chk");
	want(fseek(f, 0, SEEK_END) == 0 && ftell(f) == 30, "fseek");
	want(fputs("b6", f) >= 0 && fseeko(f, 0, SEEK_END) == 0, "fseeko");
	want(fputs("b7", f) >= 0 && fseeko64(f, 0, SEEK_END) == 0, "fseeko64");
	want(fgetpos(f, &pos) == 0 && fputs("b8", f) >= 0 && fsetpos(f, &pos) == 0 &&
		     fputs("xx", f) >= 0 && fseek(f, -2, SEEK_CUR) == 0 && fputs("b8", f) >= 0,
	     "fsetpos");
	want(fgetpos64(f, &pos64) == 0 && fputs("b9", f) >= 0 && fsetpos64(f, &pos64) == 0 &&
		     fputs("b9", f) >= 0,
	     "fsetpos64");
	want(fputs("c0", f) >= 0 && fflush(NULL) == 0, "fflush(NULL)");
}

/* The wide calls on @f, a stream not yet oriented. */
#define WIDE_EXPECTED "w1w2w3w4w5w6w7w8w9"
static void wide_calls(FILE *f)
{
	want(fputwc(L'w', f) == L'w' && fputwc(L'1', f) == L'1', "fputwc");
	want(putwc(L'w', f) == L'w' && putwc(L'2', f) == L'2', "putwc");
	want(fputws(L"w3", f) >= 0, "fputws");
	want(fwprintf(f, L"w%d", 4) == 2, "fwprintf");
	want(via_vfwprintf(f, 0, L"w%d", 5) == 2, "vfwprintf");
	want(__fwprintf_chk(f, 1, L"w%d", 6) == 2, "__fwprintf_chk");
	want(via_vfwprintf(f, 1, L"w%d", 7) == 2, "__vfwprintf_chk");
	if (f == stdout) {
		want(putwchar(L'w') == L'w' && putwchar(L'8') == L'8', "putwchar");
		want(wprintf(L"w%d", 9) == 2, "wprintf");
	} else {
		want(fputws(L"w8w9", f) >= 0, "fputws");
	}
}

#define STDOUT_BYTES "s1\ns2s3s4s5s6s7s8"
static void stdout_calls(void)
{
	want(puts("s1") >= 0, "puts");
	want(putchar('s') == 's' && putchar_unlocked('2') == '2', "putchar, putchar_unlocked");
	want(printf("s%d", 3) == 2, "printf");
	want(via_vprintf(0, "s%d", 4) == 2, "vprintf");
	want(__printf_chk(1, "s%d", 5) == 2, "__printf_chk");
	want(via_vprintf(1, "s%d", 6) == 2, "__vprintf_chk");
	want(printf("s7") == 2 && fflush(stdout) == 0, "printf, fflush(stdout)");
	want(printf("s8") == 2, "printf");
}

static void wstdout_calls(void)
{
	wide_calls(stdout);
	want(via_vwprintf(0, L"") == 0 && via_vwprintf(1, L"") == 0, "vwprintf, __vwprintf_chk");
	want(__wprintf_chk(1, L"") == 0, "__wprintf_chk");
}

/* The file @path holds exactly @want. */
static void check_file(const char *path, const char *expect, const char *what)
{
	char got[512];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		t_die("open %s", path);
	n = read(fd, got, sizeof(got) - 1);
	close(fd);
	got[n < 0 ? 0 : n] = '\0';
	t_check(strcmp(got, expect) == 0, "%s: \"%s\", want \"%s\"", what, got, expect);
}

/* Runs @fn in a fork child; its failures are counted in its exit status. */
static void in_child(void (*fn)(const char *), const char *path, const char *what)
{
	int status;
	pid_t c = fork();

	if (c < 0)
		t_die("fork");
	if (c == 0) {
		alarm(30);
		fn(path);
		_exit(bad > 100 ? 100 : bad);
	}
	if (waitpid(c, &status, 0) != c)
		t_die("waitpid");
	t_check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s child: %s", what,
		t_status(status));
}

static void child_bytes(const char *path)
{
	FILE *f = fopen(path, "w+");

	want(f != NULL, "fopen");
	if (f) {
		byte_calls(f);
		want(fclose(f) == 0, "fclose");
	}
}

static void child_stdout(const char *path)
{
	char err[256];

	snprintf(err, sizeof(err), "%s.err", path);
	want(freopen(path, "w", stdout) == stdout, "freopen(stdout)");
	want(freopen64(err, "w", stderr) == stderr, "freopen64(stderr)");
	stdout_calls();
	errno = ENOENT;
	perror("e1");
	want(fcloseall() == 0, "fcloseall");
}

static void child_wide_stdout(const char *path)
{
	want(freopen(path, "w", stdout) == stdout, "freopen(stdout)");
	wstdout_calls();
	want(fclose(stdout) == 0, "fclose(stdout)");
}

static void child_rewind(const char *path)
{
	FILE *f = fopen(path, "w+");

	want(f != NULL, "fopen");
	if (f) {
		want(fputs("r0r1", f) >= 0, "fputs");
		rewind(f);
		want(fputs("r2", f) >= 0 && fclose(f) == 0, "rewind, fclose");
	}
}

/* Reads the pipe @arg to its end. */
static void *drain(void *arg)
{
	static char sink[65536];

	while (read(*(int *)arg, sink, sizeof(sink)) > 0)
		;
	return NULL;
}

int main(void)
{
	char dir[] = "/tmp/stdio-wrappers.XXXXXX", path[128], err[160];
	static char block[256 * 1024];
	pthread_t reader;
	int p[2];

	t_init("stdio-wrappers");
	for (size_t i = 0; i < T_ARRAY_SIZE(names); i++) {
		void *fn = dlsym(RTLD_DEFAULT, names[i]);
		Dl_info info;

		t_check(fn && dladdr(fn, &info) && info.dli_fname &&
				strstr(info.dli_fname, "libppipe"),
			"%s is libppipe's (found in %s)", names[i],
			fn && dladdr(fn, &info) && info.dli_fname ? info.dli_fname : "nothing");
	}
	if (!mkdtemp(dir))
		t_die("mkdtemp");

	/* A large pipe write first: under write-behind the wrappers then flush before libc. */
	t_pipe(p, 0);
	if (pthread_create(&reader, NULL, drain, &p[0]))
		t_die("pthread_create");
	memset(block, 'x', sizeof(block));
	t_check(t_write_all(p[1], block, sizeof(block)) == (ssize_t)sizeof(block), "pipe write");
	t_close(p[1]);
	pthread_join(reader, NULL);
	t_close(p[0]);

	snprintf(path, sizeof(path), "%s/bytes", dir);
	in_child(child_bytes, path, "byte stream");
	check_file(path, BYTES_EXPECTED, "byte stream (child)");
	snprintf(path, sizeof(path), "%s/stdout", dir);
	snprintf(err, sizeof(err), "%s.err", path);
	in_child(child_stdout, path, "stdout");
	check_file(path, STDOUT_BYTES, "stdout (child)");
	check_file(err, "e1: No such file or directory\n", "perror (child)");
	snprintf(path, sizeof(path), "%s/wide", dir);
	in_child(child_wide_stdout, path, "wide stdout");
	check_file(path, WIDE_EXPECTED, "wide stdout (child)");
	snprintf(path, sizeof(path), "%s/rewind", dir);
	in_child(child_rewind, path, "rewind");
	check_file(path, "r2r1", "rewind (child)");

	/* Then in the process itself: a byte stream and a wide one. */
	snprintf(path, sizeof(path), "%s/bytes2", dir);
	child_bytes(path);
	check_file(path, BYTES_EXPECTED, "byte stream");
	snprintf(path, sizeof(path), "%s/wide2", dir);
	{
		FILE *f = fopen(path, "w");

		if (!f)
			t_die("fopen");
		wide_calls(f);
		want(fclose(f) == 0, "fclose");
	}
	check_file(path, WIDE_EXPECTED, "wide stream");
	t_check(bad == 0, "%d calls in the process failed", bad);

	for (const char *n = "bytes\0stdout\0stdout.err\0wide\0rewind\0bytes2\0wide2\0"; *n;
	     n += strlen(n) + 1) {
		snprintf(path, sizeof(path), "%s/%s", dir, n);
		unlink(path);
	}
	rmdir(dir);
	return t_finish();
}
