// SPDX-License-Identifier: MIT
/*
 * Memory pressure from PSI files: parsing the "some" line, and the
 * stall-share decision pp_psi_poll() makes from successive readings of a
 * file this test writes, at times it chooses (no clock, no sleeping).
 */
#include "config.h"
#include "psi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define MS 1000000ull /* ns */

static char file[64];

static void report(unsigned long long some_us)
{
	FILE *f = fopen(file, "w");

	if (!f) {
		perror(file);
		exit(99);
	}
	fprintf(f,
		"some avg10=1.00 avg60=0.50 avg300=0.10 total=%llu\n"
		"full avg10=0.00 avg60=0.00 avg300=0.00 total=%llu\n",
		some_us, some_us / 3);
	fclose(f);
}

static void test_parse(void)
{
	uint64_t v = 7;

	CHECK(pp_psi_parse_some_total("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
				      "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
				      &v) &&
		      v == 0,
	      "zero: %llu", (unsigned long long)v);
	CHECK(pp_psi_parse_some_total("some avg10=12.5 avg60=1 avg300=0 total=18446744073709551\n",
				      &v) &&
		      v == 18446744073709551ull,
	      "big: %llu", (unsigned long long)v);
	/* "full" first (never seen, but the order is not ours to assume). */
	CHECK(pp_psi_parse_some_total("full avg10=0 avg60=0 avg300=0 total=9\n"
				      "some avg10=0 avg60=0 avg300=0 total=42\n",
				      &v) &&
		      v == 42,
	      "some after full: %llu", (unsigned long long)v);
	CHECK(!pp_psi_parse_some_total("full avg10=0 avg60=0 avg300=0 total=9\n", &v), "only full");
	CHECK(!pp_psi_parse_some_total("", &v), "empty");
	CHECK(!pp_psi_parse_some_total("some avg10=0 avg60=0 avg300=0\nfull total=5\n", &v),
	      "total= of another line");
	CHECK(!pp_psi_parse_some_total("some avg10=0 total=x\n", &v), "not a number");
	CHECK(!pp_psi_parse_some_total("awesome total=5\n", &v), "a word ending in some");
	CHECK(pp_psi_parse_some_total("awesome total=5\nsome total=6", &v) && v == 6,
	      "the some line after another, no newline at the end: %llu", (unsigned long long)v);
}

/* The cgroup v2 path from the text @text of a /proc/PID/cgroup file, or "" if none. */
static const char *v2_path(const char *text, size_t len)
{
	static char out[256];
	char name[] = "/tmp/ppipe-test-cgroup.XXXXXX";
	int fd = mkstemp(name);
	bool found;

	CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text) &&
		      lseek(fd, 0, SEEK_SET) == 0,
	      "temporary cgroup file");
	unlink(name);
	found = pp_psi_cgroup_v2_path(fd, out, len);
	close(fd);
	return found ? out : "";
}

static void test_cgroup_path(void)
{
	char text[4096] = "";
	int at = 0;

	CHECK(!strcmp(v2_path("0::/user.slice/a.scope\n", 256), "/user.slice/a.scope"), "v2 only");
	CHECK(!strcmp(v2_path("0::/\n", 256), "/"), "the root cgroup");
	CHECK(!strcmp(v2_path("0::/x", 256), "/x"), "no newline at the end");
	CHECK(!strcmp(v2_path("10:memory:/a\n1:name=systemd:/b\n", 256), ""), "v1 only");
	CHECK(!strcmp(v2_path("10::/not-v2\n0::/v2\n", 256), "/v2"), "10:: is not 0::");
	CHECK(!strcmp(v2_path("0::/abcdefgh\n", 8), ""), "a path that does not fit");
	CHECK(!strcmp(v2_path("", 256), ""), "empty");
	/* Beside v1: a line per controller first, long enough to pass 1 KiB. */
	for (int i = 12; i > 0; i--)
		at += snprintf(text + at, sizeof(text) - (size_t)at,
			       "%d:controller%d:/system.slice/docker-%064d.scope\n", i, i, i);
	snprintf(text + at, sizeof(text) - (size_t)at, "0::/system.slice/unified.scope\n");
	CHECK(strlen(text) > 1024, "the hybrid file is long");
	CHECK(!strcmp(v2_path(text, 256), "/system.slice/unified.scope"),
	      "the 0:: line after a kilobyte of v1 lines");
}

static void test_poll(void)
{
	uint64_t t = 1000 * MS;

	snprintf(file, sizeof(file), "/tmp/ppipe-test-psi-%d", (int)getpid());
	pp_config_defaults(&pp_cfg);
	strcpy(pp_cfg.psi_file, file);
	pp_cfg.psi = 10;

	report(5000);
	CHECK(!pp_psi_poll(t), "the first reading is the baseline");
	report(5000 + 50000); /* 50 ms stalled in 1 s: 5% */
	CHECK(!pp_psi_poll(t += 1000 * MS), "5%% is not pressure");
	CHECK(!pp_psi_active() && pp_psi_episodes() == 0, "no episode yet");
	report(55000 + 100000); /* 100 ms in 1 s: exactly 10% */
	CHECK(pp_psi_poll(t += 1000 * MS), "10%% is pressure");
	CHECK(pp_psi_active() && pp_psi_episodes() == 1, "one episode: %llu",
	      (unsigned long long)pp_psi_episodes());
	report(155000 + 400000); /* still under pressure: the same episode */
	CHECK(pp_psi_poll(t += 1000 * MS) && pp_psi_episodes() == 1, "episode continues");
	CHECK(pp_psi_poll(t), "no wall time passed: the last answer holds");
	CHECK(!pp_psi_poll(t += 1000 * MS), "no new stall: pressure is over");
	CHECK(!pp_psi_active() && pp_psi_episodes() == 1, "over");
	report(100); /* the counter went back (another file): no underflow */
	CHECK(!pp_psi_poll(t += 1000 * MS), "a smaller total is no stall");
	report(100 + 900000);
	CHECK(pp_psi_poll(t += 1000 * MS) && pp_psi_episodes() == 2, "second episode");
	unlink(file);
	CHECK(pp_psi_poll(t += 1000 * MS), "an unreadable file keeps the last answer");

	pp_cfg.psi = 0;
	CHECK(!pp_psi_poll(t += 1000 * MS), "PPIPE_PSI=0 ignores PSI");
	pp_cfg.psi = 10;

	/* A file that never existed: PSI is off for good, and quiet. */
	pp_psi_after_fork_child();
	strcpy(pp_cfg.psi_file, "/nonexistent/memory.pressure");
	CHECK(!pp_psi_poll(t += 1000 * MS) && !pp_psi_poll(t += 1000 * MS), "no file");
	CHECK(!pp_psi_active(), "no file: no pressure");
}

int main(void)
{
	test_parse();
	test_cgroup_path();
	test_poll();
	if (failures)
		fprintf(stderr, "test-psi: %d failure(s)\n", failures);
	else
		printf("test-psi: all passed\n");
	return failures ? 1 : 0;
}
