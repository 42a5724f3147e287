#!/usr/bin/env python3
"""libppipe leaves half of the host's shared-memory segment ids to other programs.

usage: test-shm-ids.py LIBRARY

Each case runs in a new IPC namespace (unshare -i), whose kernel.shmmni is
set to 16 and whose segment ids are then partly taken by this script's own
shmget() calls, as a database or an X server would take them. In it,
`sh -c 'dd bs=1M count=8 | cat'` runs with LD_PRELOAD=LIBRARY and
PPIPE_STATS, so the pipe crosses a fork and needs the tree's registry.

  scarce  8 of 16 ids taken: making the registry would leave fewer than
          half free. No segment of libppipe's appears (the namespace holds
          the 8), sh's report says why it has no registry
          ("registry_missing"), none of the pipe's bytes went by vmsplice(),
          and a plain shmget() afterwards still succeeds.
  room    6 of 16 ids taken: the registry is made (sh's report shows it,
          no "registry_missing"), and dd's bytes go by vmsplice().

Exit status: 0 pass, 1 fail, 77 skip (no unshare, or no permission to make
an IPC namespace or to set its shmmni).
"""
import ctypes
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

SHMMNI = 16
MB = 8
IPC_PRIVATE = 0
IPC_CREAT = 0o1000


def inside(lib, taken, out):
    """Runs in the namespace: takes @taken ids, runs the pipeline, reports as JSON."""
    with open("/proc/sys/kernel/shmmni", "w") as f:
        f.write(str(SHMMNI))
    libc = ctypes.CDLL(None, use_errno=True)
    for _ in range(taken):
        if libc.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o600) < 0:
            print("inside: could not take an id:", os.strerror(ctypes.get_errno()))
            return 2
    env = {k: v for k, v in os.environ.items() if not k.startswith("PPIPE_")}
    env.update(LD_PRELOAD=lib, PPIPE_STATS=os.path.join(out, "%p.json"))
    rc = subprocess.call(["/bin/sh", "-c",
                          f"dd if=/dev/zero bs=1M count={MB} status=none | cat >/dev/null"],
                         env=env)
    with open("/proc/sysvipc/shm") as f:
        segments = len(f.readlines()) - 1
    plain = libc.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o600)
    result = {"rc": rc, "segments": segments, "plain_shmget": plain >= 0,
              "plain_errno": os.strerror(ctypes.get_errno()) if plain < 0 else None}
    with open(os.path.join(out, "result"), "w") as f:
        json.dump(result, f)
    return 0


def run_case(lib, taken):
    out = tempfile.mkdtemp(prefix="ppipe-shmids-")
    try:
        p = subprocess.run(["unshare", "-i", sys.executable, os.path.abspath(__file__),
                            "--inside", lib, str(taken), out],
                           capture_output=True, text=True, timeout=60)
        if p.returncode:
            return None, p.stdout + p.stderr
        with open(os.path.join(out, "result")) as f:
            result = json.load(f)
        reports = []
        for path in glob.glob(os.path.join(out, "*.json")):
            with open(path) as f:
                reports += [json.loads(line) for line in f if line.strip()]
        return (result, reports), ""
    finally:
        shutil.rmtree(out, ignore_errors=True)


def case(lib, taken, name, check):
    """Runs a case: (its result, sh's reports, dd's reports), or None."""
    got, err = run_case(lib, taken)
    if not got:
        print(f"FAIL {name}: the case did not run:", err.strip())
        return None
    res, reps = got
    check(res["rc"] == 0, f"{name}: the pipeline ran (status {res['rc']})")
    return (res, [r for r in reps if r.get("image") == "sh"],
            [r for r in reps if r.get("image") == "dd"])


def main(argv):
    if len(argv) >= 2 and argv[1] == "--inside":
        return inside(argv[2], int(argv[3]), argv[4])
    if len(argv) != 2:
        sys.stderr.write("usage: test-shm-ids.py LIBRARY\n")
        return 2
    lib = os.path.abspath(argv[1])
    if not shutil.which("unshare") or subprocess.call(
            ["unshare", "-i", "sh", "-c", "echo 16 > /proc/sys/kernel/shmmni"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        print("SKIP: cannot make an IPC namespace and set its shmmni here")
        return 77
    failed = 0

    def check(ok, what):
        nonlocal failed
        print(("ok   " if ok else "FAIL ") + what)
        failed += not ok

    got = case(lib, SHMMNI // 2, "scarce", check)
    if not got:
        return 1
    res, sh, dd = got
    check(res["segments"] == SHMMNI // 2,
          f"scarce: no segment of libppipe's ({res['segments']} in the namespace, "
          f"{SHMMNI // 2} taken by the test)")
    check(len(sh) == 1 and (sh[0]["registry_missing"] or "").find("segment ids") >= 0
          and sh[0]["registry"] is None,
          f"scarce: sh says why it has no registry: "
          f"{sh[0]['registry_missing'] if sh else 'no report'!r}")
    moved = dd[0]["totals"] if dd else {}
    check(bool(dd) and moved.get("bytes_vmspliced", 1) == 0
          and moved.get("bytes_accelerated", 1) == 0,
          f"scarce: none of dd's bytes by vmsplice ({moved.get('bytes_vmspliced')}; "
          f"accelerated {moved.get('bytes_accelerated')})")
    check(res["plain_shmget"], f"scarce: a plain shmget() after it succeeds "
          f"({res['plain_errno'] or 'ok'})")

    got = case(lib, SHMMNI // 2 - 2, "room", check)
    if not got:
        return 1
    res, sh, dd = got
    check(len(sh) == 1 and sh[0]["registry"] is not None and sh[0]["registry_missing"] is None,
          "room: sh made the tree's registry")
    moved = dd[0]["totals"] if dd else {}
    check(bool(dd) and moved.get("bytes_vmspliced", 0) > 0,
          f"room: dd's bytes by vmsplice ({moved.get('bytes_vmspliced')} of {MB << 20})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
