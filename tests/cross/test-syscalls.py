#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every system call libppipe makes itself is checked by PROGRAM (syscalls.c).

Collects the SYS_ names shim/'s sources use (PP_SYSCALL and RAW), runs
PROGRAM, and requires an "ok SYS_name" or, for a call the architecture does
not have, an "n/a SYS_name" line for each, and no FAIL line. A system call
added to shim/ without a check in syscalls.c fails here, on every
architecture CI builds (x86_64, and aarch64 under qemu).

usage: test-syscalls.py SHIM_DIR PROGRAM
"""
import os
import re
import subprocess
import sys


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__.rsplit("usage: ", 1)[1])
        return 2
    shim, program = argv[1], argv[2]
    used = set()
    for name in sorted(os.listdir(shim)):
        if name.endswith((".c", ".h")):
            with open(os.path.join(shim, name), encoding="utf-8") as f:
                # Code, not comments: SYS_x in a comment names no call.
                text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", f.read(), flags=re.S)
            used.update(re.findall(r"\bSYS_([a-z][a-z0-9_]*)", text))
    p = subprocess.run([program], capture_output=True, text=True, timeout=60)
    print(p.stdout, end="")
    checked = set(re.findall(r"^(?:ok|n/a) SYS_(\w+)", p.stdout, re.M))
    failed = re.findall(r"^FAIL SYS_(\w+)", p.stdout, re.M)
    missing = sorted(used - checked)
    if missing:
        print(f"FAIL: shim/ uses {', '.join('SYS_' + m for m in missing)}, which "
              f"syscalls.c does not check")
    if p.returncode or failed or missing:
        print(f"FAIL: exit status {p.returncode}; {p.stderr.strip()}")
        return 1
    print(f"PASS: {len(used)} system calls shim/ makes, each checked "
          f"({len(re.findall('^n/a', p.stdout, re.M))} not on this architecture)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
