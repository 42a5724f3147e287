#!/usr/bin/env python3
"""Every C source and header of the project is formatted as .clang-format says.

Skips (exit 77) when clang-format is not installed.
usage: test-format.py SOURCE_ROOT
"""
import os
import shutil
import subprocess
import sys

ROOT = sys.argv[1]
DIRS = ("shim", "include", "tests", "examples")
tool = shutil.which("clang-format")
if not tool:
    print("SKIP: clang-format is not installed")
    sys.exit(77)
files = []
for d in DIRS:
    for top, _, names in os.walk(os.path.join(ROOT, d)):
        files += [os.path.join(top, n) for n in names if n.endswith((".c", ".h"))]
bad = []
for f in sorted(files):
    with open(f, "rb") as fh:
        mine = fh.read()
    out = subprocess.run([tool, "--style=file", f], capture_output=True, check=True).stdout
    if out != mine:
        bad.append(os.path.relpath(f, ROOT))
for f in bad:
    print("FAIL: clang-format disagrees with", f)
print(f"{len(files)} files, {len(bad)} not formatted")
sys.exit(1 if bad or not files else 0)
