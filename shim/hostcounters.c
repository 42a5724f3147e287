// SPDX-License-Identifier: MIT
/*
 * The host-wide counters file (hostcounters.h has the format and the
 * rules). One add is about a dozen system calls, made only by a process
 * that wrote a large write into a tracked pipe, once, at its end: open
 * by O_PATH and check what the name is before opening it for writing (a
 * FIFO opened for writing would wake its reader), check the header, lock
 * a shard, read, add, write, unlock.
 */
#include "hostcounters.h"

#include "compiler.h"
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

static const char *const host_names[] = {
#define PP_X(name, help, value) #name,
	PP_HOST_COUNTERS(PP_X)
#undef PP_X
};

static const char *const host_helps[] = {
#define PP_X(name, help, value) help,
	PP_HOST_COUNTERS(PP_X)
#undef PP_X
};

void pp_host_values(const struct pp_stats_report *r, uint64_t out[PP_HOST_COUNT])
{
#define PP_X(name, help, value) out[PP_HOST_##name] = (uint64_t)(value);
	PP_HOST_COUNTERS(PP_X)
#undef PP_X
}

int pp_host_path(const char *pattern, char *path, size_t len)
{
	char num[24];
	size_t o = 0;

	pp_utoa((unsigned long)(uint32_t)PP_SYSCALL(SYS_geteuid), num);
	for (const char *s = pattern; *s; s++) {
		const char *piece = s;
		size_t n = 1;

		if (s[0] == '%' && s[1] == 'u') {
			piece = num;
			n = strlen(num);
			s++;
		} else if (s[0] == '%' && s[1] == '%') {
			s++;
		}
		if (n >= len - o)
			return -ENAMETOOLONG;
		memcpy(path + o, piece, n);
		o += n;
	}
	path[o] = '\0';
	return 0;
}

/* pread/pwrite of exactly @len bytes at @off: 0, -EIO for a short count, or -errno. */
static int host_io(long nr, int fd, void *buf, size_t len, long off)
{
	long n;

	do
		n = PP_SYSCALL(nr, fd, buf, len, off);
	while (n == -EINTR);
	if (n < 0)
		return (int)n;
	return (size_t)n == len ? 0 : -EIO;
}

static long host_fstat(int fd, struct stat *st)
{
	return PP_SYSCALL(SYS_fstat, fd, st);
}

/* The name is a file this process may write: regular, ours, not writable by others, whole. */
static int host_check_stat(const char *path, const struct stat *st, uint32_t uid)
{
	if (!S_ISREG(st->st_mode)) {
		pp_debug("PPIPE_COUNTERS: %s left alone: not a regular file", path);
		return -EPERM;
	}
	if (st->st_uid != uid) {
		pp_debug("PPIPE_COUNTERS: %s left alone: owned by uid %u, not by %u", path,
			 (unsigned int)st->st_uid, (unsigned int)uid);
		return -EPERM;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		pp_debug("PPIPE_COUNTERS: %s left alone: writable by group or others", path);
		return -EPERM;
	}
	if (st->st_size != PP_HOST_FILE_SIZE) {
		pp_debug("PPIPE_COUNTERS: %s left alone: %lld bytes, not %d", path,
			 (long long)st->st_size, PP_HOST_FILE_SIZE);
		return -EPROTO;
	}
	return 0;
}

/* The header and the names of an open file, and where each of our counters goes. */
static int host_check_header(const char *path, int fd, uint32_t uid, int slot[PP_HOST_COUNT])
{
	struct {
		struct pp_host_header h;
		char names[PP_HOST_SLOTS][PP_HOST_NAME];
	} f;
	const struct pp_host_header *h = &f.h;
	const char *first_missing = "";
	int missing = 0;
	int r = host_io(SYS_pread64, fd, &f, sizeof(f), 0);

	if (r)
		return r;
	if (memcmp(h->magic, PP_HOST_MAGIC, sizeof(h->magic))) {
		pp_debug("PPIPE_COUNTERS: %s left alone: not a counters file", path);
		return -EPROTO;
	}
	if (h->version != PP_HOST_VERSION) {
		pp_debug("PPIPE_COUNTERS: %s left alone: version %u, not %d", path,
			 (unsigned int)h->version, PP_HOST_VERSION);
		return -EPROTO;
	}
	if (h->header_size != PP_HOST_HEADER || h->shards != PP_HOST_SHARDS ||
	    h->shard_size != PP_HOST_SHARD || h->slots != PP_HOST_SLOTS ||
	    h->name_size != PP_HOST_NAME || h->help_size != PP_HOST_HELP ||
	    h->used > PP_HOST_SLOTS) {
		pp_debug("PPIPE_COUNTERS: %s left alone: another layout", path);
		return -EPROTO;
	}
	if (h->uid != uid) {
		pp_debug("PPIPE_COUNTERS: %s left alone: made for uid %u, not %u", path,
			 (unsigned int)h->uid, (unsigned int)uid);
		return -EPROTO;
	}
	for (unsigned int i = 0; i < h->used; i++) {
		if (!memchr(f.names[i], '\0', PP_HOST_NAME)) {
			pp_debug("PPIPE_COUNTERS: %s left alone: a name without its end", path);
			return -EPROTO;
		}
	}
	for (int k = 0; k < PP_HOST_COUNT; k++) {
		slot[k] = -1;
		for (unsigned int i = 0; i < h->used && slot[k] < 0; i++)
			if (!strcmp(f.names[i], host_names[k]))
				slot[k] = (int)i;
		if (slot[k] < 0 && !missing++)
			first_missing = host_names[k];
	}
	/* A file made by another version: what it has no slot for is not counted there. */
	if (missing)
		pp_debug(
			"PPIPE_COUNTERS: %s has no slot for %d counters (%s...): not counted there",
			path, missing, first_missing);
	return 0;
}

/*
 * Opens the file @path names for reading and writing if it is one to add
 * to: first by O_PATH, to see what it is without opening it (a FIFO
 * opened for writing would wake its reader), then again, the same inode.
 * Returns the fd, or -errno (-ENOENT: there is none).
 */
static int host_open(const char *path, uint32_t uid, int slot[PP_HOST_COUNT])
{
	struct stat st, st2;
	long pfd, fd;
	int r;

	pfd = PP_SYSCALL(SYS_openat, AT_FDCWD, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0) {
		if (pfd != -ENOENT)
			pp_debug("PPIPE_COUNTERS: cannot open %s: %s", path,
				 pp_strerror((int)-pfd));
		return (int)pfd;
	}
	r = (int)host_fstat((int)pfd, &st);
	if (!r && S_ISLNK(st.st_mode)) {
		pp_debug("PPIPE_COUNTERS: %s left alone: a symbolic link", path);
		r = -ELOOP;
	}
	if (!r)
		r = host_check_stat(path, &st, uid);
	PP_SYSCALL(SYS_close, pfd);
	if (r)
		return r;
	fd = PP_SYSCALL(SYS_openat, AT_FDCWD, path,
			O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		pp_debug("PPIPE_COUNTERS: cannot open %s: %s", path, pp_strerror((int)-fd));
		return (int)fd;
	}
	r = (int)host_fstat((int)fd, &st2);
	if (!r && (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino))
		r = -ESTALE; /* replaced in between: not the file looked at */
	if (!r)
		r = host_check_stat(path, &st2, uid);
	if (!r)
		r = host_check_header(path, (int)fd, uid, slot);
	if (r) {
		PP_SYSCALL(SYS_close, fd);
		return r;
	}
	return (int)fd;
}

/* A new file's whole content, in @buf (PP_HOST_FILE_SIZE bytes, zeroed). */
static void host_fill(char *buf, uint32_t uid)
{
	struct pp_host_header h = {
		.version = PP_HOST_VERSION,
		.header_size = PP_HOST_HEADER,
		.shards = PP_HOST_SHARDS,
		.shard_size = PP_HOST_SHARD,
		.slots = PP_HOST_SLOTS,
		.name_size = PP_HOST_NAME,
		.help_size = PP_HOST_HELP,
		.used = PP_HOST_COUNT,
		.uid = uid,
	};
	struct timespec now = { 0, 0 };

	memcpy(h.magic, PP_HOST_MAGIC, sizeof(h.magic));
	PP_SYSCALL(SYS_clock_gettime, CLOCK_REALTIME, &now);
	h.created = (uint64_t)now.tv_sec;
	memcpy(buf, &h, sizeof(h));
	for (int k = 0; k < PP_HOST_COUNT; k++) {
		/* Longer ones are cut, NUL kept: the header says the limits (static checks cannot). */
		strncpy(buf + PP_HOST_NAMES_AT + k * PP_HOST_NAME, host_names[k], PP_HOST_NAME - 1);
		strncpy(buf + PP_HOST_HELPS_AT + k * PP_HOST_HELP, host_helps[k], PP_HOST_HELP - 1);
	}
}

/*
 * Makes the file whole before it has a name: an unnamed file in the
 * directory (O_TMPFILE), written, then linked to @path. If the creator is
 * killed first, the unnamed file goes with its fd. Returns the fd, or
 * -EEXIST when another process linked its file first, or -errno.
 */
static int host_create(char *path, uint32_t uid, int slot[PP_HOST_COUNT])
{
	unsigned long map;
	long fd, r;

	fd = pp_sys_tmpfile_for(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		pp_debug("PPIPE_COUNTERS: cannot make %s: an unnamed file in its directory: %s",
			 path,
			 fd == -EOPNOTSUPP || fd == -EISDIR ? "no O_TMPFILE on this file system" :
							      pp_strerror((int)-fd));
		return (int)fd;
	}
	map = (unsigned long)PP_SYSCALL(SYS_mmap, 0, PP_HOST_FILE_SIZE, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map > -4096UL) {
		r = (long)map;
		goto fail;
	}
	host_fill((char *)map, uid);
	r = host_io(SYS_pwrite64, (int)fd, (void *)map, PP_HOST_FILE_SIZE, 0);
	PP_SYSCALL(SYS_munmap, map, PP_HOST_FILE_SIZE);
	if (!r)
		r = pp_sys_link_tmpfile((int)fd, path);
	if (r)
		goto fail;
	for (int k = 0; k < PP_HOST_COUNT; k++)
		slot[k] = k;
	return (int)fd;
fail:
	if (r != -EEXIST)
		pp_debug("PPIPE_COUNTERS: cannot make %s: %s", path, pp_strerror((int)-r));
	PP_SYSCALL(SYS_close, fd);
	return (int)r;
}

/* Adds @values to one shard, the first of PP_HOST_TRIES that is not locked. */
static int host_add_shard(const char *path, int fd, const int slot[PP_HOST_COUNT],
			  const uint64_t values[PP_HOST_COUNT])
{
	unsigned int first = (unsigned int)PP_SYSCALL(SYS_getpid) % PP_HOST_SHARDS;

	for (unsigned int t = 0; t < PP_HOST_TRIES; t++) {
		long off = PP_HOST_HEADER + (long)((first + t) % PP_HOST_SHARDS) * PP_HOST_SHARD;
		struct flock fl = { .l_type = F_WRLCK,
				    .l_whence = SEEK_SET,
				    .l_start = off,
				    .l_len = PP_HOST_SHARD };
		uint64_t v[PP_HOST_SLOTS];
		long r = PP_SYSCALL(SYS_fcntl, fd, F_OFD_SETLK, &fl);

		if (r == -EAGAIN || r == -EACCES || r == -EINTR)
			continue;
		if (r)
			return (int)r;
		r = host_io(SYS_pread64, fd, v, sizeof(v), off);
		if (!r) {
			for (int k = 0; k < PP_HOST_COUNT; k++)
				if (slot[k] >= 0)
					v[slot[k]] += values[k];
			r = host_io(SYS_pwrite64, fd, v, sizeof(v), off);
		}
		fl.l_type = F_UNLCK;
		PP_SYSCALL(SYS_fcntl, fd, F_OFD_SETLK, &fl);
		return (int)r;
	}
	pp_debug("PPIPE_COUNTERS: %s: %d shards locked by other processes: nothing added", path,
		 PP_HOST_TRIES);
	return -EAGAIN;
}

int pp_host_add(const char *pattern, const uint64_t values[PP_HOST_COUNT])
{
	uint32_t uid = (uint32_t)PP_SYSCALL(SYS_geteuid);
	char path[PP_HOST_PATH_MAX];
	int slot[PP_HOST_COUNT];
	int saved = errno, fd, r;

	r = pp_host_path(pattern, path, sizeof(path));
	if (r) {
		pp_debug("PPIPE_COUNTERS: the path is too long; nothing added");
		goto out;
	}
	fd = host_open(path, uid, slot);
	if (fd == -ENOENT) {
		fd = host_create(path, uid, slot);
		/* Another process made it first: add to that one. */
		if (fd == -EEXIST)
			fd = host_open(path, uid, slot);
	}
	if (fd < 0) {
		r = fd; /* said already */
		goto out;
	}
	r = host_add_shard(path, fd, slot, values);
	if (r && r != -EAGAIN)
		pp_debug("PPIPE_COUNTERS: %s: %s; nothing added", path, pp_strerror(-r));
	PP_SYSCALL(SYS_close, fd);
out:
	errno = saved;
	return r;
}
