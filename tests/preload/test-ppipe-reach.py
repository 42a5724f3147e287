#!/usr/bin/env python3
"""ppipe-reach measures what it claims: shell pipelines of exec'd stages, traced by strace.

usage: test-ppipe-reach.py PPIPE_REACH LIBRARY PPIPE_STAGE [--default-min PERCENT]

With LIBRARY and PPIPE_READERS=trust, 'produce | consume' and 'produce | relay |
consume' must send at least 90% of their large-write bytes by vmsplice; without a
library, none. Under default options the share is printed and must reach
--default-min (0 by default: while libppipe leaves pipes that exec'd programs
inherit alone, it is 0%; raise it once it reaches them). Every stream must arrive
intact. Also: the --min-write line, the command's exit status passed on, argument
errors (exit 2), and exit 3 when strace is not on PATH.

Exit status: 0 passed, 1 failed, 77 strace is missing or cannot trace here.
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

SIZE = 32 << 20
failures = []


def check(cond, what, proc=None):
    if not cond:
        detail = (f"\n  rc={proc.returncode} stderr={proc.stderr.strip()[-1500:]!r}"
                  if proc else "")
        failures.append(what + detail)


class Reach:
    """Runs ppipe-reach with --json -o into a scratch directory."""

    def __init__(self, script, lib, stage, tmp):
        self.script, self.lib, self.stage, self.tmp = script, lib, stage, tmp
        self.env = {k: v for k, v in os.environ.items()
                    if k != "LD_PRELOAD" and not k.startswith("PPIPE_")}

    def pipeline(self, size, hops, amount=SIZE):
        q = [shlex.quote(a) for a in (self.stage, str(size), str(amount))]
        stages = [f"{q[0]} produce -s {q[1]} -b {q[2]}"]
        stages += [f"{q[0]} relay -s {q[1]}"] * (hops - 1)
        stages.append(f"{q[0]} consume -s {q[1]}")
        return ["sh", "-c", " | ".join(stages)]

    def run(self, options, command, env=None):
        """(process, the JSON line of the report or None)."""
        out = os.path.join(self.tmp, "report")
        if os.path.exists(out):
            os.unlink(out)
        p = subprocess.run([sys.executable, self.script, "--json", "-o", out] + options
                           + ["--"] + command, env=env or self.env, capture_output=True,
                           text=True, timeout=240)
        doc = None
        if os.path.exists(out):
            with open(out, encoding="utf-8") as f:
                lines = f.read().splitlines()
            try:
                doc = json.loads(lines[-1])
            except (ValueError, IndexError):
                doc = None
        return p, doc


def stream_intact(p, what, want=SIZE):
    """The consumer's JSON on the command's stdout says every byte arrived."""
    try:
        data = json.loads(p.stdout)
    except ValueError:
        check(False, f"{what}: no consumer result on stdout", p)
        return
    check(data.get("verified") is True and data.get("bytes") == want,
          f"{what}: stream not intact: {data}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reach")
    ap.add_argument("lib")
    ap.add_argument("stage")
    ap.add_argument("--default-min", type=float, default=0.0)
    a = ap.parse_args()
    if not shutil.which("strace"):
        print("SKIP: strace is not installed")
        return 77
    with tempfile.TemporaryDirectory(prefix="ppipe-reach-test.") as tmp:
        r = Reach(os.path.abspath(a.reach), os.path.abspath(a.lib),
                  os.path.abspath(a.stage), tmp)
        p, doc = r.run(["--no-lib"], ["true"])
        if p.returncode == 3:
            print(f"SKIP: {p.stderr.strip()}")
            return 77
        trust = ["--lib", r.lib, "--env", "PPIPE_READERS=trust"]
        for size, hops in ((65536, 1), (65536, 2), (1048576, 1)):
            what = f"trust, {hops} hop(s), {size} B writes"
            p, doc = r.run(trust, r.pipeline(size, hops))
            stream_intact(p, what)
            if not doc:
                check(False, f"{what}: no JSON report", p)
                continue
            total = doc["total"]
            share = total["share_percent"]
            print(f"{what}: {share}% of large-write bytes by vmsplice ({total})")
            check(p.returncode == 0 and doc["exit_status"] == 0, f"{what}: exit 0", p)
            check(share is not None and share >= 90, f"{what}: {share}% < 90%")
            producers = [x for x in doc["processes"] if x["program"] == "ppipe-stage"
                         and x["vmsplice_bytes"] + x["large_write_bytes"] >= SIZE]
            check(len(producers) == hops, f"{what}: one row per writing stage: {doc}")

        what = "no library"
        p, doc = r.run(["--no-lib"], r.pipeline(65536, 2))
        stream_intact(p, what)
        check(doc and doc["library"] is None and doc["total"]["vmsplice_bytes"] == 0
              and doc["total"]["large_write_bytes"] >= 2 * SIZE
              and doc["total"]["share_percent"] == 0.0, f"{what}: 0% expected: {doc}", p)

        what = "default options"
        p, doc = r.run(["--lib", r.lib], r.pipeline(65536, 1))
        stream_intact(p, what)
        share = doc["total"]["share_percent"] if doc else None
        print(f"{what}: {share}% of large-write bytes by vmsplice "
              f"(expected at least {a.default_min}%)")
        check(share is not None and share >= a.default_min,
              f"{what}: {share}% < {a.default_min}%", p)

        # 8 KiB writes are small by default, large with --min-write 4K (the
        # stream's end marker is small either way).
        for opts, large, small in (([], 0, (1 << 20) + 80),
                                   (["--min-write", "4K"], 1 << 20, 80)):
            p, doc = r.run(["--no-lib"] + opts, r.pipeline(8192, 1, 1 << 20))
            producer = doc["processes"][0] if doc and doc["processes"] else {}
            check(producer.get("large_write_bytes") == large
                  and producer.get("small_write_bytes") == small,
                  f"--min-write {opts}: {doc}", p)

        p, doc = r.run(["--no-lib"], ["sh", "-c", "exit 7"])
        check(p.returncode == 7 and doc and doc["exit_status"] == 7,
              "the command's exit status is passed on", p)

        for args, needle in ((["--", ], "COMMAND"), (["--env", "LD_PRELOAD=x", "--", "true"],
                                                     "LD_PRELOAD"),
                             (["--min-write", "0", "--", "true"], "--min-write"),
                             (["--lib", os.path.join(tmp, "none.so"), "--", "true"],
                              "none.so")):
            p = subprocess.run([sys.executable, r.script] + args, env=r.env,
                               capture_output=True, text=True, timeout=60)
            lines = p.stderr.strip().splitlines()
            check(p.returncode == 2 and len(lines) == 1 and needle in lines[0],
                  f"{args}: exit 2 and one line naming {needle!r}", p)

        empty = os.path.join(tmp, "empty")
        os.mkdir(empty)
        p = subprocess.run([sys.executable, r.script, "--no-lib", "--", "true"],
                           env=dict(r.env, PATH=empty), capture_output=True, text=True,
                           timeout=60)
        check(p.returncode == 3 and "strace is not installed" in p.stderr,
              "no strace on PATH: exit 3", p)

    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
