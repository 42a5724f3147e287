// SPDX-License-Identifier: MIT
/*
 * pp_real_bind() finds, name by name, what dlsym(RTLD_NEXT) finds. Linked
 * into this program, "next" is every object loaded after it: first the
 * pass-through library this test is linked against (it defines write,
 * read, pipe, pipe2 and close), then libc, whose names come in every
 * shape the walk must tell apart (default and hidden versions, IFUNCs
 * elsewhere in the same tables).
 */
#include "check.h"
#include "real.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The file of the object that defines @fn, or "". */
static const char *where(void *fn)
{
	Dl_info info;

	return fn && dladdr(fn, &info) && info.dli_fname ? info.dli_fname : "";
}

int main(void)
{
	/* A call through the pass-through library: the link keeps it loaded. */
	CHECK(close(-1) == -1, "close(-1) succeeded");
	pp_real_bind();
#define CHECK_ONE(ret, name, params)                                                          \
	{                                                                                     \
		void *want = dlsym(RTLD_NEXT, #name), *got = (void *)pp_real.name;            \
		CHECK(got == want, "%s: %p (%s), dlsym says %p (%s)", #name, got, where(got), \
		      want, where(want));                                                     \
	}
	PP_REAL_FUNCS(CHECK_ONE)
#undef CHECK_ONE
	/*
	 * The first definition after this program wins: the pass-through
	 * library's, then libc's. A sanitizer build loads its runtime before
	 * both, and the runtime defines these names too: there the checks
	 * above (the same object as dlsym) are all there is to check.
	 */
	if (strstr(where((void *)pp_real.write), "san.so")) {
		fprintf(stderr,
			"note: %s comes first; which object defines what is dlsym's check\n",
			where((void *)pp_real.write));
	} else {
		CHECK(strstr(where((void *)pp_real.write), "passthru"), "write from %s",
		      where((void *)pp_real.write));
		CHECK(strstr(where((void *)pp_real.dup2), "libc"), "dup2 from %s",
		      where((void *)pp_real.dup2));
	}
	/* Binding again changes nothing. */
	{
		void *before = (void *)pp_real.posix_spawn;

		pp_real_bind();
		CHECK((void *)pp_real.posix_spawn == before, "bound twice");
	}
	return failures ? 1 : 0;
}
