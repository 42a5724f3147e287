#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""debian/ follows the project's version and SONAME.

  - debian/changelog's newest entry is VERSION (meson.build's project
    version; the packages are native, so no Debian revision) and says what
    the release changes (at least one "  * " line);
  - the runtime package is libppipe<SOVERSION>, as Debian names the package
    of libppipe.so.<SOVERSION>, in debian/control, its .install and
    .symbols files, and the symbols file describes libppipe.so.<SOVERSION>;
  - the development package depends on that runtime package.

A release that raises the version or the SONAME changes debian/ with it,
or this fails.

usage: test-debian-version.py SOURCE_ROOT VERSION SOVERSION
"""

import os
import re
import sys


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__.rsplit("usage: ", 1)[1])
        return 2
    root, version, soversion = argv[1:]
    deb = os.path.join(root, "debian")
    failed = []

    with open(os.path.join(deb, "changelog"), encoding="utf-8") as f:
        changelog = f.read()
    m = re.match(r"(\S+) \(([^)]+)\) (\S+); urgency=\S+\n\n((?:  .*\n|\n)*?) -- ", changelog)
    if not m:
        failed.append("debian/changelog: the first entry is not in Debian's format")
    else:
        if m.group(1) != "libppipe":
            failed.append(f"debian/changelog: source {m.group(1)}, not libppipe")
        if m.group(2) != version:
            failed.append(f"debian/changelog: the newest entry is {m.group(2)}, "
                          f"meson.build's version is {version}")
        if not re.search(r"^  \* \S", m.group(4), re.M):
            failed.append(f"debian/changelog: the entry for {m.group(2)} says nothing")
        if m.group(3) == "UNRELEASED":
            failed.append("debian/changelog: the newest entry is UNRELEASED")

    runtime = f"libppipe{soversion}"
    with open(os.path.join(deb, "control"), encoding="utf-8") as f:
        control = f.read()
    packages = re.findall(r"^Package: (\S+)", control, re.M)
    if runtime not in packages:
        failed.append(f"debian/control: no package {runtime} (SONAME libppipe.so.{soversion}); "
                      f"packages: {packages}")
    dev = re.search(r"^Package: libppipe-dev\n(?:.+\n)*?Depends: (.*)", control, re.M)
    if not dev or f"{runtime} (= ${{binary:Version}})" not in dev.group(1):
        failed.append(f"debian/control: libppipe-dev does not depend on "
                      f"{runtime} (= ${{binary:Version}})")
    for suffix in ("install", "symbols"):
        path = os.path.join(deb, f"{runtime}.{suffix}")
        if not os.path.exists(path):
            failed.append(f"no debian/{runtime}.{suffix}")
    symbols = os.path.join(deb, f"{runtime}.symbols")
    if os.path.exists(symbols):
        with open(symbols, encoding="utf-8") as f:
            first = f.readline().split()
        if first[:2] != [f"libppipe.so.{soversion}", runtime]:
            failed.append(f"debian/{runtime}.symbols describes {first[:2]}")

    for f in failed:
        print("FAIL: " + f)
    if not failed:
        print(f"ok: debian/ is version {version}, {runtime} for libppipe.so.{soversion}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
