#!/usr/bin/env python3
"""libppipe's options at load: bad values warn once and never stop the program; PPIPE_VERBOSE lists every option.

usage: test-shim-config.py LIBPPIPE OPTIONS_DEF
"""
import os
import re
import subprocess
import sys

LIB, OPTIONS_DEF = sys.argv[1:3]
failures = []


def run(env_extra, argv=("/bin/true",)):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PPIPE_")}
    env.update(env_extra, LD_PRELOAD=LIB)
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=30)


p = run({"PPIPE_MIN_WRITE": "12x", "PPIPE_MODE": "fast", "PPIPE_FDS": "1,banana"})
lines = p.stderr.strip().splitlines()
if p.returncode != 0:
    failures.append(f"the program failed: {p.returncode}")
for var, bad in (("PPIPE_MIN_WRITE", "12x"), ("PPIPE_MODE", "fast"), ("PPIPE_FDS", "1,banana")):
    mine = [ln for ln in lines if f"{var}={bad}" in ln]
    if len(mine) != 1 or "using" not in mine[0] or not mine[0].startswith("libppipe["):
        failures.append(f"{var}: expected one 'libppipe[pid]: {var}={bad} ... using ...' line, got {mine}")
if len(lines) != 3:
    failures.append(f"expected 3 warning lines, got {len(lines)}: {lines}")

p = run({"PPIPE_MIN_WIRTE": "1"})
if "PPIPE_MIN_WIRTE" not in p.stderr or p.returncode != 0:
    failures.append(f"a misspelt option must be named: {p.stderr!r}")

p = run({"PPIPE_VERBOSE": "1"})
names = set(re.findall(r"\bPP_OPT\(\s*\w+\s*,\s*(PPIPE_\w+)", open(OPTIONS_DEF).read()))
shown = set(re.findall(r"(PPIPE_\w+)=", p.stderr))
if not names or names != shown:
    failures.append(f"PPIPE_VERBOSE shows {sorted(shown)}, options.def has {sorted(names)}")

p = run({})
if p.stderr or p.returncode != 0:
    failures.append(f"with no options, libppipe must be silent: {p.stderr!r}")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
