// SPDX-License-Identifier: MIT
#include "real.h"

#include "compiler.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

PP_HOT struct pp_real pp_real;

/*
 * Binding at load used to be one dlsym(RTLD_NEXT) per name: about 850
 * instructions each (dlerror's frame, the lock, finding the caller's
 * object), some 30,000 in every process start. The dynamic linker's own
 * tables say the same for a few hundred: the objects loaded after this
 * one, in the order dlsym searches them, each with its GNU hash table.
 * What they cannot settle is asked of dlsym, as before.
 */

/*
 * The names, one string, among the start-up code that reads them (compiler.h,
 * PP_START_DATA): no page fault for a page of constants, and no room taken
 * on the page of the hot data.
 */
#define PP_REAL_NAME(ret, name, params) #name "\0"
PP_START_DATA static const char real_names[] = PP_REAL_FUNCS(PP_REAL_NAME);
#undef PP_REAL_NAME
_Static_assert(sizeof(struct pp_real) == PP_REAL_COUNT * sizeof(void *),
	       "the entries are the list's pointers, in order");

/* This object's dynamic section: how it knows itself among the loaded ones. */
extern ElfW(Dyn) _DYNAMIC[] __attribute__((visibility("hidden")));

#if __ELF_NATIVE_CLASS == 64
#define SYM_BIND ELF64_ST_BIND
#define SYM_TYPE ELF64_ST_TYPE
#else
#define SYM_BIND ELF32_ST_BIND
#define SYM_TYPE ELF32_ST_TYPE
#endif

typedef ElfW(Sym) elf_sym;
typedef ElfW(Versym) elf_versym;
typedef ElfW(Dyn) elf_dyn;

/* One loaded object's dynamic symbol tables. */
struct dso {
	ElfW(Addr) base;
	const uint32_t *gnu_hash;
	const elf_sym *syms;
	const char *strs;
	const elf_versym *vers; /* NULL: no versions */
};

/* A table's address: the dynamic linker relocates them in place, except in a read-only .dynamic. */
PP_START static const void *dyn_addr(ElfW(Addr) v, ElfW(Addr) base)
{
	return (const void *)(v < base ? base + v : v);
}

/* @m's tables; false when it has no GNU hash table (then only dlsym can search it). */
PP_START static bool dso_of(const struct link_map *m, struct dso *d)
{
	*d = (struct dso){ .base = m->l_addr };
	for (const elf_dyn *e = m->l_ld; e && e->d_tag != DT_NULL; e++) {
		if (e->d_tag == DT_GNU_HASH)
			d->gnu_hash = dyn_addr(e->d_un.d_ptr, m->l_addr);
		else if (e->d_tag == DT_SYMTAB)
			d->syms = dyn_addr(e->d_un.d_ptr, m->l_addr);
		else if (e->d_tag == DT_STRTAB)
			d->strs = dyn_addr(e->d_un.d_ptr, m->l_addr);
		else if (e->d_tag == DT_VERSYM)
			d->vers = dyn_addr(e->d_un.d_ptr, m->l_addr);
	}
	return d->gnu_hash && d->syms && d->strs;
}

PP_START static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

PP_START static bool same_name(const char *a, const char *b)
{
	for (; *a && *a == *b; a++, b++)
		;
	return *a == *b;
}

/*
 * Looks @name (hash @h) up in @d as dlsym does for a name without a
 * version: an unversioned definition first, else the one default
 * version. 1: found (*@fn), 0: not defined there, -1: defined there in a
 * way left to dlsym (an IFUNC, something other than a function, two
 * default versions, a table that does not add up).
 */
PP_START static int dso_find(const struct dso *d, const char *name, uint32_t h, void **fn)
{
	const uint32_t nbuckets = d->gnu_hash[0], symoffset = d->gnu_hash[1];
	const uint32_t nwords = d->gnu_hash[2], shift = d->gnu_hash[3];
	const ElfW(Addr) *bloom = (const ElfW(Addr) *)&d->gnu_hash[4];
	const uint32_t bits = sizeof(ElfW(Addr)) * 8, *buckets, *chain;
	const elf_sym *found = NULL;
	ElfW(Addr) word;
	int defaults = 0;
	uint32_t i;

	if (!nbuckets || !nwords || nwords & (nwords - 1))
		return nbuckets ? -1 : 0;
	word = bloom[(h / bits) & (nwords - 1)];
	if (!((word >> (h % bits)) & (word >> ((h >> shift) % bits)) & 1))
		return 0;
	buckets = (const uint32_t *)&bloom[nwords];
	chain = &buckets[nbuckets];
	i = buckets[h % nbuckets];
	if (!i)
		return 0;
	if (i < symoffset)
		return -1;
	for (;; i++) {
		uint32_t ch = chain[i - symoffset];
		const elf_sym *s = &d->syms[i];

		if (((ch ^ h) >> 1) == 0 && s->st_shndx != SHN_UNDEF && s->st_value &&
		    (SYM_BIND(s->st_info) == STB_GLOBAL || SYM_BIND(s->st_info) == STB_WEAK) &&
		    same_name(name, d->strs + s->st_name)) {
			elf_versym v = d->vers ? d->vers[i] : 0;

			if ((v & 0x7fff) < 2) {
				found = s; /* unversioned: it, whatever else there is */
				defaults = 1;
				break;
			}
			if (!(v & 0x8000) && !defaults++)
				found = s; /* the default version */
		}
		if (ch & 1)
			break;
	}
	if (!found)
		return 0;
	if (defaults > 1 || SYM_TYPE(found->st_info) != STT_FUNC)
		return -1;
	*fn = (void *)(d->base + found->st_value);
	return 1;
}

/*
 * The last object loaded at start, as pp_real_bind() found it. A later
 * walk stops there: what dlopen() adds after it may be outside the global
 * scope (RTLD_LOCAL), and the one object whose link the dynamic linker
 * may still change is the list's tail, whose next link is never read.
 */
PP_HOT static const struct link_map *start_tail;

/*
 * The objects after this one, as the dynamic linker loaded them: for the
 * objects loaded at start (all of them, while constructors run), the
 * order of the global scope that dlsym(RTLD_NEXT) searches; up to @last
 * if not NULL. Fills what it can settle of the @count names into @fn
 * (@done marks it), and stops at an object it cannot search: the rest is
 * dlsym's.
 */
PP_START static void walk_next(int count, const char *const name[], void *fn[], bool done[],
			       const struct link_map *last)
{
	const struct link_map *m = _r_debug.r_map;
	uint32_t hash[PP_REAL_COUNT];
	int left = count;

	while (m && m->l_ld != _DYNAMIC)
		m = m->l_next;
	if (!m || m == last)
		return; /* not in the main namespace's list (dlmopen): dlsym knows */
	for (int k = 0; k < count; k++)
		hash[k] = gnu_hash(name[k]);
	for (m = m->l_next; m && left; m = m == last ? NULL : m->l_next) {
		struct dso d;

		if (!dso_of(m, &d))
			return;
		for (int k = 0; k < count; k++) {
			int r;

			if (done[k])
				continue;
			r = dso_find(&d, name[k], hash[k], &fn[k]);
			if (r)
				done[k] = true, left--;
			if (r < 0)
				fn[k] = NULL; /* dlsym's to answer */
		}
	}
}

PP_HOT static int bound; /* every entry bound (or tried) */
PP_HOT static bool eager; /* the walk cannot be trusted here: everything at start */

/* The @k'th name of real_names. */
PP_START static const char *real_name(int k)
{
	const char *n = real_names;

	while (k--)
		while (*n++)
			;
	return n;
}

/* Entry @k, as the list's pointers. */
static inline void **real_slot(int k)
{
	return &((void **)&pp_real)[k];
}

PP_START void pp_real_bind_all(void)
{
	void *fn[PP_REAL_COUNT] = { NULL };
	bool done[PP_REAL_COUNT] = { false };
	const char *name[PP_REAL_COUNT];
	int k;

	/* Every fork comes here: once bound, a load, not a store to a page the child shares. */
	if (__atomic_load_n(&bound, __ATOMIC_ACQUIRE) ||
	    __atomic_exchange_n(&bound, 1, __ATOMIC_ACQ_REL))
		return;
	for (k = 0; k < PP_REAL_COUNT; k++) {
		name[k] = real_name(k);
		fn[k] = __atomic_load_n(real_slot(k), __ATOMIC_ACQUIRE);
		done[k] = fn[k] != NULL;
	}
	if (!eager)
		walk_next(PP_REAL_COUNT, name, fn, done,
			  __atomic_load_n(&start_tail, __ATOMIC_ACQUIRE));
	for (k = 0; k < PP_REAL_COUNT; k++) {
		if (!fn[k])
			fn[k] = dlsym(RTLD_NEXT, name[k]);
		__atomic_store_n(real_slot(k), fn[k], __ATOMIC_RELEASE);
	}
}

PP_START void pp_real_start(void)
{
	const struct link_map *m, *tail = NULL;
	bool walkable = false;

	for (m = _r_debug.r_map; m; m = m->l_next) {
		tail = m;
		if (m->l_ld == _DYNAMIC)
			walkable = true; /* ours is in the main list: what follows is searched */
		else if (walkable) {
			struct dso d;

			if (!dso_of(m, &d))
				walkable = false;
		}
	}
	__atomic_store_n(&start_tail, tail, __ATOMIC_RELEASE);
	if (!walkable || !tail) {
		eager = true;
		pp_real_bind_all();
	}
}

PP_COMMON void *pp_real_bind_one(enum pp_real_index k)
{
	void *fn = __atomic_load_n(real_slot(k), __ATOMIC_ACQUIRE);
	const char *name;
	bool done = false;

	if (fn || (unsigned int)k >= PP_REAL_COUNT)
		return fn;
	name = real_name(k);
	if (!eager)
		walk_next(1, &name, &fn, &done, __atomic_load_n(&start_tail, __ATOMIC_ACQUIRE));
	if (!fn)
		fn = dlsym(RTLD_NEXT, name);
	__atomic_store_n(real_slot(k), fn, __ATOMIC_RELEASE);
	return fn;
}

PP_START void *pp_real_next(const char *name)
{
	const struct link_map *last;
	void *fn = NULL;
	bool done = false;

	last = __atomic_load_n(&start_tail, __ATOMIC_ACQUIRE);
	if (last && !eager)
		walk_next(1, &name, &fn, &done, last);
	return fn ? fn : dlsym(RTLD_NEXT, name);
}

void pp_real_next_many(int count, const char *const name[], void *fn[])
{
	const struct link_map *last;
	bool done[PP_REAL_COUNT];

	for (int k = 0; k < count; k++)
		fn[k] = NULL;
	last = __atomic_load_n(&start_tail, __ATOMIC_ACQUIRE);
	if (!last || eager)
		return;
	/* walk_next() hashes at most PP_REAL_COUNT names at a time. */
	for (int at = 0; at < count; at += PP_REAL_COUNT) {
		int n = count - at < PP_REAL_COUNT ? count - at : PP_REAL_COUNT;

		for (int k = 0; k < n; k++)
			done[k] = false;
		walk_next(n, name + at, fn + at, done, last);
	}
}

/*
 * Before pp_real_bind() (or if a symbol is missing) the raw system call
 * stands in; the glibc wrappers add nothing the shim relies on.
 */
#define RAW(ret, call) ((ret)syscall call)

PP_COMMON ssize_t real_write(int fd, const void *buf, size_t n)
{
	return PP_REAL(write) ? pp_real.write(fd, buf, n) : RAW(ssize_t, (SYS_write, fd, buf, n));
}

PP_COMMON ssize_t real_writev(int fd, const struct iovec *iov, int cnt)
{
	return PP_REAL(writev) ? pp_real.writev(fd, iov, cnt) :
				 RAW(ssize_t, (SYS_writev, fd, iov, cnt));
}

PP_COMMON ssize_t real_read(int fd, void *buf, size_t n)
{
	return PP_REAL(read) ? pp_real.read(fd, buf, n) : RAW(ssize_t, (SYS_read, fd, buf, n));
}

PP_COMMON ssize_t real_readv(int fd, const struct iovec *iov, int cnt)
{
	return PP_REAL(readv) ? pp_real.readv(fd, iov, cnt) :
				RAW(ssize_t, (SYS_readv, fd, iov, cnt));
}

PP_COMMON int real_pipe2(int fds[2], int flags)
{
	if (PP_REAL(pipe2))
		return pp_real.pipe2(fds, flags);
	return RAW(int, (SYS_pipe2, fds, flags));
}

PP_COMMON int real_close(int fd)
{
	return PP_REAL(close) ? pp_real.close(fd) : RAW(int, (SYS_close, fd));
}

PP_COMMON int real_dup(int fd)
{
	return PP_REAL(dup) ? pp_real.dup(fd) : RAW(int, (SYS_dup, fd));
}

PP_COMMON int real_dup2(int fd, int fd2)
{
	if (PP_REAL(dup2))
		return pp_real.dup2(fd, fd2);
#ifdef SYS_dup2
	return RAW(int, (SYS_dup2, fd, fd2));
#else
	/* aarch64 has dup3 only, which refuses fd == fd2: dup2 checks fd then. */
	if (fd == fd2)
		return RAW(int, (SYS_fcntl, fd, F_GETFD)) < 0 ? -1 : fd2;
	return RAW(int, (SYS_dup3, fd, fd2, 0));
#endif
}

PP_COMMON int real_dup3(int fd, int fd2, int flags)
{
	return PP_REAL(dup3) ? pp_real.dup3(fd, fd2, flags) : RAW(int, (SYS_dup3, fd, fd2, flags));
}

PP_COMMON int real_fcntl(int fd, int cmd, unsigned long arg)
{
	return PP_REAL(fcntl) ? pp_real.fcntl(fd, cmd, arg) : RAW(int, (SYS_fcntl, fd, cmd, arg));
}

PP_COMMON pid_t real_fork(void)
{
	/* No raw fallback: a raw fork would skip glibc's atfork and TLS fix-ups. */
	if (!PP_REAL(fork)) {
		errno = ENOSYS;
		return -1;
	}
	return pp_real.fork();
}

ssize_t real_splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
		    unsigned int flags)
{
	return PP_REAL(splice) ? pp_real.splice(in, off_in, out, off_out, len, flags) :
				 RAW(ssize_t, (SYS_splice, in, off_in, out, off_out, len, flags));
}

ssize_t real_tee(int in, int out, size_t len, unsigned int flags)
{
	return PP_REAL(tee) ? pp_real.tee(in, out, len, flags) :
			      RAW(ssize_t, (SYS_tee, in, out, len, flags));
}

ssize_t real_vmsplice(int fd, const struct iovec *iov, size_t cnt, unsigned int flags)
{
	return PP_REAL(vmsplice) ? pp_real.vmsplice(fd, iov, cnt, flags) :
				   RAW(ssize_t, (SYS_vmsplice, fd, iov, cnt, flags));
}

int real_close_range(unsigned int first, unsigned int last, int flags)
{
	return PP_REAL(close_range) ? pp_real.close_range(first, last, flags) :
				      RAW(int, (SYS_close_range, first, last, flags));
}

PP_COMMON void real_exit(int status, bool upper)
{
	void (*fn)(int) = upper ? PP_REAL(_Exit) : PP_REAL(_exit);

	if (fn)
		fn(status);
	for (;;)
		syscall(SYS_exit_group, status);
}
