"""ppipe-soak's bytes: libppipe's counters through ctypes, the stream
generator, buffers, the checker every reader's bytes go through, and
the sizes the writers write."""

import ctypes
import os
import re
import struct
import threading

from .common import Fatal, SOAK as PROG


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


def parse_size(text):
    """Bytes from libppipe's size syntax (16k, 1M, 4096B)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(?:i?[bB])?\s*", text or "")
    if not m:
        return None
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


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
