// SPDX-License-Identifier: MIT
/*
 * static-copy: copies stdin to stdout. Linked statically, so LD_PRELOAD
 * has no effect on it: a pipe end it holds is held by a program libppipe
 * cannot see into, and must stay plain.
 */
#include <errno.h>
#include <unistd.h>

int main(void)
{
	static char buf[1 << 16];

	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(1, buf + off, (size_t)(n - off));

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return 1;
			off += w;
		}
	}
}
