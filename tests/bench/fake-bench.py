#!/usr/bin/env python3
"""Fake ppipe-bench for testing ppipe-compare without timing anything.

Takes the ppipe-bench command line and prints a deterministic JSON result
built from the arguments: mbps = 1000 + size/1000 + writers*10, multiplied
by FAKE_BENCH_SHIM_FACTOR (default 1.0) and PPIPE_FAKE_FACTOR (default 1.0)
when LD_PRELOAD is set. --work NS adds NS to the time of every write
outside write(): mbps falls and write_time_share is write time / both.
--mode memcpy prints FAKE_BENCH_MEMCPY_MBPS (12500: 64 KiB in 5000 ns),
--mode ring FAKE_BENCH_RING_MBPS (8000).
CPU seconds per GiB moved (the "cpu" object): writers 0.1 user + 0.2 sys,
readers 0.05 + 0.35, none other; times FAKE_BENCH_CPU_FACTOR (default
0.75) when LD_PRELOAD is set.
--produce copy is the default's numbers; --produce api multiplies MB/s by
API_FACTOR (1.5) and the writers' CPU by API_WRITER_CPU (0.5) when
LD_PRELOAD is set (the library's spans), MB/s by API_PLAIN_FACTOR (0.9)
and the writers' CPU by API_PLAIN_WRITER_CPU (1.2) when not (the header's
buffers). "ppipe_version" is FAKE_BENCH_PPIPE_VERSION (default
0.0.0-fake; empty: null) when LD_PRELOAD is set, null when not.

Test hooks (environment):
  FAKE_BENCH_STATE=FILE   invocation counter; adds 0, 5 or 23 MB/s of
                          deterministic jitter by invocation number
  FAKE_BENCH_FAIL=N       invocation N (needs FAKE_BENCH_STATE) exits 3
  FAKE_BENCH_VERIFY_FAIL=1  --verify runs exit 1
  FAKE_BENCH_RECLAIM=0    --memory-pressure runs report no direct reclaim;
                          =plain: only runs without LD_PRELOAD reclaim
  FAKE_BENCH_HELPER_CPU=X the pressure helpers' CPU share (memcg: the
                          --filler-cpu budget or 0.15; hog: 1.9)
  FAKE_BENCH_MEMCPY_FAIL=1  --mode memcpy exits 3; FAKE_BENCH_RING_FAIL=1:
                          --mode ring
  FAKE_BENCH_NO_CPU=1     no "cpu" object, as from a ppipe-bench before it
  FAKE_BENCH_NO_PRODUCE=1 --produce is an unknown option, as to a
                          ppipe-bench before it
  FAKE_BENCH_LOG=FILE     appends one JSON line per run: its arguments,
                          whether LD_PRELOAD is set, its PPIPE_* variables
PPIPE_* variables without LD_PRELOAD are an environment error (exit 3), so
a runner that leaks them into baseline runs is caught.
"""

import json
import os
import sys

import fakecommon
from fakecommon import Parser, fail, invocation, positive

PROG = "ppipe-bench"
fakecommon.PROG = PROG


def log_run(preloaded):
    """Append this run to FAKE_BENCH_LOG, if set."""
    path = os.environ.get("FAKE_BENCH_LOG")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({
            "argv": sys.argv[1:], "preloaded": bool(preloaded),
            "env": {k: v for k, v in os.environ.items()
                    if k.startswith("PPIPE_")}}) + "\n")


def memcpy(a):
    """--mode memcpy: one thread's copy bandwidth; --mode ring: two
    threads' copy in and copy out; as configured."""
    name = a.mode.upper()
    if os.environ.get(f"FAKE_BENCH_{name}_FAIL") == "1":
        fail(3, f"injected {a.mode} failure")
    print(json.dumps({"tool": PROG, "version": "0.0.0-fake", "mode": a.mode,
                      "size": a.s, "mbps": float(os.environ.get(
                          f"FAKE_BENCH_{name}_MBPS",
                          "12500" if a.mode == "memcpy" else "8000"))}))
    return 0


# CPU seconds per GiB moved of the groups, (user, sys), on plain pipes.
CPU_PER_GIB = {"writers": (0.1, 0.2), "readers": (0.05, 0.35),
               "other": (0.0, 0.0)}
# --produce api: MB/s and the writers' CPU with the library and without it.
API_FACTOR, API_WRITER_CPU = 1.5, 0.5
API_PLAIN_FACTOR, API_PLAIN_WRITER_CPU = 0.9, 1.2


def cpu(nbytes, preloaded, procs, writers=1.0):
    """The "cpu" object of a run that moved nbytes; writers scales the
    writers' CPU."""
    factor = float(os.environ.get("FAKE_BENCH_CPU_FACTOR", "0.75")) \
        if preloaded else 1.0
    gib = nbytes / (1 << 30)
    out = {"counted": "processes" if procs else "threads"}
    total = [0.0, 0.0]
    for group, parts in list(CPU_PER_GIB.items()) + [("all", None)]:
        scale = factor * (writers if group == "writers" else 1.0)
        user, sys_ = (p * scale for p in parts) if parts else total
        if parts:
            total = [total[0] + user, total[1] + sys_]
        out[group] = {"user_s": user * gib, "sys_s": sys_ * gib,
                      "total_s": (user + sys_) * gib, "user_s_per_gib": user,
                      "sys_s_per_gib": sys_, "total_s_per_gib": user + sys_}
    return out


def main():
    """Parse arguments and print the fake result."""
    p = Parser(prog=PROG)
    p.add_argument("--mode", choices=("threads", "procs", "memcpy", "ring"),
                   required=True)
    p.add_argument("-w", type=positive(int))
    p.add_argument("-r", type=positive(int))
    p.add_argument("-s", type=positive(int), required=True)
    p.add_argument("-p", type=positive(int))
    p.add_argument("-d", type=positive(float), required=True)
    p.add_argument("--work", type=positive(int))
    p.add_argument("--produce", choices=("prepared", "copy", "api"))
    p.add_argument("--verify", action="store_true")
    p.add_argument("--memory-pressure", nargs="?", const="memcg",
                   choices=("memcg", "hog"))
    p.add_argument("--filler-cpu", type=positive(int))
    p.add_argument("--cpus-writers")
    p.add_argument("--cpus-readers")
    p.add_argument("--expect-preload")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if a.produce and os.environ.get("FAKE_BENCH_NO_PRODUCE") == "1":
        fail(2, "unknown option '--produce' (see --help)")
    if a.mode in ("memcpy", "ring"):
        return memcpy(a)
    if None in (a.w, a.r, a.p):
        fail(2, "-w, -r and -p are required")

    count = invocation()
    preload = os.environ.get("LD_PRELOAD", "")
    preloaded = [x for x in preload.replace(" ", ":").split(":") if x]
    log_run(preloaded)
    if a.expect_preload and a.expect_preload not in preloaded:
        fail(3, f"--expect-preload {a.expect_preload}: not in LD_PRELOAD")
    if not preloaded and any(k.startswith("PPIPE_") for k in os.environ):
        fail(3, "PPIPE_* variables set without LD_PRELOAD")
    if count and os.environ.get("FAKE_BENCH_FAIL") == str(count):
        fail(3, f"injected failure at invocation {count}")
    if a.verify and os.environ.get("FAKE_BENCH_VERIFY_FAIL") == "1":
        fail(1, "verification failed: byte 42 of write 7 differs")

    factor = float(os.environ.get("FAKE_BENCH_SHIM_FACTOR", "1.0")) \
        * float(os.environ.get("PPIPE_FAKE_FACTOR", "1.0")) \
        if preloaded else 1.0
    writer_cpu = 1.0
    if a.produce == "api":
        factor *= API_FACTOR if preloaded else API_PLAIN_FACTOR
        writer_cpu = API_WRITER_CPU if preloaded else API_PLAIN_WRITER_CPU
    version = os.environ.get("FAKE_BENCH_PPIPE_VERSION", "0.0.0-fake") \
        if preloaded else None
    mbps = (1000 + a.s / 1000 + a.w * 10 + (0, 5, 23)[count % 3]) * factor
    rate = mbps * (1 << 20)
    lat = int(500 + a.s * 1e9 / rate * a.w)
    work = a.work or 0
    write_ns = a.s * 1e9 / rate
    mbps *= write_ns / (write_ns + work)
    rate = mbps * (1 << 20)
    writes_per_s = rate / a.s
    pressure = None
    if a.filler_cpu and a.memory_pressure != "memcg":
        fail(2, "--filler-cpu without --memory-pressure=memcg")
    if a.memory_pressure:
        how = os.environ.get("FAKE_BENCH_RECLAIM", "1")
        reclaim = how == "1" or (how == "plain" and not preloaded)
        scans = 1000 if reclaim else 0
        memcg = a.memory_pressure == "memcg"
        budget = (a.filler_cpu or 15) / 100 if memcg else None
        share = float(os.environ.get("FAKE_BENCH_HELPER_CPU",
                                     budget if memcg else 1.9))
        pressure = {
            "mode": a.memory_pressure,
            "method": "cgroup-v2" if memcg else "global",
            "stressor": "page-cache filler" if memcg else "stress-ng --vm 2",
            "cgroup_limit": 536870912 if memcg else 0, "wall_s": a.d,
            "vmstat_delta": {"pgscan_direct": 0 if memcg else scans,
                             "pgsteal_direct": 0, "pgscan_kswapd": 0,
                             "allocstall": 0 if memcg else scans // 100},
            "memcg_delta": {"pgscan_direct": scans, "pgsteal_direct": scans,
                            "max_events": scans // 10,
                            "max_events_local": scans // 10}
            if memcg else None,
            "bench_stall_us": scans * 2,
            "helper": {"what": "filler" if memcg else "stress-ng",
                       "cpu_budget": budget,
                       "cpu_us": int(share * a.d * 1e6), "cpu_share": share,
                       "cpu_from": "cgroup"},
            "direct_reclaim": reclaim, "direct_reclaim_scope": "benchmark"}
    writes = int(writes_per_s * a.d)
    per_writer = [{"writes": writes // a.w, "bytes": writes // a.w * a.s,
                   "lat_avg_ns": lat, "lat_p99_ns": lat * 2,
                   "lat_max_ns": lat * 20} for _ in range(a.w)]
    result = {
        "tool": PROG, "version": "0.0.0-fake", "mode": a.mode,
        "writers": a.w, "readers": a.r, "size": a.s, "pipe_size": a.p,
        "produce": a.produce or "prepared", "duration_s": a.d,
        "elapsed_s": a.d, "verify": a.verify,
        "verified": True if a.verify else None,
        "memory_pressure": bool(a.memory_pressure),
        "pressure_mode": a.memory_pressure,
        "writes": writes, "bytes": writes * a.s,
        "spans": writes if a.produce == "api" else 0, "mbps": mbps,
        "writes_per_s": writes_per_s, "work_ns": work, "work_avg_ns": work,
        "write_time_share": write_ns / (write_ns + work), "lat_avg_ns": lat,
        "lat_p50_ns": lat * 95 // 100, "lat_p99_ns": lat * 2,
        "lat_p999_ns": lat * 5, "lat_max_ns": lat * 20,
        "per_writer": per_writer, "pressure": pressure,
        "ppipe_version": version or None, "preloaded": preloaded,
    }
    if os.environ.get("FAKE_BENCH_NO_CPU") != "1":
        result["cpu"] = cpu(writes * a.s, preloaded, a.mode == "procs",
                            writer_cpu)
    if a.json:
        print(json.dumps(result))
    else:
        print(f"{a.mode} w={a.w} r={a.r} size={a.s}: {mbps:.1f} MB/s, "
              f"avg {lat} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
