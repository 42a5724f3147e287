#!/usr/bin/env python3
"""PPIPE_MODE=uring: the write-behind contract, scenario by scenario.

usage: test-uring.py LIBRARY URING_CONTRACT

Runs every scenario of uring-contract (see its header) under LD_PRELOAD
with PPIPE_MODE=uring and PPIPE_STATS, and requires for each: exit 0 (its
own checks: bytes in order and intact, A staged, EOF, EPIPE...) and, where
the scenario stages bytes, statistics that show staged bytes moved on (and,
for the non-blocking ones, that the process never waited for them).
Then the fallback: io_uring_setup refused by a seccomp filter, the bytes
must still arrive and the statistics must say why write-behind is off.
Last, the tests' own sensitivity: with the service slowed
(PPIPE_TEST_FAULT=lag) the scenarios in SENSITIVE must pass, and with the
flushes broken on purpose as well (flush,lag) they must fail within three
runs.

Exit 77 when write-behind cannot run on this machine at all (no io_uring,
or a build without liburing): the statistics say why.
"""
import json
import os
import subprocess
import sys
import tempfile

STAGING = ["small", "otherfd", "splice", "vmsplice", "tee", "sendfile", "splice-late",
           "vmsplice-late", "tee-late", "splice-nonblock", "tee-nonblock", "small-nonblock",
           "vmsplice-nonblock", "sendfile-nonblock", "small-eintr", "small-restart", "zero",
           "stdio", "freopen", "setfl", "setpipesz", "close", "dup2", "fork", "exec", "spawn",
           "exit", "_exit", "flush", "epipe", "epipe-close", "epipe-stdio", "reqresp", "threads"]
# Scenarios that must fail when the flush points are skipped and the service is
# slow (PPIPE_TEST_FAULT=flush,lag): whatever skips a flush then overtakes.
SENSITIVE = ["small", "otherfd", "splice", "vmsplice", "tee", "sendfile", "splice-late",
             "vmsplice-late", "tee-late", "splice-nonblock", "tee-nonblock", "small-nonblock",
             "vmsplice-nonblock", "sendfile-nonblock", "small-eintr", "small-restart",
             "stdio", "freopen", "setfl", "setpipesz", "fork", "exec", "spawn", "flush", "exit",
             "_exit", "threads"]

# Scenarios whose process must never wait for staged bytes (flush_waits 0).
NEVER_WAITS = ["splice-nonblock", "tee-nonblock", "small-nonblock", "vmsplice-nonblock",
               "sendfile-nonblock", "zero"]


def run(lib, prog, scenario, statsdir, extra=None):
    stats = os.path.join(statsdir, f"{scenario}-%p.json")
    env = dict(os.environ, LD_PRELOAD=lib, PPIPE_MODE="uring", PPIPE_MIN_WRITE="4097",
               PPIPE_STATS=stats)
    env.update(extra or {})
    env.pop("T_TRANSCRIPT", None)
    try:
        r = subprocess.run([prog, scenario], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        rc, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "hung", e.stdout or "", e.stderr or ""
    reports = []
    for name in os.listdir(statsdir):
        if name.startswith(scenario + "-"):
            with open(os.path.join(statsdir, name)) as f:
                reports += [json.loads(line) for line in f if line.strip()]
            os.unlink(os.path.join(statsdir, name))
    return rc, out, err, reports


def wb_sum(reports, key):
    return sum(r["write_behind"][key] for r in reports)


def main():
    lib, prog = os.path.abspath(sys.argv[1]), sys.argv[2]
    failed = []
    with tempfile.TemporaryDirectory() as d:
        rc, out, err, reps = run(lib, prog, "probe", d)
        states = {r["write_behind"]["state"] for r in reps}
        print(f"probe: exit {rc}, write_behind state {sorted(map(str, states))}")
        if rc != 0:
            print(out + err)
            return 1
        if "on" not in states:
            print(f"SKIP: write-behind does not run here: {sorted(map(str, states))}")
            return 77
        for sc in STAGING:
            rc, out, err, reps = run(lib, prog, sc, d)
            staged, moved = wb_sum(reps, "staged_bytes"), wb_sum(reps, "moved_bytes")
            dropped = wb_sum(reps, "dropped_bytes")
            ok = rc == 0 and staged > 0 and moved + dropped >= staged
            if sc in ("epipe", "epipe-close"):
                ok = ok and dropped > 0 and wb_sum(reps, "errors_reported") == 1
            # A non-blocking call never waits for staged bytes, not even bounded.
            if sc in NEVER_WAITS:
                ok = ok and wb_sum(reps, "flush_waits") == 0
            print(f"{sc}: exit {rc}, staged {staged} moved {moved} dropped {dropped} "
                  f"{'ok' if ok else 'FAIL'}")
            if not ok:
                failed.append(sc)
                print("  " + (out + err)[-1500:].replace("\n", "\n  "))
        rc, out, err, reps = run(lib, prog, "refused", d)
        states = [r["write_behind"]["state"] for r in reps]
        ok = rc == 0 and "on" not in states \
            and any(str(s).startswith("io_uring_setup refused") for s in states) \
            and wb_sum(reps, "staged_bytes") == 0 \
            and sum(r["totals"]["writes_accelerated"] for r in reps) > 0
        if rc == 77:
            print("refused: no seccomp filter here, skipped")
        else:
            print(f"refused: exit {rc}, state {states} {'ok' if ok else 'FAIL'}")
            if not ok:
                failed.append("refused")
                print("  " + (out + err)[-1500:].replace("\n", "\n  "))
        # The tests can fail: with a slow service they pass (the control)...
        for sc in SENSITIVE:
            rc, out, err, _ = run(lib, prog, sc, d, {"PPIPE_TEST_FAULT": "lag:EIO:1"})
            if rc != 0:
                failed.append(sc + " (slow service)")
                print(f"{sc} with a slow service: exit {rc} FAIL")
                print("  " + (out + err)[-1500:].replace("\n", "\n  "))
        # ... and with the flushes broken as well, they see it.
        for sc in SENSITIVE:
            seen = []
            for _ in range(3):
                rc, _, _, _ = run(lib, prog, sc, d,
                                  {"PPIPE_TEST_FAULT": "flush:EIO:1,lag:EIO:1"})
                seen.append(rc)
                if rc != 0:
                    break
            caught = any(rc != 0 for rc in seen)
            print(f"{sc} with the flushes broken: exits {seen} "
                  f"{'(caught)' if caught else 'NOT CAUGHT'}")
            if not caught:
                failed.append(sc + " (broken flushes not caught)")
    if failed:
        print("FAIL:", ", ".join(failed))
        return 1
    print("all scenarios passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
