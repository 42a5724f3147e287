// SPDX-License-Identifier: MIT
/*
 * pp_user_bad() decides which pointers libppipe follows before a system
 * call: what it calls bad is left to the kernel's EFAULT, with libppipe's
 * bookkeeping skipped (no pipe end marked as sent, no exec charged). So it
 * must call bad only what cannot be read: never the stack, the heap or a
 * mapping, wherever the kernel put them (aarch64 puts them just below 2^48,
 * 5-level paging above 2^47 when asked), and above the common top only
 * what mincore() finds unmapped, page by page, over ranges of many pages.
 */
#include "check.h"
#include "faultguard.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

extern char **environ;

int main(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	int local = 1;
	char *heap = malloc(100);
	char *map =
		mmap(NULL, 200 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *high;

	CHECK(heap && map != MAP_FAILED, "no memory");
	/* What every process can read is never bad. */
	CHECK(!pp_user_bad(&local, sizeof(local)), "the stack (%p) called bad", (void *)&local);
	CHECK(!pp_user_bad(heap, 100), "the heap (%p) called bad", (void *)heap);
	CHECK(!pp_user_bad(map, 200 * page), "a mapping (%p) called bad", (void *)map);
	CHECK(!pp_user_bad(environ, sizeof(char *)), "environ (%p) called bad", (void *)environ);
	CHECK(!pp_user_bad("literal", 8), "a string literal called bad");
	/* What no process can read is. */
	CHECK(pp_user_bad(NULL, 1), "NULL not bad");
	CHECK(pp_user_bad((void *)4095, 1), "the first page not bad");
	CHECK(pp_user_bad((void *)(UINTPTR_MAX - 10), 100), "a wrapping range not bad");
#if UINTPTR_MAX > 0xffffffffu
	CHECK(pp_user_bad((void *)0xffff800000001000ul, 8), "the kernel's half not bad");
	CHECK(pp_user_bad((void *)(uintptr_t)(PP_USER_COMMON_TOP + 16 * page), 8),
	      "an unmapped page above the common top not bad");
	/* A mapping above the common top, where the kernel gives one (5-level paging, 52-bit VAs). */
	high = mmap((void *)(uintptr_t)(PP_USER_COMMON_TOP << 2), page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (high != MAP_FAILED && (uintptr_t)high > PP_USER_COMMON_TOP)
		CHECK(!pp_user_bad(high, page), "a mapping above the common top (%p) called bad",
		      (void *)high);
	else
		printf("no mapping above %#llx here: that case is not run\n",
		       (unsigned long long)PP_USER_COMMON_TOP);
#else
	(void)high;
#endif
	/* The kernel's answer, over ranges of many pages (mincore in chunks of 64). */
	CHECK(!pp_user_unmapped((uintptr_t)map + 3, 200 * page - 3), "200 mapped pages: unmapped");
	munmap(map + 150 * page, page);
	CHECK(pp_user_unmapped((uintptr_t)map, 200 * page), "page 150 of 200 unmapped: not seen");
	CHECK(!pp_user_unmapped((uintptr_t)map, 150 * page), "pages 0-149: unmapped");
	CHECK(pp_user_unmapped((uintptr_t)map + 150 * page + 1, 1), "inside page 150: not seen");
	CHECK(!pp_user_unmapped((uintptr_t)map + 151 * page, 49 * page), "pages 151-199: unmapped");
	free(heap);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}
