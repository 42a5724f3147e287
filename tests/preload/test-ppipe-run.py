#!/usr/bin/env python3
"""ppipe-run -s prints one line for a whole process tree and passes its exit status on.

usage: test-ppipe-run.py PPIPE-RUN TREE-BYTES LIBRARY

TREE-BYTES (tests/preload/tree-bytes.c) makes a tree whose statistics are
known to the byte: 1 MiB accelerated, 200100 bytes passed through, three
plain pipes for three reasons. Cases:

  sum      run with PPIPE_STATS=<dir>/%p.json; ppipe-stats-sum --json on the
           directory must give exactly those bytes, processes and reasons,
           and name "true" as a program handed a pipe that reported nothing
  -s --    ppipe-run -s -- sh -c 'tree-bytes; exit 3': exit status 3, and the
           last stderr line is the tree's, the shell counted in
  -s       ppipe-run -s tree-bytes (no --): status 0, the same line without sh
  stdio    ppipe-run -s -- sh -c 'seq ... | cat': the bytes seq's stdio wrote
           are passed through, by stdio inside libc, not 0 B
  plain    ppipe-run -- sh -c ...: the command gets LD_PRELOAD, no line printed
Each run gets a TMPDIR of its own, which must be empty afterwards.

Exit status: 0 passed, 1 failed, 77 skipped (no 1 MiB pipes), 99 set-up error.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

EXIT_PASS, EXIT_FAIL, EXIT_SKIP, EXIT_ERROR = 0, 1, 77, 99
TIMEOUT = 120
HOLDER = "an exec'd holder has not confirmed (no libppipe there, yet or at all)"
UNALIGNED = "non-blocking, pipe not empty and size not page-aligned"
PLAIN = {HOLDER: 1, "writes below PPIPE_MIN_WRITE": 1, UNALIGNED: 1}
# The spawned "true" never runs libppipe: the note of its exec goes unanswered.
UNSEEN = ("; 1 pipe handed to programs that did not report (true: no libppipe there, or "
          "killed), their writes unseen")
LINE = ("libppipe: {n} processes, 1.00 MiB accelerated (84.0%), 195 KiB passed through; "
        "plain pipes: 1 " + HOLDER + ", 1 " + UNALIGNED + ", "
        "1 writes below PPIPE_MIN_WRITE" + UNSEEN)


class Fail(Exception):
    pass


class Skip(Exception):
    pass


def base_env(work):
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp, exist_ok=True)
    env.update({"PPIPE_MIN_WRITE": "4097", "PPIPE_THP": "off", "TMPDIR": tmp})
    return env


def run(argv, env, what):
    try:
        r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT, universal_newlines=True)
    except subprocess.TimeoutExpired:
        raise Fail(f"{what}: still running after {TIMEOUT} s")
    if r.returncode == EXIT_SKIP or "SKIP" in r.stderr:
        raise Skip(r.stderr.strip())
    leftovers = os.listdir(env["TMPDIR"])
    if leftovers:
        raise Fail(f"{what}: left {leftovers} in TMPDIR")
    return r


def case_sum(tree, lib, work, summer):
    d = os.path.join(work, "reports")
    os.mkdir(d)
    env = base_env(work)
    env.update({"LD_PRELOAD": lib, "PPIPE_STATS": os.path.join(d, "%p.json")})
    r = run([tree], env, "tree-bytes")
    if r.returncode != 0:
        raise Fail(f"tree-bytes: exit {r.returncode}: {r.stderr.strip()}")
    out = subprocess.run([sys.executable, summer, "--json", d], stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    s = json.loads(out)
    want = {"processes": 3, "bytes_accelerated": 1 << 20, "bytes_passthrough": 200100,
            "plain_pipes": PLAIN, "unseen_programs": {"true": 1}}
    got = {k: s[k] for k in want}
    if got != want:
        raise Fail(f"sum: got {got}, want {want}")
    return "sum: 3 processes, exact bytes and plain pipes"


def last_line(r):
    lines = r.stderr.strip().split("\n")
    return lines[-1] if lines else ""


def case_dashdash(run_script, tree, lib, work):
    env = base_env(work)
    env["LIBPPIPE_PATH"] = lib
    r = run([run_script, "-s", "--", "sh", "-c", f"'{tree}'; exit 3"], env, "ppipe-run -s --")
    if r.returncode != 3:
        raise Fail(f"ppipe-run -s --: exit {r.returncode}, want the command's 3: {r.stderr}")
    want = LINE.format(n=4)
    if last_line(r) != want:
        raise Fail(f"ppipe-run -s --: last line\n  {last_line(r)!r}\nwant\n  {want!r}")
    if r.stderr.count("libppipe:") != 1:
        raise Fail(f"ppipe-run -s --: more than one line of libppipe's: {r.stderr}")
    return "ppipe-run -s -- sh -c: exit 3, " + want


def case_s(run_script, tree, lib, work):
    env = base_env(work)
    env["LIBPPIPE_PATH"] = lib
    r = run([run_script, "-s", tree], env, "ppipe-run -s")
    want = LINE.format(n=3)
    if r.returncode != 0 or last_line(r) != want:
        raise Fail(f"ppipe-run -s: exit {r.returncode}, last line\n  {last_line(r)!r}\n"
                   f"want exit 0 and\n  {want!r}")
    return "ppipe-run -s without --: exit 0, the same line"


def case_stdio(run_script, lib, work):
    """seq writes its lines through stdio: libc writes them out of libppipe's
    sight, and the line says so instead of 0 B passed through."""
    env = base_env(work)
    env["LIBPPIPE_PATH"] = lib
    # The default threshold: seq's flushes of its 4 KiB buffer stay below it.
    env.pop("PPIPE_MIN_WRITE", None)
    r = run([run_script, "-s", "--", "sh", "-c", "seq 1 100000 | cat > /dev/null"], env,
            "ppipe-run -s seq")
    line = last_line(r)
    # seq 1 100000 prints 588895 bytes: 575 KiB.
    want = ("575 KiB passed through (575 KiB of it by stdio inside libc); plain pipes: 1 "
            "written through stdio inside libc")
    if r.returncode != 0 or want not in line:
        raise Fail(f"ppipe-run -s seq: exit {r.returncode}, last line\n  {line!r}\n"
                   f"want it to have\n  {want!r}")
    return "ppipe-run -s seq | cat: " + want


def case_plain(run_script, lib, work):
    env = base_env(work)
    env["LIBPPIPE_PATH"] = lib
    r = run([run_script, "--", "sh", "-c", 'printf "%s" "$LD_PRELOAD"; exit 4'], env,
            "ppipe-run --")
    if r.returncode != 4 or r.stdout.split(":")[0] != lib or "libppipe:" in r.stderr:
        raise Fail(f"ppipe-run --: exit {r.returncode}, LD_PRELOAD {r.stdout!r}, "
                   f"stderr {r.stderr!r}")
    return "ppipe-run -- without -s: the command runs with the library, no line"


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return EXIT_ERROR
    run_script, tree, lib = (os.path.abspath(a) for a in argv)
    summer = os.path.join(os.path.dirname(run_script), "ppipe-stats-sum")
    for f in (run_script, tree, lib, summer):
        if not os.path.isfile(f):
            print(f"ERROR: {f} does not exist")
            return EXIT_ERROR
    work = tempfile.mkdtemp(prefix="ppipe-run-test-")
    failed = False
    try:
        cases = [lambda: case_sum(tree, lib, work, summer),
                 lambda: case_dashdash(run_script, tree, lib, work),
                 lambda: case_s(run_script, tree, lib, work),
                 lambda: case_stdio(run_script, lib, work),
                 lambda: case_plain(run_script, lib, work)]
        for c in cases:
            try:
                print("PASS " + c())
            except Fail as e:
                print(f"FAIL {e}")
                failed = True
    except Skip as e:
        print(f"SKIP {e}")
        return EXIT_SKIP
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return EXIT_FAIL if failed else EXIT_PASS


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
