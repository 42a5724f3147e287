#!/usr/bin/env python3
"""ppipe-compare end to end: the real benchmark, plain pipes vs the pass-through library.

Tiny durations, one repetition: it checks structure and sane values, never timings.
usage: test-compare-smoke.py PPIPE_COMPARE PPIPE_BENCH PPIPE_STAGE PASSTHRU_LIB
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

RUNNER, BENCH, STAGE, LIB = sys.argv[1:5]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


# The pipelines of real programs preload the library into dd, cat, head,
# sha1sum and wc: in a sanitizer build their leaks are not this test's.
ENV = dict(os.environ, ASAN_OPTIONS=":".join(
    o for o in (os.environ.get("ASAN_OPTIONS"), "detect_leaks=0") if o))
PROGRAM_BYTES = 16 << 20
# Then the pipelines that read generated data, each where its tool is on PATH.
SHAPES = ["dd | dd", "dd | cat", "dd | cat | cat", "head | sha1sum"] + [
    shape for shape in ("zstd -dc | wc -c", "lz4 -dc | wc -c", "gzip -dc | wc -c",
                        "tar c | tar x") if shutil.which(shape.split()[0])]

with tempfile.TemporaryDirectory() as d:
    out = {k: os.path.join(d, "run." + k) for k in ("json", "csv", "svg")}
    # 0.2 s: a run of 0.05 s on a CPU that a build shares moved no data once.
    cmd = [sys.executable, RUNNER, "--quick", "--reps", "1", "--duration", "0.2",
           "--bench", BENCH, "--stage", STAGE, "--lib", LIB, "--env", "PPIPE_SMOKE=1", "--pin", "0:0",
           "--program-bytes", str(PROGRAM_BYTES),
           "--json", out["json"], "--csv", out["csv"], "--svg", out["svg"]]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=ENV)
    if p.returncode != 0:
        print("FAIL: runner exited", p.returncode, p.stderr[-2000:])
        sys.exit(1)
    check("->" in p.stdout and "%)" in p.stdout, "the table has 'a -> b (+x%)' cells")
    check("[1/" in p.stderr, "progress is shown on stderr")

    with open(out["json"]) as f:
        doc = json.load(f)
    host = doc.get("host", {})
    for key in ("kernel", "cpu", "cores", "page_size", "thp", "pipe_max_size"):
        check(key in host, f"host.{key}")
    check(host.get("kernel") == os.uname().release, "host.kernel is this kernel")
    check(doc.get("library", {}).get("env") == {"PPIPE_SMOKE": "1"}, "library env recorded")
    check(doc.get("settings", {}).get("pin") == "0:0", "pinning recorded")
    results = doc.get("results", [])
    check(len(results) >= 10, f"quick matrix has its configurations ({len(results)})")
    # The overhead matrix (ppipe-overhead, real processes): time per
    # operation on both sides and their ratio, at least 5 repetitions.
    overhead = [r for r in results if r.get("matrix") == "overhead"]
    check([(r.get("case"), r.get("size")) for r in overhead]
          == [("start", None), ("fork", None), ("exec", None), ("pipe", None), ("small", 1),
              ("small", 128), ("shell", None)], "the overhead rows")
    for r in overhead:
        b, s = r["baseline"]["ns_per_op"], r["shim"]["ns_per_op"]
        check(b > 0 and s > 0 and abs(r.get("ratio_time", 0) - s / b) < 1e-6 * max(1, s / b),
              f"overhead {r['case']}: ns_per_op and ratio_time")
        check(len(r["baseline"]["reps"]) == len(r["shim"]["reps"]) == 5,
              f"overhead {r['case']}: 5 repetitions")
        # The empty library (the build tree's, configured) beside it.
        e = r.get("empty", {})
        check(e.get("ns_per_op", 0) > 0 and len(e.get("reps", [])) == 5
              and abs(e.get("ratio_time", 0) - e.get("ns_per_op", 0) / b) < 1e-6
              * max(1, e.get("ns_per_op", 0) / b)
              and abs(r.get("excess_time", 9) - (r["ratio_time"] - e.get("ratio_time", 0))) < 1e-9,
              f"overhead {r['case']}: the empty library's side and the excess over it")
    check("time ratio (lower is better)" in p.stdout and "empty/plain" in p.stdout,
          "the overhead table")
    check(doc.get("settings", {}).get("overhead", {}).get("empty", {}).get("path"),
          "the empty library recorded")
    # The pipelines of real programs, each run checked by the runner: MB/s
    # over the wall time, the CPU of all the pipeline's processes.
    programs = [r for r in results if r.get("mode") == "programs"]
    check([r.get("shape") for r in programs] == SHAPES, "the pipelines of real programs")
    for r in programs:
        for side in ("baseline", "shim"):
            s = r[side]
            check(r.get("bytes") == PROGRAM_BYTES and s["mbps"] > 0 and s["wall_s"] > 0
                  and abs(s["mbps"] - PROGRAM_BYTES / s["wall_s"] / 2**20) < 1e-6 * s["mbps"],
                  f"programs {r['shape']} {side}: MB/s over the wall time")
            check(s["cpu_s_per_gib"] > 0 and s["lat_avg_ns"] is None,
                  f"programs {r['shape']} {side}: CPU per GiB, no latency")
    check("pipelines of real programs" in p.stdout and "CPU ratio (lower is better)" in p.stdout,
          "the table of the pipelines of real programs")
    seen = set()
    for r in results:
        if r in overhead or r in programs:
            continue
        key = (r.get("mode"), r.get("writers"), r.get("readers"), r.get("size"), r.get("hops"))
        seen.add(key)
        for side in ("baseline", "shim"):
            s = r.get(side, {})
            check(s.get("mbps", 0) > 0, f"{key} {side}.mbps > 0")
            check(s.get("lat_avg_ns", 0) > 0, f"{key} {side}.lat_avg_ns > 0")
            check(s.get("lat_p99_ns", 0) >= s.get("lat_p50_ns", 0), f"{key} {side} p99 >= p50")
            check(len(s.get("reps", [])) == 1, f"{key} {side} has one rep")
        b, s = r["baseline"]["mbps"], r["shim"]["mbps"]
        check(abs(r.get("ratio_mbps", 0) - s / b) < 1e-6 * max(1, s / b), f"{key} ratio")
        # CPU per GiB: ppipe-bench's writers and readers, a pipeline's processes.
        for side in ("baseline", "shim"):
            s = r[side]
            check(s.get("cpu_s_per_gib", 0) > 0, f"{key} {side}: CPU per GiB")
            if r.get("matrix") != "pipeline":
                check(s.get("cpu_writers_s_per_gib", 0) > 0
                      and s.get("cpu_readers_s_per_gib", 0) > 0,
                      f"{key} {side}: the writers' and the readers' CPU per GiB")
        cb, cs = r["baseline"]["cpu_s_per_gib"], r["shim"]["cpu_s_per_gib"]
        check(abs(r.get("ratio_cpu_per_gib", 0) - cs / cb) < 1e-6 * max(1, cs / cb),
              f"{key} CPU ratio")
        if r.get("matrix") == "pipeline":
            # The kernel's default pipe, as the consumer measured it.
            check(r.get("pipe_size", 0) >= 4096 and r.get("memory_pressure") is False,
                  f"{key} pipe_size and pressure")
        else:
            check(r.get("pipe_size") == 1048576 and r.get("memory_pressure") is False,
                  f"{key} pipe_size and pressure")
    for w in (1, 2, 5):
        for rd in (1, 5, 10):
            check(("threads", w, rd, 65536, None) in seen, f"sweep cell {w}x{rd}")
    check(("procs", 1, 1, 32678, None) in seen, "procs 32678")
    check(("threads", 1, 1, 1, None) in seen, "small writes")
    for hops in (1, 2):
        for size in (65536, 1048576):
            check(("sh", 1, 1, size, hops) in seen, f"pipeline {hops} hops, {size} B")
    check("sh pipelines of exec'd programs" in p.stdout, "the pipeline table")

    with open(out["csv"]) as f:
        rows = list(csv.DictReader(f))
    check(len(rows) == len(results), "one CSV row per result")
    ET.parse(out["svg"])

    # The work matrix side by side (--config): the work reaches the real bench.
    # A quarter of a second a cell: with a sanitizer on a busy machine, 50 ms
    # could pass before a writer's first write, and a cell that moved nothing
    # stops the run.
    work = os.path.join(d, "work.json")
    cmd = [sys.executable, RUNNER, "--only", "work", "--reps", "1", "--duration", "0.25",
           "--bench", BENCH, "--lib", LIB, "--config", "a=PPIPE_SMOKE=1",
           "--config", "b=PPIPE_SMOKE=2", "-q", "--json", work]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=ENV)
    check(p.returncode == 0, f"work run exited {p.returncode}: {p.stderr[-1000:]}")
    if p.returncode == 0:
        with open(work) as f:
            doc = json.load(f)
        unit = doc["settings"]["work"]["unit_ns"]
        check(unit > 0, "the copy time of a write was measured")
        check([r["work_ns"] for r in doc["results"]] == [0, unit, 2 * unit, 4 * unit],
              "work cells: 0, 1, 2 and 4 copy times")
        for r in doc["results"]:
            check(list(r["configs"]) == ["a", "b"], "both configurations ran")
            for name, side in [("plain", r["baseline"])] + list(r["configs"].items()):
                check(side["mbps"] > 0 and 0 < side["write_time_share"] <= 1,
                      f"work {r['work_ns']} {name}: mbps and write_time_share")
                check(side["lat_p99_ns"] >= side["lat_p50_ns"] > 0,
                      f"work {r['work_ns']} {name}: p50 and p99")
        check("in write()" in p.stdout and f"1x = {unit} ns" in p.stdout,
              "the work table")

    # The api matrix: the real bench's --produce copy and api, plain and with
    # the pass-through library, which has no ppipe.h API: its API runs are the
    # header's fallback, and the table says so.
    api = os.path.join(d, "api.json")
    cmd = [sys.executable, RUNNER, "--only", "api", "--reps", "1", "--duration", "0.25",
           "--bench", BENCH, "--lib", LIB, "-q", "--json", api]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=ENV)
    check(p.returncode == 0, f"api run exited {p.returncode}: {p.stderr[-1000:]}")
    if p.returncode == 0:
        with open(api) as f:
            doc = json.load(f)
        check([(r["mode"], r["writers"], r["size"]) for r in doc["results"]]
              == [(m, w, s) for m in ("threads", "procs") for w in (1, 5)
                  for s in (65536, 262144, 1048576)], "api cells")
        for r in doc["results"]:
            where = f"api {r['mode']} {r['writers']}x1 {r['size']}"
            for side in ("baseline", "shim", "api", "api_plain"):
                v = r[side]
                check(v["mbps"] > 0 and v["cpu_s_per_gib"] > 0 and v["cpu_writers_s_per_gib"] > 0,
                      f"{where} {side}: MB/s, CPU and the writers' CPU per GiB")
            check(r["api"]["ppipe_version"] is None and r["api_plain"]["ppipe_version"] is None,
                  f"{where}: no ppipe.h API in the pass-through library or without it")
            check(abs(r["ratio_api_mbps"] - r["api"]["mbps"] / r["baseline"]["mbps"]) < 1e-9
                  * r["ratio_api_mbps"], f"{where}: ratio_api_mbps")
        check(p.stdout.count("the API column measured the header's fallback") == 2
              and "Summary, api matrix MB/s: " in p.stdout, "the api tables and their note")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
