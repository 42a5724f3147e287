// SPDX-License-Identifier: MIT
/* Reading "key value" files such as /proc/vmstat and memory.stat, and PSI files. */
#include "pressure.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void)
{
	char path[] = "/tmp/test-pressure-stat.XXXXXX";
	int fd = mkstemp(path), failures = 0;
	uint64_t v = 0;
	FILE *f;

	if (fd < 0)
		return 99;
	f = fdopen(fd, "w");
	fprintf(f, "pgscan_direct_throttle 7\npgscan_direct 12345\nallocstall_normal 3\nmax 9\n");
	fclose(f);

	if (pressure_read_stat(path, "pgscan_direct", &v) || v != 12345) {
		fprintf(stderr, "pgscan_direct: got %llu, not the _throttle line\n",
			(unsigned long long)v);
		failures++;
	}
	if (pressure_read_stat(path, "max", &v) || v != 9) {
		fprintf(stderr, "max: got %llu\n", (unsigned long long)v);
		failures++;
	}
	if (!pressure_read_stat(path, "allocstall", &v)) {
		fprintf(stderr, "a key prefix must not match\n");
		failures++;
	}
	if (!pressure_read_stat("/nonexistent/file", "x", &v)) {
		fprintf(stderr, "a missing file must fail\n");
		failures++;
	}
	/* A PSI file: the "some" line's total, not the "full" one's. */
	f = fopen(path, "w");
	fprintf(f, "some avg10=0.50 avg60=0.10 avg300=0.02 total=4711\n"
		   "full avg10=0.00 avg60=0.00 avg300=0.00 total=99\n");
	fclose(f);
	if (pressure_read_psi_some(path, &v) || v != 4711) {
		fprintf(stderr, "psi some: got %llu\n", (unsigned long long)v);
		failures++;
	}
	f = fopen(path, "w");
	fprintf(f, "full avg10=0.00 avg60=0.00 avg300=0.00 total=99\n");
	fclose(f);
	if (!pressure_read_psi_some(path, &v)) {
		fprintf(stderr, "psi: a file without a some line must fail\n");
		failures++;
	}
	unlink(path);
	return failures ? 1 : 0;
}
