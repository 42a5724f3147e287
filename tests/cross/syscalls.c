// SPDX-License-Identifier: MIT
/*
 * syscalls: every system call libppipe makes itself (shim/syscall.h's
 * PP_SYSCALL, inline "syscall" on x86_64, "svc 0" on aarch64, by the
 * SYS_ numbers of the architecture's <sys/syscall.h>) does what its name
 * says. A wrong number, a wrong register for an argument or a call that
 * does not exist on the architecture shows as a wrong result here, on the
 * machine or under qemu-aarch64, which translates the guest's numbers.
 *
 * Prints "ok SYS_name", "n/a SYS_name" (not a system call on this
 * architecture: the shim must not need it there) or "FAIL SYS_name: why"
 * for each; test-syscalls.py checks that every SYS_ name shim/ uses is
 * among them. Exit status 1 on any failure.
 */
#include "syscall.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

static void result(const char *name, bool ok, const char *why, long got)
{
	if (ok) {
		printf("ok SYS_%s\n", name);
	} else {
		printf("FAIL SYS_%s: %s (returned %ld)\n", name, why, got);
		failures++;
	}
}

/* Moves n bytes that a check below needs in place; a short count fails it. */
static void move_all(const char *name, ssize_t got, size_t n)
{
	if (got != (ssize_t)n)
		result(name, false, "setup: a short read or write", (long)got);
}

static char tmpl[] = "/tmp/ppipe-syscalls.XXXXXX";

int main(void)
{
	long r;
	int p[2], q[2], sv[2];
	char buf[256];
	int dir = -1;

	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 2;
	}
	dir = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	/* Identity. */
	r = PP_SYSCALL(SYS_getpid);
	result("getpid", r == getpid(), "not getpid()", r);
	r = PP_SYSCALL(SYS_gettid);
	result("gettid", r == gettid(), "not gettid()", r);
	r = PP_SYSCALL(SYS_geteuid);
	result("geteuid", r == (long)geteuid(), "not geteuid()", r);

	/* Pipes and fds. */
	r = PP_SYSCALL(SYS_pipe2, p, O_CLOEXEC);
	result("pipe2", r == 0 && fcntl(p[0], F_GETFD) == FD_CLOEXEC, "no pipe, or no O_CLOEXEC",
	       r);
	r = PP_SYSCALL(SYS_write, p[1], "abc", 3);
	result("write", r == 3, "not 3 bytes written", r);
	r = PP_SYSCALL(SYS_read, p[0], buf, sizeof(buf));
	result("read", r == 3 && !memcmp(buf, "abc", 3), "not the 3 bytes back", r);
	r = PP_SYSCALL(SYS_fcntl, p[1], F_GETFL);
	result("fcntl", r >= 0 && (r & O_ACCMODE) == O_WRONLY, "not the write end's flags", r);
	r = PP_SYSCALL(SYS_dup, p[1]);
	result("dup", r > 2 && fcntl((int)r, F_GETFL) == fcntl(p[1], F_GETFL), "no new fd", r);
	if (r > 2)
		close((int)r);
	r = PP_SYSCALL(SYS_dup3, p[1], 100, O_CLOEXEC);
	result("dup3", r == 100 && fcntl(100, F_GETFD) == FD_CLOEXEC, "not fd 100, O_CLOEXEC", r);
#ifdef SYS_dup2
	r = PP_SYSCALL(SYS_dup2, p[1], 101);
	result("dup2", r == 101 && fcntl(101, F_GETFD) == 0, "not fd 101", r);
#else
	printf("n/a SYS_dup2\n");
	dup2(p[1], 101);
#endif
	r = PP_SYSCALL(SYS_close, 100);
	result("close", r == 0 && fcntl(100, F_GETFD) < 0, "fd 100 still open", r);
	dup2(p[1], 102);
	r = PP_SYSCALL(SYS_close_range, 101, 102, 0);
	result("close_range",
	       (r == 0 && fcntl(101, F_GETFD) < 0 && fcntl(102, F_GETFD) < 0) || r == -ENOSYS,
	       "fds 101-102 still open", r);
	r = PP_SYSCALL(SYS_ioctl, p[0], FIONREAD, buf);
	result("ioctl", r == 0 && *(int *)buf == 0, "FIONREAD of an empty pipe", r);
	r = PP_SYSCALL(SYS_lseek, p[0], 0, SEEK_CUR);
	result("lseek", r == -ESPIPE, "a pipe is not seekable", r);
	struct stat st;
	r = PP_SYSCALL(SYS_fstat, p[0], &st);
	result("fstat", r == 0 && S_ISFIFO(st.st_mode), "not a FIFO", r);
	struct statfs sfs;
	r = PP_SYSCALL(SYS_fstatfs, dir, &sfs);
	result("fstatfs", r == 0 && sfs.f_bsize > 0, "no file system", r);

	/* Moving pages. */
	static char page[65536] __attribute__((aligned(65536)));
	memset(page, 'v', sizeof(page));
	struct iovec iov = { page, 4096 };
	r = PP_SYSCALL(SYS_vmsplice, p[1], &iov, 1, 0);
	result("vmsplice", r == 4096 && read(p[0], buf, 200) == 200 && buf[0] == 'v', "4096 bytes",
	       r);
	move_all("vmsplice drain", read(p[0], page + 8192, 4096 - 200), 4096 - 200);
	struct iovec two[2] = { { (void *)"ab", 2 }, { (void *)"cd", 2 } };
	r = PP_SYSCALL(SYS_writev, p[1], two, 2);
	result("writev", r == 4 && read(p[0], buf, 4) == 4 && !memcmp(buf, "abcd", 4), "abcd", r);
	move_all("readv setup", write(p[1], "efgh", 4), 4);
	struct iovec one = { buf, 4 };
	r = PP_SYSCALL(SYS_readv, p[0], &one, 1);
	result("readv", r == 4 && !memcmp(buf, "efgh", 4), "efgh", r);
	if (pipe(q))
		return 2;
	move_all("splice setup", write(p[1], "splice", 6), 6);
	r = PP_SYSCALL(SYS_splice, p[0], NULL, q[1], NULL, 6, 0);
	result("splice", r == 6 && read(q[0], buf, 6) == 6 && !memcmp(buf, "splice", 6), "6 bytes",
	       r);
	move_all("tee setup", write(p[1], "tee", 3), 3);
	r = PP_SYSCALL(SYS_tee, p[0], q[1], 3, 0);
	result("tee",
	       r == 3 && read(q[0], buf, 3) == 3 && read(p[0], buf + 3, 3) == 3 &&
		       !memcmp(buf, "teetee", 6),
	       "3 bytes in both pipes", r);

	/* Files. */
	r = PP_SYSCALL(SYS_openat, dir, "f", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	int f = (int)r;
	result("openat", r >= 0, "no file made", r);
	r = PP_SYSCALL(SYS_pwrite64, f, "0123456789", 10, 5);
	result("pwrite64", r == 10, "10 bytes at 5", r);
	r = PP_SYSCALL(SYS_pread64, f, buf, 4, 7);
	result("pread64", r == 4 && !memcmp(buf, "2345", 4), "2345 at 7", r);
	r = PP_SYSCALL(SYS_sendfile, p[1], f, NULL, 15);
	result("sendfile", r == 15 && read(p[0], buf, 15) == 15 && !memcmp(buf + 5, "01234", 5),
	       "15 bytes of the file into the pipe", r);
	int t = open(tmpl, O_TMPFILE | O_WRONLY, 0600);
	char from[64];
	snprintf(from, sizeof(from), "/proc/self/fd/%d", t);
	r = t >= 0 ? PP_SYSCALL(SYS_linkat, AT_FDCWD, from, dir, "linked", AT_SYMLINK_FOLLOW) : 0;
	result("linkat", r == 0 && !faccessat(dir, "linked", F_OK, 0), "no link made", r);
	char ents[4096];
	r = PP_SYSCALL(SYS_getdents64, dir, ents, sizeof(ents));
	result("getdents64", r > 0, "no entries", r);

	/* Memory. */
	r = PP_SYSCALL(SYS_mmap, NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	char *m = r < 0 && r > -4096 ? NULL : (char *)r;
	result("mmap", m != NULL, "no mapping", r);
	if (m) {
		m[0] = 1;
		unsigned char vec[1 << 8];
		r = PP_SYSCALL(SYS_mincore, m, 1 << 20, vec);
		result("mincore", r == 0 && (vec[0] & 1), "the touched page is not resident", r);
		r = PP_SYSCALL(SYS_madvise, m, 1 << 20, MADV_DONTNEED);
		result("madvise", r == 0 && m[0] == 0, "MADV_DONTNEED kept the byte", r);
		r = PP_SYSCALL(SYS_mbind, m, 1 << 20, 0 /* MPOL_DEFAULT */, NULL, 0, 0);
		result("mbind", r == 0 || r == -ENOSYS || r == -EPERM, "MPOL_DEFAULT refused", r);
		r = PP_SYSCALL(SYS_munmap, m, 1 << 20);
		result("munmap", r == 0, "not unmapped", r);
	}
	r = PP_SYSCALL(SYS_shmget, IPC_PRIVATE, 65536, IPC_CREAT | 0600);
	int id = (int)r;
	result("shmget", r >= 0, "no segment", r);
	r = PP_SYSCALL(SYS_shmat, id, NULL, 0);
	char *s = r < 0 && r > -4096 ? NULL : (char *)r;
	result("shmat", s != NULL, "not attached", r);
	struct shmid_ds ds;
	r = PP_SYSCALL(SYS_shmctl, id, IPC_STAT, &ds);
	result("shmctl", r == 0 && ds.shm_segsz == 65536 && ds.shm_nattch == 1, "IPC_STAT", r);
	shmctl(id, IPC_RMID, NULL);
	r = s ? PP_SYSCALL(SYS_shmdt, s) : -1;
	result("shmdt", r == 0, "not detached", r);

	/* Time, waiting, signals. */
	struct timespec ts, zero = { 0, 0 };
	r = PP_SYSCALL(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	result("clock_gettime", r == 0 && (ts.tv_sec || ts.tv_nsec), "no time", r);
	r = PP_SYSCALL(SYS_nanosleep, &zero, NULL);
	result("nanosleep", r == 0, "sleep of 0", r);
	r = PP_SYSCALL(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &zero, NULL);
	result("clock_nanosleep", r == 0, "sleep of 0", r);
	struct pollfd pfd = { p[1], POLLOUT, 0 };
	r = PP_SYSCALL(SYS_ppoll, &pfd, 1, &zero, NULL, 8);
	result("ppoll", r == 1 && (pfd.revents & POLLOUT), "an empty pipe is writable", r);
	int word = 0;
	r = PP_SYSCALL(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	result("futex", r == 0, "no waiter to wake", r);
	r = PP_SYSCALL(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
	if (r != -EAGAIN)
		result("futex", false, "FUTEX_WAIT on a changed word", r);
	r = PP_SYSCALL(SYS_kill, getpid(), 0);
	result("kill", r == 0, "signal 0 to itself", r);
	r = PP_SYSCALL(SYS_tgkill, getpid(), gettid(), 0);
	result("tgkill", r == 0, "signal 0 to itself", r);
	r = PP_SYSCALL(SYS_prctl, PR_GET_NAME, buf);
	result("prctl", r == 0 && buf[0], "no name", r);
	struct rlimit lim;
	r = PP_SYSCALL(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &lim);
	result("prlimit64", r == 0 && lim.rlim_cur > 2, "RLIMIT_NOFILE", r);
	r = PP_SYSCALL(SYS_getrandom, buf, 16, 0);
	result("getrandom", r == 16, "16 bytes", r);
	unsigned cpu = 99999, node = 99999;
	r = PP_SYSCALL(SYS_getcpu, &cpu, &node, NULL);
	result("getcpu", r == 0 && cpu < 4096 && node < 4096, "a CPU and a node", r);
	r = PP_SYSCALL(SYS_eventfd2, 5, EFD_CLOEXEC);
	uint64_t ev = 0;
	result("eventfd2", r >= 0 && read((int)r, &ev, 8) == 8 && ev == 5, "a counter of 5", r);

	/* A message with an fd. */
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec mi = { (void *)"m", 1 };
	struct msghdr msg = {
		.msg_iov = &mi, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &p[1], sizeof(int));
	r = PP_SYSCALL(SYS_sendmsg, sv[0], &msg, 0);
	char got[CMSG_SPACE(sizeof(int))];
	struct msghdr in = { .msg_iov = &(struct iovec){ buf, 1 },
			     .msg_iovlen = 1,
			     .msg_control = got,
			     .msg_controllen = sizeof(got) };
	result("sendmsg", r == 1 && recvmsg(sv[1], &in, 0) == 1 && CMSG_FIRSTHDR(&in),
	       "one byte and an fd", r);

	/* The end of a process. */
	pid_t child = fork();
	if (!child) {
		PP_SYSCALL(SYS_exit_group, 42);
		_exit(1);
	}
	int status = 0;
	waitpid(child, &status, 0);
	result("exit_group", WIFEXITED(status) && WEXITSTATUS(status) == 42, "exit status 42",
	       status);

	unlinkat(dir, "f", 0);
	unlinkat(dir, "linked", 0);
	rmdir(tmpl);
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
