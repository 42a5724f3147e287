#!/usr/bin/env python3
"""examples/span-stream.c end to end: ppipe.h's spans with libppipe absent, preloaded and linked.

usage: test-span-stream.py SPAN_STREAM SPAN_STREAM_LINKED LIBPPIPE

The producer writes a deterministic stream through spans and prints its length and
FNV-1a checksum; the consumer checks every byte and prints the same. Three ways:

  absent     sh -c 'span-stream produce | span-stream consume', no LD_PRELOAD: the
             header's fallback (ppipe_version() is NULL), spans are buffers.
  preloaded  the same under LD_PRELOAD=libppipe: sh makes the pipe, and sh and both
             stages run libppipe (the default PPIPE_READERS=verify accelerates a pipe
             only while every reader runs libppipe), so spans are ring memory.
  linked     span-stream-linked pipeline, no LD_PRELOAD: the program links libppipe,
             makes the pipe and forks its consumer, which is libppipe's as the
             producer is. (Under a shell without libppipe the pipe would be one
             libppipe did not see made, and stay plain: the linked build run as
             'produce | consume' is checked for its bytes only.)

Every run must end well with the same checksum; the preloaded and linked ones must
show spans committed in place (PPIPE_STATS, the sum of span_commits), the absent one
must say that no libppipe answered.
"""
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

BYTES = 32 << 20
LINE = re.compile(r"^span-stream (produce|consume): (\d+) bytes, fnv1a ([0-9a-f]{16}), (.*)$")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def run(name, cmd, tmp, lib=None):
    """Run cmd (argv) with PPIPE_STATS into tmp, LD_PRELOAD=lib if given; return
    ({side: (bytes, checksum, rest)}, span_commits summed over the reports)."""
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}
    env["PPIPE_STATS"] = os.path.join(tmp, f"{name}-%p.json")
    if lib:
        env["LD_PRELOAD"] = lib
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    lines = {}
    for line in p.stderr.splitlines():
        m = LINE.match(line)
        if m:
            lines[m.group(1)] = (int(m.group(2)), m.group(3), m.group(4))
    commits = 0
    for path in glob.glob(os.path.join(tmp, f"{name}-*.json")):
        with open(path, encoding="utf-8") as f:
            commits += sum(json.loads(ln)["totals"]["span_commits"] for ln in f if ln.strip())
    ok = check(p.returncode == 0 and set(lines) == {"produce", "consume"},
               f"{name}: exit {p.returncode}, stderr {p.stderr.strip()[-600:]!r}")
    if ok:
        print(f"{name}: {lines['produce'][2]}; span_commits {commits}")
    return lines if ok else None, commits


def main():
    weak, linked, lib = (os.path.abspath(a) for a in sys.argv[1:4])
    n = ["-n", str(BYTES)]
    sums = {}
    with tempfile.TemporaryDirectory(prefix="span-stream.") as tmp:
        def pipe(prog):
            return ["sh", "-c", " | ".join(shlex.join([prog, side] + n)
                                           for side in ("produce", "consume"))]

        cases = [("absent", pipe(weak), None), ("preloaded", pipe(weak), lib),
                 ("linked", [linked, "pipeline"] + n, None),
                 ("linked-under-sh", pipe(linked), None)]
        for name, cmd, preload in cases:
            lines, commits = run(name, cmd, tmp, preload)
            if not lines:
                continue
            (sent, sent_sum, how), (got, got_sum, verdict) = lines["produce"], lines["consume"]
            check(sent == got == BYTES and sent_sum == got_sum and verdict == "stream ok",
                  f"{name}: produced {sent} bytes {sent_sum}, consumed {got} {got_sum} "
                  f"({verdict})")
            sums[name] = sent_sum
            if name == "absent":
                check(how.endswith("libppipe absent (ppipe.h's fallback: buffers and write())")
                      and commits == 0, f"absent: libppipe answered: {how!r}, {commits}")
            else:
                check(re.search(r"libppipe \d+\.\d+\.\d+", how)
                      and how.endswith("(linked)") == name.startswith("linked"),
                      f"{name}: libppipe did not answer as expected: {how!r}")
            if name in ("preloaded", "linked"):
                check(commits > 0, f"{name}: no span was committed in place (PPIPE_STATS)")
    check(len(set(sums.values())) == 1 and len(sums) == len(cases),
          f"the checksums differ between the ways: {sums}")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
