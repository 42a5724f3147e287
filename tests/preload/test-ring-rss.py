#!/usr/bin/env python3
"""Ring memory follows use: what 64 pipes cost in RSS, active and idle.

usage: test-ring-rss.py RING_MEMORY LIBRARY

Runs ring-memory (64 pipes, one 64 KiB write each, read at once) with
LD_PRELOAD=LIBRARY and PPIPE_IDLE_MS=200. Active, a pipe may keep what its
write used (64 KiB) and a header page or two; idle, the default keep of two
pages. Fails if the process grew by more than that (with 1 MiB of slack for
the program's own buffers), as it did when rings were faulted in whole and
kept 128 KiB.
"""
import os
import re
import subprocess
import sys

PIPES = 64


def main():
    prog, lib = sys.argv[1], os.path.abspath(sys.argv[2])
    env = dict(os.environ, LD_PRELOAD=lib, PPIPE_IDLE_MS="200", PPIPE_THP="off")
    out = subprocess.run([prog, str(PIPES), "65536", "200"], env=env, stdout=subprocess.PIPE,
                         text=True, timeout=60, check=True).stdout
    print(out.strip())
    m = re.search(r"active \+(-?\d+) KiB, idle \+(-?\d+) KiB", out)
    if not m:
        print("FAIL: no numbers")
        return 1
    active, idle = int(m.group(1)), int(m.group(2))
    ok = True
    if active > PIPES * (64 + 12) + 1024:
        print(f"FAIL: active +{active} KiB, more than the writes used")
        ok = False
    if idle > PIPES * 12 + 1024:
        print(f"FAIL: idle +{idle} KiB, more than two pages a pipe")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
