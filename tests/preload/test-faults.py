#!/usr/bin/env python3
"""Failures on purpose (PPIPE_TEST_FAULT): every one ends in a correct result.

usage: test-faults.py LIBRARY PPIPE_BENCH

For each fault, runs with LD_PRELOAD=LIBRARY:
  - ppipe-bench, 2 writer threads and 1 reader, 64 KiB writes, every byte
    verified (lost, duplicated, reordered or altered bytes fail it);
  - ppipe-bench in processes, 1 MiB writes into a 64 KiB pipe (partial
    vmsplices, waits, the write's hold on its file);
  - sh -c 'cat F | cat | sha256sum' (pipes across exec, the registry);
  - Python writing F into a pipe to a fork child that hashes it: a pipe
    whose capacity nobody asked for (libppipe asks at the first large
    write), crossing a fork (its state moves into the registry then).
Each must succeed with the right data, and the library must report that
the fault was injected at least once. A table of injections and bytes
is printed.
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

import pyshapes

FAULTS = [
    # name, environment
    ("vmsplice ENOMEM", {"PPIPE_TEST_FAULT": "vmsplice:ENOMEM:7"}),
    ("vmsplice EFAULT", {"PPIPE_TEST_FAULT": "vmsplice:EFAULT:5"}),
    ("vmsplice EAGAIN", {"PPIPE_TEST_FAULT": "vmsplice:EAGAIN:3"}),
    # Writer turns retry right after a full pipe: a refusal then, with the write's pin held.
    ("vmsplice ENOMEM, turns on", {"PPIPE_TEST_FAULT": "vmsplice:ENOMEM:7", "PPIPE_TURNS": "on"}),
    ("ring mmap ENOMEM", {"PPIPE_TEST_FAULT": "mmap:ENOMEM:2"}),
    ("F_GETPIPE_SZ fails", {"PPIPE_TEST_FAULT": "getpipesz:EINVAL:1"}),
    ("FIONREAD fails", {"PPIPE_TEST_FAULT": "fionread:EIO:2", "PPIPE_RING_SIZE": "64K"}),
    ("no fd for the write's hold (EMFILE)", {"PPIPE_TEST_FAULT": "dupfd:EMFILE:1"}),
    ("registry full", {"PPIPE_TEST_FAULT": "registry:ENOMEM:1"}),
    ("first ring cannot map (THP auto)", {"PPIPE_TEST_FAULT": "mmap:ENOMEM:1", "PPIPE_THP": "auto"}),
    ("huge/4 KiB page switch fails", {"PPIPE_TEST_FAULT": "thp:ENOMEM:2", "PPIPE_THP": "auto"}),
    ("pool cap (1 MiB)", {"PPIPE_POOL_MAX": "1M", "PPIPE_TEST_FAULT": "vmsplice:EIO:1000000"}),
]
REPORT = re.compile(r"PPIPE_TEST_FAULT: (\w+) failed (\d+) of (\d+) calls")


def run(cmd, env, timeout=120):
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


def injected(stderr):
    return sum(int(m.group(2)) for m in REPORT.finditer(stderr))


def main():
    lib, bench = os.path.abspath(sys.argv[1]), sys.argv[2]
    failed = False
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(16 << 20))
        with open(data, "rb") as f:
            want = hashlib.sha256(f.read()).hexdigest()
        print(f"{'fault':38} {'injected':>9} {'verified bytes':>15} {'lost':>5} result")
        for name, extra in FAULTS:
            env = dict(os.environ, LD_PRELOAD=lib, **extra)
            env.setdefault("PPIPE_THP", "off")
            if "PPIPE_THP" in extra:
                env["PPIPE_THP"] = extra["PPIPE_THP"]
            hits = verified = 0
            problems = []
            r = run([bench, "-w", "2", "-r", "1", "-s", "64K", "-d", "0.3", "--verify",
                     "--json"], env)
            if r.returncode:
                problems.append(f"threads: exit {r.returncode}: {r.stderr.strip()[-300:]}")
            else:
                hits += injected(r.stderr)
                verified += int(json.loads(r.stdout)["bytes_read"])
            r = run([bench, "--mode", "procs", "-s", "1M", "-p", "0", "-d", "0.3", "--json"],
                    env)
            if r.returncode:
                problems.append(f"procs: exit {r.returncode}: {r.stderr.strip()[-300:]}")
            else:
                hits += injected(r.stderr)
            r = run(["sh", "-c", f"cat {data} | cat | sha256sum"], env)
            got = r.stdout.split()
            if r.returncode or not got or got[0] != want:
                problems.append(f"pipeline: exit {r.returncode}, hash {got[:1]}")
            else:
                hits += injected(r.stderr)
                verified += 2 * (16 << 20)
            r = run([sys.executable, "-c", pyshapes.FORK_READER, data], env)
            got = r.stdout.split()
            if r.returncode or not got or got[0] != want:
                problems.append(f"fork: exit {r.returncode}, hash {got[:1]}: "
                                f"{r.stderr.strip()[-300:]}")
            else:
                hits += injected(r.stderr)
                verified += 16 << 20
            if "PPIPE_TEST_FAULT" in extra and "EIO:1000000" not in extra["PPIPE_TEST_FAULT"] \
                    and not hits:
                problems.append("the fault was never injected")
            print(f"{name:38} {hits:9} {verified:15} {0 if not problems else '?':>5} "
                  f"{'ok' if not problems else 'FAIL'}")
            for p in problems:
                print("    " + p)
            failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
