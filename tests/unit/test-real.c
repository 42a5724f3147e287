// SPDX-License-Identifier: MIT
/*
 * pp_real_bind_one() and pp_real_bind_all() find, name by name, what
 * dlsym(RTLD_NEXT) finds, and bind nothing before it is needed. Linked
 * into this program, "next" is every object loaded after it: first the
 * pass-through library this test is linked against (it defines write,
 * read, pipe, pipe2 and close), then libc, whose names come in every
 * shape the walk must tell apart (default and hidden versions, IFUNCs
 * elsewhere in the same tables). pp_real_next(), which binds a name on
 * first use later in the process, finds the same as dlsym too, for names
 * of both kinds and for names no object defines, and does not search an
 * object dlopen() loaded with RTLD_LOCAL, which dlsym does not either.
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
	pp_real_start();
	/* Nothing is bound before it is needed (the test calls none of them through libppipe). */
#define CHECK_NONE(ret, name, params) CHECK(!pp_real.name, "%s bound before it was needed", #name);
	PP_REAL_FUNCS(CHECK_NONE)
#undef CHECK_NONE
	/* One by one: the first half of the list. */
	for (int k = 0; k < PP_REAL_COUNT / 2; k++)
		pp_real_bind_one((enum pp_real_index)k);
	CHECK(pp_real.write && !pp_real.sigaction, "bound one by one: write %p, sigaction %p",
	      (void *)pp_real.write, (void *)pp_real.sigaction);
	/* The rest at once, as before a fork. */
	pp_real_bind_all();
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
	/* Names bound on first use: libc's stdio, the pass-through library's, none. */
	{
		static const char *const later[] = { "fputs",	       "__overflow",
						     "__vfprintf_chk", "fseeko64",
						     "freopen64",      "read",
						     "close",	       "ppipe_no_such_function" };

		for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); i++) {
			void *want = dlsym(RTLD_NEXT, later[i]), *got = pp_real_next(later[i]);

			CHECK(got == want, "next %s: %p (%s), dlsym says %p (%s)", later[i], got,
			      where(got), want, where(want));
		}
		CHECK(!pp_real_next("ppipe_no_such_function"), "a name defined nowhere was found");
	}
	/*
	 * An object loaded later is in the list the walk follows, but outside
	 * the global scope while it is RTLD_LOCAL: neither finds its names.
	 * Made RTLD_GLOBAL, dlsym finds them, and so does pp_real_next (through
	 * dlsym: the walk stops at the objects loaded at start). zlib is on
	 * every Debian system; elsewhere this part is skipped.
	 */
	{
		void *z = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);

		if (!z) {
			fprintf(stderr, "note: no libz.so.1 (%s): dlopen part skipped\n",
				dlerror());
		} else {
			void *own = dlsym(z, "zlibVersion");

			CHECK(own != NULL, "libz has no zlibVersion");
			CHECK(!dlsym(RTLD_NEXT, "zlibVersion"),
			      "dlsym searched an RTLD_LOCAL object");
			CHECK(!pp_real_next("zlibVersion"),
			      "pp_real_next searched an RTLD_LOCAL object");
			CHECK(dlopen("libz.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL) == z,
			      "libz made global");
			CHECK(pp_real_next("zlibVersion") == own,
			      "zlibVersion, made global: %p, want %p", pp_real_next("zlibVersion"),
			      own);
		}
	}
	/* Binding again changes nothing. */
	{
		void *before = (void *)pp_real.posix_spawn;

		pp_real_bind_all();
		CHECK((void *)pp_real.posix_spawn == before, "bound twice");
		CHECK(pp_real_bind_one(PP_REAL_IDX_posix_spawn) == before, "bound once more");
	}
	return failures ? 1 : 0;
}
