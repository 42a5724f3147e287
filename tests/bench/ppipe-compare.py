#!/usr/bin/env python3
"""ppipe-compare: run ppipe-bench on plain pipes and under libppipe, compare.

Runs a matrix of ppipe-bench configurations twice per repetition (baseline
without LD_PRELOAD, then shim with the preload library), takes medians and
prints cover-letter shaped tables; optionally writes JSON, CSV and SVG.
The pipeline matrix runs shell pipelines of ppipe-stage programs instead,
and of real programs (dd, cat, head, sha1sum; then zstd, lz4 and gzip
decompressing into wc -c, and tar c into tar x, on text-like data made
once per run in a private temporary directory and removed at its end),
with LD_PRELOAD in the environment of the sh. Every throughput result
carries the CPU time per GiB moved on each side: ppipe-bench's own count
of its writers and readers, or every process of a pipeline. The overhead
matrix runs ppipe-overhead, which times everyday operations the library
cannot speed up (process start, fork, exec, a pipe's life, small writes,
a shell loop): its ratios are of time, preloaded/plain, so lower is
better there, and an empty preloaded library runs beside the library in
every repetition: the floor any preload pays, from which the library's
excess is measured.
With --config, every repetition runs plain and then the library once per named
environment (engines, options), and the tables put them side by side.
The api matrix asks how writers that make every block hand it to the pipe:
write() of their own buffer, plain and with the library (its transparent
path), and in place through ppipe.h's spans, with the library and without
it (ppipe-bench --produce copy|api); four sides in every repetition.

'ppipe-compare compare A.json B.json' compares two saved runs;
'ppipe-compare fleet FILE.json|DIR...' folds the saved runs of many hosts
into one table with a verdict per host.
"""

import argparse
import datetime
import math
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile

VERSION = "@VERSION@"
DEFAULT_LIB = "@DEFAULT_LIB@"
BENCH = "@BENCH@"
STAGE = "@STAGE@"
OVERHEAD = "@OVERHEAD@"
EMPTY_LIB = "@EMPTY_LIB@"
# Where the ppipe_tools package is: configured (the source tree for the
# build tree's copy, LIBDIR/libppipe for the installed one), or else beside
# this script.
PYDIR = "@PYDIR@"
if not PYDIR.startswith("@"):
    sys.path.insert(0, PYDIR)
# Compiled at each start, as the single script was: no cache is written
# beside the installed package (one that a root run left in LIBDIR/libppipe
# would outlive the package's removal).
sys.dont_write_bytecode = True

# pylint: disable=wrong-import-position
from ppipe_tools.common import (
    COMPARE as PROG, Fatal, configured, is_executable, locate, version,
    write_json)
from ppipe_tools.fleet import (
    FLEET_GAIN_MATRICES, FLEET_RULE, GAIN_AT, OVERHEAD_COST_ABOVE,
    THROUGHPUT_COST_BELOW, fleet_files, fleet_rows, fleet_text,
    write_fleet_csv)
from ppipe_tools.matrices import (
    API_NOTE, API_PRODUCE_NOTE, API_RATIOS, API_RATIO_OF, API_SIDES,
    CPU_RATIO_NOTE, EMPTY_NOTE, NO_PRESSURE, ONLY_MATRIX, OVERHEAD_MIN_REPS,
    PRESETS, PRESSURE_MODES, TIME_RATIO_NOTE, api_sides, build_matrix,
    child_envs, is_overhead, is_program, label, overhead_skips, program_skips,
    reads_data)
from ppipe_tools.measure import (
    host_info, make_program_data, memcpy_reference, probe, probe_produce,
    probe_stage, ring_reference, run_matrix, set_work)
from ppipe_tools.procs import raise_signalled
from ppipe_tools.report import (
    RATIO_METRICS, RUN_METRICS, View, cpu_summary_line, report_tables,
    run_report, set_shim_name, summary_line, write_csv)
from ppipe_tools.results import (
    check_side, compare_overhead_lines, describe, load_result, result_key,
    side_values)
from ppipe_tools.svg import write_svg

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
CONFIG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,31}\Z")
# The plain side's names (JSON, text), the two-way run's library side, the
# overhead matrix's empty library and the api matrix's own sides.
RESERVED_CONFIGS = ("baseline", "plain", "shim", "empty", "api", "api_plain")


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are a single line on stderr."""

    def error(self, message):
        sys.stderr.write(f"{PROG}: {message} (see --help)\n")
        sys.exit(2)


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
                   "producer work between writes, in --full too, api: "
                   "writers that generate every block, write() plain and "
                   "with the library against ppipe.h's spans with it and "
                   "without it, in --full too, overhead: "
                   "what the library costs process start, fork, exec, "
                   "pipes, small writes and a shell loop, as a time ratio, "
                   "lower is better)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress on stderr")
    p.add_argument("--version", action="version",
                   version=f"{PROG} {version(VERSION)}")
    return p


def compare_parser():
    """Parser for the 'compare' command."""
    p = Parser(prog=f"{PROG} compare",
               description="Compare two saved --json results, A -> B.")
    p.add_argument("a", metavar="A.json")
    p.add_argument("b", metavar="B.json")
    p.add_argument("--side", default="shim",
                   help="what to compare: shim, baseline, ratio, the name "
                   "of a --config of both runs, or api or api_plain (the "
                   "api matrix's results only) (default: shim)")
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


def resolve_program(arg, option, name, configured_path):
    """Path of a harness executable: the option's, the configured one, the
    one beside this script, or the one on PATH."""
    if arg is not None:
        if not is_executable(arg):
            raise Fatal(f"{PROG}: {option} {arg}: not an executable file", 2)
        return os.path.abspath(arg)
    path = locate(name, configured_path,
                  os.path.dirname(os.path.abspath(__file__)))
    if path:
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
                           args.program_bytes, bool(named))
    if named and args.preset == "full" and not args.only and not args.quiet:
        sys.stderr.write(f"{PROG}: the api matrix is left out: it does not "
                         "run with --config\n")
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
    if any(c["matrix"] == "api" for c in configs):
        probe_produce(programs["bench"], envs)
        settings["api"] = {"produce": API_PRODUCE_NOTE, "sides": API_NOTE,
                           "ratios": {
            f"ratio{infix}_{suffix}": f"{num}/{den}"
            for infix, num, den in API_RATIOS for suffix, _ in API_RATIO_OF}}
    if pipelines:
        probe_stage(programs["stage"], lib, envs)
    set_work(configs, programs["bench"], envs, settings)
    data_shapes = [c["shape"] for c in configs if reads_data(c)]
    handlers = {}
    try:
        if data_shapes:
            # Removed on the way out, after an interrupt or termination too.
            for signum in (signal.SIGTERM, signal.SIGHUP):
                handlers[signum] = signal.signal(signum, raise_signalled)
            try:
                programs["data"] = tempfile.mkdtemp(prefix=f"{PROG}-")
                settings["programs"]["data"] = make_program_data(
                    programs["data"], data_shapes, envs["baseline"],
                    settings["programs"]["bytes"], args.quiet)
            except OSError as exc:
                raise Fatal(f"{PROG}: making the data of the pipelines of "
                            f"real programs failed: {exc}", 1) from exc
        results = run_matrix(configs, programs, lib, envs, settings,
                             args.quiet)
    finally:
        if programs.get("data"):
            shutil.rmtree(programs["data"], ignore_errors=True)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    host = host_info()
    host["memcpy_mbps_1m"] = memcpy_reference(programs["bench"], envs)
    host["ring_mbps_1m"] = ring_reference(programs["bench"], envs)
    doc = {"tool": PROG, "version": version(VERSION),
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
    report.write(run_report(results, settings, host["memcpy_mbps_1m"],
                            host["ring_mbps_1m"]))
    report.flush()
    if args.json:
        write_json(args.json, doc)
    if args.csv:
        write_csv(args.csv, results)
    if args.svg:
        write_svg(args.svg, doc)
    return 0


def cmd_compare(argv):
    """The 'compare' command."""
    args = compare_parser().parse_args(argv)
    doc_a, doc_b = load_result(args.a), load_result(args.b)
    check_side(args.a, doc_a, args.side)
    check_side(args.b, doc_b, args.side)
    if args.side in API_SIDES:
        # Only the api matrix's results have them: the others are left out.
        doc_a, doc_b = ({**d, "results": [r for r in d["results"]
                                          if args.side in api_sides(r)]}
                        for d in (doc_a, doc_b))
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
            "tool": f"{PROG} fleet", "version": version(VERSION),
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
    except KeyboardInterrupt as exc:
        sys.stderr.write(f"\n{PROG}: interrupted\n")
        return 128 + int(getattr(exc, "signum", signal.SIGINT))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
