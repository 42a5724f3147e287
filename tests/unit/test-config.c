// SPDX-License-Identifier: MIT
/*
 * Configuration: the pure parsers, and pp_config_load() over fake
 * environments, checking that every bad value falls back to the default
 * with exactly one warning line on stderr. Also the message helpers.
 */
#include "config.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"

static unsigned int lines(const char *s)
{
	unsigned int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Loads @env (NULL-terminated) and returns the captured stderr. */
static const char *load_secure(bool secure, char **env)
{
	capture_begin();
	pp_config_load_env(env, secure);
	return capture_end();
}

#define ENV(...) ((char *[]){ __VA_ARGS__, NULL })
#define load(...) load_secure(false, ENV(__VA_ARGS__))

static char prefix[64];

/* Is @s exactly one line, "libppipe[pid]: " + @want + "\n"? */
static bool one_line_is(const char *s, const char *want)
{
	size_t p = strlen(prefix), w = strlen(want);

	return lines(s) == 1 && !strncmp(s, prefix, p) && !strncmp(s + p, want, w) &&
	       !strcmp(s + p + w, "\n");
}

/* ---- the pure parsers ---- */

static void test_size(void)
{
	static const struct {
		const char *s;
		uint64_t v;
	} good[] = {
		{ "0", 0 },
		{ "4097", 4097 },
		{ "16k", 16384 },
		{ "16K", 16384 },
		{ "16KiB", 16384 },
		{ "16kib", 16384 },
		{ "16kB", 16384 },
		{ "16KB", 16384 },
		{ "4096B", 4096 },
		{ "4096b", 4096 },
		{ "1m", 1 << 20 },
		{ "64M", 64 << 20 },
		{ "1MiB", 1 << 20 },
		{ "1G", 1 << 30 },
		{ "64g", 64ULL << 30 },
		{ " 64k ", 65536 },
		{ "\t7\t", 7 },
		{ "007", 7 },
		{ "18446744073709551615", UINT64_MAX },
		{ "17179869183G", 17179869183ULL << 30 },
	};
	static const char *const bad[] = {
		"",
		" ",
		"k",
		"B",
		"12x",
		"-1",
		"+1",
		"1.5M",
		"16 k",
		"16k k",
		"16kk",
		"16KiBB",
		"1iB",
		"16T",
		"0x10",
		"1e3",
		"99999999999999999999",
		"99999999999999999999G",
		"18446744073709551616",
		"17179869184G",
		"18014398509481984K",
		"1,000",
	};
	uint64_t v;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 12345;
		CHECK(pp_parse_size(good[i].s, 0, UINT64_MAX, &v) == 0 && v == good[i].v,
		      "size '%s' -> %llu", good[i].s, (unsigned long long)v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 12345;
		CHECK(pp_parse_size(bad[i], 0, UINT64_MAX, &v) == -EINVAL && v == 12345,
		      "size '%s' accepted (%llu)", bad[i], (unsigned long long)v);
	}
	CHECK(pp_parse_size(NULL, 0, 1, &v) == -EINVAL, "NULL");
	CHECK(pp_parse_size("4096", 4097, 1 << 30, &v) == -EINVAL, "below min");
	CHECK(pp_parse_size("4097", 4097, 1 << 30, &v) == 0 && v == 4097, "at min");
	CHECK(pp_parse_size("1G", 4097, 1 << 30, &v) == 0 && v == 1 << 30, "at max");
	CHECK(pp_parse_size("1073741825", 4097, 1 << 30, &v) == -EINVAL, "above max");
}

static void test_int(void)
{
	int64_t v;

	CHECK(pp_parse_int("-1", -1, 1023, &v) == 0 && v == -1, "-1");
	CHECK(pp_parse_int("+5", -1, 1023, &v) == 0 && v == 5, "+5");
	CHECK(pp_parse_int(" 1023 ", -1, 1023, &v) == 0 && v == 1023, "1023");
	CHECK(pp_parse_int("-9223372036854775808", INT64_MIN, INT64_MAX, &v) == 0 && v == INT64_MIN,
	      "INT64_MIN");
	CHECK(pp_parse_int("9223372036854775807", INT64_MIN, INT64_MAX, &v) == 0 && v == INT64_MAX,
	      "INT64_MAX");
	v = 77;
	CHECK(pp_parse_int("9223372036854775808", INT64_MIN, INT64_MAX, &v) == -EINVAL,
	      "INT64_MAX+1");
	CHECK(pp_parse_int("-9223372036854775809", INT64_MIN, INT64_MAX, &v) == -EINVAL,
	      "INT64_MIN-1");
	CHECK(pp_parse_int("99999999999999999999", INT64_MIN, INT64_MAX, &v) == -EINVAL,
	      "overflow");
	CHECK(pp_parse_int("-2", -1, 1023, &v) == -EINVAL, "below min");
	CHECK(pp_parse_int("1024", -1, 1023, &v) == -EINVAL, "above max");
	CHECK(pp_parse_int("", -1, 1023, &v) == -EINVAL, "empty");
	CHECK(pp_parse_int("-", -1, 1023, &v) == -EINVAL, "sign only");
	CHECK(pp_parse_int("- 1", -1, 1023, &v) == -EINVAL, "sign space");
	CHECK(pp_parse_int("1e3", 0, 100000, &v) == -EINVAL, "1e3");
	CHECK(pp_parse_int("1k", 0, 100000, &v) == -EINVAL, "no suffixes");
	CHECK(pp_parse_int(NULL, 0, 1, &v) == -EINVAL, "NULL");
	CHECK(v == 77, "failures leave *out alone");
}

static void test_bool(void)
{
	static const char *const t[] = { "1", "true", "yes", "on", "TRUE", "Yes", " On ", "tRuE" };
	static const char *const f[] = { "0", "false", "no", "off", "FALSE", "No", "\toff" };
	static const char *const bad[] = {
		"", "2", "y", "n", "truee", "of", "enable", "-1", "o n"
	};
	bool b;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		CHECK(pp_parse_bool(t[i], &b) == 0 && b, "'%s'", t[i]);
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		CHECK(pp_parse_bool(f[i], &b) == 0 && !b, "'%s'", f[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = true;
		CHECK(pp_parse_bool(bad[i], &b) == -EINVAL && b, "'%s' accepted", bad[i]);
	}
	CHECK(pp_parse_bool(NULL, &b) == -EINVAL, "NULL");
}

static void test_enum(void)
{
	static const char *const names[] = { "auto", "on", "off", NULL };
	unsigned int v = 9;

	CHECK(pp_parse_enum("auto", names, &v) == 0 && v == 0, "auto");
	CHECK(pp_parse_enum(" OFF ", names, &v) == 0 && v == 2, "OFF");
	v = 9;
	CHECK(pp_parse_enum("o", names, &v) == -EINVAL && v == 9, "prefix");
	CHECK(pp_parse_enum("offf", names, &v) == -EINVAL && v == 9, "longer");
	CHECK(pp_parse_enum("", names, &v) == -EINVAL, "empty");
	CHECK(pp_parse_enum("on", NULL, &v) == -EINVAL, "no names");
}

static bool fd_in(const struct pp_fdset *s, unsigned int fd)
{
	return (s->bits[fd / 64] >> (fd % 64)) & 1;
}

static unsigned int fd_count(const struct pp_fdset *s)
{
	unsigned int n = 0;

	for (unsigned int fd = 0; fd < PP_FDS_LIST_MAX; fd++)
		n += fd_in(s, fd);
	return n;
}

static void test_fdset(void)
{
	static const char *const bad[] = {
		"",	  " ",	  ",",	     "1,",  ",1",
		"1,,2",	  "1024", "-1",	     "foo", "all,1",
		"1,none", "1 2",  "stdout2", "0x1", "99999999999999999999",
		"1;2",
	};
	struct pp_fdset s;

	CHECK(pp_parse_fdset("all", &s) == 0 && s.all && !s.none && !fd_count(&s), "all");
	CHECK(pp_parse_fdset(" ALL ", &s) == 0 && s.all, "ALL");
	CHECK(pp_parse_fdset("none", &s) == 0 && s.none && !s.all && !fd_count(&s), "none");
	CHECK(pp_parse_fdset("1,stdout,7", &s) == 0 && !s.all && !s.none && fd_count(&s) == 2 &&
		      fd_in(&s, 1) && fd_in(&s, 7),
	      "1,stdout,7");
	CHECK(pp_parse_fdset(" stdin , stderr ,\t1023 ", &s) == 0 && fd_count(&s) == 3 &&
		      fd_in(&s, 0) && fd_in(&s, 2) && fd_in(&s, 1023),
	      "names, blanks, 1023");
	CHECK(pp_parse_fdset("63,64,65", &s) == 0 && fd_count(&s) == 3 && fd_in(&s, 63) &&
		      fd_in(&s, 64) && fd_in(&s, 65),
	      "word edges");
	CHECK(pp_parse_fdset("STDOUT", &s) == 0 && fd_count(&s) == 1 && fd_in(&s, 1), "STDOUT");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&s, 0, sizeof(s));
		s.bits[3] = 42;
		CHECK(pp_parse_fdset(bad[i], &s) == -EINVAL && s.bits[3] == 42 && !s.all,
		      "fdset '%s' accepted", bad[i]);
	}
	CHECK(pp_parse_fdset(NULL, &s) == -EINVAL, "NULL");
}

/* ---- pp_config_load ---- */

static void check_defaults(const char *what)
{
	CHECK(pp_cfg.fds.all && !pp_cfg.fds.none, "%s: fds", what);
	CHECK(pp_cfg.mode == PP_MODE_AUTO, "%s: mode", what);
	CHECK(pp_cfg.min_write == 16384, "%s: min_write", what);
	CHECK(pp_cfg.readers == PP_READERS_VERIFY, "%s: readers", what);
	CHECK(pp_cfg.stats[0] == '\0', "%s: stats", what);
	CHECK(!pp_cfg.debug && !pp_cfg.verbose, "%s: debug/verbose", what);
	CHECK(pp_cfg.ring_size == 0, "%s: ring_size", what);
	CHECK(pp_cfg.pool_max == 64 << 20, "%s: pool_max", what);
	CHECK(pp_cfg.pool_keep == 8 << 10, "%s: pool_keep", what);
	CHECK(pp_cfg.idle_ms == 1000, "%s: idle_ms", what);
	CHECK(pp_cfg.numa_node == -1, "%s: numa_node", what);
	CHECK(pp_cfg.thp == PP_THP_AUTO, "%s: thp", what);
}

static void test_defaults(void)
{
	struct pp_config c;
	const char *err;

	memset(&c, 0x5a, sizeof(c));
	pp_config_defaults(&c);
	CHECK(c.fds.all && c.min_write == 16384 && c.thp == PP_THP_AUTO && !c.stats[0],
	      "pp_config_defaults");

	err = load_secure(false, ENV(NULL));
	CHECK(!*err, "empty environment printed: %s", err);
	check_defaults("empty env");

	capture_begin();
	pp_config_load_env(NULL, false);
	err = capture_end();
	CHECK(!*err, "NULL environment printed: %s", err);
	check_defaults("NULL env");

	err = load("HOME=/root", "PATH=/bin", "XPPIPE_MODE=off", "PPIPE", "ppipe_mode=off");
	CHECK(!*err, "other variables printed: %s", err);
	check_defaults("other variables");
}

static void test_good_values(void)
{
	const char *err;

	err = load("PPIPE_FDS=1,stdout,7", "PPIPE_MODE=vmsplice", "PPIPE_MIN_WRITE=64k",
		   "PPIPE_READERS=trust", "PPIPE_STATS=/tmp/stats-%p.json", "PPIPE_DEBUG=yes",
		   "PPIPE_VERBOSE=off", "PPIPE_RING_SIZE=1M", "PPIPE_POOL_MAX=1G",
		   "PPIPE_POOL_KEEP=0", "PPIPE_IDLE_MS=3600000", "PPIPE_NUMA_NODE=3",
		   "PPIPE_THP=off");
	CHECK(!*err, "good values printed: %s", err);
	CHECK(!pp_cfg.fds.all && !pp_cfg.fds.none && fd_count(&pp_cfg.fds) == 2, "fds");
	CHECK(pp_fd_selected(1) && pp_fd_selected(7) && !pp_fd_selected(0) && !pp_fd_selected(2) &&
		      !pp_fd_selected(-1) && !pp_fd_selected(5000),
	      "pp_fd_selected");
	CHECK(pp_cfg.mode == PP_MODE_VMSPLICE, "mode");
	CHECK(pp_cfg.min_write == 65536, "min_write");
	CHECK(pp_cfg.readers == PP_READERS_TRUST, "readers");
	CHECK(!strcmp(pp_cfg.stats, "/tmp/stats-%p.json"), "stats '%s'", pp_cfg.stats);
	CHECK(pp_cfg.debug && !pp_cfg.verbose, "debug/verbose");
	CHECK(pp_cfg.ring_size == 1 << 20, "ring_size");
	CHECK(pp_cfg.pool_max == 1 << 30, "pool_max");
	CHECK(pp_cfg.pool_keep == 0, "pool_keep");
	CHECK(pp_cfg.idle_ms == 3600000, "idle_ms");
	CHECK(pp_cfg.numa_node == 3, "numa_node");
	CHECK(pp_cfg.thp == PP_THP_OFF, "thp");

	/* Range ends. */
	err = load("PPIPE_MIN_WRITE=4097", "PPIPE_RING_SIZE=64K", "PPIPE_POOL_MAX=64G",
		   "PPIPE_POOL_KEEP=1G", "PPIPE_IDLE_MS=1", "PPIPE_NUMA_NODE=1023");
	CHECK(!*err, "range ends printed: %s", err);
	CHECK(pp_cfg.min_write == 4097 && pp_cfg.ring_size == 65536 &&
		      pp_cfg.pool_max == 64ULL << 30 && pp_cfg.pool_keep == 1 << 30 &&
		      pp_cfg.idle_ms == 1 && pp_cfg.numa_node == 1023,
	      "range ends");
	/* 0 is outside PPIPE_RING_SIZE's range but is its default, "automatic". */
	err = load("PPIPE_RING_SIZE=0", "PPIPE_POOL_MAX=64M");
	CHECK(!*err && pp_cfg.ring_size == 0, "PPIPE_RING_SIZE=0 printed: %s", err);
	err = load("PPIPE_MIN_WRITE=1G", "PPIPE_RING_SIZE=256M", "PPIPE_POOL_MAX=1M",
		   "PPIPE_NUMA_NODE=-1");
	CHECK(!*err, "other range ends printed: %s", err);
	CHECK(pp_cfg.min_write == 1 << 30 && pp_cfg.ring_size == 256 << 20 &&
		      pp_cfg.pool_max == 1 << 20 && pp_cfg.numa_node == -1,
	      "other range ends");

	/* Every name of every enum, in enum order. */
	static const struct {
		const char *env;
		int v;
	} en[] = {
		{ "PPIPE_MODE=auto", PP_MODE_AUTO },
		{ "PPIPE_MODE=vmsplice", PP_MODE_VMSPLICE },
		{ "PPIPE_MODE=uring", PP_MODE_URING },
		{ "PPIPE_MODE=OFF", PP_MODE_OFF },
		{ "PPIPE_READERS=verify", PP_READERS_VERIFY },
		{ "PPIPE_READERS=trust", PP_READERS_TRUST },
		{ "PPIPE_THP=auto", PP_THP_AUTO },
		{ "PPIPE_THP=on", PP_THP_ON },
		{ "PPIPE_THP=off", PP_THP_OFF },
		{ "PPIPE_TURNS=auto", PP_TURNS_AUTO },
		{ "PPIPE_TURNS=on", PP_TURNS_ON },
		{ "PPIPE_TURNS=Off", PP_TURNS_OFF },
	};
	for (size_t i = 0; i < sizeof(en) / sizeof(en[0]); i++) {
		err = load((char *)en[i].env);
		CHECK(!*err, "%s printed: %s", en[i].env, err);
		if (!strncmp(en[i].env, "PPIPE_MODE", 10))
			CHECK((int)pp_cfg.mode == en[i].v, "%s", en[i].env);
		else if (!strncmp(en[i].env, "PPIPE_READERS", 13))
			CHECK((int)pp_cfg.readers == en[i].v, "%s", en[i].env);
		else if (!strncmp(en[i].env, "PPIPE_TURNS", 11))
			CHECK((int)pp_cfg.turns == en[i].v, "%s", en[i].env);
		else
			CHECK((int)pp_cfg.thp == en[i].v, "%s", en[i].env);
	}
	CHECK(!strcmp(pp_mode_name(PP_MODE_URING), "uring"), "pp_mode_name");
	CHECK(!strcmp(pp_mode_name(PP_MODE_OFF), "off"), "pp_mode_name off");
	CHECK(!strcmp(pp_mode_name((enum pp_mode)17), "?"), "pp_mode_name out of range");
	CHECK(!strcmp(pp_readers_name(PP_READERS_TRUST), "trust"), "pp_readers_name");
	CHECK(!strcmp(pp_thp_name(PP_THP_AUTO), "auto"), "pp_thp_name");

	/* PPIPE_FDS variants reach pp_fd_selected. */
	load("PPIPE_FDS=none");
	CHECK(!pp_fd_selected(1) && !pp_fd_selected(0), "none");
	load("PPIPE_FDS=all");
	CHECK(pp_fd_selected(1) && pp_fd_selected(4000), "all");
	load("PPIPE_FDS= stderr ");
	CHECK(pp_fd_selected(2) && !pp_fd_selected(1), "stderr");
}

/* Each case: one bad variable, the exact warning, and the value that results. */
static void test_bad_values(void)
{
	static const struct {
		const char *env, *warning;
	} bad[] = {
		{ "PPIPE_MIN_WRITE=12x",
		  "PPIPE_MIN_WRITE=12x is not a size between 4097 and 1073741824; using 16384" },
		{ "PPIPE_MIN_WRITE=4096",
		  "PPIPE_MIN_WRITE=4096 is not a size between 4097 and 1073741824; using 16384" },
		{ "PPIPE_MIN_WRITE=0",
		  "PPIPE_MIN_WRITE=0 is not a size between 4097 and 1073741824; using 16384" },
		{ "PPIPE_MIN_WRITE=1073741825",
		  "PPIPE_MIN_WRITE=1073741825 is not a size between 4097 and 1073741824; using 16384" },
		{ "PPIPE_MIN_WRITE=-1",
		  "PPIPE_MIN_WRITE=-1 is not a size between 4097 and 1073741824; using 16384" },
		{ "PPIPE_MIN_WRITE= ",
		  "PPIPE_MIN_WRITE=  is not a size between 4097 and 1073741824; using 16384" },
		{ "PPIPE_POOL_MAX=99999999999999999999G",
		  "PPIPE_POOL_MAX=99999999999999999999G is not a size between 1048576 and "
		  "68719476736; using 67108864" },
		{ "PPIPE_POOL_MAX=99999999999999999999",
		  "PPIPE_POOL_MAX=99999999999999999999 is not a size between 1048576 and "
		  "68719476736; using 67108864" },
		{ "PPIPE_POOL_MAX=65G",
		  "PPIPE_POOL_MAX=65G is not a size between 1048576 and 68719476736; using 67108864" },
		{ "PPIPE_POOL_KEEP=2G",
		  "PPIPE_POOL_KEEP=2G is not a size between 0 and 1073741824; using 8192" },
		{ "PPIPE_RING_SIZE=1k",
		  "PPIPE_RING_SIZE=1k is not 0 or a size between 65536 and 268435456; using 0" },
		{ "PPIPE_RING_SIZE=512M",
		  "PPIPE_RING_SIZE=512M is not 0 or a size between 65536 and 268435456; using 0" },
		{ "PPIPE_IDLE_MS=0",
		  "PPIPE_IDLE_MS=0 is not an integer between 1 and 3600000; using 1000" },
		{ "PPIPE_IDLE_MS=1s",
		  "PPIPE_IDLE_MS=1s is not an integer between 1 and 3600000; using 1000" },
		{ "PPIPE_IDLE_MS=3600001",
		  "PPIPE_IDLE_MS=3600001 is not an integer between 1 and 3600000; using 1000" },
		{ "PPIPE_NUMA_NODE=-2",
		  "PPIPE_NUMA_NODE=-2 is not an integer between -1 and 1023; using -1" },
		{ "PPIPE_NUMA_NODE=1024",
		  "PPIPE_NUMA_NODE=1024 is not an integer between -1 and 1023; using -1" },
		{ "PPIPE_NUMA_NODE=99999999999999999999",
		  "PPIPE_NUMA_NODE=99999999999999999999 is not an integer between -1 and 1023; using -1" },
		{ "PPIPE_DEBUG=2",
		  "PPIPE_DEBUG=2 is not a boolean (1/true/yes/on or 0/false/no/off); using 0" },
		{ "PPIPE_VERBOSE=maybe",
		  "PPIPE_VERBOSE=maybe is not a boolean (1/true/yes/on or 0/false/no/off); using 0" },
		{ "PPIPE_MODE=fast",
		  "PPIPE_MODE=fast is not one of auto|vmsplice|uring|off; using auto" },
		{ "PPIPE_READERS=all",
		  "PPIPE_READERS=all is not one of verify|trust; using verify" },
		{ "PPIPE_THP=yes", "PPIPE_THP=yes is not one of auto|on|off; using auto" },
		{ "PPIPE_FDS=1,foo",
		  "PPIPE_FDS=1,foo is not all, none or a comma list of fds 0-1023 and "
		  "stdin/stdout/stderr; using all" },
		{ "PPIPE_FDS=1,", "PPIPE_FDS=1, is not all, none or a comma list of fds 0-1023 and "
				  "stdin/stdout/stderr; using all" },
		{ "PPIPE_FDS=1024",
		  "PPIPE_FDS=1024 is not all, none or a comma list of fds 0-1023 and "
		  "stdin/stdout/stderr; using all" },
		/* Control bytes are shown escaped, so the warning stays one line. */
		{ "PPIPE_MIN_WRITE=1\n2",
		  "PPIPE_MIN_WRITE=1\\x0a2 is not a size between 4097 and 1073741824; using 16384" },
		{ "PPIPE_MODE=\x1b[31mred",
		  "PPIPE_MODE=\\x1b[31mred is not one of auto|vmsplice|uring|off; using auto" },
	};
	const char *err;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = load((char *)bad[i].env);
		CHECK(one_line_is(err, bad[i].warning), "%s:\n  got  %s  want %s%s", bad[i].env,
		      err, prefix, bad[i].warning);
		check_defaults(bad[i].env);
	}
}

static void test_bad_strings(void)
{
	static char longpath[300 + sizeof("PPIPE_STATS=")], exact[255 + sizeof("PPIPE_STATS=")];
	static char longval[2000 + sizeof("PPIPE_MODE=")];
	const char *err;

	memcpy(longpath, "PPIPE_STATS=", 12);
	memset(longpath + 12, 'a', 300);
	err = load(longpath);
	CHECK(lines(err) == 1 && strstr(err, "PPIPE_STATS=aaaa") &&
		      strstr(err, "is not at most 255 characters long; using \"\"\n") &&
		      strstr(err, "a...") && strlen(err) < 300,
	      "long PPIPE_STATS: %s", err);
	CHECK(!pp_cfg.stats[0], "long PPIPE_STATS dropped");

	memcpy(exact, "PPIPE_STATS=", 12);
	memset(exact + 12, 'b', 255);
	err = load(exact);
	CHECK(!*err, "255 characters printed: %s", err);
	CHECK(strlen(pp_cfg.stats) == 255, "255 characters kept");

	/* A huge value is quoted only in part. */
	memcpy(longval, "PPIPE_MODE=", 11);
	memset(longval + 11, 'x', 2000);
	err = load(longval);
	CHECK(lines(err) == 1 && strlen(err) < 400 && strstr(err, "x... is not one of"),
	      "huge value: %s", err);
}

static void test_empty_values(void)
{
	const char *err;

	/* Empty is the same as unset, except for PPIPE_STATS where it means off. */
	err = load(
		"PPIPE_FDS=", "PPIPE_MODE=", "PPIPE_MIN_WRITE=", "PPIPE_READERS=", "PPIPE_STATS=",
		"PPIPE_DEBUG=", "PPIPE_VERBOSE=", "PPIPE_RING_SIZE=", "PPIPE_POOL_MAX=",
		"PPIPE_POOL_KEEP=", "PPIPE_IDLE_MS=", "PPIPE_NUMA_NODE=", "PPIPE_THP=");
	CHECK(!*err, "empty values printed: %s", err);
	check_defaults("empty values");

	/* A name without "=" (execve allows it) is ignored. */
	err = load("PPIPE_MIN_WRITE", "PPIPE_MODE=off");
	CHECK(!*err && pp_cfg.mode == PP_MODE_OFF && pp_cfg.min_write == 16384, "no '=': %s", err);

	err = load("PPIPE_STATS=0");
	CHECK(!*err && !strcmp(pp_cfg.stats, "0"), "PPIPE_STATS=0");
	err = load("PPIPE_STATS=1");
	CHECK(!*err && !strcmp(pp_cfg.stats, "1"), "PPIPE_STATS=1");
}

static void test_several_bad(void)
{
	const char *err;

	err = load("PPIPE_MIN_WRITE=1", "PPIPE_MODE=x", "PPIPE_FDS=x", "PPIPE_DEBUG=x",
		   "PPIPE_IDLE_MS=x", "PPIPE_POOL_KEEP=3", "PPIPE_THP=on");
	CHECK(lines(err) == 5, "5 bad values, %u lines:\n%s", lines(err), err);
	CHECK(pp_cfg.pool_keep == 3 && pp_cfg.thp == PP_THP_ON, "good ones kept");
	CHECK(pp_cfg.min_write == 16384 && pp_cfg.mode == PP_MODE_AUTO && pp_cfg.fds.all &&
		      !pp_cfg.debug && pp_cfg.idle_ms == 1000,
	      "bad ones defaulted");

	/* The first definition wins, as with getenv(); the later one is not parsed. */
	err = load("PPIPE_MIN_WRITE=32k", "PPIPE_MIN_WRITE=bad", "PPIPE_MIN_WRITE=64k");
	CHECK(!*err && pp_cfg.min_write == 32768, "first wins: %s", err);
	err = load("PPIPE_MIN_WRITE=bad", "PPIPE_MIN_WRITE=64k");
	CHECK(lines(err) == 1 && pp_cfg.min_write == 16384, "first bad wins: %s", err);
}

static void test_unknown(void)
{
	const char *err;

	err = load("PPIPE_MIN_WIRTE=1");
	CHECK(one_line_is(err, "PPIPE_MIN_WIRTE is not a libppipe option, ignored (did you mean "
			       "PPIPE_MIN_WRITE?)"),
	      "typo: %s", err);
	err = load("PPIPE_stats=1");
	CHECK(one_line_is(err, "PPIPE_stats is not a libppipe option, ignored (did you mean "
			       "PPIPE_STATS?)"),
	      "case: %s", err);
	CHECK(!pp_cfg.stats[0], "the misspelt variable did nothing");
	err = load("PPIPE_FROBNICATE=1");
	CHECK(one_line_is(err, "PPIPE_FROBNICATE is not a libppipe option, ignored"), "unknown: %s",
	      err);
	err = load("PPIPE_=1");
	CHECK(one_line_is(err, "PPIPE_ is not a libppipe option, ignored"), "bare prefix: %s", err);

	/* Once per name, however often it appears. */
	err = load("PPIPE_FOO=1", "PPIPE_FOO=2", "PPIPE_BAR=1", "PPIPE_FOO");
	CHECK(lines(err) == 2 && strstr(err, "PPIPE_FOO is") && strstr(err, "PPIPE_BAR is"),
	      "duplicates: %s", err);

	/* The test preloads' variables are not ours and not typos. */
	err = load("PPIPE_TEST_CORRUPT=flip", "PPIPE_TEST_CORRUPT_EVERY=20");
	CHECK(!*err, "PPIPE_TEST_*: %s", err);

	/* Unknown and bad together: one line each, and the known ones still apply. */
	err = load("PPIPE_DEUBG=1", "PPIPE_MODE=off", "PPIPE_IDLE_MS=-5");
	CHECK(lines(err) == 2 && strstr(err, "did you mean PPIPE_DEBUG?") &&
		      strstr(err, "PPIPE_IDLE_MS=-5 is not"),
	      "mixed: %s", err);
	CHECK(pp_cfg.mode == PP_MODE_OFF && !pp_cfg.debug, "mixed values");

	/* A long unknown name is quoted in part, still on one line. */
	static char name[400];
	memcpy(name, "PPIPE_", 6);
	memset(name + 6, 'Z', 300);
	memcpy(name + 306, "=1", 3);
	err = load(name);
	CHECK(lines(err) == 1 && strstr(err, "Z... is not a libppipe option, ignored\n") &&
		      strlen(err) < 200,
	      "long name: %s", err);
}

static void test_secure(void)
{
	const char *err;

	err = load_secure(true, ENV("PPIPE_STATS=/tmp/x-%p"));
	CHECK(!*err, "secure without debug printed: %s", err);
	CHECK(!pp_cfg.stats[0], "secure: path dropped");

	err = load_secure(true, ENV("PPIPE_STATS=/tmp/x-%p", "PPIPE_DEBUG=1"));
	CHECK(lines(err) == 1 && strstr(err, "PPIPE_STATS=/tmp/x-%p ignored") &&
		      strstr(err, "AT_SECURE"),
	      "secure with debug: %s", err);
	CHECK(!pp_cfg.stats[0], "secure: path dropped (debug)");

	/* Order does not matter: debug may come first. */
	err = load_secure(true, ENV("PPIPE_DEBUG=1", "PPIPE_STATS=rel/path"));
	CHECK(lines(err) == 1 && !pp_cfg.stats[0], "secure, debug first: %s", err);

	err = load_secure(true, ENV("PPIPE_STATS=1", "PPIPE_DEBUG=1"));
	CHECK(!*err && !strcmp(pp_cfg.stats, "1"), "secure keeps stderr: %s", err);
	err = load_secure(false, ENV("PPIPE_STATS=/tmp/x-%p"));
	CHECK(!*err && !strcmp(pp_cfg.stats, "/tmp/x-%p"), "not secure keeps the path");

	/* The counters file too: a setuid program adds nothing to its caller's file. */
	err = load_secure(true, ENV("PPIPE_COUNTERS=/tmp/c-%u", "PPIPE_DEBUG=1"));
	CHECK(lines(err) == 1 && strstr(err, "PPIPE_COUNTERS=/tmp/c-%u ignored") &&
		      !pp_cfg.counters[0],
	      "secure drops the counters file: %s", err);
	err = load_secure(false, ENV("PPIPE_COUNTERS=/tmp/c-%u"));
	CHECK(!*err && !strcmp(pp_cfg.counters, "/tmp/c-%u"), "not secure keeps it: %s", err);
}

/* The dump has one line per option of options.def. */
static const unsigned int n_options = 0
#define PP_OPT(...) +1
#include "options.def"
#undef PP_OPT
	;

static void test_dump(void)
{
	const char *err;
	char want[128];
	unsigned int n;

	/* Loading prints nothing for PPIPE_VERBOSE: the caller dumps (init.c). */
	err = load("PPIPE_VERBOSE=1", "PPIPE_FDS=7,stdout", "PPIPE_MODE=off", "PPIPE_POOL_MAX=1G",
		   "PPIPE_NUMA_NODE=2", "PPIPE_STATS=/tmp/a b");
	CHECK(!*err && pp_cfg.verbose, "verbose load printed: %s", err);
	capture_begin();
	pp_config_dump(2);
	err = capture_end();
	n = lines(err);
	CHECK(n == n_options, "the dump has %u lines, got %u:\n%s", n_options, n, err);
	for (const char *l = err; *l; l = strchr(l, '\n') + 1) {
		CHECK(!strncmp(l, prefix, strlen(prefix)) &&
			      !strncmp(l + strlen(prefix), "PPIPE_", 6),
		      "dump line '%.60s'", l);
		CHECK(strstr(l, "  # ") && strstr(l, "  # ") < strchr(l, '\n'),
		      "no help on '%.60s'", l);
	}
	static const char *const want_lines[] = {
		"PPIPE_FDS=1,7  # ",	     "PPIPE_MODE=off  # ",
		"PPIPE_MIN_WRITE=16384  # ", "PPIPE_READERS=verify  # ",
		"PPIPE_STATS=/tmp/a b  # ",  "PPIPE_COUNTERS=\"\"  # ",
		"PPIPE_DEBUG=0  # ",	     "PPIPE_VERBOSE=1  # ",
		"PPIPE_RING_SIZE=0  # ",     "PPIPE_POOL_MAX=1073741824  # ",
		"PPIPE_POOL_KEEP=8192  # ",  "PPIPE_IDLE_MS=1000  # ",
		"PPIPE_NUMA_NODE=2  # ",     "PPIPE_PSI=10  # ",
		"PPIPE_PSI_FILE=\"\"  # ",   "PPIPE_THP=auto  # ",
	};
	for (size_t i = 0; i < sizeof(want_lines) / sizeof(want_lines[0]); i++) {
		snprintf(want, sizeof(want), "%s%s", prefix, want_lines[i]);
		CHECK(strstr(err, want), "dump lacks '%s'", want);
	}

	/* pp_config_dump to another fd, with the empty string and a long fd list. */
	static char all_fds[PP_FDS_LIST_MAX * 6 + 16];
	size_t o = snprintf(all_fds, sizeof(all_fds), "PPIPE_FDS=");
	for (int fd = 0; fd < PP_FDS_LIST_MAX; fd++)
		o += snprintf(all_fds + o, sizeof(all_fds) - o, "%s%d", fd ? "," : "", fd);
	load(all_fds);
	CHECK(fd_count(&pp_cfg.fds) == PP_FDS_LIST_MAX, "every fd listed");
	capture_begin();
	pp_config_dump(2);
	err = capture_end();
	CHECK(lines(err) == n_options && strstr(err, "PPIPE_STATS=\"\"  # ") &&
		      strstr(err, "PPIPE_COUNTERS=\"\"  # ") && strstr(err, "PPIPE_FDS=0,1,2,3,") &&
		      strstr(err, ",1022,1023  # "),
	      "dump of defaults: %s", err);
}

/* ---- log.c ---- */

static void test_log(void)
{
	static char big[4000];
	const char *err;
	int once = 0;

	load(NULL);
	capture_begin();
	errno = 1234;
	pp_warn("hello %d", 42);
	CHECK(errno == 1234, "pp_warn kept errno");
	err = capture_end();
	CHECK(one_line_is(err, "hello 42"), "pp_warn: %s", err);

	capture_begin();
	pp_warn("two\nlines\n");
	err = capture_end();
	CHECK(one_line_is(err, "two lines"), "newlines: %s", err);

	capture_begin();
	pp_debug("quiet");
	pp_debug_once(&once, "quiet");
	err = capture_end();
	CHECK(!*err && !once, "debug off printed: %s", err);

	load("PPIPE_DEBUG=1");
	capture_begin();
	errno = 77;
	pp_debug("loud %s", "yes");
	pp_debug_once(&once, "once");
	pp_debug_once(&once, "once");
	CHECK(errno == 77, "pp_debug kept errno");
	err = capture_end();
	CHECK(lines(err) == 2 && strstr(err, "loud yes\n") && strstr(err, ": once\n"), "debug: %s",
	      err);

	memset(big, 'q', sizeof(big) - 1);
	capture_begin();
	pp_warn("%s", big);
	err = capture_end();
	CHECK(lines(err) == 1 && strlen(err) <= 1024 && strstr(err, "qqq...\n"), "long: %zu",
	      strlen(err));

	capture_begin();
	errno = 5;
	pp_log_raw(2, "raw\n", 4);
	CHECK(errno == 5, "pp_log_raw kept errno");
	pp_log_raw(-1, "x", 1);
	CHECK(errno == 5, "pp_log_raw kept errno on EBADF");
	err = capture_end();
	CHECK(!strcmp(err, "raw\n"), "raw: %s", err);

	CHECK(!strcmp(pp_strerror(ENOENT), "No such file or directory"), "pp_strerror");
	CHECK(pp_strerror(99999) != NULL, "pp_strerror unknown");
}

int main(void)
{
	/*
	 * Before pp_config_load the table holds the defaults, every one of
	 * them: a process without PPIPE_ variables parses nothing.
	 */
	{
		struct pp_config d;

		pp_config_defaults(&d);
		CHECK(!memcmp(&pp_cfg, &d, sizeof(d)), "the initial table is the defaults");
		CHECK(pp_cfg.min_write == 16384 && pp_fd_selected(1), "static defaults");
	}
	/* Without a PPIPE_ variable the loader touches nothing; with one it parses them all. */
	{
		char *none[] = { "PATH=/bin", "PPIPX_MIN_WRITE=1", NULL };
		char *one[] = { "PATH=/bin", "PPIPE_MIN_WRITE=65536", NULL };

		pp_cfg.min_write = 12345;
		pp_config_load(none);
		CHECK(pp_cfg.min_write == 12345,
		      "no PPIPE_ variable: nothing parsed, nothing reset");
		pp_config_load(one);
		CHECK(pp_cfg.min_write == 65536, "a PPIPE_ variable: the table is loaded");
		pp_config_defaults(&pp_cfg);
	}

	snprintf(prefix, sizeof(prefix), "libppipe[%d]: ", (int)getpid());
	test_size();
	test_int();
	test_bool();
	test_enum();
	test_fdset();
	test_defaults();
	test_good_values();
	test_bad_values();
	test_bad_strings();
	test_empty_values();
	test_several_bad();
	test_unknown();
	test_secure();
	test_dump();
	test_log();
	if (failures) {
		fprintf(stderr, "test-config: %d failure(s)\n", failures);
		return 1;
	}
	printf("test-config: all passed\n");
	return 0;
}
