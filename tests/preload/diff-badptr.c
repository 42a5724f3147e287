// SPDX-License-Identifier: MIT
/*
 * diff-badptr: the calls libppipe interposes that read what the caller
 * hands them (writev()'s iovec array, sendmsg()'s header and control
 * data, an exec's path and environment, execveat()'s path, posix_spawn()'s
 * environment, an exec from a vfork() child), given memory that cannot
 * be read. The kernel answers EFAULT; libppipe must read nothing the
 * kernel would refuse, and never kill a process the kernel answers. Each
 * call runs in a fork child, so a crash is a line of the transcript, in a
 * process that holds a pipe of its own (what makes libppipe look at these
 * calls at all):
 *   - first before any large write, when libppipe's fault handler is not
 *     in place yet: pointers into the first page and the kernel's half,
 *     which no process can read;
 *   - then after one, with the handler in place: also an unmapped page
 *     and a PROT_NONE page, which only reading can tell.
 */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int pw = -1, sock = -1, devnull = -1;
static const void *bad;

static long try_writev_pipe(void)
{
	return writev(pw, bad, 2);
}

static long try_writev_other(void)
{
	return writev(devnull, bad, 1);
}

static long try_sendmsg_header(void)
{
	return sendmsg(sock, bad, 0);
}

static long try_sendmsg_control(void)
{
	char byte = 'x';
	struct iovec v = { &byte, 1 };
	struct msghdr m = {
		.msg_iov = &v, .msg_iovlen = 1, .msg_control = (void *)bad, .msg_controllen = 64
	};

	return sendmsg(sock, &m, 0);
}

static char *argv_true[] = { "/bin/true", NULL };

static long try_execve_envp(void)
{
	return execve("/bin/true", argv_true, (char *const *)bad);
}

static long try_execve_entry(void)
{
	char *envp[] = { "A=1", (char *)bad, NULL };

	return execve("/bin/true", argv_true, envp);
}

static long try_execve_path(void)
{
	return execve(bad, argv_true, environ);
}

static long try_execveat_path(void)
{
	return execveat(AT_FDCWD, bad, argv_true, environ, 0);
}

static long try_spawn_envp(void)
{
	pid_t pid;
	int e = posix_spawn(&pid, "/bin/true", NULL, NULL, argv_true, (char *const *)bad);

	if (!e) {
		waitpid(pid, NULL, 0);
		return 0;
	}
	errno = e;
	return -1;
}

/* As Python's subprocess execs: from a vfork() child, on the parent's memory. */
static long try_vfork_execve_envp(void)
{
	static volatile int err;
	int status;
	pid_t c;

	err = 0;
	c = vfork();
	if (c == 0) {
		execve("/bin/true", argv_true, (char *const *)bad);
		err = errno;
		_exit(127);
	}
	if (c < 0 || waitpid(c, &status, 0) != c)
		t_die("vfork");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 127)
		t_log("the vfork child: %s", t_status(status));
	errno = err;
	return err ? -1 : 0;
}

static const struct {
	const char *name;
	long (*call)(void);
} calls[] = {
	{ "writev(pipe, bad iov)", try_writev_pipe },
	{ "writev(/dev/null, bad iov)", try_writev_other },
	{ "sendmsg(bad header)", try_sendmsg_header },
	{ "sendmsg(bad control)", try_sendmsg_control },
	{ "execve(bad envp)", try_execve_envp },
	{ "execve(bad envp entry)", try_execve_entry },
	{ "execve(bad path)", try_execve_path },
	{ "execveat(bad path)", try_execveat_path },
	{ "posix_spawn(bad envp)", try_spawn_envp },
	{ "vfork, execve(bad envp)", try_vfork_execve_envp },
};

/* Every call, each in a child, with @p as the bad pointer. */
static void each_call(const char *what, const void *p)
{
	bad = p;
	for (size_t i = 0; i < T_ARRAY_SIZE(calls); i++) {
		int status;
		pid_t c = fork();

		if (c < 0)
			t_die("fork");
		if (c == 0) {
			long r;

			alarm(10);
			errno = 0;
			r = calls[i].call();
			t_log("%s, %s: %s", calls[i].name, what, t_res(r, errno));
			_exit(0);
		}
		if (waitpid(c, &status, 0) != c)
			t_die("waitpid");
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			t_log("%s, %s: child %s", calls[i].name, what, t_status(status));
	}
}

static void *drain(void *arg)
{
	static char sink[65536];

	while (read(*(int *)arg, sink, sizeof(sink)) > 0)
		;
	return NULL;
}

int main(void)
{
	static char block[256 * 1024];
	int p[2], sv[2];
	pthread_t reader;
	char *unmapped, *none;

	t_init("diff-badptr");
	t_pipe(p, 0);
	pw = p[1];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		t_die("socketpair");
	sock = sv[0];
	devnull = open("/dev/null", O_WRONLY);
	if (devnull < 0)
		t_die("open /dev/null");
	unmapped = mmap(NULL, T_PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	none = mmap(NULL, T_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (unmapped == MAP_FAILED || none == MAP_FAILED || munmap(unmapped, T_PAGE))
		t_die("mmap");

	each_call("first page, before a large write", (const void *)8);
	each_call("kernel half, before a large write", (const void *)0xffff800000001000ul);

	/* A large write, which libppipe takes (its fault handler goes in place with it). */
	if (pthread_create(&reader, NULL, drain, &p[0]))
		t_die("pthread_create");
	memset(block, 'b', sizeof(block));
	t_log("large write: %s", t_res(t_write_all(pw, block, sizeof(block)), errno));

	each_call("first page", (const void *)8);
	each_call("unmapped page", unmapped);
	each_call("PROT_NONE page", none);

	t_close(pw);
	pthread_join(reader, NULL);
	t_close(p[0]);
	return t_finish();
}
