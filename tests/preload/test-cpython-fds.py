#!/usr/bin/env python3
"""Programs exec'd from a libppipe tree get the fds they were promised, no more.

usage: test-cpython-fds.py LIBRARY [PYTHON]

CPython's test_subprocess failed test_pass_fds_redirected under libppipe:
the child of a tree whose pipe had crossed into another process found the
registry's fd beside the ones close_fds=True and pass_fds leave it. This
test runs, in each mode (plain; LD_PRELOAD=LIBRARY with default options;
LD_PRELOAD with PPIPE_READERS=trust; /etc/ld.so.preload naming LIBRARY in a
private mount namespace, see tests/bench/syspreload.py):

  1  CPython's own test_pass_fds_redirected (test.test_subprocess), which
     must pass in every mode;
  2  a program of its own: a parent makes a pipe, hands its write end to a
     child (a subprocess) that writes 4 MiB in 64 KiB writes into it, so
     that the pipe crosses into another process and, under libppipe, takes
     the fast path; then it starts children that print the fds they hold
     (/proc/self/fd) and the PPIPE_REGISTRY variables os.environ shows them:
       close_fds=True                  fds 0, 1, 2
       close_fds=True, pass_fds=(40, 41) (/dev/null and the pipe's write
                                       end)   0, 1, 2, 40, 41
       close_fds=True, stdin=the pipe's read end    0, 1, 2
       close_fds=False                 0, 1, 2 and the parent's inheritable
                                       fds (none: Python makes its fds
                                       non-inheritable)
       close_fds=True, through env -u LD_PRELOAD (a program exec'd by a
                                       child, without libppipe where
                                       LD_PRELOAD is how it came)   0, 1, 2
     Every set must be what close_fds/pass_fds promise, and the same as in
     the plain run; os.environ must show no PPIPE_REGISTRY. The run is made
     once more with PPIPE_STATS under libppipe, whose report of the writing
     child must show bytes by vmsplice (the registry was in use), and whose
     sets are judged as well.

The Python is PYTHON, or the first CPython 3 found whose test.test_subprocess
imports (cpython_modes.py). The system mode is left out (not the test) without
root, unshare or mount, or for a sanitizer build.

Exit status: 0 pass, 1 fail, 77 skip (no CPython with its test package).
"""
import json
import os
import sys
import tempfile

import cpython_modes

TIMEOUT = 120           # seconds, any one command
SIZE = 4 << 20
CHUNK = 64 << 10
PASS_FDS = (40, 41)

# Runs one CPython test case by its full name; the last line sums it up.
RUN_CASE = r"""
import sys, unittest
suite = unittest.defaultTestLoader.loadTestsFromName(sys.argv[1])
r = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
print(f"RESULT run={r.testsRun} failures={len(r.failures)} errors={len(r.errors)} "
      f"skipped={len(r.skipped)}")
sys.exit(0 if r.wasSuccessful() else 1)
"""

# The child that lists what it holds. os.listdir's own fd to /proc/self/fd
# is closed once it returns, so an entry that no longer resolves was it.
LISTER = r"""
import json, os
fds = {}
for n in os.listdir("/proc/self/fd"):
    try:
        fds[int(n)] = os.readlink("/proc/self/fd/" + n)
    except FileNotFoundError:
        pass
try:
    with open("/proc/self/environ", "rb") as f:
        kernel = [v.split(b"=")[0].decode() for v in f.read().split(b"\0")
                  if v.startswith(b"PPIPE_REGISTRY")]
except OSError:
    kernel = []
print(json.dumps({"fds": {str(k): v for k, v in sorted(fds.items())},
                  "environ": sorted(k for k in os.environ if k.startswith("PPIPE_REGISTRY")),
                  "proc_environ": kernel}))
"""

# The parent: a pipe into which a child writes SIZE bytes, then the listers.
PARENT = r"""
import json, os, shutil, subprocess, sys
SIZE, CHUNK, PASS = int(sys.argv[1]), int(sys.argv[2]), [int(x) for x in sys.argv[3].split(",")]
LISTER = sys.argv[4]
py = sys.executable
WRITER = '''
import os, sys
size, chunk = int(sys.argv[1]), int(sys.argv[2])
b = b"x" * chunk
for _ in range(size // chunk):
    v = memoryview(b)
    while v:
        v = v[os.write(1, v):]
'''
r, w = os.pipe()
writer = subprocess.Popen([py, "-c", WRITER, str(SIZE), str(CHUNK)], stdout=w)
got = 0
while got < SIZE:
    b = os.read(r, 1 << 20)
    if not b:
        break
    got += len(b)
print(json.dumps({"writer": {"pid": writer.pid, "bytes": got, "status": writer.wait()}}))

null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, PASS[0], inheritable=False)
os.dup2(w, PASS[1], inheritable=False)
os.close(null)

def inheritable():
    out = set()
    for n in os.listdir("/proc/self/fd"):
        try:
            if os.get_inheritable(int(n)):
                out.add(int(n))
        except OSError:
            pass
    return out

variants = [
    ("close_fds=True", [py, "-c", LISTER], {"close_fds": True}, {0, 1, 2}),
    (f"close_fds=True, pass_fds={tuple(PASS)}", [py, "-c", LISTER],
     {"close_fds": True, "pass_fds": PASS}, {0, 1, 2} | set(PASS)),
    ("close_fds=True, stdin=the pipe's read end", [py, "-c", LISTER],
     {"close_fds": True, "stdin": r}, {0, 1, 2}),
    ("close_fds=False", [py, "-c", LISTER], {"close_fds": False}, None),
    ("close_fds=True, through env -u LD_PRELOAD",
     [shutil.which("env") or "/usr/bin/env", "-u", "LD_PRELOAD", py, "-c", LISTER],
     {"close_fds": True}, {0, 1, 2}),
]
for name, argv, kw, want in variants:
    if want is None:
        want = {0, 1, 2} | inheritable()
    p = subprocess.run(argv, stdout=subprocess.PIPE, **kw)
    try:
        seen = json.loads(p.stdout)
    except ValueError:
        seen = {"error": f"exit status {p.returncode}, output {p.stdout[-300:]!r}"}
    seen.update(variant=name, expected=sorted(want), status=p.returncode)
    print(json.dumps(seen), flush=True)
"""

RESULTS = []    # (mode, what, verdict, detail); verdict True, False or None (skipped)


def check(mode, what, ok, detail=""):
    """Records and prints one check; the detail (what was compared) on failure."""
    RESULTS.append((mode, what, ok, detail))
    tag = {True: "ok  ", False: "FAIL", None: "SKIP"}[ok]
    print(f"{tag} [{mode}] {what}" + (f": {detail}" if detail and ok is not True else ""),
          flush=True)


def run_case(modes, mode, py, case):
    r = modes.run(mode, [py, "-c", RUN_CASE, case], TIMEOUT)
    lines = (r.stdout + r.stderr).strip().splitlines()
    summary = next((ln for ln in reversed(lines) if ln.startswith("RESULT ")), None)
    ok = r.returncode == 0 and summary is not None and " skipped=0" in summary \
        and " run=0 " not in summary
    detail = f"{summary or 'no summary'}; {r.tail(200)}"
    if not ok:
        detail += "\n" + "\n".join(lines[-25:])
    check(mode, f"CPython's {case.rsplit('.', 2)[-2]}.{case.rsplit('.', 1)[-1]} passes", ok,
          detail)


def fd_text(fds):
    return "{" + ", ".join(f"{k}: {v}" for k, v in fds.items()) + "}"


def run_program(modes, mode, py, stats=None):
    """The parent program once: {variant: its line}, the writer's line."""
    extra = {"PPIPE_STATS": os.path.join(stats, "stats.%p")} if stats else None
    r = modes.run(mode, [py, "-c", PARENT, str(SIZE), str(CHUNK),
                         ",".join(map(str, PASS_FDS)), LISTER], TIMEOUT, extra_env=extra)
    rows, writer = {}, None
    for line in r.stdout.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "writer" in d:
            writer = d["writer"]
        elif "variant" in d:
            rows[d["variant"]] = d
    tag = " (with PPIPE_STATS)" if stats else ""
    ok = r.returncode == 0 and writer and writer["bytes"] == SIZE and writer["status"] == 0 \
        and len(rows) == 5
    check(mode, f"the program ran{tag}: {SIZE} bytes through the pipe, 5 children listed",
          bool(ok), f"writer {writer}, {len(rows)} children; {r.tail()}")
    return rows, writer


def judge(mode, rows, plain, tag=""):
    kernel = []
    for name, d in rows.items():
        if "error" in d:
            check(mode, f"{name}{tag}: the child listed its fds", False, d["error"])
            continue
        if d["status"] != 0:
            check(mode, f"{name}{tag}: the child exited 0", False, f"exit status {d['status']}")
        fds = {int(k): v for k, v in d["fds"].items()}
        want = set(d["expected"])
        extra = {k: v for k, v in fds.items() if k not in want}
        check(mode, f"{name}{tag}: fds {sorted(want)}, as promised", set(fds) == want,
              f"the child held {fd_text(fds)}; expected {sorted(want)}"
              + (f"; beyond them: {fd_text(extra)}" if extra else ""))
        if plain is not None and name in plain and "fds" in plain[name]:
            p = sorted(int(k) for k in plain[name]["fds"])
            check(mode, f"{name}{tag}: the same fds as plain", sorted(fds) == p,
                  f"here {sorted(fds)}, plain {p}")
        check(mode, f"{name}{tag}: os.environ shows no PPIPE_REGISTRY", not d["environ"],
              f"os.environ has {d['environ']}")
        if d["proc_environ"]:
            kernel.append(name)
    if kernel:
        print(f"     [{mode}] note{tag}: /proc/self/environ (the environment the kernel got at "
              f"exec) names PPIPE_REGISTRY in {len(kernel)} of {len(rows)} children, not "
              f"judged: {'; '.join(kernel)}")


def judge_stats(mode, stats, writer):
    reports = []
    for n in os.listdir(stats):
        with open(os.path.join(stats, n), errors="replace") as f:
            for line in f:
                try:
                    reports.append(json.loads(line))
                except ValueError:
                    pass
    mine = [d for d in reports if writer and d.get("pid") == writer["pid"]]
    moved = sum(d.get("totals", {}).get("bytes_accelerated", 0) for d in mine)
    check(mode, "the writing child put its bytes in by vmsplice (PPIPE_STATS): the pipe "
          "crossed with the registry in use", moved > 0,
          f"{len(reports)} report(s); the writer's (pid {writer and writer['pid']}): "
          f"{[d.get('totals') for d in mine]}")


def summary():
    bad = sum(1 for r in RESULTS if r[2] is False)
    if bad:
        print("\nfailed:")
    for mode, what, ok, _ in RESULTS:
        if ok is False:
            print(f"  [{mode}] {what}")
    print(f"\n{len(RESULTS)} checks, {bad} failed, "
          f"{sum(1 for r in RESULTS if r[2] is None)} skipped")
    return 1 if bad else 0


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    lib = os.path.abspath(sys.argv[1])
    about = cpython_modes.find_python(sys.argv[2] if len(sys.argv) == 3 else None)
    if not about:
        print("SKIP: no CPython 3 whose test.test_subprocess imports (on Debian: "
              "apt-get install libpython3.11-testsuite)")
        return 77
    py = about["executable"]
    cases = about["pass_fds_redirected"]
    print(f"Python: {py} {about['version']}, test package {about['test_dir']}; "
          f"test_pass_fds_redirected: {cases or 'none'}")
    with tempfile.TemporaryDirectory(prefix="ppipe-cpython-fds.") as work:
        modes = cpython_modes.Modes(lib, work)
        ok, why = modes.setup_system(py)
        if ok is None:
            check("system", "the /etc/ld.so.preload mode", None, why)
        elif not ok:
            check("system", "the /etc/ld.so.preload mode loads the library", False, why)
        elif why:
            print(f"note: {why}")

        if not cases:
            check("-", "this test_subprocess has test_pass_fds_redirected", None,
                  f"Python {about['version']}")
        plain = None
        for mode in modes.available():
            print(f"\n== {mode}: {cpython_modes.LABELS[mode]}")
            for case in cases:
                run_case(modes, mode, py, case)
            rows, _ = run_program(modes, mode, py)
            judge(mode, rows, plain)
            if mode == "plain":
                plain = rows
                continue
            stats = os.path.join(work, f"stats-{mode}")
            os.mkdir(stats)
            rows, writer = run_program(modes, mode, py, stats)
            judge(mode, rows, plain, " (with PPIPE_STATS)")
            judge_stats(mode, stats, writer)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
