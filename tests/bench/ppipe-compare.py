#!/usr/bin/env python3
"""ppipe-compare: run ppipe-bench on plain pipes and under libppipe, compare.

Runs a matrix of ppipe-bench configurations twice per repetition (baseline
without LD_PRELOAD, then shim with the preload library), takes medians and
prints cover-letter shaped tables; optionally writes JSON, CSV and SVG.
The pipeline matrix runs shell pipelines of ppipe-stage programs instead,
and of real programs (dd, cat, head, sha1sum), with LD_PRELOAD in the
environment of the sh. Every throughput result carries the CPU time per
GiB moved on each side: ppipe-bench's own count of its writers and
readers, or every process of a pipeline. The overhead matrix runs
ppipe-overhead, which times everyday operations the library cannot speed
up (process start, fork, exec, a pipe's life, small writes, a shell loop):
its ratios are of time, preloaded/plain, so lower is better there, and
an empty preloaded library runs beside the library in every repetition:
the floor any preload pays, from which the library's excess is measured.
With --config, every repetition runs plain and then the library once per named
environment (engines, options), and the tables put them side by side.

'ppipe-compare compare A.json B.json' compares two saved runs;
'ppipe-compare fleet FILE.json|DIR...' folds the saved runs of many hosts
into one table with a verdict per host.
"""

import argparse
import csv
import datetime
import hashlib
import json
import math
import os
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from xml.sax.saxutils import escape

PROG = "ppipe-compare"
VERSION = "@VERSION@"
DEFAULT_LIB = "@DEFAULT_LIB@"
BENCH = "@BENCH@"
STAGE = "@STAGE@"
OVERHEAD = "@OVERHEAD@"
EMPTY_LIB = "@EMPTY_LIB@"

PIPE_SIZE = 1 << 20
# Pipelines keep the pipes sh makes: what a shell user gets (the kernel's
# default, 16 pages). The consumer reports the size it really read from.
PIPELINE_PIPE_SIZE = 65536
METRICS = ("mbps", "writes_per_s", "lat_avg_ns", "lat_p50_ns",
           "lat_p99_ns", "lat_p999_ns", "lat_max_ns")
# Recorded when the program reports it (ppipe-stage does not): None else.
SHARE_METRICS = ("write_time_share",)
# CPU seconds per GiB moved on a side: all the tasks counted, their user
# and system time, the writers' and the readers' (ppipe-bench's "cpu"; a
# pipeline's processes are counted together). Lower is better; None where
# unknown (results saved before they were measured).
CPU_METRICS = ("cpu_s_per_gib", "cpu_user_s_per_gib", "cpu_sys_s_per_gib",
               "cpu_writers_s_per_gib", "cpu_readers_s_per_gib")
OPTIONAL_METRICS = SHARE_METRICS + CPU_METRICS
CPU_RATIO_NOTE = ("libppipe/plain CPU seconds per GiB moved: below 1 = "
                  "less CPU, lower is better")
GIB = 1 << 30
SIDES = ("baseline", "shim")
MATRICES = ("sweep", "sizes", "small", "pipeline", "work", "overhead")
ONLY_MATRIX = {"threads": "sweep", "procs": "sizes", "small": "small",
               "pipeline": "pipeline", "work": "work", "overhead": "overhead"}
# The work matrix: producer work before each write, in multiples of the
# time one thread takes to copy a write (measured by ppipe-bench --mode
# memcpy at the start of the run).
WORK_SIZE = 65536
WORK_MULTIPLES = (0, 1, 2, 4)
# --full runs pipelines shorter than the rest: 8 configurations x 5 reps x 2
# sides at 5 s would add more than half an hour. The pipelines of real
# programs move a fixed amount per run: 1 GiB in --full, a quarter of it in
# --quick, which keeps a --quick run's length about where it was.
PRESETS = {"quick": {"duration": 1.0, "pipeline_duration": 1.0, "reps": 3,
                     "program_bytes": 256 << 20},
           "full": {"duration": 5.0, "pipeline_duration": 2.0, "reps": 5,
                    "program_bytes": 1 << 30}}
# The pipeline matrix's pipelines of real programs, run by sh with
# LD_PRELOAD in its environment, so every stage runs the library: (shape,
# pipes, bytes per write() of the first stage where the command fixes it,
# the command). {mib}, {blocks} (of 64 KiB) and {bytes} are the amount per
# run. Each run is checked: every dd reports all the bytes, sha1sum the
# digest of that many zeros; a sink that writes to /dev/null is counted by
# a check run before the timed ones, with "| wc -c" in its place.
PROGRAM_PIPELINES = (
    ("dd | dd", 1, 1048576,
     "dd if=/dev/zero bs=1M count={mib} | dd of=/dev/null bs=1M"),
    ("dd | cat", 1, 65536,
     "dd if=/dev/zero bs=64k count={blocks} | cat > /dev/null"),
    ("dd | cat | cat", 2, 1048576,
     "dd if=/dev/zero bs=1M count={mib} | cat | cat > /dev/null"),
    ("head | sha1sum", 1, None, "head -c {bytes} /dev/zero | sha1sum"),
)
# A sink whose output is thrown away, and what counts it in a check run.
NULL_SINK = " > /dev/null"
COUNT_SINK = " | wc -c"
# The overhead matrix: ppipe-overhead's cases as (case, -s size or None,
# operations per run in --quick; --full doubles them). A run takes a
# fraction of a second, so it is noisy: the matrix runs at least
# OVERHEAD_MIN_REPS repetitions whatever --reps says.
OVERHEAD_CASES = (("start", None, 300), ("fork", None, 2000),
                  ("exec", None, 200), ("pipe", None, 100000),
                  ("small", 1, 300000), ("small", 128, 300000),
                  ("shell", None, 100))
OVERHEAD_FULL_SCALE = 2
OVERHEAD_MIN_REPS = {"quick": 5, "full": 9}
OVERHEAD_WHAT = {
    "start": "spawn /bin/true, library in child only",
    "fork": "fork + _exit + wait",
    "exec": "fork + exec /bin/true + wait",
    "pipe": "pipe, 64 B write + read, close",
    "shell": "bash: echo | cat | wc -c",
}
# What the overhead matrix's ratio means, wherever it is written.
TIME_RATIO_NOTE = ("preloaded/plain time per operation: 1.00 = free, "
                   "above 1 = costs, lower is better")
# The overhead matrix's empty column, and what the library's excess is.
EMPTY_NOTE = ("empty: a preloaded library with nothing in it, the floor any "
              "preload pays; excess: the library's time ratio minus the "
              "empty library's")
# --memory-pressure=MODE (ppipe-bench's names); the first is the default.
PRESSURE_MODES = ("memcg", "hog")
# In a list of conditions (--memory-pressure=none,memcg): no pressure.
NO_PRESSURE = "none"
# A helper that takes more than this share of one CPU makes a pressure run
# measure CPU contention as well: the report says so.
HELPER_CPU_WARN = 0.5
CSV_FIELDS = ("matrix", "mode", "writers", "readers", "size", "pipe_size",
              "memory_pressure", "baseline_mbps", "shim_mbps", "ratio_mbps",
              "baseline_lat_avg_ns", "shim_lat_avg_ns", "baseline_lat_p99_ns",
              "shim_lat_p99_ns", "baseline_spread_mbps", "shim_spread_mbps",
              "hops")
RESULT_KEYS = ("matrix", "mode", "writers", "readers", "size", "pipe_size",
               "memory_pressure", "baseline")
# A result holds these, or "configs" (a run with --config).
TWO_WAY_KEYS = ("shim", "ratio_mbps")
COMPARED = ("mbps", "lat_avg_ns", "lat_p99_ns")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
CONFIG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,31}\Z")
# The plain side's names (JSON, text), the two-way run's library side and
# the overhead matrix's empty library.
RESERVED_CONFIGS = ("baseline", "plain", "shim", "empty")
# One long-table row per configuration and side, with --config.
MULTI_CSV_FIELDS = ("matrix", "mode", "writers", "readers", "size",
                    "pipe_size", "memory_pressure", "hops", "work_ns",
                    "config", "mbps", "ratio_mbps", "lat_avg_ns",
                    "lat_p50_ns", "lat_p99_ns", "spread_mbps",
                    "write_time_share")
# The overhead matrix's columns, after the others when it ran.
OVERHEAD_CSV_FIELDS = ("case", "n", "baseline_ns_per_op", "shim_ns_per_op",
                       "ratio_time")
MULTI_OVERHEAD_CSV_FIELDS = ("case", "n", "ns_per_op", "ratio_time")
# CPU per GiB moved, after every other column (whose places stay), when a
# throughput matrix ran.
CPU_CSV_FIELDS = (("baseline_cpu_s_per_gib", "shim_cpu_s_per_gib",
                   "ratio_cpu_per_gib")
                  + tuple(f"{side}_{key}" for key in CPU_METRICS[1:]
                          for side in SIDES))
MULTI_CPU_CSV_FIELDS = (CPU_METRICS[0], "ratio_cpu_per_gib") + CPU_METRICS[1:]
# The pipelines of real programs, last, when they ran.
PROGRAM_CSV_FIELDS = ("shape", "command", "bytes", "baseline_wall_s",
                      "shim_wall_s")
MULTI_PROGRAM_CSV_FIELDS = ("shape", "command", "bytes", "wall_s")
# ...and the empty library's, when it ran beside the library.
EMPTY_CSV_FIELDS = ("empty_ns_per_op", "empty_ratio_time", "excess_time")
MULTI_EMPTY_CSV_FIELDS = ("excess_time",)

# The fleet table's matrices: throughput ratios (libppipe/plain MB/s,
# higher is better) and the overhead matrix's time ratio (lower is
# better). work shows only when some run has it (--full).
FLEET_THROUGHPUT = ("sweep", "sizes", "small", "pipeline", "work")
FLEET_MATRICES = FLEET_THROUGHPUT + ("overhead",)
# The verdict (fleet --help; tests/bench/README.md, "The verdict").
# Where libppipe is meant to help: large writes.
FLEET_GAIN_MATRICES = ("sweep", "sizes", "pipeline", "work")
GAIN_AT = 1.10
THROUGHPUT_COST_BELOW = 0.95
OVERHEAD_COST_ABOVE = 1.10
FLEET_CSV_FIELDS = (("hostname", "kernel", "cpu", "run", "files")
                    + tuple(f"{m}_ratio_mbps" for m in FLEET_THROUGHPUT)
                    + ("overhead_ratio_time", "worst_matrix", "worst_row",
                       "worst_ratio", "verdict", "cpu_ratio_per_gib"))
FLEET_RULE = """\
Rows: one per host, kernel, CPU and kind of run (preset, library if not
libppipe.so, --env, --config side, memory pressure). Several files of one
row are merged: each cell's median ratio over the files, then the
geometric means per matrix.

Verdict, from a row's geometric means as shown (3 decimals):
  costs    overhead above {over:.2f} (what libppipe cannot speed up takes
           more than {percent}% longer), or a throughput matrix (sweep,
           sizes, small, pipeline, work) below {low:.2f}
  gains    no cost, and sweep, sizes, pipeline or work at least {gain:.2f}
  no gain  neither
A missing matrix (-) counts neither way. The worst cell is the row's
largest slowdown: 1/ratio for throughput, the ratio for overhead time.
CPU/GiB, the geometric mean over the throughput cells of libppipe/plain
CPU seconds per GiB moved (lower is better), is shown, not judged.
""".format(over=OVERHEAD_COST_ABOVE, low=THROUGHPUT_COST_BELOW, gain=GAIN_AT,
           percent=round(OVERHEAD_COST_ABOVE * 100) - 100)


class Fatal(Exception):
    """A one-line error: message and exit status."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are a single line on stderr."""

    def error(self, message):
        sys.stderr.write(f"{PROG}: {message} (see --help)\n")
        sys.exit(2)


def configured(value):
    """Return a configure_file() value, or "" if it was never substituted."""
    if len(value) > 1 and value.startswith("@") and value.endswith("@"):
        return ""
    return value


def version():
    """The project version, or 'unconfigured' when run from the source."""
    return configured(VERSION) or "unconfigured"


def positive_int(text):
    """argparse type: integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= 1, not {text!r}")
    return value


def positive_float(text):
    """argparse type: finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"must be a number > 0, not {text!r}")
    return value


def percent(text):
    """argparse type: integer percentage from 1 to 100."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 100:
        raise argparse.ArgumentTypeError(
            f"must be a percentage from 1 to 100, not {text!r}")
    return value


def mib_multiple(text):
    """argparse type: a byte count with an optional binary K, M or G
    suffix, a positive multiple of 1 MiB (dd's blocks are 1 MiB)."""
    match = re.fullmatch(r"([0-9]+)([kKmMgG]?)", text.strip())
    value = int(match.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[
        match.group(2).lower()] if match else 0
    if value < 1 << 20 or value % (1 << 20):
        raise argparse.ArgumentTypeError(
            f"must be a positive multiple of 1M, not {text!r}")
    return value


def cpu_pin(text):
    """argparse type: 'WCPUS:RCPUS', each a cpu list such as 0 or 0,2-3."""
    if not re.fullmatch(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*:"
                        r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*", text):
        raise argparse.ArgumentTypeError(
            f"must look like 0:1 or 0,1:2-3, not {text!r}")
    return text


def pressure_conditions(text):
    """--memory-pressure's value: one mode, or a list of conditions (modes
    and "none"), each at most once, at least one of them a mode."""
    names = text.split(",")
    for name in names:
        if name not in PRESSURE_MODES + (NO_PRESSURE,):
            raise argparse.ArgumentTypeError(
                f"'{name}' is not one of {', '.join(PRESSURE_MODES)} "
                f"(or {NO_PRESSURE} in a list)")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"'{text}' names a condition twice")
    if all(name == NO_PRESSURE for name in names):
        raise argparse.ArgumentTypeError(
            f"'{text}' has no pressure mode: leave the option out for none")
    return text


def run_parser():
    """Parser for the default (benchmark) command."""
    p = Parser(prog=PROG, description="Compare ppipe-bench on plain pipes "
               "and with the libppipe preload library. "
               f"Also: '{PROG} compare A.json B.json [--side ...]' and "
               f"'{PROG} fleet FILE.json|DIR...' (see their --help).")
    preset = p.add_mutually_exclusive_group()
    preset.add_argument("--quick", dest="preset", action="store_const",
                        const="quick", help="quick matrix, 1 s x 3 (default)")
    preset.add_argument("--full", dest="preset", action="store_const",
                        const="full", help="full matrix, 5 s x 5")
    p.set_defaults(preset="quick")
    p.add_argument("--lib", metavar="PATH",
                   help="preload library (default: the installed libppipe)")
    p.add_argument("--env", default="", metavar="'NAME=VALUE ...'",
                   help="extra environment for shim runs, "
                   "e.g. 'PPIPE_X=1 PPIPE_Y=2'")
    p.add_argument("--config", action="append", default=[],
                   metavar="NAME=VAR=VALUE[,VAR=VALUE...]",
                   help="instead of one library side, one per --config: the "
                   "library with these variables (after --env), e.g. "
                   "uring=PPIPE_MODE=uring; repeat to compare several")
    p.add_argument("--reps", type=positive_int, metavar="N",
                   help="repetitions per side (the overhead matrix runs at "
                   f"least {OVERHEAD_MIN_REPS['quick']} in --quick, "
                   f"{OVERHEAD_MIN_REPS['full']} in --full)")
    p.add_argument("--duration", type=positive_float, metavar="S",
                   help="seconds per run (pipelines of ppipe-stage too)")
    p.add_argument("--program-bytes", type=mib_multiple, metavar="SIZE",
                   help="bytes per run of the pipelines of real programs, "
                   "a multiple of 1M (--quick: 256M, --full: 1G)")
    p.add_argument("--pin", type=cpu_pin, metavar="WCPUS:RCPUS",
                   help="pin writers and readers, e.g. 0:1 (ppipe-bench "
                   "--cpus-writers/--cpus-readers)")
    p.add_argument("--memory-pressure", nargs="?", const="memcg",
                   type=pressure_conditions, metavar="MODE[,MODE...]",
                   help="run every configuration under memory pressure: "
                   "memcg (the default) in a memory cgroup a page-cache "
                   "filler of bounded CPU keeps full; hog: the kernel "
                   "series' global stress-ng --vm (ppipe-bench "
                   "--memory-pressure=MODE). A list such as none,memcg,hog "
                   "runs each configuration under each condition, "
                   "interleaved in every repetition, and compares them")
    p.add_argument("--filler-cpu", type=percent, metavar="PCT",
                   help="memcg pressure: the filler's CPU budget in percent "
                   "of one CPU (ppipe-bench's default: 15)")
    p.add_argument("--verify", action="store_true",
                   help="verify the data read (ppipe-bench --verify)")
    p.add_argument("--json", metavar="FILE",
                   help="write results as JSON; '-' writes them to stdout "
                   "and the text report to stderr")
    p.add_argument("--csv", metavar="FILE", help="write results as CSV")
    p.add_argument("--svg", metavar="FILE", help="write an SVG report")
    p.add_argument("--bench", metavar="PATH", help="ppipe-bench binary")
    p.add_argument("--stage", metavar="PATH",
                   help="ppipe-stage binary (the pipeline matrix)")
    p.add_argument("--overhead", metavar="PATH",
                   help="ppipe-overhead binary (the overhead matrix)")
    p.add_argument("--empty", metavar="PATH",
                   help="an empty preload library, run beside the library "
                   "in the overhead matrix as the floor any preload pays "
                   "(default: the configured one; left out with a note "
                   "when there is none)")
    p.add_argument("--only", choices=sorted(ONLY_MATRIX),
                   help="run only one matrix (threads=sweep, procs=sizes, "
                   "pipeline: sh pipelines of exec'd programs, work: "
                   "producer work between writes, in --full too, overhead: "
                   "what the library costs process start, fork, exec, "
                   "pipes, small writes and a shell loop, as a time ratio, "
                   "lower is better)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress on stderr")
    p.add_argument("--version", action="version",
                   version=f"{PROG} {version()}")
    return p


def compare_parser():
    """Parser for the 'compare' command."""
    p = Parser(prog=f"{PROG} compare",
               description="Compare two saved --json results, A -> B.")
    p.add_argument("a", metavar="A.json")
    p.add_argument("b", metavar="B.json")
    p.add_argument("--side", default="shim",
                   help="what to compare: shim, baseline, ratio, or the "
                   "name of a --config of both runs (default: shim)")
    return p


# ---------------------------------------------------------------- setup


def parse_env(parser, text):
    """Parse --env into an ordered dict of NAME -> VALUE."""
    try:
        items = shlex.split(text)
    except ValueError as exc:
        parser.error(f"--env: {exc}")
    env = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not ENV_NAME.match(name):
            parser.error(f"--env: {item!r} is not NAME=VALUE")
        if name == "LD_PRELOAD":
            parser.error("--env: LD_PRELOAD is set from --lib")
        env[name] = value
    return env


def parse_configs(parser, texts):
    """Parse the --config options into [(NAME, {VAR: VALUE})], in order.

    A comma starts the next variable only where VAR= follows it, so that
    values may hold commas (PPIPE_FDS=1,2).
    """
    configs = []
    for text in texts:
        name, sep, rest = text.partition("=")
        if not sep or not CONFIG_NAME.match(name):
            parser.error(f"--config: {text!r} is not NAME=VAR=VALUE[,...] "
                         "(NAME: letters, digits, . _ + -)")
        if name in RESERVED_CONFIGS:
            parser.error(f"--config: the name {name!r} is reserved, "
                         "choose another")
        if any(name == other for other, _ in configs):
            parser.error(f"--config: {name!r} is given twice")
        env = {}
        for item in re.split(r",(?=[A-Za-z_][A-Za-z0-9_]*=)", rest) \
                if rest else []:
            var, sep, value = item.partition("=")
            if not sep or not ENV_NAME.match(var):
                parser.error(f"--config {name}: {item!r} is not VAR=VALUE")
            if var == "LD_PRELOAD":
                parser.error(f"--config {name}: LD_PRELOAD is set from --lib")
            env[var] = value
        configs.append((name, env))
    return configs


def resolve_lib(arg):
    """Absolute, symlink-free path of the preload library."""
    path = arg if arg is not None else configured(DEFAULT_LIB)
    if not path:
        raise Fatal(f"{PROG}: no preload library configured: use --lib PATH",
                    2)
    if not os.path.isfile(path):
        where = "--lib" if arg is not None else "default library"
        raise Fatal(f"{PROG}: {where} {path}: no such file", 2)
    return os.path.realpath(path)


def is_executable(path):
    """True if path is an executable regular file."""
    return os.path.isfile(path) and os.access(path, os.X_OK)


def resolve_program(arg, option, name, configured_path):
    """Path of a harness executable: the option's, the configured one, the
    one beside this script, or the one on PATH."""
    if arg is not None:
        if not is_executable(arg):
            raise Fatal(f"{PROG}: {option} {arg}: not an executable file", 2)
        return os.path.abspath(arg)
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [configured(configured_path), os.path.join(here, name),
                  shutil.which(name)]
    for path in candidates:
        if path and is_executable(path):
            return path
    raise Fatal(f"{PROG}: {name} not found: use {option} PATH", 2)


def resolve_bench(arg):
    """Path of the ppipe-bench executable."""
    return resolve_program(arg, "--bench", "ppipe-bench", BENCH)


def resolve_stage(arg):
    """Path of the ppipe-stage executable, and a shell to run pipelines."""
    if not shutil.which("sh"):
        raise Fatal(f"{PROG}: the pipeline matrix needs sh, which is not on "
                    "PATH", 3)
    return resolve_program(arg, "--stage", "ppipe-stage", STAGE)


def resolve_overhead(arg):
    """Path of the ppipe-overhead executable."""
    return resolve_program(arg, "--overhead", "ppipe-overhead", OVERHEAD)


def resolve_empty(arg):
    """The overhead matrix's empty library: (absolute path, None), or
    (None, why it is left out) when none is configured or the configured
    one is missing. A --empty that names no file is an error."""
    if arg is not None:
        if not os.path.isfile(arg):
            raise Fatal(f"{PROG}: --empty {arg}: no such file", 2)
        return os.path.realpath(arg), None
    path = configured(EMPTY_LIB)
    if not path:
        return None, "no empty library configured (--empty PATH)"
    if not os.path.isfile(path):
        return None, f"{path}: no such file (--empty PATH)"
    return os.path.realpath(path), None


def check_output(option, path):
    """Fail early if an output file's directory does not exist ('-' is
    stdout)."""
    if path is None or path == "-":
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise Fatal(f"{PROG}: {option} {path}: directory {folder} "
                    "is not writable", 2)


def program_configs(nbytes):
    """The pipelines of real programs, each moving nbytes per run."""
    amounts = {"mib": nbytes >> 20, "blocks": nbytes >> 16, "bytes": nbytes}
    # sh's pipes: the kernel's default size, 16 pages.
    pipe = 16 * os.sysconf("SC_PAGE_SIZE")
    return [{"matrix": "pipeline", "mode": "programs", "writers": 1,
             "readers": 1, "hops": hops, "size": size, "pipe_size": pipe,
             "shape": shape, "command": command.format(**amounts),
             "bytes": nbytes}
            for shape, hops, size, command in PROGRAM_PIPELINES]


def is_program(result):
    """True for a configuration or result of a pipeline of real programs."""
    return result.get("mode") == "programs"


def build_matrix(preset, only, memory_pressure=False, program_bytes=None):
    """List of configurations (dicts) for the preset, optionally filtered.

    Pipelines and the overhead matrix have no memory pressure setup
    (ppipe-bench makes it for itself): under --memory-pressure they are
    left out, or refused when they are all that was asked for.
    """
    full = preset == "full"

    def cfg(matrix, mode, w, r, size):
        return {"matrix": matrix, "mode": mode, "writers": w, "readers": r,
                "size": size, "pipe_size": PIPE_SIZE}

    sweep = [cfg("sweep", "threads", w, r, 65536)
             for w in (1, 2, 5) for r in (1, 5, 10)]
    if full:
        sweep += [cfg("sweep", "threads", 1, 1, s) for s in (16384, 32678)]
    sizes = (4096, 32678, 65536, 131072, 262144, 524288, 1048576) if full \
        else (4096, 32678, 65536, 1048576)
    # work_ns follows from work_x once the copy time is known (set_work).
    work = [dict(cfg("work", "threads", 1, 1, WORK_SIZE), work_x=x)
            for x in WORK_MULTIPLES]
    small_modes = ("threads", "procs") if full else ("threads",)
    pipe_sizes = (16384, 65536, 262144, 1048576) if full else (65536, 1048576)
    matrices = {
        "sweep": sweep,
        "sizes": [cfg("sizes", "procs", 1, 1, s) for s in sizes],
        "small": [cfg("small", m, 1, 1, s)
                  for m in small_modes for s in (1, 128, 4096)],
        "pipeline": [{"matrix": "pipeline", "mode": "sh", "writers": 1,
                      "readers": 1, "hops": h, "size": s,
                      "pipe_size": PIPELINE_PIPE_SIZE}
                     for h in (1, 2) for s in pipe_sizes]
        + program_configs(program_bytes or PRESETS[preset]["program_bytes"]),
        "work": work,
        "overhead": [{"matrix": "overhead", "case": case, "size": size,
                      "n": n * (OVERHEAD_FULL_SCALE if full else 1)}
                     for case, size, n in OVERHEAD_CASES],
    }
    if only:
        wanted = [ONLY_MATRIX[only]]
    else:
        wanted = [m for m in MATRICES if full or m != "work"]
    if memory_pressure and "pipeline" in wanted:
        if only:
            raise Fatal(f"{PROG}: --only pipeline: pipelines do not run under "
                        "--memory-pressure", 2)
        wanted.remove("pipeline")
    if memory_pressure and "overhead" in wanted:
        if only:
            raise Fatal(f"{PROG}: --only overhead: the overhead matrix does "
                        "not run under --memory-pressure", 2)
        wanted.remove("overhead")
    return [c for m in wanted for c in matrices[m]]


def program_stages(c, check=False):
    """The programs a pipeline of real programs runs (its check run's
    counter too, if it has one)."""
    command = check_command(c) if check else c["command"]
    return [stage.split()[0] for stage in command.split("|")]


def check_command(c):
    """The command of a pipeline of real programs' check run: a sink that
    throws its output away passes it to wc -c instead; None when the
    pipeline counts for itself (dd's statistics, sha1sum's digest)."""
    if not c["command"].endswith(NULL_SINK):
        return None
    return c["command"][:-len(NULL_SINK)] + COUNT_SINK


def program_skips(configs, env):
    """Leave out the pipelines of real programs whose programs are not on
    PATH. Returns (configs, {shape: why})."""
    path = env.get("PATH", os.defpath)
    skipped = {}
    for c in configs:
        if not is_program(c):
            continue
        names = program_stages(c) + (program_stages(c, True)[-1:]
                                     if check_command(c) else [])
        missing = [n for n in dict.fromkeys(names)
                   if not shutil.which(n, path=path)]
        if missing:
            skipped[c["shape"]] = f"{', '.join(missing)} not found on PATH"
    kept = [c for c in configs
            if not is_program(c) or c["shape"] not in skipped]
    return kept, skipped


def overhead_skips(configs, env):
    """Leave out the overhead rows this machine cannot run: the shell row
    without bash on PATH. Returns (configs, {case: why})."""
    skipped = {}
    if not shutil.which("bash", path=env.get("PATH", os.defpath)):
        skipped["shell"] = "bash not found on PATH"
    kept = [c for c in configs
            if c["matrix"] != "overhead" or c["case"] not in skipped]
    return kept, skipped


def is_overhead(result):
    """True for a configuration or result of the overhead matrix."""
    return result.get("matrix") == "overhead"


def split_overhead(results):
    """(throughput results, overhead results), each in order."""
    return ([r for r in results if not is_overhead(r)],
            [r for r in results if is_overhead(r)])


def child_envs(lib, extra, configs=()):
    """Environments of the sides, in the order a repetition runs them:
    baseline, then shim or, with --config, every configuration."""
    base = {k: v for k, v in os.environ.items()
            if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}
    envs = {"baseline": base}
    for name, env in configs or [("shim", {})]:
        side = dict(base)
        side.update(extra)
        side.update(env)
        side["LD_PRELOAD"] = lib
        envs[name] = side
    return envs


def lib_sides(envs):
    """The sides that run with the library, in order."""
    return [side for side in envs if side != "baseline"]


def is_multi(envs):
    """True when --config named the library's sides (not just shim)."""
    return lib_sides(envs) != ["shim"]


def side_of(result, side):
    """One side's medians in a result, two-way or --config shaped (the
    overhead matrix's empty library is a side of its own)."""
    if side in SIDES or side == "empty":
        return result[side]
    return result["configs"][side]


def result_sides(result):
    """The sides a result holds, baseline first."""
    return ["baseline"] + (list(result["configs"]) if "configs" in result
                           else ["shim"])


# ---------------------------------------------------------------- running


def hops_label(hops):
    """'1 hop', '2 hops'."""
    return f"{hops} hop" + ("s" if hops != 1 else "")


def overhead_label(c):
    """An overhead row's name: 'fork', 'small 128 B'."""
    if c.get("size") is not None:
        return f"{c['case']} {c['size']} B"
    return c["case"]


def label(c):
    """Short human name of a configuration."""
    if is_overhead(c):
        return overhead_label(c)
    if is_program(c):
        return f"programs {c['shape']}"
    if c["matrix"] == "pipeline":
        text = f"{c['mode']} {hops_label(c['hops'])} size={c['size']}"
        if c["pipe_size"] != PIPELINE_PIPE_SIZE:
            text += f" pipe={c['pipe_size']}"
        return text
    text = (f"{c['mode']} w={c['writers']} r={c['readers']} "
            f"size={c['size']}")
    if c["pipe_size"] != PIPE_SIZE:
        text += f" pipe={c['pipe_size']}"
    if "work_ns" in c:
        text += f" work={c['work_ns']}"
    if c.get("memory_pressure"):
        text += " memory-pressure"
        if c.get("pressure_mode") not in (None, PRESSURE_MODES[0]):
            text += f"={c['pressure_mode']}"
    return text


def stderr_line(text):
    """One line from a child's stderr: its first dynamic-loader complaint
    (if any) and its first own line, joined."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    loader = [line for line in lines if "ld.so" in line]
    own = [line for line in lines if "ld.so" not in line]
    return " / ".join(loader[:1] + own[:1])


def bench_command(bench, c, duration, opts, lib):
    """argv for one ppipe-bench run (lib is None for baseline)."""
    cmd = [bench, "--mode", c["mode"], "-w", str(c["writers"]),
           "-r", str(c["readers"]), "-s", str(c["size"]),
           "-p", str(c["pipe_size"]), "-d", f"{duration:g}"]
    if c.get("work_ns"):
        cmd += ["--work", str(c["work_ns"])]
    if opts.get("verify"):
        cmd.append("--verify")
    if opts.get("memory_pressure"):
        cmd.append(f"--memory-pressure={opts.get('pressure_mode') or 'memcg'}")
        if opts.get("filler_cpu") and opts.get("pressure_mode") == "memcg":
            cmd += ["--filler-cpu", str(opts["filler_cpu"])]
    if opts.get("pin"):
        wcpus, rcpus = opts["pin"].split(":")
        cmd += ["--cpus-writers", wcpus, "--cpus-readers", rcpus]
    if lib is not None:
        cmd += ["--expect-preload", lib]
    return cmd + ["--json"]


def pipeline_command(stage, c, amount, opts, lib):
    """argv of sh -c running one pipeline: produce [| relay] | consume.

    amount is the producer's ["-d", SECONDS] or ["-b", BYTES]; lib is None
    for baseline, else every stage checks that it really runs with it.
    Pinned, the producer takes the writers' cpus, relays and the consumer
    the readers'.
    """
    wcpus = rcpus = None
    if opts.get("pin"):
        wcpus, rcpus = opts["pin"].split(":")
    expect = ["--expect-preload", lib] if lib is not None else []

    def one(mode, extra, cpus):
        argv = [stage, mode, "-s", str(c["size"])] + extra + expect
        if cpus:
            argv += ["--cpus", cpus]
        return " ".join(shlex.quote(a) for a in argv)

    stages = [one("produce", list(amount), wcpus)]
    stages += [one("relay", [], rcpus)] * (c["hops"] - 1)
    stages.append(one("consume", [], rcpus))
    return ["sh", "-c", " | ".join(stages)]


def overhead_command(program, c, lib):
    """argv for one ppipe-overhead run. lib is None for plain; the start
    row passes it to the driver's children with -p (the driver itself
    runs plain on both sides), the others run the driver with LD_PRELOAD
    in its environment (overhead_env)."""
    cmd = [program]
    if c["case"] == "start" and lib is not None:
        cmd += ["-p", lib]
    if c.get("size") is not None:
        cmd += ["-s", str(c["size"])]
    return cmd + [c["case"], str(c["n"])]


def overhead_env(c, env):
    """The environment of a ppipe-overhead run on a side: the side's, but
    the start row's driver without LD_PRELOAD (its children get the
    library by -p, and the side's other variables by inheritance)."""
    if c["case"] != "start":
        return env
    return {k: v for k, v in env.items() if k != "LD_PRELOAD"}


def end_group(proc, sig):
    """Send sig to the process group of proc (which leads it)."""
    try:
        os.killpg(proc.pid, sig)
    except OSError:
        pass


def run_command(cmd, env, timeout):
    """Run a command; return (exit status, stdout, stderr); the status is
    None when it could not start or did not end in time. The command leads
    a process group of its own, so that a time out ends all its processes
    (every stage of a pipeline), not only the first; an interrupt is passed
    on to the group as the terminal would."""
    try:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    except OSError as exc:
        return None, None, str(exc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        end_group(proc, signal.SIGKILL)
        proc.communicate()
        return None, "", f"no result after {timeout:.0f} s"
    except BaseException:
        end_group(proc, signal.SIGINT)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            end_group(proc, signal.SIGKILL)
            proc.wait()
        raise
    return proc.returncode, out, err


def run_bench(cmd, env, timeout):
    """Run ppipe-bench or a pipeline; return (exit status, parsed JSON or
    None, stderr)."""
    status, out, err = run_command(cmd, env, timeout)
    try:
        data = json.loads(out)
    except ValueError:
        data = None
    return status, data, err


def run_measured(cmd, env, timeout):
    """Run a command as run_command does; return its (exit status, stdout,
    stderr) and what it took: the wall time from its start to its end, and
    the CPU time of it and of every process below it that was waited for
    (the kernel's count of this process's children, RUSAGE_CHILDREN, before
    and after: nothing else is reaped meanwhile)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    status, out, err = run_command(cmd, env, timeout)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return status, out, err, {"wall_s": wall,
                              "user_s": after.ru_utime - before.ru_utime,
                              "sys_s": after.ru_stime - before.ru_stime}


def config_note(envs, side):
    """' (config NAME)' in messages about a --config side, else ''."""
    return f" (config {side})" if is_multi(envs) else ""


def check_runs(cmd, envs, failure):
    """Run cmd once in the environment of every side with the library;
    stop with "failure<config note>: why" unless each gives JSON."""
    for side in lib_sides(envs):
        status, data, err = run_bench(cmd, envs[side], 60)
        if status != 0 or not isinstance(data, dict):
            why = stderr_line(err) or (f"exit status {status}" if status
                                       else "no JSON on stdout")
            raise Fatal(f"{failure}{config_note(envs, side)}: {why}", 2)


def probe(bench, lib, envs):
    """Check that the library really preloads into ppipe-bench, in the
    environment of every side that runs with it."""
    c = {"mode": "threads", "writers": 1, "readers": 1, "size": 4096,
         "pipe_size": PIPE_SIZE}
    check_runs(bench_command(bench, c, 0.01, {}, lib), envs,
               f"{PROG}: {lib} does not work as a preload library for {bench}")


def probe_stage(stage, lib, envs):
    """Check that a small pipeline of ppipe-stage runs, with the library
    loaded in every stage."""
    c = {"size": 65536, "hops": 2}
    check_runs(pipeline_command(stage, c, ["-b", "1M"], {}, lib), envs,
               f"{PROG}: a pipeline of {stage} with {lib} preloaded does not run")


def measure_memcpy(bench, envs, size):
    """One thread's memcpy bandwidth for blocks of size bytes: (MB/s or
    None, why not)."""
    status, data, err = run_bench([bench, "--mode", "memcpy", "-s", str(size),
                                   "-d", "0.5", "--json"], envs["baseline"], 60)
    if status != 0 or not isinstance(data, dict):
        return None, stderr_line(err) or (f"exit status {status}" if status
                                          else "no JSON on stdout")
    value = data.get("mbps")
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or value <= 0:
        return None, "no positive mbps in its output"
    return value, None


def set_work(configs, bench, envs, settings):
    """Give the work matrix its work per write: multiples of the time one
    thread takes to copy WORK_SIZE bytes, measured once for the run (a
    producer that computes about as long as the copy its write costs)."""
    if not any(c["matrix"] == "work" for c in configs):
        return
    mbps, why = measure_memcpy(bench, envs, WORK_SIZE)
    if mbps is None:
        raise Fatal(f"{PROG}: the work matrix needs the copy time of "
                    f"{WORK_SIZE} B: {bench} --mode memcpy: {why}", 2)
    unit = max(1, round(WORK_SIZE / (mbps * (1 << 20)) * 1e9))
    settings["work"] = {"size": WORK_SIZE, "memcpy_mbps": mbps,
                        "unit_ns": unit}
    for c in configs:
        if c["matrix"] == "work":
            c["work_ns"] = c["work_x"] * unit


def bench_cpu(data):
    """A repetition's CPU per GiB from ppipe-bench's "cpu": all its
    counted tasks, their user and system time, the writers' and the
    readers'; None each where it has none (an older ppipe-bench)."""
    cpu = data.get("cpu") if isinstance(data.get("cpu"), dict) else {}

    def per_gib(group, part):
        values = cpu.get(group)
        return number(values.get(f"{part}_s_per_gib")) \
            if isinstance(values, dict) else None
    return {"cpu_s_per_gib": per_gib("all", "total"),
            "cpu_user_s_per_gib": per_gib("all", "user"),
            "cpu_sys_s_per_gib": per_gib("all", "sys"),
            "cpu_writers_s_per_gib": per_gib("writers", "total"),
            "cpu_readers_s_per_gib": per_gib("readers", "total")}


def usage_cpu(usage, nbytes):
    """A pipeline repetition's CPU per GiB: every process of the pipeline
    (the sh and its stages, run_measured's count), which no count splits
    into writers and readers."""
    rec = dict.fromkeys(CPU_METRICS)
    if usage and number(nbytes) and nbytes > 0:
        gib = nbytes / GIB
        rec["cpu_user_s_per_gib"] = usage["user_s"] / gib
        rec["cpu_sys_s_per_gib"] = usage["sys_s"] / gib
        rec["cpu_s_per_gib"] = (usage["user_s"] + usage["sys_s"]) / gib
    return rec


def rep_record(c, side, status, data, err, verify, usage=None):
    """Validate one bench result; return the per-rep record. usage is what
    a pipeline's run took (run_measured): its CPU is counted from it."""
    where = f"{label(c)} ({side})"
    pipeline = c["matrix"] == "pipeline"
    what = "the pipeline" if pipeline else "ppipe-bench"
    # The consumer of a pipeline always checks the stream.
    if status == 1 and (verify or (pipeline and "verification failed" in err)):
        raise Fatal(f"{PROG}: verification failed: {where}: "
                    f"{stderr_line(err) or 'exit status 1'}", 1)
    if status != 0:
        why = stderr_line(err) or f"exit status {status}"
        raise Fatal(f"{PROG}: {what} failed for {where}: {why}", 1)
    if not isinstance(data, dict):
        raise Fatal(f"{PROG}: {what} printed no JSON object for {where}", 1)
    if verify and data.get("verified") is False:
        raise Fatal(f"{PROG}: verification failed: {where}", 1)
    rec = {}
    for key in METRICS:
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Fatal(f"{PROG}: {what} output for {where} has no "
                        f"numeric {key!r}", 1)
        rec[key] = value
    for key in SHARE_METRICS:
        value = data.get(key)
        rec[key] = value if isinstance(value, (int, float)) \
            and not isinstance(value, bool) else None
    rec.update(usage_cpu(usage, data.get("bytes")) if pipeline
               else bench_cpu(data))
    if rec["mbps"] <= 0:
        raise Fatal(f"{PROG}: {what} moved no data for {where}", 1)
    rec["pressure"] = data.get("pressure")
    return rec


DD_BYTES = re.compile(r"(\d+) bytes? (?:\([^)]*\) )?copied")
# What dd prints of its statistics: GNU dd's (LC_ALL=C) records and bytes.
DD_STATS = (re.compile(r"\d+\+\d+ records (?:in|out)"),
            re.compile(r"\d+ bytes? (?:\([^)]*\) )?copied,[^\n]*"))
_ZERO_SHA1 = {}


def zero_sha1(nbytes):
    """The SHA-1 of nbytes zero bytes, hex (computed once per size)."""
    if nbytes not in _ZERO_SHA1:
        digest = hashlib.sha1()
        block = bytes(1 << 20)
        for _ in range(nbytes >> 20):
            digest.update(block)
        digest.update(bytes(nbytes & ((1 << 20) - 1)))
        _ZERO_SHA1[nbytes] = digest.hexdigest()
    return _ZERO_SHA1[nbytes]


def program_stderr(err):
    """(the byte counts the dd stages reported, the lines that are neither
    dd's statistics nor libppipe's own: its messages, or a report of
    PPIPE_STATS=1). The stages share the stderr, so their statistics may
    interleave: they are found anywhere in it."""
    counts = [int(n) for n in DD_BYTES.findall(err)]
    rest = err
    for stats in DD_STATS:
        rest = stats.sub("", rest)
    odd = [line.strip() for line in rest.splitlines() if line.strip()
           and not re.match(r"libppipe\[\d+\]: |\{", line.strip())]
    return counts, odd


def program_env(env):
    """A side's environment for a pipeline of real programs: dd's
    statistics in the C locale, which program_stderr reads."""
    return dict(env, LC_ALL="C")


def program_failure(c, side, status, err, check):
    """A Fatal for a pipeline of real programs that failed or printed what
    none of its stages should, or None."""
    where = f"{label(c)} ({side})" + (" check" if check else "")
    _, odd = program_stderr(err)
    if status != 0 or odd:
        why = odd[0] if odd else stderr_line(err) or (
            f"exit status {status}" if status is not None else "no result")
        return Fatal(f"{PROG}: the pipeline failed for {where}: {why}", 1)
    return None


def check_program(c, side, env):
    """Before the timed runs of a pipeline whose sink throws its output
    away: the pipeline once with its sink counted, which must count every
    byte. The timed runs then keep the sink as it is, so that their CPU is
    the pipeline's own."""
    command = check_command(c)
    status, out, err = run_command(["sh", "-c", command], program_env(env),
                                   program_timeout(c))
    fatal = program_failure(c, side, status, err, True)
    if fatal:
        raise fatal
    if out.strip() != str(c["bytes"]):
        raise Fatal(f"{PROG}: verification failed: {label(c)} ({side}): "
                    f"{command.split('|')[-1].strip()} counted "
                    f"{out.strip() or 'nothing'}, not {c['bytes']} bytes", 1)


def program_timeout(c):
    """How long a pipeline of real programs may take: 1 MiB/s at least."""
    return 120 + c["bytes"] / (1 << 20)


def program_record(c, side, env):
    """One timed run of a pipeline of real programs: its MB/s over the
    whole pipeline's wall time (the sh's start to its end) and the CPU of
    all its processes per GiB, after the checks that every byte went
    through: the count each dd reports, the digest sha1sum prints."""
    status, out, err, usage = run_measured(["sh", "-c", c["command"]],
                                           program_env(env),
                                           program_timeout(c))
    fatal = program_failure(c, side, status, err, False)
    if fatal:
        raise fatal
    where = f"{label(c)} ({side})"
    counts, _ = program_stderr(err)
    dds = program_stages(c).count("dd")
    if counts != [c["bytes"]] * dds:
        raise Fatal(f"{PROG}: verification failed: {where}: dd reported "
                    f"{', '.join(map(str, counts)) or 'no count'}, not "
                    f"{c['bytes']} bytes from each of {dds}", 1)
    if program_stages(c)[-1] == "sha1sum" and \
            out.split()[:1] != [zero_sha1(c["bytes"])]:
        raise Fatal(f"{PROG}: verification failed: {where}: sha1sum printed "
                    f"{out.strip()[:60]!r}, not the digest of "
                    f"{c['bytes']} zero bytes", 1)
    rec = {key: None for key in METRICS + SHARE_METRICS}
    rec["mbps"] = c["bytes"] / usage["wall_s"] / (1 << 20)
    rec.update(usage_cpu(usage, c["bytes"]))
    rec["wall_s"] = usage["wall_s"]
    rec["pressure"] = None
    return rec


def overhead_record(c, side, status, data, err):
    """Validate one ppipe-overhead result; return the per-rep record."""
    where = f"overhead {label(c)} ({side})"
    if status != 0:
        why = stderr_line(err) or f"exit status {status}"
        raise Fatal(f"{PROG}: ppipe-overhead failed for {where}: {why}", 1)
    if not isinstance(data, dict):
        raise Fatal(f"{PROG}: ppipe-overhead printed no JSON object for "
                    f"{where}", 1)
    value = data.get("ns_per_op")
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not value > 0:
        raise Fatal(f"{PROG}: ppipe-overhead output for {where} has no "
                    "positive 'ns_per_op'", 1)
    if data.get("case") != c["case"] or data.get("n") != c["n"]:
        raise Fatal(f"{PROG}: ppipe-overhead ran {data.get('case')!r} "
                    f"{data.get('n')!r} times for {where}", 1)
    return {"ns_per_op": value}


def clock(seconds):
    """Format seconds as m:ss or h:mm:ss."""
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Progress reporting on stderr, in place on a terminal."""

    def __init__(self, total_runs, duration, quiet):
        self.total = total_runs
        self.duration = duration
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()
        self.done = 0

    def show(self, text):
        """Announce the run about to start."""
        if self.quiet:
            return
        elapsed = time.monotonic() - self.start
        left = self.total - self.done
        per_run = elapsed / self.done if self.done else self.duration + 0.1
        line = (f"{text}  elapsed {clock(elapsed)}  "
                f"left ~{clock(per_run * left)}")
        if self.tty:
            sys.stderr.write("\r" + line + "\x1b[K")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def step(self):
        """Count a finished run."""
        self.done += 1

    def finish(self):
        """End the in-place line."""
        if not self.quiet and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def summarize(reps):
    """Medians and spread of one side's repetitions: each value's median,
    None where a repetition lacks it (a pipeline of real programs has no
    write latency; its wall time is its own)."""
    side = {}
    for key in METRICS + OPTIONAL_METRICS + (
            ("wall_s",) if "wall_s" in reps[0] else ()):
        values = [r.get(key) for r in reps]
        side[key] = statistics.median(values) \
            if None not in values else None
    values = [r["mbps"] for r in reps]
    side["spread_mbps"] = (max(values) - min(values)) / side["mbps"]
    side["reps"] = reps
    return side


def summarize_time(reps):
    """Median and spread of one side's times per operation."""
    values = [r["ns_per_op"] for r in reps]
    median = statistics.median(values)
    return {"ns_per_op": median,
            "spread_ns_per_op": (max(values) - min(values)) / median,
            "reps": reps}


def ratio(a, b):
    """b / a, or None when either is missing or a is zero."""
    return b / a if a and b is not None else None


def side_result(runs, base):
    """A --config side's medians with its ratios to the baseline's."""
    side = summarize(runs)
    side["ratio_mbps"] = ratio(base["mbps"], side["mbps"])
    for key in ("avg", "p50", "p99"):
        side[f"ratio_lat_{key}"] = ratio(base[f"lat_{key}_ns"],
                                         side[f"lat_{key}_ns"])
    side["ratio_cpu_per_gib"] = ratio(base["cpu_s_per_gib"],
                                      side["cpu_s_per_gib"])
    return side


def config_reps(c, settings):
    """Repetitions per side of one configuration."""
    return settings["overhead"]["reps"] if is_overhead(c) \
        else settings["reps"]


def excess(value, floor):
    """The library's time ratio minus the empty library's, or None."""
    return value - floor if value is not None and floor is not None else None


def run_overhead_row(c, program, lib, envs, reps, progress, prefix,
                     empty=None):
    """Run one overhead row: every repetition runs plain, then the empty
    library (if there is one: its path), then each side with the library
    (progress lines start with prefix). Returns the result: medians of
    ns_per_op per side and the time ratio preloaded/plain (ratio_time:
    lower is better); with the empty library, its side ("empty", with its
    own ratio_time) and each library side's excess_time over it."""
    sides = {"baseline": (None, envs["baseline"])}
    if empty:
        # Nothing but the library: the PPIPE_ variables mean nothing to it.
        sides["empty"] = (empty, dict(envs["baseline"], LD_PRELOAD=empty))
    sides.update((side, (lib, envs[side])) for side in lib_sides(envs))
    runs = {side: [] for side in sides}
    for rep in range(1, reps + 1):
        for side, (side_lib, env) in sides.items():
            progress.show(f"{prefix} overhead {label(c)} rep {rep}/{reps} "
                          f"{side}")
            status, data, err = run_bench(
                overhead_command(program, c, side_lib),
                overhead_env(c, env), 120)
            runs[side].append(overhead_record(c, side, status, data, err))
            progress.step()
    result = dict(c)
    base = result["baseline"] = summarize_time(runs["baseline"])
    floor = None
    if empty:
        result["empty"] = summarize_time(runs["empty"])
        floor = result["empty"]["ratio_time"] = ratio(
            base["ns_per_op"], result["empty"]["ns_per_op"])
    if is_multi(envs):
        result["configs"] = {}
        for side in lib_sides(envs):
            one = summarize_time(runs[side])
            one["ratio_time"] = ratio(base["ns_per_op"], one["ns_per_op"])
            if empty:
                one["excess_time"] = excess(one["ratio_time"], floor)
            result["configs"][side] = one
    else:
        result["shim"] = summarize_time(runs["shim"])
        result["ratio_time"] = ratio(base["ns_per_op"],
                                     result["shim"]["ns_per_op"])
        if empty:
            result["excess_time"] = excess(result["ratio_time"], floor)
    return result


def condition_configs(c, settings):
    """The configuration c under each pressure condition of the run: one
    copy, or one per condition of --memory-pressure=none,memcg,..."""
    modes = settings.get("pressure_modes")
    if not modes:
        c = dict(c, memory_pressure=settings["memory_pressure"])
        if settings["memory_pressure"]:
            c["pressure_mode"] = settings["pressure_mode"]
        return [c]
    out = []
    for mode in modes:
        cc = dict(c, memory_pressure=mode != NO_PRESSURE)
        if mode != NO_PRESSURE:
            cc["pressure_mode"] = mode
        out.append(cc)
    return out


def run_conditions(conds, programs, lib, envs, settings, opts, progress,
                   prefix):
    """Run one configuration under each of its conditions: every
    repetition runs each condition in turn, and in each the plain side and
    then the library's, so that the machine's slower and faster spells fall
    on all of them.
    Returns a result per condition."""
    sides = list(envs)
    reps = settings["reps"]
    programs_run = is_program(conds[0])
    pipeline = conds[0]["matrix"] == "pipeline" and not programs_run
    duration = settings["pipeline_duration_s" if pipeline else "duration_s"]
    runs = [{side: [] for side in sides} for _ in conds]
    pipe_sizes = []
    for c in conds if programs_run and check_command(conds[0]) else ():
        for side in sides:
            progress.show(f"{prefix} {label(c)} check {side}")
            check_program(c, side, envs[side])
    for rep in range(1, reps + 1):
        for k, c in enumerate(conds):
            copts = dict(opts, memory_pressure=c["memory_pressure"],
                         pressure_mode=c.get("pressure_mode"))
            for side in sides:
                progress.show(f"{prefix} {label(c)} rep {rep}/{reps} {side}")
                side_lib = lib if side != "baseline" else None
                if programs_run:
                    runs[k][side].append(program_record(c, side, envs[side]))
                    progress.step()
                    continue
                usage = None
                if pipeline:
                    cmd = pipeline_command(programs["stage"], c,
                                           ["-d", f"{duration:g}"], copts,
                                           side_lib)
                    status, out, err, usage = run_measured(
                        cmd, envs[side], duration + 120)
                    try:
                        data = json.loads(out)
                    except ValueError:
                        data = None
                else:
                    cmd = bench_command(programs["bench"], c, duration,
                                        copts, side_lib)
                    status, data, err = run_bench(cmd, envs[side],
                                                  duration + 120)
                runs[k][side].append(rep_record(c, side, status, data, err,
                                                opts["verify"], usage))
                if pipeline and isinstance(data.get("pipe_size"), int):
                    pipe_sizes.append(data["pipe_size"])
                progress.step()
    results = []
    for k, c in enumerate(conds):
        result = dict(c)
        if pipe_sizes:
            # The size the consumer read from (the kernel's default).
            result["pipe_size"] = statistics.mode(pipe_sizes)
        result["baseline"] = summarize(runs[k]["baseline"])
        if is_multi(envs):
            result["configs"] = {
                side: side_result(runs[k][side], result["baseline"])
                for side in lib_sides(envs)}
            results.append(result)
            continue
        result["shim"] = summarize(runs[k]["shim"])
        base, shim = result["baseline"], result["shim"]
        result["ratio_mbps"] = ratio(base["mbps"], shim["mbps"])
        result["ratio_lat_avg"] = ratio(base["lat_avg_ns"],
                                        shim["lat_avg_ns"])
        result["ratio_lat_p99"] = ratio(base["lat_p99_ns"],
                                        shim["lat_p99_ns"])
        result["ratio_cpu_per_gib"] = ratio(base["cpu_s_per_gib"],
                                            shim["cpu_s_per_gib"])
        results.append(result)
    return results


def run_matrix(configs, programs, lib, envs, settings, quiet):
    """Run every configuration and repetition; return the result list.

    programs holds the paths of "bench" and (for pipelines) "stage" and
    (for the overhead matrix) "overhead"; envs the sides in the order
    each repetition runs them (child_envs).
    """
    sides = list(envs)
    opts = {"verify": settings["verify"],
            "memory_pressure": settings["memory_pressure"],
            "pressure_mode": settings.get("pressure_mode"),
            "filler_cpu": settings.get("filler_cpu"),
            "pin": settings["pin"]}
    conditions = settings.get("pressure_modes")
    empty = (settings.get("overhead") or {}).get("empty", {}).get("path")
    progress = Progress(sum(config_reps(c, settings)
                            * (len(sides) + bool(empty) if is_overhead(c)
                               else len(sides) * len(conditions or [0]))
                            for c in configs),
                        settings["duration_s"], quiet)
    results = []
    try:
        for i, c in enumerate(configs, 1):
            if is_overhead(c):
                results.append(run_overhead_row(
                    c, programs["overhead"], lib, envs,
                    config_reps(c, settings), progress,
                    f"[{i}/{len(configs)}]", empty))
                continue
            results += run_conditions(
                condition_configs(c, settings), programs, lib, envs,
                settings, opts, progress, f"[{i}/{len(configs)}]")
    finally:
        progress.finish()
    return results


# ---------------------------------------------------------------- host


def read_text(path):
    """Contents of a small file, or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def host_info():
    """Description of the machine the benchmark ran on."""
    cpu = None
    for line in (read_text("/proc/cpuinfo") or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            cpu = value.strip()
            break
    thp = None
    match = re.search(r"\[(\w+)\]", read_text(
        "/sys/kernel/mm/transparent_hugepage/enabled") or "")
    if match:
        thp = match.group(1)
    try:
        pipe_max = int((read_text("/proc/sys/fs/pipe-max-size") or "").strip())
    except ValueError:
        pipe_max = None
    uname = os.uname()
    return {"kernel": uname.release, "cpu": cpu, "cores": os.cpu_count(),
            "page_size": os.sysconf("SC_PAGE_SIZE"), "thp": thp,
            "pipe_max_size": pipe_max, "hostname": uname.nodename}


# ---------------------------------------------------------------- text


def fmt_scaled(value, missing, whole_from, small_digits):
    """@value with no decimals from @whole_from up, one from 10, else
    @small_digits; @missing for None."""
    if value is None:
        return missing
    if abs(value) >= whole_from:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.{small_digits}f}"


def fmt_num(value):
    """Compact number: more decimals for small values."""
    return fmt_scaled(value, "n/a", 100, 2)


def fmt_delta(a, b):
    """'(+21%)' for a -> b."""
    if not a or b is None:
        return "(n/a)"
    return f"({int(round((b / a - 1) * 100)):+d}%)"


def fmt_cpu(value):
    """CPU seconds per GiB, or a ratio of them: three decimals below 10;
    "-" where unknown (a result saved before CPU was measured)."""
    return fmt_scaled(value, "-", 1000, 3)


def is_cpu(key):
    """True for a CPU per GiB value (formatted by fmt_cpu)."""
    return key in CPU_METRICS


def pair_cells(pairs, fmt=fmt_num):
    """Format (a, b) pairs as equal-width 'a -> b (delta)' cells; a pair
    of two unknown CPU values is '-'."""
    nums = [(fmt(a), fmt(b)) for a, b in pairs]
    width = max((len(s) for p in nums for s in p), default=1)
    return ["-" if fmt is fmt_cpu and a is None and b is None else
            f"{x:>{width}} -> {y:>{width}} {fmt_delta(a, b):>7}"
            for (x, y), (a, b) in zip(nums, pairs)]


def table_lines(header, rows, indent=4, sep=3, align=None):
    """Align columns as align says ("r" or "l" per column); by default the
    first right-aligned, the others left-aligned."""
    widths = [max(len(r[i]) for r in [header] + rows)
              for i in range(len(header))]
    align = align or "r" + "l" * (len(header) - 1)
    lines = []
    for row in [header] + rows:
        cells = [cell.rjust(w) if how == "r" else cell.ljust(w)
                 for cell, w, how in zip(row, widths, align)]
        lines.append((" " * indent + (" " * sep).join(cells)).rstrip())
    return lines


def human_bytes(n):
    """1048576 -> '1 MiB', 65536 -> '64 KiB'."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def pressure_label(mp, mode=None):
    """Header words for the memory pressure setting (and its mode)."""
    if not mp:
        return "no memory pressure"
    if mode and "," in mode:
        return f"under each of: {mode.replace(',', ', ')}"
    return f"under memory pressure ({mode})" if mode else \
        "under memory pressure"


def group_by(rows, fields):
    """Group (result, ...) rows by result fields, keeping first-seen order."""
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row[0].get(f) for f in fields),
                          []).append(row)
    return groups


_SHIM = {"name": "libppipe"}


def set_shim_name(path):
    """Names the preload side after its library: libppipe, libppipe-passthru..."""
    base = os.path.basename(path or "") or "libppipe"
    _SHIM["name"] = base[:-3] if base.endswith(".so") else base


def shim_name():
    """The label of the preload side in tables and pictures."""
    return _SHIM["name"]


def side_name(side):
    """A side's name in the text: plain, the library's, or the --config's."""
    return {"baseline": "plain", "shim": shim_name()}.get(side, side)


class View:
    """What a set of tables shows: metrics, arrow label, header note, the
    heads of the ratio columns (MB/s, CPU per GiB)."""

    def __init__(self, metrics, arrow, note, ratio_head, cpu_ratio_head):
        self.metrics = metrics      # [(long title, short title, key)]
        self.arrow = arrow
        self.note = note
        self.ratio_head = ratio_head
        self.cpu_ratio_head = cpu_ratio_head


RUN_METRICS = [("Throughput in MB/s", "MB/s", "mbps"),
               ("Avg write latency in ns", "avg ns", "lat_avg_ns"),
               ("p99 write latency in ns", "p99 ns", "lat_p99_ns"),
               ("CPU seconds per GiB moved, lower is better", "CPU s/GiB",
                "cpu_s_per_gib")]
RATIO_METRICS = [("Throughput ratio libppipe/plain", "MB/s ratio", "mbps"),
                 ("Avg latency ratio libppipe/plain", "avg ratio",
                  "lat_avg_ns"),
                 ("p99 latency ratio libppipe/plain", "p99 ratio",
                  "lat_p99_ns"),
                 ("CPU per GiB ratio libppipe/plain, lower is better",
                  "CPU ratio", "cpu_s_per_gib")]
# The two-way table's CPU ratio column.
CPU_RATIO_HEAD = "CPU ratio (lower is better)"


def has_values(rows, key):
    """True if some row has the value on either side."""
    return any(row[i].get(key) is not None for row in rows for i in (1, 2))
# The work table's extra column: what write-behind could give back.
WRITE_SHARE = ("Share of the writers' time in write()", "in write()",
               "write_time_share")


def grid_tables(title, rows, view):
    """Writers x readers tables for one sweep group."""
    lines = list(title)
    writers = sorted({r[0]["writers"] for r in rows})
    readers = sorted({r[0]["readers"] for r in rows})
    for name, _, metric in view.metrics:
        if not has_values(rows, metric):
            continue
        pairs = [(r[1].get(metric), r[2].get(metric)) for r in rows]
        text = dict(zip(((r[0]["writers"], r[0]["readers"]) for r in rows),
                        pair_cells(pairs, fmt_cpu if is_cpu(metric)
                                   else fmt_num)))
        header = ["writers"] + [f"readers={n}" for n in readers]
        body = [[str(w)] + [text.get((w, n), "-") for n in readers]
                for w in writers]
        lines.append(f"  {name} ({view.arrow}, delta):")
        lines += table_lines(header, body)
    return lines


def keyed_table(title, rows, view, keys, extra=()):
    """One row per result: its key columns, a -> b cells per metric that
    some row has (and per extra metric that every row has on both sides),
    the ratio, and the CPU ratio where CPU was measured."""
    metrics = [m for m in view.metrics if has_values(rows, m[2])] + [
        m for m in extra
        if all(row[i].get(m[2]) is not None for row in rows for i in (1, 2))]
    columns = [pair_cells([(row[1].get(m), row[2].get(m)) for row in rows],
                          fmt_cpu if is_cpu(m) else fmt_num)
               for _, _, m in metrics]
    cpu = has_values(rows, "cpu_s_per_gib")
    header = [head for head, _ in keys] \
        + [f"{short} {view.arrow} (delta)" for _, short, _ in metrics] \
        + [view.ratio_head] + ([view.cpu_ratio_head] if cpu else [])
    body = []
    for i, row in enumerate(rows):
        rat = ratio(row[1]["mbps"], row[2]["mbps"])
        body.append([value(row[0]) for _, value in keys]
                    + [col[i] for col in columns]
                    + [f"{rat:.3f}" if rat is not None else "n/a"]
                    + ([fmt_cpu(ratio(row[1].get("cpu_s_per_gib"),
                                      row[2].get("cpu_s_per_gib")))]
                       if cpu else []))
    # A command reads from the left; numbers line up on the right.
    align = None if keys[0][0] != "pipeline" else \
        "l" * len(header)
    return list(title) + table_lines(header, body, indent=2, align=align)


PIPELINE_SHAPES = {1: "produce | consume",
                   2: "produce | relay | consume"}


def work_label(r):
    """A work row's work per write: '0', '5000 (1x)'."""
    return f"{r['work_ns']} ({r['work_x']}x)" if r["work_x"] else "0"


def work_unit_line(size, rows):
    """What 1x is in a work table, from its rows' work per write."""
    units = {row[0]["work_ns"] / row[0]["work_x"] for row in rows
             if row[0]["work_x"]}
    if len(units) != 1:
        return "work in ns before each write"
    unit = units.pop()
    return (f"work in ns before each write; 1x = {unit:.0f} ns, one "
            f"thread's memcpy of a write ({size / unit * 1e9 / (1 << 20):.0f}"
            " MB/s)")


def table_groups(rows, note):
    """The tables for (result, ...) rows, matrix by matrix, as (matrix,
    title lines, key columns, rows in table order); a key column is
    (header, function of a result)."""
    tables = []
    for (matrix,), mrows in group_by(rows, ("matrix",)).items():
        if matrix == "sweep":
            fields = ("mode", "size", "pipe_size", "memory_pressure")
        elif matrix == "pipeline":
            fields = ("mode", "pipe_size", "memory_pressure")
        elif matrix == "work":
            fields = ("mode", "writers", "readers", "size", "pipe_size",
                      "memory_pressure")
        else:
            fields = ("mode", "writers", "readers", "pipe_size",
                      "memory_pressure")
        # memcg and hog runs of one file are tables of their own.
        fields += ("pressure_mode",)
        for key, grows in group_by(mrows, fields).items():
            k = dict(zip(fields, key))
            mode, pipe = k["mode"], human_bytes(k["pipe_size"])
            plabel = pressure_label(k["memory_pressure"],
                                    grows[0][0].get("pressure_mode"))
            where = f"{plabel} ({note}) =="
            if matrix == "sweep":
                title = [f"== {mode}: {k['size']} B writes, {pipe} pipe, "
                         f"{where}", ""]
                keys = [("W x R", lambda r: f"{r['writers']}x{r['readers']}")]
                order = ("writers", "readers")
            elif matrix == "pipeline" and mode == "programs":
                amounts = sorted({row[0]["bytes"] for row in grows})
                title = [f"== pipelines of real programs, {pipe} pipes, "
                         f"{where}",
                         "   sh -c COMMAND, the library in LD_PRELOAD of the "
                         "sh and so of every stage;",
                         f"   {' or '.join(map(human_bytes, amounts))} per "
                         "run, MB/s over the pipeline's wall time, CPU of "
                         "all its processes", ""]
                keys = [("pipeline", lambda r: r["command"])]
                # The order they ran in.
                order = ()
            elif matrix == "pipeline":
                shapes = "; ".join(
                    f"{hops_label(h)}: {PIPELINE_SHAPES.get(h, '...')}"
                    for h in sorted({row[0]["hops"] for row in grows}))
                title = [f"== {mode} pipelines of exec'd programs, {pipe} "
                         f"pipes, {where}", f"   {shapes}", ""]
                keys = [("hops", lambda r: str(r["hops"])),
                        ("size", lambda r: str(r["size"]))]
                order = ("hops", "size")
            elif matrix == "work":
                title = [f"== {mode} {k['writers']}x{k['readers']}, "
                         f"{k['size']} B writes, {pipe} pipe, "
                         f"{plabel}: producer "
                         f"work per write ({note}) ==",
                         f"   {work_unit_line(k['size'], grows)}", ""]
                keys = [("work", work_label)]
                order = ("work_ns",)
            else:
                what = ("small writes, goal: no regression"
                        if matrix == "small" else "write-size sweep")
                title = [f"== {mode} {k['writers']}x{k['readers']}, {pipe} "
                         f"pipe, {plabel}: "
                         f"{what} ({note}) ==", ""]
                keys = [("size", lambda r: str(r["size"]))]
                order = ("size",)
            grows = sorted(grows, key=lambda row, o=order:
                           tuple(row[0][f] for f in o))
            tables.append((matrix, title, keys, grows))
    return tables


def report_tables(rows, view):
    """All tables for (result, a, b) rows, grouped by matrix."""
    lines = []
    for matrix, title, keys, grows in table_groups(rows, view.note):
        if matrix == "sweep":
            lines += grid_tables(title, grows, view)
        else:
            extra = (WRITE_SHARE,) if matrix == "work" else ()
            lines += keyed_table(title, grows, view, keys, extra)
        lines.append("")
    return lines


def fmt_share(value):
    """A share as a percentage, 'n/a' when unknown."""
    return "n/a" if value is None else f"{100 * value:.0f}%"


def fmt_ns(value):
    """A latency in ns, 'n/a' when unknown."""
    return "n/a" if value is None else f"{value:.0f}"


def side_by_side_tables(results, sides, note):
    """With --config: one row per configuration and side, with MB/s, the
    ratio to plain, write latency p50 and p99, and the writers' time share
    in write(); and, where it was measured, CPU seconds per GiB and its
    ratio to plain (lower is better)."""
    lines = []
    for _, title, keys, grows in table_groups([(r,) for r in results], note):
        cpu = any(side_of(r, side).get("cpu_s_per_gib") is not None
                  for (r,) in grows for side in sides)
        header = [head for head, _ in keys] + [
            "config", "MB/s", "ratio", "p50 ns", "p99 ns", "in write()"] \
            + (["CPU s/GiB", CPU_RATIO_HEAD] if cpu else [])
        body = []
        for (r,) in grows:
            for k, side in enumerate(sides):
                v = side_of(r, side)
                rat = v.get("ratio_mbps")
                body.append(
                    [value(r) if not k else "" for _, value in keys]
                    + [side_name(side), fmt_num(v["mbps"]),
                       "-" if side == "baseline" else
                       f"{rat:.3f}" if rat is not None else "n/a",
                       fmt_ns(v["lat_p50_ns"]), fmt_ns(v["lat_p99_ns"]),
                       fmt_share(v.get("write_time_share"))]
                    + ([fmt_cpu(v.get("cpu_s_per_gib")),
                        "-" if side == "baseline"
                        else fmt_cpu(v.get("ratio_cpu_per_gib"))]
                       if cpu else []))
        align = "r" * len(keys) + "l" + "r" * (7 if cpu else 5)
        lines += list(title) + table_lines(header, body, indent=2,
                                           align=align) + [""]
    return lines


def summary_line(rows, what):
    """Geometric mean, min and max of b/a throughput per matrix."""
    parts = []
    conditions = len({r[0].get("pressure_mode") for r in rows}) > 1
    for (matrix, mode), mrows in group_by(
            rows, ("matrix", "pressure_mode")).items():
        values = [ratio(r[1]["mbps"], r[2]["mbps"]) for r in mrows]
        values = [v for v in values if v]
        if not values:
            continue
        geo = math.exp(statistics.fmean(math.log(v) for v in values))
        if conditions:
            matrix += f" ({mode or NO_PRESSURE})"
        parts.append(f"{matrix} geomean {geo:.3f} "
                     f"(min {min(values):.3f}, max {max(values):.3f}, "
                     f"{len(values)} configs)")
    return f"Summary, {what} MB/s: " + "; ".join(parts)


def cpu_summary_line(rows, what):
    """Geometric mean, min and max of b/a CPU per GiB per matrix, where it
    was measured; None where it was nowhere."""
    parts = []
    conditions = len({r[0].get("pressure_mode") for r in rows}) > 1
    for (matrix, mode), mrows in group_by(
            rows, ("matrix", "pressure_mode")).items():
        values = [ratio(r[1].get("cpu_s_per_gib"), r[2].get("cpu_s_per_gib"))
                  for r in mrows]
        values = [v for v in values if v]
        if not values:
            continue
        if conditions:
            matrix += f" ({mode or NO_PRESSURE})"
        parts.append(f"{matrix} geomean {geomean(values):.3f} "
                     f"(min {min(values):.3f}, max {max(values):.3f}, "
                     f"{len(values)} configs)")
    if not parts:
        return None
    return (f"Summary, {what} CPU per GiB moved (lower is better): "
            + "; ".join(parts))


def overhead_what(c):
    """What an overhead row times, in words."""
    if c["case"] == "small":
        return f"{c['size']} B writes, a thread drains"
    return OVERHEAD_WHAT.get(c["case"], c["case"])


def geomean(values):
    """Geometric mean of positive numbers."""
    return math.exp(statistics.fmean(math.log(v) for v in values))


def fmt_ratio(value):
    """A time ratio: '1.034', or 'n/a'."""
    return f"{value:.3f}" if value is not None else "n/a"


def fmt_excess(value):
    """An excess over the empty library: '+0.012', or 'n/a'."""
    return f"{value:+.3f}" if value is not None else "n/a"


def overhead_tables(results, sides, note, skipped, no_empty=None):
    """The overhead matrix's table: time per operation, plain -> library,
    and the time ratio (lower is better); with --config, one row per
    side. With the empty library, its time ratio and the library's excess
    over it. Rows left out (skipped: {case: why}) are named below it, and
    so is the empty library when it was left out (no_empty: why)."""
    if not results and not skipped:
        return []
    two_way = sides == ["baseline", "shim"]
    empty = any("empty" in r for r in results)
    who = shim_name() if two_way else "the library"
    lines = [f"== What {who} costs where it cannot help: time per operation "
             f"({note}) ==",
             f"   time ratio {shim_name() if two_way else 'config'}/plain, "
             "lower is better: 1.00 = free, above 1 = costs"]
    if empty:
        lines.append(f"   {EMPTY_NOTE}")
    lines.append("")
    if two_way:
        cells = pair_cells([(r["baseline"]["ns_per_op"],
                             r["shim"]["ns_per_op"]) for r in results])
        header = ["row", "N", "what", f"ns/op plain -> {shim_name()} (delta)",
                  "time ratio (lower is better)"]
        header += ["empty/plain", "excess"] if empty else []
        body = [[label(r), str(r["n"]), overhead_what(r), cell,
                 fmt_ratio(r["ratio_time"])]
                + ([fmt_ratio(r["empty"]["ratio_time"]),
                    fmt_excess(r.get("excess_time"))] if empty else [])
                for r, cell in zip(results, cells)]
        align = "lrlll" + ("ll" if empty else "")
    else:
        header = ["row", "N", "config", "ns/op",
                  "time ratio (lower is better)", "spread"]
        header += ["excess"] if empty else []
        body = []
        for r in results:
            row_sides = sides[:1] + (["empty"] if empty else []) + sides[1:]
            for k, side in enumerate(row_sides):
                v = side_of(r, side)
                body.append([label(r) if not k else "",
                             str(r["n"]) if not k else "", side_name(side),
                             fmt_num(v["ns_per_op"]),
                             "-" if side == "baseline" else
                             fmt_ratio(v.get("ratio_time")),
                             f"{100 * v['spread_ns_per_op']:.1f}%"]
                            + ([fmt_excess(v.get("excess_time"))
                                if side in sides[1:] else "-"]
                               if empty else []))
        align = "lrlrrr" + ("r" if empty else "")
    lines += table_lines(header, body, indent=2, align=align)
    lines += [f"  {case}: skipped, {why}" for case, why in skipped.items()]
    if no_empty:
        lines.append(f"  empty library: skipped, {no_empty}")
    return lines + [""]


def overhead_summary_line(results, side, what):
    """Geometric mean and worst row of one side's time ratios; with the
    empty library, its geometric mean and worst row, and the largest and
    mean excess of the side over it."""
    values = [(side_of(r, side).get("ratio_time") if side != "shim"
               else r.get("ratio_time"), r) for r in results]
    values = [(v, r) for v, r in values if v]
    if not values:
        return f"Summary, {what} time per operation (overhead): n/a"
    worst = max(values, key=lambda t: t[0])
    best = min(values, key=lambda t: t[0])
    line = (f"Summary, {what} time per operation (overhead, lower is "
            f"better): geomean {geomean([v for v, _ in values]):.3f} (worst "
            f"{label(worst[1])} {worst[0]:.3f}, best {label(best[1])} "
            f"{best[0]:.3f}, {len(values)} rows)")
    floors = [(r["empty"]["ratio_time"], r) for r in results
              if r.get("empty") and r["empty"].get("ratio_time")]
    extra = [((side_of(r, side) if side != "shim" else r).get("excess_time"),
              r) for r in results]
    extra = [(v, r) for v, r in extra if v is not None]
    if floors and extra:
        top = max(floors, key=lambda t: t[0])
        most = max(extra, key=lambda t: t[0])
        line += (f"; empty/plain geomean "
                 f"{geomean([v for v, _ in floors]):.3f} (worst "
                 f"{label(top[1])} {top[0]:.3f}); excess over empty: worst "
                 f"{label(most[1])} {most[0]:+.3f}, mean "
                 f"{statistics.fmean(v for v, _ in extra):+.3f}")
    return line


def overhead_spread_line(results):
    """The largest spread of ns/op across repetitions."""
    worst = max(((side_of(r, s)["spread_ns_per_op"], r, s) for r in results
                 for s in result_sides(r) + (["empty"] if "empty" in r
                                             else [])),
                key=lambda t: t[0])
    return (f"Max spread of ns/op across reps ((max-min)/median), overhead: "
            f"{worst[0] * 100:.1f}% ({label(worst[1])}, {worst[2]})")


def spread_line(results):
    """The largest spread of MB/s across repetitions."""
    worst = max(((side_of(r, s)["spread_mbps"], r, s) for r in results
                 for s in result_sides(r)), key=lambda t: t[0])
    return (f"Max spread of MB/s across reps ((max-min)/median): "
            f"{worst[0] * 100:.1f}% ({worst[1]['matrix']} {label(worst[1])}, "
            f"{worst[2]})")


def rep_pressure(rep):
    """A repetition's pressure evidence (ppipe-bench's "pressure"), or {}."""
    value = rep.get("pressure")
    return value if isinstance(value, dict) else {}


def number(value):
    """value if it is a number (not a boolean), else None."""
    return value if isinstance(value, (int, float)) \
        and not isinstance(value, bool) else None


def helper_share(rep):
    """The pressure helpers' CPU time over the run, in CPUs, or None."""
    helper = rep_pressure(rep).get("helper")
    return number(helper.get("cpu_share")) if isinstance(helper, dict) \
        else None


RECLAIM_SCOPES = {"benchmark": "in the benchmark's own tasks",
                  "cgroup": "in the benchmark's memory cgroup",
                  "system": "anywhere on the system"}


def pressure_warning(results):
    """Warning lines: plain runs under pressure that saw no direct reclaim
    (libppipe's runs may rightly see none: it allocates no pipe pages), and
    helpers that took more than HELPER_CPU_WARN of one CPU, which makes a
    run measure CPU contention too."""
    bad, hot, scopes, helpers = [], [], set(), set()
    for r in results:
        base = r["baseline"]["reps"]
        scopes |= {rep_pressure(rep).get("direct_reclaim_scope")
                   for rep in base}
        n = sum(1 for rep in base
                if not rep_pressure(rep).get("direct_reclaim"))
        if n:
            bad.append(f"{label(r)} plain ({n} of {len(base)})")
        for side in result_sides(r):
            reps = side_of(r, side)["reps"]
            shares = [v for v in map(helper_share, reps) if v is not None]
            if shares and max(shares) > HELPER_CPU_WARN:
                hot.append(f"{label(r)} {side_name(side)} "
                           f"(up to {100 * max(shares):.0f}%)")
                helpers |= {str((rep_pressure(rep).get("helper") or {})
                                .get("what")) for rep in reps}
    bar = "!" * 72
    lines = []
    if bad:
        where = "; ".join(RECLAIM_SCOPES[s] for s in sorted(
            x for x in scopes if x in RECLAIM_SCOPES)) or "anywhere"
        lines += [bar,
                  "!! WARNING: these plain runs saw NO direct reclaim "
                  f"({where});",
                  "!! their numbers are not \"under memory pressure\" "
                  "numbers:"] + [f"!!   {b}" for b in bad] + [bar, ""]
    if hot:
        lines += [bar,
                  f"!! WARNING: the pressure's helpers ({', '.join(sorted(helpers))}) "
                  f"took more than {100 * HELPER_CPU_WARN:.0f}% of one CPU;",
                  "!! these runs measure CPU contention as well as memory "
                  "pressure:"] + [f"!!   {h}" for h in hot] + [bar, ""]
    return lines


def evidence_row(r):
    """A result's short name in the evidence table."""
    text = f"{r['matrix']} {r['mode']} {r['writers']}x{r['readers']} " \
        f"{r['size']} B"
    if r.get("work_x") is not None:
        text += f" work {r['work_x']}x"
    return text


def rep_evidence(rep):
    """(reclaimed, stall in us per second, limit hits or direct scans per
    second, helper CPU share) of one repetition; None where unknown."""
    pr = rep_pressure(rep)
    wall = number(pr.get("wall_s"))
    stall = number(pr.get("bench_stall_us"))
    memcg = pr.get("memcg_delta") if isinstance(pr.get("memcg_delta"),
                                                dict) else None
    vmstat = pr.get("vmstat_delta") if isinstance(pr.get("vmstat_delta"),
                                                  dict) else {}
    if memcg is not None:
        hits = number(memcg.get("max_events", memcg.get("failcnt")))
    else:
        hits = number(vmstat.get("pgscan_direct"))
    per_s = hits / wall if hits is not None and wall else None
    stall_per_s = stall / wall if stall is not None and wall else None
    return bool(pr.get("direct_reclaim")), stall_per_s, per_s, helper_share(rep)


def pressure_evidence(results):
    """The table of reclaim evidence per result and side: how many
    repetitions reclaimed, the benchmark's memory stall, the cgroup's limit
    hits (or the system's direct scans) per second, the helpers' CPU."""
    first = next((rep_pressure(rep) for r in results
                  for rep in r["baseline"]["reps"] if rep_pressure(rep)), {})
    if not first:
        return []
    method = first.get("method")
    mode = first.get("mode") or "memcg"
    rate = {"cgroup-v2": "memcg max/s", "cgroup-v1": "failcnt/s"}.get(
        method, "pgscan_direct/s")
    scope = RECLAIM_SCOPES.get(first.get("direct_reclaim_scope"),
                               "anywhere")
    lines = [f"== Memory pressure evidence: {mode}, {method}, "
             f"{first.get('stressor')} ==",
             f"   reclaim: repetitions with direct reclaim {scope}; stall: "
             "the benchmark's memory stall",
             f"   in us per second of the run (median); {rate}: "
             + ("the cgroup's limit hits" if method != "global" else
                "the system's direct reclaim scans")
             + " per second (median); helper CPU: share of one CPU (max)", ""]
    header = ["run", "side", "reclaim", "stall us/s", rate, "helper CPU"]
    body = []
    for r in results:
        for k, side in enumerate(result_sides(r)):
            reps = side_of(r, side)["reps"]
            ev = [rep_evidence(rep) for rep in reps]

            def med(i, ev=ev):
                vals = [e[i] for e in ev if e[i] is not None]
                return statistics.median(vals) if vals else None
            shares = [e[3] for e in ev if e[3] is not None]
            stall, hits = med(1), med(2)
            body.append([evidence_row(r) if not k else "", side_name(side),
                         f"{sum(e[0] for e in ev)}/{len(ev)}",
                         "n/a" if stall is None else f"{stall:.0f}",
                         "n/a" if hits is None else f"{hits:.0f}",
                         f"{100 * max(shares):.1f}%" if shares else "n/a"])
    return lines + table_lines(header, body, indent=2, align="llrrrr") + [""]


def paired_change(none, pressed):
    """The median over repetitions of (libppipe/plain under pressure) over
    (libppipe/plain without), repetition by repetition; None if unknown."""
    if not none or not pressed:
        return None
    values = []
    for a, b, c, d in zip(none["baseline"]["reps"], none["shim"]["reps"],
                          pressed["baseline"]["reps"], pressed["shim"]["reps"]):
        if a["mbps"] > 0 and b["mbps"] > 0 and c["mbps"] > 0:
            values.append((d["mbps"] / c["mbps"]) / (b["mbps"] / a["mbps"]))
    return statistics.median(values) if values else None


def conditions_table(results, modes, note):
    """With --memory-pressure=none,memcg,...: each configuration's ratio
    under each condition side by side, and what each pressure mode does to
    the ratio: in every repetition, the ratio under the mode over the ratio
    without pressure (both measured back to back, so that the machine's
    slower and faster spells fall on both), and the median of those."""
    if any("ratio_mbps" not in r for r in results):
        return []
    cells = {}
    for r in results:
        key = tuple(r.get(f) for f in ("matrix", "mode", "writers", "readers",
                                       "hops", "size", "pipe_size",
                                       "work_x"))
        cells.setdefault(key, {})[r.get("pressure_mode") or NO_PRESSURE] = r
    against = [m for m in modes if m != NO_PRESSURE] \
        if NO_PRESSURE in modes else []
    lines = [f"== Each configuration under each condition ({note}, "
             "interleaved in every repetition) ==",
             f"   plain -> {shim_name()} MB/s and the ratio per condition"
             + ("; vs none: the median over repetitions of the ratio under "
                "pressure over the ratio without it in the same repetition"
                if against else ""), ""]
    header = ["configuration"]
    for m in modes:
        header += [f"{m}: MB/s", "ratio"]
    header += [f"{m} vs none" for m in against]
    body, ratios = [], {m: [] for m in modes}
    change = {m: [] for m in against}
    for per in cells.values():
        first = next(iter(per.values()))
        row = [evidence_row(first)]
        for m in modes:
            r = per.get(m)
            if r is None:
                row += ["-", "-"]
                continue
            row += [f"{fmt_num(r['baseline']['mbps'])} -> "
                    f"{fmt_num(r['shim']['mbps'])}",
                    f"{r['ratio_mbps']:.2f}" if r["ratio_mbps"] else "n/a"]
            if r["ratio_mbps"]:
                ratios[m].append(r["ratio_mbps"])
        for m in against:
            v = paired_change(per.get(NO_PRESSURE), per.get(m))
            if v:
                change[m].append(v)
                row.append(f"{100 * (v - 1):+.0f}%")
            else:
                row.append("n/a")
        body.append(row)
    geo = ["geomean"]
    for m in modes:
        geo += ["", f"{geomean(ratios[m]):.2f}" if ratios[m] else "n/a"]
    geo += [f"{100 * (geomean(change[m]) - 1):+.0f}%" if change[m] else "n/a"
            for m in against]
    align = "l" + "rr" * len(modes) + "r" * len(against)
    return lines + table_lines(header, body + [geo], indent=2,
                               align=align) + [""]


def memcpy_reference(bench, envs):
    """One thread's memcpy bandwidth for 1 MiB blocks, MB/s (None if unknown)."""
    return measure_memcpy(bench, envs, 1048576)[0]


def memcpy_line(results, memcpy_mbps):
    """1 MiB pipe throughput as a share of one thread's memcpy."""
    if not memcpy_mbps:
        return []
    for r in results:
        if r["size"] == 1048576 and r["writers"] == 1 and r["readers"] == 1 \
                and r["matrix"] != "pipeline":
            b = r["baseline"]["mbps"]
            others = "".join(
                f", {side_name(side)} {side_of(r, side)['mbps']:.0f} MB/s "
                f"({100 * side_of(r, side)['mbps'] / memcpy_mbps:.0f}%)"
                for side in result_sides(r)[1:])
            return [f"1 MiB writes, {r['mode']} 1x1: plain {b:.0f} MB/s "
                    f"({100 * b / memcpy_mbps:.0f}% of one thread's memcpy, "
                    f"{memcpy_mbps:.0f} MB/s){others}"]
    return []


def program_skip_lines(settings):
    """The pipelines of real programs left out, and why."""
    skipped = (settings.get("programs") or {}).get("skipped") or {}
    lines = [f"  pipeline of real programs {shape}: skipped, {why}"
             for shape, why in skipped.items()]
    return lines + [""] if lines else []


def run_report(results, settings, memcpy_mbps=None):
    """The text report for a finished run."""
    note = f"median of {settings['reps']}"
    sides = result_sides(results[0])
    results, over = split_overhead(results)
    over_settings = settings.get("overhead") or {}
    over_note = f"median of {over_settings.get('reps')}"
    skipped = over_settings.get("skipped") or {}
    no_empty = (over_settings.get("empty") or {}).get("skipped")
    pressured = [r for r in results if r.get("memory_pressure")]
    warning = pressure_warning(pressured) if pressured else []
    if sides == ["baseline", "shim"]:
        rows = [(r, r["baseline"], r["shim"]) for r in results]
        view = View(RUN_METRICS, f"plain -> {shim_name()}", note, "ratio",
                    CPU_RATIO_HEAD)
        lines = warning + report_tables(rows, view)
        lines += program_skip_lines(settings)
        lines += overhead_tables(over, sides, over_note, skipped, no_empty)
        if rows:
            lines.append(summary_line(rows, f"{shim_name()}/plain"))
            lines += [line for line in [cpu_summary_line(
                rows, f"{shim_name()}/plain")] if line]
    else:
        lines = warning + side_by_side_tables(results, sides, note)
        lines += program_skip_lines(settings)
        lines += overhead_tables(over, sides, over_note, skipped, no_empty)
        for side in sides[1:] if results else ():
            rows = [(r, r["baseline"], side_of(r, side)) for r in results]
            lines.append(summary_line(rows, f"{side}/plain"))
            lines += [line for line in [cpu_summary_line(
                rows, f"{side}/plain")] if line]
    if over:
        lines += [overhead_summary_line(over, side,
                                        f"{side_name(side)}/plain")
                  for side in sides[1:]]
    if results:
        lines.append(spread_line(results))
    if over:
        lines.append(overhead_spread_line(over))
    lines += memcpy_line(results, memcpy_mbps)
    if settings.get("pressure_modes") and results:
        lines += [""] + conditions_table(results, settings["pressure_modes"],
                                         note)
    for mode in dict.fromkeys(r.get("pressure_mode") for r in pressured):
        lines += [""] + pressure_evidence(
            [r for r in pressured if r.get("pressure_mode") == mode])
    if any("NO direct reclaim" in w for w in warning):
        lines.append("WARNING: some plain runs saw no direct reclaim (see top).")
    if any("CPU contention" in w for w in warning):
        lines.append("WARNING: the pressure's helpers took more than "
                     f"{100 * HELPER_CPU_WARN:.0f}% of one CPU (see top).")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- files


def write_json(path, doc):
    """Save the full result document ('-': to stdout)."""
    if path == "-":
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        sys.stdout.flush()
        return
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def csv_cell(value):
    """A CSV cell: JSON's booleans, empty for None."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else value


def write_csv(path, results):
    """One row per configuration; with --config, one per configuration
    and side (plain is "baseline"). The overhead matrix's rows leave the
    throughput columns empty and fill their own, at the end (ratio_time
    is preloaded/plain time: lower is better), then the empty library's,
    when it ran beside the library (with --config, its rows follow
    plain's). CPU per GiB follows, when a throughput matrix ran, and the
    pipelines of real programs' own columns last, when they ran."""
    over = any(is_overhead(r) for r in results)
    empty = any(is_overhead(r) and "empty" in r for r in results)
    cpu = not all(is_overhead(r) for r in results)
    progs = any(is_program(r) for r in results)
    # Which pressure mode, only in runs under one: memcg and hog apart.
    modes = ("pressure_mode",) if any(r.get("pressure_mode")
                                      for r in results) else ()
    with open(path, "w", encoding="utf-8", newline="") as f:
        out = csv.writer(f)
        if "configs" in results[0]:
            fields = MULTI_CSV_FIELDS + modes \
                + (MULTI_OVERHEAD_CSV_FIELDS if over else ()) \
                + (MULTI_EMPTY_CSV_FIELDS if empty else ()) \
                + (MULTI_CPU_CSV_FIELDS if cpu else ()) \
                + (MULTI_PROGRAM_CSV_FIELDS if progs else ())
            out.writerow(fields)
            for r in results:
                sides = result_sides(r)
                if "empty" in r:
                    sides.insert(1, "empty")
                for side in sides:
                    flat = dict(r, config=side, **side_of(r, side))
                    out.writerow([csv_cell(flat.get(k)) for k in fields])
            return
        # The work matrix's column only when it ran: other runs keep theirs.
        fields = CSV_FIELDS + (("work_ns",) if any("work_ns" in r
                                                   for r in results) else ())
        fields += modes
        fields += OVERHEAD_CSV_FIELDS if over else ()
        fields += EMPTY_CSV_FIELDS if empty else ()
        fields += CPU_CSV_FIELDS if cpu else ()
        fields += PROGRAM_CSV_FIELDS if progs else ()
        out.writerow(fields)
        for r in results:
            flat = dict(r)
            flat.setdefault("hops", None)
            flat.setdefault("work_ns", None)
            if "empty" in r:
                flat["empty_ns_per_op"] = r["empty"]["ns_per_op"]
                flat["empty_ratio_time"] = r["empty"]["ratio_time"]
            for side in SIDES:
                if is_overhead(r):
                    flat[f"{side}_ns_per_op"] = r[side]["ns_per_op"]
                    continue
                for key in ("mbps", "lat_avg_ns", "lat_p99_ns",
                            "spread_mbps"):
                    flat[f"{side}_{key}"] = r[side][key]
                for key in CPU_METRICS + ("wall_s",):
                    flat[f"{side}_{key}"] = r[side].get(key)
            out.writerow([csv_cell(flat.get(k)) for k in fields])


def size_label(n):
    """Tick label for a write size: 4K, 32K, 1M, 128."""
    if n >= 1 << 20:
        return f"{n / (1 << 20):.3g}M"
    if n >= 1 << 10:
        return f"{round(n / 1024)}K"
    return str(n)


def ratio_colour(value):
    """Diverging colour around 1.0: red below, white at 1.0, green above.

    Returns (fill, text colour). Saturates at 0.71x and 1.41x.
    """
    if not value:
        return "#cccccc", "#000000"
    t = max(-1.0, min(1.0, math.log2(value) / 0.5))
    end = (215, 48, 39) if t < 0 else (26, 152, 80)
    mix = [round(255 + (e - 255) * abs(t)) for e in end]
    return "#%02x%02x%02x" % tuple(mix), "#ffffff" if abs(t) > 0.65 else \
        "#000000"


class Svg:
    """Minimal SVG builder."""

    def __init__(self):
        self.parts = []

    def text(self, x, y, content, size=12, anchor="start", weight="normal",
             fill="#000000", rotate=None, cls=None):
        """Add escaped text."""
        extra = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' \
            if rotate is not None else ""
        extra += f' class="{cls}"' if cls else ""
        self.parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" '
            f'text-anchor="{anchor}" font-weight="{weight}" '
            f'fill="{fill}"{extra}>{escape(str(content))}</text>')

    def line(self, x1, y1, x2, y2, stroke="#000000", width=1, dash=None):
        """Add a line."""
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
            f'stroke="{stroke}" stroke-width="{width}"{extra}/>')

    def rect(self, x, y, w, h, fill, cls=None, title=None, stroke="#ffffff"):
        """Add a rectangle, optionally with a hover title."""
        attrs = (f'x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                 f'fill="{fill}" stroke="{stroke}"')
        if cls:
            attrs += f' class="{cls}"'
        if title:
            self.parts.append(f"<rect {attrs}><title>{escape(title)}</title>"
                              "</rect>")
        else:
            self.parts.append(f"<rect {attrs}/>")

    def raw(self, markup):
        """Add pre-built markup."""
        self.parts.append(markup)


SVG_WIDTH = 960
BASE_COLOUR = "#e08214"
SHIM_COLOUR = "#2166ac"


def svg_heatmap(svg, y, key, rows):
    """Writers x readers ratio heatmap; returns the next free y."""
    mode, size, pipe, mp, pmode = key
    writers = sorted({r["writers"] for r in rows})
    readers = sorted({r["readers"] for r in rows})
    cw, ch, left = 170, 64, 110
    svg.text(20, y + 18, f"Throughput ratio {shim_name()}/plain: {mode}, "
             f"{size_label(size)} writes, {human_bytes(pipe)} pipe, "
             f"{pressure_label(mp, pmode)}", size=15, weight="bold")
    top = y + 70
    svg.text(left + cw * len(readers) / 2, top - 24, "readers", size=13,
             anchor="middle", weight="bold")
    svg.text(left - 62, top + ch * len(writers) / 2, "writers", size=13,
             anchor="middle", weight="bold", rotate=-90)
    for j, n in enumerate(readers):
        svg.text(left + cw * (j + 0.5), top - 6, f"{n}", anchor="middle")
    for i, w in enumerate(writers):
        svg.text(left - 10, top + ch * (i + 0.5) + 4, f"{w}", anchor="end")
    cells = {(r["writers"], r["readers"]): r for r in rows}
    for i, w in enumerate(writers):
        for j, n in enumerate(readers):
            r = cells.get((w, n))
            x, cy = left + cw * j, top + ch * i
            if r is None:
                svg.rect(x, cy, cw, ch, "#eeeeee")
                continue
            fill, ink = ratio_colour(r["ratio_mbps"])
            base, shim = r["baseline"]["mbps"], r["shim"]["mbps"]
            svg.rect(x, cy, cw, ch, fill, cls="heatmap-cell",
                     title=f"{label(r)}: {base:.0f} -> {shim:.0f} MB/s")
            svg.text(x + cw / 2, cy + 28, f"{fmt_num(r['ratio_mbps'])}x",
                     size=17, anchor="middle", weight="bold", fill=ink)
            svg.text(x + cw / 2, cy + 48, f"{base:.0f} \u2192 {shim:.0f} MB/s",
                     size=11, anchor="middle", fill=ink)
    svg_colour_key(svg, left + cw * len(readers) + 40, top,
                   max(ch * len(writers), 120))
    return top + max(ch * len(writers), 120) + 30


def svg_colour_key(svg, x, y, height):
    """Vertical colour bar for the diverging ratio scale."""
    steps = 24
    for k in range(steps):
        value = 2 ** (0.5 - k / (steps - 1))        # 1.41 down to 0.71
        svg.rect(x, y + height * k / steps, 18, height / steps + 0.5,
                 ratio_colour(value)[0], stroke="none")
    svg.rect(x, y, 18, height, "none", stroke="#666666")
    svg.text(x, y - 8, "ratio", size=11)
    for value, frac in ((1.41, 0.0), (1.0, 0.5), (0.71, 1.0)):
        svg.text(x + 24, y + height * frac + 4, f"{value:.2f}x", size=11)


def nice_step(span, ticks=5):
    """A 1/2/5 x 10^k step giving about `ticks` intervals over span."""
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 5, 10):
        if mult * mag >= raw:
            return mult * mag
    return 10 * mag


def svg_size_chart(svg, y, key, rows):
    """Throughput against write size, one line per side; returns next y."""
    mode, w, r, pipe, mp, pmode = key
    rows = sorted(rows, key=lambda row: row["size"])
    svg.text(20, y + 18, f"Throughput vs write size: {mode} {w}x{r}, "
             f"{human_bytes(pipe)} pipe, {pressure_label(mp, pmode)}",
             size=15, weight="bold")
    x0, y0, pw, ph = 100, y + 40, SVG_WIDTH - 160, 280
    logs = [math.log2(row["size"]) for row in rows]
    lo, hi = min(logs) - 0.4, max(logs) + 0.4
    top = max(row[s]["mbps"] for row in rows for s in SIDES) * 1.1
    step = nice_step(top)
    top = math.ceil(top / step) * step

    def px(size):
        return x0 + (math.log2(size) - lo) / (hi - lo) * pw

    def py(value):
        return y0 + ph - value / top * ph

    for k in range(int(round(top / step)) + 1):
        tick = k * step
        svg.line(x0, py(tick), x0 + pw, py(tick), stroke="#dddddd")
        svg.text(x0 - 8, py(tick) + 4, f"{tick:g}", size=11, anchor="end")
    for row in rows:
        svg.line(px(row["size"]), y0 + ph, px(row["size"]), y0 + ph + 5)
        svg.text(px(row["size"]), y0 + ph + 19, size_label(row["size"]),
                 size=11, anchor="middle")
    svg.line(x0, y0 + ph, x0 + pw, y0 + ph)
    svg.line(x0, y0, x0, y0 + ph)
    svg.text(x0 + pw / 2, y0 + ph + 40, "write size (bytes, log2 scale)",
             size=13, anchor="middle")
    svg.text(x0 - 62, y0 + ph / 2, "throughput (MB/s)", size=13,
             anchor="middle", rotate=-90)
    for side, colour, name in (("baseline", BASE_COLOUR, "plain pipe"),
                               ("shim", SHIM_COLOUR, shim_name())):
        points = " ".join(f"{px(row['size']):.1f},{py(row[side]['mbps']):.1f}"
                          for row in rows)
        svg.raw(f'<polyline class="series {side}" points="{points}" '
                f'fill="none" stroke="{colour}" stroke-width="2.5"/>')
        for row in rows:
            tip = escape(f"{name}, {row['size']} B: "
                         f"{row[side]['mbps']:.0f} MB/s")
            svg.raw(f'<circle class="point {side}" '
                    f'cx="{px(row["size"]):.1f}" '
                    f'cy="{py(row[side]["mbps"]):.1f}" r="4" '
                    f'fill="{colour}"><title>{tip}</title></circle>')
    for k, (colour, name) in enumerate(((BASE_COLOUR, "plain pipe"),
                                        (SHIM_COLOUR, shim_name()))):
        lx = SVG_WIDTH - 250 + 120 * k
        svg.line(lx, y + 14, lx + 30, y + 14, stroke=colour, width=2.5)
        svg.text(lx + 36, y + 18, name, size=12)
    return y0 + ph + 66


def svg_table_head(svg, y, cols):
    """A table's header line, (x, name) per column, under a title at y;
    returns the y of the header."""
    head = y + 46
    for x, name in cols:
        svg.text(x, head, name, size=12, weight="bold")
    svg.line(20, head + 6, SVG_WIDTH - 20, head + 6, stroke="#999999")
    return head


def svg_result_table(svg, y, title, heads, rows, values, cls):
    """Results as a table: three columns of values(result), both sides'
    MB/s, and the ratio in a coloured cell; returns the next free y."""
    svg.text(20, y + 18, title, size=15, weight="bold")
    cols = list(zip((30, 150, 310), heads)) + [
        (430, "plain MB/s"), (570, f"{shim_name()} MB/s"), (730, "ratio")]
    head = svg_table_head(svg, y, cols)
    for k, r in enumerate(rows):
        ry = head + 12 + 24 * k
        fill, ink = ratio_colour(r["ratio_mbps"])
        svg.raw(f'<g class="{cls}">')
        svg.rect(720, ry, 110, 22, fill, title=label(r))
        cells = tuple(values(r)) + (fmt_num(r["baseline"]["mbps"]),
                                    fmt_num(r["shim"]["mbps"]))
        for (x, _), value in zip(cols, cells):
            svg.text(x, ry + 16, value, size=12)
        svg.text(730, ry + 16, f"{fmt_num(r['ratio_mbps'])}x", size=12,
                 weight="bold", fill=ink)
        svg.raw("</g>")
    return head + 12 + 24 * len(rows) + 30


def svg_small_table(svg, y, rows):
    """Small-write results as a table with coloured ratio cells."""
    return svg_result_table(
        svg, y, "Small writes (goal: no regression)",
        ("mode", "writers x readers", "size (B)"), rows,
        lambda r: (r["mode"], f"{r['writers']}x{r['readers']}", r["size"]),
        "small-row")


def svg_pipeline_table(svg, y, rows):
    """sh pipeline results as a table with coloured ratio cells."""
    pipes = ", ".join(sorted({human_bytes(r["pipe_size"]) for r in rows}))
    rows = sorted(rows, key=lambda r: (r["hops"], r["size"]))
    return svg_result_table(
        svg, y, f"sh pipelines of exec'd programs ({pipes} pipes)",
        ("stages", "", "write size (B)"), rows,
        lambda r: (PIPELINE_SHAPES.get(r["hops"], hops_label(r["hops"])), "",
                   r["size"]),
        "pipeline-row")


def svg_program_table(svg, y, rows):
    """Pipelines of real programs as a table with coloured ratio cells."""
    return svg_result_table(
        svg, y, "Pipelines of real programs (sh -c, the library in every "
        "stage)", ("pipeline", "", ""), rows,
        lambda r: (r["shape"], "", ""), "program-row")


def svg_work_table(svg, y, rows):
    """Work matrix results as a table with coloured ratio cells."""
    rows = sorted(rows, key=lambda r: r["work_ns"])
    return svg_result_table(
        svg, y, "Producer work before each write (1x = one thread's memcpy "
        "of a write)", ("work (ns)", "x memcpy", "W x R, size (B)"), rows,
        lambda r: (r["work_ns"], f"{r['work_x']}x",
                   f"{r['writers']}x{r['readers']}, {r['size']}"),
        "work-row")


def svg_overhead_table(svg, y, rows, reps):
    """Overhead results as a table: both sides' ns per operation and the
    time ratio in a coloured cell, red where the library costs (the
    colour scale of the throughput ratios, turned around), and the empty
    library's time ratio when it ran; returns the next free y."""
    svg.text(20, y + 18, f"What {shim_name()} costs where it cannot help: "
             f"time ratio {shim_name()}/plain, lower is better (median of "
             f"{reps})", size=15, weight="bold")
    cols = [(30, "row"), (150, "what"), (430, "plain ns/op"),
            (570, f"{shim_name()} ns/op"), (730, "time ratio")]
    empty = any("empty" in r for r in rows)
    if empty:
        cols.append((850, "empty/plain"))
    head = svg_table_head(svg, y, cols)
    for k, r in enumerate(rows):
        ry = head + 12 + 24 * k
        rat = r["ratio_time"]
        fill, ink = ratio_colour(1 / rat if rat else None)
        svg.raw('<g class="overhead-row">')
        svg.rect(720, ry, 110, 22, fill, title=f"{label(r)}, {r['n']} "
                 "operations per run")
        cells = (label(r), overhead_what(r),
                 fmt_num(r["baseline"]["ns_per_op"]),
                 fmt_num(r["shim"]["ns_per_op"]))
        for (x, _), value in zip(cols, cells):
            svg.text(x, ry + 16, value, size=12)
        svg.text(730, ry + 16, f"{fmt_num(rat)}x", size=12, weight="bold",
                 fill=ink)
        if empty and "empty" in r:
            svg.text(850, ry + 16, f"{fmt_num(r['empty']['ratio_time'])}x",
                     size=12)
        svg.raw("</g>")
    return head + 12 + 24 * len(rows) + 30


def svg_report(doc):
    """The whole SVG report as a string."""
    host, lib, st = doc["host"], doc["library"], doc["settings"]
    results = doc["results"]
    set_shim_name(lib["path"])
    body = Svg()
    body.text(20, 32, f"{shim_name()} vs plain pipes (ppipe-compare "
              f"{doc['version']})", size=20, weight="bold")
    dot = " \u00b7 "
    body.text(20, 54, f"kernel {host['kernel']}{dot}{host['cpu'] or 'cpu ?'}"
              f"{dot}{host['cores']} cores{dot}{doc['created']}", size=12)
    env = " ".join(f"{k}={v}" for k, v in lib["env"].items())
    body.text(20, 72, f"library {lib['path']}" + (f" ({env})" if env else ""),
              size=12)
    runs = f"{st['duration_s']:g} s runs"
    if any(r["matrix"] == "pipeline" for r in results) \
            and st["pipeline_duration_s"] != st["duration_s"]:
        runs += f" ({st['pipeline_duration_s']:g} s for pipelines)"
    if all(is_overhead(r) for r in results):
        body.text(20, 90, f"{st['matrix']} matrix, overhead rows only, "
                  f"median of {st['overhead']['reps']} runs per side",
                  size=12)
    else:
        body.text(20, 90, f"{st['matrix']} matrix, median of {st['reps']} x "
                  f"{runs} per side, "
                  f"{pressure_label(st['memory_pressure'], st.get('pressure_mode'))}",
                  size=12)
    y = 110
    by_matrix = {m: [r for r in results if r["matrix"] == m]
                 for m in MATRICES}
    sweep_groups = {}
    for r in by_matrix["sweep"]:
        key = (r["mode"], r["size"], r["pipe_size"], r["memory_pressure"],
               r.get("pressure_mode"))
        sweep_groups.setdefault(key, []).append(r)
    for key, rows in sweep_groups.items():
        y = svg_heatmap(body, y, key, rows)
    size_groups = {}
    for r in by_matrix["sizes"]:
        key = (r["mode"], r["writers"], r["readers"], r["pipe_size"],
               r["memory_pressure"], r.get("pressure_mode"))
        size_groups.setdefault(key, []).append(r)
    for key, rows in size_groups.items():
        y = svg_size_chart(body, y, key, rows)
    if by_matrix["small"]:
        y = svg_small_table(body, y, by_matrix["small"])
    stages = [r for r in by_matrix["pipeline"] if not is_program(r)]
    if stages:
        y = svg_pipeline_table(body, y, stages)
    if any(is_program(r) for r in by_matrix["pipeline"]):
        y = svg_program_table(body, y, [r for r in by_matrix["pipeline"]
                                        if is_program(r)])
    if by_matrix["work"]:
        y = svg_work_table(body, y, by_matrix["work"])
    if by_matrix["overhead"]:
        y = svg_overhead_table(body, y, by_matrix["overhead"],
                               st.get("overhead", {}).get("reps", "?"))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_WIDTH}" '
            f'height="{y:.0f}" viewBox="0 0 {SVG_WIDTH} {y:.0f}" '
            'font-family="sans-serif">\n'
            f'<rect x="0" y="0" width="{SVG_WIDTH}" height="{y:.0f}" '
            'fill="#ffffff"/>\n' + "\n".join(body.parts) + "\n</svg>\n")


def write_svg(path, doc):
    """Save the SVG report."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(svg_report(doc))


# ---------------------------------------------------------------- commands


def cmd_run(argv):
    """The default command: run the matrix and report."""
    parser = run_parser()
    args = parser.parse_args(argv)
    preset = PRESETS[args.preset]
    extra_env = parse_env(parser, args.env)
    named = parse_configs(parser, args.config)
    if named and args.svg:
        parser.error("--svg draws plain pipes against one library: with "
                     "--config, use --json or --csv")
    conditions = args.memory_pressure.split(",") if args.memory_pressure \
        else []
    settings = {"matrix": args.preset,
                "reps": args.reps or preset["reps"],
                "duration_s": args.duration or preset["duration"],
                "pipeline_duration_s": (args.duration
                                        or preset["pipeline_duration"]),
                "memory_pressure": bool(conditions),
                "pressure_mode": args.memory_pressure,
                "verify": args.verify,
                "pin": args.pin}
    if len(conditions) > 1:
        settings["pressure_modes"] = conditions
    if args.filler_cpu is not None:
        if "memcg" not in conditions:
            parser.error("--filler-cpu applies to --memory-pressure=memcg")
        settings["filler_cpu"] = args.filler_cpu
    configs = build_matrix(args.preset, args.only, args.memory_pressure,
                           args.program_bytes)
    if args.memory_pressure and not args.only and not args.quiet:
        sys.stderr.write(f"{PROG}: the pipeline matrix is left out: it does "
                         "not run under --memory-pressure\n")
        sys.stderr.write(f"{PROG}: the overhead matrix is left out: it does "
                         "not run under --memory-pressure\n")
    lib = resolve_lib(args.lib)
    set_shim_name(lib)
    programs = {"bench": resolve_bench(args.bench)}
    pipelines = any(c["matrix"] == "pipeline" for c in configs)
    if pipelines:
        programs["stage"] = resolve_stage(args.stage)
    for option in ("json", "csv", "svg"):
        check_output(f"--{option}", getattr(args, option))
    envs = child_envs(lib, extra_env, named)
    if any(is_program(c) for c in configs):
        configs, skipped = program_skips(configs, envs["baseline"])
        settings["programs"] = {
            "bytes": args.program_bytes or preset["program_bytes"],
            "skipped": skipped}
        for shape, why in skipped.items():
            if not args.quiet:
                sys.stderr.write(f"{PROG}: pipeline of real programs {shape} "
                                 f"skipped: {why}\n")
    if any(is_overhead(c) for c in configs):
        programs["overhead"] = resolve_overhead(args.overhead)
        configs, skipped = overhead_skips(configs, envs["baseline"])
        empty, no_empty = resolve_empty(args.empty)
        settings["overhead"] = {
            "reps": max(settings["reps"], OVERHEAD_MIN_REPS[args.preset]),
            "ratio_time": TIME_RATIO_NOTE, "skipped": skipped,
            "empty": {"path": empty, "excess_time": EMPTY_NOTE} if empty
            else {"path": None, "skipped": no_empty}}
        for case, why in skipped.items():
            if not args.quiet:
                sys.stderr.write(f"{PROG}: overhead row {case} skipped: "
                                 f"{why}\n")
        if no_empty and not args.quiet:
            sys.stderr.write(f"{PROG}: the overhead matrix's empty-library "
                             f"column is left out: {no_empty}\n")
    probe(programs["bench"], lib, envs)
    if pipelines:
        probe_stage(programs["stage"], lib, envs)
    set_work(configs, programs["bench"], envs, settings)
    results = run_matrix(configs, programs, lib, envs, settings, args.quiet)
    host = host_info()
    host["memcpy_mbps_1m"] = memcpy_reference(programs["bench"], envs)
    doc = {"tool": PROG, "version": version(),
           "created": datetime.datetime.now(datetime.timezone.utc)
           .strftime("%Y-%m-%dT%H:%M:%SZ"),
           "argv": [PROG] + list(argv), "host": host,
           "library": {"path": lib, "env": extra_env},
           "settings": settings, "results": results}
    if named:
        doc["library"]["configs"] = [{"name": name, "env": env}
                                     for name, env in named]
    # With --json -, stdout is the JSON's: the report goes to stderr.
    report = sys.stderr if args.json == "-" else sys.stdout
    report.write(run_report(results, settings, host["memcpy_mbps_1m"]))
    report.flush()
    if args.json:
        write_json(args.json, doc)
    if args.csv:
        write_csv(args.csv, results)
    if args.svg:
        write_svg(args.svg, doc)
    return 0


def is_number(value):
    """True for an int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def well_formed_overhead(r):
    """True if a saved overhead result has what compare and fleet read."""
    if not all(k in r for k in ("case", "n", "baseline")):
        return False
    if "configs" in r:
        if not isinstance(r["configs"], dict) or not r["configs"]:
            return False
        sides = [r["baseline"]] + list(r["configs"].values())
    elif "shim" in r and "ratio_time" in r:
        sides = [r["baseline"], r["shim"]]
    else:
        return False
    return all(isinstance(s, dict) and is_number(s.get("ns_per_op"))
               for s in sides)


def well_formed(r):
    """True if a saved result entry has what compare reads."""
    if isinstance(r, dict) and is_overhead(r):
        return well_formed_overhead(r)
    if not isinstance(r, dict) or not all(k in r for k in RESULT_KEYS):
        return False
    if r.get("matrix") == "pipeline" and "hops" not in r:
        return False
    if "configs" in r:
        if not isinstance(r["configs"], dict) or not r["configs"]:
            return False
        sides = [r["baseline"]] + list(r["configs"].values())
    elif all(k in r for k in TWO_WAY_KEYS):
        sides = [r["baseline"], r["shim"]]
    else:
        return False
    return all(isinstance(s, dict) and all(k in s for k in COMPARED)
               for s in sides)


def read_result(path, strict=True):
    """Load a saved --json result: (document, None), or (None, why not).
    strict: every result entry must be well formed; else the malformed
    ones are dropped, and only a document without any is refused."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        return None, exc.strerror
    except (ValueError, UnicodeDecodeError):
        return None, "not a ppipe-compare result (not JSON)"
    problem = None
    if isinstance(doc, dict) and doc.get("tool") == f"{PROG} fleet":
        problem = "a fleet table, not a run"
    elif not isinstance(doc, dict) or doc.get("tool") != PROG:
        problem = "tool is not ppipe-compare"
    elif not isinstance(doc.get("results"), list) or not doc["results"]:
        problem = "no results"
    elif strict and not all(well_formed(r) for r in doc["results"]):
        problem = "malformed result entry"
    elif not any(well_formed(r) for r in doc["results"]):
        problem = "no well-formed result entry"
    if problem:
        return None, f"not a ppipe-compare result ({problem})"
    if not strict:
        doc = dict(doc, results=[r for r in doc["results"] if well_formed(r)])
    return doc, None


def load_result(path):
    """Load and sanity-check a saved --json result."""
    doc, why = read_result(path)
    if doc is None:
        raise Fatal(f"{PROG}: compare: {path}: {why}", 2)
    return doc


def result_key(r):
    """What makes two results comparable. Work cells match by their
    multiple of the copy time: each run measures its own. Overhead rows
    match by case and write size; pipelines of real programs by their
    shape, whatever each run's amount."""
    if is_overhead(r):
        return ("overhead", r["case"], r.get("size"))
    return (r["mode"], r["writers"], r["readers"], r.get("hops"), r["size"],
            r["pipe_size"], r["memory_pressure"], result_pressure_mode(r),
            r.get("work_x"), r.get("shape"))


def result_pressure_mode(r):
    """A result's pressure mode: files from before the modes existed ran
    the memcg filler."""
    if not r.get("memory_pressure"):
        return None
    return r.get("pressure_mode") or PRESSURE_MODES[0]


def side_values(r, side):
    """The values compared for one result: a side's medians or the ratios."""
    if is_overhead(r):
        if side != "ratio":
            return side_of(r, side)
        return {"ns_per_op": r.get("ratio_time")}
    if side != "ratio":
        return side_of(r, side)
    return {"mbps": r.get("ratio_mbps"), "lat_avg_ns": r.get("ratio_lat_avg"),
            "lat_p99_ns": r.get("ratio_lat_p99"),
            "cpu_s_per_gib": r.get("ratio_cpu_per_gib")}


def compare_overhead_lines(rows, side, notes):
    """compare's overhead table for (result, A values, B values) rows:
    time per operation (or, for the ratio side, the time ratio) A -> B,
    and its summary line; lower is better in both."""
    if not rows:
        return []
    what = "time ratio" if side == "ratio" else "ns/op"
    cells = pair_cells([(a["ns_per_op"], b["ns_per_op"]) for _, a, b in rows])
    body = []
    values = []
    for (r, a, b), cell in zip(rows, cells):
        rat = ratio(a["ns_per_op"], b["ns_per_op"])
        body.append([label(r), cell, f"{rat:.3f}" if rat else "n/a"])
        if rat:
            values.append((rat, r))
    lines = [f"== Overhead: time per operation, lower is better ({notes}) ==",
             ""]
    lines += table_lines(["row", f"{what} A -> B (delta)", "B/A"], body,
                         indent=2, align="lll")
    lines.append("")
    if values:
        worst = max(values, key=lambda t: t[0])
        lines.append(f"Summary, B/A {side} time per operation (overhead, "
                     f"lower is better): geomean "
                     f"{geomean([v for v, _ in values]):.3f} (worst "
                     f"{label(worst[1])} {worst[0]:.3f}, {len(values)} rows)")
    return lines


def check_side(path, doc, side):
    """Fail unless every result of a saved run has the side compared."""
    for r in doc["results"]:
        sides = result_sides(r) + ([] if "configs" in r else ["ratio"])
        if side not in sides:
            raise Fatal(f"{PROG}: compare: {path}: no side {side!r} (it has "
                        f"{', '.join(sides)})", 2)


def describe(tag, path, doc):
    """One-line description of a saved run."""
    host = doc.get("host") or {}
    lib = doc.get("library") or {}
    env = " ".join(f"{k}={v}" for k, v in (lib.get("env") or {}).items())
    names = [c.get("name", "?") for c in lib.get("configs") or []
             if isinstance(c, dict)]
    return (f"{tag}: {path}: {doc.get('created', '?')}, kernel "
            f"{host.get('kernel', '?')}, cpu {host.get('cpu') or '?'}, "
            f"library {lib.get('path', '?')}" + (f" {env}" if env else "")
            + (f", configs {' '.join(names)}" if names else ""))


def cmd_compare(argv):
    """The 'compare' command."""
    args = compare_parser().parse_args(argv)
    doc_a, doc_b = load_result(args.a), load_result(args.b)
    check_side(args.a, doc_a, args.side)
    check_side(args.b, doc_b, args.side)
    by_key_b = {result_key(r): r for r in doc_b["results"]}
    keys_a = {result_key(r) for r in doc_a["results"]}
    rows = [(a, side_values(a, args.side),
             side_values(by_key_b[result_key(a)], args.side))
            for a in doc_a["results"] if result_key(a) in by_key_b]
    over = [row for row in rows if is_overhead(row[0])]
    rows = [row for row in rows if not is_overhead(row[0])]
    reps = [(d.get("settings") or {}).get("reps", "?") for d in (doc_a, doc_b)]
    over_reps = [((d.get("settings") or {}).get("overhead") or {})
                 .get("reps", "?") for d in (doc_a, doc_b)]
    what = {"shim": "libppipe runs", "baseline": "plain-pipe runs",
            "ratio": "libppipe/plain ratios"}.get(args.side,
                                                  f"{args.side} runs")
    view = View(RATIO_METRICS if args.side == "ratio" else RUN_METRICS,
                "A -> B", f"A: median of {reps[0]}, B: median of {reps[1]}",
                "B/A", "CPU B/A (lower is better)")
    lines = [describe("A", args.a, doc_a), describe("B", args.b, doc_b),
             f"Comparing {what} ({args.side}): A -> B", ""]
    lines += report_tables(rows, view)
    if rows:
        lines.append(summary_line(rows, f"B/A {args.side}"))
        lines += [line for line in [cpu_summary_line(
            rows, f"B/A {args.side}")] if line]
    if over:
        lines += [""] if rows else []
        lines += compare_overhead_lines(
            over, args.side,
            f"A: median of {over_reps[0]}, B: median of {over_reps[1]}")
    only_a = [r for r in doc_a["results"] if result_key(r) not in by_key_b]
    only_b = [r for r in doc_b["results"] if result_key(r) not in keys_a]
    for tag, missing in (("A", only_a), ("B", only_b)):
        if missing:
            lines.append(f"Only in {tag} ({len(missing)}):")
            lines += [f"  {r['matrix']} {label(r)}" for r in missing]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


# ---------------------------------------------------------------- fleet


def fleet_parser():
    """Parser for the 'fleet' command."""
    p = Parser(prog=f"{PROG} fleet",
               formatter_class=argparse.RawDescriptionHelpFormatter,
               description="Fold the saved --json results of many hosts "
               "into one table:\ngeometric means per matrix, the worst "
               "cell and a verdict per host and kernel.",
               epilog=FLEET_RULE)
    p.add_argument("paths", nargs="+", metavar="FILE.json|DIR",
                   help="saved results; a directory stands for the *.json "
                   "files in it")
    p.add_argument("--json", metavar="OUT",
                   help="write the table as JSON; '-' writes it to stdout "
                   "and the text table to stderr")
    p.add_argument("--csv", metavar="OUT", help="write the table as CSV")
    return p


def fleet_note(text):
    """One line about an input on stderr."""
    sys.stderr.write(f"{PROG} fleet: {text}\n")


def fleet_files(paths):
    """The files named: directories stand for their *.json files (not
    recursively, sorted by name)."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if n.endswith(".json")
                           and os.path.isfile(os.path.join(path, n)))
            if not names:
                fleet_note(f"{path}: no *.json files")
            files += [os.path.join(path, n) for n in names]
        else:
            files.append(path)
    return files


def run_kind(doc, side):
    """What kind of run a file's side is: preset, library if not
    libppipe.so, --env, --config name, memory pressure ('quick', 'full
    uring', 'quick libppipe-passthru PPIPE_MIN_WRITE=8192',
    'quick memory-pressure')."""
    settings = doc.get("settings") if isinstance(doc.get("settings"),
                                                 dict) else {}
    lib = doc.get("library") if isinstance(doc.get("library"), dict) else {}
    words = [str(settings.get("matrix") or "?")]
    name = os.path.basename(str(lib.get("path") or "libppipe.so"))
    if name != "libppipe.so":
        words.append(name[:-3] if name.endswith(".so") else name)
    if isinstance(lib.get("env"), dict):
        words += [f"{k}={v}" for k, v in lib["env"].items()]
    if side != "shim":
        words.append(side)
    if settings.get("memory_pressure"):
        mode = settings.get("pressure_mode")
        words.append("memory-pressure" if mode in (None, PRESSURE_MODES[0])
                     else f"memory-pressure={mode}")
    return " ".join(words)


def fleet_ratio(r, side):
    """A result's ratio for one library side: MB/s libppipe/plain, or for
    the overhead matrix time libppipe/plain; None if it has none."""
    key = "ratio_time" if is_overhead(r) else "ratio_mbps"
    value = r.get(key) if side == "shim" else \
        (r["configs"].get(side) or {}).get(key)
    return value if is_number(value) and value > 0 else None


def fleet_cpu_ratio(r, side):
    """A throughput result's CPU per GiB ratio libppipe/plain for one
    library side; None if it has none (the overhead matrix, files saved
    before CPU was measured)."""
    value = r.get("ratio_cpu_per_gib") if side == "shim" else \
        (r["configs"].get(side) or {}).get("ratio_cpu_per_gib")
    return value if is_number(value) and value > 0 else None


def fleet_cells(doc):
    """{side: {cell key: (matrix, row label, ratio, CPU ratio or None)}}
    of one saved run."""
    sides = {}
    for r in doc["results"]:
        names = list(r["configs"]) if "configs" in r else ["shim"]
        for side in names:
            value = fleet_ratio(r, side)
            if value is not None:
                cells = sides.setdefault(side, {})
                cells[(r["matrix"],) + result_key(r)] = \
                    (r["matrix"], label(r), value, fleet_cpu_ratio(r, side))
    return sides


def slowdown(matrix, value):
    """How much slower a cell makes things: time ratio, or 1/throughput."""
    return value if matrix == "overhead" else 1 / value


def fleet_verdict(geo):
    """(verdict, reasons) from a row's geometric means (see FLEET_RULE)."""
    shown = {m: round(v, 3) for m, v in geo.items() if v is not None}
    costs = []
    if shown.get("overhead", 0) > OVERHEAD_COST_ABOVE:
        costs.append(f"overhead {shown['overhead']:.3f} > "
                     f"{OVERHEAD_COST_ABOVE:.2f}")
    costs += [f"{m} {shown[m]:.3f} < {THROUGHPUT_COST_BELOW:.2f}"
              for m in FLEET_THROUGHPUT
              if m in shown and shown[m] < THROUGHPUT_COST_BELOW]
    if costs:
        return "costs", costs
    gains = [f"{m} {shown[m]:.3f} >= {GAIN_AT:.2f}"
             for m in FLEET_GAIN_MATRICES
             if m in shown and shown[m] >= GAIN_AT]
    if gains:
        return "gains", gains
    return "no gain", [f"no {', '.join(FLEET_GAIN_MATRICES)} >= "
                       f"{GAIN_AT:.2f}"]


def fleet_row(key, runs):
    """One table row from the (path, cells) of the files of one host,
    kernel, CPU and kind of run."""
    hostname, kernel, cpu, kind = key
    merged, cpus = {}, {}
    for _, cells in runs:
        for cell, (matrix, name, value, cpu_ratio) in cells.items():
            merged.setdefault(cell, (matrix, name, []))[2].append(value)
            if cpu_ratio is not None:
                cpus.setdefault(cell, []).append(cpu_ratio)
    values = {cell: (matrix, name, statistics.median(vals))
              for cell, (matrix, name, vals) in merged.items()}
    cpu_cells = [statistics.median(vals) for vals in cpus.values()]
    geo, count = {}, {}
    for m in FLEET_MATRICES:
        mine = [v for matrix, _, v in values.values() if matrix == m]
        geo[m] = geomean(mine) if mine else None
        count[m] = len(mine)
    worst = None
    if values:
        matrix, name, value = max(values.values(),
                                  key=lambda t: slowdown(t[0], t[2]))
        worst = {"matrix": matrix, "row": name, "ratio": value,
                 "ratio_kind": "time" if matrix == "overhead"
                 else "throughput",
                 "slowdown": slowdown(matrix, value)}
    verdict, reasons = fleet_verdict(geo)
    return {"hostname": hostname, "kernel": kernel, "cpu": cpu, "run": kind,
            "files": [path for path, _ in runs], "geomean": geo,
            "cells": count, "worst": worst, "verdict": verdict,
            "reasons": reasons,
            "cpu_per_gib": {"geomean": geomean(cpu_cells) if cpu_cells
                            else None, "cells": len(cpu_cells)}}


def fleet_rows(files):
    """Read the files; return (rows, skipped [(path, why)])."""
    groups = {}
    skipped = []
    for path in files:
        doc, why = read_result(path, strict=False)
        if doc is None:
            fleet_note(f"{path}: skipped: {why}")
            skipped.append((path, why))
            continue
        host = doc.get("host") if isinstance(doc.get("host"), dict) else {}
        stem = os.path.basename(path)
        stem = stem[:-5] if stem.endswith(".json") else stem
        hostname = str(host.get("hostname") or stem)
        kernel = str(host.get("kernel") or "?")
        cpu = str(host.get("cpu") or "?")
        sides = fleet_cells(doc)
        if not sides:
            why = "no result with a ratio"
            fleet_note(f"{path}: skipped: {why}")
            skipped.append((path, why))
            continue
        present = {r["matrix"] for r in doc["results"]}
        missing = [m for m in FLEET_MATRICES if m not in present
                   and m != "work"]
        if missing:
            fleet_note(f"{path}: no {', '.join(missing)} results "
                       "(shown as - unless another file of its row has them)")
        for side, cells in sides.items():
            key = (hostname, kernel, cpu, run_kind(doc, side))
            groups.setdefault(key, []).append((path, cells))
    rows = [fleet_row(key, groups[key]) for key in sorted(groups)]
    return rows, skipped


def fleet_text(rows, files, skipped):
    """The fleet table as text."""
    matrices = [m for m in FLEET_MATRICES
                if m != "work" or any(r["geomean"]["work"] for r in rows)]
    lines = [f"{PROG} fleet: {len(files) - len(skipped)} of {len(files)} "
             f"files read, {len(rows)} rows",
             "Geometric means per matrix of libppipe/plain: throughput "
             f"ratios ({', '.join(m for m in matrices if m != 'overhead')}),"
             " higher is better;",
             "CPU/GiB: CPU seconds per GiB moved libppipe/plain over the "
             "throughput cells, lower is better (- where not measured);",
             "overhead: time ratio libppipe/plain, lower is better.", ""]
    throughput = [m for m in matrices if m != "overhead"]
    columns = throughput + ["CPU/GiB"] + \
        (["overhead"] if "overhead" in matrices else [])
    header = ["host", "kernel", "cpu", "run", "files"] + columns \
        + ["worst cell", "verdict", "why"]
    body = []
    for r in rows:
        worst = r["worst"]
        geo = dict(r["geomean"], **{"CPU/GiB": r["cpu_per_gib"]["geomean"]})
        body.append(
            [r["hostname"], r["kernel"], r["cpu"], r["run"],
             str(len(r["files"]))]
            + [f"{geo[m]:.3f}" if geo[m] is not None else "-"
               for m in columns]
            + [f"{worst['matrix']} {worst['row']}: {worst['ratio']:.3f}"
               if worst else "-", r["verdict"], "; ".join(r["reasons"])])
    align = "lllll" + "r" * len(columns) + "lll"
    lines += table_lines(header, body, indent=2, align=align)
    verdicts = [r["verdict"] for r in rows]
    lines += ["", "Verdicts: " + ", ".join(
        f"{verdicts.count(v)} {v}" for v in ("gains", "no gain", "costs")),
        ""] + FLEET_RULE.rstrip("\n").splitlines()
    return "\n".join(lines) + "\n"


def write_fleet_csv(path, rows):
    """The fleet table as CSV, one row per table row."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        out = csv.writer(f)
        out.writerow(FLEET_CSV_FIELDS)
        for r in rows:
            worst = r["worst"] or {}
            out.writerow(
                [r["hostname"], r["kernel"], r["cpu"], r["run"],
                 len(r["files"])]
                + [csv_cell(r["geomean"][m]) for m in FLEET_MATRICES]
                + [csv_cell(worst.get(k)) for k in ("matrix", "row", "ratio")]
                + [r["verdict"], csv_cell(r["cpu_per_gib"]["geomean"])])


def cmd_fleet(argv):
    """The 'fleet' command."""
    args = fleet_parser().parse_args(argv)
    for option in ("json", "csv"):
        check_output(f"--{option}", getattr(args, option))
    files = fleet_files(args.paths)
    rows, skipped = fleet_rows(files)
    if not rows:
        raise Fatal(f"{PROG} fleet: no ppipe-compare result could be read "
                    f"({len(files)} files)", 2)
    report = sys.stderr if args.json == "-" else sys.stdout
    report.write(fleet_text(rows, files, skipped))
    report.flush()
    if args.json:
        write_json(args.json, {
            "tool": f"{PROG} fleet", "version": version(),
            "created": datetime.datetime.now(datetime.timezone.utc)
            .strftime("%Y-%m-%dT%H:%M:%SZ"),
            "rule": {"gain_matrices": list(FLEET_GAIN_MATRICES),
                     "gain_at": GAIN_AT,
                     "throughput_cost_below": THROUGHPUT_COST_BELOW,
                     "overhead_cost_above": OVERHEAD_COST_ABOVE,
                     "ratio_mbps": "libppipe/plain MB/s, higher is better",
                     "ratio_time": TIME_RATIO_NOTE,
                     "cpu_per_gib": CPU_RATIO_NOTE},
            "rows": rows,
            "skipped": [{"path": p, "why": w} for p, w in skipped]})
    if args.csv:
        write_fleet_csv(args.csv, rows)
    return 0


def main(argv):
    """Entry point: dispatch to 'compare', 'fleet' or the benchmark run."""
    try:
        if argv and argv[0] == "compare":
            return cmd_compare(argv[1:])
        if argv and argv[0] == "fleet":
            return cmd_fleet(argv[1:])
        return cmd_run(argv)
    except Fatal as exc:
        sys.stderr.write(f"{exc}\n")
        return exc.status
    except KeyboardInterrupt:
        sys.stderr.write(f"\n{PROG}: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
