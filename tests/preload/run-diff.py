#!/usr/bin/env python3
"""Differential test driver: a diff-* program on plain pipes vs under a preload library.

usage: run-diff.py PROGRAM LIBRARY [--env K=V ...] [--expect-accel] [--expect-spans] [--expect-stdio]
                   [--baseline-program PATH] [--timeout S] [--baseline-runs N] [--keep]

Runs PROGRAM twice: without LD_PRELOAD (the baseline), and with LD_PRELOAD=LIBRARY
and the library's environment (PPIPE_MIN_WRITE=4097 so that every write above
PIPE_BUF takes the accelerated path, PPIPE_STATS=<file>; --env K=V adds or
overrides). Each run writes its transcript to the file named by $T_TRANSCRIPT.
The two transcripts and exit statuses must be identical; on a mismatch a unified
diff is printed.

--expect-accel (or T_EXPECT_ACCEL=1 in the environment) also requires that the
library really took its fast path: the PPIPE_STATS file (one JSON object per
process, "totals" -> "writes_accelerated") must sum to more than zero. A
library without a stats file passes this check only if its file name contains
"passthru" (the pass-through control library), with a note.

--expect-spans also requires that spans (ppipe.h) were committed in place: the
PPIPE_STATS totals' "span_commits" must sum to more than zero (the API builds of
the diff-* programs, tests/preload/api-write.h).

--expect-stdio also requires that libppipe made stdio writes itself: the
PPIPE_STATS totals' "stdio_writes" must sum to more than zero (diff-stdio).

--baseline-program PATH also runs PATH (the same test built with write(), where
PROGRAM is its API build) without LD_PRELOAD: its transcript and exit status must
be PROGRAM's too, so that a change both runs of PROGRAM share is still caught.

--baseline-runs N runs the baseline N times and fails if the transcripts are not
all identical (a check of the test's own determinism).

Exit status: 0 identical, 1 different (or the library crashed, hung, or did not
accelerate), 77 the program skipped in either run, 99 the baseline itself failed,
was not deterministic, or the library could not be loaded.
"""
import argparse
import difflib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

EXIT_PASS, EXIT_FAIL, EXIT_SKIP, EXIT_ERROR = 0, 1, 77, 99
DEFAULT_LIB_ENV = {"PPIPE_MIN_WRITE": "4097"}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("program")
    ap.add_argument("lib", metavar="LIBRARY")
    ap.add_argument("--env", action="append", default=[], metavar="K=V",
                    help="extra environment for the library run")
    ap.add_argument("--expect-accel", action="store_true")
    ap.add_argument("--expect-spans", action="store_true",
                    help="require span_commits > 0 in the PPIPE_STATS totals")
    ap.add_argument("--expect-stdio", action="store_true",
                    help="require stdio_writes > 0 in the PPIPE_STATS totals")
    ap.add_argument("--baseline-program", metavar="PATH",
                    help="the write() build, whose plain run must give the same transcript")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per run (30)")
    ap.add_argument("--baseline-runs", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    for kv in args.env:
        if "=" not in kv or kv.startswith("="):
            ap.error(f"--env wants K=V, got {kv!r}")
    if args.baseline_runs < 1:
        ap.error("--baseline-runs must be at least 1")
    if os.environ.get("T_EXPECT_ACCEL") == "1":
        args.expect_accel = True
    return args


def clean_env():
    """The caller's environment without anything that would change the runs."""
    return {k: v for k, v in os.environ.items()
            if k not in ("LD_PRELOAD", "T_TRANSCRIPT", "T_EXPECT_ACCEL")
            and not k.startswith("PPIPE_")}


class Run:
    def __init__(self, name):
        self.name = name
        self.rc = None          # exit code, or -signal
        self.timed_out = False
        self.transcript = []
        self.stdout = ""
        self.stderr = ""

    def status(self):
        if self.timed_out:
            return "timed out"
        if self.rc is not None and self.rc < 0:
            try:
                return f"killed by {signal.Signals(-self.rc).name}"
            except ValueError:
                return f"killed by signal {-self.rc}"
        return f"exit {self.rc}"


def run_once(name, program, workdir, extra_env, timeout):
    r = Run(name)
    tmpdir = os.path.join(workdir, name + ".tmp")
    os.makedirs(tmpdir)
    transcript = os.path.join(workdir, name + ".transcript")
    open(transcript, "w").close()
    env = clean_env()
    env.update({"T_TRANSCRIPT": transcript, "TMPDIR": tmpdir})
    env.update(extra_env)
    # A new session, so that a hung run and all its children can be killed.
    p = subprocess.Popen([program], env=env, cwd=tmpdir, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         close_fds=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        r.timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
    else:
        # Children left behind (a killed parent's readers) must not outlive the run.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    r.rc = p.returncode
    r.stdout = out.decode(errors="replace")
    r.stderr = err.decode(errors="replace")
    with open(transcript, errors="replace") as f:
        r.transcript = f.read().splitlines()
    return r


def tail(text, n=15):
    lines = text.rstrip("\n").splitlines()
    return "\n".join("    " + ln for ln in lines[-n:]) if lines else "    (empty)"


def show(r):
    print(f"--- {r.name} run: {r.status()}, {len(r.transcript)} transcript lines")
    if r.stderr.strip():
        print(f"  stderr (last lines):\n{tail(r.stderr)}")


def diff(a, b):
    return "\n".join(difflib.unified_diff(a.transcript, b.transcript, a.name, b.name,
                                          lineterm="", n=2))


def stats_total(path, key="writes_accelerated"):
    """Sums totals.<key> over the per-process JSON lines."""
    total, procs = 0, 0
    with open(path) as f:
        for ln in f:
            ln = ln.strip()
            if not ln:
                continue
            obj = json.loads(ln)
            total += int(obj["totals"][key])
            procs += 1
    return total, procs


def main(argv):
    args = parse_args(argv)
    prog = os.path.abspath(args.program)
    lib = os.path.abspath(args.lib)
    name = os.path.basename(prog)
    if not os.access(prog, os.X_OK):
        print(f"ERROR {name}: {prog} is not an executable program")
        return EXIT_ERROR
    if args.baseline_program and not os.access(args.baseline_program, os.X_OK):
        print(f"ERROR {name}: {args.baseline_program} is not an executable program")
        return EXIT_ERROR
    if not os.path.isfile(lib):
        # ld.so would only warn and run the program without it: a false pass.
        print(f"ERROR {name}: library {lib} does not exist")
        return EXIT_ERROR

    workdir = tempfile.mkdtemp(prefix=f"ppipe-diff-{name}-")
    try:
        return compare(args, prog, lib, name, workdir)
    finally:
        if args.keep:
            print(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def compare(args, prog, lib, name, workdir):
    baselines = [run_once(f"plain{i + 1}" if args.baseline_runs > 1 else "plain", prog,
                          workdir, {}, args.timeout)
                 for i in range(args.baseline_runs)]
    base = baselines[0]

    stats_path = os.path.join(workdir, "ppipe-stats.jsonl")
    lib_env = dict(DEFAULT_LIB_ENV)
    lib_env["PPIPE_STATS"] = stats_path
    for kv in args.env:
        k, v = kv.split("=", 1)
        lib_env[k] = v
    lib_env["LD_PRELOAD"] = lib
    shim = run_once("preload", prog, workdir, lib_env, args.timeout)
    writes = None
    if args.baseline_program:
        writes = run_once("write-plain", os.path.abspath(args.baseline_program), workdir, {},
                          args.timeout)

    if base.rc == EXIT_SKIP or shim.rc == EXIT_SKIP:
        why = [ln for r in (base, shim) for ln in r.transcript if ln.startswith("SKIP")]
        print(f"SKIP {name}: {why[0] if why else 'the program skipped'}"
              f" (plain {base.status()}, preload {shim.status()})")
        return EXIT_SKIP

    # With --baseline-program, the write() build is the baseline; PROGRAM's plain
    # run is the API's header fallback, under test like the preloaded run.
    for b in [writes] if writes else baselines:
        if b.timed_out or b.rc != 0:
            print(f"ERROR {name}: the baseline (no preload) failed: {b.status()}; "
                  "the test or this machine is broken, not the library")
            show(b)
            print("  transcript (last lines):\n" + tail("\n".join(b.transcript)))
            return EXIT_ERROR
    for b in baselines[1:]:
        if b.transcript != base.transcript:
            print(f"ERROR {name}: the baseline is not deterministic ({base.name} vs {b.name}):")
            print(diff(base, b))
            return EXIT_ERROR

    if "cannot be preloaded" in shim.stderr:
        print(f"ERROR {name}: ld.so did not load {lib}:")
        print(tail(shim.stderr, 5))
        return EXIT_ERROR

    failed = False
    if writes and (base.timed_out or base.rc != writes.rc or
                   base.transcript != writes.transcript):
        print(f"FAIL {name}: the plain run differs from the write() build's "
              f"{os.path.basename(args.baseline_program)} ({writes.status()} vs "
              f"{base.status()}; - write(), + {base.name}):")
        print(diff(writes, base))
        failed = True
    if shim.timed_out:
        print(f"FAIL {name}: with the library the program hung (killed after {args.timeout}s)")
        failed = True
    elif shim.rc != base.rc:
        print(f"FAIL {name}: exit status differs: plain {base.status()}, "
              f"preload {shim.status()}")
        failed = True
    if shim.transcript != base.transcript:
        print(f"FAIL {name}: transcripts differ (- plain, + preload):")
        print(diff(base, shim))
        failed = True
    if failed:
        for r in (writes, base, shim):
            if r:
                show(r)
        return EXIT_FAIL

    note = ""
    # (option, counter, what the counter counts, what to say of the counter, the check)
    expectations = [("--expect-accel", "writes_accelerated",
                     "no write took the accelerated path", "", "acceleration check"),
                    ("--expect-spans", "span_commits",
                     "no span was committed in place", "span_commits in ", "span check"),
                    ("--expect-stdio", "stdio_writes",
                     "no stdio write was made by libppipe", "stdio_writes in ", "stdio check")]
    for (option, key, none_msg, key_msg, check), wanted in zip(
            expectations, (args.expect_accel, args.expect_spans, args.expect_stdio)):
        if not wanted:
            continue
        if os.path.exists(stats_path):
            try:
                total, procs = stats_total(stats_path, key)
            except (OSError, ValueError, KeyError, TypeError) as e:
                print(f"FAIL {name}: cannot read {key_msg}the PPIPE_STATS file: {e}")
                return EXIT_FAIL
            if total <= 0:
                print(f"FAIL {name}: transcripts identical, but {none_msg} "
                      f"({key}=0 over {procs} processes)")
                return EXIT_FAIL
            note += f"; {key}={total}" + (f" over {procs} processes" if not key_msg else "")
        elif "passthru" in os.path.basename(lib):
            note += f"; no PPIPE_STATS file (pass-through library): {check} skipped"
        else:
            print(f"FAIL {name}: {option}, but the library wrote no PPIPE_STATS file")
            return EXIT_FAIL
    if writes:
        note += f"; same as {os.path.basename(args.baseline_program)}'s plain run"
    runs = f", baseline deterministic over {len(baselines)} runs" if len(baselines) > 1 else ""
    print(f"PASS {name}: transcripts identical ({len(base.transcript)} lines){runs}{note}")
    return EXIT_PASS


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
