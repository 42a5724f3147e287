#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""libppipe's hot data stays on one page, the one loading writes anyway.

Every process libppipe is loaded into reads the pp_hot section (compiler.h:
PP_HOT): at start-up, in every fork child, at exec and exit. A page of it a
fork child or a new program writes, or reads for the first time, is a page
fault there. The section is placed right before .bss, whose first page the
dynamic loader writes (it zeroes the part of the page the file does not
fill): so the whole section must sit on that page. This reads the section
headers of the library and checks that it does; what is left of the page
is printed, so that a change that eats it shows before it overflows.

Usage: test-hot-page.py LIBRARY
"""

import struct
import sys

PAGE = 4096


def sections(path):
    """{name: (address, size)} of an ELF64 little-endian file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i):
        # name, type, flags, addr, offset, size
        return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)

    strtab = header(shstrndx)
    out = {}
    for i in range(shnum):
        name, _, _, addr, _, size = header(i)
        start = strtab[4] + name
        out[data[start:data.index(b"\0", start)].decode()] = (addr, size)
    return out


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: test-hot-page.py LIBRARY\n")
        return 2
    try:
        sec = sections(argv[1])
    except (OSError, ValueError) as exc:
        print(f"FAIL: {argv[1]}: {exc}")
        return 1
    if "pp_hot" not in sec or ".bss" not in sec:
        print(f"FAIL: no pp_hot or .bss section in {argv[1]}")
        return 1
    hot, size = sec["pp_hot"]
    bss = sec[".bss"][0]
    page = hot // PAGE
    print(f"pp_hot: {size} bytes at {hot:#x}, .bss from {bss:#x}; "
          f"{(page + 1) * PAGE - (hot + size)} bytes left on its page")
    ok = (hot + size - 1) // PAGE == page and bss // PAGE == page
    print("PASS" if ok else "FAIL: pp_hot does not sit on the page of the start of .bss")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
