#!/usr/bin/env python3
"""Every process of a tree writes its PPIPE_STATS report, also when it ends with _exit.

usage: test-exit-report.py PROGRAM LIBRARY

PROGRAM is exit-report (tests/preload/exit-report.c). Each case runs it, or a
small Python program, with LD_PRELOAD=LIBRARY and PPIPE_STATS=<dir>/%p.json,
and reads the reports:

  tree exit|_exit|_Exit  the parent, a reader child and a writer child ending
                         with _exit() each write exactly one report, with
                         exactly the bytes each of them wrote (a fork child
                         does not count its parent's again); a vfork child
                         ending with _exit(127) (a failed exec) writes none.
  late                   exit() reports, then a later atexit handler's _exit():
                         one report.
  signal                 the exit report names a FIFO nobody reads: it must
                         not wait for one (a SIGALRM handler would end the
                         process with _exit(3) if it did): exit 0 and one
                         warning.
  python                 os._exit() in a fork child reports; a failed
                         subprocess exec (Python's vfork child) does not, and
                         the parent's report stays its own.

Exit status: 0 passed, 1 failed, 77 skipped, 99 set-up error.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

EXIT_PASS, EXIT_FAIL, EXIT_SKIP, EXIT_ERROR = 0, 1, 77, 99
WRITER_BYTES = 512 << 10
PARENT_BYTES = 256 << 10
TIMEOUT = 60


class Fail(Exception):
    pass


def env_for(lib, stats):
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}
    env.update({"LD_PRELOAD": lib, "PPIPE_STATS": stats, "PPIPE_MIN_WRITE": "4097"})
    return env


def run(argv, lib, stats):
    try:
        return subprocess.run(argv, env=env_for(lib, stats), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=TIMEOUT,
                              universal_newlines=True)
    except subprocess.TimeoutExpired:
        raise Fail(f"{argv[1:]}: still running after {TIMEOUT} s (a report waiting for itself?)")


def reports(d):
    """pid -> list of report objects, from every file of the directory."""
    out = {}
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name)) as f:
            for ln in f:
                if ln.strip():
                    obj = json.loads(ln)
                    out.setdefault(obj["pid"], []).append(obj)
                    if name != f"{obj['pid']}.json":
                        raise Fail(f"{name} holds the report of pid {obj['pid']}")
    return out


def moved(obj):
    t = obj["totals"]
    return t["bytes_accelerated"] + t["bytes_passthrough"]


def expect_one(reps, pid, role, nbytes):
    got = reps.get(pid, [])
    if len(got) != 1:
        raise Fail(f"{role} (pid {pid}): {len(got)} reports, want exactly 1")
    if moved(got[0]) != nbytes:
        raise Fail(f"{role} (pid {pid}): report counts {moved(got[0])} bytes written, "
                   f"want {nbytes}: {got[0]['totals']}")


def case_tree(prog, lib, work, ending):
    d = os.path.join(work, "tree" + ending)
    os.mkdir(d)
    r = run([prog, "tree", ending], lib, os.path.join(d, "%p.json"))
    if r.returncode != 0:
        raise Fail(f"tree {ending}: exit {r.returncode}: {r.stderr.strip()}")
    pids = {}
    for ln in r.stdout.split("\n"):
        if ln.strip():
            role, pid = ln.split()
            pids[role] = int(pid)
    reps = reports(d)
    expect_one(reps, pids["parent"], f"parent ending with {ending}", PARENT_BYTES)
    expect_one(reps, pids["writer"], "writer child ending with _exit", WRITER_BYTES)
    expect_one(reps, pids["reader"], "reader child ending with _exit", 0)
    if pids["vfork"] in reps:
        raise Fail(f"the vfork child (pid {pids['vfork']}) wrote a report: "
                   f"{reps[pids['vfork']]}")
    extra = set(reps) - {pids["parent"], pids["writer"], pids["reader"]}
    if extra:
        raise Fail(f"reports of unknown processes: {sorted(extra)}")
    accel = reps[pids["writer"]][0]["totals"]["bytes_accelerated"]
    return f"tree {ending}: 3 reports, writer {accel} bytes accelerated"


def case_late(prog, lib, work):
    d = os.path.join(work, "late")
    os.mkdir(d)
    r = run([prog, "late"], lib, os.path.join(d, "%p.json"))
    if r.returncode != 5:
        raise Fail(f"late: exit {r.returncode}, want 5: {r.stderr.strip()}")
    reps = reports(d)
    if len(reps) != 1 or len(next(iter(reps.values()))) != 1:
        raise Fail("late: exit() then _exit(): want one report, got "
                   f"{sum(len(v) for v in reps.values())}")
    return "late: exit() then _exit() wrote one report"


def case_signal(prog, lib, work):
    fifo = os.path.join(work, "fifo")
    os.mkfifo(fifo)
    r = run([prog, "signal"], lib, fifo)
    if r.returncode != 0 or "a FIFO nobody reads" not in r.stderr:
        raise Fail(f"signal: exit {r.returncode}, want 0 (3: the report waited for the "
                   f"FIFO until the handler's _exit): {r.stderr.strip()}")
    if not stat.S_ISFIFO(os.stat(fifo).st_mode):
        raise Fail("signal: the FIFO was replaced")
    return "signal: a report to a FIFO nobody reads did not wait"


PY_CASE = """
import os, subprocess, sys
r, w = os.pipe()
os.write(w, b"p" * 32768)      # the parent's: not the child's to count
os.read(r, 32768)
pid = os.fork()
if pid == 0:
    os.close(r)
    left = %d
    while left:
        left -= os.write(w, b"y" * min(left, 65536))
    os._exit(0)
os.close(w)
while os.read(r, 1 << 20):
    pass
os.waitpid(pid, 0)
try:
    subprocess.run(["/nonexistent/program"])
except FileNotFoundError:
    pass
r, w = os.pipe()
child = os.fork()
if child == 0:
    os.close(w)
    while os.read(r, 1 << 20):
        pass
    os._exit(0)
os.close(r)
left = %d
while left:
    left -= os.write(w, b"z" * left)
os.close(w)
os.waitpid(child, 0)
print(os.getpid(), pid, child)
""" % (WRITER_BYTES, PARENT_BYTES)


def case_python(lib, work):
    d = os.path.join(work, "python")
    os.mkdir(d)
    r = run([sys.executable, "-c", PY_CASE], lib, os.path.join(d, "%p.json"))
    if r.returncode != 0:
        raise Fail(f"python: exit {r.returncode}: {r.stderr.strip()}")
    parent, writer, reader = (int(x) for x in r.stdout.split())
    reps = reports(d)
    expect_one(reps, writer, "python child ending with os._exit", WRITER_BYTES)
    expect_one(reps, reader, "python reader ending with os._exit", 0)
    if len(reps.get(parent, [])) != 1:
        raise Fail(f"python parent (pid {parent}): {len(reps.get(parent, []))} reports, want 1")
    # The failed exec's vfork child writes its errno into an error pipe of
    # the parent's, on the parent's memory: at most that much more.
    if not PARENT_BYTES + 32768 <= moved(reps[parent][0]) <= PARENT_BYTES + 32768 + 256:
        raise Fail(f"python parent: {reps[parent][0]['totals']}: "
                   f"want {PARENT_BYTES + 32768} bytes")
    # The failed exec's child (a vfork child in CPython) may only have reported
    # as a process of its own: nothing it says may be its parent's.
    for pid, objs in reps.items():
        if pid not in (parent, writer, reader) and any(moved(o) for o in objs):
            raise Fail(f"python: pid {pid} reports bytes it did not write: {objs}")
    return f"python: os._exit child reported; {len(reps)} reports"


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return EXIT_ERROR
    prog, lib = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    if not os.path.isfile(lib):
        print(f"ERROR: library {lib} does not exist")
        return EXIT_ERROR
    work = tempfile.mkdtemp(prefix="ppipe-exit-")
    failed = False
    try:
        cases = [lambda e=e: case_tree(prog, lib, work, e) for e in ("exit", "_exit", "_Exit")]
        cases += [lambda: case_late(prog, lib, work), lambda: case_signal(prog, lib, work),
                  lambda: case_python(lib, work)]
        for c in cases:
            try:
                print("PASS " + c())
            except Fail as e:
                print(f"FAIL {e}")
                failed = True
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return EXIT_FAIL if failed else EXIT_PASS


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
