#!/usr/bin/env python3
"""Fake dd, cat, head, sha1sum and wc for testing ppipe-compare's pipelines
of real programs without timing anything.

Usage: fake-coreutils.py PROGRAM ARGS... (the test puts a wrapper named
after each program first on PATH). Each moves real bytes, as much of the
real program's command line as the pipelines use: dd if= of= bs= count=
(K and M suffixes; its statistics on stderr as GNU dd prints them in the C
locale), cat from stdin, head -c BYTES FILE, sha1sum and wc -c of stdin.

Test hooks (environment), effective only with LD_PRELOAD set:
  FAKE_COREUTILS_LOSE=WHO   a first stage, WHO (the bs= of a dd with if=,
                            or head), writes 4096 bytes fewer than asked;
                            dd still reports them all
  FAKE_COREUTILS_NOISE=TEXT every program prints TEXT on stderr
  FAKE_COREUTILS_LOG=FILE   appends one JSON line per program: its name,
                            arguments, LD_PRELOAD and LC_ALL (always)
PPIPE_* variables without LD_PRELOAD are an environment error (exit 3), as
in the other fakes.
"""

import hashlib
import json
import os
import sys

SUFFIX = {"": 1, "k": 1024, "K": 1024, "M": 1 << 20}


def fail(name, status, message):
    """One-line error and exit."""
    sys.stderr.write(f"{name}: {message}\n")
    sys.exit(status)


def write_all(fd, data):
    """os.write until all of data is out."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def blocks(fd, size):
    """The reads of fd in calls of size bytes, up to EOF."""
    while True:
        data = os.read(fd, size)
        if not data:
            return
        yield data


def number(name, text):
    """dd's and head's sizes: digits with an optional k, K or M."""
    suffix = text[-1:] if text[-1:] in ("k", "K", "M") else ""
    digits = text[:len(text) - len(suffix)]
    if not digits.isdigit():
        fail(name, 1, f"invalid number: '{text}'")
    return int(digits) * SUFFIX[suffix]


def lose(who):
    """Bytes the first stage who holds back under FAKE_COREUTILS_LOSE."""
    return 4096 if os.environ.get("LD_PRELOAD") \
        and os.environ.get("FAKE_COREUTILS_LOSE") == who else 0


def dd(args):
    """dd if= of= bs= count=: copies, then prints its statistics."""
    opts = dict(a.split("=", 1) for a in args)
    bs = number("dd", opts.get("bs", "512"))
    count = number("dd", opts["count"]) if "count" in opts else None
    src = os.open(opts["if"], os.O_RDONLY) if "if" in opts else 0
    dst = os.open(opts["of"], os.O_WRONLY) if "of" in opts else 1
    full = partial = total = 0
    held = lose(opts.get("bs", "512")) if "if" in opts else 0
    while count is None or full + partial < count:
        data = os.read(src, bs)
        if not data:
            break
        full, partial = (full + 1, partial) if len(data) == bs \
            else (full, partial + 1)
        total += len(data)
        write_all(dst, data[:max(0, len(data) - held)])
        held = max(0, held - len(data))
    records = f"{full}+{partial} records"
    sys.stderr.write(f"{records} in\n{records} out\n{total} bytes "
                     f"({total / 1e6:.1f} MB, {total / (1 << 20):.1f} MiB) "
                     "copied, 0.1 s, 1.0 GB/s\n")


def head(args):
    """head -c BYTES FILE."""
    if len(args) != 3 or args[0] != "-c":
        fail("head", 1, f"unexpected arguments {args}")
    left = number("head", args[1]) - lose("head")
    src = os.open(args[2], os.O_RDONLY)
    while left > 0:
        data = os.read(src, min(4096, left))
        write_all(1, data)
        left -= len(data)


def main():
    """Play the program named by the first argument."""
    name, args = sys.argv[1], sys.argv[2:]
    path = os.environ.get("FAKE_COREUTILS_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"program": name, "argv": args,
                                "ld_preload": os.environ.get("LD_PRELOAD"),
                                "lc_all": os.environ.get("LC_ALL")}) + "\n")
    if not os.environ.get("LD_PRELOAD") \
            and any(k.startswith("PPIPE_") for k in os.environ):
        fail(name, 3, "PPIPE_* variables set without LD_PRELOAD")
    noise = os.environ.get("FAKE_COREUTILS_NOISE")
    if noise and os.environ.get("LD_PRELOAD"):
        sys.stderr.write(noise + "\n")
    if name == "dd":
        dd(args)
    elif name == "head":
        head(args)
    elif name == "cat" and not args:
        for data in blocks(0, 131072):
            write_all(1, data)
    elif name == "sha1sum" and not args:
        digest = hashlib.sha1()
        for data in blocks(0, 65536):
            digest.update(data)
        print(f"{digest.hexdigest()}  -")
    elif name == "wc" and args == ["-c"]:
        print(sum(len(data) for data in blocks(0, 65536)))
    else:
        fail(name, 1, f"not played by this fake: {name} {args}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
