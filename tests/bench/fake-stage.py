#!/usr/bin/env python3
"""Fake ppipe-stage for testing ppipe-compare's pipeline matrix without timing anything.

Takes the ppipe-stage command line. produce writes one line that names its
size and duration; relay copies stdin to stdout and adds a line; consume
reads to EOF and prints a deterministic JSON result built from what came
through: mbps = 900 + size/2000 - 100 * relays, multiplied by
FAKE_BENCH_SHIM_FACTOR (default 1.0) when LD_PRELOAD is set, and
lat_max_ns = the producer's duration in ns (so a test can see which
duration the runner gave the pipeline).

Test hooks (environment), the counter shared with fake-bench.py:
  FAKE_BENCH_STATE=FILE    invocation counter, bumped by consume; adds 0, 5
                           or 23 MB/s of deterministic jitter
  FAKE_BENCH_FAIL=N        the consumer of invocation N exits 3
  FAKE_STAGE_CORRUPT=1     consumers of timed (-d) streams fail verification
                           (exit 1)
  FAKE_STAGE_PIPE_SIZE=N   the pipe size consumers report (65536)
In every stage, PPIPE_* variables without LD_PRELOAD are an environment
error (exit 3), and so is an --expect-preload that LD_PRELOAD lacks.
"""

import json
import os
import sys

import fakecommon
from fakecommon import Parser, fail, invocation, positive

PROG = "ppipe-stage"
fakecommon.PROG = PROG


def main():
    """Parse arguments and play one stage."""
    p = Parser(prog=PROG)
    p.add_argument("mode", choices=("produce", "relay", "consume"))
    p.add_argument("-s", type=positive(int), required=True)
    amount = p.add_mutually_exclusive_group()
    amount.add_argument("-d", type=positive(float))
    amount.add_argument("-b")
    p.add_argument("--cpus")
    p.add_argument("--expect-preload")
    a = p.parse_args()

    preload = os.environ.get("LD_PRELOAD", "")
    preloaded = [x for x in preload.replace(" ", ":").split(":") if x]
    if a.expect_preload and a.expect_preload not in preloaded:
        fail(3, f"{a.expect_preload} is not loaded in this process")
    if not preloaded and any(k.startswith("PPIPE_") for k in os.environ):
        fail(3, "PPIPE_* variables set without LD_PRELOAD")
    if a.mode != "produce" and (a.d or a.b is not None):
        fail(2, "-d and -b apply to produce only")

    if a.mode == "produce":
        if a.d is None and a.b is None:
            a.d = 1.0
        print(f"stream size={a.s} duration={a.d or 0}", flush=True)
        return 0
    data = sys.stdin.read()
    if a.mode == "relay":
        sys.stdout.write(data + "relay\n")
        return 0

    count = invocation()
    lines = data.splitlines()
    if not lines or not lines[0].startswith("stream "):
        fail(1, "consume: the stream ended without the producer's end marker")
    fields = dict(f.split("=") for f in lines[0].split()[1:])
    if int(fields["size"]) != a.s:
        fail(1, f"consume: produced with -s {fields['size']}, consumed with -s {a.s}")
    if count and os.environ.get("FAKE_BENCH_FAIL") == str(count):
        fail(3, f"injected failure at invocation {count}")
    duration = float(fields["duration"])
    if os.environ.get("FAKE_STAGE_CORRUPT") == "1" and duration:
        fail(1, "consume: verification failed at stream offset 42: expected 0x17, got 0x71")
    relays = lines.count("relay")
    factor = float(os.environ.get("FAKE_BENCH_SHIM_FACTOR", "1.0")) \
        if preloaded else 1.0
    mbps = (900 + a.s / 2000 - 100 * relays + (0, 5, 23)[count % 3]) * factor
    writes_per_s = mbps * (1 << 20) / a.s
    lat = int(1e9 / writes_per_s)
    print(json.dumps({
        "tool": PROG, "version": "0.0.0-fake", "mode": "consume", "size": a.s,
        "pipe_size": int(os.environ.get("FAKE_STAGE_PIPE_SIZE", "65536")),
        "bytes": int(mbps * (1 << 20) * duration), "elapsed_s": duration,
        "mbps": mbps, "verified": True, "writes": int(writes_per_s * duration),
        "writes_per_s": writes_per_s, "producer_elapsed_s": duration,
        "lat_avg_ns": lat, "lat_p50_ns": lat * 95 // 100, "lat_p99_ns": lat * 2,
        "lat_p999_ns": lat * 5, "lat_max_ns": int(duration * 1e9)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
