// SPDX-License-Identifier: MIT
/* Reading "key value" files such as /proc/vmstat and memory.stat. */
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
	unlink(path);
	return failures ? 1 : 0;
}
