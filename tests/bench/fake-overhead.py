#!/usr/bin/env python3
"""Fake ppipe-overhead for testing ppipe-compare's overhead matrix without
timing anything.

Takes the ppipe-overhead command line and prints its one JSON line with a
deterministic ns_per_op: BASE_NS of the case (small: 500 + SIZE), times
FACTORS of the row when the library is in (LD_PRELOAD set, or -p LIB for
the start case) and then also times PPIPE_FAKE_FACTOR (default 1.0). A
library whose file name contains "empty" stands for the empty library:
EMPTY_FACTORS of the row instead, and no PPIPE_FAKE_FACTOR.

Test hooks (environment), the counter shared with fake-bench.py:
  FAKE_BENCH_STATE=FILE   invocation counter; multiplies the time by 1,
                          1.01 or 1.05 by invocation number
  FAKE_BENCH_FAIL=N       invocation N (needs FAKE_BENCH_STATE) exits 3
  FAKE_BENCH_LOG=FILE     appends one JSON line per run: its arguments,
                          whether the library is in, its PPIPE_* variables
PPIPE_* variables without the library are an environment error (exit 3),
and so are LD_PRELOAD in the start case's own environment (the driver
must stay plain there) and -p in any other case.
"""

import json
import os
import sys

import fakecommon
from fakecommon import Parser, fail, invocation, positive

PROG = "ppipe-overhead"
fakecommon.PROG = PROG

BASE_NS = {"start": 500000.0, "fork": 100000.0, "exec": 700000.0,
           "pipe": 5000.0, "shell": 2000000.0}
# Preloaded/plain time, by row ("small SIZE" for the small case).
FACTORS = {"start": 1.10, "fork": 1.05, "exec": 1.20, "pipe": 1.02,
           "small 1": 0.98, "small 128": 1.01, "shell": 1.30}
# The empty library's preloaded/plain time, by row.
EMPTY_FACTORS = {"start": 1.03, "fork": 1.0, "exec": 1.02, "pipe": 1.0,
                 "small 1": 1.0, "small 128": 0.99, "shell": 1.04}
JITTER = (1.0, 1.01, 1.05)


def log_run(argv, preloaded):
    """Append this run to FAKE_BENCH_LOG, if set."""
    path = os.environ.get("FAKE_BENCH_LOG")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({
            "tool": PROG, "argv": argv, "preloaded": preloaded,
            "ld_preload": os.environ.get("LD_PRELOAD"),
            "env": {k: v for k, v in os.environ.items()
                    if k.startswith("PPIPE_")}}) + "\n")


def main():
    """Parse arguments and print the fake result."""
    p = Parser(prog=PROG)
    p.add_argument("-p")
    p.add_argument("-s", type=positive(int), default=1)
    p.add_argument("case", choices=("start", "fork", "exec", "pipe", "small",
                                    "shell"))
    p.add_argument("n", type=positive(int))
    p.add_argument("program", nargs="?")
    a = p.parse_args()

    count = invocation()
    preload = os.environ.get("LD_PRELOAD", "")
    if a.case == "start":
        if preload:
            fail(3, "start: LD_PRELOAD in the driver's own environment")
        preloaded = bool(a.p)
        preload = a.p or ""
    else:
        if a.p:
            fail(3, f"-p with {a.case}: only start takes the library by -p")
        preloaded = bool(preload)
    log_run(sys.argv[1:], preloaded)
    if not preloaded and any(k.startswith("PPIPE_") for k in os.environ):
        fail(3, "PPIPE_* variables set without the library")
    if count and os.environ.get("FAKE_BENCH_FAIL") == str(count):
        fail(3, f"injected failure at invocation {count}")

    row = f"small {a.s}" if a.case == "small" else a.case
    ns = 500.0 + a.s if a.case == "small" else BASE_NS[a.case]
    if preloaded and "empty" in os.path.basename(preload):
        ns *= EMPTY_FACTORS.get(row, 1.0)
    elif preloaded:
        ns *= FACTORS.get(row, 1.0) * float(
            os.environ.get("PPIPE_FAKE_FACTOR", "1.0"))
    ns *= JITTER[count % 3]
    print(json.dumps({"case": a.case, "n": a.n,
                      "size": a.s if a.case == "small" else 0,
                      "ns_per_op": round(ns, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
