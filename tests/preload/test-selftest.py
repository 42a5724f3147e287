#!/usr/bin/env python3
"""Tests of the differential test suite itself: the driver, and that the tests fail.

usage: test-selftest.py RUN_DIFF PASSTHRU_LIB CORRUPT_LIB MUTANT_LIB DIFF_PROGRAM...

1. run-diff.py's verdicts, with small shell scripts as programs: identical
   transcripts pass, a difference fails with a diff, a skip in either run is 77,
   a failing or non-deterministic baseline is 99, a missing library is 99, and
   --expect-accel reads the PPIPE_STATS file (sum of totals.writes_accelerated
   over the per-process lines; no file is fine only for "passthru" libraries).
2. The diff programs fail through libraries that are wrong in specific ways
   (that they pass through the pass-through library is the main suite's job):
   libppipe-corrupt (bytes flipped,
   dropped, duplicated) and libppipe-mutant (mistakes a vmsplice library could
   make: no copy, buffer reuse on an empty pipe, SIGPIPE suppressed, writev
   corrupted, errno clobbered). Each mutation must be caught by the programs
   listed for it below (others may catch it too).
"""
import os
import subprocess
import sys
import tempfile

RUN_DIFF, PASSTHRU, CORRUPT, MUTANT = sys.argv[1:5]
PROGRAMS = {os.path.basename(p): os.path.abspath(p) for p in sys.argv[5:]}
failures = []


def run_diff(prog, lib, *extra, timeout=120):
    p = subprocess.run([sys.executable, RUN_DIFF, prog, lib, "--timeout", "15"] + list(extra),
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def expect(what, rc, out, want_rc, needle=None):
    if rc != want_rc or (needle and needle not in out):
        failures.append(f"{what}: exit {rc} (wanted {want_rc}"
                        f"{', output with ' + repr(needle) if needle else ''})\n"
                        + "\n".join("    " + ln for ln in out.strip().splitlines()[-12:]))


def script(d, name, body):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    return path


with tempfile.TemporaryDirectory(prefix="ppipe-selftest-") as d:
    same = script(d, "same",
                  'echo "test same" >> "$T_TRANSCRIPT"\necho "line" >> "$T_TRANSCRIPT"\n')
    differs = script(d, "differs", 'echo "test differs" >> "$T_TRANSCRIPT"\n'
                     'if [ -n "$LD_PRELOAD" ]; then echo other >> "$T_TRANSCRIPT"; '
                     'else echo line >> "$T_TRANSCRIPT"; fi\n')
    rcdiff = script(d, "rcdiff", 'echo "test rcdiff" >> "$T_TRANSCRIPT"\n'
                    '[ -n "$LD_PRELOAD" ] && exit 1\nexit 0\n')
    skip = script(d, "skip", 'echo "SKIP: no frobnicator" >> "$T_TRANSCRIPT"\n'
                  '[ -n "$LD_PRELOAD" ] && exit 77\nexit 77\n')
    basefail = script(d, "basefail", 'echo "FAIL: x" >> "$T_TRANSCRIPT"\nexit 1\n')
    noisy = script(d, "noisy", 'echo "$$" >> "$T_TRANSCRIPT"\n')
    env_seen = script(d, "envseen", 'echo "min=${PPIPE_MIN_WRITE:-unset} '
                      'x=${X:-unset}" >> "$T_TRANSCRIPT"\n'
                      '[ -n "$LD_PRELOAD" ] && [ "$PPIPE_MIN_WRITE" != 4097 ] && exit 5\nexit 0\n')
    stats = {n: script(d, f"stats{n}", 'echo "test stats" >> "$T_TRANSCRIPT"\n'
                       f'[ -n "$PPIPE_STATS" ] && {{ echo \'{{"pid":1,"totals":'
                       f'{{"writes_accelerated":{n}}}}}\' >> "$PPIPE_STATS"; '
                       f'echo \'{{"pid":2,"totals":{{"writes_accelerated":0}}}}\' '
                       f'>> "$PPIPE_STATS"; }}\nexit 0\n')
             for n in (0, 5)}
    hang = script(d, "hang", 'echo "test hang" >> "$T_TRANSCRIPT"\n'
                  '[ -n "$LD_PRELOAD" ] && sleep 60\nexit 0\n')

    expect("identical", *run_diff(same, PASSTHRU), 0, "PASS")
    expect("different transcript", *run_diff(differs, PASSTHRU), 1, "+other")
    expect("different exit status", *run_diff(rcdiff, PASSTHRU), 1, "exit status differs")
    expect("skip", *run_diff(skip, PASSTHRU), 77, "no frobnicator")
    expect("baseline fails", *run_diff(basefail, PASSTHRU), 99, "baseline")
    expect("baseline not deterministic", *run_diff(noisy, PASSTHRU, "--baseline-runs", "3"),
           99, "not deterministic")
    expect("library missing", *run_diff(same, os.path.join(d, "libnone.so")), 99,
           "does not exist")
    expect("default library env", *run_diff(env_seen, PASSTHRU), 1, "+min=4097 x=unset")
    expect("--env", *run_diff(env_seen, PASSTHRU, "--env", "PPIPE_MIN_WRITE=1"), 1,
           "+min=1 x=unset")
    expect("hang", *run_diff(hang, PASSTHRU, "--timeout", "2"), 1, "hung")
    expect("accel: passthru without stats", *run_diff(same, PASSTHRU, "--expect-accel"), 0,
           "acceleration check skipped")
    expect("accel: other library without stats", *run_diff(same, CORRUPT, "--expect-accel"),
           1, "no PPIPE_STATS")
    expect("accel: stats say 0", *run_diff(stats[0], CORRUPT, "--expect-accel"), 1,
           "writes_accelerated=0")
    expect("accel: stats say 5", *run_diff(stats[5], CORRUPT, "--expect-accel"), 0,
           "writes_accelerated=5 over 2 processes")
    os.environ["T_EXPECT_ACCEL"] = "1"
    expect("accel from T_EXPECT_ACCEL", *run_diff(same, CORRUPT), 1, "no PPIPE_STATS")
    del os.environ["T_EXPECT_ACCEL"]

# Mutations and the programs that must catch each.
# (The quick programs; every data-checking program fails under these, see the report.)
MUST_FAIL = [
    (CORRUPT, ["PPIPE_TEST_CORRUPT=flip", "PPIPE_TEST_CORRUPT_EVERY=7"],
     ["diff-atomic", "diff-nonblock", "diff-fork"]),
    (CORRUPT, ["PPIPE_TEST_CORRUPT=drop", "PPIPE_TEST_CORRUPT_EVERY=1"],
     ["diff-epipe", "diff-fdstate", "diff-errors"]),
    (CORRUPT, ["PPIPE_TEST_CORRUPT=dup", "PPIPE_TEST_CORRUPT_EVERY=3"],
     ["diff-threads", "diff-efault"]),
    (MUTANT, ["PPIPE_MUTANT=nocopy"], ["diff-writev", "diff-fork", "diff-threads"]),
    (MUTANT, ["PPIPE_MUTANT=ring"],
     ["diff-splice", "diff-packet", "diff-efault", "diff-restricted"]),
    (MUTANT, ["PPIPE_MUTANT=nosigpipe"], ["diff-epipe", "diff-fifo"]),
    (MUTANT, ["PPIPE_MUTANT=writevflip"], ["diff-writev"]),
    (MUTANT, ["PPIPE_MUTANT=errno"], ["diff-errors"]),
]

for lib, env, progs in MUST_FAIL:
    args = [a for kv in env for a in ("--env", kv)]
    for name in progs:
        if name not in PROGRAMS:
            failures.append(f"{name} was not given to the self-test")
            continue
        rc, out = run_diff(PROGRAMS[name], lib, *args)
        expect(f"{name} with {os.path.basename(lib)} {' '.join(env)}", rc, out, 1, "FAIL")

for f in failures:
    print("FAIL:", f)
print(f"{'FAIL' if failures else 'PASS'}: {len(failures)} failures")
sys.exit(1 if failures else 0)
