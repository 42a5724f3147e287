#!/usr/bin/env python3
"""Fake dd, cat, head, sha1sum, wc, zstd, lz4, gzip and tar for testing
ppipe-compare's pipelines of real programs without timing anything.

Usage: fake-coreutils.py PROGRAM ARGS... (the test puts a wrapper named
after each program first on PATH). Each moves real bytes, as much of the
real program's command line as the pipelines use: dd if= of= bs= count=
(K and M suffixes; its statistics on stderr as GNU dd prints them in the C
locale), cat from stdin, head -c BYTES FILE, sha1sum and wc -c of stdin;
and what ppipe-compare runs on its data:
  zstd -1 -T1 -c FILE, lz4 -1 -c FILE, gzip -1 -c FILE
      "compress": write a header naming the tool, then FILE as it is
  zstd -dc FILE, lz4 -dc FILE, gzip -dc FILE
      decompress: check the tool's header and write the rest, 64 KiB a
      write()
  tar cf - -C DIR MEMBER
      write a header with MEMBER's name and size, then its bytes, 10 KiB
      (a tar record) a write()
  tar xf - -C DIR
      extract the member tar c wrote into DIR: as many of its bytes as
      arrive; unlike tar, it refuses to write over a file that exists, so
      that the test sees DIR emptied before each run

Test hooks (environment), effective only with LD_PRELOAD set:
  FAKE_COREUTILS_LOSE=WHO   a first stage, WHO (the bs= of a dd with if=,
                            head, zstd, lz4, gzip or tar), writes 4096
                            bytes fewer than asked; dd still reports them
                            all, tar c's header still the whole size
  FAKE_COREUTILS_NOISE=TEXT every program prints TEXT on stderr
  FAKE_COREUTILS_SIGNAL=SIG the first stage of a pipeline that reads the
                            data (a decompressor, tar c) sends signal SIG
                            (TERM, INT, HUP) to the process that started
                            its sh (ppipe-compare), then goes on
  FAKE_COREUTILS_LOG=FILE   appends one JSON line per program: its name,
                            arguments, LD_PRELOAD, LC_ALL and its working
                            directory (always)
PPIPE_* variables without LD_PRELOAD are an environment error (exit 3), as
in the other fakes.
"""

import hashlib
import json
import os
import signal
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


# The fake compressors' "compressed" files: this header, then the input.
COMPRESSORS = {"zstd": ["-1", "-T1", "-c"], "lz4": ["-1", "-c"],
               "gzip": ["-1", "-c"]}


def header(name):
    """The fake compressed format's header of a tool."""
    return f"fake {name} compressed\n".encode("ascii")


def signal_runner():
    """FAKE_COREUTILS_SIGNAL: send the signal to the parent of this
    program's sh (the sh -c that runs the pipeline)."""
    sig = os.environ.get("FAKE_COREUTILS_SIGNAL")
    if not sig or not os.environ.get("LD_PRELOAD"):
        return
    with open(f"/proc/{os.getppid()}/stat", encoding="ascii") as f:
        # pid (comm) state ppid ...: comm may hold spaces.
        runner = int(f.read().rsplit(")", 1)[1].split()[1])
    os.kill(runner, getattr(signal, f"SIG{sig}"))


def compressor(name, args):
    """zstd, lz4, gzip: -dc FILE writes FILE's bytes after the tool's
    header (64 KiB a write); the compressing command line writes the
    header and FILE."""
    if args[:-1] == COMPRESSORS[name]:
        write_all(1, header(name))
        with open(args[-1], "rb") as f:
            for data in blocks(f.fileno(), 1 << 20):
                write_all(1, data)
        return
    if len(args) != 2 or args[0] != "-dc":
        fail(name, 1, f"unexpected arguments {args}")
    signal_runner()
    with open(args[1], "rb", buffering=0) as f:
        if f.read(len(header(name))) != header(name):
            fail(name, 1, f"{args[1]}: not in {name} format")
        held = lose(name)
        for data in blocks(f.fileno(), 65536):
            keep = max(0, len(data) - held)
            held -= len(data) - keep
            write_all(1, data[:keep])


def tar(args):
    """tar cf - -C DIR MEMBER, tar xf - -C DIR: a header line, "fake tar
    NAME SIZE", then the member's bytes."""
    if len(args) == 5 and args[:3] == ["cf", "-", "-C"]:
        signal_runner()
        path = os.path.join(args[3], args[4])
        size = os.path.getsize(path)
        write_all(1, f"fake tar {args[4]} {size}\n".encode())
        held = lose("tar")
        with open(path, "rb") as f:
            for data in blocks(f.fileno(), 10240):
                keep = max(0, len(data) - held)
                held -= len(data) - keep
                write_all(1, data[:keep])
    elif len(args) == 4 and args[:3] == ["xf", "-", "-C"]:
        line = b""
        while not line.endswith(b"\n"):
            byte = os.read(0, 1)
            if not byte:
                fail("tar", 2, "This does not look like a tar archive")
            line += byte
        words = line.decode().split()
        if len(words) != 4 or words[:2] != ["fake", "tar"]:
            fail("tar", 2, "This does not look like a tar archive")
        path = os.path.join(args[3], words[2])
        try:
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as exc:
            fail("tar", 2, f"{path}: Cannot open: {exc.strerror}")
        left = int(words[3])
        for data in blocks(0, 65536):
            write_all(out, data[:left])
            left -= min(left, len(data))
        os.close(out)
    else:
        fail("tar", 2, f"unexpected arguments {args}")


def main():
    """Play the program named by the first argument."""
    name, args = sys.argv[1], sys.argv[2:]
    path = os.environ.get("FAKE_COREUTILS_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"program": name, "argv": args,
                                "ld_preload": os.environ.get("LD_PRELOAD"),
                                "lc_all": os.environ.get("LC_ALL"),
                                "cwd": os.getcwd()}) + "\n")
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
    elif name in COMPRESSORS:
        compressor(name, args)
    elif name == "tar":
        tar(args)
    else:
        fail(name, 1, f"not played by this fake: {name} {args}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
