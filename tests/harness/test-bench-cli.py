#!/usr/bin/env python3
"""ppipe-bench: argument errors, preload checks, and verification that can fail.

usage: test-bench-cli.py PPIPE_BENCH PASSTHRU_LIB CORRUPT_LIB
"""
import json
import os
import re
import subprocess
import sys
import tempfile

BENCH, PASSTHRU, CORRUPT = sys.argv[1:4]
failures = []


def run(args, env_extra=None, preload=None):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    if preload:
        env["LD_PRELOAD"] = preload
    env.update(env_extra or {})
    return subprocess.run([BENCH] + args, env=env, capture_output=True, text=True, timeout=60)


def check(cond, what, proc=None):
    if not cond:
        detail = f"\n  rc={proc.returncode} stderr={proc.stderr.strip()!r}" if proc else ""
        failures.append(what + detail)


# Bad input: exit 2 and one line on stderr that names the problem.
BAD = [
    (["-s", "0"], "--size"),
    (["-s", "12x"], "--size"),
    (["-s", "-5"], "--size"),
    (["-s", "1G"], "--size"),
    (["-w", "0"], "--writers"),
    (["-w", "abc"], "--writers"),
    (["-r", "100000"], "--readers"),
    (["-d", "0"], "--duration"),
    (["-d", "-1"], "--duration"),
    (["-d", "soon"], "--duration"),
    (["-p", "3G"], "--pipe-size"),
    (["--mode", "fibers"], "--mode"),
    (["--cpus-writers", "1-"], "--cpus-writers"),
    (["--pressure-limit", "1M"], "--pressure-limit"),
    (["--memory-pressure=bogus"], "--memory-pressure"),
    (["--memory-pressure=", "-d", "0.01"], "--memory-pressure"),
    (["--filler-cpu", "0"], "--filler-cpu"),
    (["--filler-cpu", "101"], "--filler-cpu"),
    (["--bogus"], "--bogus"),
    (["-s"], "-s"),
    (["stray"], "stray"),
    (["--verify", "-w", "17"], "--verify"),
    (["--work", "-1"], "--work"),
    (["--work", "1.5us"], "--work"),
    (["--work", "5min"], "--work"),
    (["--work", "us"], "--work"),
    (["--work", ""], "--work"),
    (["--work", "1001ms"], "--work"),
    (["--work", "18446744073709551615s"], "--work"),
    (["--work", "99999999999999999999"], "--work"),
    (["--mode", "memcpy", "--work", "5"], "--work"),
    (["--produce", "bogus"], "--produce"),
    (["--produce", ""], "--produce"),
    (["--produce", "api", "--work", "5us"], "--work"),
    (["--produce", "copy", "--work", "5us"], "--work"),
    (["--mode", "memcpy", "--produce", "api"], "--produce"),
    (["--mode", "ring", "--work", "5"], "--work"),
    (["--mode", "ring", "--produce", "copy"], "--produce"),
]
for args, needle in BAD:
    p = run(args + ["-d", "0.01"] if "-d" not in args else args)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 2, f"{args}: exit 2 expected", p)
    check(len(lines) == 1 and needle in lines[0], f"{args}: one line naming {needle!r}", p)

# A pipe size above pipe-max-size is an environment error for non-root only;
# an unknown --expect-preload is always one.
p = run(["-d", "0.01", "--expect-preload", "/nonexistent/libnothing.so"])
check(p.returncode == 3 and "not loaded" in p.stderr, "--expect-preload of a missing lib", p)
p = run(["-d", "0.01", "--expect-preload", PASSTHRU])
check(p.returncode == 3, "--expect-preload of a lib that is not preloaded", p)
p = run(["-d", "0.01", "--expect-preload", PASSTHRU, "--json"], preload=PASSTHRU)
check(p.returncode == 0, "--expect-preload with the lib preloaded", p)

# A JSON result has the documented keys and sane values.
p = run(["-d", "0.2", "-s", "32678", "-w", "2", "-r", "3", "--json"], preload=PASSTHRU)
check(p.returncode == 0, "threads run", p)
if p.returncode == 0:
    r = json.loads(p.stdout)
    for key in ("tool", "version", "mode", "writers", "readers", "size", "pipe_size",
                "work_ns", "mbps", "writes_per_s", "write_time_share", "work_avg_ns",
                "lat_avg_ns", "lat_p50_ns", "lat_p99_ns", "lat_p999_ns", "lat_max_ns",
                "per_writer", "memory_pressure", "pressure_mode", "pressure", "preloaded"):
        check(key in r, f"JSON has {key}")
    check(r.get("memory_pressure") is False and r.get("pressure_mode") is None
          and r.get("pressure") is None, "no --memory-pressure: no pressure")
    check(r.get("mode") == "threads" and r.get("writers") == 2 and r.get("readers") == 3,
          "JSON echoes the configuration")
    check(r.get("mbps", 0) > 0 and r.get("writes", 0) > 0, "JSON reports progress")
    check(r.get("bytes") == r.get("bytes_read"), "every byte written was read")
    check(len(r.get("per_writer", [])) == 2, "one per_writer entry per writer")
    check(r["lat_p50_ns"] <= r["lat_p99_ns"] <= r["lat_p999_ns"] <= r["lat_max_ns"],
          "percentiles are ordered")
    check(r["pipe_size"] == 1048576, "pipe resized to 1 MiB")
    check(r["work_ns"] == 0 and r["work_avg_ns"] == 0, "no --work: no work")
    check(0 < r["write_time_share"] <= 1, "write_time_share is a share of the writers' time")
    check(any(os.path.basename(x) == os.path.basename(PASSTHRU) for x in r["preloaded"]),
          "preloaded names the library")

# CPU time per GiB moved, from the kernel's accounting: writers, readers,
# the process's other threads (threads mode; in procs mode they are in their
# process's count) and all of them. Sane, never timed: every worker used some
# CPU, user + sys is the total, all is the sum of the groups, and the per-GiB
# values are the seconds over the bytes moved.
CPU_GROUPS = ("writers", "readers", "other", "all")
CPU_PARTS = ("user", "sys", "total")


def close(a, b, rel=1e-6, abs_=2e-6):
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_)


for mode, counted in (("threads", "threads"), ("procs", "processes")):
    p = run(["--mode", mode, "-w", "2", "-r", "3", "-s", "65536", "-d", "0.2", "--json"],
            preload=PASSTHRU)
    check(p.returncode == 0, f"{mode} run for the CPU fields", p)
    if p.returncode != 0:
        continue
    r = json.loads(p.stdout)
    cpu = r.get("cpu")
    check(isinstance(cpu, dict) and set(cpu) == {"counted"} | set(CPU_GROUPS),
          f"{mode}: cpu has counted and {CPU_GROUPS}: {cpu}")
    if not isinstance(cpu, dict) or set(cpu) != {"counted"} | set(CPU_GROUPS):
        continue
    check(cpu["counted"] == counted, f"{mode}: cpu.counted is {counted}")
    gib = r["bytes"] / (1 << 30)
    check(gib > 0, f"{mode}: bytes moved")
    for group in CPU_GROUPS:
        g = cpu[group]
        keys = {f"{part}_s" for part in CPU_PARTS} | {f"{part}_s_per_gib" for part in CPU_PARTS}
        check(set(g) == keys, f"{mode}: cpu.{group} keys {sorted(g)}")
        if set(g) != keys:
            continue
        check(all(g[k] >= 0 for k in keys), f"{mode}: cpu.{group} has no negative value: {g}")
        check(close(g["user_s"] + g["sys_s"], g["total_s"]),
              f"{mode}: cpu.{group}: user + sys == total: {g}")
        for part in CPU_PARTS:
            check(close(g[f"{part}_s_per_gib"], g[f"{part}_s"] / gib),
                  f"{mode}: cpu.{group}.{part}_s_per_gib is {part}_s over the GiB moved: {g}")
    for part in CPU_PARTS:
        check(close(sum(cpu[group][f"{part}_s"] for group in CPU_GROUPS[:3]),
                    cpu["all"][f"{part}_s"]),
              f"{mode}: cpu.all.{part}_s is the sum of the groups")
    for group in ("writers", "readers", "all"):
        check(cpu[group]["total_s"] > 0, f"{mode}: the {group} used CPU: {cpu[group]}")
    if mode == "procs":
        check(cpu["other"]["total_s"] == 0,
              "procs: no other threads counted apart (each process counts its own)")
p = run(["-d", "0.2"])
check(p.returncode == 0 and "cpu_counted: threads" in p.stdout
      and all(f"cpu_{group}: user_s=" in p.stdout for group in CPU_GROUPS)
      and "total_s_per_gib=" in p.stdout, "the CPU lines of the text output", p)

# Verification passes through the pass-through library, with interleaving
# writers, and fails through the corrupting one, in both modes.
for mode in ("threads", "procs"):
    for w, r_, size in ((1, 1, 65536), (5, 10, 65536), (3, 2, 32678), (2, 2, 1)):
        if mode == "procs" and w * r_ > 10:
            continue
        args = ["--mode", mode, "-w", str(w), "-r", str(r_), "-s", str(size), "-d", "0.2",
                "--verify", "--json"]
        p = run(args, preload=PASSTHRU)
        check(p.returncode == 0 and json.loads(p.stdout or "{}").get("verified") is True,
              f"verify passes: {mode} w={w} r={r_} s={size}", p)
    for how in ("flip", "drop", "dup"):
        args = ["--mode", mode, "-w", "2", "-r", "2", "-s", "4096", "-d", "0.2", "--verify"]
        p = run(args, preload=CORRUPT,
                env_extra={"PPIPE_TEST_CORRUPT": how, "PPIPE_TEST_CORRUPT_EVERY": "20"})
        check(p.returncode == 1 and "verification failed" in p.stderr,
              f"verify catches {how} ({mode})", p)

# --work: the values it takes, echoed in both outputs; the work runs before
# every write, and the verified stream is still what goes out. A tenth of a
# second each: work_avg_ns needs one write done, and a loaded machine (or a
# sanitizer) can let 10 ms pass before the writer's first.
for value, ns in (("0", 0), ("250", 250), ("3us", 3000), ("1ms", 1000000), ("20ns", 20)):
    p = run(["-d", "0.1", "--work", value, "--json"])
    r = json.loads(p.stdout or "{}")
    check(p.returncode == 0 and r.get("work_ns") == ns, f"--work {value} is {ns} ns", p)
    check((r.get("work_avg_ns", 0) > 0) == (ns > 0), f"--work {value}: work_avg_ns", p)
p = run(["-d", "0.01", "--work", "2us"])
check(p.returncode == 0 and " work_ns=2000 " in p.stdout and "work_avg_ns: " in p.stdout
      and "write_time_share: " in p.stdout, "--work in the text output", p)
p = run(["-d", "0.01"])
check(p.returncode == 0 and " work_ns=0 " in p.stdout and "work_avg_ns" not in p.stdout,
      "no --work in the text output", p)
for mode in ("threads", "procs"):
    for w, r_, size in ((1, 1, 65536), (3, 2, 4097), (2, 1, 3)):
        args = ["--mode", mode, "-w", str(w), "-r", str(r_), "-s", str(size), "-d", "0.1",
                "--work", "5us", "--verify", "--json"]
        p = run(args, preload=PASSTHRU)
        r = json.loads(p.stdout or "{}")
        check(p.returncode == 0 and r.get("verified") is True and r.get("work_avg_ns", 0) > 0
              and 0 < r.get("write_time_share", 0) < 1,
              f"--work with --verify: {mode} w={w} r={r_} s={size}", p)

# --produce copy and api: every block generated (the produced stream), then
# written, or generated in place into ppipe.h's spans and committed. Without
# libppipe the spans are the header's buffers; the stream is verified either
# way, through the pass-through library, and fails through the corrupting one
# (whose write() the buffers' commits reach). JSON and text say how writers
# produced; a block takes at least one span.
for produce in ("copy", "api"):
    for mode in ("threads", "procs"):
        for w, r_, size in ((1, 1, 65536), (3, 2, 32678), (2, 1, 3)):
            args = ["--mode", mode, "-w", str(w), "-r", str(r_), "-s", str(size), "-d", "0.1",
                    "--produce", produce, "--verify", "--json"]
            p = run(args, preload=PASSTHRU)
            r = json.loads(p.stdout or "{}")
            check(p.returncode == 0 and r.get("verified") is True and r.get("produce") == produce
                  and r.get("bytes") == r.get("bytes_read") and r.get("writes", 0) > 0
                  and r.get("ppipe_version", "") is None
                  and (r.get("spans", 0) >= r.get("writes", 1) if produce == "api"
                       else r.get("spans") == 0),
                  f"--produce {produce} --verify: {mode} w={w} r={r_} s={size}", p)
        args = ["--mode", mode, "-w", "2", "-r", "2", "-s", "4096", "-d", "0.2",
                "--produce", produce, "--verify"]
        p = run(args, preload=CORRUPT,
                env_extra={"PPIPE_TEST_CORRUPT": "flip", "PPIPE_TEST_CORRUPT_EVERY": "20"})
        check(p.returncode == 1 and "verification failed" in p.stderr,
              f"--produce {produce}: verify catches flip ({mode})", p)
p = run(["-d", "0.05", "--produce", "api"])
check(p.returncode == 0 and " produce=api " in p.stdout
      and "spans: total=" in p.stdout and "(absent: the header's buffers)" in p.stdout,
      "--produce api in the text output", p)
p = run(["-d", "0.05", "--json"])
r = json.loads(p.stdout or "{}")
check(p.returncode == 0 and r.get("produce") == "prepared" and r.get("spans") == 0,
      "no --produce: prepared", p)

# The two references a pipe is read against: one thread's memcpy, and a
# writer thread and a reader thread copying blocks through a shared ring
# (also with a block size that leaves the ring's last slot short, and pinned).
for args in (["--mode", "memcpy", "-s", "64K"], ["--mode", "ring", "-s", "64K"],
             ["--mode", "ring", "-s", "1M"], ["--mode", "ring", "-s", "3"],
             ["--mode", "ring", "-s", "1M", "--cpus-writers", "0", "--cpus-readers", "0"]):
    p = run(args + ["-d", "0.1", "--json"])
    r = json.loads(p.stdout or "{}")
    check(p.returncode == 0 and set(r) == {"tool", "version", "mode", "size", "mbps"}
          and r["tool"] == "ppipe-bench" and r["mode"] == args[1]
          and r["size"] == {"64K": 65536, "1M": 1 << 20, "3": 3}[args[3]] and r["mbps"] > 0,
          f"{args}: a JSON result with a positive mbps", p)
p = run(["--mode", "ring", "-s", "64K", "-d", "0.1"])
check(p.returncode == 0 and re.fullmatch(r"ppipe-bench \S+ ring size=65536 throughput_MBps: "
                                         r"\d+\.\d\d\n", p.stdout),
      "--mode ring: one line of text", p)

# Even without --verify, a lost byte shows up in the byte count.
p = run(["-s", "4096", "-d", "0.2"], preload=CORRUPT,
        env_extra={"PPIPE_TEST_CORRUPT": "drop", "PPIPE_TEST_CORRUPT_EVERY": "5"})
check(p.returncode == 1 and "verification failed" in p.stderr, "byte count catches a drop", p)

# --memory-pressure=hog fails fast, naming stress-ng, when it is not installed
# (memcg, the default mode, needs no stress-ng).
with tempfile.TemporaryDirectory() as empty:
    p = run(["-d", "0.01", "--memory-pressure=hog"], env_extra={"PATH": empty})
    check(p.returncode == 3 and "stress-ng" in p.stderr, "missing stress-ng is named", p)

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
