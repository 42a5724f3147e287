#!/usr/bin/env python3
"""The thread storm in a full memory cgroup: nothing lost, the PSI shrinker acts.

usage: test-memory-storm.py STORM_THREADS LIBRARY SECONDS [LIMIT]

Runs "storm-threads SECONDS memory [LIMIT]" with LD_PRELOAD=LIBRARY: 32
writer threads and 8 readers, every byte checked, in a memory cgroup that a
page-cache filler keeps at its limit, so that the writers'
page charges reclaim. PPIPE_PSI=1 and PPIPE_IDLE_MS=20 make libppipe look
at the real pressure stall information every 10 ms and empty the rings not
written since. Passes when:

  - the storm passes (every writer's stream intact) and its summary line
    says 0 bytes lost and every byte written verified;
  - the cgroup's reclaim counter grew (v2 memory.stat pgscan_direct, v1
    memory.failcnt): a full cgroup that never reclaimed tested nothing;
  - the storm's PPIPE_STATS report shows accelerated bytes, at least one
    pressure episode and trimmed ring memory: the shrinker acted;
  - no process and no cgroup of the run is left behind.

Skips (77) without root, a memory controller or PSI. Whatever
happens, the run's cgroup and everything in it are removed at the end.
Exit status: 0 passed, 1 failed, 77 skipped.
"""
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

EXIT_PASS, EXIT_FAIL, EXIT_SKIP = 0, 1, 77
PR_SET_CHILD_SUBREAPER = 36
# Where tests/bench/pressure.c makes its cgroup, "ppipe-bench.<pid>".
CG_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory")
SUMMARY = re.compile(
    r"storm-threads: memory: \S+ s, (\d+) bytes written, (\d+) verified, (\d+) lost; "
    r"(\S+) limit (\d+): memcg (\w+) (\d+)->(\d+),.*; reclaim (seen|NOT SEEN)")


class Fail(Exception):
    pass


def has_word(path, word):
    try:
        with open(path) as f:
            return word in f.read().split()
    except OSError:
        return False


def why_not_here():
    """Why this machine cannot run the test, or None."""
    if os.geteuid() != 0:
        return "making a memory cgroup needs root"
    if not (has_word("/sys/fs/cgroup/cgroup.controllers", "memory")
            or has_word("/sys/fs/cgroup/unified/cgroup.controllers", "memory")
            or os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        return "no cgroup memory controller"
    try:
        with open("/proc/pressure/memory") as f:
            f.read()
    except OSError:
        return "the kernel reports no memory pressure (PSI off: CONFIG_PSI, psi=1)"
    return None


def in_cgroup(name):
    """Pids of processes whose /proc/PID/cgroup names cgroup @name."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                if f"/{name}\n" in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def reap_orphans(wait_until=0):
    """Reaps the storm's children that outlived it (we are their subreaper),
    waiting until @wait_until (time.monotonic()) for those still exiting."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0]:
                continue
        except ChildProcessError:
            return
        if time.monotonic() > wait_until:
            return
        time.sleep(0.05)


def clean_up(storm_pid):
    """Kills what is left in the storm's cgroup and removes it; says what was left."""
    name = f"ppipe-bench.{storm_pid}"
    left = []
    # Killed tasks leave the cgroup only once they have exited: try again
    # for a while before giving up.
    deadline = time.monotonic() + 30
    while True:
        reap_orphans()
        for pid in in_cgroup(name):
            if pid not in left:
                left.append(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        busy = []
        for root in CG_ROOTS:
            cg = os.path.join(root, name)
            if not os.path.isdir(cg):
                continue
            if cg not in left:
                left.append(cg)
            try:
                # pressure.c's bench/ and helpers/ inside it first.
                for sub in ("bench", "helpers"):
                    if os.path.isdir(os.path.join(cg, sub)):
                        os.rmdir(os.path.join(cg, sub))
                os.rmdir(cg)
            except OSError as e:
                busy.append(f"{cg}: {e}")
        if not busy:
            reap_orphans(deadline)
            return left
        if time.monotonic() > deadline:
            print("cannot remove", "; ".join(busy))
            return left
        time.sleep(0.1)


def on_sigterm(signum, frame):
    # meson's timeout: end by way of the finally clauses, which clean up.
    raise Fail("terminated (timeout?)")


def storm_report(stats_dir, pid):
    path = os.path.join(stats_dir, f"{pid}.json")
    try:
        with open(path) as f:
            reps = [json.loads(ln) for ln in f if ln.strip()]
    except OSError:
        raise Fail(f"the storm (pid {pid}) wrote no PPIPE_STATS report {path}: "
                   "was the library preloaded?")
    if len(reps) != 1:
        raise Fail(f"the storm (pid {pid}) wrote {len(reps)} reports, want 1")
    return reps[0]


def check(err, stats_dir, pid):
    m = SUMMARY.search(err)
    if not m:
        raise Fail("no summary line")
    written, verified, lost = int(m.group(1)), int(m.group(2)), int(m.group(3))
    method, counter, before, after = m.group(4), m.group(6), int(m.group(7)), int(m.group(8))
    if not written or lost or verified != written:
        raise Fail(f"{written} bytes written, {verified} verified, {lost} lost")
    if not method.startswith("cgroup-"):
        raise Fail(f"ran without a memory cgroup ({method})")
    if m.group(9) != "seen":
        raise Fail(f"the full cgroup never reclaimed (memcg {counter} {before}->{after}): "
                   "the writers were under no pressure")
    rep = storm_report(stats_dir, pid)
    pool, totals = rep["pool"], rep["totals"]
    if not totals["bytes_accelerated"]:
        raise Fail(f"libppipe accelerated nothing: {totals}")
    if pool["pressure_episodes"] < 1 or pool["trimmed_bytes"] <= 0:
        raise Fail(f"the shrinker did not act: {pool} (did the process's PSI, its cgroup v2 "
                   "memory.pressure or /proc/pressure/memory, never reach PPIPE_PSI?)")
    return (f"{verified} bytes verified, 0 lost; {method}, memcg {counter} "
            f"{before}->{after}; {pool['pressure_episodes']} pressure episodes, "
            f"{pool['trimmed_bytes']} bytes trimmed, "
            f"{totals['bytes_accelerated']} bytes accelerated")


def main():
    prog, lib, secs = sys.argv[1], os.path.abspath(sys.argv[2]), float(sys.argv[3])
    limit = sys.argv[4:5]
    why = why_not_here()
    if why:
        print(f"SKIP: {why}")
        return EXIT_SKIP
    signal.signal(signal.SIGTERM, on_sigterm)
    # A killed storm's stress-ng becomes our child, not init's: we reap it.
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}
    with tempfile.TemporaryDirectory() as stats_dir:
        env.update({"LD_PRELOAD": lib, "PPIPE_MIN_WRITE": "4097", "PPIPE_PSI": "1",
                    "PPIPE_IDLE_MS": "20", "PPIPE_STATS": os.path.join(stats_dir, "%p.json")})
        p = subprocess.Popen([prog, sys.argv[3], "memory"] + limit, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            timeout = 3 * secs + 60  # verifying takes longer than the storm itself
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                out = err = None
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                # Also after a pass: then it must find nothing.
                left = clean_up(p.pid)
            if out is None:
                # Its children, which hold its stderr, are gone now.
                out, err = p.communicate(timeout=30)
                print(out.strip())
                print(err.strip())
                raise Fail(f"still running after {timeout:g} s")
            print(out.strip())
            print(err.strip())
            if p.returncode == EXIT_SKIP:
                return EXIT_SKIP
            if p.returncode != 0:
                raise Fail(f"the storm exited with status {p.returncode}")
            if left:
                raise Fail(f"the run left behind: {left}")
            print(check(err, stats_dir, p.pid))
        except Fail as e:
            print(f"FAIL: {e}")
            return EXIT_FAIL
    return EXIT_PASS


if __name__ == "__main__":
    sys.exit(main())
