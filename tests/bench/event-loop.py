#!/usr/bin/env python3
"""event-loop: an asyncio program streaming into a child, plain and under libppipe.

usage: event-loop.py LIBRARY [--bytes SIZE] [--write SIZE] [--runs N]
                     [--reader CMD] [--json FILE]

The shape event loops give their pipes: Python's asyncio starts READER
(a shell command line, default: cat into /dev/null) with asyncio.subprocess.PIPE as
its stdin, which makes the parent's end non-blocking, and writes SIZE
bytes into it in writes of --write bytes (default 512M in 1M writes),
each followed by drain(), as asyncio's streams are used. A write the pipe
takes only in part leaves the rest in the transport's buffer, which the
loop writes again once epoll says the pipe has room.

Runs alternate, plain then preloaded, --runs times each (default 5). For
each side: MB/s (MiB per second of wall time) and CPU seconds per GiB of
the whole tree (the writer and the reader, from RUSAGE_CHILDREN), medians
of the runs, and the ratio preloaded/plain of each. Every preloaded run
reports through PPIPE_STATS: the share of the large writes' bytes that
went into the pipe by vmsplice (bytes_vmspliced over bytes_accelerated
plus bytes_passthrough_large) is printed for each run. That the bytes
arrive intact is the reach test's to check (tests/preload/test-reach.py).

Timings only: nothing here is judged but the share (at least 90%, else
exit 1). Exit 2 on a usage error.
"""
import argparse
import glob
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

WRITER = r"""
import asyncio, os, sys

async def main(total, size, argv):
    p = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    block = os.urandom(size)
    left = total
    while left:
        n = min(size, left)
        p.stdin.write(block if n == size else block[:n])
        await p.stdin.drain()
        left -= n
    p.stdin.close()
    out = await p.stdout.read()
    sys.stdout.write(out.decode())
    return await p.wait()

sys.exit(asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])))
"""

READER = "exec cat > /dev/null"


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(i?[bB])?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    n = int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]
    if n <= 0:
        raise argparse.ArgumentTypeError(f"not a positive size: {text!r}")
    return n


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("lib", metavar="LIBRARY")
    ap.add_argument("--bytes", type=parse_size, default=512 << 20)
    ap.add_argument("--write", type=parse_size, default=1 << 20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--reader", default=None,
                    help=f"the child's command line, run by sh (default: {READER})")
    ap.add_argument("--json", metavar="FILE", help="write the runs and medians as JSON")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    if not os.path.isfile(args.lib):
        ap.error(f"no library {args.lib}")
    return args


def clean_env():
    return {k: v for k, v in os.environ.items()
            if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}


def one_run(args, preload, statsdir):
    """One run: (seconds, cpu seconds of the tree, the child's output)."""
    env = clean_env()
    if preload:
        env["LD_PRELOAD"] = os.path.abspath(args.lib)
        env["PPIPE_STATS"] = os.path.join(statsdir, "%p.json")
    reader = ["sh", "-c", args.reader or READER]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", WRITER, str(args.bytes), str(args.write)] + reader,
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=3600)
    t = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode != 0:
        raise SystemExit(f"event-loop: the writer failed ({r.returncode}): {r.stderr[-500:]}")
    return t, cpu, r.stdout.strip()


def share(statsdir):
    """bytes_vmspliced / (bytes_accelerated + bytes_passthrough_large) over the reports."""
    vm = acc = large = 0
    for path in glob.glob(os.path.join(statsdir, "*.json")):
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                t = json.loads(line)["totals"]
                vm += t.get("bytes_vmspliced", 0)
                acc += t["bytes_accelerated"]
                large += t["bytes_passthrough_large"]
        os.unlink(path)
    return 100.0 * vm / (acc + large) if acc + large else 0.0


def main(argv):
    args = parse_args(argv)
    gib = args.bytes / (1 << 30)
    mib = args.bytes / (1 << 20)
    runs = {"plain": [], "libppipe": []}
    shares = []
    failed = False
    statsdir = tempfile.mkdtemp(prefix="ppipe-event-loop-")
    try:
        print(f"asyncio writing {mib:.0f} MiB in {args.write} B writes into "
              f"{args.reader or 'cat'}; {args.runs} alternating runs per side")
        for i in range(args.runs):
            for side in ("plain", "libppipe"):
                t, cpu, _ = one_run(args, side == "libppipe", statsdir)
                rec = {"seconds": t, "cpu_s": cpu, "mbps": mib / t, "cpu_s_per_gib": cpu / gib}
                line = (f"  run {i + 1} {side:8}: {rec['mbps']:8.0f} MB/s, "
                        f"{rec['cpu_s_per_gib']:6.3f} CPU s/GiB")
                if side == "libppipe":
                    pct = share(statsdir)
                    rec["vmsplice_share"] = pct
                    shares.append(pct)
                    line += f", {pct:.1f}% of the large writes' bytes by vmsplice"
                    failed |= pct < 90.0
                runs[side].append(rec)
                print(line, flush=True)
    finally:
        shutil.rmtree(statsdir, ignore_errors=True)
    med = {side: {k: statistics.median(r[k] for r in rs) for k in ("mbps", "cpu_s_per_gib")}
           for side, rs in runs.items()}
    tp = med["libppipe"]["mbps"] / med["plain"]["mbps"]
    cpu = med["libppipe"]["cpu_s_per_gib"] / med["plain"]["cpu_s_per_gib"]
    print(f"medians: plain {med['plain']['mbps']:.0f} MB/s, "
          f"{med['plain']['cpu_s_per_gib']:.3f} CPU s/GiB; libppipe "
          f"{med['libppipe']['mbps']:.0f} MB/s, {med['libppipe']['cpu_s_per_gib']:.3f} CPU s/GiB")
    print(f"ratios libppipe/plain: throughput {tp:.2f}x, CPU per GiB {cpu:.2f}x; "
          f"by vmsplice: {min(shares):.1f}% to {max(shares):.1f}% of the large writes' bytes")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bytes": args.bytes, "write": args.write, "reader": args.reader or "cat",
                       "runs": runs, "medians": med,
                       "ratios": {"mbps": tp, "cpu_s_per_gib": cpu}}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
