#!/usr/bin/env python3
"""ppipe-bench --memory-pressure: stress-ng runs, reclaim evidence is reported, nothing is left behind.

usage: test-bench-pressure.py PPIPE_BENCH
"""
import json
import os
import shutil
import subprocess
import sys

BENCH = sys.argv[1]
if not shutil.which("stress-ng"):
    print("SKIP: stress-ng is not installed")
    sys.exit(77)

p = subprocess.Popen([BENCH, "-d", "0.5", "--memory-pressure", "--pressure-limit", "256M",
                      "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
out, err = p.communicate(timeout=60)
if p.returncode != 0:
    print("FAIL: run:", p.returncode, err)
    sys.exit(1)
r = json.loads(out)
pr = r.get("pressure") or {}
failures = []
if r.get("memory_pressure") is not True:
    failures.append("memory_pressure not true")
if pr.get("method") not in ("cgroup-v1", "cgroup-v2", "global"):
    failures.append(f"unknown method {pr.get('method')!r}")
if "stress-ng" not in pr.get("stressor", ""):
    failures.append("stressor does not name stress-ng")
for key in ("pgscan_direct", "pgsteal_direct", "allocstall", "pgscan_kswapd"):
    if not isinstance(pr.get("vmstat_delta", {}).get(key), int):
        failures.append(f"vmstat_delta.{key} missing")
if not isinstance(pr.get("direct_reclaim"), bool):
    failures.append("direct_reclaim is not a boolean")
if pr.get("method", "").startswith("cgroup"):
    if not pr.get("memcg_delta"):
        failures.append("cgroup run without memcg_delta")
    # As root with a memory controller, a full cgroup must reclaim.
    if pr.get("direct_reclaim") is not True:
        failures.append("a full memory cgroup saw no reclaim")
roots = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory")
if any(os.path.exists(f"{root}/ppipe-bench.{p.pid}") for root in roots):
    failures.append("the run's cgroup was not removed")
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            if "ppipe-bench.%d" % p.pid in f.read():
                failures.append(f"process {pid} survived in the run's cgroup")
    except OSError:
        pass
for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failures; pressure={json.dumps(pr)}")
sys.exit(1 if failures else 0)
