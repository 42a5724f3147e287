#!/usr/bin/env python3
"""ppipe-soak: one long-lived, preloaded process tree through the shapes a fleet runs.

usage: ppipe-soak [--duration 30m] [--interval 60s] [--seed N] [--jobs N]
                  [--lib PATH] [--system-preload] [--json FILE] [--shapes LIST]

This process becomes the long-lived process of a tree that runs libppipe: it
runs itself again with LD_PRELOAD=--lib (with --system-preload: in a private
mount namespace whose /etc/ld.so.preload names the library, no LD_PRELOAD).
For --duration it keeps --jobs shapes in flight, each drawn at random (seeded)
from a shuffled deck: shell pipelines of exec'd programs, fork pipes,
posix_spawn and subprocess writers and readers, threads writing one pipe,
static, setuid and splicing readers, writers killed by SIGKILL mid-write, exec
storms, close_range before exec, pipe ends passed over a Unix socket. Every
byte every reader gets is checked (exactly, or, for a writer killed on purpose,
as an exact prefix of what it was writing).

Every --interval it lets the shapes in flight finish, then prints one line:
shapes run, MiB checked, the share of large-write bytes that libppipe
accelerated, the pipe registry's occupancy, the tree's ring memory and this
process's RSS. At the end it judges the run against the soak's acceptance
criteria. The manual: tests/bench/README.md, "Soak runs: ppipe-soak".

Exit status: 0 every byte arrived and every criterion held; 1 a byte was lost
or altered, or a shape failed unexpectedly (an error, a hang); 2 bad
arguments; 3 the environment lacks something (the library does not load, not
root for --system-preload); 4 every byte arrived, but the share, the RSS or
the ring memory left its bound.
"""

import argparse
import ctypes
import fcntl
import gc
import hashlib
import json
import math
import os
import pwd
import queue
import random
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

PROG = "ppipe-soak"
VERSION = "@VERSION@"
DEFAULT_LIB = "@DEFAULT_LIB@"
STAGE = "@STAGE@"
HELPER = "@HELPER@"
STATIC_COPY = "@STATIC_COPY@"
STREAM_LIB = "@STREAM_LIB@"
PYDIR = "@PYDIR@"

# The variable that tells the second run of this script (the tree's
# long-lived process) where its private directory is.
INNER_VAR = "LIBPPIPE_SOAK_WORK"

MIB = 1 << 20
MIN_WRITE = 16384           # libppipe's PPIPE_MIN_WRITE, unless the environment sets it
CHUNK = 1 << 20             # bytes per read()
PERIOD = 257 * 4096         # the stage stream's period (pattern.h)
PATTERN_EXTRA = 2 * MIB + 4096
MAGIC = b"ppipe-stage-end\0"
MARKER = struct.Struct("=16s8Q")    # ppipe-stage's end marker (stage.c)
MARK = MARKER.size
RING_NAME = "[anon:libppipe-ring]"
DATA_SIZE = 32 * MIB        # the file dd reads
SHARE_POINTS = 5.0          # acceptance: the share stays within this of the baseline's
GROWTH = 1.10               # acceptance: RSS and ring memory at most this times the baseline's
RING_FLOOR = 256 << 10      # ... or this much more ring memory, whichever is more
MAXFD = 1 << 30
MAX_THREADS = 4             # writer threads of one shape_threads


class Fatal(Exception):
    """A one-line error: message and exit status."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


def configured(value):
    """A configure_file() value, or "" if it was never substituted."""
    if len(value) > 1 and value.startswith("@") and value.endswith("@"):
        return ""
    return value


def version():
    return configured(VERSION) or "unconfigured"


# ------------------------------------------------------------ command line


def parse_duration(text):
    """Seconds from '90', '90s', '30m', '1.5h', '500ms'."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"'{text}' is not a duration like 60s, 30m or 1h")
    value = float(m.group(1)) * {"ms": 0.001, "s": 1, None: 1, "m": 60, "min": 60,
                                 "h": 3600}[m.group(2)]
    if value <= 0:
        raise argparse.ArgumentTypeError(f"'{text}': the duration must be above zero")
    return value


def parse_duration_or_zero(text):
    return 0.0 if text.strip() in ("0", "0s") else parse_duration(text)


def parse_size(text):
    """Bytes from libppipe's size syntax (16k, 1M, 4096B)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(?:i?[bB])?\s*", text or "")
    if not m:
        return None
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


def positive_int(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive whole number")
    return n


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A long run of one preloaded process tree through the shapes a fleet "
                    "runs, every byte checked; one line per interval, a verdict at the end.",
        epilog="shapes: " + ", ".join(SHAPE_NAMES) + "\nExit status: 0 pass; 1 a byte was "
               "lost or altered, or a shape failed; 2 bad arguments; 3 the environment lacks "
               "something; 4 bytes intact, but the share, RSS or ring memory left its bound.")
    p.add_argument("--duration", type=parse_duration, default=1800.0,
                   help="how long to run, e.g. 60s, 30m, 2h (30m)")
    p.add_argument("--interval", type=parse_duration, default=60.0,
                   help="the report period (60s)")
    p.add_argument("--seed", type=int, default=None,
                   help="the seed of every random choice (default: a new one, printed)")
    p.add_argument("--jobs", type=positive_int, default=None,
                   help="shapes in flight at once (default: the CPUs this process may use)")
    p.add_argument("--lib", default=None,
                   help="the library (default: the build's or installed libppipe.so)")
    p.add_argument("--system-preload", action="store_true",
                   help="run the tree in a private mount namespace whose /etc/ld.so.preload "
                        "names the library, instead of LD_PRELOAD (root)")
    p.add_argument("--json", metavar="FILE", default=None,
                   help="write every interval and the verdict to FILE (- for stdout), "
                        "rewritten after each interval")
    p.add_argument("--shapes", default=None,
                   help="a comma list of the shapes to run (default: all that can run here)")
    p.add_argument("--baseline", type=positive_int, default=1,
                   help="the interval the others are judged against (1); later ones only")
    p.add_argument("--warmup", type=parse_duration_or_zero, default=10.0,
                   help="shapes run this long before the first interval, and at least one "
                        "whole deck (every shape once), checked but not reported (10s; "
                        "0: none)")
    p.add_argument("--job-timeout", type=parse_duration, default=120.0,
                   help="a shape still running after this long has hung: its processes are "
                        "killed and it fails (120s)")
    p.add_argument("--stage", default=None, help="the ppipe-stage program")
    p.add_argument("--helper", default=None, help="the ppipe-soak-helper program")
    p.add_argument("--static-copy", default=None, help="a statically linked stdin-to-stdout copier")
    p.add_argument("--stream-lib", default=None, help="the ppipe-soak-stream module (ctypes)")
    p.add_argument("--version", action="version", version=f"{PROG} {version()}")
    args = p.parse_args(argv)
    if args.interval > args.duration:
        args.interval = args.duration
    if args.shapes:
        names = [s.strip() for s in args.shapes.split(",") if s.strip()]
        unknown = [s for s in names if s not in SHAPE_NAMES]
        if unknown or not names:
            p.error(f"--shapes: unknown shape(s) {', '.join(unknown) or '(none)'}; the shapes: "
                    + ", ".join(SHAPE_NAMES))
        args.shapes = names
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    if args.jobs is None:
        args.jobs = max(1, len(os.sched_getaffinity(0)))
    return args


def is_executable(path):
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def resolve(arg, option, name, configured_path, required=True, test=is_executable):
    """A program or file of the harness: the option's, the configured one,
    the one beside this script, or (programs) the one on PATH."""
    if arg is not None:
        if not test(arg):
            raise Fatal(f"{PROG}: {option} {arg}: not usable", 2)
        return os.path.abspath(arg)
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (configured(configured_path), os.path.join(here, name),
                 shutil.which(name) if test is is_executable else None):
        if path and test(path):
            return os.path.abspath(path)
    if required:
        raise Fatal(f"{PROG}: {name} not found: use {option} PATH", 3)
    return None


def resolve_all(args):
    """The programs and files the tree needs, as absolute paths."""
    lib = args.lib or configured(DEFAULT_LIB)
    if not lib or not os.path.isfile(lib):
        raise Fatal(f"{PROG}: the library {lib or '(none configured)'} does not exist: "
                    f"use --lib PATH", 3)
    return {
        "lib": os.path.abspath(lib),
        "stage": resolve(args.stage, "--stage", "ppipe-stage", STAGE),
        "helper": resolve(args.helper, "--helper", "ppipe-soak-helper", HELPER),
        "static": resolve(args.static_copy, "--static-copy", "ppipe-static-copy", STATIC_COPY,
                          required=False),
        "stream_lib": resolve(args.stream_lib, "--stream-lib", "libppipe-soak-stream.so",
                              STREAM_LIB, test=os.path.isfile),
    }


# ------------------------------------------------------- the outer process


def import_syspreload():
    """The module that sets up the /etc/ld.so.preload namespace (and finds a
    directory for the setuid reader), from where meson put it or beside this
    script."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (configured(PYDIR), here):
        if d and os.path.isfile(os.path.join(d, "syspreload.py")):
            sys.path.insert(0, d)
            break
    try:
        import syspreload
    except ImportError:
        raise Fatal(f"{PROG}: syspreload.py (installed with ppipe-soak) was not found", 3)
    return syspreload


def outer(args, argv):
    """Makes the private directory, runs the tree's long-lived process (this
    script again) preloaded, forwards signals to it, cleans up after it."""
    paths = resolve_all(args)
    sp = import_syspreload()
    if args.system_preload:
        if os.geteuid() != 0:
            raise Fatal(f"{PROG}: --system-preload needs root (a mount namespace)", 3)
        missing = sp.missing_tools()
        if missing:
            raise Fatal(f"{PROG}: --system-preload needs {', '.join(missing)}", 3)
    # Where setuid is honoured and the user nobody can reach: the setuid
    # reader runs from there.
    root, _ = sp.work_root([tempfile.gettempdir(), "/var/tmp"])
    work = tempfile.mkdtemp(prefix="ppipe-soak.", dir=root or tempfile.gettempdir())
    status = 1
    try:
        os.chmod(work, 0o755)
        os.mkdir(os.path.join(work, "stats"))
        env = {k: v for k, v in os.environ.items()
               if k not in ("LD_PRELOAD", "PPIPE_STATS", "PPIPE_REGISTRY", INNER_VAR)}
        env["PPIPE_STATS"] = os.path.join(work, "stats", "%p.json")
        env[INNER_VAR] = work
        cmd = [sys.executable, os.path.abspath(__file__)] + list(argv)
        before = sp.preload_state()
        if args.system_preload:
            try:
                ns = sp.prepare(work, paths["lib"], plain=False)
            except sp.SetupError as exc:
                raise Fatal(f"{PROG}: {exc}", 3)
            for note in ns.notes:
                print(f"{PROG}: note: {note}", file=sys.stderr)
            env["LIBPPIPE_SOAK_PRELOADED"] = ns.lib
            cmd = sp.in_ns(ns.etc, cmd)
        else:
            env["LD_PRELOAD"] = paths["lib"]
        status = run_inner(cmd, env)
        if sp.preload_state() != before:
            print(f"{PROG}: FAIL: the host's /etc/ld.so.preload changed during the run",
                  file=sys.stderr)
            status = 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return status


def run_inner(cmd, env):
    """Runs the long-lived process and returns its exit status; SIGINT and
    SIGTERM go on to it, which then ends its interval and judges the run."""
    # A session of its own: a terminal's ^C reaches this process only, which
    # passes it on to the long-lived process, not to the shapes' processes.
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)

    def forward(signum, frame):
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                rc = proc.wait()
                break
            except InterruptedError:
                continue
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return rc if rc >= 0 else 128 - rc


# ------------------------------------------------- libppipe and the stream


class PpipeStats(ctypes.Structure):
    """struct ppipe_stats of include/ppipe.h, version 3."""
    _fields_ = [("size", ctypes.c_size_t), ("version", ctypes.c_uint32)] + [
        (name, ctypes.c_uint64) for name in (
            "writes_accelerated", "bytes_accelerated", "writes_passthrough",
            "bytes_passthrough", "fallbacks", "pool_bytes", "pool_peak",
            "pool_trimmed_bytes", "pressure_episodes", "registry_slots",
            "registry_slots_max", "registry_records", "registry_records_max",
            "registry_reclaimed", "registry_full")]


class Library:
    """libppipe as loaded in this process (preloaded: its symbols are global)."""

    def __init__(self):
        self.dl = ctypes.CDLL(None)
        # Another preload (a control library, a corrupting one for a
        # self-test) has no counters: they read as 0.
        self.get = getattr(self.dl, "ppipe_stats_get", None)
        if self.get:
            self.get.argtypes = [ctypes.POINTER(PpipeStats)]
            self.get.restype = ctypes.c_int
        self.memcmp = self.dl.memcmp
        self.memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        self.memcmp.restype = ctypes.c_int

    def stats(self):
        s = PpipeStats()
        s.size = ctypes.sizeof(PpipeStats)
        if not self.get:
            return {name: 0 for name, _ in PpipeStats._fields_}
        if self.get(ctypes.byref(s)) != 0:
            raise Fatal(f"{PROG}: ppipe_stats_get failed", 3)
        out = {name: getattr(s, name) for name, _ in PpipeStats._fields_}
        if s.version < 3:       # no registry fields: an older library
            for name in out:
                if name.startswith("registry_"):
                    out[name] = 0
        return out


class Buf:
    """A reusable buffer with a fixed address (reads land here, memcmp reads
    it), every page touched at once so that it is resident from the start."""

    def __init__(self, size=CHUNK):
        self.array = (ctypes.c_ubyte * size)()
        self.addr = ctypes.addressof(self.array)
        ctypes.memset(self.addr, 0x5a, size)
        self.view = memoryview(self.array).cast("B")


class BufPool:
    """Buffers made up front, as many as the shapes in flight can use at
    once: a pool that grew with the peak concurrency would show as growth of
    this process's RSS, whenever in the run that peak came."""

    def __init__(self, count):
        self.lock = threading.Lock()
        self.free = [Buf() for _ in range(count)]

    def get(self):
        with self.lock:
            return self.free.pop() if self.free else Buf()

    def put(self, buf):
        with self.lock:
            self.free.append(buf)


class Stream:
    """The two streams: ppipe-stage's pattern (one writer) and the per-byte
    tagged stream of several writers (stream.h), from the ctypes module."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.pattern_fill.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.lib.pattern_fill.restype = None
        self.lib.stream_fill.argtypes = [ctypes.c_uint, ctypes.c_uint64, ctypes.c_void_p,
                                         ctypes.c_size_t]
        self.lib.stream_fill.restype = None
        n = PERIOD + PATTERN_EXTRA
        self.pattern = (ctypes.c_ubyte * n)()
        self.lib.pattern_fill(self.pattern, n)
        self.addr = ctypes.addressof(self.pattern)
        self.view = memoryview(self.pattern).cast("B")

    def tagged(self, writer, pos, buf, n):
        self.lib.stream_fill(writer, pos, buf.addr, n)


# ------------------------------------------------------------- checking


class PatternCheck:
    """Checks that what a reader got is the stage stream from offset 0.

    With marker, the stream ends with ppipe-stage's end marker (the last MARK
    bytes are held back until more data follows them). finish() says whether
    the whole stream arrived; a stream cut short (its writer killed on
    purpose) must still be an exact prefix."""

    def __init__(self, env, marker):
        self.env, self.marker = env, marker
        self.pos = 0            # stream bytes checked
        self.received = 0
        self.held = b""
        self.error = None

    def _check(self, src, n):
        """src: an address or bytes (n of them) that follow self.pos."""
        o = self.pos % PERIOD
        if self.env.lib.memcmp(src, self.env.stream.addr + o, n) == 0:
            self.pos += n
            return True
        got = src if isinstance(src, bytes) else ctypes.string_at(src, n)
        want = bytes(self.env.stream.view[o:o + n])
        i = next(j for j in range(n) if got[j] != want[j])
        self.error = (f"stream offset {self.pos + i}: expected 0x{want[i]:02x}, got "
                      f"0x{got[i]:02x} (a lost, repeated or altered piece)")
        self.pos += i
        return False

    def feed(self, buf, n):
        self.received += n
        if self.error:
            return
        if not self.marker:
            self._check(buf.addr, n)
            return
        h = len(self.held)
        k = h + n - MARK          # bytes now known to be stream bytes
        if k <= 0:
            self.held += bytes(buf.view[:n])
        elif k <= h:
            if self._check(self.held[:k], k):
                self.held = self.held[k:] + bytes(buf.view[:n])
        elif (not h or self._check(self.held, h)) and self._check(buf.addr, k - h):
            self.held = bytes(buf.view[k - h:n])

    def finish(self, expect, cut_ok=False):
        """(complete, error): complete when all expect bytes (and the marker)
        arrived; else, with cut_ok, what arrived is an exact prefix."""
        if self.error:
            return False, self.error
        if self.marker and len(self.held) == MARK and self.held.startswith(MAGIC):
            count = MARKER.unpack(self.held)[1]
            if count == self.pos == expect:
                return True, None
            return False, (f"the end marker says {count} bytes, {self.pos} arrived "
                           f"({expect} written)")
        if not self.marker and self.pos == expect:
            return True, None
        if not cut_ok:
            return False, (f"the stream ended after {self.received} of {expect} bytes"
                           + (" without its end marker" if self.marker else ""))
        held = self.held
        if held:
            # A prefix of the stream, then perhaps a prefix of the marker.
            o = self.pos % PERIOD
            want = bytes(self.env.stream.view[o:o + len(held)])
            i = 0
            while i < len(held) and held[i] == want[i]:
                i += 1
            self.pos += i
            if held[i:] and not MAGIC.startswith(held[i:i + len(MAGIC)]):
                self.error = (f"stream offset {self.pos}: got 0x{held[i]:02x}, neither the "
                              f"stream's byte nor the end marker")
                return False, self.error
        if self.pos > expect:
            return False, f"{self.pos} bytes arrived, but only {expect} were written"
        return False, None


def marker(count, writes):
    return MARKER.pack(MAGIC, count, writes, 0, 0, 0, 0, 0, 0)


def read_all(env, fd, check, progress=None):
    """Reads fd to EOF into check; closes fd. progress(received) after each read."""
    buf = env.bufs.get()
    try:
        while True:
            try:
                n = os.readv(fd, [buf.array])
            except InterruptedError:
                continue
            if n == 0:
                return check.received
            check.feed(buf, n)
            if progress:
                progress(check.received)
    finally:
        env.bufs.put(buf)
        os.close(fd)


def write_pattern(env, fd, sizes, progress=None):
    """Writes the stage stream in writes of sizes. Returns (bytes, broken):
    broken when the readers went away (EPIPE)."""
    pos = 0
    try:
        for size in sizes:
            left = size
            while left:
                o = pos % PERIOD
                try:
                    n = os.write(fd, env.stream.view[o:o + left])
                except InterruptedError:
                    continue
                pos += n
                left -= n
            if progress:
                progress(pos)
    except BrokenPipeError:
        return pos, True
    return pos, False


def write_stage_stream(env, fd, sizes):
    """The stage stream with its end marker, as ppipe-stage produce writes
    it; closes fd. Returns (bytes, broken)."""
    try:
        n, broken = write_pattern(env, fd, sizes)
        if not broken:
            try:
                os.write(fd, marker(n, len(sizes)))
            except BrokenPipeError:
                broken = True
        return n, broken
    finally:
        os.close(fd)


# What a process that runs libppipe and ends normally (so that it reports)
# wrote into pipes, split at MIN_WRITE: (small, large) bytes. The shapes
# add these to their job's ledger (Job.wrote).


def split_sizes(sizes, written=None):
    """Write calls of these sizes, the first written bytes of them (all)."""
    small = large = 0
    left = sum(sizes) if written is None else written
    for size in sizes:
        n = min(size, left)
        if size < MIN_WRITE:
            small += n
        else:
            large += n
        left -= n
        if not left:
            break
    return small, large


def produce_split(size, nbytes):
    """ppipe-stage produce -s size -b nbytes: its stream, then the end marker."""
    rest = nbytes % size
    small = nbytes if size < MIN_WRITE else (rest if rest < MIN_WRITE else 0)
    return small + MARK, nbytes - small


def relay_split(size, nbytes):
    """ppipe-stage relay -s size of a stream of nbytes and its marker (full blocks)."""
    total = nbytes + MARK
    rest = total % size
    small = total if size < MIN_WRITE else (rest if rest < MIN_WRITE else 0)
    return small, total - small


def stage_stream_split(sizes):
    """This process's write_stage_stream(sizes): the stream, then the marker."""
    small, large = split_sizes(sizes)
    return small + MARK, large


# ----------------------------------------------------------- the shapes' tools


def write_sizes(rng, total):
    """Mostly large writes (64 KiB to 1 MiB), some of 16 to 64 KiB, some small."""
    sizes, left = [], total
    while left > 0:
        r = rng.random()
        if r < 0.05:
            s = rng.randint(1, MIN_WRITE - 1)
        elif r < 0.12:
            s = rng.randint(MIN_WRITE, 65535)
        else:
            s = int(2 ** rng.uniform(16, 20))
        s = min(s, left)
        sizes.append(s)
        left -= s
    return sizes


def stage_size(rng):
    """ppipe-stage's -s: mostly 64 KiB to 1 MiB, some 16 and 32 KiB, a few small."""
    r = rng.random()
    if r < 0.05:
        return 4096
    if r < 0.15:
        return rng.choice((16384, 32768))
    return rng.choice((65536, 131072, 262144, 524288, 1048576))


def volume(rng):
    """Bytes one shape moves."""
    return rng.randint(4 * MIB, 20 * MIB)


def maybe_resize(rng, fd):
    """A third of the pipes get 1 MiB (rings of 2 MiB), the others the kernel's 64 KiB."""
    if rng.random() < 0.33:
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, MIB)
        except OSError:
            pass


class Task:
    """A function run by a helper thread; join() returns its result or raises."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args
        self.result = self.exc = None
        self.done = threading.Event()

    def run(self):
        try:
            self.result = self.fn(*self.args)
        except BaseException as exc:  # raised again in join()
            self.exc = exc
        finally:
            self.done.set()

    def join(self):
        self.done.wait()
        if self.exc:
            raise self.exc
        return self.result


class Helpers:
    """A fixed set of threads for the parts of shapes that run beside the
    job's own thread (writer threads, a reader during a storm). Started up
    front for the same reason as BufPool: a thread per task leaves stacks and
    malloc arenas behind that grow with the peak concurrency."""

    def __init__(self, count):
        self.tasks = queue.SimpleQueue()
        for _ in range(count):
            threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            self.tasks.get().run()

    def submit(self, fn, *args):
        task = Task(fn, args)
        self.tasks.put(task)
        return task


def close_all_but(keep):
    """In a child: closes every fd above 2 but those in keep, with
    close_range() (os.closerange), as Python's close_fds does."""
    lo = 3
    for fd in sorted(f for f in keep if f >= 3):
        if fd > lo:
            os.closerange(lo, fd)
        lo = fd + 1
    os.closerange(lo, MAXFD)


def child_say(fd, text):
    """A fork child's message, into a job file (never through sys.stderr, whose
    lock another thread may have held at the fork)."""
    try:
        os.write(fd, (text.rstrip("\n") + "\n").encode(errors="replace"))
    except OSError:
        pass


def status_text(st):
    if os.WIFSIGNALED(st):
        return f"killed by {signal.Signals(os.WTERMSIG(st)).name}"
    return f"exit status {os.waitstatus_to_exitcode(st)}"


class Job:
    """One shape's run: its processes (killed if it hangs), files, outcome."""

    def __init__(self, env, index, shape):
        self.env, self.index, self.shape = env, index, shape
        self.rng = random.Random(f"{env.seed}/{index}")
        self.variant = ""
        self.deadline = time.monotonic() + env.job_timeout
        self.lock = threading.Lock()
        self.pids = set()       # reaped by waitpid()
        self.popens = set()
        self.groups = set()     # process groups (sh pipelines)
        self.files = []
        self.timed_out = False
        self.verified = 0       # bytes the readers checked
        # Bytes written into pipes by the shape's processes that run libppipe
        # and report (they end normally), in calls below MIN_WRITE and not.
        self.small = self.large = 0
        self.killed = 0         # processes killed on purpose
        self.failures = []      # unexpected failures (other than data)
        self.data_errors = []   # (message, bytes lost)

    # processes

    def track(self, pid=None, popen=None, group=False):
        with self.lock:
            if pid:
                self.pids.add(pid)
            if popen:
                self.popens.add(popen)
                pid = popen.pid
            if group:
                self.groups.add(pid)

    def _ended(self, pid):
        """Waits until pid has ended, without reaping it, then stops tracking
        it: the watchdog never signals a pid that may have been used again."""
        while True:
            try:
                os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break
        with self.lock:
            self.pids.discard(pid)
            self.groups.discard(pid)

    @staticmethod
    def running(pid):
        """Whether pid (a child not reaped yet) still runs; it is not reaped."""
        try:
            return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None
        except ChildProcessError:
            return False

    def wait(self, pid):
        """waitpid(pid): its status."""
        self._ended(pid)
        while True:
            try:
                return os.waitpid(pid, 0)[1]
            except InterruptedError:
                continue

    def pwait(self, p):
        self._ended(p.pid)
        with self.lock:
            self.popens.discard(p)
        return p.wait()

    def fork(self, fn, keep=None, err=None):
        """fn() in a fork child, which first closes every fd but keep (None:
        it keeps them all, fn closes what it wants) and ends with os._exit:
        fn's return value, 0 for None, 70 for an exception (said into err)."""
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                if keep is not None:
                    close_all_but(list(keep) + ([err] if err is not None else []))
                code = fn() or 0
            except BaseException:
                if err is not None:
                    child_say(err, traceback.format_exc(limit=3))
            finally:
                os._exit(code)
        self.track(pid)
        return pid

    def popen(self, argv, group=False, **kw):
        p = subprocess.Popen(argv, start_new_session=group, **kw)
        self.track(popen=p, group=group)
        return p

    def spawn(self, path, argv, actions, **kw):
        pid = os.posix_spawn(path, argv, os.environ, file_actions=actions,
                             setsigdef=(signal.SIGPIPE,), **kw)
        self.track(pid)
        return pid

    def expire(self):
        """The job hung: kills everything it started."""
        self.timed_out = True
        self.kill_all()

    def kill_all(self):
        with self.lock:
            groups, pids = list(self.groups), list(self.pids) + [p.pid for p in self.popens]
        for g in groups:
            try:
                os.killpg(g, signal.SIGKILL)
            except OSError:
                pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def cleanup(self):
        """Reaps what is left (after an exception), closes and removes the files."""
        if self.pids or self.popens:
            self.kill_all()
            for pid in list(self.pids):
                self.wait(pid)
            for p in list(self.popens):
                self.pwait(p)
        for fd, path in self.files:
            os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
        self.files = []

    # files for children's output

    def file(self):
        path = os.path.join(self.env.jobs_dir, f"{self.index}.{len(self.files)}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        self.files.append((fd, path))
        return fd

    def text(self, fd, limit=2000):
        return os.pread(fd, limit, 0).decode(errors="replace").strip()

    # outcomes

    def wrote(self, split, times=1):
        self.small += split[0] * times
        self.large += split[1] * times

    def fail(self, what):
        self.failures.append(what)

    def lost(self, what, nbytes):
        self.data_errors.append((what, nbytes))

    def outcome(self):
        return {"index": self.index, "shape": self.shape, "variant": self.variant,
                "verified": self.verified, "killed": self.killed,
                "failures": self.failures,
                "data_errors": [m for m, _ in self.data_errors],
                "bytes_lost": sum(n for _, n in self.data_errors),
                "timed_out": self.timed_out}


def q(path):
    return shlex.quote(path)


def sh(job, cmd):
    """sh -c cmd in a session of its own: (exit status, stdout, stderr)."""
    out, err = job.file(), job.file()
    p = job.popen(["sh", "-c", cmd], group=True, stdin=subprocess.DEVNULL, stdout=out,
                  stderr=err)
    rc = job.pwait(p)
    return rc, job.text(out), job.text(err)


def consumed(out):
    """The byte count in ppipe-stage consume's JSON line, or None."""
    for line in out.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("verified") is True:
            return obj.get("bytes")
    return None


CUT_MESSAGES = ("without the producer's end marker",
                "does not end with the producer's end marker")


def judge_consumer(job, rc, out, err, nbytes, what, may_be_cut=False):
    """A ppipe-stage consume that read nbytes: exit 0 and its count, or a
    cut stream (may_be_cut). Returns True when it got all the bytes."""
    got = consumed(out) if rc == 0 else None
    if got == nbytes:
        job.verified += nbytes
        return True
    if "verification failed" in err:
        job.lost(f"{what}: {err.splitlines()[-1]}", nbytes)
    elif may_be_cut and rc == 1 and any(m in err for m in CUT_MESSAGES):
        m = re.search(r"after (\d+) bytes", err)
        job.verified += int(m.group(1)) if m else 0
    elif rc == 0:
        job.lost(f"{what}: the consumer counted {got}, {nbytes} were written", nbytes)
    else:
        job.fail(f"{what}: exit status {rc}: {err[-600:]}")
    return False


def judge_check(job, check, nbytes, what, cut_ok=False):
    complete, error = check.finish(nbytes, cut_ok)
    if error:
        job.lost(f"{what}: {error}", max(0, nbytes - check.pos))
    else:
        job.verified += check.pos
    return complete


# ------------------------------------------------------------------ shapes


def shape_sh_stage(env, job):
    """sh -c 'produce | [relay |] consume': exec'd programs on the pipes sh makes."""
    rng = job.rng
    hops = rng.choice((1, 2))
    size, nbytes = stage_size(rng), volume(rng)
    job.variant = f"{hops} hop{'s' if hops > 1 else ''}, {size} B calls"
    st = q(env.stage)
    cmd = " | ".join([f"{st} produce -s {size} -b {nbytes}"]
                     + [f"{st} relay -s {size}"] * (hops - 1) + [f"{st} consume -s {size}"])
    rc, out, err = sh(job, cmd)
    if judge_consumer(job, rc, out, err, nbytes, "sh pipeline"):
        job.wrote(produce_split(size, nbytes))
        job.wrote(relay_split(size, nbytes), hops - 1)


def shape_sh_dd(env, job):
    """sh -c 'dd | cat [| cat] | sha256sum' against the known digest."""
    rng = job.rng
    bs = rng.choice((65536, 131072, 262144, MIB))
    count = rng.randint(max(1, 4 * MIB // bs), DATA_SIZE // bs)
    cats = rng.choice((1, 2))
    job.variant = f"bs={bs}, {cats} cat"
    cmd = (f"dd if={q(env.data_path)} bs={bs} count={count} status=none"
           + " | cat" * cats + " | sha256sum")
    rc, out, err = sh(job, cmd)
    want = env.digest(bs * count)
    got = out.split()[0] if out.split() else ""
    if rc == 0 and got == want:
        job.verified += bs * count
        # dd's blocks, and each cat's writes (what it read: nearly always
        # 16 KiB or more; a shorter one is counted as large here).
        job.wrote((0, bs * count), 1 + cats)
    elif rc == 0:
        job.lost(f"dd | cat | sha256sum: sha256 {got or 'none'}, want {want}", bs * count)
    else:
        job.fail(f"dd | cat | sha256sum: exit status {rc}: {err[-600:]}")


def child_writer(env, w, sizes):
    """A fork child's body: the stage stream, without marker."""
    def run():
        _, broken = write_pattern(env, w, sizes)
        return 3 if broken else 0
    return run


def child_reader(env, r, buf, nbytes, err):
    """A fork child's body: reads and checks the stage stream (no marker)."""
    def run():
        check = PatternCheck(env, marker=False)
        while True:
            try:
                n = os.readv(r, [buf.array])
            except InterruptedError:
                continue
            if not n:
                break
            check.feed(buf, n)
        complete, error = check.finish(nbytes)
        if not complete:
            child_say(err, error or "incomplete")
            return 1
        return 0
    return run


def shape_fork(env, job):
    """os.fork: a child writes; the parent or another child reads."""
    rng = job.rng
    nbytes = volume(rng)
    sizes = write_sizes(rng, nbytes)
    two = rng.random() < 0.4
    job.variant = "child -> child" if two else "child -> parent"
    r, w = os.pipe()
    maybe_resize(rng, w)
    wpid = job.fork(child_writer(env, w, sizes), keep=[w])
    os.close(w)
    if two:
        err = job.file()
        buf = env.bufs.get()
        try:
            rpid = job.fork(child_reader(env, r, buf, nbytes, err), keep=[r], err=err)
        finally:
            env.bufs.put(buf)
        os.close(r)
        rst = job.wait(rpid)
        if rst != 0:
            msg = job.text(err)
            if os.WIFEXITED(rst) and os.WEXITSTATUS(rst) == 1:
                job.lost(f"fork reader: {msg}", nbytes)
            else:
                job.fail(f"fork reader: {status_text(rst)}: {msg}")
        else:
            job.verified += nbytes
    else:
        check = PatternCheck(env, marker=False)
        read_all(env, r, check)
        judge_check(job, check, nbytes, "fork writer -> parent")
    wst = job.wait(wpid)
    if wst != 0:
        job.fail(f"fork writer: {status_text(wst)}")
    else:
        job.wrote(split_sizes(sizes))


def produce_argv(env, size, nbytes):
    return [env.stage, "produce", "-s", str(size), "-b", str(nbytes)]


def consume_argv(env, size):
    return [env.stage, "consume", "-s", str(size)]


def shape_spawn(env, job, use_popen=False):
    """An exec'd writer or reader made by posix_spawn (or subprocess.Popen,
    which vforks), this process at the other end."""
    rng = job.rng
    size, nbytes = stage_size(rng), volume(rng)
    writer = rng.random() < 0.5
    how = "subprocess" if use_popen else "posix_spawn"
    job.variant = f"{how} {'writer' if writer else 'reader'}, {size} B calls"
    r, w = os.pipe()
    maybe_resize(rng, w)
    out, err = job.file(), job.file()
    if writer:
        argv = produce_argv(env, size, nbytes)
        if use_popen:
            p = job.popen(argv, stdin=subprocess.DEVNULL, stdout=w, stderr=err)
        else:
            pid = job.spawn(argv[0], argv, [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                                            (os.POSIX_SPAWN_DUP2, w, 1),
                                            (os.POSIX_SPAWN_DUP2, err, 2)])
        os.close(w)
        check = PatternCheck(env, marker=True)
        read_all(env, r, check)
        st = job.pwait(p) if use_popen else os.waitstatus_to_exitcode(job.wait(pid))
        if st != 0:
            job.fail(f"{how} ppipe-stage produce: exit status {st}: {job.text(err)}")
        elif judge_check(job, check, nbytes, f"{how} writer -> this process"):
            job.wrote(produce_split(size, nbytes))
    else:
        argv = consume_argv(env, size)
        if use_popen:
            p = job.popen(argv, stdin=r, stdout=out, stderr=err)
        else:
            pid = job.spawn(argv[0], argv, [(os.POSIX_SPAWN_DUP2, r, 0),
                                            (os.POSIX_SPAWN_DUP2, out, 1),
                                            (os.POSIX_SPAWN_DUP2, err, 2)])
        os.close(r)
        sizes = write_sizes(rng, nbytes)
        _, broken = write_stage_stream(env, w, sizes)
        st = job.pwait(p) if use_popen else os.waitstatus_to_exitcode(job.wait(pid))
        if judge_consumer(job, st, job.text(out), job.text(err), nbytes,
                          f"this process -> {how} reader") and not broken:
            job.wrote(stage_stream_split(sizes))


def shape_popen(env, job):
    shape_spawn(env, job, use_popen=True)


def thread_writer(env, w, writer, sizes):
    """Writes writer's tagged stream into w. Returns (bytes, broken)."""
    buf = env.tagbufs.get()
    pos = 0
    try:
        for size in sizes:
            env.stream.tagged(writer, pos, buf, size)
            done = 0
            while done < size:
                try:
                    done += os.write(w, buf.view[done:size])
                except InterruptedError:
                    continue
            pos += size
    except BrokenPipeError:
        return pos, True
    finally:
        env.tagbufs.put(buf)
    return pos, False


def shape_threads(env, job):
    """Threads of this process write one pipe at once, large writes
    interleaved; an exec'd checker takes the per-byte tagged streams apart."""
    rng = job.rng
    k = rng.randint(2, MAX_THREADS)
    per = volume(rng) // k
    job.variant = f"{k} threads"
    r, w = os.pipe()
    maybe_resize(rng, w)
    out, err = job.file(), job.file()
    p = job.popen([env.helper, "check", str(k)], stdin=r, stdout=out, stderr=err)
    os.close(r)
    sizes = [write_sizes(rng, per) for _ in range(k)]
    try:
        threads = [env.helpers.submit(thread_writer, env, w, i, sizes[i]) for i in range(k)]
        written = [t.join()[0] for t in threads]
    finally:
        os.close(w)
    rc = job.pwait(p)
    text = job.text(out)
    got = [int(x) for x in text.split()[1:]] if text.startswith("bytes") else None
    if rc == 0 and got == written:
        job.verified += sum(written)
        for s in sizes:
            job.wrote(split_sizes(s))
    elif rc == 1 and "check:" in job.text(err):
        job.lost(f"threads -> checker: {job.text(err)}", sum(written))
    elif rc == 0:
        job.lost(f"threads -> checker: the writers wrote {written}, it got {got}", sum(written))
    else:
        job.fail(f"threads -> checker: exit status {rc}: {job.text(err)}")


def shape_reader(env, job, what, reader):
    """sh -c 'produce | READER | consume': a reader libppipe must leave plain."""
    rng = job.rng
    size, nbytes = stage_size(rng), volume(rng)
    job.variant = f"{what}, {size} B calls"
    st = q(env.stage)
    rc, out, err = sh(job, f"{st} produce -s {size} -b {nbytes} | {reader} | "
                           f"{st} consume -s {size}")
    if judge_consumer(job, rc, out, err, nbytes, f"produce | {what} | consume"):
        job.wrote(produce_split(size, nbytes))


def shape_static(env, job):
    shape_reader(env, job, "static copier", q(env.static))


def shape_setuid(env, job):
    shape_reader(env, job, "setuid copier", f"{q(env.suid)} copy")


def shape_splice(env, job):
    if env.pv and job.rng.random() < 0.5:
        shape_reader(env, job, "pv -q", f"{q(env.pv)} -q")
    else:
        shape_reader(env, job, "splice reader", f"{q(env.helper)} splice")


def kill_pid(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def shape_kill(env, job):
    """A writer killed by SIGKILL in the middle of its large writes, at a
    random point of its stream: the reader must get an exact prefix."""
    rng = job.rng
    variant = rng.choice(("fork writer", "posix_spawn writer", "sh stage", "fork reader"))
    nbytes = volume(rng)
    cut = int(rng.uniform(0.05, 0.95) * nbytes)
    job.variant = variant
    if variant == "sh stage":
        return kill_sh_stage(env, job, nbytes)
    r, w = os.pipe()
    maybe_resize(rng, w)
    if variant == "fork reader":
        return kill_reader(env, job, r, w, nbytes, cut)
    err = job.file()
    size = stage_size(rng)
    if variant == "fork writer":
        sizes = write_sizes(rng, nbytes)
        pid = job.fork(child_writer(env, w, sizes), keep=[w])
    else:
        argv = produce_argv(env, size, nbytes)
        pid = job.spawn(argv[0], argv, [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                                        (os.POSIX_SPAWN_DUP2, w, 1),
                                        (os.POSIX_SPAWN_DUP2, err, 2)])
    os.close(w)
    fired = []

    def progress(received):
        if not fired and received >= cut:
            fired.append(received)
            kill_pid(pid)

    check = PatternCheck(env, marker=variant != "fork writer")
    read_all(env, r, check, progress)
    st = job.wait(pid)
    if os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGKILL and fired:
        job.killed += 1
        judge_check(job, check, nbytes, f"{variant}, killed", cut_ok=True)
    elif st == 0:
        # The stream ended before the kill came: all of it, exactly.
        if judge_check(job, check, nbytes, variant):
            job.wrote(split_sizes(sizes) if variant == "fork writer"
                      else produce_split(size, nbytes))
    else:
        job.fail(f"{variant}: {status_text(st)}: {job.text(err)}")


def kill_reader(env, job, r, w, nbytes, cut):
    """The reader (a fork child) killed mid-stream: the writer (this process)
    must see EPIPE, not hang."""
    buf = env.bufs.get()
    err = job.file()
    try:
        pid = job.fork(child_reader(env, r, buf, nbytes, err), keep=[r], err=err)
    finally:
        env.bufs.put(buf)
    os.close(r)
    sizes = write_sizes(job.rng, nbytes)
    fired = []

    def progress(pos):
        if not fired and pos >= cut:
            fired.append(pos)
            kill_pid(pid)

    try:
        written, broken = write_pattern(env, w, sizes, progress)
    finally:
        os.close(w)
    # This process's writes count whatever became of the reader.
    job.wrote(split_sizes(sizes, written))
    st = job.wait(pid)
    if os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGKILL:
        job.killed += 1
    elif st != 0:
        job.fail(f"fork reader: {status_text(st)}: {job.text(err)}")
    elif written == nbytes:
        job.verified += nbytes
    if broken and not fired:
        job.fail("this process's writes failed with EPIPE while its reader lived")


def children_of(pid):
    """The pids of pid's children."""
    path = f"/proc/{pid}/task/{pid}/children"
    try:
        with open(path) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        pass
    kids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rpartition(")")[2].split()[1]) == pid:
                        kids.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def kill_stage(sh_pid, mode):
    """SIGKILL to the child of sh_pid that runs 'ppipe-stage MODE', through a
    pidfd so that a pid used again meanwhile is never hit. True if sent."""
    for pid in children_of(sh_pid):
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rpartition(")")[2].split()[1])
            if ppid == sh_pid and len(args) > 1 and args[1] == mode.encode():
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                return True
        except (OSError, ValueError, IndexError):
            pass
        finally:
            os.close(fd)
    return False


def kill_sh_stage(env, job, nbytes):
    """sh -c 'produce | relay | consume' with produce or relay killed after a
    random delay: consume must have checked every byte it got."""
    rng = job.rng
    size = stage_size(rng)
    victim = rng.choice(("produce", "relay"))
    delay = rng.uniform(0.005, 0.25)
    job.variant = f"sh stage: {victim} killed after {delay * 1000:.0f} ms"
    st = q(env.stage)
    out, err = job.file(), job.file()
    cmd = (f"{st} produce -s {size} -b {nbytes} | {st} relay -s {size} | "
           f"{st} consume -s {size}")
    p = job.popen(["sh", "-c", cmd], group=True, stdin=subprocess.DEVNULL, stdout=out,
                  stderr=err)
    deadline = time.monotonic() + delay
    sent = False
    while job.running(p.pid) and time.monotonic() < deadline:
        time.sleep(0.002)
    if job.running(p.pid):
        sent = kill_stage(p.pid, victim)
    rc = job.pwait(p)
    complete = judge_consumer(job, rc, job.text(out), job.text(err), nbytes,
                              job.variant, may_be_cut=sent)
    if complete:
        job.wrote(produce_split(size, nbytes))
        job.wrote(relay_split(size, nbytes))
    elif sent:
        job.killed += 1
        # A killed process reports nothing. With produce killed, relay ends
        # at EOF and reports what it passed on, about what consume got; with
        # relay killed, produce dies of SIGPIPE.
        m = re.search(r"after (\d+) bytes", job.text(err))
        if victim == "produce" and m:
            got = int(m.group(1))
            job.wrote((got, 0) if size < MIN_WRITE else (0, got))


def storm_holder(env, job, rng, r, w):
    """One short exec'd program that holds ends of the pipe: a Popen'd
    /bin/true (vfork, close_range), a posix_spawn'd one, a fork + exec'd one,
    or 'timeout -s KILL' of a sleep (SIGKILL'd while it holds them)."""
    kind = rng.choice(("popen", "spawn", "fork", "timeout"))
    fds = rng.choice(((r,), (w,), (r, w)))
    if kind == "popen":
        return kind, job.popen([env.true], pass_fds=fds, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL)
    if kind == "timeout":
        return kind, job.popen(["timeout", "-s", "KILL", f"{rng.uniform(0.01, 0.1):.3f}",
                                "sleep", "5"], pass_fds=fds, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL)
    if kind == "spawn":
        acts = [(os.POSIX_SPAWN_DUP2, fd, 60 + i) for i, fd in enumerate(fds)]
        return kind, job.spawn(env.true, ["true"], acts)

    def run():
        for fd in fds:
            os.set_inheritable(fd, True)
        os.execv(env.true, ["true"])
    return kind, job.fork(run, keep=fds)


def shape_storm(env, job):
    """An exec storm: while a fork child writes to this process, a burst of
    short exec'd programs inherits the pipe's ends."""
    rng = job.rng
    nbytes = volume(rng)
    sizes = write_sizes(rng, nbytes)
    n = rng.randint(8, 32)
    job.variant = f"{n} programs"
    r, w = os.pipe()
    maybe_resize(rng, w)
    wpid = job.fork(child_writer(env, w, sizes), keep=[w])
    check = PatternCheck(env, marker=False)
    reader = env.helpers.submit(read_all, env, os.dup(r), check)
    try:
        holders = [storm_holder(env, job, rng, r, w) for _ in range(n)]
        for kind, h in holders:
            if kind in ("popen", "timeout"):
                rc = job.pwait(h)
                ok = (0, 124, 137, -signal.SIGKILL) if kind == "timeout" else (0,)
                if rc not in ok:
                    job.fail(f"storm: {kind} holder: exit status {rc}")
            else:
                st = job.wait(h)
                if st != 0:
                    job.fail(f"storm: {kind} holder: {status_text(st)}")
    finally:
        os.close(w)
        os.close(r)
    reader.join()
    judge_check(job, check, nbytes, "storm: fork writer -> this process")
    st = job.wait(wpid)
    if st != 0:
        job.fail(f"storm: fork writer: {status_text(st)}")
    else:
        job.wrote(split_sizes(sizes))


def shape_closerange(env, job):
    """A fork child closes every fd above 2 with close_range() (libppipe's
    registry among them), as Python's close_fds does, and execs a reader or
    writer of the pipe."""
    rng = job.rng
    size, nbytes = stage_size(rng), volume(rng)
    writer = rng.random() < 0.5
    job.variant = "exec'd writer" if writer else "exec'd reader"
    r, w = os.pipe()
    maybe_resize(rng, w)
    out, err = job.file(), job.file()
    argv = produce_argv(env, size, nbytes) if writer else consume_argv(env, size)

    def run():
        if writer:
            os.dup2(w, 1)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        else:
            os.dup2(r, 0)
            os.dup2(out, 1)
        os.dup2(err, 2)
        os.closerange(3, MAXFD)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.execv(argv[0], argv)

    pid = job.fork(run)
    if writer:
        os.close(w)
        check = PatternCheck(env, marker=True)
        read_all(env, r, check)
        st = job.wait(pid)
        if st != 0:
            job.fail(f"close_range + exec produce: {status_text(st)}: {job.text(err)}")
        elif judge_check(job, check, nbytes, "close_range + exec'd writer"):
            job.wrote(produce_split(size, nbytes))
    else:
        os.close(r)
        sizes = write_sizes(rng, nbytes)
        _, broken = write_stage_stream(env, w, sizes)
        st = os.waitstatus_to_exitcode(job.wait(pid))
        if judge_consumer(job, st, job.text(out), job.text(err), nbytes,
                          "close_range + exec'd reader") and not broken:
            job.wrote(stage_stream_split(sizes))


def shape_scm(env, job):
    """A pipe end passed over a Unix socket (SCM_RIGHTS) to a fork child,
    which reads from it (itself, or by exec'ing a reader) or execs a writer
    onto it."""
    rng = job.rng
    size, nbytes = stage_size(rng), volume(rng)
    variant = rng.choice(("read end, exec'd reader", "read end, forked reader",
                          "write end, exec'd writer"))
    job.variant = variant
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    r, w = os.pipe()
    maybe_resize(rng, w)
    out, err = job.file(), job.file()
    buf = env.bufs.get()

    def run():
        _, fds, _, _ = socket.recv_fds(b, 16, 1)
        if variant == "read end, forked reader":
            return child_reader(env, fds[0], buf, nbytes, err)()
        if variant == "read end, exec'd reader":
            argv = consume_argv(env, size)
            os.dup2(fds[0], 0)
            os.dup2(out, 1)
        else:
            argv = produce_argv(env, size, nbytes)
            os.dup2(fds[0], 1)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(err, 2)
        os.closerange(3, MAXFD)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.execv(argv[0], argv)

    try:
        pid = job.fork(run, keep=[b.fileno(), out], err=err)
    finally:
        env.bufs.put(buf)
        b.close()
    try:
        sent = r if variant.startswith("read end") else w
        socket.send_fds(a, [b"x"], [sent])
    finally:
        a.close()
    os.close(sent)
    if variant.startswith("write end"):
        check = PatternCheck(env, marker=True)
        read_all(env, r, check)
        st = job.wait(pid)
        if st != 0:
            job.fail(f"scm: exec'd writer: {status_text(st)}: {job.text(err)}")
        elif judge_check(job, check, nbytes, "scm: exec'd writer -> this process"):
            job.wrote(produce_split(size, nbytes))
        return
    sizes = write_sizes(rng, nbytes)
    if variant == "read end, forked reader":
        written, broken = write_pattern(env, w, sizes)
        os.close(w)
        st = job.wait(pid)
        if st == 0 and written == nbytes:
            job.verified += nbytes
            job.wrote(split_sizes(sizes))
        elif os.WIFEXITED(st) and os.WEXITSTATUS(st) == 1:
            job.lost(f"scm: forked reader: {job.text(err)}", nbytes)
        else:
            job.fail(f"scm: forked reader: {status_text(st)}: {job.text(err)}")
        return
    _, broken = write_stage_stream(env, w, sizes)
    st = os.waitstatus_to_exitcode(job.wait(pid))
    if judge_consumer(job, st, job.text(out), job.text(err), nbytes,
                      "scm: this process -> exec'd reader") and not broken:
        job.wrote(stage_stream_split(sizes))


# name, weight in a deck, function, what it is
SHAPES = [
    ("sh-stage", 3, shape_sh_stage, "sh -c 'produce | [relay |] consume' (ppipe-stage)"),
    ("sh-dd", 2, shape_sh_dd, "sh -c 'dd | cat | sha256sum', the digest known"),
    ("fork", 3, shape_fork, "os.fork: a child writes, the parent or another child reads"),
    ("spawn", 2, shape_spawn, "os.posix_spawn'd writer or reader, this process at the other end"),
    ("popen", 2, shape_popen, "subprocess.Popen'd (vfork) writer or reader"),
    ("threads", 2, shape_threads, "2-4 threads of this process write one pipe, per-byte tagged"),
    ("static", 1, shape_static, "produce | static copier | consume"),
    ("setuid", 1, shape_setuid, "produce | setuid copier (nobody, 4755) | consume"),
    ("splice", 1, shape_splice, "produce | pv -q or a splice() reader | consume"),
    ("kill", 3, shape_kill, "a writer (or reader) killed by SIGKILL mid-stream"),
    ("storm", 1, shape_storm, "8-32 short exec'd programs holding a busy pipe's ends"),
    ("closerange", 1, shape_closerange, "fork, close_range(3, ~0), exec a reader or writer"),
    ("scm", 1, shape_scm, "a pipe end sent over a Unix socket to a reader or writer"),
]
SHAPE_NAMES = [s[0] for s in SHAPES]
SHAPE_FN = {s[0]: s[2] for s in SHAPES}


# --------------------------------------------------------------- the tree


class Env:
    """What the shapes share: programs, the stream, buffers, the private directory."""

    def __init__(self, args, paths, work):
        self.seed = args.seed
        self.job_timeout = args.job_timeout
        self.work = work
        self.stats_dir = os.path.join(work, "stats")
        self.jobs_dir = os.path.join(work, "jobs")
        os.makedirs(self.jobs_dir, exist_ok=True)
        self.lib_path = paths["lib"]
        self.stage, self.helper, self.static = paths["stage"], paths["helper"], paths["static"]
        self.pv = shutil.which("pv")
        self.true = shutil.which("true") or "/bin/true"
        self.lib = Library()
        self.stream = Stream(paths["stream_lib"])
        # Readers: one per shape in flight, one more for a fork child's
        # copy; writer threads: up to 4 per shape (shape_threads).
        self.bufs = BufPool(2 * args.jobs)
        self.tagbufs = BufPool(MAX_THREADS * args.jobs)
        self.helpers = Helpers(MAX_THREADS * args.jobs + args.jobs)
        # The file dd reads, and the sha256 of each of its prefixes that dd
        # may copy (every multiple of 64 KiB): computed once, not kept.
        self.data_path = os.path.join(work, "data")
        rng = random.Random(args.seed)
        h = hashlib.sha256()
        self.digests = {}
        with open(self.data_path, "wb") as f:
            for k in range(DATA_SIZE // 65536):
                block = rng.randbytes(65536)
                f.write(block)
                h.update(block)
                self.digests[(k + 1) * 65536] = h.copy().hexdigest()
        self.suid, self.suid_why = self.make_setuid(work)

    def digest(self, n):
        return self.digests[n]

    def make_setuid(self, work):
        """A copy of the helper (a dynamically linked copier) owned by nobody,
        mode 4755, when this runs as root somewhere setuid is honoured."""
        if os.geteuid() != 0:
            return None, "not root"
        if os.statvfs(work).f_flag & os.ST_NOSUID:
            return None, f"{work} is on a nosuid file system"
        try:
            uid = pwd.getpwnam("nobody").pw_uid
        except KeyError:
            uid = 65534
        d = os.path.join(work, "bin")
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)
        path = os.path.join(d, "ppipe-soak-suid")
        shutil.copyfile(self.helper, path)
        os.chown(path, uid, -1)
        os.chmod(path, 0o4755)
        return path, None


def proc_tree(root):
    """root and every process below it."""
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def ring_rss(pids):
    """Bytes resident in mappings named RING_NAME in these processes."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps") as f:
                inside = False
                for line in f:
                    if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:
                        inside = line.rstrip().endswith(RING_NAME)
                    elif inside and line.startswith("Rss:"):
                        total += int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            continue
    return total


def vm_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def open_fds():
    return len(os.listdir("/proc/self/fd")) - 1     # less listdir's own


def zombies_and_children():
    kids = children_of(os.getpid())
    zombies = 0
    for pid in kids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                zombies += f.read().rpartition(")")[2].split()[0] == "Z"
        except OSError:
            pass
    return len(kids), zombies


def probe_ring_names(env):
    """Whether the library names its ring mappings RING_NAME: one large
    write into a pipe of this process's own, then a look at its smaps.
    None when no ring was made (the library passes everything through)."""
    r, w = os.pipe()
    try:
        before = env.lib.stats()["pool_bytes"]
        os.write(w, env.stream.view[:65536])
        made = env.lib.stats()["pool_bytes"] > before
        named = ring_rss([os.getpid()]) > 0
        n = 0
        while n < 65536:
            n += len(os.read(r, 65536 - n))
    finally:
        os.close(r)
        os.close(w)
    return named if made or named else None


class Tally:
    """What the shapes that ended since the last rest point add up to. Only
    sums and the failures are kept: holding thousands of finished jobs until
    the interval ends would make this process's RSS follow the number of
    shapes per interval."""

    KEEP = 50       # failed shapes described per interval; the others are counted

    def __init__(self):
        self.runs = self.verified = self.small = self.large = 0
        self.failed = self.unexpected = self.bytes_lost = self.data_errors = 0
        self.shapes = {}
        self.failures = []

    def add(self, job):
        failed = bool(job.failures or job.data_errors)
        s = self.shapes.setdefault(job.shape, {"runs": 0, "verified": 0, "killed": 0,
                                               "failed": 0})
        s["runs"] += 1
        s["verified"] += job.verified
        s["killed"] += job.killed
        s["failed"] += failed
        self.runs += 1
        self.verified += job.verified
        self.small += job.small
        self.large += job.large
        if failed:
            out = job.outcome()
            self.failed += 1
            self.unexpected += bool(out["failures"])
            self.bytes_lost += out["bytes_lost"]
            self.data_errors += len(out["data_errors"])
            if len(self.failures) < self.KEEP:
                self.failures.append(out)


class Dispatcher:
    """Deals shapes to the workers from a shuffled deck, while open."""

    def __init__(self, seed, names):
        self.rng = random.Random(f"{seed}/deck")
        self.deck_names = [n for n, weight, _, _ in SHAPES if n in names
                           for _ in range(weight)]
        self.deck = []
        self.decks = 0
        self.cv = threading.Condition()
        self.until = 0.0
        self.limit = None
        self.stopped = False
        self.active = 0
        self.index = 0
        self.tally = Tally()

    def draw(self):
        if not self.deck:
            self.deck = list(self.deck_names)
            self.rng.shuffle(self.deck)
            self.decks += 1
        return self.deck.pop()

    def open(self, until=None, count=None):
        with self.cv:
            self.until = until if until is not None else math.inf
            self.limit = count
            self.cv.notify_all()

    def close(self):
        with self.cv:
            self.until = 0.0
            self.cv.notify_all()

    def stop(self):
        with self.cv:
            self.stopped = True
            self.until = 0.0
            self.cv.notify_all()

    def take(self):
        with self.cv:
            while True:
                if self.stopped:
                    return None
                if time.monotonic() < self.until and (self.limit is None or self.limit > 0):
                    if self.limit is not None:
                        self.limit -= 1
                    self.active += 1
                    self.index += 1
                    return self.index, self.draw()
                self.cv.wait(0.2)

    def finished(self, job):
        with self.cv:
            self.active -= 1
            self.tally.add(job)
            self.cv.notify_all()

    def drain(self, timeout):
        """Waits until no shape is in flight; False on timeout."""
        end = time.monotonic() + timeout
        with self.cv:
            while self.active:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(min(left, 0.5))
            return True

    def idle_or_limit_reached(self):
        with self.cv:
            return self.limit == 0 and not self.active

    def results(self):
        with self.cv:
            tally, self.tally = self.tally, Tally()
            return tally


class Watchdog:
    """Kills the processes of a job that runs past its deadline."""

    def __init__(self):
        self.lock = threading.Lock()
        self.jobs = set()
        threading.Thread(target=self.run, daemon=True).start()

    def add(self, job):
        with self.lock:
            self.jobs.add(job)

    def remove(self, job):
        with self.lock:
            self.jobs.discard(job)

    def run(self):
        while True:
            time.sleep(0.5)
            now = time.monotonic()
            with self.lock:
                late = [j for j in self.jobs if not j.timed_out and now > j.deadline]
            for job in late:
                job.expire()


def worker(env, disp, watch):
    while True:
        got = disp.take()
        if got is None:
            return
        index, shape = got
        job = Job(env, index, shape)
        watch.add(job)
        try:
            SHAPE_FN[shape](env, job)
        except Exception as exc:
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            job.fail(f"{type(exc).__name__}: {exc} (at line {tb.lineno})")
        finally:
            watch.remove(job)
            try:
                job.cleanup()
            except Exception as exc:
                job.fail(f"cleanup: {type(exc).__name__}: {exc}")
            if job.timed_out:
                job.fail(f"did not finish within {env.job_timeout:.0f} s (hung): its "
                         f"processes were killed")
        disp.finished(job)


# ------------------------------------------------------------ accounting


def passthrough_reasons(report, reasons):
    """Adds a report's passed-through bytes to reasons, by why: the pipe's
    reason where it took the plain path for good, else its last kind of
    fallback, else small writes (which an accelerated pipe takes too)."""
    stories = {}
    for f in report.get("fds", []):
        stories.setdefault(f.get("inode"), f)      # both ends share a pipe's counters
    for pipe in list(stories.values()) + report.get("closed_pipes", []):
        n = pipe.get("bytes_passthrough", 0)
        if not n:
            continue
        if pipe.get("path") == "passthrough":
            why = pipe.get("reason") or "plain"
        else:
            why = pipe.get("last_fallback") or "writes below PPIPE_MIN_WRITE"
        reasons[why] = reasons.get(why, 0) + n


def collect_reports(stats_dir):
    """Sums and removes the PPIPE_STATS reports of the tree's processes that
    ended since the last call: (reports, bytes accelerated, bytes passed
    through, {why: bytes passed through})."""
    n = acc = pas = 0
    reasons = {}
    for name in os.listdir(stats_dir):
        path = os.path.join(stats_dir, name)
        try:
            with open(path, errors="replace") as f:
                text = f.read()
            os.unlink(path)
        except OSError:
            continue
        for line in text.splitlines():
            try:
                report = json.loads(line)
                totals = report["totals"]
                acc += int(totals["bytes_accelerated"])
                pas += int(totals["bytes_passthrough"])
                n += 1
                passthrough_reasons(report, reasons)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
    return n, acc, pas, reasons


def accelerated_share(accelerated, large_written):
    """The share (percent) of the tree's large-write bytes that went by vmsplice.

    accelerated: what libppipe counted as accelerated in the tree's
    processes that reported (bytes_accelerated). large_written: what those
    processes wrote into pipes in calls of MIN_WRITE or more, from the
    soak's own ledger of its shapes, not from libppipe's counters: a pipe
    libppipe stopped tracking (its registry full) is counted neither
    accelerated nor passed through, and a share of the counted bytes alone
    would not drop. None when nothing large was written."""
    if not large_written:
        return None
    return 100.0 * min(accelerated, large_written) / large_written


class Interval:
    """One report period, from its results, the reports and samples."""

    def __init__(self, index, start, end, tally, reports, driver_delta, driver, samples, rest,
                 ring_source):
        self.index = index
        self.seconds = end - start
        self.shapes = tally.shapes
        self.runs = tally.runs
        self.verified = tally.verified
        self.failures = tally.failures
        self.failed = tally.failed
        self.unexpected = tally.unexpected
        self.bytes_lost = tally.bytes_lost
        self.data_errors = tally.data_errors
        n, acc, pas, reasons = reports
        acc += driver_delta["bytes_accelerated"]
        pas += driver_delta["bytes_passthrough"]
        small, large = tally.small, tally.large
        # At least this many large-write bytes went into pipes libppipe did
        # not track at all (it counted them neither way): a pipe end received
        # over a socket, any pipe handed on once the registry is full. (Small
        # writes to an inherited end it never took over are not counted
        # either, so this is a lower bound.)
        self.accel = {"reports": n, "bytes_accelerated": acc, "bytes_passthrough": pas,
                      "small_written": small, "large_written": large,
                      "large_untracked": max(0, large - acc - pas),
                      "this_process": dict(driver_delta),
                      "passthrough_by_reason": dict(sorted(reasons.items(),
                                                           key=lambda kv: -kv[1]))}
        self.share = accelerated_share(acc, large)
        self.registry = {k[len("registry_"):]: v for k, v in driver.items()
                         if k.startswith("registry_")}
        self.ring = {"source": ring_source,
                     "mean": int(sum(samples["ring"]) / len(samples["ring"])) if samples["ring"]
                     else rest["ring"],
                     "max": max(samples["ring"] + [rest["ring"]]), "rest": rest["ring"],
                     "samples": len(samples["ring"])}
        self.rss = {"rest": rest["rss"], "max": max(samples["rss"] + [rest["rss"]])}
        self.hygiene = {"fds": rest["fds"], "children": rest["children"],
                        "zombies": rest["zombies"]}

    def json(self):
        return {"index": self.index, "seconds": round(self.seconds, 3), "shapes_run": self.runs,
                "shapes": self.shapes, "bytes_verified": self.verified,
                "failed": self.failed, "bytes_lost": self.bytes_lost,
                "data_errors": self.data_errors, "failures": self.failures, "accelerated": self.accel,
                "accelerated_share": None if self.share is None else round(self.share, 3),
                "registry": self.registry, "ring_bytes": self.ring, "rss_bytes": self.rss,
                "at_rest": self.hygiene}


HEADER = (f"{'time':>7}  {'shapes':>6}  {'failed':>6}  {'MiB checked':>11}  {'accel %':>7}  "
          f"{'registry slots':>14}  {'records':>11}  {'reclaimed':>9}  "
          f"{'ring KiB mean/max/rest':>22}  {'RSS MiB':>7}")


def line(iv, elapsed):
    share = "-" if iv.share is None else f"{iv.share:.1f}"
    reg = iv.registry
    ring = f"{iv.ring['mean'] >> 10}/{iv.ring['max'] >> 10}/{iv.ring['rest'] >> 10}"
    failed = iv.failed
    return (f"{elapsed:>6.0f}s  {iv.runs:>6}  {failed:>6}  {iv.verified / MIB:>11.1f}  {share:>7}  "
            f"{reg['slots']:>6}/{reg['slots_max']:<7}  {reg['records']:>5}/{reg['records_max']:<5}  "
            f"{reg['reclaimed']:>9}  {ring:>22}  {iv.rss['rest'] / MIB:>7.1f}")


def verdict(intervals, warm, baseline, extra_failures):
    """The acceptance criteria, each {"ok", ...}; intervals from the
    baseline on are judged against the baseline's. warm: the warm-up's Tally."""
    out = {}
    lost = sum(iv.bytes_lost for iv in intervals) + warm.bytes_lost
    errors = sum(iv.data_errors for iv in intervals) + warm.data_errors
    out["bytes"] = {"ok": lost == 0 and errors == 0, "bytes_lost": lost, "data_errors": errors,
                    "rule": "no byte lost or altered"}
    failed = sum(iv.unexpected for iv in intervals) + warm.unexpected
    out["shapes"] = {"ok": not failed and not extra_failures,
                     "failed": failed + len(extra_failures),
                     "rule": "no shape fails unexpectedly (an error, a hang); the soak itself "
                             "leaves no child and no fd behind"}
    if extra_failures:
        out["shapes"]["soak"] = extra_failures
    b = baseline - 1
    judged = intervals[b:]
    if not judged:
        for k in ("share", "rss", "ring"):
            out[k] = {"ok": None, "rule": "not judged: fewer intervals than --baseline"}
        return out
    base = intervals[b]
    full = [iv for iv in judged if iv.seconds >= 0.5 * base.seconds]
    shares = [(iv.index, iv.share) for iv in full if iv.share is not None]
    if base.share is None or not shares:
        out["share"] = {"ok": None, "rule": "not judged: no large write was counted"}
    else:
        worst = max(shares, key=lambda x: abs(x[1] - base.share))
        out["share"] = {"ok": abs(worst[1] - base.share) <= SHARE_POINTS,
                        "baseline_interval": base.index, "baseline": round(base.share, 3),
                        "worst_interval": worst[0], "worst": round(worst[1], 3),
                        "limit_points": SHARE_POINTS,
                        "rule": f"every interval's share within {SHARE_POINTS:g} points of "
                                f"interval {base.index}'s"}
    for key, get, floor in (("rss", lambda iv: iv.rss["rest"], 0),
                            ("ring", lambda iv: iv.ring["rest"], RING_FLOOR)):
        bv = get(base)
        limit = max(bv * GROWTH, bv + floor)
        worst = max(judged, key=get)
        out[key] = {"ok": get(worst) <= limit, "baseline_interval": base.index,
                    "baseline": bv, "worst_interval": worst.index, "worst": get(worst),
                    "limit": int(limit),
                    "rule": f"at rest, at most {GROWTH:.2f} times interval {base.index}'s"
                            + (f" or {floor >> 10} KiB more" if floor else "")}
    return out


def print_verdict(v, out=sys.stdout):
    names = {"bytes": "bytes", "shapes": "shapes", "share": "accelerated share",
             "rss": "RSS of this process", "ring": "ring memory of the tree"}
    print("\nverdict:", file=out)
    for key, c in v.items():
        tag = {True: "ok  ", False: "FAIL", None: "-   "}[c["ok"]]
        detail = ""
        if key == "bytes":
            detail = f"{c['bytes_lost']} bytes lost, {c['data_errors']} data errors"
        elif key == "shapes":
            detail = f"{c['failed']} failed"
        elif key == "share" and c["ok"] is not None:
            detail = (f"interval {c['baseline_interval']}: {c['baseline']:.1f}%, furthest "
                      f"interval {c['worst_interval']}: {c['worst']:.1f}% "
                      f"(limit {c['limit_points']:g} points)")
        elif key in ("rss", "ring") and c["ok"] is not None:
            detail = (f"interval {c['baseline_interval']}: {c['baseline'] / 1024:.0f} KiB, "
                      f"highest interval {c['worst_interval']}: {c['worst'] / 1024:.0f} KiB "
                      f"(limit {c['limit'] / 1024:.0f} KiB)")
        print(f"  {tag} {names[key]}: {c['rule']}" + (f": {detail}" if detail else ""),
              file=out)


def write_json(path, doc):
    text = json.dumps(doc, indent=1) + "\n"
    if path == "-":
        sys.stdout.write(text)
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def inner(args, argv, work):
    """The tree's long-lived process."""
    global MIN_WRITE
    os.environ.pop(INNER_VAR, None)
    preloaded = os.environ.pop("LIBPPIPE_SOAK_PRELOADED", None)
    paths = resolve_all(args)
    mode = "ld.so.preload" if args.system_preload else "LD_PRELOAD"
    with open("/proc/self/maps") as f:
        maps = f.read()
    if os.path.realpath(preloaded or paths["lib"]) not in maps and \
            (preloaded or paths["lib"]) not in maps:
        raise Fatal(f"{PROG}: the library is not loaded in this process ({mode}): is "
                    f"{sys.executable} dynamically linked, and the library loadable?", 3)
    m = parse_size(os.environ.get("PPIPE_MIN_WRITE", ""))
    if m and 4097 <= m <= 1 << 30:
        MIN_WRITE = m
    env = Env(args, paths, work)
    names = list(args.shapes or SHAPE_NAMES)
    left_out = {}
    if not env.static:
        left_out["static"] = "no static copier (ppipe-static-copy is not built in sanitizer builds)"
    if not env.suid:
        left_out["setuid"] = env.suid_why
    for n in left_out:
        if n in names:
            names.remove(n)
    if not names:
        raise Fatal(f"{PROG}: none of the shapes asked for can run here: "
                    + "; ".join(f"{k}: {v}" for k, v in left_out.items()), 3)
    named = probe_ring_names(env)
    ring_source = "smaps" if named else "pool_bytes"
    ring_note = ("the tree's mappings named " + RING_NAME if named else
                 "this process's pool_bytes: the library does not name its ring mappings "
                 + RING_NAME if named is False else
                 "this process's pool_bytes: the probe made no ring (PPIPE_MODE=off?)")

    # One pipe of this process stays open for the whole run and crosses into
    # a child once: the registry exists from the start, and every program
    # this process execs joins it (libppipe hands it on while a pipe is live).
    anchor = os.pipe()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)

    stop = threading.Event()
    signalled = []

    def on_signal(signum, frame):
        signalled.append(signum)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    disp = Dispatcher(args.seed, names)
    watch = Watchdog()
    threads = [threading.Thread(target=worker, args=(env, disp, watch), daemon=True)
               for _ in range(args.jobs)]
    for t in threads:
        t.start()

    out = sys.stdout if args.json != "-" else sys.stderr
    lib_text = env.lib_path if mode == "LD_PRELOAD" else preloaded
    print(f"{PROG} {version()}: seed {args.seed}, {args.jobs} jobs, {args.duration:.0f} s in "
          f"intervals of {args.interval:.0f} s; {lib_text} by {mode}", file=out)
    print(f"  shapes: {', '.join(names)}" + "".join(f"; {k} left out: {v}"
                                                    for k, v in left_out.items()), file=out)
    print(f"  ring memory: {ring_note}", file=out)
    out.flush()

    doc = {"tool": PROG, "version": version(), "argv": list(argv),
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "host": {"kernel": os.uname().release, "cpus": os.cpu_count(),
                    "hostname": socket.gethostname()},
           "settings": {"seed": args.seed, "duration_s": args.duration,
                        "interval_s": args.interval, "jobs": args.jobs, "library": lib_text,
                        "preload": mode, "shapes": names, "left_out": left_out,
                        "ring_source": ring_source, "baseline_interval": args.baseline,
                        "warmup_s": args.warmup, "job_timeout_s": args.job_timeout,
                        "min_write": MIN_WRITE,
                        "criteria": {"share_points": SHARE_POINTS, "growth": GROWTH,
                                     "ring_floor_bytes": RING_FLOOR}},
           "warmup": None, "intervals": [], "verdict": None}

    def sample_ring():
        if named:
            return ring_rss(proc_tree(os.getpid()))
        return env.lib.stats()["pool_bytes"]

    drain_limit = args.job_timeout + 30
    extra_failures = []
    warm = Tally()
    t_run = time.monotonic()
    if args.warmup:
        disp.open(count=len(disp.deck_names))
        while not disp.idle_or_limit_reached() and not stop.is_set():
            time.sleep(0.1)
        left = args.warmup - (time.monotonic() - t_run)
        if left > 0:
            disp.open(until=time.monotonic() + left)
            stop.wait(left)
        disp.close()
        if not disp.drain(drain_limit):
            extra_failures.append("warm-up: shapes still in flight after the drain limit")
        warm = disp.results()
        collect_reports(env.stats_dir)
        doc["warmup"] = {"shapes_run": warm.runs, "seconds": round(time.monotonic() - t_run, 3),
                         "bytes_verified": warm.verified, "failed": warm.failed,
                         "failures": warm.failures}
        print(f"warm-up: {warm.runs} shapes, {warm.verified / MIB:.1f} MiB "
              f"checked, {warm.failed} failed, {time.monotonic() - t_run:.1f} s",
              file=out)
        for f in warm.failures[:20]:
            print(f"  FAIL {f['shape']} ({f['variant']}): "
                  + "; ".join(f["failures"] + f["data_errors"]), file=out)
    prev = env.lib.stats()
    print("\n" + HEADER, file=out)
    out.flush()

    intervals = []
    fds_first = None
    t0 = time.monotonic()
    n_intervals = max(1, math.ceil(args.duration / args.interval - 1e-9))
    sample_every = min(5.0, max(1.0, args.interval / 20))
    for i in range(n_intervals):
        if stop.is_set():
            break
        start = time.monotonic()
        length = min(args.interval, args.duration - i * args.interval)
        until = start + length
        disp.open(until=until)
        samples = {"ring": [], "rss": []}
        while not stop.is_set():
            now = time.monotonic()
            if now >= until:
                break
            stop.wait(min(sample_every, until - now))
            samples["ring"].append(sample_ring())
            samples["rss"].append(vm_rss())
        disp.close()
        if not disp.drain(drain_limit):
            extra_failures.append(f"interval {i + 1}: shapes still in flight "
                                  f"{drain_limit:.0f} s after it ended")
            stop.set()
        tally = disp.results()
        reports = collect_reports(env.stats_dir)
        gc.collect()
        driver = env.lib.stats()
        delta = {k: driver[k] - prev[k] for k in ("bytes_accelerated", "bytes_passthrough")}
        prev = driver
        kids, zombies = zombies_and_children()
        rest = {"ring": sample_ring(), "rss": vm_rss(), "fds": open_fds(), "children": kids,
                "zombies": zombies}
        if fds_first is None:
            fds_first = rest["fds"]
        iv = Interval(i + 1, start, time.monotonic(), tally, reports, delta, driver, samples,
                      rest, ring_source)
        intervals.append(iv)
        print(line(iv, time.monotonic() - t0), file=out)
        for f in iv.failures[:20]:
            print(f"  FAIL {f['shape']} #{f['index']} ({f['variant']}): "
                  + "; ".join(f["failures"] + f["data_errors"]), file=out)
        if iv.failed > 20:
            print(f"  ... {iv.failed - 20} more failed shapes (the JSON describes "
                  f"{min(iv.failed, Tally.KEEP)})", file=out)
        if kids:
            extra_failures.append(f"interval {iv.index}: {kids} child process(es) of this "
                                  f"process at rest ({zombies} zombies)")
        if rest["fds"] > fds_first:
            extra_failures.append(f"interval {iv.index}: {rest['fds']} fds open at rest, "
                                  f"{fds_first} after the first interval")
            fds_first = rest["fds"]
        out.flush()
        doc["intervals"].append(iv.json())
        if args.json and args.json != "-":
            write_json(args.json, doc)
    disp.stop()
    os.close(anchor[0])
    os.close(anchor[1])

    v = verdict(intervals, warm, args.baseline, extra_failures)
    print_verdict(v, out)
    if intervals:
        a, z = intervals[0].registry, intervals[-1].registry
        print(f"\nregistry at rest: slots {a['slots']} -> {z['slots']} of {z['slots_max']}, "
              f"records {a['records']} -> {z['records']} of {z['records_max']}, reclaimed "
              f"{z['reclaimed']}, full {z['full']} (not judged)", file=out)
    totals = {}
    for iv in intervals:
        for name, s in iv.shapes.items():
            t = totals.setdefault(name, {"runs": 0, "verified": 0, "killed": 0, "failed": 0})
            for k in t:
                t[k] += s[k]
    print("shapes: " + ", ".join(f"{n} {t['runs']}" + (f" ({t['failed']} failed)"
                                                        if t["failed"] else "")
                                 for n, t in sorted(totals.items())), file=out)
    ok_data = v["bytes"]["ok"] and v["shapes"]["ok"]
    held = all(c["ok"] is not False for c in v.values())
    status = 0 if ok_data and held else 1 if not ok_data else 4
    cut = bool(signalled)
    print(f"{PROG}: {'PASS' if status == 0 else 'FAIL'} (exit status {status}), "
          f"{time.monotonic() - t_run:.0f} s" + (", cut short by a signal" if cut else ""),
          file=out)
    doc["verdict"] = {"criteria": v, "exit_status": status, "shapes": totals,
                      "decks_dealt": disp.decks, "cut_short": cut}
    if args.json:
        write_json(args.json, doc)
    out.flush()
    return status


def main(argv):
    args = parse_args(argv)
    work = os.environ.get(INNER_VAR)
    try:
        if work:
            return inner(args, argv, work)
        return outer(args, argv)
    except Fatal as exc:
        print(exc, file=sys.stderr)
        return exc.status


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Worker threads may still sit in a system call when the run was cut
    # short: end without waiting for them.
    os._exit(status)
