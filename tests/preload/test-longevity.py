#!/usr/bin/env python3
"""A long-lived tree's week, run fast: the registry gives back what processes leave behind.

usage: test-longevity.py LIBRARY LONGEVITY STATIC_COPY [--slots N --records N] [--kills N]
                         [--statics N]

Everything runs preloaded with LIBRARY and default options, but for a
registry made small (PPIPE_TEST_REGISTRY=SLOTS:RECORDS, 64 slots and 32
records unless told), so that what would take a week of a busy tree to
fill it takes seconds:

  1  one process kills KILLS fork children (default 600, many times the
     records there are), each inside a large write into a tracked pipe;
     then a new pipe's 16 MiB go >= 90% by vmsplice, intact, and the
     registry holds what it held at the start
  2  a pipe a live static program reads stays plain (0 bytes by vmsplice)
     while 300 children are killed and reclaimed around it; once it is
     gone, a new pipe is accelerated again
  3  bash runs `dd bs=64k count=1 | STATIC_COPY` STATICS times (default
     400), then `dd bs=1M count=64 | cat`: that dd's large writes go >= 90%
     by vmsplice (its PPIPE_STATS report); every reader's data intact
  4  more live pipes than slots (20 children, each holding a pipe, on 16
     slots): a new pipe stays plain while they live, PPIPE_DEBUG says once
     that the registry is full, and once they are gone a new pipe is
     accelerated again

The numbers the closing note gives come from the same programs with the
registry at its real size (no --slots/--records) and KILLS=200000,
STATICS=20000 (tests/bench/README.md, "The registry over a week").
Exit status: 0 pass, 1 fail, 77 skip (no bash).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REACH_MIN = 90.0
PROBE = re.compile(r"probe: accelerated (\d+) of (\d+) bytes \(([\d.]+)%\), data (\w+)")
REPORT = re.compile(r"(.*): registry slots (\d+)/(\d+), records (\d+)/(\d+), reclaimed (\d+), "
                    r"full (\d+); segment (\d+) B, (\d+) B resident")

FAILED = []


def check(ok, what, detail=""):
    if not ok:
        FAILED.append(what)
    print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else ""), flush=True)


def run(argv, env, timeout):
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    return p, time.monotonic() - t0


def probes(out):
    return [(int(a), int(b), float(c), d) for a, b, c, d in PROBE.findall(out)]


def reports(out):
    return {m.group(1): [int(x) for x in m.groups()[1:]]
            for m in (REPORT.match(ln) for ln in out.splitlines()) if m}


def case_kills(a, env):
    p, took = run([a.longevity, "kill", str(a.kills)], env, 600)
    print(p.stdout, end="")
    pr, rep = probes(p.stdout), reports(p.stdout)
    check(p.returncode == 0 and len(pr) == 2, f"1 {a.kills} killed children: the run",
          f"status {p.returncode}, {took:.1f} s")
    if len(pr) != 2 or "at the start" not in rep or "at the end" not in rep:
        return
    start, end = rep["at the start"], rep["at the end"]
    check(pr[1][2] >= REACH_MIN and pr[1][3] == "intact",
          f"1 after {a.kills} killed children, a new pipe by vmsplice",
          f"{pr[1][2]:.1f}% (want >= {REACH_MIN:.0f}%), data {pr[1][3]}; at the start "
          f"{pr[0][2]:.1f}%")
    # slots, records, reclaimed: as at the start (the probe's pipe is closed by then).
    check(end[0] <= start[0] + 1 and end[2] <= start[2] + 1,
          "1 the registry holds what it held at the start",
          f"slots {start[0]} -> {end[0]} of {end[1]}, records {start[2]} -> {end[2]} of "
          f"{end[3]}")
    check(end[4] >= a.kills - end[3], "1 the killed children's records were reclaimed",
          f"{end[4]} reclaimed")
    check(end[6] == start[6] and end[7] <= end[6],
          "1 the registry's memory is what it was at the start",
          f"segment {start[6]} -> {end[6]} B, resident {start[7]} -> {end[7]} B")


def case_static_holder(a, env):
    p, took = run([a.longevity, "hold-static", "300", a.static], env, 600)
    print(p.stdout, end="")
    pr = probes(p.stdout)
    held = re.search(r"accelerated (\d+) of \d+ bytes \(want 0\)", p.stdout)
    check(p.returncode == 0 and held and held.group(1) == "0",
          "2 a pipe a live static reader holds stays plain through 300 reclaimed kills",
          f"{held.group(1) if held else '?'} bytes by vmsplice, status {p.returncode}")
    check(len(pr) == 2 and pr[1][2] >= REACH_MIN and pr[1][3] == "intact",
          "2 after it, a new pipe by vmsplice",
          f"{pr[1][2]:.1f}%, data {pr[1][3]}" if len(pr) == 2 else "no probe")


def case_statics(a, env, work):
    report = os.path.join(work, "dd.json")
    script = (f"for i in $(seq {a.statics}); do "
              f"dd if=/dev/zero bs=64k count=1 status=none | {a.static} | wc -c; done "
              f"| sort | uniq -c; sleep 0.3; "
              f"PPIPE_STATS={report} dd if=/dev/zero bs=1M count=64 status=none | cat | wc -c")
    p, took = run(["bash", "-c", script], env, 900)
    lines = p.stdout.split()
    # "<statics> 65536" from the loop, then 67108864 from the last pipeline.
    check(p.returncode == 0 and lines[-1] == str(64 << 20) and
          lines[:2] == [str(a.statics), str(64 << 10)],
          f"3 {a.statics} static readers in one bash, every byte read",
          f"{' '.join(lines[-3:])}, status {p.returncode}, {took:.1f} s")
    try:
        with open(report) as f:
            t = json.loads(f.read().strip().splitlines()[-1])["totals"]
    except (OSError, ValueError, KeyError, IndexError) as e:
        check(False, "3 the last dd's report", str(e))
        return
    acc, pt = t["bytes_accelerated"], t["bytes_passthrough"]
    share = 100.0 * acc / (acc + pt) if acc + pt else 0.0
    check(share >= REACH_MIN, f"3 after {a.statics} static readers, dd | cat by vmsplice",
          f"{share:.1f}% of {acc + pt} bytes (want >= {REACH_MIN:.0f}%)")


def case_full(a, env):
    env = dict(env, PPIPE_TEST_REGISTRY="16:64", PPIPE_DEBUG="1")
    p, took = run([a.longevity, "fill", "20"], env, 300)
    pr = probes(p.stdout)
    said = p.stdout.count("the pipe registry is full")
    print("\n".join(ln for ln in p.stdout.splitlines()
                    if "registry" in ln or ln.startswith("probe")))
    check(p.returncode == 0 and len(pr) == 3, "4 more live pipes than slots: the run",
          f"status {p.returncode}, {took:.1f} s")
    if len(pr) != 3:
        return
    check(pr[1][0] == 0 and pr[1][3] == "intact", "4 while they live, a new pipe stays plain",
          f"{pr[1][0]} bytes by vmsplice, data {pr[1][3]}")
    check(said == 1, "4 PPIPE_DEBUG says once that the registry is full", f"{said} times")
    check(pr[2][2] >= REACH_MIN and pr[2][3] == "intact",
          "4 once they are gone, a new pipe by vmsplice", f"{pr[2][2]:.1f}%, data {pr[2][3]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("longevity")
    ap.add_argument("static")
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--records", type=int, default=32)
    ap.add_argument("--full-size", action="store_true", help="the registry at its real size")
    ap.add_argument("--kills", type=int, default=600)
    ap.add_argument("--statics", type=int, default=400)
    a = ap.parse_args()
    if not shutil.which("bash"):
        print("SKIP: no bash")
        return 77
    env = {k: v for k, v in os.environ.items() if not k.startswith("PPIPE_")}
    env["LD_PRELOAD"] = os.path.abspath(a.lib)
    if not a.full_size:
        env["PPIPE_TEST_REGISTRY"] = f"{a.slots}:{a.records}"
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ppipe-longevity.") as work:
        case_kills(a, env)
        case_static_holder(a, env)
        case_statics(a, env, work)
        case_full(a, env)
    print(f"{len(FAILED)} check(s) failed; {time.monotonic() - t0:.1f} s", flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
