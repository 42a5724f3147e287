// SPDX-License-Identifier: MIT
/*
 * diff-restricted: large writes where a library cannot do its trick.
 *
 * Each case runs in a child that first restricts itself and then streams
 * large writes into a new pipe: vmsplice() refused by a seccomp filter
 * (EPERM; then ENOSYS, together with io_uring_setup), the address space
 * limited to what the process already uses (RLIMIT_AS: no new mapping
 * larger than a few pages can be made) with RLIMIT_MEMLOCK at 0. On a
 * plain pipe none of this matters; a library must fall back to the real
 * write() with the same results, not fail or crash.
 */
#include "helpers.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOTAL (6 * T_MIB)

static unsigned char *src;

static size_t vm_size(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	unsigned long pages = 0;

	if (!f || fscanf(f, "%lu", &pages) != 1)
		t_die("statm");
	fclose(f);
	return pages * T_PAGE;
}

enum how { H_SECCOMP_EPERM, H_SECCOMP_ENOSYS, H_RLIMIT };
static const char *const how_name[] = { "vmsplice denied (EPERM)",
					"vmsplice and io_uring_setup denied (ENOSYS)",
					"RLIMIT_AS at current size, RLIMIT_MEMLOCK 0" };

struct outcome {
	int restricted;
	int err;
	int probe_ok;
	int writes_full;
	uint64_t written;
	int done;
};

static void one(enum how h)
{
	struct outcome *o = t_shared(sizeof(*o));
	struct t_read_result *res = t_shared(sizeof(*res));
	uint64_t seed = 1500 + (uint64_t)h;
	pid_t pid = t_fork();

	if (!pid) {
		struct t_reader rd;
		int p[2];

		/* Everything this child needs exists before the restriction. */
		t_pipe(p, 0);
		t_reader_start(&rd, p[0], 65536, seed, 0, 0);
		t_close(p[0]);
		int r;

		if (h == H_SECCOMP_EPERM) {
			r = t_seccomp_deny(__NR_vmsplice, __NR_vmsplice, EPERM);
		} else if (h == H_SECCOMP_ENOSYS) {
			r = t_seccomp_deny(__NR_vmsplice, __NR_io_uring_setup, ENOSYS);
		} else {
			struct rlimit ml = { 0, 0 };
			size_t cur = vm_size() + 64 * T_KIB;
			struct rlimit as = { cur, cur };

			r = setrlimit(RLIMIT_MEMLOCK, &ml) || setrlimit(RLIMIT_AS, &as) ? -1 : 0;
		}
		o->restricted = r == 0;
#ifdef T_API_WRITE
		/* No memory for a span's buffer where write() needs none: write() (api-write.h). */
		t_api_enomem_write = h == H_RLIMIT;
#endif
		o->err = r ? errno : 0;
		/* The restriction really holds. */
		if (h == H_RLIMIT) {
			void *m = mmap(NULL, T_MIB, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			o->probe_ok = m == MAP_FAILED && errno == ENOMEM;
		} else {
			struct iovec iov = { src, 1 };

			o->probe_ok = syscall(__NR_vmsplice, p[1], &iov, 1, 0) < 0 &&
				      errno == (h == H_SECCOMP_EPERM ? EPERM : ENOSYS);
			/* The probe may have sent nothing: the stream starts at 0 either way. */
		}
		uint64_t pos = 0;

		o->writes_full = 1;
		while (pos < TOTAL) {
			size_t n = pos % 3 ? 1048583 : 70001;

			if (n > TOTAL - pos)
				n = (size_t)(TOTAL - pos);
			t_fill(src, n, seed, pos);
			ssize_t w = write(p[1], src, n);

			t_scribble(src, n);
			if (w != (ssize_t)n) {
				o->writes_full = 0;
				if (w <= 0)
					break;
			}
			pos += (uint64_t)w;
		}
		o->written = pos;
		t_close(p[1]);
		int st = t_wait(rd.pid);

		memcpy(res, rd.res, sizeof(*res));
		o->done = WIFEXITED(st) && !WEXITSTATUS(st);
		exit(0);
	}
	int st = t_wait(pid);

	if (!o->restricted) {
		t_log("%s: cannot restrict (%s)", how_name[h], t_errname(o->err));
		t_skip("%s not available here", how_name[h]);
	}
	bool ok = o->done && o->writes_full && res->bytes == o->written && res->bytes == TOTAL &&
		  res->first_bad == UINT64_MAX && !res->err;

	t_log("%s: restriction holds: %s; child %s; writes all full: %s; reader read=%llu "
	      "fnv=%016llx %s",
	      how_name[h], o->probe_ok ? "yes" : "NO", t_status(st), o->writes_full ? "yes" : "NO",
	      (unsigned long long)res->bytes, (unsigned long long)res->fnv, ok ? "ok" : "BAD");
	t_check(ok && o->probe_ok, "%s: the stream did not get through intact", how_name[h]);
	munmap(o, sizeof(*o));
	munmap(res, sizeof(*res));
}

int main(void)
{
	t_init("diff-restricted");
	src = (unsigned char *)t_map(2 * T_MIB) + 1;
	one(H_SECCOMP_EPERM);
	one(H_SECCOMP_ENOSYS);
	one(H_RLIMIT);
	return t_finish();
}
