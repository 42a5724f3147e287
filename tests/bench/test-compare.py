#!/usr/bin/env python3
"""Test ppipe-compare against fake-bench.py and fake-stage.py.

Usage: test-compare.py RUNNER FAKEBENCH FAKESTAGE
Exit 0 on success, 1 on failure, 77 to skip.
"""

import csv
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG_NS = "{http://www.w3.org/2000/svg}"
MEDIANS = ("mbps", "writes_per_s", "lat_avg_ns", "lat_p50_ns",
           "lat_p99_ns", "lat_p999_ns", "lat_max_ns")
REP_KEYS = set(MEDIANS) | {"write_time_share", "pressure"}
HOST_KEYS = {"kernel", "cpu", "cores", "page_size", "thp", "pipe_max_size",
             "hostname", "memcpy_mbps_1m"}
RESULT_KEYS = {"matrix", "mode", "writers", "readers", "size", "pipe_size",
               "memory_pressure", "baseline", "shim", "ratio_mbps",
               "ratio_lat_avg", "ratio_lat_p99"}
PIPELINE_KEYS = RESULT_KEYS | {"hops"}
WORK_KEYS = RESULT_KEYS | {"work_x", "work_ns"}
MULTI_KEYS = {"matrix", "mode", "writers", "readers", "size", "pipe_size",
              "memory_pressure", "baseline", "configs"}
MULTI_CSV_FIELDS = ["matrix", "mode", "writers", "readers", "size",
                    "pipe_size", "memory_pressure", "hops", "work_ns",
                    "config", "mbps", "ratio_mbps", "lat_avg_ns",
                    "lat_p50_ns", "lat_p99_ns", "spread_mbps",
                    "write_time_share"]
CSV_FIELDS = ["matrix", "mode", "writers", "readers", "size", "pipe_size",
              "memory_pressure", "baseline_mbps", "shim_mbps", "ratio_mbps",
              "baseline_lat_avg_ns", "shim_lat_avg_ns", "baseline_lat_p99_ns",
              "shim_lat_p99_ns", "baseline_spread_mbps", "shim_spread_mbps",
              "hops"]
SHIM_FACTOR = 1.21
CELL = re.compile(r"\d+(?:\.\d+)? +-> +\d+(?:\.\d+)? +\([+-]\d+%\)")


class Failure(Exception):
    """A failed check."""


def check(cond, what):
    """Raise Failure(what) unless cond."""
    if not cond:
        raise Failure(what)


def close(a, b, rel=1e-9):
    """Float comparison."""
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


class Runner:
    """Runs ppipe-compare in a scratch directory."""

    def __init__(self, runner, fake, fake_stage, tmp):
        self.runner = runner
        self.tmp = tmp
        self.lib = os.path.join(tmp, "libdummy.so")
        open(self.lib, "w", encoding="ascii").close()
        self.bench = self.wrapper("ppipe-bench", fake)
        # A name that needs quoting in sh -c.
        self.stage = self.wrapper("ppipe stage's", fake_stage)
        self.counter = 0

    def wrapper(self, name, script):
        """An executable in the scratch directory that runs script. The
        fakes need only the standard library: -S skips site's start-up,
        most of a fake's run time and of this test's."""
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="ascii") as f:
            f.write("#!/bin/sh\nexec %s -S %s \"$@\"\n"
                    % (shlex.quote(sys.executable), shlex.quote(script)))
        os.chmod(path, 0o755)
        return path

    def path(self, name):
        """A file in the scratch directory."""
        return os.path.join(self.tmp, name)

    def run(self, args, env=None, script=None):
        """Run the runner (fresh fake state); return CompletedProcess."""
        self.counter += 1
        child_env = dict(os.environ)
        child_env.pop("LD_PRELOAD", None)
        state = self.path(f"state{self.counter}")
        child_env.update({"FAKE_BENCH_STATE": state,
                          "FAKE_BENCH_SHIM_FACTOR": str(SHIM_FACTOR),
                          "PPIPE_LEAKED_FROM_PARENT": "1"})
        child_env.update(env or {})
        return subprocess.run([sys.executable, script or self.runner] + args,
                              env=child_env, capture_output=True, text=True,
                              timeout=60, check=False)

    def fast(self, *extra):
        """Arguments for a quick, tiny run."""
        return ["--only", "small", "--reps", "1", "--bench", self.bench,
                "--lib", self.lib] + list(extra)


def check_side(side, reps, where):
    """Medians and spread of one side against its reps."""
    check(len(side["reps"]) == reps, f"{where}: {reps} reps expected")
    for rep in side["reps"]:
        check(set(rep) == REP_KEYS, f"{where}: rep keys {sorted(rep)}")
    for key in MEDIANS:
        want = statistics.median(rep[key] for rep in side["reps"])
        check(close(side[key], want), f"{where}: {key} is not the median")
    shares = [rep["write_time_share"] for rep in side["reps"]]
    if None in shares:
        check(side["write_time_share"] is None, f"{where}: write_time_share")
    else:
        check(close(side["write_time_share"], statistics.median(shares)),
              f"{where}: write_time_share is not the median")
    values = [rep["mbps"] for rep in side["reps"]]
    check(close(side["spread_mbps"], (max(values) - min(values))
                / side["mbps"]), f"{where}: spread_mbps")


def check_json(doc, lib):
    """Schema and arithmetic of the main run's JSON."""
    for key in ("tool", "version", "created", "argv", "host", "library",
                "settings", "results"):
        check(key in doc, f"JSON: missing {key}")
    check(doc["tool"] == "ppipe-compare", "JSON: tool")
    check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["created"]),
          "JSON: created is not ISO 8601 UTC")
    check(set(doc["host"]) == HOST_KEYS, f"JSON: host keys {doc['host']}")
    check(doc["library"] == {"path": os.path.realpath(lib),
                             "env": {"PPIPE_FOO": "1", "PPIPE_BAR": "a b"}},
          f"JSON: library {doc['library']}")
    check(doc["settings"] == {"matrix": "quick", "reps": 2, "duration_s": 1.0,
                              "pipeline_duration_s": 1.0,
                              "memory_pressure": False, "verify": False, "pin": None},
          f"JSON: settings {doc['settings']}")
    results = doc["results"]
    counts = {m: sum(r["matrix"] == m for r in results)
              for m in ("sweep", "sizes", "small", "pipeline")}
    check(counts == {"sweep": 9, "sizes": 4, "small": 3, "pipeline": 4}
          and len(results) == 20 and "work" not in doc["settings"],
          f"JSON: matrix sizes {counts}, {len(results)} results")
    check(sorted(r["size"] for r in results if r["matrix"] == "sizes")
          == [4096, 32678, 65536, 1048576], "JSON: sizes matrix")
    check(sorted((r["hops"], r["size"]) for r in results if r["matrix"] == "pipeline")
          == [(1, 65536), (1, 1048576), (2, 65536), (2, 1048576)],
          "JSON: pipeline matrix")
    for r in results:
        pipeline = r["matrix"] == "pipeline"
        where = (f"JSON {r['matrix']} {r['mode']} "
                 f"{r['writers']}x{r['readers']} {r['size']} {r.get('hops')}")
        check(set(r) == (PIPELINE_KEYS if pipeline else RESULT_KEYS),
              f"{where}: keys {sorted(r)}")
        check(r["pipe_size"] == (65536 if pipeline else 1048576),
              f"{where}: pipe_size")
        if pipeline:
            check(r["mode"] == "sh", f"{where}: mode")
            check(all(rep["lat_max_ns"] == 1000000000 for name in ("baseline", "shim")
                      for rep in r[name]["reps"]),
                  f"{where}: the pipeline did not run for the pipeline duration")
        for name in ("baseline", "shim"):
            check_side(r[name], 2, f"{where} {name}")
        base, shim = r["baseline"], r["shim"]
        check(close(r["ratio_mbps"], shim["mbps"] / base["mbps"]),
              f"{where}: ratio_mbps")
        check(close(r["ratio_lat_avg"], shim["lat_avg_ns"]
                    / base["lat_avg_ns"]), f"{where}: ratio_lat_avg")
        check(close(r["ratio_lat_p99"], shim["lat_p99_ns"]
                    / base["lat_p99_ns"]), f"{where}: ratio_lat_p99")
        check(1.1 < r["ratio_mbps"] < 1.35,
              f"{where}: shim factor not seen ({r['ratio_mbps']})")
    check(any(r["baseline"]["spread_mbps"] > 0 for r in results),
          "JSON: fake jitter did not reach the reps")


def check_csv(path, results):
    """CSV header and rows against the JSON."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    check(rows[0] == CSV_FIELDS, f"CSV header {rows[0]}")
    check(len(rows) == 1 + len(results), "CSV: one row per result")
    for row, r in zip(rows[1:], results):
        rec = dict(zip(CSV_FIELDS, row))
        check(rec["matrix"] == r["matrix"] and int(rec["size"]) == r["size"]
              and int(rec["writers"]) == r["writers"], "CSV: row order")
        check(rec["hops"] == str(r.get("hops", "")), f"CSV: hops {rec['hops']!r}")
        check(rec["memory_pressure"] == "false", "CSV: memory_pressure")
        check(close(float(rec["ratio_mbps"]), r["ratio_mbps"]),
              "CSV: ratio_mbps")
        check(close(float(rec["shim_lat_p99_ns"]), r["shim"]["lat_p99_ns"]),
              "CSV: shim_lat_p99_ns")


def check_svg(path):
    """SVG well-formed with the expected panels."""
    root = ET.parse(path).getroot()
    check(root.tag == SVG_NS + "svg", f"SVG root tag {root.tag}")

    def classed(tag, cls):
        return [e for e in root.iter(SVG_NS + tag)
                if cls in e.get("class", "").split()]

    check(len(classed("rect", "heatmap-cell")) == 9, "SVG: 9 heatmap cells")
    lines = classed("polyline", "series")
    check(len(lines) == 2, "SVG: two size-sweep lines")
    for line in lines:
        check(len(line.get("points").split()) == 4, "SVG: 4 points per line")
    check(len(classed("g", "small-row")) == 3, "SVG: 3 small-write rows")
    check(len(classed("g", "pipeline-row")) == 4, "SVG: 4 pipeline rows")
    texts = " ".join("".join(t.itertext()) for t in root.iter(SVG_NS + "text"))
    for word in ("4K", "32K", "64K", "1M", "MB/s", "writers", "readers",
                 "produce | relay | consume", "median of 2 x 1 s runs per side"):
        check(word in texts, f"SVG: no {word!r} label")


def check_main_run(t):
    """The --quick --reps 2 run and everything it wrote."""
    out = {k: t.path(f"run.{k}") for k in ("json", "csv", "svg")}
    p = t.run(["--quick", "--reps", "2", "--bench", t.bench, "--stage", t.stage,
               "--lib", t.lib,
               "--env", "PPIPE_FOO=1 PPIPE_BAR='a b'", "--json", out["json"],
               "--csv", out["csv"], "--svg", out["svg"]])
    check(p.returncode == 0, f"main run failed ({p.returncode}): "
          f"{p.stderr.strip()[-400:]}")
    with open(out["json"], encoding="utf-8") as f:
        doc = json.load(f)
    check_json(doc, t.lib)
    check_csv(out["csv"], doc["results"])
    check_svg(out["svg"])
    cells = [ln for ln in p.stdout.splitlines() if CELL.search(ln)]
    check(len(cells) >= 3 * 3 + 4 + 3 + 4, "stdout: too few 'a -> b (+n%)' lines")
    for text in ("== threads: 65536 B writes, 1 MiB pipe, no memory pressure "
                 "(median of 2) ==", "Throughput in MB/s (plain -> libdummy, "
                 "delta):", "readers=10", "Summary", "Max spread",
                 "== sh pipelines of exec'd programs, 64 KiB pipes, no memory "
                 "pressure (median of 2) ==",
                 "1 hop: produce | consume; 2 hops: produce | relay | consume",
                 "pipeline geomean"):
        check(text in p.stdout, f"stdout: no {text!r}")
    check("[1/20] threads w=1 r=1 size=65536 rep 1/2 baseline" in p.stderr,
          "stderr: no progress line")
    check("[20/20] sh 2 hops size=1048576 rep 2/2 shim" in p.stderr,
          "stderr: no pipeline progress line")
    return out["json"], doc


def check_compare(t, a_path, doc):
    """compare A B, with an edited B that lacks one result."""
    b_doc = json.loads(json.dumps(doc))
    dropped = b_doc["results"].pop()
    for r in b_doc["results"]:
        r["shim"]["mbps"] *= 1.5
    b_path = t.path("b.json")
    with open(b_path, "w", encoding="utf-8") as f:
        json.dump(b_doc, f)
    p = t.run(["compare", a_path, b_path])
    check(p.returncode == 0, f"compare failed: {p.stderr.strip()}")
    check(len([ln for ln in p.stdout.splitlines() if "(+50%)" in ln]) >= 4,
          "compare: no '(+50%)' rows")
    check("Only in A (1):" in p.stdout and f"size={dropped['size']}"
          in p.stdout.split("Only in A")[1], "compare: unmatched not listed")
    check("== sh pipelines of exec'd programs" in p.stdout,
          "compare: no pipeline table")
    pipe_rows = [ln for ln in p.stdout.split("== sh pipelines")[1].splitlines()
                 if "(+50%)" in ln]
    check(len(pipe_rows) == 3, f"compare: 1 and 2 hops matched apart: {pipe_rows}")
    for side in ("baseline", "ratio"):
        p = t.run(["compare", a_path, b_path, "--side", side])
        check(p.returncode == 0 and CELL.search(p.stdout),
              f"compare --side {side}: {p.stderr.strip()}")


def check_error(t, args, status, words, env=None):
    """A run that must fail with a one-line message naming the problem."""
    p = t.run(args, env=env)
    lines = p.stderr.strip().splitlines()
    what = " ".join(args)
    check(p.returncode != 0 and (status is None or p.returncode == status),
          f"{what}: exit {p.returncode}, expected {status}")
    check(lines, f"{what}: nothing on stderr")
    for word in words:
        check(word in lines[-1], f"{what}: {word!r} not in {lines[-1]!r}")
    return lines


def check_errors(t, a_path):
    """Argument and runtime errors."""
    for args, words in ((["--reps", "0"], ["--reps"]),
                        (["--reps", "abc"], ["--reps", "abc"]),
                        (["--duration", "0"], ["--duration"]),
                        (["--bogus"], ["--bogus"]),
                        (["--env", "NOEQUALS"], ["--env", "NOEQUALS"]),
                        (["--pin", "0:x"], ["--pin", "0:x"]),
                        (["--pin", "01"], ["--pin"]),
                        (["--lib", t.path("nonexistent.so")],
                         ["--lib", "nonexistent.so", "no such file"]),
                        (["--only", "pipeline", "--lib", t.lib, "--bench", t.bench,
                          "--stage", t.path("nope")],
                         ["--stage", "nope", "not an executable"]),
                        (["--only", "pipeline", "--memory-pressure"],
                         ["pipeline", "--memory-pressure"])):
        lines = check_error(t, args, 2, words)
        check(len(lines) == 1, f"{args}: more than one line: {lines}")
    bad = t.path("not-a-result.json")
    with open(bad, "w", encoding="utf-8") as f:
        json.dump({"tool": "something-else", "results": []}, f)
    for args, words in ((["compare", t.path("missing.json"), a_path],
                         ["missing.json"]),
                        (["compare", a_path, bad],
                         ["not-a-result.json", "not a ppipe-compare result"])):
        lines = check_error(t, args, 2, words)
        check(len(lines) == 1, f"{args}: more than one line: {lines}")
    json_out = t.path("never.json")
    check_error(t, t.fast("--json", json_out), 2, [t.lib, "injected"],
                env={"FAKE_BENCH_FAIL": "1"})
    check_error(t, t.fast("--json", json_out), 1,
                ["threads w=1 r=1 size=128", "injected"],
                env={"FAKE_BENCH_FAIL": "4"})
    check_error(t, t.fast("--verify", "--json", json_out), 1,
                ["verification failed", "threads w=1 r=1 size=1", "baseline"],
                env={"FAKE_BENCH_VERIFY_FAIL": "1"})
    check(not os.path.exists(json_out), "output written after a failure")


def check_pipeline(t):
    """--only pipeline: the relay is really there, the library reaches every
    stage, failures name the configuration; --memory-pressure leaves
    pipelines out."""
    out = t.path("pipeline.json")
    args = ["--only", "pipeline", "--reps", "1", "--duration", "0.25", "--bench", t.bench,
            "--stage", t.stage, "--lib", t.lib, "--pin", "0:1", "-q", "--json", out]
    p = t.run(args, env={"FAKE_STAGE_PIPE_SIZE": "4096"})
    check(p.returncode == 0, f"pipeline run failed: {p.stderr.strip()[-400:]}")
    with open(out, encoding="utf-8") as f:
        doc = json.load(f)
    results = {(r["hops"], r["size"]): r for r in doc["results"]}
    check(len(results) == 4 and all(r["matrix"] == "pipeline" for r in doc["results"]),
          f"--only pipeline: {sorted(results)}")
    for size in (65536, 1048576):
        one, two = results[(1, size)], results[(2, size)]
        check(one["baseline"]["mbps"] - two["baseline"]["mbps"] > 70,
              f"2 hops ran without a relay ({size})")
        check(one["pipe_size"] == 4096, "the pipe size the consumer saw is recorded")
        check(one["baseline"]["reps"][0]["lat_max_ns"] == 250000000,
              "--duration is the pipelines' duration too")
    check("pipe=4096" in p.stdout or "4 KiB pipes" in p.stdout,
          "the table names the pipe size the consumer saw")
    svg = t.path("full.svg")
    p = t.run(["--full", "--only", "pipeline", "--reps", "1", "--bench", t.bench, "--stage",
               t.stage, "--lib", t.lib, "-q", "--json", out, "--svg", svg])
    check(p.returncode == 0, f"--full pipeline run failed: {p.stderr.strip()[-400:]}")
    with open(out, encoding="utf-8") as f:
        doc = json.load(f)
    check(sorted({(r["hops"], r["size"]) for r in doc["results"]})
          == [(h, s) for h in (1, 2) for s in (16384, 65536, 262144, 1048576)],
          "--full pipeline matrix")
    check(doc["settings"]["duration_s"] == 5.0 and doc["settings"]["pipeline_duration_s"] == 2.0
          and all(r["shim"]["reps"][0]["lat_max_ns"] == 2000000000 for r in doc["results"]),
          f"--full runs pipelines for 2 s: {doc['settings']}")
    with open(svg, encoding="utf-8") as f:
        check("(2 s for pipelines)" in f.read(), "SVG: the pipelines' own duration")
    check_error(t, args, 1, ["verification failed", "sh 1 hop size=65536", "baseline"],
                env={"FAKE_STAGE_CORRUPT": "1"})
    check_error(t, args, 1, ["sh 1 hop size=65536 (shim)", "injected failure"],
                env={"FAKE_BENCH_FAIL": "4"})
    p = t.run(["--quick", "--reps", "1", "--bench", t.bench, "--stage", t.stage,
               "--lib", t.lib, "--memory-pressure", "--json", out])
    check(p.returncode == 0, f"quick pressure run failed: {p.stderr.strip()[-400:]}")
    with open(out, encoding="utf-8") as f:
        doc = json.load(f)
    check(doc["results"] and not any(r["matrix"] == "pipeline" for r in doc["results"]),
          "--memory-pressure ran pipelines")
    check("pipeline matrix is left out" in p.stderr, "no note on pipelines left out")


def read_log(path):
    """The runs fake-bench.py logged: (argv, preloaded, PPIPE_* env)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def load(path):
    """A JSON file."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check_work(t):
    """--only work: the work per write follows from one thread's memcpy of
    a write, reaches the bench, and shows in every output; --full runs the
    work matrix (check_json: --quick does not); compare matches cells by
    multiple."""
    out = {k: t.path(f"work.{k}") for k in ("json", "csv", "svg")}
    log = t.path("work.log")
    p = t.run(t.fast("--json", out["json"], "--csv", out["csv"], "--svg",
                     out["svg"], "--reps", "2")[2:] + ["--only", "work"],
              env={"FAKE_BENCH_LOG": log, "FAKE_BENCH_MEMCPY_MBPS": "6250"})
    check(p.returncode == 0, f"work run failed: {p.stderr.strip()[-400:]}")
    doc = load(out["json"])
    check(doc["settings"].get("work") == {"size": 65536, "memcpy_mbps": 6250.0,
                                          "unit_ns": 10000},
          f"work: settings {doc['settings']}")
    results = doc["results"]
    check([(r["work_x"], r["work_ns"]) for r in results]
          == [(0, 0), (1, 10000), (2, 20000), (4, 40000)],
          f"work: cells {[(r.get('work_x'), r.get('work_ns')) for r in results]}")
    shares = []
    for r in results:
        where = f"work {r['work_ns']}"
        check(set(r) == WORK_KEYS and r["matrix"] == "work"
              and (r["mode"], r["writers"], r["readers"], r["size"],
                   r["pipe_size"]) == ("threads", 1, 1, 65536, 1048576),
              f"{where}: {sorted(r)}")
        for name in ("baseline", "shim"):
            check_side(r[name], 2, f"{where} {name}")
        shares.append(r["baseline"]["write_time_share"])
    check(shares[0] == 1.0 and shares == sorted(shares, reverse=True)
          and len(set(shares)) == 4, f"work: write_time_share {shares}")
    runs = [run for run in read_log(log) if "-d" in run["argv"]
            and run["argv"][run["argv"].index("-d") + 1] == "1"]
    check(len(runs) == 4 * 2 * 2, f"work: {len(runs)} runs logged")
    for k, run in enumerate(runs):
        want = [] if k // 4 == 0 else ["--work", str(10000 * (1 << (k // 4 - 1)))]
        argv = run["argv"]
        got = argv[argv.index("--work"):argv.index("--work") + 2] \
            if "--work" in argv else []
        check(got == want, f"work: run {k} has {got}, not {want}")
    for text in ("producer work per write (median of 2)",
                 "1x = 10000 ns, one thread's memcpy of a write (6250 MB/s)",
                 "in write() plain -> libdummy (delta)", "work geomean"):
        check(text in p.stdout, f"work: stdout has no {text!r}")
    for cell in ("0", "10000 (1x)", "20000 (2x)", "40000 (4x)"):
        check(re.search(rf"^ +{re.escape(cell)} +\d+ +-> +\d+", p.stdout, re.M),
              f"work: no row {cell!r}")
    with open(out["csv"], encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    check(rows[0] == CSV_FIELDS + ["work_ns"]
          and [row[-1] for row in rows[1:]] == ["0", "10000", "20000", "40000"],
          f"work: CSV {rows[0]} {[row[-1] for row in rows[1:]]}")
    root = ET.parse(out["svg"]).getroot()
    check(len([e for e in root.iter(SVG_NS + "g")
               if e.get("class") == "work-row"]) == 4, "work: 4 SVG rows")
    # Another run, another copy time: the cells still match by multiple.
    other = json.loads(json.dumps(doc))
    for r in other["results"]:
        r["work_ns"] = r["work_ns"] * 11 // 10
        r["shim"]["mbps"] *= 1.5
    b_path = t.path("work-b.json")
    with open(b_path, "w", encoding="utf-8") as f:
        json.dump(other, f)
    p = t.run(["compare", out["json"], b_path])
    check(p.returncode == 0 and p.stdout.count("(+50%)") == 4
          and "Only in" not in p.stdout, f"work: compare {p.stdout[-600:]}")
    # The copy time cannot be measured: the work matrix cannot run.
    check_error(t, t.fast("--only", "work")[2:], 2,
                ["work matrix", "memcpy", "injected"],
                env={"FAKE_BENCH_MEMCPY_FAIL": "1"})
    check_error(t, t.fast("--full", "--stage", t.stage)[2:], 2,
                ["work matrix", "memcpy"], env={"FAKE_BENCH_MEMCPY_FAIL": "1"})


def check_configs(t):
    """--config: plain and every configuration alternate in each
    repetition, each with its own environment; tables, JSON and CSV put
    them side by side; compare takes a configuration as its side."""
    out = {k: t.path(f"multi.{k}") for k in ("json", "csv")}
    log = t.path("multi.log")
    p = t.run(t.fast("--reps", "2", "--env", "PPIPE_COMMON=x", "--config", "a=",
                     "--config", "b=PPIPE_FAKE_FACTOR=2,PPIPE_FDS=1,2",
                     "--json", out["json"], "--csv", out["csv"]),
              env={"FAKE_BENCH_LOG": log})
    check(p.returncode == 0, f"--config run failed: {p.stderr.strip()[-400:]}")
    doc = load(out["json"])
    check(doc["library"]["env"] == {"PPIPE_COMMON": "x"}
          and doc["library"]["configs"]
          == [{"name": "a", "env": {}},
              {"name": "b", "env": {"PPIPE_FAKE_FACTOR": "2", "PPIPE_FDS": "1,2"}}],
          f"--config: library {doc['library']}")
    results = doc["results"]
    check(len(results) == 3, "--config: 3 small-write results")
    lines = p.stdout.splitlines()
    for r in results:
        where = f"--config size={r['size']}"
        check(set(r) == MULTI_KEYS and list(r["configs"]) == ["a", "b"],
              f"{where}: keys {sorted(r)}")
        base = r["baseline"]
        check_side(base, 2, f"{where} baseline")
        for name, factor in (("a", 1.21), ("b", 2.42)):
            side = r["configs"][name]
            check_side(side, 2, f"{where} {name}")
            check(close(side["ratio_mbps"], side["mbps"] / base["mbps"]),
                  f"{where} {name}: ratio_mbps")
            for key in ("avg", "p50", "p99"):
                check(close(side[f"ratio_lat_{key}"], side[f"lat_{key}_ns"]
                            / base[f"lat_{key}_ns"]),
                      f"{where} {name}: ratio_lat_{key}")
            check(abs(side["ratio_mbps"] - factor) < 0.1 * factor,
                  f"{where} {name}: its environment's factor not seen "
                  f"({side['ratio_mbps']})")
            row = (rf" +{name} +{side['mbps']:.0f} +{side['ratio_mbps']:.3f} "
                   rf"+{side['lat_p50_ns']:.0f} +{side['lat_p99_ns']:.0f} +100%$")
            check(any(re.search(row, ln) for ln in lines),
                  f"{where} {name}: no table row /{row}/")
        row = (rf"^ +{r['size']} +plain +{base['mbps']:.0f} +- "
               rf"+{base['lat_p50_ns']:.0f} +{base['lat_p99_ns']:.0f} +100%$")
        check(any(re.search(row, ln) for ln in lines),
              f"{where}: no plain row /{row}/")
    for text in ("size   config   MB/s   ratio   p50 ns   p99 ns   in write()",
                 "Summary, a/plain MB/s: small geomean",
                 "Summary, b/plain MB/s: small geomean", "rep 2/2 b"):
        check(text in p.stdout + p.stderr, f"--config: no {text!r}")
    check(" -> " not in p.stdout, "--config: two-way cells in the table")
    # Every repetition runs plain, a, b, in that order, each in its own
    # environment (--env for both configurations, --config's on top).
    envs = {False: {}, "a": {"PPIPE_COMMON": "x"},
            "b": {"PPIPE_COMMON": "x", "PPIPE_FAKE_FACTOR": "2", "PPIPE_FDS": "1,2"}}
    runs = read_log(log)
    check(len(runs) == 2 + 3 * 2 * 3, f"--config: {len(runs)} runs logged")
    for k, run in enumerate(runs):
        want = ("a", "b")[k] if k < 2 else (False, "a", "b")[(k - 2) % 3]
        check(run["preloaded"] == bool(want) and run["env"] == envs[want],
              f"--config: run {k} is not {want or 'plain'}: {run}")
    with open(out["csv"], encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(out["csv"], encoding="utf-8", newline="") as f:
        check(next(csv.reader(f)) == MULTI_CSV_FIELDS, "--config: CSV header")
    check([row["config"] for row in rows] == ["baseline", "a", "b"] * 3
          and close(float(rows[2]["ratio_mbps"]),
                    results[0]["configs"]["b"]["ratio_mbps"])
          and rows[0]["ratio_mbps"] == "", f"--config: CSV rows {rows[:3]}")
    p = t.run(["compare", out["json"], out["json"], "--side", "b"])
    check(p.returncode == 0 and "Comparing b runs (b): A -> B" in p.stdout
          and CELL.search(p.stdout) and "configs a b" in p.stdout,
          f"compare --side b: {p.stderr.strip()}")
    for side in ("shim", "ratio", "c"):
        check_error(t, ["compare", out["json"], out["json"], "--side", side], 2,
                    [f"no side {side!r}", "baseline, a, b"])
    # The work matrix side by side: the writers' share of time in write().
    p = t.run(t.fast("--only", "work", "--config", "a=", "--config", "b=",
                     "--json", out["json"])[2:],
              env={"FAKE_BENCH_MEMCPY_MBPS": "12500"})
    check(p.returncode == 0, f"--config work run failed: {p.stderr.strip()[-400:]}")
    for r in load(out["json"])["results"]:
        plain = fmt_share(r["baseline"]["write_time_share"])
        share = fmt_share(r["configs"]["b"]["write_time_share"])
        cell = f"{r['work_ns']} ({r['work_x']}x)" if r["work_x"] else "0"
        check(re.search(rf"^ +{re.escape(cell)} +plain .* {plain}$", p.stdout, re.M)
              and re.search(rf"^ +b +[\d.]+ +[\d.]+ +\d+ +\d+ +{share}$",
                            p.stdout, re.M),
              f"--config work: no rows for {cell} with {share} in write()")
    # A configuration that cannot preload is named.
    check_error(t, t.fast("--config", "a=", "--config", "b="), 2,
                [t.lib, "(config b)", "injected"], env={"FAKE_BENCH_FAIL": "2"})
    for args, words in ((["--config", "noequals"], ["--config", "noequals"]),
                        (["--config", "=PPIPE_X=1"], ["--config"]),
                        (["--config", "a b=PPIPE_X=1"], ["--config", "a b"]),
                        (["--config", "a=NOEQ"], ["--config a", "NOEQ"]),
                        (["--config", "a=,PPIPE_X=1"], ["--config a", "''"]),
                        (["--config", "a=LD_PRELOAD=x"], ["--config a", "LD_PRELOAD"]),
                        (["--config", "a=", "--config", "a=PPIPE_X=1"], ["'a'", "twice"]),
                        (["--config", "plain=PPIPE_X=1"], ["'plain'", "reserved"]),
                        (["--config", "shim="], ["'shim'", "reserved"]),
                        (["--config", "a=", "--svg", t.path("x.svg")],
                         ["--svg", "--config"])):
        lines = check_error(t, t.fast(*args), 2, words)
        check(len(lines) == 1, f"{args}: more than one line: {lines}")


def fmt_share(value):
    """The runner's percentage of time in write()."""
    return f"{100 * value:.0f}%"


def check_pressure_and_config(t):
    """No-reclaim warning; configured tokens instead of --bench/--lib;
    medians of 3 reps."""
    p = t.run(t.fast("--memory-pressure", "-q"),
              env={"FAKE_BENCH_RECLAIM": "0"})
    check(p.returncode == 0, f"pressure run failed: {p.stderr.strip()}")
    check("WARNING" in p.stdout and "direct reclaim" in p.stdout,
          "no warning about missing direct reclaim")
    check(p.stderr.count("rep 1/1") == 0, "-q still printed progress")
    with open(t.runner, encoding="utf-8") as f:
        text = f.read()
    if "@" + "BENCH" + "@" not in text:
        print("note: RUNNER is already configured; token check skipped")
        return
    for token, value in (("VERSION", "9.9.9"), ("DEFAULT_LIB", t.lib),
                         ("BENCH", t.bench)):
        text = text.replace("@" + token + "@", value)
    script = t.path("ppipe-compare")
    with open(script, "w", encoding="utf-8") as f:
        f.write(text)
    out = t.path("configured.json")
    p = t.run(["--only", "small", "--reps", "3", "--json", out], script=script)
    check(p.returncode == 0, f"configured run failed: {p.stderr.strip()}")
    with open(out, encoding="utf-8") as f:
        doc = json.load(f)
    for r in doc["results"]:
        for name in ("baseline", "shim"):
            check_side(r[name], 3, f"configured {r['size']} {name}")
    check(doc["version"] == "9.9.9", "configured version not used")
    check(doc["library"]["path"] == os.path.realpath(t.lib),
          "configured library not used")


def main(argv):
    """Run all checks."""
    if len(argv) != 4:
        sys.stderr.write("usage: test-compare.py RUNNER FAKEBENCH FAKESTAGE\n")
        return 1
    if not sys.platform.startswith("linux") or not os.path.exists("/bin/sh"):
        print("SKIP: needs Linux and /bin/sh")
        return 77
    runner, fake, fake_stage = (os.path.abspath(a) for a in argv[1:])
    with tempfile.TemporaryDirectory(prefix="ppipe-compare-test.") as tmp:
        t = Runner(runner, fake, fake_stage, tmp)
        try:
            a_path, doc = check_main_run(t)
            check_compare(t, a_path, doc)
            check_errors(t, a_path)
            check_pipeline(t)
            check_work(t)
            check_configs(t)
            check_pressure_and_config(t)
        except Failure as exc:
            print(f"FAIL: {exc}")
            return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
