#!/usr/bin/env python3
"""ppipe-bench --verify through libppipe: many writers and readers, threads and processes, rings trimmed while in use.

Rings are huge-page backed (PPIPE_THP=on) so that trimming splits huge pages under live
vmsplice references; one case repeats with 4 KiB pages.

Every byte is checked by the benchmark's verification stream; the statistics must show that
the fast path really ran. The SPANS cases write in place through ppipe.h's spans (--produce
api), blocks of several spans among them, and must show spans committed in place. Under a ThreadSanitizer build this is the shim's race test; the
last case runs write-behind (PPIPE_MODE=uring), its service thread included.
usage: test-shim-verify.py PPIPE_BENCH LIBPPIPE
"""
import json
import os
import subprocess
import sys
import tempfile

BENCH, LIB = sys.argv[1:3]
CASES = [
    ["-w", "1", "-r", "1", "-s", "65536"],
    ["-w", "1", "-r", "1", "-s", "65536", "THP=off"],
    ["-w", "5", "-r", "10", "-s", "65536"],
    ["-w", "3", "-r", "2", "-s", "32678", "-p", "65536"],
    ["-w", "2", "-r", "2", "-s", "5000000", "-p", "65536"],
    ["--mode", "procs", "-w", "2", "-r", "2", "-s", "100000"],
    ["-w", "5", "-r", "10", "-s", "65536", "MODE=uring"],
    ["--produce", "api", "-w", "3", "-r", "2", "-s", "65536", "SPANS"],
    ["--produce", "api", "-w", "2", "-r", "2", "-s", "5000000", "-p", "65536", "SPANS"],
    ["--produce", "api", "--mode", "procs", "-w", "2", "-r", "2", "-s", "100000", "SPANS"],
]
failures = []
with tempfile.TemporaryDirectory() as tmp:
    for i, case in enumerate(CASES):
        args = [a for a in case if not a.startswith(("THP=", "MODE=")) and a != "SPANS"]
        thp = "off" if "THP=off" in case else "on"
        mode = "uring" if "MODE=uring" in case else "auto"
        stats = os.path.join(tmp, f"stats-{i}-%p.json")
        env = dict(os.environ, LD_PRELOAD=LIB, PPIPE_MIN_WRITE="4097", PPIPE_STATS=stats,
                   PPIPE_IDLE_MS="1", PPIPE_POOL_KEEP="0", PPIPE_THP=thp, PPIPE_MODE=mode)
        p = subprocess.run([BENCH, *args, "-d", "0.5", "--verify", "--json"], env=env,
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            failures.append(f"{case}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
            continue
        if json.loads(p.stdout).get("verified") is not True:
            failures.append(f"{case}: not verified")
        accel = spans = 0
        for name in os.listdir(tmp):
            if name.startswith(f"stats-{i}-"):
                with open(os.path.join(tmp, name)) as f:
                    for line in f:
                        report = json.loads(line)
                        accel += report["totals"]["writes_accelerated"]
                        spans += report["totals"]["span_commits"]
                        if not report["thp"].startswith(thp + ":"):
                            failures.append(f"{case}: thp is {report['thp']!r}")
        if accel == 0:
            failures.append(f"{case}: no write took the vmsplice path")
        if "SPANS" in case and spans == 0:
            failures.append(f"{case}: no span was committed in place")
for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
