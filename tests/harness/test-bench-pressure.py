#!/usr/bin/env python3
"""ppipe-bench --memory-pressure in both modes: the evidence is reported, nothing is left behind.

usage: test-bench-pressure.py PPIPE_BENCH

memcg (the default): a memory cgroup kept full by a page-cache filler with
a CPU budget; the run must report the cgroup's limit hits, the filler's CPU
share (well below the whole CPU the old, spinning filler took) and where
its reclaim evidence comes from. Without root it must refuse, naming the
hog. hog: the global stress-ng of the kernel series, when stress-ng is
installed. Each run lasts under a second.
"""
import json
import os
import shutil
import subprocess
import sys

BENCH = sys.argv[1]
# Where pressure.c makes its cgroups, "ppipe-bench.<pid>".
ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory")
failures = []


def check(cond, what, extra=None):
    if not cond:
        failures.append(what + (f" ({extra})" if extra else ""))
    return cond


def run(args):
    p = subprocess.Popen([BENCH] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    out, err = p.communicate(timeout=60)
    return p, out, err


def left_behind(pid, what):
    """Nothing of run @pid survives: no cgroup, no process in one."""
    name = f"ppipe-bench.{pid}"
    check(not any(os.path.exists(f"{root}/{name}") for root in ROOTS),
          f"{what}: the run's cgroups were not removed")
    for other in os.listdir("/proc"):
        if not other.isdigit():
            continue
        try:
            with open(f"/proc/{other}/cgroup") as f:
                check(name not in f.read(), f"{what}: process {other} survived in a cgroup")
        except OSError:
            pass


def common(r, mode, what):
    """The pressure object's fields that both modes have."""
    pr = r.get("pressure") or {}
    check(r.get("memory_pressure") is True and r.get("pressure_mode") == mode,
          f"{what}: memory_pressure and pressure_mode", r.get("pressure_mode"))
    check(pr.get("mode") == mode, f"{what}: pressure.mode", pr.get("mode"))
    for key in ("pgscan_direct", "pgsteal_direct", "allocstall", "pgscan_kswapd"):
        check(isinstance(pr.get("vmstat_delta", {}).get(key), int), f"{what}: vmstat_delta.{key}")
    check(isinstance(pr.get("wall_s"), float) and pr["wall_s"] > 0, f"{what}: wall_s")
    check(isinstance(pr.get("direct_reclaim"), bool), f"{what}: direct_reclaim is not a boolean")
    stall = pr.get("bench_stall_us", "missing")
    check(stall is None or isinstance(stall, int), f"{what}: bench_stall_us", stall)
    scope = pr.get("direct_reclaim_scope")
    check(scope == "benchmark" if isinstance(stall, int) else scope in ("cgroup", "system"),
          f"{what}: direct_reclaim_scope {scope!r} with bench_stall_us {stall!r}")
    helper = pr.get("helper") or {}
    share = helper.get("cpu_share", "missing")
    check(share is None or (isinstance(share, float) and share >= 0),
          f"{what}: helper.cpu_share", share)
    check((share is None) == (helper.get("cpu_from") is None)
          and helper.get("cpu_from") in (None, "cgroup", "task"), f"{what}: helper.cpu_from")
    return pr, helper


# memcg, the default mode.
p, out, err = run(["-d", "0.5", "--memory-pressure", "--pressure-limit", "128M", "--json"])
if os.geteuid() != 0:
    check(p.returncode == 3 and "hog" in err, "without root memcg must refuse, naming hog", err)
elif check(p.returncode == 0, "memcg run", err.strip()):
    r = json.loads(out)
    pr, helper = common(r, "memcg", "memcg")
    check(pr.get("method") in ("cgroup-v1", "cgroup-v2"), "memcg: method", pr.get("method"))
    check(pr.get("cgroup_limit") == 128 << 20, "memcg: cgroup_limit", pr.get("cgroup_limit"))
    check("filler" in pr.get("stressor", "") and "stress-ng" not in pr.get("stressor", ""),
          "memcg: the stressor is the filler", pr.get("stressor"))
    memcg = pr.get("memcg_delta") or {}
    hits = memcg.get("failcnt") if pr.get("method") == "cgroup-v1" else memcg.get("max_events")
    keys = {"failcnt"} if pr.get("method") == "cgroup-v1" else {
        "pgscan_direct", "pgsteal_direct", "max_events", "max_events_local"}
    check(set(memcg) == keys, "memcg: memcg_delta keys", sorted(memcg))
    # A cgroup kept at its limit must hit it.
    check(isinstance(hits, int) and hits > 0, "memcg: a full cgroup never hit its limit", memcg)
    check(helper.get("what") == "filler" and helper.get("cpu_budget") == 0.15,
          "memcg: helper and its default budget", helper)
    # This filler is held to 15% of one CPU per 10 ms period. The old one
    # spun: beside a writer and a reader on two CPUs it took about half of
    # one (--filler-cpu 100 does the same), alone it took all of one.
    if helper.get("cpu_share") is not None:
        check(helper["cpu_share"] < 0.4, "memcg: the filler took more than 40% of a CPU",
              helper["cpu_share"])
    left_behind(p.pid, "memcg")

    # The text output says the same in brief; --filler-cpu sets the budget.
    p, out, err = run(["-d", "0.2", "--memory-pressure=memcg", "--pressure-limit", "128M",
                       "--filler-cpu", "5"])
    if check(p.returncode == 0, "memcg text run", err.strip()):
        check("memory_pressure=memcg" in out and "5% of one CPU at most" in out
              and "direct reclaim in the" in out, "memcg: the text output", out)
    left_behind(p.pid, "memcg text")

# hog, the kernel series' method.
if not shutil.which("stress-ng"):
    print("note: stress-ng is not installed; the hog mode is not tested")
else:
    p, out, err = run(["-d", "0.3", "--memory-pressure=hog", "--json"])
    if check(p.returncode == 0, "hog run", err.strip()):
        r = json.loads(out)
        pr, helper = common(r, "hog", "hog")
        check(pr.get("method") == "global" and pr.get("memcg_delta") is None
              and pr.get("cgroup_limit") == 0, "hog: global, no cgroup", pr.get("method"))
        check(pr.get("stressor", "").startswith("stress-ng --vm"), "hog: stressor",
              pr.get("stressor"))
        check(helper.get("what") == "stress-ng" and helper.get("cpu_budget") is None,
              "hog: helper, no budget", helper)
    left_behind(p.pid, "hog")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
