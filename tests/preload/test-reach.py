#!/usr/bin/env python3
"""Reach and integrity of pipelines whose stages are exec'd programs.

usage: test-reach.py LIBRARY [STATIC_COPY]

Each shape runs with LD_PRELOAD=LIBRARY under strace, which counts the bytes
that went into pipes by vmsplice() against those written by large write()s:
the share is measured from outside, not taken from libppipe's statistics.
Every shape must deliver the data intact (sha256 of a 48 MiB file). Shapes
whose every process runs libppipe must send at least 90% of the bytes by
vmsplice; shapes where a reader escapes libppipe (a stripped environment)
must stay (almost) plain, and a splicing reader (pv) must not corrupt
anything. Exit 77 when strace is missing.
"""
import hashlib
import mmap
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import pyshapes

MIN_WRITE = 16384
SIZE = 48 << 20
LINE = re.compile(r"^\d+\s+(vmsplice|write|writev)\((\d+).*\) += (\d+)$")



PY_SPAWN = """
import hashlib, os, sys
r, w = os.pipe()
fa = [(os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_CLOSE, r), (os.POSIX_SPAWN_CLOSE, w)]
pid = os.posix_spawnp("cat", ["cat", sys.argv[1]], os.environ, file_actions=fa)
os.close(w)
h = hashlib.sha256()
while True:
    b = os.read(r, 1 << 20)
    if not b:
        break
    h.update(b)
os.waitpid(pid, 0)
print(h.hexdigest())
"""


# A reader that switches its stdin's flags: libppipe takes the inherited end over
# then (here made to fail, PPIPE_TEST_FAULT=adopt), before any byte is read.
PY_SETFL_READER = """
import fcntl, hashlib, sys
fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL))
h = hashlib.sha256()
while True:
    b = sys.stdin.buffer.read1(1 << 20)
    if not b:
        break
    h.update(b)
print(h.hexdigest())
"""

PY_SCRIBBLE = """
import os, random, re, subprocess, sys
r, w = os.pipe()          # a pipe of ours that crosses a fork makes the tree's registry
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
# The registry: a System V segment this process maps (no fd): scribbled through /proc/self/mem.
with open("/proc/self/maps") as f:
    maps = [m for m in (re.match(r"([0-9a-f]+)-([0-9a-f]+) .*/SYSV", ln) for ln in f) if m]
if len(maps) != 1:
    sys.exit("no registry mapping")
start, end = (int(x, 16) for x in maps[0].groups())
rnd = random.Random(7)
with open("/proc/self/mem", "r+b", buffering=0) as mem:
    for _ in range(20000):     # scribble everywhere but the header
        mem.seek(start + rnd.randrange(4096, end - start - 8))
        mem.write(rnd.randbytes(8))
os.close(r); os.close(w)
out = subprocess.run(["sh", "-c", "cat %s | cat | sha256sum" % sys.argv[1]],
                     stdout=subprocess.PIPE, check=True).stdout.decode()
print(out.split()[0])
"""


def run_shape(lib, argv, workdir):
    trace = os.path.join(workdir, "trace")
    env = dict(os.environ, LD_PRELOAD=lib)
    cmd = ["strace", "-f", "-qq", "-e", "trace=vmsplice,write,writev", "-e", "signal=none",
           "-o", trace] + argv
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=120)
    vm = wr = 0
    with open(trace, errors="replace") as f:
        for line in f:
            m = LINE.match(line.strip())
            if not m:
                continue
            n = int(m.group(3))
            if m.group(1) == "vmsplice":
                vm += n
            elif n >= MIN_WRITE:
                wr += n
    return out, vm, wr


def fstats_per_mib(lib, data, workdir):
    """A writer's fstat() calls per MiB it vmspliced, for 1 MiB writes into
    sh's pipe (64 KiB, so sixteen ring regions a write): the reuse rule's
    identity check, asked twice a write (of the fd at the first region, of
    its duplicate when the write takes one), not once a region."""
    trace = os.path.join(workdir, "trace-fstat")
    cmd = ["strace", "-f", "-qq", "-e", "trace=vmsplice,fstat,newfstatat", "-e", "signal=none",
           "-o", trace, "sh", "-c", f"dd if={data} bs=1M status=none | sha256sum"]
    subprocess.run(cmd, env=dict(os.environ, LD_PRELOAD=lib), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120, check=True)
    vm, fst = {}, {}
    call = re.compile(r"^(\d+)\s+(vmsplice|fstat|newfstatat)\((.*)\) += (-?\d+)")
    with open(trace, errors="replace") as f:
        for line in f:
            m = call.match(line.strip())
            if not m:
                continue
            pid, name, n = m.group(1), m.group(2), int(m.group(4))
            if name == "vmsplice":
                vm[pid] = vm.get(pid, 0) + max(n, 0)
            elif name == "fstat" or '""' in m.group(3):
                fst[pid] = fst.get(pid, 0) + 1
    if not vm:
        return None
    writer = max(vm, key=vm.get)
    return fst.get(writer, 0) / (vm[writer] / 2**20)


def main():
    lib = os.path.abspath(sys.argv[1])
    static_copy = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else None
    if not shutil.which("strace"):
        print("SKIP: strace is not installed")
        return 77
    failed = False
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "data")
        with open(data, "wb") as f:
            f.write(os.urandom(SIZE))
        with open(data, "rb") as f:
            want = hashlib.sha256(f.read()).hexdigest()
        py = sys.executable
        shapes = [
            # name, argv, minimum share (percent) or None, maximum share
            ("sh: cat | sha256sum", ["sh", "-c", f"cat {data} | sha256sum"], 90, 100),
            ("sh: dd bs=1M | sha256sum",
             ["sh", "-c", f"dd if={data} bs=1M status=none | sha256sum"], 90, 100),
            ("sh: 3 stages", ["sh", "-c", f"cat {data} | cat | sha256sum"], 90, 100),
            ("sh: 4 stages", ["sh", "-c", f"cat {data} | cat | cat | sha256sum"], 90, 100),
            ("python subprocess", [py, "-c", pyshapes.READ_CHILD, data], 90, 100),
            ("python subprocess, writing to the child's stdin", [py, "-c", pyshapes.WRITE_CHILD, data],
             90, 100),
            ("python os.posix_spawnp with file actions", [py, "-c", PY_SPAWN, data], 90, 100),
            ("python asyncio, writing to the child's stdin (non-blocking)",
             [py, "-c", pyshapes.ASYNCIO_WRITE_CHILD, data], 90, 100),
            ("the writer execs (sh -c 'exec cat')",
             ["sh", "-c", f"sh -c 'exec cat {data}' | sha256sum"], 90, 100),
            ("100 pipelines, 300 processes, one hash",
             ["sh", "-c", f"for i in $(seq 100); do head -c 1048576 {data} | cat | sha256sum;"
              f" done | sort -u"], 90, 100, "head1m"),
            ("read end sent over a unix socket (SCM_RIGHTS)",
             [py, "-c", pyshapes.SCM_RIGHTS_READER, data], 0, 10),
            ("an exec that fails, then one that works",
             ["sh", "-c", f"cat {data} | {{ ./no-such-program 2>/dev/null; exec sha256sum; }}"],
             90, 100),
            ("a reader that cannot take its pipe end over when it needs it (fault)",
             ["sh", "-c", f"cat {data} | env PPIPE_TEST_FAULT=adopt:ENOMEM:1 "
              f"{py} -c {shlex.quote(PY_SETFL_READER)}"], 0, 10),
            ("reader without LD_PRELOAD",
             ["sh", "-c", f"cat {data} | env -u LD_PRELOAD sha256sum"], 0, 10),
            ("reader exec'd through a stripped env",
             ["sh", "-c", f"cat {data} | env -i PATH=/usr/bin:/bin sha256sum"], 0, 10),
            ("registry scribbled over", [py, "-c", PY_SCRIBBLE, data], 0, 100),
        ]
        if static_copy:
            shapes.append(("a static program in the middle",
                           ["sh", "-c", f"cat {data} | {static_copy} | sha256sum"], 0, 10))
        if shutil.which("pv"):
            shapes.append(("a reader that splices (pv)",
                           ["sh", "-c", f"cat {data} | pv -q | sha256sum"], 0, 100))
        with open(data, "rb") as f:
            wants = {"data": want, "head1m": hashlib.sha256(f.read(1 << 20)).hexdigest()}
        # A program that does not run libppipe never sees its variable.
        r = subprocess.run(["sh", "-c", "true | true; env -u LD_PRELOAD printenv PPIPE_REGISTRY;"
                            " echo status $?"],
                           env=dict(os.environ, LD_PRELOAD=lib), stdout=subprocess.PIPE,
                           text=True, timeout=60)
        seen = r.stdout.strip()
        print(f"{'ok  ' if seen == 'status 1' else 'FAIL'} PPIPE_REGISTRY in a program "
              f"without the preload: {seen!r} (want 'status 1')")
        failed |= seen != "status 1"
        # Once a region would be 16 a MiB; dd's own start-up adds a few.
        per = fstats_per_mib(lib, data, d)
        ok = per is not None and per <= 4
        print(f"{'ok  ' if ok else 'FAIL'} dd bs=1M into a 64 KiB pipe: "
              f"{'no vmsplice' if per is None else f'{per:.2f}'} fstat calls a MiB (want <= 4)")
        failed |= not ok
        for name, argv, lo, hi, *which in shapes:
            want = wants[which[0] if which else "data"]
            out, vm, wr = run_shape(lib, argv, d)
            got = out.stdout.decode(errors="replace").split()
            share = 100.0 * vm / (vm + wr) if vm + wr else 0.0
            # One line per run, every one the same hash (sort -u).
            ok = (out.returncode == 0 and len(got) in (1, 2) and got[0] == want and
                  lo <= share <= hi)
            print(f"{'ok  ' if ok else 'FAIL'} {name}: vmsplice {vm} B, large write {wr} B, "
                  f"{share:.1f}% by vmsplice (want {lo}-{hi}%), data "
                  f"{'intact' if got and got[0] == want else 'WRONG'}")
            if not ok:
                failed = True
                sys.stdout.write(out.stderr.decode(errors="replace")[-2000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
