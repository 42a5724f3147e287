#!/usr/bin/env python3
"""Test ppipe-compare against fake-bench.py, fake-stage.py,
fake-overhead.py and fake-coreutils.py (found beside FAKESTAGE), and its
fleet command against saved runs: synthetic ones and the real ones in
fixtures/ beside this script.

Usage: test-compare.py RUNNER FAKEBENCH FAKESTAGE PRELOAD
PRELOAD is a library that does nothing (the pass-through control): the
pipelines of real programs run sh, whose dynamic loader must load it.
Exit 0 on success, 1 on failure, 77 to skip.
"""

import csv
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG_NS = "{http://www.w3.org/2000/svg}"
MEDIANS = ("mbps", "writes_per_s", "lat_avg_ns", "lat_p50_ns",
           "lat_p99_ns", "lat_p999_ns", "lat_max_ns")
CPU_KEYS = ("cpu_s_per_gib", "cpu_user_s_per_gib", "cpu_sys_s_per_gib",
            "cpu_writers_s_per_gib", "cpu_readers_s_per_gib")
REP_KEYS = set(MEDIANS) | {"write_time_share", "pressure"} | set(CPU_KEYS)
# fake-bench.py's CPU per GiB on plain pipes (writers, readers, all, user,
# sys of all) and its factor with the library.
FAKE_CPU = {"cpu_s_per_gib": 0.7, "cpu_user_s_per_gib": 0.15, "cpu_sys_s_per_gib": 0.55,
            "cpu_writers_s_per_gib": 0.3, "cpu_readers_s_per_gib": 0.4}
CPU_FACTOR = 0.75
HOST_KEYS = {"kernel", "cpu", "cores", "page_size", "thp", "pipe_max_size",
             "hostname", "memcpy_mbps_1m", "ring_mbps_1m"}
RESULT_KEYS = {"matrix", "mode", "writers", "readers", "size", "pipe_size",
               "memory_pressure", "baseline", "shim", "ratio_mbps",
               "ratio_lat_avg", "ratio_lat_p99", "ratio_cpu_per_gib"}
PIPELINE_KEYS = RESULT_KEYS | {"hops"}
PROGRAM_KEYS = PIPELINE_KEYS | {"shape", "command", "bytes"}
# The pipelines of real programs: shape, pipes, first write size, command
# with its amounts; those that read the run's data last.
PROGRAMS = [("dd | dd", 1, 1048576, "dd if=/dev/zero bs=1M count={mib} | dd of=/dev/null bs=1M"),
            ("dd | cat", 1, 65536, "dd if=/dev/zero bs=64k count={blocks} | cat > /dev/null"),
            ("dd | cat | cat", 2, 1048576,
             "dd if=/dev/zero bs=1M count={mib} | cat | cat > /dev/null"),
            ("head | sha1sum", 1, None, "head -c {bytes} /dev/zero | sha1sum"),
            ("zstd -dc | wc -c", 1, None, "zstd -dc data.zst | wc -c"),
            ("lz4 -dc | wc -c", 1, None, "lz4 -dc data.lz4 | wc -c"),
            ("gzip -dc | wc -c", 1, None, "gzip -dc data.gz | wc -c"),
            ("tar c | tar x", 1, 10240, "tar cf - -C src data | tar xf - -C out")]
COREUTILS = ("dd", "cat", "head", "sha1sum", "wc", "zstd", "lz4", "gzip", "tar")
# The data those read: what settings.programs.data says, and the files the
# fake compressors make of it (their header, then the data).
DATA_NOTE = ("text-like lines of numbers and words, as logs are; made once "
             "per run, each compressed file from it")
COMPRESSED = [("zstd -dc | wc -c", "data.zst", "zstd -1 -T1 -c src/data > data.zst"),
              ("lz4 -dc | wc -c", "data.lz4", "lz4 -1 -c src/data > data.lz4"),
              ("gzip -dc | wc -c", "data.gz", "gzip -1 -c src/data > data.gz")]
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
CPU_CSV_FIELDS = ["baseline_cpu_s_per_gib", "shim_cpu_s_per_gib", "ratio_cpu_per_gib",
                  "baseline_cpu_user_s_per_gib", "shim_cpu_user_s_per_gib",
                  "baseline_cpu_sys_s_per_gib", "shim_cpu_sys_s_per_gib",
                  "baseline_cpu_writers_s_per_gib", "shim_cpu_writers_s_per_gib",
                  "baseline_cpu_readers_s_per_gib", "shim_cpu_readers_s_per_gib"]
PROGRAM_CSV_FIELDS = ["shape", "command", "bytes", "baseline_wall_s", "shim_wall_s"]
MULTI_CPU_CSV_FIELDS = ["cpu_s_per_gib", "ratio_cpu_per_gib", "cpu_user_s_per_gib",
                        "cpu_sys_s_per_gib", "cpu_writers_s_per_gib", "cpu_readers_s_per_gib"]
OVERHEAD_KEYS = {"matrix", "case", "size", "n", "baseline", "shim",
                 "ratio_time"}
OVERHEAD_SIDE_KEYS = {"ns_per_op", "spread_ns_per_op", "reps"}
OVERHEAD_CSV_FIELDS = ["case", "n", "baseline_ns_per_op", "shim_ns_per_op",
                       "ratio_time"]
# The overhead matrix's rows, --quick N, and fake-overhead.py's time factor
# with the library; its plain ns per operation.
OVERHEAD_ROWS = [("start", None, 300, 1.10, 500000), ("fork", None, 2000, 1.05, 100000),
                 ("exec", None, 200, 1.20, 700000), ("pipe", None, 100000, 1.02, 5000),
                 ("small", 1, 300000, 0.98, 501), ("small", 128, 300000, 1.01, 628),
                 ("shell", None, 100, 1.30, 2000000)]
TIME_RATIO_NOTE = ("preloaded/plain time per operation: 1.00 = free, "
                   "above 1 = costs, lower is better")
EMPTY_NOTE = ("empty: a preloaded library with nothing in it, the floor any "
              "preload pays; excess: the library's time ratio minus the "
              "empty library's")
# The source script has no empty library configured: the column is left out.
NO_EMPTY = {"path": None, "skipped": "no empty library configured (--empty PATH)"}
# fake-overhead.py's time factor for a library named "...empty...", by row.
EMPTY_FACTORS = [1.03, 1.0, 1.02, 1.0, 1.0, 0.99, 1.04]
EMPTY_CSV_FIELDS = ["empty_ns_per_op", "empty_ratio_time", "excess_time"]
FLEET_CSV_FIELDS = ["hostname", "kernel", "cpu", "run", "files", "sweep_ratio_mbps",
                    "sizes_ratio_mbps", "small_ratio_mbps", "pipeline_ratio_mbps",
                    "work_ratio_mbps", "overhead_ratio_time", "worst_matrix",
                    "worst_row", "worst_ratio", "verdict", "cpu_ratio_per_gib"]
FLEET_MATRICES = ("sweep", "sizes", "small", "pipeline", "work", "overhead")
SHIM_FACTOR = 1.21
# The api matrix: its configurations in order, its own sides, keys and CSV
# columns; fake-bench.py's --produce api factors (MB/s, the writers' CPU)
# with the library and without it.
API_CONFIGS = [(m, w, s) for m in ("threads", "procs") for w in (1, 5)
               for s in (65536, 262144, 1048576)]
API_SIDES = ("api", "api_plain")
API_RATIOS = (("", "shim", "baseline"), ("_api", "api", "baseline"),
              ("_api_shim", "api", "shim"), ("_api_plain", "api_plain", "baseline"))
API_RATIO_OF = (("mbps", "mbps"), ("cpu_per_gib", "cpu_s_per_gib"),
                ("writers_cpu_per_gib", "cpu_writers_s_per_gib"))
API_KEYS = RESULT_KEYS | set(API_SIDES) | {f"ratio{infix}_{suffix}" for infix, _, _ in API_RATIOS
                                           for suffix, _ in API_RATIO_OF}
API_CSV_FIELDS = ([f"{side}_{key}" for side in API_SIDES
                   for key in ("mbps", "lat_avg_ns", "lat_p99_ns", "spread_mbps",
                               "cpu_s_per_gib", "cpu_writers_s_per_gib")]
                  + ["ratio_writers_cpu_per_gib"]
                  + [f"ratio{infix}_{suffix}" for infix, _, _ in API_RATIOS[1:]
                     for suffix, _ in API_RATIO_OF])
API_FACTOR, API_WRITER_CPU, API_PLAIN_FACTOR, API_PLAIN_WRITER_CPU = 1.5, 0.5, 0.9, 1.2
API_SETTINGS = {
    "produce": "every block generated by its writer (ppipe-bench --produce)",
    "sides": {
        "baseline": "plain: write() of the writer's buffer, no library (--produce copy)",
        "shim": "the library's transparent path: the same write() with LD_PRELOAD "
                "(--produce copy)",
        "api": "the API with LD_PRELOAD: every block generated in place into "
               "ppipe_span_get() spans and committed (--produce api)",
        "api_plain": "the same API program without the library: the header's buffers "
                     "and write() (--produce api)"},
    "ratios": {f"ratio{infix}_{suffix}": f"{num}/{den}" for infix, num, den in API_RATIOS
               for suffix, _ in API_RATIO_OF}}
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

    def __init__(self, runner, fakes, preload, tmp):
        self.runner = runner
        self.tmp = tmp
        # A library that loads and does nothing, named for the tables.
        self.lib = os.path.join(tmp, "libdummy.so")
        shutil.copyfile(preload, self.lib)
        self.bench = self.wrapper("ppipe-bench", fakes["bench"])
        # A name that needs quoting in sh -c.
        self.stage = self.wrapper("ppipe stage's", fakes["stage"])
        self.overhead = self.wrapper("ppipe-overhead", fakes["overhead"])
        # The real programs' stand-ins, first on PATH.
        self.bin = self.path("bin")
        os.makedirs(self.bin)
        for name in COREUTILS:
            self.wrapper(os.path.join("bin", name), fakes["coreutils"], name)
        self.counter = 0

    def wrapper(self, name, script, *args):
        """An executable in the scratch directory that runs script (with
        args first). The fakes need only the standard library: -S skips
        site's start-up, most of a fake's run time and of this test's."""
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="ascii") as f:
            f.write("#!/bin/sh\nexec %s -S %s \"$@\"\n"
                    % (shlex.quote(sys.executable),
                       " ".join(shlex.quote(a) for a in (script,) + args)))
        os.chmod(path, 0o755)
        return path

    def path(self, name):
        """A file in the scratch directory."""
        return os.path.join(self.tmp, name)

    def run(self, args, env=None, script=None):
        """Run the runner (fresh fake state, a TMPDIR of its own, which must
        be empty again when it ends, as it failed or not: the data of the
        pipelines of real programs is removed); return CompletedProcess."""
        self.counter += 1
        child_env = dict(os.environ)
        child_env.pop("LD_PRELOAD", None)
        state = self.path(f"state{self.counter}")
        self.tmpdir = self.path(f"tmp{self.counter}")
        os.mkdir(self.tmpdir)
        child_env.update({"FAKE_BENCH_STATE": state, "TMPDIR": self.tmpdir,
                          "FAKE_BENCH_SHIM_FACTOR": str(SHIM_FACTOR),
                          "PPIPE_LEAKED_FROM_PARENT": "1",
                          # The copies of the runner made here import
                          # their package from beside the runner.
                          "PYTHONPATH": os.pathsep.join(
                              p for p in (os.path.dirname(self.runner),
                                          os.environ.get("PYTHONPATH")) if p),
                          "PATH": self.bin + os.pathsep + os.environ.get("PATH", os.defpath),
                          # The library may be a sanitizer build: the
                          # Python fakes and the shells it is preloaded
                          # into are not its to judge for leaks.
                          "ASAN_OPTIONS": ":".join(
                              o for o in (os.environ.get("ASAN_OPTIONS"),
                                          "detect_leaks=0") if o)})
        child_env.update(env or {})
        p = subprocess.run([sys.executable, script or self.runner] + args,
                           env=child_env, capture_output=True, text=True,
                           timeout=60, check=False)
        check(not os.listdir(self.tmpdir),
              f"{' '.join(args)}: left {os.listdir(self.tmpdir)} in its TMPDIR "
              f"(exit {p.returncode}: {p.stderr.strip()[-300:]})")
        return p

    def fast(self, *extra):
        """Arguments for a quick, tiny run."""
        return ["--only", "small", "--reps", "1", "--bench", self.bench,
                "--lib", self.lib] + list(extra)


def check_side(side, reps, where, program=False):
    """Medians and spread of one side against its reps (a pipeline of real
    programs: without latencies, with its wall time)."""
    check(len(side["reps"]) == reps, f"{where}: {reps} reps expected")
    for rep in side["reps"]:
        check(set(rep) == REP_KEYS | ({"wall_s"} if program else set()),
              f"{where}: rep keys {sorted(rep)}")
    for key in MEDIANS + ("write_time_share",) + CPU_KEYS + (("wall_s",) if program else ()):
        values = [rep[key] for rep in side["reps"]]
        if None in values:
            check(side[key] is None, f"{where}: {key} is not None with a rep without it")
        else:
            check(close(side[key], statistics.median(values)),
                  f"{where}: {key} is not the median")
    values = [rep["mbps"] for rep in side["reps"]]
    check(close(side["spread_mbps"], (max(values) - min(values))
                / side["mbps"]), f"{where}: spread_mbps")


def check_cpu(r, where):
    """A throughput result's CPU per GiB: ppipe-bench's (fake-bench.py's
    known values, the library's factor); a pipeline's, all its processes
    counted by the runner: positive, user + sys = total, no split into
    writers and readers."""
    base, shim = r["baseline"], r["shim"]
    check(close(r["ratio_cpu_per_gib"], shim["cpu_s_per_gib"] / base["cpu_s_per_gib"]),
          f"{where}: ratio_cpu_per_gib is not libppipe/plain of the medians")
    if r["matrix"] != "pipeline":
        for name, factor in (("baseline", 1.0), ("shim", CPU_FACTOR)):
            for rep in r[name]["reps"]:
                check(all(close(rep[k], v * factor) for k, v in FAKE_CPU.items()),
                      f"{where} {name}: CPU per GiB not ppipe-bench's: {rep}")
        check(close(r["ratio_cpu_per_gib"], CPU_FACTOR),
              f"{where}: the fake's CPU factor not seen ({r['ratio_cpu_per_gib']})")
        return
    for name in ("baseline", "shim"):
        for rep in r[name]["reps"]:
            check(rep["cpu_s_per_gib"] > 0 and rep["cpu_user_s_per_gib"] >= 0
                  and rep["cpu_sys_s_per_gib"] >= 0
                  and close(rep["cpu_user_s_per_gib"] + rep["cpu_sys_s_per_gib"],
                            rep["cpu_s_per_gib"], 1e-6)
                  and rep["cpu_writers_s_per_gib"] is None
                  and rep["cpu_readers_s_per_gib"] is None,
                  f"{where} {name}: a pipeline's CPU per GiB: {rep}")


def program_commands(nbytes):
    """The pipelines of real programs' commands for nbytes per run."""
    return [command.format(mib=nbytes >> 20, blocks=nbytes >> 16, bytes=nbytes)
            for _, _, _, command in PROGRAMS]


def program_data(nbytes, leave_out=()):
    """settings.programs.data of a run of nbytes whose fake compressors
    made their files (but those of the shapes left out)."""
    return {"what": DATA_NOTE, "compressed": {
        shape: {"file": name, "command": command,
                "bytes": nbytes + len(f"fake {command.split()[0]} compressed\n")}
        for shape, name, command in COMPRESSED if shape not in leave_out}}


def check_programs(results, reps, nbytes, where):
    """The pipelines of real programs' results: in order, each moving
    nbytes; MB/s over the wall time; no latencies; CPU of the pipeline."""
    check([r["shape"] for r in results] == [shape for shape, _, _, _ in PROGRAMS],
          f"{where}: shapes {[r.get('shape') for r in results]}")
    for r, (shape, hops, size, _), command in zip(results, PROGRAMS,
                                                   program_commands(nbytes)):
        at = f"{where} {shape}"
        check(set(r) == PROGRAM_KEYS and r["matrix"] == "pipeline" and r["mode"] == "programs"
              and (r["hops"], r["size"], r["bytes"], r["command"])
              == (hops, size, nbytes, command),
              f"{at}: {sorted(r)} {r.get('command')}")
        for name in ("baseline", "shim"):
            check_side(r[name], reps, f"{at} {name}", program=True)
            for rep in r[name]["reps"]:
                check(close(rep["mbps"], nbytes / rep["wall_s"] / (1 << 20))
                      and all(rep[k] is None for k in MEDIANS[1:]),
                      f"{at} {name}: MB/s over the wall time, no latency: {rep}")
        check(r["ratio_lat_avg"] is None and r["ratio_lat_p99"] is None
              and close(r["ratio_mbps"], r["shim"]["mbps"] / r["baseline"]["mbps"]),
              f"{at}: ratios")
        check_cpu(r, at)


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
                              "memory_pressure": False, "pressure_mode": None, "verify": False,
                              "pin": None,
                              "programs": {"bytes": 1 << 20, "skipped": {},
                                           "data": program_data(1 << 20)},
                              "overhead": {"reps": 5, "ratio_time": TIME_RATIO_NOTE,
                                           "skipped": {}, "empty": NO_EMPTY}},
          f"JSON: settings {doc['settings']}")
    results = doc["results"]
    counts = {m: sum(r["matrix"] == m for r in results)
              for m in ("sweep", "sizes", "small", "pipeline", "overhead")}
    check(counts == {"sweep": 9, "sizes": 4, "small": 3, "pipeline": 12, "overhead": 7}
          and len(results) == 35 and "work" not in doc["settings"],
          f"JSON: matrix sizes {counts}, {len(results)} results")
    check([r["matrix"] for r in results][28:] == ["overhead"] * 7,
          "JSON: the overhead matrix runs last")
    check_overhead_results(results[28:], 5, "JSON overhead")
    check_programs(results[20:28], 2, 1 << 20, "JSON programs")
    results = results[:20]
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
        check_cpu(r, where)
    check(any(r["baseline"]["spread_mbps"] > 0 for r in results),
          "JSON: fake jitter did not reach the reps")


def check_csv(path, results):
    """CSV header and rows against the JSON."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    check(rows[0] == CSV_FIELDS + OVERHEAD_CSV_FIELDS + CPU_CSV_FIELDS + PROGRAM_CSV_FIELDS,
          f"CSV header {rows[0]}")
    check(len(rows) == 1 + len(results), "CSV: one row per result")
    for row, r in zip(rows[1:], results):
        rec = dict(zip(rows[0], row))
        if r["matrix"] == "overhead":
            check_overhead_csv_row(rec, r)
            check(all(rec[k] == "" for k in CPU_CSV_FIELDS + PROGRAM_CSV_FIELDS),
                  f"CSV: CPU or program columns filled in an overhead row: {rec}")
            continue
        check(all(rec[k] == "" for k in OVERHEAD_CSV_FIELDS),
              f"CSV: overhead columns filled in a {r['matrix']} row")
        check(rec["matrix"] == r["matrix"] and rec["size"] == str(r["size"] or "")
              and int(rec["writers"]) == r["writers"], "CSV: row order")
        check(rec["hops"] == str(r.get("hops", "")), f"CSV: hops {rec['hops']!r}")
        check(rec["memory_pressure"] == "false", "CSV: memory_pressure")
        check(close(float(rec["ratio_mbps"]), r["ratio_mbps"]),
              "CSV: ratio_mbps")
        check(rec["shim_lat_p99_ns"] == "" if r["shim"]["lat_p99_ns"] is None
              else close(float(rec["shim_lat_p99_ns"]), r["shim"]["lat_p99_ns"]),
              "CSV: shim_lat_p99_ns")
        check(close(float(rec["ratio_cpu_per_gib"]), r["ratio_cpu_per_gib"])
              and all(rec[f"{side}_{key}"] == "" if r[side][key] is None
                      else close(float(rec[f"{side}_{key}"]), r[side][key])
                      for side in ("baseline", "shim") for key in CPU_KEYS),
              f"CSV: CPU per GiB of {r['matrix']} {r.get('shape') or r['size']}: {rec}")
        program = r.get("mode") == "programs"
        check(all((rec[k] != "") == program for k in PROGRAM_CSV_FIELDS)
              and (not program or (rec["shape"], rec["command"], int(rec["bytes"]))
                   == (r["shape"], r["command"], r["bytes"])
                   and close(float(rec["shim_wall_s"]), r["shim"]["wall_s"])),
              f"CSV: the program columns of {r['matrix']} {r['mode']}: {rec}")


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
    rows = classed("g", "program-row")
    check(["".join(next(row.iter(SVG_NS + "text")).itertext()) for row in rows]
          == [shape for shape, _, _, _ in PROGRAMS],
          "SVG: 8 rows of pipelines of real programs, in order: "
          f"{[''.join(row.itertext()) for row in rows]}")
    check_svg_overhead(root, 7)
    texts = " ".join("".join(t.itertext()) for t in root.iter(SVG_NS + "text"))
    for word in ("4K", "32K", "64K", "1M", "MB/s", "writers", "readers",
                 "produce | relay | consume", "median of 2 x 1 s runs per side"):
        check(word in texts, f"SVG: no {word!r} label")


def overhead_rows(full=False):
    """(label, case, size, N, fake factor, plain ns) of the overhead rows."""
    return [(f"{case} {size} B" if size else case, case, size,
             n * (2 if full else 1), factor, plain)
            for case, size, n, factor, plain in OVERHEAD_ROWS]


def geomean(values):
    """Geometric mean."""
    return math.exp(statistics.fmean(math.log(v) for v in values))


def check_time_side(side, reps, where):
    """An overhead side: the median and spread of its raw repetitions."""
    check(set(side) == OVERHEAD_SIDE_KEYS, f"{where}: keys {sorted(side)}")
    check(len(side["reps"]) == reps and all(set(rep) == {"ns_per_op"} for rep in side["reps"]),
          f"{where}: {reps} reps of raw ns_per_op expected: {side['reps']}")
    values = [rep["ns_per_op"] for rep in side["reps"]]
    check(close(side["ns_per_op"], statistics.median(values)),
          f"{where}: ns_per_op is not the median")
    check(close(side["spread_ns_per_op"], (max(values) - min(values)) / side["ns_per_op"]),
          f"{where}: spread_ns_per_op")


def check_time_ratio(value, base, side, factor, where):
    """A time ratio: side/base of the medians, and the fake's factor (its
    jitter is 5% at most)."""
    check(close(value, side["ns_per_op"] / base["ns_per_op"]),
          f"{where}: ratio_time is not preloaded/plain")
    check(factor / 1.051 < value < factor * 1.051,
          f"{where}: time ratio {value}, the fake's factor is {factor}")


def check_overhead_results(results, reps, where, full=False):
    """Two-way overhead results: rows, medians and ratios."""
    rows = overhead_rows(full)
    check([(r["case"], r["size"], r["n"]) for r in results]
          == [(case, size, n) for _, case, size, n, _, _ in rows],
          f"{where}: rows {[(r['case'], r['size'], r['n']) for r in results]}")
    for r, (label, _, _, _, factor, plain) in zip(results, rows):
        at = f"{where} {label}"
        check(set(r) == OVERHEAD_KEYS and r["matrix"] == "overhead", f"{at}: keys {sorted(r)}")
        for name in ("baseline", "shim"):
            check_time_side(r[name], reps, f"{at} {name}")
        check(plain <= r["baseline"]["ns_per_op"] <= plain * 1.051,
              f"{at}: plain side {r['baseline']['ns_per_op']}, not about {plain}")
        check_time_ratio(r["ratio_time"], r["baseline"], r["shim"], factor, at)


def check_overhead_csv_row(rec, r):
    """One overhead row of the two-way CSV."""
    where = f"CSV overhead {r['case']} {r['size']}"
    check(rec["matrix"] == "overhead" and rec["case"] == r["case"]
          and rec["n"] == str(r["n"]) and rec["size"] == str(r["size"] or ""),
          f"{where}: {rec}")
    check(close(float(rec["ratio_time"]), r["ratio_time"])
          and close(float(rec["baseline_ns_per_op"]), r["baseline"]["ns_per_op"])
          and close(float(rec["shim_ns_per_op"]), r["shim"]["ns_per_op"]),
          f"{where}: values {rec}")
    check(all(rec[k] == "" for k in ("mode", "writers", "baseline_mbps", "shim_mbps",
                                     "ratio_mbps", "hops")),
          f"{where}: throughput columns filled: {rec}")


def check_svg_overhead(root, count):
    """The SVG's overhead table: its rows, the time ratios' label."""
    rows = [e for e in root.iter(SVG_NS + "g") if e.get("class") == "overhead-row"]
    check(len(rows) == count, f"SVG: {len(rows)} overhead rows, not {count}")
    texts = " ".join("".join(t.itertext()) for t in root.iter(SVG_NS + "text"))
    check("time ratio libdummy/plain, lower is better" in texts,
          "SVG: the overhead table's ratio is not labelled")


def check_overhead_text(stdout, results, name, reps):
    """The two-way overhead table and its summary line against the JSON."""
    for text in (f"== What {name} costs where it cannot help: time per operation "
                 f"(median of {reps}) ==",
                 f"   time ratio {name}/plain, lower is better: 1.00 = free, "
                 "above 1 = costs",
                 f"row   N   what   ns/op plain -> {name} (delta)   "
                 "time ratio (lower is better)"):
        check(text in re.sub(r"  +", "   ", stdout), f"stdout: no {text!r}")
    for r in results:
        label = f"{r['case']} {r['size']} B" if r["size"] else r["case"]
        row = (rf"^  {re.escape(label)} +{r['n']} +.+ {r['baseline']['ns_per_op']:.0f} +-> +"
               rf"{r['shim']['ns_per_op']:.0f} +\([+-]\d+%\) +{r['ratio_time']:.3f}$")
        check(re.search(row, stdout, re.M), f"stdout: no overhead row /{row}/")
    ratios = [(r["ratio_time"], f"{r['case']} {r['size']} B" if r["size"] else r["case"])
              for r in results]
    worst, best = max(ratios), min(ratios)
    line = (f"Summary, {name}/plain time per operation (overhead, lower is better): "
            f"geomean {geomean([v for v, _ in ratios]):.3f} (worst {worst[1]} "
            f"{worst[0]:.3f}, best {best[1]} {best[0]:.3f}, {len(results)} rows)")
    check(line in stdout.splitlines(), f"stdout: no {line!r}")
    check(re.search(r"^Max spread of ns/op across reps \(\(max-min\)/median\), "
                    r"overhead: \d+\.\d% \(", stdout, re.M), "stdout: no overhead spread")


def check_ring_unknown(t):
    """A run whose ring reference cannot be measured still reports the 1 MiB
    cell against memcpy, and says nothing of the ring."""
    out = t.path("ring-unknown.json")
    p = t.run(t.fast("--json", out)[:1] + ["procs"] + t.fast("--json", out)[2:],
              env={"FAKE_BENCH_RING_FAIL": "1"})
    check(p.returncode == 0, f"ring unknown: run failed {p.stderr.strip()[-400:]}")
    doc = load(out)
    check(doc["host"]["ring_mbps_1m"] is None and doc["host"]["memcpy_mbps_1m"] == 12500.0,
          f"ring unknown: host {doc['host']}")
    check("of one thread's memcpy" in p.stdout and "without a kernel" not in p.stdout,
          f"ring unknown: the 1 MiB lines {p.stdout[-600:]}")


def check_main_run(t):
    """The --quick --reps 2 run and everything it wrote."""
    out = {k: t.path(f"run.{k}") for k in ("json", "csv", "svg")}
    log = t.path("run.coreutils.log")
    p = t.run(["--quick", "--reps", "2", "--bench", t.bench, "--stage", t.stage,
               "--overhead", t.overhead, "--lib", t.lib, "--program-bytes", "1M",
               "--env", "PPIPE_FOO=1 PPIPE_BAR='a b'", "--json", out["json"],
               "--csv", out["csv"], "--svg", out["svg"]],
              env={"FAKE_COREUTILS_LOG": log})
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
                 "pipeline geomean",
                 "CPU seconds per GiB moved, lower is better (plain -> libdummy, delta):",
                 "CPU s/GiB plain -> libdummy (delta)", "CPU ratio (lower is better)",
                 f"== pipelines of real programs, "
                 f"{16 * os.sysconf('SC_PAGE_SIZE') // 1024} KiB pipes, no memory "
                 "pressure (median of 2) ==",
                 "1 MiB per run, MB/s over the pipeline's wall time, CPU of all its processes",
                 "Summary, libdummy/plain CPU per GiB moved (lower is better): sweep geomean "
                 "0.750 (min 0.750, max 0.750, 9 configs); sizes geomean 0.750 (min 0.750, "
                 "max 0.750, 4 configs); small geomean 0.750 (min 0.750, max 0.750, 3 configs); "
                 "pipeline geomean "):
        check(text in p.stdout, f"stdout: no {text!r}")
    # The 1 MiB cell against the two references fake-bench reports: one
    # thread's memcpy (12500 MB/s) and the two-thread ring (8000 MB/s).
    check(doc["host"]["memcpy_mbps_1m"] == 12500.0 and doc["host"]["ring_mbps_1m"] == 8000.0,
          f"JSON: references {doc['host']}")
    mib = next(r for r in doc["results"] if r["size"] == 1048576 and r["mode"] == "procs")
    plain, lib_mbps = mib["baseline"]["mbps"], mib["shim"]["mbps"]
    for text in (f"1 MiB writes, procs 1x1: plain {plain:.0f} MB/s ({100 * plain / 12500:.0f}% "
                 f"of one thread's memcpy, 12500 MB/s), libdummy {lib_mbps:.0f} MB/s "
                 f"({100 * lib_mbps / 12500:.0f}%)",
                 "  of a copy in and a copy out between two threads without a kernel "
                 f"(8000 MB/s, ppipe-bench --mode ring): plain {100 * plain / 8000:.0f}%, "
                 f"libdummy {100 * lib_mbps / 8000:.0f}%"):
        check(text in p.stdout.splitlines(), f"stdout: no {text!r}")
    # The sweep's CPU grid: fake-bench's 0.7 s per GiB, 0.75 of it with the library.
    check(re.search(r"^ +1 +0\.700 -> 0\.525 +\(-25%\) +0\.700 -> 0\.525 +\(-25%\)",
                    p.stdout, re.M), "stdout: no CPU grid row")
    # Every pipeline of real programs has its row, in the order they ran.
    where = []
    for command in program_commands(1 << 20):
        row = re.search(rf"^  {re.escape(command)} +[\d.]+ +-> +[\d.]+ +\([+-]\d+%\) +"
                        r"[\d.]+ +-> +[\d.]+ +\([+-]\d+%\) +\d\.\d{3} +\d+\.\d{3}$",
                        p.stdout, re.M)
        check(row, f"stdout: no row of {command!r}")
        where.append(row.start())
    check(where == sorted(where), "stdout: the pipelines of real programs out of order")
    line = ("  data of the pipelines of real programs: 1 MiB of text-like lines, made once; "
            "compressed to " + ", ".join(
                f"{100 * (1 + len(f'fake {tool} compressed') / (1 << 20)):.1f}% by {how}"
                for tool, how in (("zstd", "zstd -1 -T1"), ("lz4", "lz4 -1"),
                                  ("gzip", "gzip -1"))))
    check(line in p.stdout.splitlines(), f"stdout: no {line!r}")
    for line in ("[1/35] threads w=1 r=1 size=65536 rep 1/2 baseline",
                 "[20/35] sh 2 hops size=1048576 rep 2/2 shim",
                 "[22/35] programs dd | cat check shim",
                 "[24/35] programs head | sha1sum rep 2/2 shim",
                 "[25/35] programs zstd -dc | wc -c rep 1/2 baseline",
                 "[28/35] programs tar c | tar x rep 2/2 shim",
                 "[35/35] overhead shell rep 5/5 shim"):
        check(line in p.stderr, f"stderr: no progress line {line!r}")
    check("programs dd | dd check" not in p.stderr,
          "stderr: a check run of dd | dd, which counts for itself")
    check(not re.search(r"programs (zstd|lz4|gzip|tar) .* check", p.stderr),
          "stderr: a check run of a pipeline that counts for itself")
    # The data: made once, in a directory of its own under TMPDIR (gone
    # now: t.run), before the first run of a pipeline of real programs.
    made = re.findall(r"^ppipe-compare: making 1 MiB of data for zstd, lz4, gzip, tar in "
                      rf"({re.escape(t.tmpdir)}/ppipe-compare-\S+)$", p.stderr, re.M)
    check(len(made) == 1 and p.stderr.index("making 1 MiB") < p.stderr.index("[1/35]"),
          f"stderr: the data not made once, first: {p.stderr[:600]}")
    # Every program ran once plain and once with the library per run, in
    # the C locale; the sinks to /dev/null were counted by wc -c before;
    # the compressors ran once each, plain, before the pipelines; those
    # that read the data ran in its directory.
    runs = read_log(log)
    lib = os.path.realpath(t.lib)
    check(len(runs) == 85 and all(run["lc_all"] == "C" for run in runs)
          and all(run["ld_preload"] in (None, lib) for run in runs)
          and sum(run["ld_preload"] == lib for run in runs) == 41
          and sum(run["program"] == "wc" for run in runs) == 16,
          f"programs: {len(runs)} runs logged: {runs[:4]}")
    packing = [run for run in runs
               if run["program"] in ("zstd", "lz4", "gzip") and "-dc" not in run["argv"]]
    packs = [(run["program"], run["argv"], run["ld_preload"], run["cwd"]) for run in packing]
    check(packs == [(command.split()[0], command.split()[1:-2], None, made[0])
                    for _, _, command in COMPRESSED]
          and runs.index(next(run for run in runs if run["program"] == "dd"))
          > runs.index(next(run for run in runs if run["program"] == "gzip")),
          f"programs: the compressors' runs {packs}")
    readers = [run for run in runs if run["program"] in ("zstd", "lz4", "gzip", "tar")
               and run not in packing]
    check(len(readers) == 5 * 4 and all(run["cwd"] == made[0] for run in readers)
          and all(run["cwd"] != made[0] for run in runs
                  if run["program"] in ("dd", "head", "cat", "sha1sum")),
          f"programs: where the pipelines ran {[(r['program'], r['cwd']) for r in runs]}")
    check_overhead_text(p.stdout, doc["results"][28:], "libdummy", 5)
    # The throughput matrices' summary leaves the overhead matrix out.
    summary = [ln for ln in p.stdout.splitlines() if ln.startswith("Summary, libdummy/plain MB/s")]
    check(len(summary) == 1 and "overhead" not in summary[0],
          f"stdout: throughput summary {summary}")
    return out["json"], doc


def without_cpu(doc):
    """A saved run as one from before CPU was measured: no CPU per GiB, no
    pipelines of real programs."""
    old = json.loads(json.dumps(doc))
    old["settings"].pop("programs", None)
    old["results"] = [r for r in old["results"] if r.get("mode") != "programs"]
    for r in old["results"]:
        r.pop("ratio_cpu_per_gib", None)
        for side in [v for k, v in r.items() if k in ("baseline", "shim")] \
                + list(r.get("configs", {}).values()):
            side.pop("ratio_cpu_per_gib", None)
            for values in [side] + side["reps"]:
                for key in CPU_KEYS:
                    values.pop(key, None)
    return old


def check_compare_cpu(t, a_path, b_path):
    """compare: CPU per GiB A -> B and its ratio, lower is better; files
    saved before CPU was measured load, their values shown as '-'."""
    p = t.run(["compare", a_path, b_path])
    check("CPU s/GiB A -> B (delta)" in p.stdout and "CPU B/A (lower is better)" in p.stdout
          and re.search(r"^ +1 +0\.525 -> 0\.263 +\(-50%\)", p.stdout, re.M)
          and "Summary, B/A shim CPU per GiB moved (lower is better): sweep geomean 0.500 "
          "(min 0.500, max 0.500, 9 configs)" in p.stdout,
          f"compare: CPU per GiB A -> B: {p.stdout}")
    programs = p.stdout.split("== pipelines of real programs")
    check(len(programs) == 2 and len([ln for ln in programs[1].split("== Overhead")[0]
                                      .splitlines() if re.search(
                                          r"\(\+50%\) .*\(-50%\) +1\.500 +0\.500$", ln)]) == 8,
          f"compare: the pipelines of real programs matched by shape: {programs[-1][:900]}")
    old = t.path("old.json")
    save(old, without_cpu(load(a_path)))
    p = t.run(["compare", old, b_path])
    check(p.returncode == 0 and "CPU s/GiB A -> B (delta)" in p.stdout
          and re.search(r"^ +1 +- -> 0\.263 +\(n/a\) ", p.stdout, re.M)
          and re.search(r"^ +4096 +.* - -> 0\.263 +\(n/a\) +1\.500 +-$", p.stdout, re.M)
          and "Only in B (8):" in p.stdout and "CPU per GiB moved" not in p.stdout,
          f"compare: a file without CPU against one with it: {p.stdout} {p.stderr}")
    p = t.run(["compare", old, old, "--side", "ratio"])
    check(p.returncode == 0 and "CPU" not in p.stdout and CELL.search(p.stdout),
          f"compare: two files without CPU: {p.stdout} {p.stderr}")
    p = t.run(["compare", a_path, b_path, "--side", "ratio"])
    check(re.search(r"CPU ratio A -> B \(delta\)", p.stdout)
          and re.search(r"^ +1 +0\.750 -> 0\.375 +\(-50%\)", p.stdout, re.M),
          f"compare --side ratio: CPU ratios A -> B: {p.stdout}")


def check_compare(t, a_path, doc):
    """compare A B, with an edited B that lacks one result."""
    b_doc = json.loads(json.dumps(doc))
    dropped = b_doc["results"].pop(19)
    check(dropped["matrix"] == "pipeline", "compare: the last pipeline result")
    for r in b_doc["results"]:
        if r["matrix"] == "overhead":
            r["shim"]["ns_per_op"] *= 1.5
            continue
        r["shim"]["mbps"] *= 1.5
        r["shim"]["cpu_s_per_gib"] *= 0.5
        r["ratio_cpu_per_gib"] *= 0.5
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
    pipe_rows = [ln for ln in p.stdout.split("== sh pipelines")[1]
                 .split("== pipelines of real programs")[0].splitlines() if "(+50%)" in ln]
    check(len(pipe_rows) == 3, f"compare: 1 and 2 hops matched apart: {pipe_rows}")
    over = p.stdout.split("== Overhead: time per operation, lower is better "
                          "(A: median of 5, B: median of 5) ==")
    check(len(over) == 2, "compare: no overhead table")
    for label, *_ in overhead_rows():
        check(re.search(rf"^  {re.escape(label)} +\d+ +-> +\d+ +\(\+50%\) +1\.500$",
                        over[1], re.M), f"compare: no overhead row {label!r}")
    check("Summary, B/A shim time per operation (overhead, lower is better): "
          "geomean 1.500" in over[1], "compare: no overhead summary")
    for side in ("baseline", "ratio"):
        p = t.run(["compare", a_path, b_path, "--side", side])
        check(p.returncode == 0 and CELL.search(p.stdout),
              f"compare --side {side}: {p.stderr.strip()}")
        check(f"Summary, B/A {side} time per operation" in p.stdout,
              f"compare --side {side}: no overhead summary")
    check_compare_cpu(t, a_path, b_path)


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
            "--stage", t.stage, "--lib", t.lib, "--pin", "0:1", "--program-bytes", "1M",
            "-q", "--json", out]
    p = t.run(args, env={"FAKE_STAGE_PIPE_SIZE": "4096"})
    check(p.returncode == 0, f"pipeline run failed: {p.stderr.strip()[-400:]}")
    with open(out, encoding="utf-8") as f:
        doc = json.load(f)
    results = {(r["hops"], r["size"]): r for r in doc["results"] if r["mode"] == "sh"}
    check(len(results) == 4 and len(doc["results"]) == 12
          and all(r["matrix"] == "pipeline" for r in doc["results"]),
          f"--only pipeline: {sorted(results)}")
    check_programs(doc["results"][4:], 1, 1 << 20, "--only pipeline programs")
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
               t.stage, "--lib", t.lib, "--program-bytes", "2M", "-q", "--json", out,
               "--svg", svg])
    check(p.returncode == 0, f"--full pipeline run failed: {p.stderr.strip()[-400:]}")
    with open(out, encoding="utf-8") as f:
        doc = json.load(f)
    stages = [r for r in doc["results"] if r["mode"] == "sh"]
    check(sorted({(r["hops"], r["size"]) for r in stages})
          == [(h, s) for h in (1, 2) for s in (16384, 65536, 262144, 1048576)],
          "--full pipeline matrix")
    check(doc["settings"]["duration_s"] == 5.0 and doc["settings"]["pipeline_duration_s"] == 2.0
          and all(r["shim"]["reps"][0]["lat_max_ns"] == 2000000000 for r in stages),
          f"--full runs pipelines for 2 s: {doc['settings']}")
    check_programs(doc["results"][8:], 1, 2 << 20, "--full programs")
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
    check(doc["results"] and not any(r["matrix"] in ("pipeline", "overhead")
                                     for r in doc["results"]),
          "--memory-pressure ran pipelines or the overhead matrix")
    check("pipeline matrix is left out" in p.stderr, "no note on pipelines left out")
    check("overhead matrix is left out" in p.stderr, "no note on the overhead matrix left out")
    check_program_checks(t, args)


def path_without(t, name, *missing):
    """A PATH directory with sh and the fake programs but those missing."""
    folder = t.path(name)
    os.makedirs(folder)
    os.symlink(shutil.which("sh"), os.path.join(folder, "sh"))
    for program in COREUTILS:
        if program not in missing:
            os.symlink(os.path.join(t.bin, program), os.path.join(folder, program))
    return folder


def check_program_checks(t, args):
    """The pipelines of real programs cannot pass with a byte lost or a
    stage that complains (the library not loaded); libppipe's own lines
    are no complaint; a pipeline whose programs are missing is left out,
    named, and the data is made only for those that run, only when one
    runs; it is removed after a failure, an interrupt or a termination
    too (t.run checks each run's TMPDIR); --program-bytes and its
    defaults."""
    for who, words in (("1M", ["programs dd | dd (shim)", "dd reported 1048576, 1044480"]),
                       ("64k", ["programs dd | cat (shim)", "wc -c counted 1044480, not 1048576"]),
                       ("head", ["programs head | sha1sum (shim)", "sha1sum printed",
                                 "1048576 zero"]),
                       ("zstd", ["programs zstd -dc | wc -c (shim)",
                                 "wc -c counted 1044480, not 1048576 bytes"]),
                       ("lz4", ["programs lz4 -dc | wc -c (shim)",
                                "wc -c counted 1044480, not 1048576 bytes"]),
                       ("gzip", ["programs gzip -dc | wc -c (shim)",
                                 "wc -c counted 1044480, not 1048576 bytes"]),
                       ("tar", ["programs tar c | tar x (shim)",
                                "tar extracted 1044480 bytes into out/data, not 1048576 bytes"])):
        check_error(t, args, 1, ["verification failed"] + words,
                    env={"FAKE_COREUTILS_LOSE": who})
    # Interrupted or terminated in the middle of a pipeline that reads the
    # data: the data goes all the same (t.run).
    for sig, status in (("TERM", 128 + 15), ("INT", 128 + 2), ("HUP", 128 + 1)):
        p = t.run(args, env={"FAKE_COREUTILS_SIGNAL": sig})
        check(p.returncode == status and p.stderr.strip().splitlines()[-1:]
              == ["ppipe-compare: interrupted"],
              f"SIG{sig} in a pipeline: exit {p.returncode}: {p.stderr[-400:]}")
    noise = "ERROR: ld.so: object 'libdummy.so' from LD_PRELOAD cannot be preloaded: ignored."
    check_error(t, args, 1, ["the pipeline failed for programs dd | dd (shim)", noise],
                env={"FAKE_COREUTILS_NOISE": noise})
    p = t.run(args, env={"FAKE_COREUTILS_NOISE": "libppipe[42]: pipe inode 7 (fd 1): plain"})
    check(p.returncode == 0, f"libppipe's own lines failed a pipeline: {p.stderr[-400:]}")
    out = args[-1]
    p = t.run(args[:-3] + ["--json", out],
              env={"PATH": path_without(t, "bin-no-sha1sum", "sha1sum", "wc")})
    doc = load(out)
    skipped = {"dd | cat": "wc not found on PATH", "dd | cat | cat": "wc not found on PATH",
               "head | sha1sum": "sha1sum not found on PATH",
               "zstd -dc | wc -c": "wc not found on PATH",
               "lz4 -dc | wc -c": "wc not found on PATH",
               "gzip -dc | wc -c": "wc not found on PATH"}
    # tar alone reads the data: made, and compressed by none.
    check(p.returncode == 0
          and [r.get("shape") for r in doc["results"][4:]] == ["dd | dd", "tar c | tar x"]
          and doc["settings"]["programs"] == {"bytes": 1 << 20, "skipped": skipped,
                                              "data": {"what": DATA_NOTE, "compressed": {}}}
          and all(f"ppipe-compare: pipeline of real programs {shape} skipped: {why}" in p.stderr
                  and f"  pipeline of real programs {shape}: skipped, {why}" in p.stdout
                  for shape, why in skipped.items())
          and "  data of the pipelines of real programs: 1 MiB of text-like lines, made once"
          in p.stdout.splitlines(),
          f"programs left out: {p.stdout} {p.stderr} {doc['settings']}")
    # One tool missing: its pipeline alone is left out, and its file not made.
    log = t.path("no-lz4.log")
    p = t.run(args[:-3] + ["--json", out], env={"PATH": path_without(t, "bin-no-lz4", "lz4"),
                                                "FAKE_COREUTILS_LOG": log})
    doc = load(out)
    skipped = {"lz4 -dc | wc -c": "lz4 not found on PATH"}
    check(p.returncode == 0
          and [r.get("shape") for r in doc["results"][4:]]
          == [shape for shape, _, _, _ in PROGRAMS if shape not in skipped]
          and doc["settings"]["programs"] == {"bytes": 1 << 20, "skipped": skipped,
                                              "data": program_data(1 << 20, skipped)}
          and "ppipe-compare: pipeline of real programs lz4 -dc | wc -c skipped: "
          "lz4 not found on PATH" in p.stderr
          and "  pipeline of real programs lz4 -dc | wc -c: skipped, lz4 not found on PATH"
          in p.stdout.splitlines() and "lz4" not in {r["program"] for r in read_log(log)},
          f"lz4 left out: {p.stdout} {p.stderr} {doc['settings']}")
    # The defaults, seen in the settings without moving a byte; no data
    # made when no pipeline reads it.
    nothing = path_without(t, "bin-none", *COREUTILS)
    for preset, nbytes in (("--quick", 256 << 20), ("--full", 1 << 30)):
        p = t.run([preset] + args[:-5] + ["--json", out], env={"PATH": nothing})
        doc = load(out)
        check(p.returncode == 0 and doc["settings"]["programs"]["bytes"] == nbytes
              and len(doc["settings"]["programs"]["skipped"]) == 8
              and "data" not in doc["settings"]["programs"]
              and "making" not in p.stderr and "data of the pipelines" not in p.stdout,
              f"{preset}: programs bytes {doc['settings'].get('programs')} {p.stderr[-300:]}")
    for value in ("0", "1000", "1.5M", "3k", "abc", "1T"):
        lines = check_error(t, args + ["--program-bytes", value], 2,
                            ["--program-bytes", value, "multiple of 1M"])
        check(len(lines) == 1, f"--program-bytes {value}: more than one line: {lines}")


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
    check(rows[0] == CSV_FIELDS + ["work_ns"] + CPU_CSV_FIELDS
          and [row[17] for row in rows[1:]] == ["0", "10000", "20000", "40000"],
          f"work: CSV {rows[0]} {[row[17] for row in rows[1:]]}")
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
    check_error(t, t.fast("--full", "--stage", t.stage, "--overhead", t.overhead)[2:], 2,
                ["work matrix", "memcpy"], env={"FAKE_BENCH_MEMCPY_FAIL": "1"})


def fmt_num(value):
    """The runner's MB/s: no decimals from 100 up, one from 10, else two."""
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def fmt_cpu(value):
    """The runner's CPU per GiB: three decimals below 10."""
    return f"{value:.0f}" if value >= 1000 else f"{value:.1f}" if value >= 10 else f"{value:.3f}"


# fake-bench.py's CPU per GiB (all, writers) and MB/s factor of each side of
# the api matrix: plain, the library (0.75 of the CPU), its API (the writers
# half of that again, 1.5 times the library's MB/s), the API without it.
API_SIDE_FAKE = {"baseline": (0.7, 0.3, 1.0), "shim": (0.525, 0.225, SHIM_FACTOR),
                 "api": (0.4125, 0.1125, SHIM_FACTOR * API_FACTOR),
                 "api_plain": (0.76, 0.36, API_PLAIN_FACTOR)}
API_ORDER = ("baseline", "shim", "api", "api_plain")


def api_row_patterns(r):
    """The api tables' rows of a result: MB/s, CPU per GiB, the writers'."""
    rows = []
    for value, suffix, fmt in (("mbps", "mbps", fmt_num), ("cpu_s_per_gib", "cpu_per_gib", fmt_cpu),
                               ("cpu_writers_s_per_gib", "writers_cpu_per_gib", fmt_cpu)):
        cells = [f"{r['writers']}x{r['readers']}", str(r["size"])] \
            + [fmt(r[side][value]) for side in API_ORDER] \
            + [f"{r[f'ratio{infix}_{suffix}']:.3f}" for infix, _, _ in API_RATIOS]
        rows.append(r"^ +" + r" +".join(map(re.escape, cells)) + "$")
    return rows


def api_summary(results, name):
    """The api matrix's summary lines, from the JSON's ratios."""
    heads = [f"{name}/plain", "API/plain", f"API/{name}", "API plain/plain"]
    lines = []
    for suffix, what in (("mbps", "MB/s"), ("cpu_per_gib", "CPU per GiB moved (lower is better)"),
                         ("writers_cpu_per_gib",
                          "writers' CPU per GiB moved (lower is better)")):
        parts = []
        for (infix, _, _), head in zip(API_RATIOS, heads):
            values = [r[f"ratio{infix}_{suffix}"] for r in results]
            parts.append(f"{head} geomean {geomean(values):.3f} (min {min(values):.3f}, "
                         f"max {max(values):.3f}, {len(values)} configs)")
        lines.append(f"Summary, api matrix {what}: " + "; ".join(parts))
    return lines


def check_api_results(results, reps, where, cpu=True, pressure=None):
    """The api matrix's results: configurations in order, every side's
    medians, ratios of the medians and the fake's factors."""
    check([(r["mode"], r["writers"], r["size"]) for r in results] == API_CONFIGS,
          f"{where}: configurations {[(r['mode'], r['writers'], r['size']) for r in results]}")
    for r in results:
        at = f"{where} {r['mode']} {r['writers']}x1 {r['size']}"
        check(set(r) == API_KEYS | ({"pressure_mode"} if pressure else set())
              and r["matrix"] == "api" and r["readers"] == 1 and r["pipe_size"] == 1048576
              and r["memory_pressure"] is bool(pressure) and r.get("pressure_mode") == pressure,
              f"{at}: keys {sorted(r)}")
        for side in API_ORDER:
            check_side(r[side], reps, f"{at} {side}")
            cpus, writers, factor = API_SIDE_FAKE[side]
            check(not cpu or (close(r[side]["cpu_s_per_gib"], cpus)
                              and close(r[side]["cpu_writers_s_per_gib"], writers)),
                  f"{at} {side}: CPU per GiB {r[side]['cpu_s_per_gib']}, writers "
                  f"{r[side]['cpu_writers_s_per_gib']}")
            want = (1000 + r["size"] / 1000 + r["writers"] * 10) * factor
            check(want * 0.9999 < r[side]["mbps"] < want * 1.03,
                  f"{at} {side}: {r[side]['mbps']} MB/s, not about {want:.0f}")
        for infix, num, den in API_RATIOS:
            for suffix, key in API_RATIO_OF:
                value = r[f"ratio{infix}_{suffix}"]
                if not cpu and suffix != "mbps":
                    check(value is None, f"{at}: ratio{infix}_{suffix} without CPU")
                    continue
                check(close(value, r[num][key] / r[den][key]),
                      f"{at}: ratio{infix}_{suffix} is not {num}/{den} of the medians")


def check_api(t, other_json):
    """--only api: every repetition runs plain, the library, its API and
    the API without it, with --produce copy|api and each side's
    environment; medians and ratios in the JSON, the tables, the summary
    lines, the CSV and the SVG; compare, its api sides; errors."""
    out = {k: t.path(f"api.{k}") for k in ("json", "csv", "svg")}
    log = t.path("api.log")
    lib = os.path.realpath(t.lib)
    args = ["--only", "api", "--bench", t.bench, "--lib", t.lib]
    p = t.run(args + ["--reps", "2", "--env", "PPIPE_FOO=1", "--json", out["json"],
                      "--csv", out["csv"], "--svg", out["svg"]], env={"FAKE_BENCH_LOG": log})
    check(p.returncode == 0, f"api run failed: {p.stderr.strip()[-400:]}")
    doc = load(out["json"])
    check(doc["settings"]["api"] == API_SETTINGS and "work" not in doc["settings"]
          and "overhead" not in doc["settings"], f"api: settings {doc['settings']}")
    results = doc["results"]
    check_api_results(results, 2, "api")
    for r in results:
        check(r["api"]["ppipe_version"] == "0.0.0-fake" and r["api_plain"]["ppipe_version"] is None,
              f"api: ppipe_version {r['api']['ppipe_version']!r} {r['api_plain']['ppipe_version']!r}")
    # The probes (the library's, then --produce's, plain), then per
    # repetition plain, the library, its API, the API without it.
    runs = read_log(log)
    check(len(runs) == 2 + 12 * 2 * 4, f"api: {len(runs)} runs logged")
    check("--produce" not in runs[0]["argv"] and runs[0]["preloaded"]
          and runs[1]["argv"][runs[1]["argv"].index("--produce") + 1] == "api"
          and not runs[1]["preloaded"], f"api: the probes {runs[:2]}")
    for k, run in enumerate(runs[2:]):
        (mode, w, size), side = API_CONFIGS[k // 8], API_ORDER[k % 4]
        argv = run["argv"]
        produce = argv[argv.index("--produce") + 1] if "--produce" in argv else None
        preloaded = side in ("shim", "api")
        check(argv[argv.index("--mode") + 1] == mode and argv[argv.index("-w") + 1] == str(w)
              and argv[argv.index("-s") + 1] == str(size) and argv[argv.index("-p") + 1]
              == "1048576" and argv[argv.index("-r") + 1] == "1"
              and produce == ("api" if side.startswith("api") else "copy")
              and run["preloaded"] == preloaded
              and run["env"] == ({"PPIPE_FOO": "1"} if preloaded else {})
              and ("--expect-preload" in argv) == preloaded,
              f"api: run {k} is not {mode} {w}x1 {size} {side}: {run}")
    # The tables: per mode, a legend and three tables of the four sides and
    # the four ratios; the summary lines.
    flat = re.sub(r"  +", "   ", p.stdout)
    for mode in ("threads", "procs"):
        check(f"== api {mode}: how writers hand each block to the pipe, 1 MiB pipe, no memory "
              "pressure (median of 2) ==" in p.stdout, f"api: no {mode} title")
    for text in ("  Throughput in MB/s:", "  CPU seconds per GiB moved, lower is better:",
                 "  The writers' CPU seconds per GiB moved, lower is better:"):
        check(text in p.stdout, f"api: stdout has no {text!r}")
    legend = ("every block generated by its writer (ppipe-bench --produce); plain: write() of "
              "the writer's buffer, no library; libdummy: the same write() with LD_PRELOAD (the "
              "library's transparent path); API: generated in place into ppipe_span_get() spans "
              "and committed (ppipe.h), with LD_PRELOAD; API plain: the same API program without "
              "the library (the header's buffers and write())")
    check(" ".join(p.stdout.split()).count(legend) == 2, "api: no legend under each title")
    check(flat.count("W x R   size   plain   libdummy   API   API plain   libdummy/plain   "
                     "API/plain   API/libdummy   API plain/plain") == 6, "api: table headers")
    for r in results:
        for row in api_row_patterns(r):
            check(re.search(row, p.stdout, re.M), f"api: no row /{row}/")
    for line in api_summary(results, "libdummy"):
        check(line in p.stdout.splitlines(), f"api: no summary line {line!r}")
    check(re.search(r"^Summary, libdummy/plain MB/s: api geomean ", p.stdout, re.M)
          and "note:" not in p.stdout, "api: the library's summary, no note")
    for line in ("[1/12] api threads w=1 r=1 size=65536 rep 1/2 baseline",
                 "[12/12] api procs w=5 r=1 size=1048576 rep 2/2 api_plain"):
        check(line in p.stderr, f"api: no progress line {line!r}")
    with open(out["csv"], encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    check(rows[0] == CSV_FIELDS + CPU_CSV_FIELDS + API_CSV_FIELDS and len(rows) == 13,
          f"api: CSV header {rows[0]}, {len(rows)} rows")
    for row, r in zip(rows[1:], results):
        rec = dict(zip(rows[0], row))
        flat_r = dict(r, **{f"{side}_{key}": r[side][key] for side in API_SIDES
                            for key in ("mbps", "lat_avg_ns", "lat_p99_ns", "spread_mbps",
                                        "cpu_s_per_gib", "cpu_writers_s_per_gib")})
        check(rec["matrix"] == "api" and rec["mode"] == r["mode"]
              and all(close(float(rec[k]), flat_r[k]) for k in API_CSV_FIELDS)
              and close(float(rec["ratio_mbps"]), r["ratio_mbps"]), f"api: CSV row {rec}")
    root = ET.parse(out["svg"]).getroot()
    check(len([e for e in root.iter(SVG_NS + "g") if e.get("class") == "api-row"]) == 12,
          "api: 12 SVG rows")
    texts = " ".join("".join(e.itertext()) for e in root.iter(SVG_NS + "text"))
    check("ppipe.h's spans with libdummy against plain write()" in texts
          and "API MB/s" in texts, "api: SVG table")

    # compare: B's API runs 50% faster; its api and api_plain sides.
    b_doc = json.loads(json.dumps(doc))
    for r in b_doc["results"]:
        r["api"]["mbps"] *= 1.5
    b_path = t.path("api-b.json")
    save(b_path, b_doc)
    p = t.run(["compare", out["json"], b_path, "--side", "api"])
    check(p.returncode == 0 and p.stdout.count("(+50%)") == 12 and "Only in" not in p.stdout
          and "Comparing api runs (api): A -> B" in p.stdout
          and "== api threads: writers that generate every block, 1 MiB pipe" in p.stdout,
          f"compare --side api: {p.stdout[-800:]} {p.stderr}")
    for side in ("shim", "api_plain", "ratio"):
        p = t.run(["compare", out["json"], b_path, "--side", side])
        check(p.returncode == 0 and "(+50%)" not in p.stdout and len(CELL.findall(p.stdout)) >= 12
              and "Only in" not in p.stdout, f"compare --side {side} of api runs: {p.stdout}")
    # A file with other matrices only has no api side; an api result is not
    # a result of another matrix with the same configuration.
    check_error(t, ["compare", other_json, out["json"], "--side", "api"], 2,
                ["no side 'api'", "only the api matrix"])
    p = t.run(["compare", other_json, out["json"]])
    check(p.returncode == 0 and "Only in A (" in p.stdout and "Only in B (12):" in p.stdout,
          f"compare: api results matched with another matrix's: {p.stdout[-600:]}")

    # No CPU from the bench, a library without ppipe.h's API, memory pressure.
    p = t.run(args + ["--reps", "1", "--memory-pressure", "--json", out["json"], "-q"],
              env={"FAKE_BENCH_NO_CPU": "1", "FAKE_BENCH_PPIPE_VERSION": "",
                   "FAKE_BENCH_LOG": log})
    check(p.returncode == 0, f"api run without CPU failed: {p.stderr.strip()[-400:]}")
    results = load(out["json"])["results"]
    check_api_results(results, 1, "api without CPU", cpu=False, pressure="memcg")
    check("CPU seconds per GiB" not in p.stdout and "CPU per GiB" not in p.stdout
          and "Throughput in MB/s:" in p.stdout
          and "== api procs: how writers hand each block to the pipe, 1 MiB pipe, under memory "
          "pressure (memcg) (median of 1) ==" in p.stdout
          and p.stdout.count("  note: libdummy did not answer ppipe_version(): the API column "
                             "measured the header's fallback, not libppipe's spans") == 2,
          f"api without CPU, with a library without the API: {p.stdout}")
    runs = read_log(log)[2 + 12 * 2 * 4 + 2:]
    check(len(runs) == 12 * 4 and all("--memory-pressure=memcg" in run["argv"] for run in runs),
          "api: --memory-pressure did not reach every side")

    # Errors: a ppipe-bench without --produce, a failure in each API side,
    # verification, --config.
    check_error(t, args, 2, ["the api matrix needs ppipe-bench --produce",
                             "unknown option '--produce'"], env={"FAKE_BENCH_NO_PRODUCE": "1"})
    check_error(t, args, 2, ["the api matrix needs ppipe-bench --produce", "injected"],
                env={"FAKE_BENCH_FAIL": "2"})
    # The counter: the probes are 1 and 2, the first configuration's sides 3 to 6.
    for n, side in ((3, "baseline"), (5, "api"), (6, "api_plain")):
        check_error(t, args, 1, [f"api threads w=1 r=1 size=65536 ({side})", "injected failure"],
                    env={"FAKE_BENCH_FAIL": str(n)})
    check_error(t, args + ["--verify"], 1,
                ["verification failed", "api threads w=1 r=1 size=65536", "baseline"],
                env={"FAKE_BENCH_VERIFY_FAIL": "1"})
    lines = check_error(t, args + ["--config", "a="], 2, ["--only api", "--config"])
    check(len(lines) == 1, f"--only api --config: more than one line: {lines}")
    for name in ("api", "api_plain"):
        check_error(t, args + ["--config", f"{name}=PPIPE_X=1"], 2, [f"'{name}'", "reserved"])
    # --full runs the api matrix (it fails on a ppipe-bench without --produce),
    # but not with --config (left out, said on stderr).
    full = ["--full", "--bench", t.bench, "--lib", t.lib, "--stage", t.stage,
            "--overhead", t.overhead]
    check_error(t, full, 2, ["the api matrix needs ppipe-bench --produce"],
                env={"FAKE_BENCH_NO_PRODUCE": "1"})
    p = t.run(full + ["--config", "a="], env={"FAKE_BENCH_FAIL": "1"})
    check(p.returncode == 2 and "ppipe-compare: the api matrix is left out: it does not run with "
          "--config" in p.stderr, f"--full --config: no note on the api matrix: {p.stderr}")


def overhead_log(path):
    """The runs fake-overhead.py logged."""
    return [run for run in read_log(path) if run.get("tool") == "ppipe-overhead"]


def check_overhead(t):
    """--only overhead: at least 5 repetitions in --quick and 9 in --full,
    plain and preloaded alternating; the start row's driver plain with -p
    LIB, the others with LD_PRELOAD; ratios, medians and labels in every
    output; the shell row skipped without bash; --config; --json -;
    compare; errors."""
    out = {k: t.path(f"overhead.{k}") for k in ("json", "csv", "svg")}
    log = t.path("overhead.log")
    lib = os.path.realpath(t.lib)
    args = ["--only", "overhead", "--bench", t.bench, "--overhead", t.overhead,
            "--lib", t.lib]
    p = t.run(args + ["--reps", "2", "--env", "PPIPE_FOO=1", "--json", out["json"],
                      "--csv", out["csv"], "--svg", out["svg"]],
              env={"FAKE_BENCH_LOG": log})
    check(p.returncode == 0, f"overhead run failed: {p.stderr.strip()[-400:]}")
    doc = load(out["json"])
    check(doc["settings"]["reps"] == 2 and doc["settings"]["overhead"]
          == {"reps": 5, "ratio_time": TIME_RATIO_NOTE, "skipped": {}, "empty": NO_EMPTY},
          f"overhead: settings {doc['settings']}")
    # No empty library here: said once on stderr and under the table.
    check("ppipe-compare: the overhead matrix's empty-library column is left out: "
          "no empty library configured (--empty PATH)" in p.stderr
          and "  empty library: skipped, no empty library configured (--empty PATH)"
          in p.stdout.splitlines() and "empty/plain" not in p.stdout,
          "overhead: no note on the empty library left out")
    results = doc["results"]
    check_overhead_results(results, 5, "overhead")
    check_overhead_text(p.stdout, results, "libdummy", 5)
    check("MB/s" not in p.stdout and "Max spread of MB/s" not in p.stdout,
          "overhead: throughput lines without throughput results")
    check("[7/7] overhead shell rep 5/5 shim" in p.stderr, "overhead: progress")
    # Each repetition runs plain, then the library; only the start row's
    # driver stays plain and passes the library on with -p.
    runs = overhead_log(log)
    check(len(runs) == 7 * 5 * 2, f"overhead: {len(runs)} runs logged")
    for k, run in enumerate(runs):
        label, case, size, n, _, _ = overhead_rows()[k // 10]
        preloaded = k % 2 == 1
        want = (["-p", lib] if case == "start" and preloaded else []) \
            + (["-s", str(size)] if size else []) + [case, str(n)]
        check(run["argv"] == want, f"overhead: run {k} argv {run['argv']}, not {want}")
        check(run["preloaded"] == preloaded
              and run["ld_preload"] == (lib if preloaded and case != "start" else None)
              and run["env"] == ({"PPIPE_FOO": "1"} if preloaded else {}),
              f"overhead: run {k} ({label}) has the wrong environment: {run}")
    with open(out["csv"], encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    check(rows[0] == CSV_FIELDS + OVERHEAD_CSV_FIELDS and len(rows) == 8,
          f"overhead: CSV header {rows[0]}, {len(rows)} rows")
    for row, r in zip(rows[1:], results):
        check_overhead_csv_row(dict(zip(rows[0], row)), r)
    root = ET.parse(out["svg"]).getroot()
    check_svg_overhead(root, 7)
    texts = " ".join("".join(e.itertext()) for e in root.iter(SVG_NS + "text"))
    check("quick matrix, overhead rows only, median of 5 runs per side" in texts,
          "overhead: SVG settings line")

    # --full: twice the operations, at least 9 repetitions; more if asked.
    p = t.run(args + ["--full", "--reps", "1", "-q", "--json", out["json"]])
    check(p.returncode == 0, f"--full overhead run failed: {p.stderr.strip()[-400:]}")
    doc = load(out["json"])
    check(doc["settings"]["overhead"]["reps"] == 9, f"--full: {doc['settings']}")
    check_overhead_results(doc["results"], 9, "--full overhead", full=True)

    # No bash on PATH: the shell row is left out, with a note.
    empty = t.path("empty-bin")
    os.makedirs(empty, exist_ok=True)
    p = t.run(args + ["--json", out["json"], "--csv", out["csv"]], env={"PATH": empty})
    check(p.returncode == 0, f"overhead run without bash failed: {p.stderr.strip()[-400:]}")
    doc = load(out["json"])
    check([r["case"] for r in doc["results"]]
          == ["start", "fork", "exec", "pipe", "small", "small"]
          and doc["settings"]["overhead"]["skipped"] == {"shell": "bash not found on PATH"},
          f"without bash: {[r['case'] for r in doc['results']]} {doc['settings']}")
    check("ppipe-compare: overhead row shell skipped: bash not found on PATH" in p.stderr
          and "  shell: skipped, bash not found on PATH" in p.stdout.splitlines()
          and "6 rows)" in p.stdout, "without bash: no note on the shell row")
    with open(out["csv"], encoding="utf-8", newline="") as f:
        check(len(list(csv.reader(f))) == 7, "without bash: CSV rows")
    # Nor ppipe-overhead: it cannot be found.
    check_error(t, ["--only", "overhead", "--bench", t.bench, "--lib", t.lib], 2,
                ["ppipe-overhead not found", "--overhead"], env={"PATH": empty})

    # --config: one library side per configuration, each with its ratio.
    p = t.run(args + ["--config", "a=", "--config", "b=PPIPE_FAKE_FACTOR=2",
                      "--json", out["json"], "--csv", out["csv"]], env={"FAKE_BENCH_LOG": log})
    check(p.returncode == 0, f"--config overhead run failed: {p.stderr.strip()[-400:]}")
    results = load(out["json"])["results"]
    lines = p.stdout.splitlines()
    for r, (label, _, _, _, factor, _) in zip(results, overhead_rows()):
        where = f"--config overhead {label}"
        check(set(r) == {"matrix", "case", "size", "n", "baseline", "configs"}
              and list(r["configs"]) == ["a", "b"], f"{where}: keys {sorted(r)}")
        check_time_side(r["baseline"], 5, f"{where} plain")
        for name, scale in (("a", 1.0), ("b", 2.0)):
            side = dict(r["configs"][name])
            check_time_ratio(side.pop("ratio_time"), r["baseline"], side, factor * scale,
                             f"{where} {name}")
            check_time_side(side, 5, f"{where} {name}")
            row = (rf"^ +{name} +{side['ns_per_op']:.0f} +"
                   rf"{r['configs'][name]['ratio_time']:.3f} +\d+\.\d%$")
            check(any(re.search(row, ln) for ln in lines), f"{where}: no row /{row}/")
        row = rf"^  {re.escape(label)} +{r['n']} +plain +{r['baseline']['ns_per_op']:.0f} +- "
        check(any(re.search(row, ln) for ln in lines), f"{where}: no plain row /{row}/")
    for name in ("a", "b"):
        values = [r["configs"][name]["ratio_time"] for r in results]
        check(f"Summary, {name}/plain time per operation (overhead, lower is better): "
              f"geomean {geomean(values):.3f}" in p.stdout, f"--config: no summary for {name}")
    check("time ratio config/plain, lower is better" in p.stdout
          and "row   N   config   ns/op   time ratio (lower is better)   spread"
          in re.sub(r"  +", "   ", p.stdout), "--config: overhead table header")
    with open(out["csv"], encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(out["csv"], encoding="utf-8", newline="") as f:
        check(next(csv.reader(f)) == MULTI_CSV_FIELDS + ["case", "n", "ns_per_op", "ratio_time"],
              "--config: overhead CSV header")
    check([row["config"] for row in rows] == ["baseline", "a", "b"] * 7
          and rows[0]["ratio_time"] == "" and rows[1]["case"] == "start"
          and close(float(rows[2]["ratio_time"]), results[0]["configs"]["b"]["ratio_time"]),
          f"--config: overhead CSV rows {rows[:3]}")
    runs = overhead_log(log)[70:]
    check(len(runs) == 7 * 5 * 3 and all(
        run["env"] == ({}, {}, {"PPIPE_FAKE_FACTOR": "2"})[k % 3]
        and run["preloaded"] == bool(k % 3) for k, run in enumerate(runs)),
          "--config: overhead runs are not plain, a, b in turn")

    # --json -: the JSON on stdout, the report on stderr; more repetitions
    # than the least, if asked.
    p = t.run(args + ["-q", "--json", "-", "--reps", "6"])
    check(p.returncode == 0, f"--json - failed: {p.stderr.strip()[-400:]}")
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = {}
    check(doc.get("tool") == "ppipe-compare" and len(doc.get("results", [])) == 7,
          f"--json -: stdout is not the JSON: {p.stdout[:200]!r}")
    check(doc["settings"]["overhead"]["reps"] == 6
          and all(len(r["shim"]["reps"]) == 6 for r in doc["results"]),
          f"--reps 6: {doc['settings']}")
    check("== What libdummy costs where it cannot help" in p.stderr,
          "--json -: no report on stderr")

    # compare: two overhead runs, B 10% slower with the library.
    b_doc = json.loads(json.dumps(doc))
    for r in b_doc["results"]:
        r["shim"]["ns_per_op"] *= 1.1
        r["ratio_time"] *= 1.1
    a_path, b_path = t.path("overhead-a.json"), t.path("overhead-b.json")
    for path, one in ((a_path, doc), (b_path, b_doc)):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(one, f)
    p = t.run(["compare", a_path, b_path, "--side", "ratio"])
    check(p.returncode == 0 and p.stdout.count("(+10%)") == 7
          and "time ratio A -> B (delta)" in p.stdout
          and "geomean 1.100 (worst" in p.stdout and "Only in" not in p.stdout,
          f"compare --side ratio of overhead runs: {p.stdout[-800:]} {p.stderr}")

    # Errors.
    check_error(t, ["--only", "overhead", "--memory-pressure"], 2,
                ["--only overhead", "--memory-pressure"])
    check_error(t, args[:-4] + ["--lib", t.lib, "--overhead", t.path("nope")], 2,
                ["--overhead", "nope", "not an executable"])
    # The counter: the bench's probe is 1, start plain 2, start with the library 3.
    check_error(t, args, 1, ["overhead start (shim)", "injected failure"],
                env={"FAKE_BENCH_FAIL": "3"})


def check_empty_text(stdout, results, name):
    """The two-way overhead table's empty columns and the summary line's
    empty part, against the JSON."""
    check(f"   {EMPTY_NOTE}" in stdout.splitlines()
          and "row   N   what   ns/op plain -> " + name + " (delta)   time ratio (lower "
          "is better)   empty/plain   excess" in re.sub(r"  +", "   ", stdout),
          "empty: the table's note and header")
    for r in results:
        label = f"{r['case']} {r['size']} B" if r["size"] else r["case"]
        extra = re.escape(f"{r['excess_time']:+.3f}")
        row = (rf"^  {re.escape(label)} +{r['n']} +.+ {r['baseline']['ns_per_op']:.0f} +-> +"
               rf"{r['shim']['ns_per_op']:.0f} +\([+-]\d+%\) +{r['ratio_time']:.3f} +"
               rf"{r['empty']['ratio_time']:.3f} +{extra}$")
        check(re.search(row, stdout, re.M), f"empty: no overhead row /{row}/")
    labels = [f"{r['case']} {r['size']} B" if r["size"] else r["case"] for r in results]
    floors = [r["empty"]["ratio_time"] for r in results]
    extra = [r["excess_time"] for r in results]
    top, most = floors.index(max(floors)), extra.index(max(extra))
    tail = (f"; empty/plain geomean {geomean(floors):.3f} (worst {labels[top]} "
            f"{floors[top]:.3f}); excess over empty: worst {labels[most]} "
            f"{extra[most]:+.3f}, mean {statistics.fmean(extra):+.3f}")
    check(any(ln.startswith(f"Summary, {name}/plain time per operation (overhead")
              and ln.endswith(tail) for ln in stdout.splitlines()),
          f"empty: no summary line ending {tail!r}")


def check_overhead_empty(t):
    """The empty library in the overhead matrix: plain, empty and the
    library in every repetition, the empty side plain but for its
    LD_PRELOAD (or -p for start); its ratio and the library's excess over
    it in the JSON, the text, the summary line, the CSV and the SVG; beside
    --config; the configured default, missing or there; errors."""
    out = {k: t.path(f"empty.{k}") for k in ("json", "csv", "svg")}
    log = t.path("empty.log")
    empty = t.path("libempty.so")
    open(empty, "w", encoding="ascii").close()
    lib = os.path.realpath(t.lib)
    args = ["--only", "overhead", "--bench", t.bench, "--overhead", t.overhead,
            "--lib", t.lib]
    p = t.run(args + ["--empty", empty, "--env", "PPIPE_FOO=1", "--json", out["json"],
                      "--csv", out["csv"], "--svg", out["svg"]],
              env={"FAKE_BENCH_LOG": log})
    check(p.returncode == 0, f"empty run failed: {p.stderr.strip()[-400:]}")
    doc = load(out["json"])
    check(doc["settings"]["overhead"]["empty"]
          == {"path": os.path.realpath(empty), "excess_time": EMPTY_NOTE},
          f"empty: settings {doc['settings']['overhead']}")
    results = doc["results"]
    for r, factor in zip(results, EMPTY_FACTORS):
        where = f"empty {r['case']} {r['size']}"
        check(set(r) == OVERHEAD_KEYS | {"empty", "excess_time"}, f"{where}: keys {sorted(r)}")
        side = dict(r["empty"])
        check_time_ratio(side.pop("ratio_time"), r["baseline"], side, factor, where)
        check_time_side(side, 5, where)
        check(close(r["excess_time"], r["ratio_time"] - r["empty"]["ratio_time"]),
              f"{where}: excess_time is not the ratio minus the empty library's")
    # The library's side is what it was without the empty library.
    check_overhead_results([{k: v for k, v in r.items() if k not in ("empty", "excess_time")}
                            for r in results], 5, "empty")
    check_empty_text(p.stdout, results, "libdummy")
    check("[7/7] overhead shell rep 5/5 shim" in p.stderr
          and "[1/7] overhead start rep 1/5 empty" in p.stderr
          and "left out" not in p.stderr, "empty: progress")
    # plain, empty, the library in every repetition; the empty side has no
    # PPIPE_ variable and passes its library as the library's side would.
    runs = overhead_log(log)
    check(len(runs) == 7 * 5 * 3, f"empty: {len(runs)} runs logged")
    for k, run in enumerate(runs):
        label, case, size, n, _, _ = overhead_rows()[k // 15]
        who = (None, empty, lib)[k % 3]
        want = (["-p", who] if case == "start" and who else []) \
            + (["-s", str(size)] if size else []) + [case, str(n)]
        check(run["argv"] == want and run["preloaded"] == bool(who)
              and run["ld_preload"] == (who if case != "start" else None)
              and run["env"] == ({"PPIPE_FOO": "1"} if who == lib else {}),
              f"empty: run {k} ({label}) is not {who or 'plain'}: {run}")
    with open(out["csv"], encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    check(rows[0] == CSV_FIELDS + OVERHEAD_CSV_FIELDS + EMPTY_CSV_FIELDS and len(rows) == 8,
          f"empty: CSV header {rows[0]}")
    for row, r in zip(rows[1:], results):
        rec = dict(zip(rows[0], row))
        check_overhead_csv_row(rec, r)
        check(close(float(rec["empty_ns_per_op"]), r["empty"]["ns_per_op"])
              and close(float(rec["empty_ratio_time"]), r["empty"]["ratio_time"])
              and close(float(rec["excess_time"]), r["excess_time"]), f"empty: CSV {rec}")
    root = ET.parse(out["svg"]).getroot()
    check_svg_overhead(root, 7)
    texts = " ".join("".join(e.itertext()) for e in root.iter(SVG_NS + "text"))
    check("empty/plain" in texts and f"{results[-1]['empty']['ratio_time']:.2f}x" in texts,
          "empty: SVG column")

    # --config: plain, empty, then each configuration; each its excess.
    p = t.run(args + ["--empty", empty, "--config", "b=PPIPE_FAKE_FACTOR=2",
                      "--json", out["json"], "--csv", out["csv"]], env={"FAKE_BENCH_LOG": log})
    check(p.returncode == 0, f"empty --config run failed: {p.stderr.strip()[-400:]}")
    results = load(out["json"])["results"]
    lines = p.stdout.splitlines()
    for r, factor in zip(results, EMPTY_FACTORS):
        where = f"empty --config {r['case']} {r['size']}"
        check(set(r) == {"matrix", "case", "size", "n", "baseline", "empty", "configs"},
              f"{where}: keys {sorted(r)}")
        check(factor / 1.051 < r["empty"]["ratio_time"] < factor * 1.051,
              f"{where}: empty ratio {r['empty']['ratio_time']}")
        for name in ("b",):
            side = r["configs"][name]
            check(close(side["excess_time"], side["ratio_time"] - r["empty"]["ratio_time"]),
                  f"{where} {name}: excess_time")
            extra = re.escape(f"{side['excess_time']:+.3f}")
            row = (rf"^ +{name} +{side['ns_per_op']:.0f} +{side['ratio_time']:.3f} "
                   rf"+\d+\.\d% +{extra}$")
            check(any(re.search(row, ln) for ln in lines), f"{where}: no row /{row}/")
        row = (rf"^ +empty +{r['empty']['ns_per_op']:.0f} +{r['empty']['ratio_time']:.3f} "
               r"+\d+\.\d% +-$")
        check(any(re.search(row, ln) for ln in lines), f"{where}: no empty row /{row}/")
    most = max(r["configs"]["b"]["excess_time"] for r in results)
    check(any(ln.startswith("Summary, b/plain time per operation")
              and "excess over empty: worst " in ln and f"{most:+.3f}, mean" in ln
              for ln in lines), "empty --config: no summary line")
    runs = overhead_log(log)[105:]
    check(len(runs) == 7 * 5 * 3 and all(
        run["preloaded"] == bool(k % 3)
        and (run["ld_preload"] == empty) == (k % 3 == 1 and k // 15 != 0)
        and run["env"] == ({}, {}, {"PPIPE_FAKE_FACTOR": "2"})[k % 3]
        for k, run in enumerate(runs)),
          "empty --config: the runs are not plain, empty, b in turn")
    with open(out["csv"], encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(out["csv"], encoding="utf-8", newline="") as f:
        check(next(csv.reader(f)) == MULTI_CSV_FIELDS
              + ["case", "n", "ns_per_op", "ratio_time", "excess_time"],
              "empty --config: CSV header")
    check([row["config"] for row in rows] == ["baseline", "empty", "b"] * 7
          and rows[0]["excess_time"] == rows[1]["excess_time"] == ""
          and close(float(rows[1]["ratio_time"]), results[0]["empty"]["ratio_time"])
          and close(float(rows[2]["excess_time"]), results[0]["configs"]["b"]["excess_time"]),
          f"empty --config: CSV rows {rows[:3]}")

    # The configured default: used when it is there (the third run, the
    # start row's second side, is the empty library's: it fails, named),
    # left out with a note when it is not (the third run is the library's).
    with open(t.runner, encoding="utf-8") as f:
        source = f.read()
    for name, path, side in (("configured-empty", empty, "empty"),
                             ("configured-missing", t.path("no-such-empty.so"), "shim")):
        script = t.path(name + ".py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(source.replace('EMPTY_LIB = "@EMPTY_LIB@"', f"EMPTY_LIB = {path!r}"))
        p = t.run(args, env={"FAKE_BENCH_FAIL": "3"}, script=script)
        note = f"empty-library column is left out: {path}: no such file (--empty PATH)"
        check(p.returncode == 1 and f"overhead start ({side})" in p.stderr
              and (note in p.stderr) == (side == "shim"), f"{name}: {p.stderr.strip()}")

    # Errors: a --empty that is not there; "empty" names no configuration.
    check_error(t, args + ["--empty", t.path("nope.so")], 2,
                ["--empty", "nope.so", "no such file"])
    check_error(t, args + ["--config", "empty=PPIPE_X=1"], 2, ["'empty'", "reserved"])


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
            check(close(side["ratio_cpu_per_gib"], CPU_FACTOR)
                  and close(side["ratio_cpu_per_gib"],
                            side["cpu_s_per_gib"] / base["cpu_s_per_gib"]),
                  f"{where} {name}: ratio_cpu_per_gib {side['ratio_cpu_per_gib']}")
            row = (rf" +{name} +{side['mbps']:.0f} +{side['ratio_mbps']:.3f} "
                   rf"+{side['lat_p50_ns']:.0f} +{side['lat_p99_ns']:.0f} +100% "
                   rf"+{side['cpu_s_per_gib']:.3f} +0\.750$")
            check(any(re.search(row, ln) for ln in lines),
                  f"{where} {name}: no table row /{row}/")
        row = (rf"^ +{r['size']} +plain +{base['mbps']:.0f} +- "
               rf"+{base['lat_p50_ns']:.0f} +{base['lat_p99_ns']:.0f} +100% +0\.700 +-$")
        check(any(re.search(row, ln) for ln in lines),
              f"{where}: no plain row /{row}/")
    for text in ("size   config   MB/s   ratio   p50 ns   p99 ns   in write()   CPU s/GiB   "
                 "CPU ratio (lower is better)",
                 "Summary, a/plain MB/s: small geomean",
                 "Summary, b/plain MB/s: small geomean", "rep 2/2 b",
                 "Summary, a/plain CPU per GiB moved (lower is better): small geomean 0.750",
                 "Summary, b/plain CPU per GiB moved (lower is better): small geomean 0.750"):
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
        check(next(csv.reader(f)) == MULTI_CSV_FIELDS + MULTI_CPU_CSV_FIELDS,
              "--config: CSV header")
    check([row["config"] for row in rows] == ["baseline", "a", "b"] * 3
          and close(float(rows[2]["ratio_mbps"]),
                    results[0]["configs"]["b"]["ratio_mbps"])
          and rows[0]["ratio_mbps"] == "" and rows[0]["ratio_cpu_per_gib"] == ""
          and close(float(rows[0]["cpu_s_per_gib"]), 0.7)
          and close(float(rows[2]["ratio_cpu_per_gib"]), CPU_FACTOR)
          and close(float(rows[2]["cpu_readers_s_per_gib"]), 0.4 * CPU_FACTOR),
          f"--config: CSV rows {rows[:3]}")
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
        check(re.search(rf"^ +{re.escape(cell)} +plain .* {plain} +[\d.]+ +-$", p.stdout, re.M)
              and re.search(rf"^ +b +[\d.]+ +[\d.]+ +\d+ +\d+ +{share} +[\d.]+ +0\.750$",
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


def check_bench_without_cpu(t):
    """A ppipe-bench that reports no CPU (from before it did): the run
    goes on, its CPU values are null, and the tables leave the CPU
    columns out."""
    out = {k: t.path(f"nocpu.{k}") for k in ("json", "csv")}
    p = t.run(t.fast("--json", out["json"], "--csv", out["csv"]),
              env={"FAKE_BENCH_NO_CPU": "1"})
    check(p.returncode == 0, f"a run without CPU failed: {p.stderr.strip()[-400:]}")
    results = load(out["json"])["results"]
    check(results and all(r["ratio_cpu_per_gib"] is None and all(
        r[side][key] is None and all(rep[key] is None for rep in r[side]["reps"])
        for side in ("baseline", "shim") for key in CPU_KEYS) for r in results),
          f"without CPU: {results[:1]}")
    check("CPU" not in p.stdout and CELL.search(p.stdout), f"without CPU: {p.stdout}")
    with open(out["csv"], encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    check(rows and all(row[k] == "" for row in rows for k in CPU_CSV_FIELDS),
          f"without CPU: CSV {rows[:1]}")


def fmt_share(value):
    """The runner's percentage of time in write()."""
    return f"{100 * value:.0f}%"


def fleet_doc(template, host, ratios, drop=()):
    """A saved run like template, from another host (hostname, kernel,
    cpu), its matrices' ratios set from ratios {matrix: [values]} (in
    turn over the matrix's rows), and the throughput results' CPU per GiB
    ratios from ratios["cpu"] (in turn over all of them; without it, a file
    from before CPU was measured), without the matrices in drop. Returns
    the document and {matrix: [the ratios it holds]}."""
    doc = json.loads(json.dumps(template)) if "cpu" in ratios else without_cpu(template)
    doc["host"].update(zip(("hostname", "kernel", "cpu"), host))
    doc["library"] = {"path": "/usr/local/lib/libppipe.so", "env": {}}
    doc["results"] = [r for r in doc["results"] if r["matrix"] not in drop]
    held = {}
    for r in doc["results"]:
        values = held.setdefault(r["matrix"], [])
        value = ratios[r["matrix"]][len(values) % len(ratios[r["matrix"]])]
        values.append(value)
        r["ratio_time" if r["matrix"] == "overhead" else "ratio_mbps"] = value
        if "cpu" in ratios and r["matrix"] != "overhead":
            cpus = held.setdefault("cpu", [])
            r["ratio_cpu_per_gib"] = ratios["cpu"][len(cpus) % len(ratios["cpu"])]
            cpus.append(r["ratio_cpu_per_gib"])
    return doc, held


def save(path, doc):
    """Write a JSON file."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)


def fleet_expect(docs):
    """The fleet row of saved runs of one host (the documents' results):
    geomeans of each cell's median over the files, the worst cell."""
    cells, cpus = {}, {}
    for doc in docs:
        for r in doc["results"]:
            over = r["matrix"] == "overhead"
            key = (r["matrix"], json.dumps({k: r.get(k) for k in (
                "case", "size", "mode", "writers", "readers", "hops", "pipe_size",
                "work_x", "shape")}, sort_keys=True))
            value = r["ratio_time"] if over else r["ratio_mbps"]
            cells.setdefault(key, []).append(value)
            if r.get("ratio_cpu_per_gib") is not None:
                cpus.setdefault(key, []).append(r["ratio_cpu_per_gib"])
    geo = {}
    for m in FLEET_MATRICES:
        values = [statistics.median(v) for (matrix, _), v in cells.items() if matrix == m]
        geo[m] = geomean(values) if values else None
    # CPU per GiB: over every throughput cell that has it.
    geo["cpu"] = geomean([statistics.median(v) for v in cpus.values()]) if cpus else None
    worst = max(((matrix, statistics.median(v)) for (matrix, _), v in cells.items()),
                key=lambda t: t[1] if t[0] == "overhead" else 1 / t[1])
    return geo, worst


def fleet_verdict(geo):
    """The rule of fleet --help, on the geomeans rounded as shown."""
    g = {m: round(v, 3) for m, v in geo.items() if v is not None}
    if g.get("overhead", 0) > 1.10 or any(
            g[m] < 0.95 for m in ("sweep", "sizes", "small", "pipeline", "work") if m in g):
        return "costs"
    if any(g[m] >= 1.10 for m in ("sweep", "sizes", "pipeline", "work") if m in g):
        return "gains"
    return "no gain"


def check_fleet(t, template):
    """fleet: synthetic runs of known ratios and the real ones in
    fixtures/; bad files skipped, directories read, several files of one
    host merged; table, JSON and CSV."""
    runs = t.path("runs")
    os.makedirs(runs)
    docs = {}
    # alpha gains; beta costs (small writes 0.88, the worst cell a
    # throughput one); gamma: three files merged by medians, one without
    # the overhead matrix and saved before CPU was measured, no gain;
    # delta: small writes only, no CPU. CPU per GiB: over the throughput
    # cells, medians of the files that have it.
    plan = [
        ("alpha.json", ("alpha", "6.18.0", "CPU A"),
         {"sweep": [2.0, 2.5, 1.6], "sizes": [1.5], "small": [1.0, 0.97, 0.99],
          "pipeline": [1.2, 1.3], "overhead": [1.0, 1.01, 1.02, 1.03, 1.0, 0.99, 1.06],
          "cpu": [0.8, 0.5]}, ()),
        ("beta.json", ("beta", "6.1.0-18-amd64", "CPU B"),
         {"sweep": [1.02], "sizes": [1.0], "small": [0.9, 0.85, 0.9], "pipeline": [1.0],
          "overhead": [1.05, 1.08], "cpu": [1.1]}, ()),
        ("gamma-1.json", ("gamma", "6.12.1", "CPU C"),
         {"sweep": [1.0], "sizes": [1.0], "small": [1.0], "pipeline": [1.0],
          "overhead": [1.0], "cpu": [0.9]}, ()),
        ("gamma-2.json", ("gamma", "6.12.1", "CPU C"),
         {"sweep": [1.05], "sizes": [1.02], "small": [0.96], "pipeline": [1.05],
          "overhead": [1.04], "cpu": [0.7, 0.8]}, ()),
        ("gamma-3.json", ("gamma", "6.12.1", "CPU C"),
         {"sweep": [1.3], "sizes": [1.3], "small": [1.3], "pipeline": [1.3]}, ("overhead",)),
        ("delta.json", ("delta", "5.15.0", "CPU D"), {"small": [0.99]},
         ("sweep", "sizes", "pipeline", "overhead")),
    ]
    for name, host, ratios, drop in plan:
        doc, _ = fleet_doc(template, host, ratios, drop)
        save(os.path.join(runs, name), doc)
        docs.setdefault(host[:2], []).append(doc)
    # Rows are keyed by host name and kernel.
    syn = {host[0]: host[:2] for _, host, _, _ in plan}
    with open(os.path.join(runs, "junk.json"), "w", encoding="utf-8") as f:
        f.write("not json\n")
    save(os.path.join(runs, "other-tool.json"), {"tool": "something-else", "results": []})
    with open(os.path.join(runs, "notes.txt"), "w", encoding="utf-8") as f:
        f.write("not a *.json file: not read\n")
    expected = {key: fleet_expect(ds) for key, ds in docs.items()}
    verdicts = {syn["alpha"]: "gains", syn["beta"]: "costs", syn["gamma"]: "no gain",
                syn["delta"]: "no gain"}
    for key, (geo, _) in expected.items():
        check(fleet_verdict(geo) == verdicts[key],
              f"fleet: the plan's {key} is not {verdicts[key]}: {geo}")
    check(expected[syn["beta"]][1][0] == "small"
          and expected[syn["alpha"]][1] == ("overhead", 1.06),
          f"fleet: the plan's worst cells {expected[syn['alpha']][1]} "
          f"{expected[syn['beta']][1]}")
    check(close(expected[syn["gamma"]][0]["sweep"], 1.05)
          and close(expected[syn["gamma"]][0]["overhead"], 1.02), "fleet: gamma's medians")
    check(close(expected[syn["alpha"]][0]["cpu"], math.sqrt(0.8 * 0.5))
          and close(expected[syn["beta"]][0]["cpu"], 1.1)
          and expected[syn["delta"]][0]["cpu"] is None, "fleet: the plan's CPU per GiB")

    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    real = sorted(os.path.join(fixtures, n) for n in os.listdir(fixtures)
                  if n.endswith(".json")) if os.path.isdir(fixtures) else []
    if not real:
        print("note: no fixtures/*.json; fleet runs on synthetic results only")
    for path in real:
        # Saved as the fleet would collect them: ppipe-compare --quick (or
        # --full) --json, libppipe.so, no --env, --config or pressure.
        doc = load(path)
        check(os.path.basename(doc["library"]["path"]) == "libppipe.so"
              and not doc["library"]["env"] and "configs" not in doc["library"]
              and not doc["settings"]["memory_pressure"],
              f"fleet: fixture {path} is not a plain run of libppipe.so")
        key = (doc["host"].get("hostname") or os.path.basename(path)[:-5],
               doc["host"]["kernel"])
        check(key[0] not in syn, f"fleet: fixture {path} has a synthetic host's name")
        docs.setdefault(key, []).append(doc)
    for key in docs:
        if key not in expected:
            expected[key] = fleet_expect(docs[key])
            verdicts[key] = fleet_verdict(expected[key][0])

    out = {k: t.path(f"fleet.{k}") for k in ("json", "csv")}
    missing = t.path("no-such-run.json")
    p = t.run(["fleet", runs, missing] + real + ["--json", out["json"], "--csv", out["csv"]])
    check(p.returncode == 0, f"fleet failed: {p.stderr.strip()[-400:]}")
    for name, why in (("junk.json", "not JSON"), ("other-tool.json", "tool is not"),
                      ("no-such-run.json", "No such file")):
        check(re.search(rf"^ppipe-compare fleet: \S*{name}: skipped: .*{why}", p.stderr, re.M),
              f"fleet: {name} not reported as skipped: {p.stderr}")
    check(re.search(r"gamma-3\.json: no overhead results", p.stderr)
          and re.search(r"delta\.json: no sweep, sizes, pipeline, overhead results", p.stderr)
          and "notes.txt" not in p.stderr, f"fleet: notes on missing matrices: {p.stderr}")
    n_files = len(plan) + 3 + len(real)
    check(f"ppipe-compare fleet: {n_files - 3} of {n_files} files read, "
          f"{len(expected)} rows" in p.stdout, f"fleet: header {p.stdout[:200]}")
    check("throughput ratios (sweep, sizes, small, pipeline), higher is better" in p.stdout
          and "overhead: time ratio libppipe/plain, lower is better" in p.stdout
          and "CPU/GiB: CPU seconds per GiB moved libppipe/plain over the throughput cells, "
          "lower is better" in p.stdout
          and re.search(r"^  host +kernel +cpu +run +files +sweep +sizes +small +pipeline +"
                        r"CPU/GiB +overhead +worst cell", p.stdout, re.M),
          "fleet: the ratios' senses are not labelled")
    fleet = load(out["json"])
    check(fleet["tool"] == "ppipe-compare fleet" and fleet["rule"]["gain_at"] == 1.10
          and fleet["rule"]["throughput_cost_below"] == 0.95
          and fleet["rule"]["overhead_cost_above"] == 1.10
          and len(fleet["skipped"]) == 3, f"fleet: JSON {sorted(fleet)} {fleet.get('rule')}")
    rows = {(r["hostname"], r["kernel"]): r for r in fleet["rows"]}
    check(set(rows) == set(expected) and len(fleet["rows"]) == len(expected),
          f"fleet: rows {sorted(rows)}, not {sorted(expected)}")
    check([(r["hostname"], r["kernel"]) for r in fleet["rows"]] == sorted(rows),
          "fleet: rows not sorted")
    with open(out["csv"], encoding="utf-8", newline="") as f:
        table = list(csv.reader(f))
    check(table[0] == FLEET_CSV_FIELDS and len(table) == 1 + len(expected),
          f"fleet: CSV header {table[0]}")
    csv_rows = {(row[0], row[1]): dict(zip(table[0], row)) for row in table[1:]}
    text = p.stdout.splitlines()
    for host, (geo, worst) in expected.items():
        row = rows.get(host, {})
        where = f"fleet {host}"
        check(row.get("files") and len(row["files"]) == len(docs[host])
              and row["run"] == docs[host][0]["settings"]["matrix"],
              f"{where}: files {row.get('files')} run {row.get('run')}")
        for m in FLEET_MATRICES:
            got = row["geomean"][m]
            check((got is None) == (geo[m] is None) and (got is None or close(got, geo[m])),
                  f"{where}: {m} geomean {got}, expected {geo[m]}")
            cell = csv_rows[host][f"{m}_ratio_time" if m == "overhead" else f"{m}_ratio_mbps"]
            check(cell == "" if geo[m] is None else close(float(cell), geo[m]),
                  f"{where}: CSV {m} {cell!r}")
        got = row["cpu_per_gib"]["geomean"]
        cell = csv_rows[host]["cpu_ratio_per_gib"]
        check((got is None) == (geo["cpu"] is None) and (got is None or close(got, geo["cpu"]))
              and (cell == "" if geo["cpu"] is None else close(float(cell), geo["cpu"])),
              f"{where}: CPU per GiB geomean {got} (CSV {cell!r}), expected {geo['cpu']}")
        check(row["worst"]["matrix"] == worst[0] and close(row["worst"]["ratio"], worst[1]),
              f"{where}: worst {row['worst']}, expected {worst}")
        check(row["verdict"] == verdicts[host] and csv_rows[host]["verdict"] == verdicts[host],
              f"{where}: verdict {row['verdict']}, expected {verdicts[host]} ({row['reasons']})")
        cells = [f"{geo[m]:.3f}" if geo[m] is not None else "-"
                 for m in ("sweep", "sizes", "small", "pipeline", "cpu", "overhead")]
        line = [ln for ln in text if ln.startswith(f"  {host[0]} ") and f" {host[1]} " in ln]
        check(len(line) == 1 and re.search(
            r" +".join(re.escape(c) for c in cells)
            + rf" +{re.escape(worst[0])} .*: {worst[1]:.3f} +{verdicts[host]}   ", line[0]),
              f"{where}: table row {line} lacks {cells} {worst} {verdicts[host]}")
    alpha, beta = rows[syn["alpha"]], rows[syn["beta"]]
    check(beta["worst"]["row"] == "threads w=1 r=1 size=128",
          f"fleet: beta's worst row {beta['worst']}")
    check(beta["reasons"] == ["small 0.883 < 0.95"]
          and alpha["reasons"] == ["sweep 2.000 >= 1.10", "sizes 1.500 >= 1.10",
                                   "pipeline 1.249 >= 1.10"]
          and re.search(r" costs +small 0\.883 < 0\.95$", p.stdout, re.M),
          f"fleet: reasons {beta['reasons']} {alpha['reasons']}")
    check(f"Verdicts: {list(verdicts.values()).count('gains')} gains, "
          f"{list(verdicts.values()).count('no gain')} no gain, "
          f"{list(verdicts.values()).count('costs')} costs" in p.stdout, "fleet: verdict count")
    for text_line in ("  costs    overhead above 1.10", "  gains    no cost, and sweep, sizes, "
                      "pipeline or work at least 1.10"):
        check(text_line in p.stdout, f"fleet: no rule line {text_line!r}")
    p = t.run(["fleet", "--help"])
    check(p.returncode == 0 and "below 0.95" in p.stdout and "above 1.10" in p.stdout,
          "fleet --help: no rule")

    # Other runs of a host are rows of their own: another library,
    # --env, --config, memory pressure.
    other = load(os.path.join(runs, "alpha.json"))
    other["library"] = {"path": "/opt/libppipe-next.so", "env": {"PPIPE_MODE": "uring"}}
    save(t.path("alpha-next.json"), other)
    # (overhead.json: check_overhead's --config a= --config b= run.)
    p = t.run(["fleet", os.path.join(runs, "alpha.json"), t.path("alpha-next.json"),
               t.path("overhead.json")])
    check(p.returncode == 0 and re.search(r"^  alpha .* quick +1 ", p.stdout, re.M)
          and re.search(r"^  alpha .* quick libppipe-next PPIPE_MODE=uring +1 ", p.stdout, re.M)
          and re.search(r" quick libdummy a +1 +- +- +- +- +- +1\.\d{3} ", p.stdout, re.M)
          and re.search(r" quick libdummy b +1 +- +- +- +- +- +2\.\d{3} ", p.stdout, re.M),
          f"fleet: runs of a kind: {p.stdout}")

    # --json -: the JSON on stdout, the table on stderr.
    p = t.run(["fleet", os.path.join(runs, "alpha.json"), "--json", "-"])
    try:
        one = json.loads(p.stdout)
    except ValueError:
        one = {}
    check(p.returncode == 0 and [r["hostname"] for r in one.get("rows", [])] == ["alpha"]
          and "  alpha " in p.stderr, f"fleet --json -: {p.stdout[:200]!r}")
    # A fleet table is not a run; nothing readable is an error.
    check_error(t, ["fleet", out["json"], os.path.join(runs, "junk.json")], 2,
                ["no ppipe-compare result could be read"])
    p = t.run(["fleet", out["json"]])
    check("a fleet table, not a run" in p.stderr, f"fleet: its own table: {p.stderr}")
    check_error(t, ["fleet"], 2, ["required", "FILE.json|DIR"])


PRESSURE_KEYS = {"mode", "method", "stressor", "cgroup_limit", "wall_s", "vmstat_delta",
                 "memcg_delta", "bench_stall_us", "helper", "direct_reclaim",
                 "direct_reclaim_scope"}


def check_pressure_conditions(t):
    """--memory-pressure=none,memcg,hog: each configuration under each
    condition, interleaved within every repetition (plain, then the
    library, per condition), a result per condition, and the table that
    sets them side by side with each mode's ratio over the one without."""
    out, log = t.path("conditions.json"), t.path("conditions.log")
    table = t.path("conditions.csv")
    p = t.run(t.fast("--memory-pressure=none,memcg,hog", "--filler-cpu", "20", "--reps", "2",
                     "-q", "--json", out, "--csv", table),
              env={"FAKE_BENCH_LOG": log, "FAKE_BENCH_RECLAIM": "plain"})
    check(p.returncode == 0, f"conditions run failed: {p.stderr.strip()[-400:]}")
    runs = [r for r in read_log(log) if "--mode" in r["argv"]
            and r["argv"][r["argv"].index("--mode") + 1] != "memcpy"
            and "0.01" not in r["argv"]]

    def condition(argv):
        mode = next((a.split("=", 1)[1] for a in argv if a.startswith("--memory-pressure")),
                    "none")
        return mode, "--filler-cpu" in argv

    first = [r for r in runs if r["argv"][r["argv"].index("-s") + 1] == "1"]
    order = [(condition(r["argv"]), bool(r["preloaded"])) for r in first]
    expect = [((mode, mode == "memcg"), lib) for _ in range(2)
              for mode in ("none", "memcg", "hog") for lib in (False, True)]
    check(order == expect, f"runs of one configuration, in order: {order}")
    doc = load(out)
    check(doc["settings"]["pressure_modes"] == ["none", "memcg", "hog"]
          and doc["settings"]["memory_pressure"] is True, f"settings: {doc['settings']}")
    kinds = [(r["size"], r["memory_pressure"], r.get("pressure_mode")) for r in doc["results"]]
    check(kinds == [(size, mode != "none", None if mode == "none" else mode)
                    for size in (1, 128, 4096) for mode in ("none", "memcg", "hog")],
          f"a result per configuration and condition: {kinds}")
    for r in doc["results"]:
        check(len(r["baseline"]["reps"]) == 2 and len(r["shim"]["reps"]) == 2,
              f"{r['size']} {r.get('pressure_mode')}: 2 reps per side")
        check(all((rep.get("pressure") or {}).get("mode", "none") ==
                  (r.get("pressure_mode") or "none") for rep in r["baseline"]["reps"]),
              "a rep's pressure is its result's condition")
    check("no memory pressure: small writes" in p.stdout
          and "under memory pressure (memcg): small writes" in p.stdout
          and "under memory pressure (hog): small writes" in p.stdout,
          f"a table per condition: {p.stdout}")
    m = re.search(r"Each configuration under each condition.*?\n\n(.*?)\n\n", p.stdout, re.S)
    check(m is not None, f"no side-by-side table: {p.stdout}")
    rows = m.group(1).splitlines()
    check("none: MB/s" in rows[0] and "memcg vs none" in rows[0] and "hog vs none" in rows[0],
          f"side-by-side header: {rows[0]}")
    by_size = {r["size"]: {} for r in doc["results"]}
    for r in doc["results"]:
        by_size[r["size"]][r.get("pressure_mode") or "none"] = [
            s["mbps"] / b["mbps"] for b, s in zip(r["baseline"]["reps"], r["shim"]["reps"])]
    row = next(line for line in rows if "1x1 128 B" in line)
    # Repetition by repetition: the ratio under memcg over the ratio without.
    paired = statistics.median(m / n for n, m in zip(by_size[128]["none"],
                                                     by_size[128]["memcg"]))
    want = f"{100 * (paired - 1):+.0f}%"
    check(row.split()[-2] == want, f"memcg vs none of 128 B: {row} (want {want})")
    check(rows[-1].lstrip().startswith("geomean"), f"no geomean row: {rows[-1]}")
    check("Memory pressure evidence: memcg" in p.stdout
          and "Memory pressure evidence: hog" in p.stdout, "an evidence table per mode")
    check("small (none) geomean" in p.stdout and "small (hog) geomean" in p.stdout,
          f"summary per condition: {p.stdout}")
    with open(table, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    check([(int(r["size"]), r["pressure_mode"]) for r in rows] ==
          [(size, "" if mode == "none" else mode)
           for size in (1, 128, 4096) for mode in ("none", "memcg", "hog")],
          f"CSV rows tell the conditions apart: {rows[:3]}")
    # compare keeps the conditions apart: a file against itself, all 1.00.
    p = t.run(["compare", out, out])
    check(p.returncode == 0 and "hog" in p.stdout, f"compare of a conditions file: {p.stdout}")


def check_pressure_modes(t):
    """--memory-pressure: memcg by default, hog by name, each passed to
    ppipe-bench; the evidence in the JSON and the text; the warnings about
    plain runs without direct reclaim and about helpers that take a CPU."""
    out, log = t.path("memcg.json"), t.path("memcg.log")
    p = t.run(t.fast("--memory-pressure", "--reps", "2", "-q", "--json", out),
              env={"FAKE_BENCH_LOG": log, "FAKE_BENCH_RECLAIM": "plain"})
    check(p.returncode == 0, f"memcg pressure run failed: {p.stderr.strip()[-400:]}")
    runs = [r for r in read_log(log) if "--mode" in r["argv"]
            and r["argv"][r["argv"].index("--mode") + 1] != "memcpy"
            and "0.01" not in r["argv"]]
    check(runs and all("--memory-pressure=memcg" in r["argv"] for r in runs),
          f"--memory-pressure did not reach ppipe-bench as memcg: {runs[:1]}")
    check(not any("--filler-cpu" in r["argv"] for r in runs),
          "--filler-cpu passed without being asked for")
    doc = load(out)
    check(doc["settings"]["memory_pressure"] is True
          and doc["settings"]["pressure_mode"] == "memcg", f"settings: {doc['settings']}")
    for r in doc["results"]:
        check(r["memory_pressure"] is True and r["pressure_mode"] == "memcg",
              f"result {r['size']}: pressure fields")
        for side in ("baseline", "shim"):
            for rep_ in r[side]["reps"]:
                pr = rep_["pressure"]
                check(set(pr) == PRESSURE_KEYS and pr["mode"] == "memcg",
                      f"per-rep pressure keys: {sorted(pr)}")
                check(pr["direct_reclaim"] is (side == "baseline"),
                      "FAKE_BENCH_RECLAIM=plain: reclaim in plain runs only")
    # libppipe's runs without reclaim are no reason to warn: it allocates
    # no pipe pages; the plain runs reclaimed.
    check("WARNING" not in p.stdout, f"a warning with reclaim in every plain run: {p.stdout}")
    check("under memory pressure (memcg)" in p.stdout, "the tables do not name the mode")
    check("Memory pressure evidence: memcg, cgroup-v2" in p.stdout, "no evidence table")
    # 1 s runs: the fake's 2000 us of stall and 100 limit hits.
    check(re.search(r"small threads 1x1 128 B +plain +2/2 +2000 +100 +15\.0%\n"
                    r" +libdummy +0/2 +0 +0 +15\.0%", p.stdout),
          f"evidence rows (reclaim, stall, limit hits/s, filler CPU): {p.stdout}")

    # No reclaim in the plain runs: the loud warning names them, not the library's.
    p = t.run(t.fast("--memory-pressure", "-q"), env={"FAKE_BENCH_RECLAIM": "0"})
    check(p.returncode == 0, f"pressure run failed: {p.stderr.strip()}")
    check("NO direct reclaim" in p.stdout and "in the benchmark's own tasks" in p.stdout
          and "threads w=1 r=1 size=128 memory-pressure plain (1 of 1)" in p.stdout
          and "libdummy (1 of 1)" not in p.stdout,
          f"no warning naming the plain runs without direct reclaim: {p.stdout}")
    check("WARNING: some plain runs saw no direct reclaim" in p.stdout, "no closing warning")
    check("CPU contention" not in p.stdout, "a filler within its budget was warned about")
    check(p.stderr.count("rep 1/1") == 0, "-q still printed progress")

    # A filler over HELPER_CPU_WARN is a warning too; --filler-cpu reaches ppipe-bench.
    log = t.path("filler.log")
    p = t.run(t.fast("--memory-pressure=memcg", "--filler-cpu", "60", "-q"),
              env={"FAKE_BENCH_LOG": log})
    check(p.returncode == 0, f"--filler-cpu run failed: {p.stderr.strip()}")
    check(all(r["argv"][r["argv"].index("--filler-cpu") + 1] == "60"
              for r in read_log(log) if "--memory-pressure=memcg" in r["argv"]),
          "--filler-cpu 60 did not reach ppipe-bench")
    check("CPU contention" in p.stdout and "(filler)" in p.stdout
          and "(up to 60%)" in p.stdout, f"no warning about a filler at 60%: {p.stdout}")

    # hog: the seeds' global stress-ng, by name; its CPU is warned about.
    out, log = t.path("hog.json"), t.path("hog.log")
    p = t.run(t.fast("--memory-pressure=hog", "-q", "--json", out),
              env={"FAKE_BENCH_LOG": log})
    check(p.returncode == 0, f"hog pressure run failed: {p.stderr.strip()[-400:]}")
    check(all("--memory-pressure=hog" in r["argv"] for r in read_log(log)
              if any(a.startswith("--memory-pressure") for a in r["argv"])),
          "--memory-pressure=hog did not reach ppipe-bench")
    doc = load(out)
    check(doc["settings"]["pressure_mode"] == "hog"
          and all(r["pressure_mode"] == "hog" for r in doc["results"]), "hog: pressure_mode")
    check("under memory pressure (hog)" in p.stdout and "memory-pressure=hog plain" in p.stdout
          and "(stress-ng)" in p.stdout and "pgscan_direct/s" in p.stdout,
          f"hog: labels, CPU warning, the system's scans: {p.stdout}")
    p = t.run(["fleet", out])
    check(p.returncode == 0 and " quick libdummy memory-pressure=hog " in p.stdout,
          f"fleet: the hog is a kind of run of its own: {p.stdout}")

    check_pressure_conditions(t)

    for args, words in ((["--memory-pressure=bogus"], ["--memory-pressure", "bogus"]),
                        (["--memory-pressure=memcg,memcg"], ["--memory-pressure", "twice"]),
                        (["--memory-pressure=none"], ["--memory-pressure", "no pressure mode"]),
                        (["--memory-pressure=none,bogus"], ["--memory-pressure", "bogus"]),
                        (["--memory-pressure=none,hog", "--filler-cpu", "20"],
                         ["--filler-cpu", "memcg"]),
                        (["--memory-pressure=hog", "--filler-cpu", "20"],
                         ["--filler-cpu", "memcg"]),
                        (["--filler-cpu", "20"], ["--filler-cpu", "memcg"]),
                        (["--memory-pressure", "--filler-cpu", "0"], ["--filler-cpu"]),
                        (["--memory-pressure", "--filler-cpu", "101"], ["--filler-cpu"])):
        lines = check_error(t, t.fast(*args), 2, words)
        check(len(lines) == 1, f"{args}: more than one line: {lines}")


def check_pressure_and_config(t):
    """Memory pressure modes; configured tokens instead of --bench/--lib;
    medians of 3 reps."""
    check_pressure_modes(t)
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
    if len(argv) != 5:
        sys.stderr.write("usage: test-compare.py RUNNER FAKEBENCH FAKESTAGE PRELOAD\n")
        return 1
    if not sys.platform.startswith("linux") or not os.path.exists("/bin/sh"):
        print("SKIP: needs Linux and /bin/sh")
        return 77
    runner, fake, fake_stage, preload = (os.path.abspath(a) for a in argv[1:])
    here = os.path.dirname(fake_stage)
    fakes = {"bench": fake, "stage": fake_stage,
             "overhead": os.path.join(here, "fake-overhead.py"),
             "coreutils": os.path.join(here, "fake-coreutils.py")}
    with tempfile.TemporaryDirectory(prefix="ppipe-compare-test.") as tmp:
        t = Runner(runner, fakes, preload, tmp)
        try:
            a_path, doc = check_main_run(t)
            check_compare(t, a_path, doc)
            check_errors(t, a_path)
            check_pipeline(t)
            check_work(t)
            check_ring_unknown(t)
            check_api(t, a_path)
            check_configs(t)
            check_bench_without_cpu(t)
            check_overhead(t)
            check_overhead_empty(t)
            check_fleet(t, doc)
            check_pressure_and_config(t)
        except Failure as exc:
            print(f"FAIL: {exc}")
            return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
