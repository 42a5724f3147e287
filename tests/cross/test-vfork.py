#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""libppipe's vfork path end to end (vfork-exec.c), preloaded.

Runs PROGRAM PROGRAM with LD_PRELOAD=LIBRARY and PPIPE_STATS=1 (a JSON
report per process on stderr) and requires: its own checks passed (every
vfork returned to the parent with its stack intact, every child's status,
every block read back in order); one report from the parent, the reader
and each of the 12 writers exec'd from vfork children, none from the 12
children that _exit()ed; the parent's large writes and every writer's by
vmsplice (the writers' only if the registry handed them the pipe across
the vfork and the exec).

usage: test-vfork.py LIBRARY PROGRAM
"""
import json
import os
import subprocess
import sys

BLOCK = 64 << 10
CHILDREN = 24
WRITER_BLOCKS = 16
OWN_BLOCKS = 32


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__.rsplit("usage: ", 1)[1])
        return 2
    lib, prog = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    env = dict(os.environ, LD_PRELOAD=lib, PPIPE_STATS="1")
    proc = subprocess.Popen([prog, prog], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=120)
    p = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    print(p.stdout, end="")
    reports, other = [], []
    for line in p.stderr.splitlines():
        try:
            reports.append(json.loads(line))
        except ValueError:
            other.append(line)
    failed = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failed.append(what)

    check(p.returncode == 0, f"vfork-exec's own checks (exit status {p.returncode})"
          + ("".join("\n     " + l for l in other[-10:]) if other else ""))
    def accel(r):
        return r.get("totals", {}).get("bytes_accelerated", 0)

    check(len(reports) == 2 + CHILDREN // 2,
          f"{len(reports)} reports: the parent, the reader and {CHILDREN // 2} exec'd "
          f"writers report, the {CHILDREN // 2} vfork children that _exit()ed do not")
    parent = sum(accel(r) for r in reports if r.get("pid") == proc.pid)
    # The others that wrote: the writers (the reader writes nothing).
    writers = [r for r in reports if r.get("pid") != proc.pid and accel(r)]
    check(parent >= OWN_BLOCKS * BLOCK,
          f"the parent's {OWN_BLOCKS} blocks by vmsplice ({parent} bytes)")
    full = [r for r in writers if accel(r) == WRITER_BLOCKS * BLOCK]
    check(len(full) == CHILDREN // 2,
          f"each writer exec'd from a vfork child put its {WRITER_BLOCKS} blocks in by "
          f"vmsplice ({len(full)} of {CHILDREN // 2})")
    print(f"{'FAIL' if failed else 'PASS'}: {len(failed)} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
