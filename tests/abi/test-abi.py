#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The built library keeps the ABI of the last release.

Checks LIBRARY against the committed baseline of its architecture,
BASELINE_DIR/libppipe.so.0-<arch>.abi (an abixml dump by abidw, of the
public header's types only):

  1. its SONAME is libppipe.so.<N> and that baseline's SONAME;
  2. every ppipe_* name it exports carries a LIBPPIPE_ version, and no
     other name it exports carries one: the libc names it interposes must
     stay unversioned, or programs' write@GLIBC_2.2.5 would never bind to
     them (shim/ppipe.map);
  3. abidiff finds no difference from the baseline: no exported name
     removed or added, no change of struct ppipe_stats, struct ppipe_span
     or of the calls' parameters.

Any difference fails, compatible ones too (a member added at the end of
struct ppipe_stats, a call added in a new version node): the baseline is
the record of the ABI a release promised, and a change to it is made on
purpose, seen in review as a change of the .abi file:

  test-abi.py --update LIBRARY INCLUDE_DIR BASELINE_DIR

An incompatible change (abidiff's exit status has bit 8: something
removed) needs a new SONAME (libppipe_soversion in meson.build) as well.

The check skips (77) without abidw and abidiff (Debian: abigail-tools),
for an architecture with no baseline, and for a library without debug
information (types can only be read from DWARF). The baselines are made
by Debian 12's gcc and abigail-tools 2.2; another compiler may describe
the same types differently.

usage: test-abi.py [--update] LIBRARY INCLUDE_DIR BASELINE_DIR
"""

import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

SKIP = 77
# ELF e_machine -> the name in the baseline's file name.
ARCHES = {62: "x86_64", 183: "aarch64"}
ABIDW_ARGS = ["--drop-private-types", "--drop-undefined-syms", "--no-corpus-path",
              "--no-comp-dir-path", "--no-show-locs"]


def elf_info(path):
    """(e_machine, section names) of an ELF64 little-endian file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    machine, = struct.unpack_from("<H", data, 0x12)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    strtab_off, = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)
    names = set()
    for i in range(shnum):
        name, = struct.unpack_from("<I", data, shoff + i * shentsize)
        start = strtab_off + name
        names.add(data[start:data.index(b"\0", start)].decode())
    return machine, names


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args], check=True, capture_output=True,
                          text=True).stdout


def exports(lib):
    """[(name, version or None)] of the symbols LIBRARY defines."""
    out = []
    for line in readelf("--dyn-syms", lib).splitlines():
        f = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(f) < 8 or not f[0][:-1].isdigit() or f[6] == "UND" or f[3] == "SECTION":
            continue  # the header, references, section symbols (aarch64's .init)
        name, _, version = f[7].partition("@")
        if f[6] == "ABS" and name.startswith("LIBPPIPE_"):
            continue  # a version node's own symbol (LIBPPIPE_0.1)
        out.append((name, version.lstrip("@") or None))
    return out


def soname(lib):
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^]]+)\]", readelf("-d", lib))
    return m.group(1) if m else None


def main(argv):
    update = "--update" in argv
    args = [a for a in argv[1:] if a != "--update"]
    if len(args) != 3:
        sys.stderr.write(__doc__.rsplit("usage: ", 1)[1])
        return 2
    lib, include, base_dir = args
    for tool in ("abidw", "abidiff", "readelf"):
        if not shutil.which(tool):
            print(f"SKIP: no {tool} (Debian: apt-get install abigail-tools binutils)")
            return SKIP
    machine, sections = elf_info(lib)
    arch = ARCHES.get(machine)
    if arch is None:
        print(f"SKIP: no baseline for ELF machine {machine}")
        return SKIP
    if ".debug_info" not in sections:
        print(f"SKIP: {lib} has no debug information (a build with -g is needed)")
        return SKIP

    failed = []
    name = soname(lib)
    if not name or not re.fullmatch(r"libppipe\.so\.[0-9]+", name):
        failed.append(f"SONAME {name!r} is not libppipe.so.<N>")
    baseline = os.path.join(base_dir, f"{name}-{arch}.abi")

    syms = exports(lib)
    print(f"{lib}: SONAME {name}, {arch}, {len(syms)} exported names")
    unversioned = sorted(n for n, v in syms
                         if n.startswith("ppipe_") and not (v or "").startswith("LIBPPIPE_"))
    if unversioned:
        failed.append(f"exported without a LIBPPIPE_ version (shim/ppipe.map): "
                      f"{', '.join(unversioned)}")
    versioned = sorted(f"{n}@{v}" for n, v in syms if not n.startswith("ppipe_") and v)
    if versioned:
        failed.append(f"{len(versioned)} libc names exported with a version, which no "
                      f"program's reference binds to (shim/ppipe.map): "
                      f"{', '.join(versioned[:6])}{', ...' if len(versioned) > 6 else ''}")

    if update:
        if failed:
            print("\n".join("FAIL: " + f for f in failed))
            return 1
        subprocess.run(["abidw", "--headers-dir", include, *ABIDW_ARGS, "--out-file",
                        baseline, lib], check=True)
        print(f"wrote {baseline}")
        return 0

    if not os.path.exists(baseline):
        failed.append(f"no baseline {baseline} for this SONAME and architecture "
                      f"(a new SONAME starts one with --update)")
    else:
        with open(baseline, encoding="utf-8") as f:
            m = re.search(r"soname='([^']*)'", f.read(4096))
        if not m or m.group(1) != name:
            failed.append(f"{baseline} describes {m.group(1) if m else 'no SONAME'}")
        # The library as abidw sees it, kept for a look when the check fails.
        with tempfile.TemporaryDirectory() as tmp:
            now = os.path.join(tmp, "now.abi")
            subprocess.run(["abidw", "--headers-dir", include, *ABIDW_ARGS, "--out-file", now,
                            lib], check=True)
            p = subprocess.run(["abidiff", baseline, now],
                               capture_output=True, text=True)
        report = (p.stdout + p.stderr).strip()
        if p.returncode & 3:
            failed.append(f"abidiff could not compare (exit status {p.returncode}):\n{report}")
        elif p.returncode:
            kind = ("an INCOMPATIBLE change (something removed): a release with it needs a "
                    "new SONAME" if p.returncode & 8 else "a change")
            failed.append(f"the ABI differs from {os.path.basename(baseline)}, {kind} "
                          f"(abidiff exit status {p.returncode}):\n{report}\n"
                          f"If the change is one to keep, make it the baseline: "
                          f"test-abi.py --update LIBRARY INCLUDE_DIR BASELINE_DIR")
        else:
            print(f"no difference from {os.path.basename(baseline)}: "
                  f"{report.splitlines()[0] if report else 'abidiff is silent'}")

    for f in failed:
        print("FAIL: " + f)
    if not failed:
        print("PASS: the ABI is the baseline's, ppipe_* versioned, libc names unversioned")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
