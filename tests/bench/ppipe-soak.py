#!/usr/bin/env python3
"""ppipe-soak: one long-lived, preloaded process tree through the shapes a fleet runs.

usage: ppipe-soak [--duration 30m] [--interval 60s] [--seed N] [--jobs N]
                  [--lib PATH] [--system-preload] [--json FILE] [--shapes LIST]

This process becomes the long-lived process of a tree that runs libppipe: it
runs itself again with LD_PRELOAD=--lib (with --system-preload: in a private
mount namespace whose /etc/ld.so.preload names the library, no LD_PRELOAD).
For --duration it keeps --jobs shapes in flight, each drawn at random (seeded)
from a shuffled deck: shell pipelines of exec'd programs, fork pipes,
posix_spawn and subprocess writers and readers, threads writing one pipe,
static, setuid and splicing readers, writers killed by SIGKILL mid-write, exec
storms, close_range before exec, pipe ends passed over a Unix socket. Every
byte every reader gets is checked (exactly, or, for a writer killed on purpose,
as an exact prefix of what it was writing).

Every --interval it lets the shapes in flight finish, then prints one line:
shapes run, MiB checked, the share of large-write bytes that libppipe
accelerated, the pipe registry's occupancy, the tree's ring memory and this
process's RSS. At the end it judges the run against the soak's acceptance
criteria. The manual: tests/bench/README.md, "Soak runs: ppipe-soak".

Exit status: 0 every byte arrived and every criterion held; 1 a byte was lost
or altered, or a shape failed unexpectedly (an error, a hang); 2 bad
arguments; 3 the environment lacks something (the library does not load, not
root for --system-preload); 4 every byte arrived, but the share, the RSS or
the ring memory left its bound.
"""

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile

VERSION = "@VERSION@"
DEFAULT_LIB = "@DEFAULT_LIB@"
STAGE = "@STAGE@"
HELPER = "@HELPER@"
STATIC_COPY = "@STATIC_COPY@"
STREAM_LIB = "@STREAM_LIB@"
# Where the ppipe_tools package and syspreload.py are: configured (the
# source tree for the build tree's copy, LIBDIR/libppipe for the installed
# one), or else beside this script.
PYDIR = "@PYDIR@"
if not PYDIR.startswith("@"):
    sys.path.insert(0, PYDIR)
# Compiled at each start, as the single script was: no cache is written
# beside the installed package (one that a root run left in LIBDIR/libppipe
# would outlive the package's removal).
sys.dont_write_bytecode = True

# pylint: disable=wrong-import-position
from ppipe_tools.common import SOAK as PROG, Fatal, configured, is_executable, locate, version
from ppipe_tools.soak_shapes import SHAPE_NAMES
from ppipe_tools.soak_tree import INNER_VAR, inner


# ------------------------------------------------------------ command line


def parse_duration(text):
    """Seconds from '90', '90s', '30m', '1.5h', '500ms'."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"'{text}' is not a duration like 60s, 30m or 1h")
    value = float(m.group(1)) * {"ms": 0.001, "s": 1, None: 1, "m": 60, "min": 60,
                                 "h": 3600}[m.group(2)]
    if value <= 0:
        raise argparse.ArgumentTypeError(f"'{text}': the duration must be above zero")
    return value


def parse_duration_or_zero(text):
    return 0.0 if text.strip() in ("0", "0s") else parse_duration(text)


def positive_int(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive whole number")
    return n


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A long run of one preloaded process tree through the shapes a fleet "
                    "runs, every byte checked; one line per interval, a verdict at the end.",
        epilog="shapes: " + ", ".join(SHAPE_NAMES) + "\nExit status: 0 pass; 1 a byte was "
               "lost or altered, or a shape failed; 2 bad arguments; 3 the environment lacks "
               "something; 4 bytes intact, but the share, RSS or ring memory left its bound.")
    p.add_argument("--duration", type=parse_duration, default=1800.0,
                   help="how long to run, e.g. 60s, 30m, 2h (30m)")
    p.add_argument("--interval", type=parse_duration, default=60.0,
                   help="the report period (60s)")
    p.add_argument("--seed", type=int, default=None,
                   help="the seed of every random choice (default: a new one, printed)")
    p.add_argument("--jobs", type=positive_int, default=None,
                   help="shapes in flight at once (default: the CPUs this process may use)")
    p.add_argument("--lib", default=None,
                   help="the library (default: the build's or installed libppipe.so)")
    p.add_argument("--system-preload", action="store_true",
                   help="run the tree in a private mount namespace whose /etc/ld.so.preload "
                        "names the library, instead of LD_PRELOAD (root)")
    p.add_argument("--json", metavar="FILE", default=None,
                   help="write every interval and the verdict to FILE (- for stdout), "
                        "rewritten after each interval")
    p.add_argument("--shapes", default=None,
                   help="a comma list of the shapes to run (default: all that can run here)")
    p.add_argument("--baseline", type=positive_int, default=1,
                   help="the interval the others are judged against (1); later ones only")
    p.add_argument("--warmup", type=parse_duration_or_zero, default=10.0,
                   help="shapes run this long before the first interval, and at least one "
                        "whole deck (every shape once), checked but not reported (10s; "
                        "0: none)")
    p.add_argument("--job-timeout", type=parse_duration, default=120.0,
                   help="a shape still running after this long has hung: its processes are "
                        "killed and it fails (120s)")
    p.add_argument("--stage", default=None, help="the ppipe-stage program")
    p.add_argument("--helper", default=None, help="the ppipe-soak-helper program")
    p.add_argument("--static-copy", default=None, help="a statically linked stdin-to-stdout copier")
    p.add_argument("--stream-lib", default=None, help="the ppipe-soak-stream module (ctypes)")
    p.add_argument("--version", action="version", version=f"{PROG} {version(VERSION)}")
    args = p.parse_args(argv)
    if args.interval > args.duration:
        args.interval = args.duration
    if args.shapes:
        names = [s.strip() for s in args.shapes.split(",") if s.strip()]
        unknown = [s for s in names if s not in SHAPE_NAMES]
        if unknown or not names:
            p.error(f"--shapes: unknown shape(s) {', '.join(unknown) or '(none)'}; the shapes: "
                    + ", ".join(SHAPE_NAMES))
        args.shapes = names
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    if args.jobs is None:
        args.jobs = max(1, len(os.sched_getaffinity(0)))
    return args


def resolve(arg, option, name, configured_path, required=True, test=is_executable):
    """A program or file of the harness: the option's, the configured one,
    the one beside this script, or (programs) the one on PATH."""
    if arg is not None:
        if not test(arg):
            raise Fatal(f"{PROG}: {option} {arg}: not usable", 2)
        return os.path.abspath(arg)
    path = locate(name, configured_path, os.path.dirname(os.path.abspath(__file__)), test)
    if path:
        return os.path.abspath(path)
    if required:
        raise Fatal(f"{PROG}: {name} not found: use {option} PATH", 3)
    return None


def resolve_all(args):
    """The programs and files the tree needs, as absolute paths."""
    lib = args.lib or configured(DEFAULT_LIB)
    if not lib or not os.path.isfile(lib):
        raise Fatal(f"{PROG}: the library {lib or '(none configured)'} does not exist: "
                    f"use --lib PATH", 3)
    return {
        "lib": os.path.abspath(lib),
        "stage": resolve(args.stage, "--stage", "ppipe-stage", STAGE),
        "helper": resolve(args.helper, "--helper", "ppipe-soak-helper", HELPER),
        "static": resolve(args.static_copy, "--static-copy", "ppipe-static-copy", STATIC_COPY,
                          required=False),
        "stream_lib": resolve(args.stream_lib, "--stream-lib", "libppipe-soak-stream.so",
                              STREAM_LIB, test=os.path.isfile),
    }


# ------------------------------------------------------- the outer process


def import_syspreload():
    """The module that sets up the /etc/ld.so.preload namespace (and finds a
    directory for the setuid reader), from where meson put it or beside this
    script."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (configured(PYDIR), here):
        if d and os.path.isfile(os.path.join(d, "syspreload.py")):
            sys.path.insert(0, d)
            break
    try:
        import syspreload
    except ImportError:
        raise Fatal(f"{PROG}: syspreload.py (installed with ppipe-soak) was not found", 3)
    return syspreload


def outer(args, argv):
    """Makes the private directory, runs the tree's long-lived process (this
    script again) preloaded, forwards signals to it, cleans up after it."""
    paths = resolve_all(args)
    sp = import_syspreload()
    if args.system_preload:
        if os.geteuid() != 0:
            raise Fatal(f"{PROG}: --system-preload needs root (a mount namespace)", 3)
        missing = sp.missing_tools()
        if missing:
            raise Fatal(f"{PROG}: --system-preload needs {', '.join(missing)}", 3)
    # Where setuid is honoured and the user nobody can reach: the setuid
    # reader runs from there.
    root, _ = sp.work_root([tempfile.gettempdir(), "/var/tmp"])
    work = tempfile.mkdtemp(prefix="ppipe-soak.", dir=root or tempfile.gettempdir())
    status = 1
    try:
        os.chmod(work, 0o755)
        os.mkdir(os.path.join(work, "stats"))
        env = {k: v for k, v in os.environ.items()
               if k not in ("LD_PRELOAD", "PPIPE_STATS", "PPIPE_REGISTRY", INNER_VAR)}
        env["PPIPE_STATS"] = os.path.join(work, "stats", "%p.json")
        env[INNER_VAR] = work
        cmd = [sys.executable, os.path.abspath(__file__)] + list(argv)
        before = sp.preload_state()
        if args.system_preload:
            try:
                ns = sp.prepare(work, paths["lib"], plain=False)
            except sp.SetupError as exc:
                raise Fatal(f"{PROG}: {exc}", 3)
            for note in ns.notes:
                print(f"{PROG}: note: {note}", file=sys.stderr)
            env["LIBPPIPE_SOAK_PRELOADED"] = ns.lib
            cmd = sp.in_ns(ns.etc, cmd)
        else:
            env["LD_PRELOAD"] = paths["lib"]
        status = run_inner(cmd, env)
        if sp.preload_state() != before:
            print(f"{PROG}: FAIL: the host's /etc/ld.so.preload changed during the run",
                  file=sys.stderr)
            status = 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return status


def run_inner(cmd, env):
    """Runs the long-lived process and returns its exit status; SIGINT and
    SIGTERM go on to it, which then ends its interval and judges the run."""
    # A session of its own: a terminal's ^C reaches this process only, which
    # passes it on to the long-lived process, not to the shapes' processes.
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)

    def forward(signum, frame):
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                rc = proc.wait()
                break
            except InterruptedError:
                continue
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return rc if rc >= 0 else 128 - rc


def main(argv):
    args = parse_args(argv)
    work = os.environ.get(INNER_VAR)
    try:
        if work:
            return inner(args, argv, work, resolve_all(args), version(VERSION))
        return outer(args, argv)
    except Fatal as exc:
        print(exc, file=sys.stderr)
        return exc.status


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Worker threads may still sit in a system call when the run was cut
    # short: end without waiting for them.
    os._exit(status)
