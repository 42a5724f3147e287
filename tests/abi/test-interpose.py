#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Programs' libc references bind to libppipe's names, and its own calls by version.

The dynamic linker says where it bound each name (LD_DEBUG=bindings,
LD_BIND_NOW=1 so that every name is bound at start-up). This reads it for:

  - PROBE (interpose-probe.c) under LD_PRELOAD=LIBRARY: each libc name it
    refers to with a glibc version (write@GLIBC_2.2.5) must be bound to
    LIBRARY, the object write() came from (dladdr) must be LIBRARY, and
    ppipe_version() must answer. A versioned interposed name
    (write@@LIBPPIPE_0.1) fails here: the loader would take libc's;
  - PROBE_LINKED, the same program linked with -lppipe (PPIPE_LINKED), run
    without LD_PRELOAD: its ppipe_version is bound by its version,
    LIBPPIPE_0.1, to the library found by its SONAME;
  - each further PROGRAM (cat, dd, python3...) under LD_PRELOAD, run with
    --version: every binding of a name LIBRARY exports, from the program's
    own file, goes to LIBRARY, and there is at least one.

usage: test-interpose.py LIBRARY PROBE PROBE_LINKED [PROGRAM...]
"""

import glob
import os
import re
import subprocess
import sys
import tempfile

BINDING = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: "
                     r"(?:normal|protected) symbol `([^']+)'(?: \[([^]]+)\])?")
# Names interpose-probe.c refers to that must be among those bound. The
# probe's references are read from its own symbol table: which name a call
# is depends on the headers (fcntl is fcntl64 with _FILE_OFFSET_BITS=64).
PROBE_CORE = {"write", "writev", "close", "fork", "vfork", "posix_spawn", "fwrite", "printf"}


def dynsyms(path, undefined):
    """Names PATH defines (or, with @undefined, refers to) in its dynamic symbol table."""
    out = subprocess.run(["readelf", "-W", "--dyn-syms", path], check=True, capture_output=True,
                         text=True).stdout
    names = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0][:-1].isdigit() and f[6] != "ABS" and f[3] != "SECTION" and \
                (f[6] == "UND") == undefined:
            names.add(f[7].split("@")[0])
    return names


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def bindings(argv, env_extra):
    """(exit status, stdout, [(from, to, name, version)]) of one run."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        env.update(LD_DEBUG="bindings", LD_BIND_NOW="1",
                   LD_DEBUG_OUTPUT=os.path.join(tmp, "ld"), **env_extra)
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        found = []
        for path in glob.glob(os.path.join(tmp, "ld.*")):
            with open(path, encoding="utf-8", errors="replace") as f:
                found += BINDING.findall(f.read())
    return p.returncode, p.stdout, found


def is_lib(path, lib):
    return os.path.basename(path).startswith("libppipe.so") and \
        os.path.realpath(path) == os.path.realpath(lib)


def main(argv):
    if len(argv) < 4:
        sys.stderr.write(__doc__.rsplit("usage: ", 1)[1])
        return 2
    lib, probe, probe_linked, programs = argv[1], argv[2], argv[3], argv[4:]
    failed = []
    names = dynsyms(lib, False)
    probe_names = dynsyms(probe, True) & names - {"ppipe_version"}

    def check(ok, what):
        print(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            failed.append(what)

    # The probe, preloaded.
    rc, out, found = bindings([probe], {"LD_PRELOAD": lib})
    own = [b for b in found if os.path.realpath(b[0]) == os.path.realpath(probe)]
    bound = {b[2]: b for b in own if b[2] in probe_names}
    missing = (probe_names | PROBE_CORE) - set(bound)
    check(not missing, f"probe: the dynamic linker bound all {len(probe_names)} interposed "
          f"names it refers to" + (f" (missing: {', '.join(sorted(missing))})" if missing else ""))
    elsewhere = sorted(f"{n}@{b[3] or '(unversioned)'} -> {b[1]}" for n, b in bound.items()
                       if not is_lib(b[1], lib))
    check(not elsewhere, "probe: every one bound to libppipe"
          + (f", but {'; '.join(elsewhere)}" if elsewhere else
             f" ({', '.join(sorted({b[3] for b in bound.values() if b[3]}))} references)"))
    unversioned = sorted(n for n, b in bound.items() if not b[3])
    check(not unversioned, "probe: its references carry glibc's versions"
          + (f" (unversioned: {', '.join(unversioned)})" if unversioned else ""))
    check(rc == 0 and "write from libppipe.so" in out,
          f"probe: ppipe_version() answers, write() is libppipe's: {out.strip()!r}")

    # The probe linked with -lppipe, not preloaded.
    rc, out, found = bindings([probe_linked], {})
    v = [b for b in found if b[2] == "ppipe_version"
         and os.path.realpath(b[0]) == os.path.realpath(probe_linked)]
    check(v and all(os.path.basename(b[1]).startswith("libppipe.so.")
                    and b[3].startswith("LIBPPIPE_") for b in v),
          "linked probe: ppipe_version bound by version to the SONAME: "
          + (f"{v[0][2]}@{v[0][3]} -> {v[0][1]}" if v else "no binding seen"))
    check(rc == 0 and out.startswith("ppipe_version "), f"linked probe: {out.strip()!r}")

    # Programs nobody here wrote.
    for prog in programs:
        if not is_elf(prog):
            print(f"skip  {prog}: not an ELF program (a wrapper script?)")
            continue
        rc, out, found = bindings([prog, "--version"], {"LD_PRELOAD": lib})
        own = [b for b in found if os.path.realpath(b[0]) == os.path.realpath(prog)
               and b[2] in names]
        bad = sorted({f"{b[2]}@{b[3] or '-'} -> {b[1]}" for b in own if not is_lib(b[1], lib)})
        check(own and not bad,
              f"{prog}: {len({b[2] for b in own})} interposed names bound to libppipe"
              + (f", but {'; '.join(bad)}" if bad else ""))

    print(f"{'FAIL' if failed else 'PASS'}: {len(failed)} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
