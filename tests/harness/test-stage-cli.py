#!/usr/bin/env python3
"""ppipe-stage: pipelines that pass, a corrupted or cut stream that fails, argument errors.

usage: test-stage-cli.py PPIPE_STAGE PASSTHRU_LIB CORRUPT_LIB
"""
import json
import os
import shlex
import subprocess
import sys

STAGE, PASSTHRU, CORRUPT = sys.argv[1:4]
failures = []


def env_with(preload=None, extra=None):
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}
    if preload:
        env["LD_PRELOAD"] = preload
    env.update(extra or {})
    return env


def stage(*args):
    return " ".join(shlex.quote(a) for a in (STAGE,) + args)


def sh(command, preload=None, extra=None):
    return subprocess.run(["sh", "-c", command], env=env_with(preload, extra),
                          capture_output=True, text=True, timeout=60)


def check(cond, what, proc=None):
    if not cond:
        detail = (f"\n  rc={proc.returncode} stderr={proc.stderr.strip()!r}"
                  if proc else "")
        failures.append(what + detail)


def result(proc, what):
    """The consumer's JSON object, or None (recorded as a failure)."""
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        check(False, f"{what}: no JSON on stdout", proc)
        return None
    check(isinstance(data, dict) and data.get("tool") == "ppipe-stage", f"{what}: tool")
    return data


# Streams that arrive intact, in odd sizes too (the relay works in full blocks).
CASES = [
    ("1 hop, 64K", f"{stage('produce', '-b', '10M')} | {stage('consume')}", 10 << 20),
    ("2 hops, 1M", f"{stage('produce', '-s', '1M', '-b', '9M')} | "
     f"{stage('relay', '-s', '1M')} | {stage('consume', '-s', '1M')}", 9 << 20),
    ("odd sizes", f"{stage('produce', '-s', '7', '-b', '100003')} | {stage('relay', '-s', '3')}"
     f" | {stage('relay', '-s', '70000')} | {stage('consume', '-s', '5')}", 100003),
    ("empty stream", f"{stage('produce', '-b', '0')} | {stage('consume')}", 0),
]
for what, command, want in CASES:
    p = sh(command)
    check(p.returncode == 0, f"{what}: exit 0", p)
    data = result(p, what)
    if data:
        check(data.get("bytes") == want, f"{what}: {want} bytes arrived, not {data.get('bytes')}")
        check(data.get("verified") is True, f"{what}: verified")
        for key in ("elapsed_s", "mbps", "writes", "writes_per_s", "lat_avg_ns", "lat_p50_ns",
                    "lat_p99_ns", "lat_p999_ns", "lat_max_ns"):
            check(isinstance(data.get(key), (int, float)), f"{what}: numeric {key}")
        check(data.get("pipe_size", 0) >= 4096, f"{what}: the pipe's size is reported")
        if want:
            check(data["writes"] > 0 and data["lat_p99_ns"] >= data["lat_p50_ns"] > 0,
                  f"{what}: the producer's writes and latencies: {data}")

# A timed run; the producer's pipe size is what the consumer sees.
p = sh(f"{stage('produce', '-d', '0.05', '-p', '128K')} | {stage('consume')}")
data = result(p, "timed run")
if data:
    check(data.get("bytes", 0) > 0 and data.get("elapsed_s", 0) > 0.02, f"timed run: {data}")
    check(data.get("pipe_size") == 131072, f"timed run: pipe size 128K: {data}")

# Every stage can check that the library is really loaded in it.
expect = ("--expect-preload", PASSTHRU)
p = sh(f"{stage('produce', '-b', '1M', *expect)} | {stage('relay', *expect)} | "
       f"{stage('consume', *expect)}", preload=PASSTHRU)
check(p.returncode == 0 and result(p, "passthru"), "the pass-through library: exit 0", p)
p = sh(f"{stage('produce', '-b', '1M', *expect)} | {stage('consume')}")
check(p.returncode == 1 and "not loaded" in p.stderr and "end marker" in p.stderr,
      "a producer without its library fails, and the consumer says the stream was cut", p)

# A preload that damages pipe writes, and a stream cut short, fail the consumer.
for how in ("flip", "drop", "dup"):
    p = sh(f"{stage('produce', '-b', '8M')} | {stage('consume')}", preload=CORRUPT,
           extra={"PPIPE_TEST_CORRUPT": how, "PPIPE_TEST_CORRUPT_EVERY": "7"})
    check(p.returncode == 1 and "verification failed" in p.stderr, f"corrupt ({how}) fails", p)
p = sh(f"{stage('produce', '-b', '1M')} | head -c 500000 | {stage('consume')}")
check(p.returncode == 1 and "end marker" in p.stderr, "a cut stream fails", p)
p = sh(f"{stage('produce', '-b', '1M')} | cat | {stage('consume')}")
check(p.returncode == 0, "cat in the middle passes", p)

# Bad input: exit 2 and one line that names the problem.
BAD = [
    ([], "mode"), (["bogus"], "bogus"), (["produce", "-s", "0"], "--size"),
    (["produce", "-s", "65M"], "--size"), (["produce", "-d", "0"], "--duration"),
    (["produce", "-b", "x"], "--bytes"), (["produce", "-b", "1", "-d", "1"], "--bytes"),
    (["consume", "-d", "1"], "--duration"), (["consume", "-p", "1M"], "--pipe-size"),
    (["relay", "--cpus", "1-"], "--cpus"), (["relay", "--bogus"], "--bogus"),
    (["relay", "stray"], "stray"), (["relay", "-s"], "-s"),
]
for args, needle in BAD:
    p = subprocess.run([STAGE] + args, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=30)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 2 and len(lines) == 1 and needle in lines[0],
          f"{args}: exit 2 and one line naming {needle!r}", p)
p = subprocess.run([STAGE, "relay", "-p", "1M"], stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=30)
check(p.returncode == 3 and "not a pipe" in p.stderr, "-p on a stdout that is not a pipe", p)

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
