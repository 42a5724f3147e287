#!/usr/bin/env python3
"""PPIPE_TURNS=auto: the trial runs and chooses, and every byte arrives.

usage: test-turns-auto.py LIBRARY PPIPE_BENCH

Four writer threads and one reader stream 64 KiB writes, every byte
verified, under PPIPE_DEBUG. The pipe must get a choice ("turns: pipe N:
on|off (...)"), taken from windows with and without turns; with turns
forced off, no trial may run. The choice itself depends on the machine
and is only printed.
"""
import os
import re
import subprocess
import sys

CHOICE = re.compile(r"turns: pipe \d+: (on|off) \((\d+) MB/s with turns, (\d+) without")


def run(lib, bench, turns):
    env = dict(os.environ, LD_PRELOAD=lib, PPIPE_DEBUG="1", PPIPE_TURNS=turns)
    r = subprocess.run([bench, "-w", "4", "-r", "1", "-s", "64K", "-d", "0.5", "--verify"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120)
    return r.returncode, CHOICE.findall(r.stderr), r.stderr


def main():
    lib, bench = os.path.abspath(sys.argv[1]), sys.argv[2]
    failed = False
    rc, choices, err = run(lib, bench, "auto")
    print(f"auto: exit {rc}, choices {choices}")
    if rc != 0:
        print("FAIL: the verified run failed:", err[-500:])
        failed = True
    if not choices:
        print("FAIL: no choice was made in 0.5 s of four writers")
        failed = True
    rc, choices, err = run(lib, bench, "off")
    print(f"off: exit {rc}, choices {choices}")
    if rc != 0 or choices:
        print("FAIL: PPIPE_TURNS=off must write correctly without any trial")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
