#!/usr/bin/env python3
"""PPIPE_STATS paths that cannot take a report never hurt the program.

usage: test-stats-path.py LIBRARY

Runs /bin/true with LD_PRELOAD=LIBRARY and PPIPE_STATS naming: a FIFO that
nobody reads (must not hang at exit), a FIFO that is read (gets the report),
a directory, a file in a directory that does not exist, an unwritable file
(as root, a read-only file system stands in: /proc), a path longer than the
option allows, and a path with bytes that are not UTF-8 (the file is made).
Each run must exit 0 within the time limit; the bad ones print one warning.
"""
import os
import subprocess
import sys
import tempfile
import threading


def run(lib, stats, timeout=20):
    env = dict(os.environ, LD_PRELOAD=lib)
    env = {k.encode(): v.encode() for k, v in env.items()}
    env[b"PPIPE_STATS"] = stats
    return subprocess.run(["/bin/true"], env=env, stderr=subprocess.PIPE, timeout=timeout)


def main():
    lib = os.path.abspath(sys.argv[1])
    failed = False
    with tempfile.TemporaryDirectory() as d:
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo)
        read_fifo = os.path.join(d, "read-fifo")
        os.mkfifo(read_fifo)
        got = []

        def reader():
            with open(read_fifo, "rb") as f:
                got.append(f.read())

        t = threading.Thread(target=reader)
        t.start()
        cases = [
            ("a FIFO nobody reads", fifo.encode(), "warn"),
            ("a FIFO that is read", read_fifo.encode(), "report"),
            ("a directory", d.encode(), "warn"),
            ("a missing directory", os.path.join(d, "no", "x").encode(), "warn"),
            ("a read-only file system", b"/proc/ppipe-stats", "warn"),
            ("a path too long", b"/" + b"x" * 300, "warn"),
            ("bytes that are not UTF-8", os.path.join(d, "st-\xff\xfe").encode("latin-1"),
             "file"),
        ]
        for name, path, want in cases:
            try:
                r = run(lib, path)
            except subprocess.TimeoutExpired:
                print(f"FAIL {name}: the program hung at exit")
                failed = True
                continue
            err = r.stderr.decode(errors="replace")
            ok = r.returncode == 0
            if want == "warn":
                ok = ok and "libppipe" in err and len(err.strip().splitlines()) == 1
            elif want == "file":
                ok = ok and os.path.exists(path) and b'"pid"' in open(path, "rb").read()
            elif want == "report":
                t.join(10)
                ok = ok and got and b'"pid"' in got[0]
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {r.returncode}, "
                  f"stderr: {err.strip()[:160]!r}")
            failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
