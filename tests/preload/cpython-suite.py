#!/usr/bin/env python3
"""CPython's own test suites, plain and under libppipe, RUNS times each.

usage: cpython-suite.py LIBRARY [RUNS] [--python PYTHON] [--tests NAME,...]
                        [--modes MODE,...] [--timeout SECONDS] [--logs DIR]

Not a meson test (a run of the defaults takes minutes): the long check that
CPython's test_subprocess, and its neighbours, pass under libppipe as they
do plain. Each of RUNS rounds (default 2) runs

  PYTHON -m test -v --timeout T NAME

for each NAME (default: test_subprocess, test_os, test_signal,
test_asyncio.test_subprocess) in each mode of cpython_modes.py: plain,
preload (LD_PRELOAD=LIBRARY), trust (LD_PRELOAD, PPIPE_READERS=trust) and
system (/etc/ld.so.preload in a private mount namespace: root only). The
modes take turns within a round, so that a load that comes and goes meets
all of them. A run is killed after SECONDS (default 900; regrtest's own
--timeout, a minute shorter, names the test that hung first).

PYTHON is the first CPython 3 found whose test.test_subprocess imports
(cpython_modes.py) unless given. Where LIBRARY is not readable by every
user, a copy is preloaded instead: test_subprocess runs children as
nobody. Each run's output goes to DIR (default: a new directory under the
temporary directory, kept) as NAME.MODE.RUN.log.

It prints each run's result and wall time (reported, never judged), then
the cases that failed (FAIL or ERROR in unittest's summary) with how many
runs of each mode they failed in, the warnings of runs that changed their
environment (regrtest's "Warning --" lines, numbers replaced by N), the
cases whose other outcomes (ok, skipped, expected failure) differ from
plain, and which cases fail under libppipe more often than plain.

Exit status: 0 when no case fails, and no run crashes or times out, in a
libppipe mode more often than plain; 1 otherwise; 2 for bad arguments;
77 when no CPython with its test package is found.
"""
import argparse
import collections
import os
import re
import signal
import sys
import tempfile
import time

import cpython_modes
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import syspreload  # noqa: E402

TESTS = ("test_subprocess", "test_os", "test_signal", "test_asyncio.test_subprocess")
CASE = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \(([^)]*)\)")
WARNING = re.compile(r"^Warning -- (.*)")
# regrtest's last word: "Result: X" (3.11.7), "Tests result: X" (3.11.2).
RESULT = re.compile(r"^(?:Tests )?[Rr]esult: (.+)")
# unittest -v: "test_x (test.mod.Class.test_x) ... ok"; a docstring's first
# line, or what the test printed, may come between the name and the outcome.
STARTS = re.compile(r"^(test\w*) \(([\w.]+)\)")
OUTCOME = re.compile(r"(?:^| \.\.\. )(ok|FAIL|ERROR|skipped|expected failure|unexpected success)"
                     r"(?: '.*')?\s*$")


def case_id(name, where):
    """test_subprocess.POSIXProcessTestCase.test_x, from unittest's line
    (3.11 puts the full name in parentheses, older ones the class)."""
    full = where if where.endswith("." + name) else f"{where}.{name}"
    return full[len("test."):] if full.startswith("test.") else full


def parse(text):
    """(result, {case: kind}, [warnings], {case: outcome}) of one run's output."""
    result, cases, warnings, outcomes = None, {}, [], {}
    current = None
    for line in text.splitlines():
        m = STARTS.match(line)
        if m:
            current = case_id(m.group(1), m.group(2))
        m = OUTCOME.search(line)
        if m and current and current not in outcomes:
            outcomes[current] = m.group(1)
        m = CASE.match(line)
        if m:
            cases[case_id(m.group(2), m.group(3))] = m.group(1)
            continue
        m = WARNING.match(line)
        if m:
            warnings.append(re.sub(r"\d+", "N", m.group(1)).strip())
            continue
        m = RESULT.match(line)
        if m:
            result = m.group(1).strip()
    return result, cases, warnings, outcomes


class Run:
    def __init__(self, test, mode, n, res, text):
        self.test, self.mode, self.n = test, mode, n
        self.seconds = res.seconds
        self.result, self.cases, self.warnings, self.outcomes = parse(text)
        if res.timed_out:
            self.result = "TIMEOUT"
        elif self.result is None:
            self.result = f"no result (exit status {res.returncode})"
        self.broken = res.timed_out or self.result.startswith("no result")

    def short(self):
        return f"{self.result} {self.seconds:.1f} s"


def table(head, rows):
    """A Markdown table."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def report(runs, modes, rounds):
    by = collections.defaultdict(list)
    for r in runs:
        by[(r.test, r.mode)].append(r)
    tests = list(dict.fromkeys(r.test for r in runs))
    labels = [f"{m} ({cpython_modes.LABELS[m]})" if m != "plain" else m for m in modes]

    print("\n## Runs: result and wall time of each run\n")
    print(table(["test"] + labels,
                [[t] + ["; ".join(r.short() for r in by[(t, m)]) for m in modes]
                 for t in tests]))

    fails = collections.defaultdict(lambda: collections.Counter())
    kinds = {}
    for r in runs:
        for case, kind in r.cases.items():
            fails[case][r.mode] += 1
            kinds.setdefault(case, set()).add(kind)
    print(f"\n## Failing cases: runs (of {rounds}) in which each failed\n")
    if fails:
        print(table(["case", "kind"] + modes,
                    [[c, "/".join(sorted(kinds[c]))]
                     + [f"{fails[c][m]}/{rounds}" if fails[c][m] else "-" for m in modes]
                     for c in sorted(fails)]))
    else:
        print("none")

    warns = collections.defaultdict(lambda: collections.Counter())
    for r in runs:
        for w in set(r.warnings):
            warns[(r.test, w)][r.mode] += 1
    print(f"\n## Warnings (environment changed): runs (of {rounds}) that printed each\n")
    if warns:
        print(table(["test", "warning"] + modes,
                    [[t, w[:160]] + [f"{c[m]}/{rounds}" if c[m] else "-" for m in modes]
                     for (t, w), c in sorted(warns.items())]))
    else:
        print("none")

    seen = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    for r in runs:
        for case, outcome in r.outcomes.items():
            seen[case][r.mode][outcome] += 1
    odd = []
    for case in sorted(seen):
        counts = seen[case]
        if case not in fails and any(counts[m] != counts["plain"] for m in modes):
            odd.append([case] + [", ".join(f"{o} {n}" for o, n in sorted(counts[m].items()))
                                 or "not run" for m in modes])
    print("\n## Other outcomes that differ from plain (ok, skipped, expected failure; "
          "runs)\n")
    print(table(["case"] + modes, odd) if odd else "none")

    worse = []
    for m in modes:
        if m == "plain":
            continue
        for c in sorted(fails):
            if fails[c][m] > fails[c]["plain"]:
                worse.append(f"{m}: {c} failed in {fails[c][m]}/{rounds} runs, plain in "
                             f"{fails[c]['plain']}/{rounds}")
        for t in tests:
            b, p = (sum(r.broken for r in by[(t, x)]) for x in (m, "plain"))
            if b > p:
                worse.append(f"{m}: {t} crashed or timed out in {b}/{rounds} runs, plain in "
                             f"{p}/{rounds}")
    print("\n## Verdict\n")
    if "plain" not in modes:
        print("no plain runs to compare with")
        return 1
    extra = [(t, w) for (t, w), c in warns.items() if any(c[m] > c["plain"] for m in modes)]
    if odd or extra:
        print(f"note: not failures, but not as plain either: {len(odd)} case(s) with other "
              f"outcomes, {len(extra)} warning(s) printed more often under libppipe (tables "
              f"above)\n")
    if worse:
        print("differs from plain:")
        for w in worse:
            print(f"- {w}")
        return 1
    print("every libppipe mode passes as plain does")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("lib", metavar="LIBRARY")
    ap.add_argument("runs", nargs="?", type=int, default=2)
    ap.add_argument("--python")
    ap.add_argument("--tests", default=",".join(TESTS))
    ap.add_argument("--modes", default=",".join(cpython_modes.MODES))
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--logs")
    a = ap.parse_args()
    want = [m for m in a.modes.split(",") if m]
    if a.runs < 1 or any(m not in cpython_modes.MODES for m in want):
        ap.error(f"RUNS must be 1 or more, and modes among {', '.join(cpython_modes.MODES)}")
    about = cpython_modes.find_python(a.python)
    if not about:
        print("SKIP: no CPython 3 whose test.test_subprocess imports (on Debian: "
              "apt-get install libpython3.11-testsuite)")
        return 77
    py = about["executable"]
    logs = a.logs or tempfile.mkdtemp(prefix="ppipe-cpython-suite.")
    os.makedirs(logs, exist_ok=True)
    tests = [t for t in a.tests.split(",") if t]
    print(f"Python: {py} {about['version']}, test package {about['test_dir']}")
    print(f"tests: {', '.join(tests)}; {a.runs} run(s) each; logs in {logs}")
    # Started in the background (cmd &, nohup), this process and every test
    # would ignore SIGINT and SIGQUIT, and test_signal's KeyboardInterrupt
    # cases fail in every mode: a handler here is reset to the default at exec.
    for sig, handler in ((signal.SIGINT, signal.default_int_handler),
                         (signal.SIGQUIT, lambda *_: sys.exit(128 + signal.SIGQUIT))):
        if signal.getsignal(sig) == signal.SIG_IGN:
            print(f"note: {sig.name} was ignored; the tests get its default action")
            signal.signal(sig, handler)
    with tempfile.TemporaryDirectory(prefix="ppipe-cpython-suite.") as work:
        lib, note = syspreload.reachable_library(os.path.abspath(a.lib), work)
        if note:
            print(f"note: {note}")
        modes = cpython_modes.Modes(lib, work)
        if "system" in want:
            ok, why = modes.setup_system(py)
            if not ok:
                print(f"note: the system mode is left out: {why}")
                want.remove("system")
            elif why:
                print(f"note: {why}")
        print(f"modes: {', '.join(f'{m} ({cpython_modes.LABELS[m]})' for m in want)}\n")
        runs = []
        t0 = time.monotonic()
        for n in range(1, a.runs + 1):
            for test in tests:
                for mode in want:
                    cwd = tempfile.mkdtemp(dir=work, prefix="cwd.")
                    os.chmod(cwd, 0o755)
                    path = os.path.join(logs, f"{test}.{mode}.{n}.log")
                    argv = [py, "-m", "test", "-v", "--timeout", str(max(a.timeout - 60, 30)),
                            test]
                    with open(path, "wb") as f:
                        res = modes.run(mode, argv, a.timeout, cwd=cwd, stdout=f)
                    with open(path, errors="replace") as f:
                        run = Run(test, mode, n, res, f.read())
                    runs.append(run)
                    failed = ", ".join(sorted(run.cases)) or "-"
                    print(f"run {n} {test} {mode}: {run.short()}, failing: {failed}",
                          flush=True)
        print(f"\ntotal {time.monotonic() - t0:.0f} s")
        return report(runs, want, a.runs)


if __name__ == "__main__":
    sys.exit(main())
