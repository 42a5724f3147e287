#!/usr/bin/env python3
"""ppipe-stats-sum adds up a process tree's reports: bytes, processes, plain pipes.

usage: test-stats-sum.py PPIPE-STATS-SUM

Feeds the summing script directories of made-up reports and checks its JSON
and its line: each pipe counted once however many processes and fds show it,
open and closed pipes alike; the reason a plain pipe is counted under; reports
from before closed_pipes and last_fallback existed; unreadable lines; byte
formatting; bytes stdio wrote out of sight; exec notes that no report of the
image answers (a program without libppipe), and those a report answers.
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL " + what)


def counters(acc=0, pt=0, fallbacks=0):
    return {"writes_accelerated": 1 if acc else 0, "bytes_accelerated": acc,
            "writes_passthrough": 1 if pt else 0, "bytes_passthrough": pt,
            "fallbacks": fallbacks}


def pipe(inode, path, reason, last_fallback=None, acc=0, pt=0, fd=None, end="write"):
    p = {"inode": inode, "path": path, "reason": reason, "last_fallback": last_fallback}
    p.update(counters(acc, pt, 1 if last_fallback else 0))
    if fd is not None:
        p.update({"fd": fd, "end": end})
    return p


def report(pid, fds=(), closed=(), unlisted=0):
    acc = sum(p["bytes_accelerated"] for p in list({p["inode"]: p for p in fds}.values())
              + list(closed))
    pt = sum(p["bytes_passthrough"] for p in list({p["inode"]: p for p in fds}.values())
             + list(closed))
    return {"pid": pid, "totals": counters(acc, pt), "fds": list(fds),
            "closed_pipes": list(closed), "closed_pipes_unlisted": unlisted}


def run(script, d, *extra):
    r = subprocess.run([sys.executable, script] + list(extra) + [d], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    return r


def write_dir(base, name, files):
    d = os.path.join(base, name)
    os.mkdir(d)
    for fname, lines in files.items():
        with open(os.path.join(d, fname), "w") as f:
            for ln in lines:
                f.write((ln if isinstance(ln, str) else json.dumps(ln)) + "\n")
    return d


def test_tree(script, base):
    # Pipe 10: accelerated by the parent, passed through by a child: not plain.
    # Pipe 11: plain for good; both ends open in the writer, the read end in the
    #          reader, and closed in a second writer: one pipe.
    # Pipe 12: closed; its large writes fell back (non-blocking).
    # Pipe 13: only small writes.
    # Pipe 14: nothing written: not a plain pipe, not anything.
    parent = report(100, fds=[pipe(10, "vmsplice", "created here", acc=1 << 20, fd=4)],
                    closed=[pipe(12, "vmsplice", "created here", "non-blocking write end",
                                 pt=3000)])
    child = report(101, fds=[pipe(10, "vmsplice", "created here", pt=500, fd=4),
                             pipe(11, "passthrough", "read end inherited across exec",
                                  "readers no longer known", pt=7000, fd=5, end="read"),
                             pipe(11, "passthrough", "read end inherited across exec",
                                  "readers no longer known", pt=7000, fd=6),
                             pipe(14, "vmsplice", "created here", fd=8)])
    reader = report(102, fds=[pipe(11, "passthrough", "read end inherited across exec",
                                   fd=0, end="read")])
    writer2 = report(103, closed=[pipe(11, "passthrough", "readers no longer known "
                                       "(marked by another process)",
                                       "readers no longer known", pt=1000),
                                  pipe(13, "vmsplice", "created here", pt=100)],
                     unlisted=2)
    d = write_dir(base, "tree", {"100.json": [parent], "101.json": [child],
                                 "102.json": [reader], "103.json": [writer2, ""]})
    r = run(script, d, "--json")
    s = json.loads(r.stdout)
    check(r.returncode == 0, f"tree: exit {r.returncode}: {r.stderr}")
    check(s["processes"] == 4, f"tree: processes {s['processes']}")
    check(s["bytes_accelerated"] == 1 << 20, f"tree: accelerated {s['bytes_accelerated']}")
    check(s["bytes_passthrough"] == 3000 + 500 + 7000 + 1000 + 100,
          f"tree: passed through {s['bytes_passthrough']}")
    want = {"non-blocking write end": 1, "read end inherited across exec": 1,
            "writes below PPIPE_MIN_WRITE": 1}
    check(s["plain_pipes"] == want, f"tree: plain {s['plain_pipes']}, want {want}")
    check(s["closed_pipes_unlisted"] == 2, "tree: unlisted")
    text = run(script, d).stdout.strip()
    want_text = ("libppipe: 4 processes, 1.00 MiB accelerated (98.9%), 11.3 KiB passed "
                 "through; plain pipes: 1 non-blocking write end, 1 read end inherited "
                 "across exec, 1 writes below PPIPE_MIN_WRITE; 2 closed pipes not itemised")
    check(text == want_text, f"tree: line\n  {text!r}\nwant\n  {want_text!r}")


def test_unknown_inode(script, base):
    # Pipes that never needed their inode are reported with inode 0: each is a
    # pipe of its own, however many of them a tree closed.
    d = write_dir(base, "unknown", {
        "a": [report(1, closed=[pipe(0, "vmsplice", "created here, readers known", pt=10),
                                pipe(0, "vmsplice", "created here, readers known", pt=20)])],
        "b": [report(2, closed=[pipe(0, "vmsplice", "created here, readers known", pt=30)])],
    })
    s = json.loads(run(script, d, "--json").stdout)
    want = {"writes below PPIPE_MIN_WRITE": 3}
    check(s["plain_pipes"] == want, f"unknown inodes: plain {s['plain_pipes']}, want {want}")
    check(s["bytes_passthrough"] == 60, f"unknown inodes: {s['bytes_passthrough']} B passed through")


def test_old_and_bad(script, base):
    # A report of an older libppipe: no closed_pipes, no last_fallback.
    old = {"pid": 7, "totals": counters(0, 5000),
           "fds": [{"fd": 3, "inode": 1, "end": "write", "path": "passthrough",
                    "reason": "spliced or teed out of", **counters(0, 5000)}]}
    d = write_dir(base, "old", {"7.json": [old, "{not json", '{"pid": 8}']})
    s = json.loads(run(script, d, "--json").stdout)
    check(s["processes"] == 1 and s["bytes_passthrough"] == 5000,
          f"old: {s}")
    check(s["plain_pipes"] == {"spliced or teed out of": 1}, f"old: plain {s}")
    check(s["unreadable_lines"] == 2, f"old: unreadable {s['unreadable_lines']}")
    text = run(script, d).stdout.strip()
    check(text.endswith("(2 unreadable report lines)") and "0 B accelerated (0.0%)" in text,
          f"old: line {text!r}")
    empty = write_dir(base, "empty", {})
    text = run(script, empty).stdout.strip()
    check(text.startswith("libppipe: no process reported"), f"empty: {text!r}")
    r = run(script, os.path.join(base, "missing"))
    check(r.returncode == 2, f"missing directory: exit {r.returncode}")


def test_unseen(script, base):
    """Bytes stdio left to libc are passed through, and name the pipe's reason;
    an exec note that no report of that pid and image answers names its program."""
    stdio = pipe(30, "vmsplice", "created here, readers known", pt=0)
    stdio["bytes_stdio"] = 70000
    writer = report(501, fds=[dict(stdio, fd=1)])
    writer["totals"]["bytes_stdio"] = 70000
    writer["image"] = "openssl"
    mixed = pipe(31, "vmsplice", "created here, readers known", pt=5000)
    mixed["bytes_stdio"] = 100
    other = report(502, closed=[mixed])
    other["totals"]["bytes_stdio"] = 100
    other["image"] = "sh"
    notes = [{"pid": 503, "version": "x", "exec": {"image": "staticw", "pipes": [40, 41]}},
             {"pid": 504, "version": "x", "exec": {"image": "cat", "pipes": [40]}},
             {"pid": 505, "version": "x", "exec": {"image": "gone", "pipes": [42]}}]
    cat = report(504)
    cat["image"] = "cat"
    # pid 505 reported, but as another image: the note's program did not.
    again = report(505)
    again["image"] = "sh"
    d = write_dir(base, "unseen", {"501.json": [writer], "502.json": [other],
                                   "503.json": [notes[0]], "504.json": [notes[1], cat],
                                   "505.json": [notes[2], again]})
    r = run(script, d, "--json")
    s = json.loads(r.stdout)
    check(r.returncode == 0 and s["unreadable_lines"] == 0,
          f"unseen: exit {r.returncode}, unreadable {s.get('unreadable_lines')}: {r.stderr}")
    check(s["processes"] == 4, f"unseen: processes {s['processes']} (notes are none)")
    check(s["bytes_passthrough"] == 70000 + 5000 + 100 and s["bytes_stdio"] == 70100,
          f"unseen: passed through {s['bytes_passthrough']}, stdio {s['bytes_stdio']}")
    want = {"written through stdio inside libc": 1, "writes below PPIPE_MIN_WRITE": 1}
    check(s["plain_pipes"] == want, f"unseen: plain {s['plain_pipes']}, want {want}")
    check(s["unseen_programs"] == {"gone": 1, "staticw": 2},
          f"unseen: programs {s['unseen_programs']}")
    text = run(script, d).stdout.strip()
    check("73.3 KiB passed through (68.5 KiB of it by stdio inside libc)" in text and
          text.endswith("3 pipes handed to programs that did not report (gone, staticw: no "
                        "libppipe there, or killed), their writes unseen"),
          f"unseen: line {text!r}")


def test_no_registry(script, base):
    """Processes that went without a registry are counted by their reason, and named in the line."""
    why = "no pipe registry: the host's shared-memory segment ids are scarce"
    plain = pipe(50, "passthrough", why, pt=4 << 20)
    sh = report(601, closed=[plain])
    sh["registry_missing"] = why
    sh2 = report(602)
    sh2["registry_missing"] = why
    fine = report(603)
    fine["registry_missing"] = None
    d = write_dir(base, "noreg", {"601.json": [sh], "602.json": [sh2], "603.json": [fine]})
    r = run(script, d, "--json")
    s = json.loads(r.stdout)
    check(s["no_registry"] == {why: 2}, f"no registry: {s['no_registry']}")
    check(s["plain_pipes"] == {why: 1}, f"no registry: plain {s['plain_pipes']}")
    text = run(script, d).stdout.strip()
    check(text.endswith("; 2 processes went without a pipe registry (the host's shared-memory "
                        "segment ids are scarce): their pipes that crossed stayed plain"),
          f"no registry: line {text!r}")


def test_human(script):
    spec = importlib.util.spec_from_file_location("sumscript", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for n, want in [(0, "0 B"), (1023, "1023 B"), (1024, "1.00 KiB"), (10000, "9.77 KiB"),
                    (200000, "195 KiB"), (1048575, "1.00 MiB"), (37748736, "36.0 MiB"),
                    (1300000000, "1.21 GiB")]:
        check(mod.human(n) == want, f"human({n}) = {mod.human(n)!r}, want {want!r}")


def main(argv):
    if len(argv) != 1:
        print(__doc__)
        return 99
    script = os.path.abspath(argv[0])
    base = tempfile.mkdtemp(prefix="ppipe-sum-test-")
    try:
        test_tree(script, base)
        test_unknown_inode(script, base)
        test_old_and_bad(script, base)
        test_unseen(script, base)
        test_no_registry(script, base)
        test_human(script)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
