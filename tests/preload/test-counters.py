#!/usr/bin/env python3
"""PPIPE_COUNTERS from outside, and PPIPE_STATS reports whole when writers are killed.

usage: test-counters.py LIBRARY IDLE_PROG PPIPE-STATS-SUM

IDLE_PROG is tests/preload/idle-prog.c. Cases:

  adds       `idle-prog forkwrite` (a fork child writes 8 MiB into a tracked
             pipe in 1 MiB writes), with PPIPE_STATS=<dir>/%p.json too:
             the counters file goes up by exactly what the reports of the
             processes that made large writes say (the reading parent
             adds nothing); again with PPIPE_FDS=none (large writes
             passed through a plain pipe): the process is counted, its
             bytes as large-write bytes passed through. The file keeps its
             size. ppipe-stats-sum reads the same numbers.
  zero cost  /bin/true, fork + _exit, fork + exec /bin/true and 100 pipes
             with 64-byte writes, under strace -f, with PPIPE_COUNTERS set
             and set empty: the same system calls, no call names the
             counters file, and no file is made.
  killed     a Python program that closes 256 pipes it wrote into (a report
             of about 90 KB) and ends with os._exit is SIGKILLed at random
             moments around its end, 150 times into a file per process
             (%p) and 150 times into one shared file. %p: every file is one
             whole JSON report, and there is no other file. Shared: every
             process that was not killed has its report whole on a line of
             its own; every other line is a report or a line
             ppipe-stats-sum counts as unreadable, and it counts exactly
             those.

Exit status: 0 pass, 1 fail, 77 skip (no strace or ptrace), 99 set-up error.
"""
import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

EXIT_PASS, EXIT_FAIL, EXIT_SKIP, EXIT_ERROR = 0, 1, 77, 99
TIMEOUT = 60
KILLS = 150
HEADER_USED_AT, HSIZE, SHARDS, SHARD, NAME = 36, 12288, 32, 512, 32
FILE_SIZE = HSIZE + SHARDS * SHARD
FAILED = []


def check(ok, what, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else ""), flush=True)
    if not ok:
        FAILED.append(what)


def base_env(lib, **extra):
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}
    env["LD_PRELOAD"] = lib
    env.update(extra)
    return env


def counters(path):
    """name -> total of a counters file (read here from the format), or {}."""
    if not os.path.exists(path):
        return {}
    with open(path, "rb") as f:
        data = f.read()
    used = int.from_bytes(data[HEADER_USED_AT:HEADER_USED_AT + 4], sys.byteorder)
    out = {}
    for i in range(used):
        name = data[64 + i * NAME:64 + (i + 1) * NAME].split(b"\0")[0].decode()
        out[name] = sum(int.from_bytes(data[HSIZE + s * SHARD + i * 8:HSIZE + s * SHARD
                                            + i * 8 + 8], sys.byteorder)
                        for s in range(SHARDS))
    return out


def reports(d):
    out = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".json"):
            with open(os.path.join(d, name)) as f:
                objs = [json.loads(ln) for ln in f if ln.strip()]
            # An exec's note (it names the program it handed pipes to) is no report.
            out += [o for o in objs if "exec" not in o]
    return out


def expected_delta(reps):
    """What the processes that made large writes add, from their reports."""
    want = collections.Counter()
    for r in reps:
        t = r["totals"]
        if not (t["writes_accelerated"] or t["bytes_passthrough_large"] or t["fallbacks"]):
            continue
        want["processes"] += 1
        want["processes_accelerated"] += t["bytes_accelerated"] > 0
        want["writes_accelerated"] += t["writes_accelerated"]
        want["accelerated_bytes"] += t["bytes_accelerated"]
        want["writes_passthrough"] += t["writes_passthrough"]
        want["passthrough_bytes"] += t["bytes_passthrough"]
        want["passthrough_large_bytes"] += t["bytes_passthrough_large"]
        want["fallbacks"] += t["fallbacks"]
        want["efaults"] += t["efaults"]
        want["ring_waits"] += t["ring_waits"]
        want["accelerated_write_ns"] += r["latency_ns"]["avg"] * r["latency_ns"]["count"]
    return want


# Large writes into a pipe whose reader is a program without libppipe: the
# pipe is plain, every write passed through.
PLAIN_PROG = r"""
import os, subprocess
p = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                     env={"PATH": os.environ["PATH"]})
for _ in range(8):
    left = memoryview(b"x" * (1 << 20))
    while left:
        left = left[os.write(p.stdin.fileno(), left):]
p.stdin.close()
p.wait()
"""


def case_adds(lib, prog, summer, work):
    cfile = os.path.join(work, "adds", "counters-%u")
    real = cfile.replace("%u", str(os.geteuid()))
    os.mkdir(os.path.dirname(cfile))
    before = {}
    for label, cmd in (("accelerated", [prog, "forkwrite"]), ("again", [prog, "forkwrite"]),
                       ("plain", [sys.executable, "-c", PLAIN_PROG])):
        d = os.path.join(work, "adds-" + label)
        os.mkdir(d)
        env = base_env(lib, PPIPE_COUNTERS=cfile, PPIPE_STATS=os.path.join(d, "%p.json"),
                       PPIPE_THP="off")
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=TIMEOUT)
        check(r.returncode == 0, f"adds {label}: exit {r.returncode}", r.stderr.strip())
        after = counters(real)
        reps = reports(d)
        want = expected_delta(reps)
        got = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        # The latency sum is in the report as an average: whole nanoseconds per write lost.
        ns_ok = 0 <= got.get("accelerated_write_ns", 0) - want["accelerated_write_ns"] \
            <= want["writes_accelerated"]
        exact = {k: v for k, v in got.items() if k not in ("accelerated_write_ns",
                                                           "pressure_episodes")}
        want_exact = {k: want.get(k, 0) for k in exact}
        check(exact == want_exact and ns_ok and len(reps) == (1 if label == "plain" else 2),
              f"adds {label}: the file went up by what the reports say",
              f"{len(reps)} reports, got {got}, want {dict(want)}")
        if label == "plain":
            check(got.get("processes") == 1 and got.get("accelerated_bytes") == 0 and
                  got.get("passthrough_large_bytes", 0) >= 8 << 20,
                  "adds plain: a process with large writes into a plain pipe counts",
                  f"{got}")
        else:
            check(got.get("processes") == 1 and got.get("accelerated_bytes", 0) > 0,
                  f"adds {label}: one process, bytes accelerated", f"{got}")
        before = after
    check(os.path.getsize(real) == FILE_SIZE, "adds: the file keeps its size",
          f"{os.path.getsize(real)} bytes")
    r = subprocess.run([sys.executable, summer, "--json", real], stdout=subprocess.PIPE,
                       universal_newlines=True, timeout=TIMEOUT)
    s = json.loads(r.stdout)["counters"].get(str(os.geteuid()), {})
    check(s == before, "adds: ppipe-stats-sum reads the same totals", f"{s} vs {before}")


def strace_names(cmd, env, out):
    """Every system call name of the tree, counted; and the trace's text."""
    args = ["strace", "-f", "-qq", "-s", "256", "-o", out]
    for k in ("LD_PRELOAD", "PPIPE_COUNTERS"):
        args += ["-E", f"{k}={env[k]}"]
    r = subprocess.run(args + cmd, env={k: v for k, v in env.items()
                                        if k not in ("LD_PRELOAD", "PPIPE_COUNTERS")},
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
    with open(out, encoding="utf-8", errors="replace") as f:
        text = f.read()
    calls = collections.Counter(m.group(1) for m in re.finditer(
        r"^\d+\s+(?:<\.\.\. )?(\w+)\(", text, re.M))
    return r.returncode, calls, text


def case_zero_cost(lib, prog, work):
    if not shutil.which("strace"):
        print("SKIP zero cost: no strace")
        return False
    d = os.path.join(work, "zero")
    os.mkdir(d)
    cfile = os.path.join(d, "zero-cost-counters-%u")
    shapes = [("/bin/true", ["/bin/true"]), ("fork + _exit", [prog, "fork"]),
              ("fork + exec", [prog, "exec"]), ("100 pipes, small writes", [prog, "pipes", "100"])]
    for name, cmd in shapes:
        rc_on, on, text = strace_names(cmd, base_env(lib, PPIPE_COUNTERS=cfile),
                                       os.path.join(d, "on.trace"))
        if rc_on != 0 and "ptrace" in text:
            print("SKIP zero cost: ptrace not permitted")
            return False
        rc_off, off, _ = strace_names(cmd, base_env(lib, PPIPE_COUNTERS=""),
                                      os.path.join(d, "off.trace"))
        diff = (on - off) + (off - on)
        check(rc_on == 0 and rc_off == 0 and not diff,
              f"zero cost: {name}: the same system calls with the counters file on",
              f"exit {rc_on}/{rc_off}; differing: {dict(diff) or 'none'}")
        check("zero-cost-counters" not in text, f"zero cost: {name}: no call names the file")
    left = [n for n in os.listdir(d) if n.startswith("zero-cost-counters")]
    check(not left, "zero cost: no counters file made", f"{left}")
    return True


KILLED_PROG = r"""
import os, sys
ps = [os.pipe() for _ in range(256)]
for r, w in ps:
    os.write(w, b"x" * 100)
for r, w in ps:
    os.close(w)
    os.close(r)
sys.stdout.write("ready\n")
sys.stdout.flush()
os._exit(0)
"""


def run_and_kill(env, rng):
    """Starts the program, SIGKILLs it at a random moment around its end.
    Returns (pid, killed: True if the signal ended it)."""
    p = subprocess.Popen([sys.executable, "-c", KILLED_PROG], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    p.stdout.readline()
    delay = rng.choice([0, 0, rng.uniform(0, 0.0005), rng.uniform(0, 0.002),
                        rng.uniform(0, 0.01)])
    if delay:
        time.sleep(delay)
    try:
        os.kill(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(TIMEOUT)
    p.stdout.close()
    return p.pid, p.returncode == -signal.SIGKILL


def case_killed(lib, summer, work):
    rng = random.Random(20)
    d = os.path.join(work, "per-process")
    os.mkdir(d)
    env = base_env(lib, PPIPE_STATS=os.path.join(d, "%p.json"))
    outcomes = collections.Counter()
    for _ in range(KILLS):
        pid, killed = run_and_kill(env, rng)
        path = os.path.join(d, f"{pid}.json")
        exists = os.path.exists(path)
        outcomes[("killed" if killed else "exited", "report" if exists else "none")] += 1
        if not killed and not exists:
            check(False, f"per process: pid {pid} exited normally and left no report")
    bad, whole = [], 0
    for name in os.listdir(d):
        with open(os.path.join(d, name)) as f:
            text = f.read()
        try:
            obj = json.loads(text)
            ok = text.endswith("}\n") and text.count("\n") == 1 and \
                name == f"{obj['pid']}.json" and len(obj["closed_pipes"]) == 256
        except (ValueError, KeyError):
            ok = False
        if ok:
            whole += 1
        else:
            bad.append(f"{name} ({len(text)} bytes)")
    check(not bad, f"per process: every file is one whole report ({whole} whole)",
          ", ".join(bad[:5]))
    print(f"     per process: {dict(outcomes)}")

    shared = os.path.join(work, "shared", "stats.json")
    os.mkdir(os.path.dirname(shared))
    env = base_env(lib, PPIPE_STATS=shared)
    survivors = []
    outcomes = collections.Counter()
    for _ in range(KILLS):
        pid, killed = run_and_kill(env, rng)
        outcomes["killed" if killed else "exited"] += 1
        if not killed:
            survivors.append(pid)
    with open(shared) as f:
        lines = [ln for ln in f.read().split("\n") if ln.strip()]
    parsed, unreadable = {}, 0
    for ln in lines:
        try:
            obj = json.loads(ln)
            parsed.setdefault(obj["pid"], []).append(obj)
        except ValueError:
            unreadable += 1
    missing = [p for p in survivors if len(parsed.get(p, [])) != 1]
    check(not missing, f"shared: every process that exited has its report whole "
          f"({len(survivors)} exited, {unreadable} cut lines)", f"missing: {missing[:10]}")
    r = subprocess.run([sys.executable, summer, "--json", shared], stdout=subprocess.PIPE,
                       universal_newlines=True, timeout=TIMEOUT)
    s = json.loads(r.stdout)
    check(s["unreadable_lines"] == unreadable and s["processes"] == len(parsed),
          "shared: ppipe-stats-sum counts the cut lines and reads the rest",
          f"it says {s['unreadable_lines']} unreadable, {s['processes']} processes; "
          f"want {unreadable}, {len(parsed)}")
    print(f"     shared: {dict(outcomes)}, {len(lines)} lines, {unreadable} cut")


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return EXIT_ERROR
    lib, prog, summer = (os.path.abspath(a) for a in argv)
    if not os.path.isfile(lib):
        print(f"ERROR: library {lib} does not exist")
        return EXIT_ERROR
    work = tempfile.mkdtemp(prefix="ppipe-counters-")
    try:
        case_adds(lib, prog, summer, work)
        traced = case_zero_cost(lib, prog, work)
        case_killed(lib, summer, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if FAILED:
        return EXIT_FAIL
    return EXIT_PASS if traced else EXIT_SKIP


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
