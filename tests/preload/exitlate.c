// SPDX-License-Identifier: MIT
/*
 * A library of exit-report's, initialised before libppipe (it is a
 * dependency of the program): its atexit handler is registered first, so
 * it runs after libppipe's has written the report. When the program asks
 * (exitlate_status >= 0), the handler ends the process with _exit().
 */
#include <stdlib.h>
#include <unistd.h>

int exitlate_status = -1;

static void late(void)
{
	if (exitlate_status >= 0)
		_exit(exitlate_status);
}

__attribute__((constructor)) static void register_late(void)
{
	atexit(late);
}
