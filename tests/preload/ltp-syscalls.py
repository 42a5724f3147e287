#!/usr/bin/env python3
"""The Linux Test Project's tests of the calls libppipe interposes, plain and preloaded.

usage: ltp-syscalls.py LIBRARY LTP_DIR [--dirs NAME,...] [--env K=V ...]
                       [--timeout SECONDS] [--skip TEST,...] [--logs DIR]

Not a meson test: LTP is not a Debian package, so its tests are built from
its sources first (docs/testing.md says how). LTP_DIR is that source tree,
built; each directory NAME of LTP_DIR/testcases/kernel/syscalls (default:
the pipe, splice, write and fd calls: pipe, pipe2, splice, tee, vmsplice,
sendfile, write, writev, close, close_range, dup, dup2, dup3, fcntl) has its test
programs run twice, taking turns: plain, then with LD_PRELOAD=LIBRARY
(made absolute: the tests run in their own directories) and
each --env (PPIPE_MIN_WRITE=4097, say, to send more of their writes down
libppipe's path). Each run is killed after SECONDS (default 120).

A test's result is its exit status and the counts of LTP's summary
(passed, failed, broken, skipped, warnings). It prints one line per test
whose preloaded result differs from its plain one, the tests that fail
both ways (the machine's, not libppipe's: they are reported, not judged),
and how many writes went in by vmsplice() (the PPIPE_STATS reports of the
preloaded runs), so a run says whether libppipe's path was reached at
all. Each run's output goes to DIR (default: a new temporary directory,
kept) as TEST.plain.log and TEST.preload.log.

Exit status: 0 when every test ends preloaded as it ends plain; 1 when one
does not; 2 for bad arguments or a tree with no tests built.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

DIRS = ("pipe", "pipe2", "splice", "tee", "vmsplice", "sendfile", "write", "writev", "close",
        "close_range", "dup", "dup2", "dup3", "fcntl")
COUNTS = ("passed", "failed", "broken", "skipped", "warnings")
SUMMARY = re.compile(r"^(" + "|".join(COUNTS) + r")\s+(\d+)\s*$", re.M)
# Helpers that LTP tests exec themselves, not tests.
HELPER = re.compile(r"_child$")


def programs(ltp, dirs):
    """(dir, name, path) of every test program built in the named directories."""
    found = []
    for d in dirs:
        base = os.path.join(ltp, "testcases", "kernel", "syscalls", d)
        if not os.path.isdir(base):
            raise SystemExit(f"ltp-syscalls: no directory {base}")
        for path in sorted(glob.glob(os.path.join(base, "*"))):
            name = os.path.basename(path)
            if (os.path.isfile(path) and os.access(path, os.X_OK) and "." not in name
                    and not HELPER.search(name)):
                found.append((d, name, path))
    return found


def run(path, env, timeout, log):
    """Runs one test program in its directory; returns (status, counts)."""
    cwd = os.path.dirname(path)
    env = dict(env, PATH=cwd + os.pathsep + env.get("PATH", "/usr/bin:/bin"))
    try:
        p = subprocess.run([path], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout)
        out, status = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out, status = e.stdout or b"", "timeout"
    with open(log, "wb") as f:
        f.write(out)
    counts = {k: int(v) for k, v in SUMMARY.findall(out.decode("utf-8", "replace"))}
    return status, tuple(counts.get(k, 0) for k in COUNTS)


def describe(result):
    status, counts = result
    return f"exit {status}, " + " ".join(f"{k} {v}" for k, v in zip(COUNTS, counts) if v)


def vmspliced(stats_dir):
    """Writes and bytes the preloaded runs sent by vmsplice(), from their reports."""
    writes = nbytes = 0
    for path in glob.glob(os.path.join(stats_dir, "*.json")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    totals = json.loads(line)["totals"]
                    writes += totals.get("writes_accelerated", 0)
                    nbytes += totals.get("bytes_accelerated", 0)
    return writes, nbytes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("preload", metavar="LIBRARY")
    ap.add_argument("ltp")
    ap.add_argument("--dirs", default=",".join(DIRS))
    ap.add_argument("--env", action="append", default=[], metavar="K=V")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--skip", default="", metavar="TEST,...")
    ap.add_argument("--logs")
    args = ap.parse_args()
    # The tests run in their own directories, and exec others there: they
    # are given absolute names (the library's, their own), as every driver
    # here does.
    lib = os.path.abspath(args.preload)
    if not os.path.isfile(lib):
        ap.error(f"no library {lib}")
    extra = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            ap.error(f"--env wants K=V, not {item!r}")
        extra[key] = value
    skip = {s for s in args.skip.split(",") if s}
    dirs = [d for d in args.dirs.split(",") if d]
    tests = [t for t in programs(os.path.abspath(args.ltp), dirs) if t[1] not in skip]
    if not tests:
        print("ltp-syscalls: no test programs built there (docs/testing.md)", file=sys.stderr)
        return 2
    logs = args.logs or tempfile.mkdtemp(prefix="ltp-syscalls.")
    stats_dir = os.path.join(logs, "stats")
    os.makedirs(stats_dir, exist_ok=True)
    base = {k: v for k, v in os.environ.items()
            if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}
    preload = dict(base, LD_PRELOAD=lib, PPIPE_STATS=os.path.join(stats_dir, "%p.json"),
                   **extra)

    differ, both_fail = [], []
    for d, name, path in tests:
        plain = run(path, base, args.timeout, os.path.join(logs, f"{name}.plain.log"))
        pre = run(path, preload, args.timeout, os.path.join(logs, f"{name}.preload.log"))
        if plain != pre:
            differ.append((d, name, plain, pre))
            print(f"DIFFERS {d}/{name}: plain {describe(plain)}; preloaded {describe(pre)}")
        elif plain[0] != 0:
            both_fail.append((d, name, plain))
    writes, nbytes = vmspliced(stats_dir)
    env_text = " ".join(f"{k}={v}" for k, v in extra.items())
    print(f"{len(tests)} LTP tests in {args.dirs}, plain and with LD_PRELOAD={lib}"
          + (f" {env_text}" if env_text else ""))
    for d, name, plain in both_fail:
        print(f"  fails both ways (not judged): {d}/{name}: {describe(plain)}")
    print(f"preloaded runs: {writes} writes, {nbytes} bytes by vmsplice()")
    print(f"logs: {logs}")
    if differ:
        print(f"{len(differ)} test(s) end differently under libppipe")
        return 1
    print("every test ends preloaded as it ends plain")
    return 0


if __name__ == "__main__":
    sys.exit(main())
