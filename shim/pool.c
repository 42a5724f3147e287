// SPDX-License-Identifier: MIT
#include "pool.h"

#include "config.h"
#include "fault.h"
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MPOL_PREFERRED
#define MPOL_PREFERRED 1
#endif
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
#ifndef PR_SET_VMA_ANON_NAME
#define PR_SET_VMA_ANON_NAME 0
#endif

static uint64_t pool_bytes, pool_peak;
static int numa_nodes = -1; /* >1: bind rings to the writer's node */

uint64_t pp_pool_bytes(void)
{
	return __atomic_load_n(&pool_bytes, __ATOMIC_RELAXED);
}

uint64_t pp_pool_peak(void)
{
	return __atomic_load_n(&pool_peak, __ATOMIC_RELAXED);
}

/*
 * The number of online NUMA nodes, from a list such as "0-1,3" (sysfs's
 * node/online). 1 for anything that does not parse.
 */
int pp_parse_node_list(const char *s)
{
	int n = 0;

	while (*s && *s != '\n') {
		long lo = 0, hi;

		if (*s < '0' || *s > '9')
			return 1;
		for (; *s >= '0' && *s <= '9' && lo < 65536; s++)
			lo = lo * 10 + (*s - '0');
		hi = lo;
		if (*s == '-') {
			hi = 0;
			for (s++; *s >= '0' && *s <= '9' && hi < 65536; s++)
				hi = hi * 10 + (*s - '0');
		}
		if (hi < lo || hi >= 65536)
			return 1;
		n += (int)(hi - lo + 1);
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return 1;
	}
	return n ? n : 1;
}

/*
 * Counts the nodes once, at the first ring, with raw system calls: this
 * runs inside a write(), possibly a signal handler's, where loading a
 * library (libnuma) could deadlock in malloc.
 */
static int node_count(void)
{
	int n = __atomic_load_n(&numa_nodes, __ATOMIC_ACQUIRE);

	if (n >= 0)
		return n;
	n = 1;
#ifdef PP_HAVE_NUMA
	{
		char buf[256];
		long fd = PP_SYSCALL(SYS_openat, AT_FDCWD, "/sys/devices/system/node/online",
				     O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			long r = PP_SYSCALL(SYS_read, (int)fd, buf, sizeof(buf) - 1);

			pp_sys_close((int)fd);
			if (r > 0) {
				buf[r] = 0;
				n = pp_parse_node_list(buf);
			}
		}
	}
#endif
	__atomic_store_n(&numa_nodes, n, __ATOMIC_RELEASE);
	pp_debug("numa: %d node%s%s", n, n == 1 ? "" : "s",
		 n > 1 ? ", rings follow the writer's node" : ", no binding");
	return n;
}

int pp_numa_node(void)
{
	unsigned int cpu, node;

	if (pp_cfg.numa_node >= 0)
		return (int)pp_cfg.numa_node;
	if (node_count() <= 1 || PP_SYSCALL(SYS_getcpu, &cpu, &node, NULL))
		return -1;
	return (int)node;
}

/* Prefers @node for [p, p+len) before it is faulted in. */
static void bind_node(void *p, size_t len, int node)
{
	unsigned long mask[16] = { 0 };

	if (node < 0 || node >= (int)(sizeof(mask) * 8))
		return;
	mask[node / (8 * sizeof(long))] |= 1ul << (node % (8 * sizeof(long)));
	long r = PP_SYSCALL(SYS_mbind, p, len, MPOL_PREFERRED, mask, sizeof(mask) * 8, 0);

	if (r)
		pp_debug("mbind to node %d failed: errno %ld", node, -r);
}

void pp_populate(char *p, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (!madvise(p, len, MADV_POPULATE_WRITE))
		return;
	for (size_t off = 0; off < len; off += page)
		__atomic_store_n(&p[off], 0, __ATOMIC_RELAXED);
}

#define HUGE_SIZE (2ul << 20)

/* With @aligned: map HUGE_SIZE more and cut off the misaligned head and tail. */
static char *map_aligned(size_t len, bool aligned)
{
	size_t extra = aligned ? HUGE_SIZE : 0, head;
	char *p = pp_fault(PP_FAULT_MMAP) ? MAP_FAILED :
					    mmap(NULL, len + extra, PROT_READ | PROT_WRITE,
						 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || !aligned)
		return p;
	head = (HUGE_SIZE - (uintptr_t)p % HUGE_SIZE) % HUGE_SIZE;
	if (head)
		munmap(p, head);
	if (extra - head)
		munmap(p + head + len, extra - head);
	return p + head;
}

/* 0 once the kernel said it names no anonymous mappings (no CONFIG_ANON_VMA_NAME). */
static int naming = 1;

/*
 * Names [p, p+len) PP_POOL_NAME, so that /proc/PID/smaps shows ring
 * memory as "[anon:libppipe-ring]" (what a tree's ring memory adds up
 * to). One system call per mapping, none more after the kernel said
 * EINVAL: it cannot (before 5.17, or without CONFIG_ANON_VMA_NAME).
 */
static void name_mapping(char *p, size_t len)
{
	long r;

	if (!__atomic_load_n(&naming, __ATOMIC_RELAXED))
		return;
	r = PP_SYSCALL(SYS_prctl, PR_SET_VMA, PR_SET_VMA_ANON_NAME, p, len, PP_POOL_NAME);
	if (r == -EINVAL && __atomic_exchange_n(&naming, 0, __ATOMIC_RELAXED))
		pp_debug("ring mappings are not named here (no CONFIG_ANON_VMA_NAME): "
			 "smaps shows them as anonymous memory");
}

/*
 * The advice every ring mapping carries: no fork inheritance, the page
 * size, the node, the name. A mapping made anew in place (a huge-page
 * switch) gets it all again.
 */
static void advise(char *p, size_t len, bool huge)
{
	/* Fork children never see ring pages: no COW on the parent's next copy. */
	madvise(p, len, MADV_DONTFORK);
	madvise(p, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	bind_node(p, len, pp_numa_node());
	name_mapping(p, len);
}

bool pp_pool_replace(void *p, size_t len, bool huge)
{
	int saved = errno;
	void *q = pp_fault(PP_FAULT_THP) ? MAP_FAILED :
					   mmap(p, len, PROT_READ | PROT_WRITE,
						MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

	errno = saved;
	if (q == MAP_FAILED)
		return false;
	advise(p, len, huge);
	return true;
}

void *pp_pool_map(size_t len, bool aligned, bool huge)
{
	uint64_t now = __atomic_add_fetch(&pool_bytes, len, __ATOMIC_RELAXED);
	uint64_t peak = __atomic_load_n(&pool_peak, __ATOMIC_RELAXED);
	int saved = errno;
	char *p;

	if (now > pp_cfg.pool_max) {
		__atomic_sub_fetch(&pool_bytes, len, __ATOMIC_RELAXED);
		return NULL;
	}
	p = map_aligned(len, aligned || huge);
	if (p == MAP_FAILED) {
		__atomic_sub_fetch(&pool_bytes, len, __ATOMIC_RELAXED);
		errno = saved;
		return NULL;
	}
	advise(p, len, huge);
	while (now > peak && !__atomic_compare_exchange_n(&pool_peak, &peak, now, true,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	errno = saved;
	return p;
}

void pp_pool_unmap(void *p, size_t len)
{
	int saved = errno;

	if (!p)
		return;
	munmap(p, len);
	__atomic_sub_fetch(&pool_bytes, len, __ATOMIC_RELAXED);
	errno = saved;
}

void pp_pool_reset(void)
{
	pool_bytes = 0;
}
