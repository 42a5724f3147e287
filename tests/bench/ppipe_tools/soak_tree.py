"""The soak's long-lived process: its environment, the dispatcher that
deals the shapes to worker threads, the watchdog, the tree's memory, and
the run itself (ppipe-soak's second run of itself, preloaded)."""

import gc
import hashlib
import math
import os
import pwd
import random
import shutil
import signal
import socket
import sys
import threading
import time
import traceback

from .common import Fatal, SOAK as PROG, write_json
from .soak_report import HEADER, Interval, collect_reports, line, print_verdict, verdict
from .soak_shapes import Helpers, Job, SHAPES, SHAPE_FN, SHAPE_NAMES, children_of
from . import soak_stream
from .soak_stream import (
    BufPool, DATA_SIZE, GROWTH, Library, MAX_THREADS, MIB, RING_FLOOR, RING_NAME, SHARE_POINTS,
    Stream, parse_size)


# The variable that tells the second run of ppipe-soak (the tree's
# long-lived process) where its private directory is.
INNER_VAR = "LIBPPIPE_SOAK_WORK"


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


def inner(args, argv, work, paths, version):
    """The tree's long-lived process: paths are the programs and files it
    needs (as absolute paths), version the project's."""
    os.environ.pop(INNER_VAR, None)
    preloaded = os.environ.pop("LIBPPIPE_SOAK_PRELOADED", None)
    mode = "ld.so.preload" if args.system_preload else "LD_PRELOAD"
    with open("/proc/self/maps") as f:
        maps = f.read()
    if os.path.realpath(preloaded or paths["lib"]) not in maps and \
            (preloaded or paths["lib"]) not in maps:
        raise Fatal(f"{PROG}: the library is not loaded in this process ({mode}): is "
                    f"{sys.executable} dynamically linked, and the library loadable?", 3)
    m = parse_size(os.environ.get("PPIPE_MIN_WRITE", ""))
    if m and 4097 <= m <= 1 << 30:
        soak_stream.MIN_WRITE = m
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
    print(f"{PROG} {version}: seed {args.seed}, {args.jobs} jobs, {args.duration:.0f} s in "
          f"intervals of {args.interval:.0f} s; {lib_text} by {mode}", file=out)
    print(f"  shapes: {', '.join(names)}" + "".join(f"; {k} left out: {v}"
                                                    for k, v in left_out.items()), file=out)
    print(f"  ring memory: {ring_note}", file=out)
    out.flush()

    doc = {"tool": PROG, "version": version, "argv": list(argv),
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "host": {"kernel": os.uname().release, "cpus": os.cpu_count(),
                    "hostname": socket.gethostname()},
           "settings": {"seed": args.seed, "duration_s": args.duration,
                        "interval_s": args.interval, "jobs": args.jobs, "library": lib_text,
                        "preload": mode, "shapes": names, "left_out": left_out,
                        "ring_source": ring_source, "baseline_interval": args.baseline,
                        "warmup_s": args.warmup, "job_timeout_s": args.job_timeout,
                        "min_write": soak_stream.MIN_WRITE,
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
            write_json(args.json, doc, replace=True)
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
        write_json(args.json, doc, replace=True)
    out.flush()
    return status
