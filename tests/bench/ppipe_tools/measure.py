"""Running a matrix: probing the programs, the repetitions of every
configuration on each side, the data of the pipelines of real programs,
progress, and the host's description (ppipe-compare)."""

import hashlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

from .common import Fatal, COMPARE as PROG
from .matrices import (
    API_RATIOS, API_RATIO_OF, API_RUNS, API_SIDES, CPU_METRICS, DATA_FILE,
    DATA_OUT, DATA_SRC, GIB, METRICS, NO_PRESSURE, PIPE_SIZE, PROGRAM_DATA,
    SHARE_METRICS, WORK_SIZE, bench_command, check_command, is_multi,
    is_overhead, is_program, label, lib_sides, overhead_command, overhead_env,
    pipeline_command, program_stages, reads_data, stderr_line)
from .procs import run_bench, run_command, run_measured
from .stats import (
    excess, human_bytes, number, ratio, summarize, summarize_time)


DATA_NOTE = ("text-like lines of numbers and words, as logs are; made once "
             "per run, each compressed file from it")
# The data repeats a block of this size: more than the window of each
# compressor's level (zstd -1: 512 KiB, lz4: 64 KiB, gzip: 32 KiB), so
# the repetition makes none of their work easier.
DATA_BLOCK = 8 << 20
DATA_WORDS = ("GET", "PUT", "POST", "HEAD", "ok", "error", "timeout",
              "retry", "cache", "hit", "miss", "user", "session", "request",
              "response", "upstream", "worker", "queue", "backend", "connect",
              "closed", "reset", "accepted", "rejected", "slow", "query",
              "index", "commit", "rollback", "flush", "compaction", "shard")
DATA_LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "DEBUG", "WARN", "ERROR")
DATA_SERVICES = ("api", "auth", "cache", "db", "gateway", "queue", "worker")


def config_note(envs, side):
    """' (config NAME)' in messages about a --config side, else ''."""
    return f" (config {side})" if is_multi(envs) else ""


def check_runs(cmd, envs, failure):
    """Run cmd once in the environment of every side with the library;
    stop with "failure<config note>: why" unless each gives JSON."""
    for side in lib_sides(envs):
        status, data, err = run_bench(cmd, envs[side], 60)
        if status != 0 or not isinstance(data, dict):
            why = stderr_line(err) or (f"exit status {status}" if status
                                       else "no JSON on stdout")
            raise Fatal(f"{failure}{config_note(envs, side)}: {why}", 2)


def probe(bench, lib, envs):
    """Check that the library really preloads into ppipe-bench, in the
    environment of every side that runs with it."""
    c = {"mode": "threads", "writers": 1, "readers": 1, "size": 4096,
         "pipe_size": PIPE_SIZE}
    check_runs(bench_command(bench, c, 0.01, {}, lib), envs,
               f"{PROG}: {lib} does not work as a preload library for {bench}")


def probe_produce(bench, envs):
    """The api matrix needs ppipe-bench --produce: check, before the first
    run, that it takes it (a ppipe-bench from before it refuses it)."""
    c = {"mode": "threads", "writers": 1, "readers": 1, "size": 65536,
         "pipe_size": PIPE_SIZE}
    status, data, err = run_bench(
        bench_command(bench, c, 0.01, {}, None, "api"), envs["baseline"], 60)
    if status != 0 or not isinstance(data, dict) \
            or data.get("produce") != "api":
        why = stderr_line(err) or (f"exit status {status}" if status else
                                   "it does not say it produced by the API")
        raise Fatal(f"{PROG}: the api matrix needs ppipe-bench --produce: "
                    f"{bench}: {why}", 2)


def probe_stage(stage, lib, envs):
    """Check that a small pipeline of ppipe-stage runs, with the library
    loaded in every stage."""
    c = {"size": 65536, "hops": 2}
    check_runs(pipeline_command(stage, c, ["-b", "1M"], {}, lib), envs,
               f"{PROG}: a pipeline of {stage} with {lib} preloaded does not run")


def measure_reference(bench, envs, mode, size):
    """A reference bandwidth for blocks of size bytes: mode "memcpy", one
    thread's memcpy; "ring", two threads' copy in and copy out through
    shared memory (ppipe-bench --mode). (MB/s or None, why not)."""
    status, data, err = run_bench([bench, "--mode", mode, "-s", str(size),
                                   "-d", "0.5", "--json"], envs["baseline"], 60)
    if status != 0 or not isinstance(data, dict):
        return None, stderr_line(err) or (f"exit status {status}" if status
                                          else "no JSON on stdout")
    value = data.get("mbps")
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or value <= 0:
        return None, "no positive mbps in its output"
    return value, None


def set_work(configs, bench, envs, settings):
    """Give the work matrix its work per write: multiples of the time one
    thread takes to copy WORK_SIZE bytes, measured once for the run (a
    producer that computes about as long as the copy its write costs)."""
    if not any(c["matrix"] == "work" for c in configs):
        return
    mbps, why = measure_reference(bench, envs, "memcpy", WORK_SIZE)
    if mbps is None:
        raise Fatal(f"{PROG}: the work matrix needs the copy time of "
                    f"{WORK_SIZE} B: {bench} --mode memcpy: {why}", 2)
    unit = max(1, round(WORK_SIZE / (mbps * (1 << 20)) * 1e9))
    settings["work"] = {"size": WORK_SIZE, "memcpy_mbps": mbps,
                        "unit_ns": unit}
    for c in configs:
        if c["matrix"] == "work":
            c["work_ns"] = c["work_x"] * unit


def bench_cpu(data):
    """A repetition's CPU per GiB from ppipe-bench's "cpu": all its
    counted tasks, their user and system time, the writers' and the
    readers'; None each where it has none (an older ppipe-bench)."""
    cpu = data.get("cpu") if isinstance(data.get("cpu"), dict) else {}

    def per_gib(group, part):
        values = cpu.get(group)
        return number(values.get(f"{part}_s_per_gib")) \
            if isinstance(values, dict) else None
    return {"cpu_s_per_gib": per_gib("all", "total"),
            "cpu_user_s_per_gib": per_gib("all", "user"),
            "cpu_sys_s_per_gib": per_gib("all", "sys"),
            "cpu_writers_s_per_gib": per_gib("writers", "total"),
            "cpu_readers_s_per_gib": per_gib("readers", "total")}


def usage_cpu(usage, nbytes):
    """A pipeline repetition's CPU per GiB: every process of the pipeline
    (the sh and its stages, run_measured's count), which no count splits
    into writers and readers."""
    rec = dict.fromkeys(CPU_METRICS)
    if usage and number(nbytes) and nbytes > 0:
        gib = nbytes / GIB
        rec["cpu_user_s_per_gib"] = usage["user_s"] / gib
        rec["cpu_sys_s_per_gib"] = usage["sys_s"] / gib
        rec["cpu_s_per_gib"] = (usage["user_s"] + usage["sys_s"]) / gib
    return rec


def rep_record(c, side, status, data, err, verify, usage=None):
    """Validate one bench result; return the per-rep record. usage is what
    a pipeline's run took (run_measured): its CPU is counted from it."""
    where = f"{label(c)} ({side})"
    pipeline = c["matrix"] == "pipeline"
    what = "the pipeline" if pipeline else "ppipe-bench"
    # The consumer of a pipeline always checks the stream.
    if status == 1 and (verify or (pipeline and "verification failed" in err)):
        raise Fatal(f"{PROG}: verification failed: {where}: "
                    f"{stderr_line(err) or 'exit status 1'}", 1)
    if status != 0:
        why = stderr_line(err) or f"exit status {status}"
        raise Fatal(f"{PROG}: {what} failed for {where}: {why}", 1)
    if not isinstance(data, dict):
        raise Fatal(f"{PROG}: {what} printed no JSON object for {where}", 1)
    if verify and data.get("verified") is False:
        raise Fatal(f"{PROG}: verification failed: {where}", 1)
    rec = {}
    for key in METRICS:
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Fatal(f"{PROG}: {what} output for {where} has no "
                        f"numeric {key!r}", 1)
        rec[key] = value
    for key in SHARE_METRICS:
        value = data.get(key)
        rec[key] = value if isinstance(value, (int, float)) \
            and not isinstance(value, bool) else None
    rec.update(usage_cpu(usage, data.get("bytes")) if pipeline
               else bench_cpu(data))
    if rec["mbps"] <= 0:
        raise Fatal(f"{PROG}: {what} moved no data for {where}", 1)
    rec["pressure"] = data.get("pressure")
    return rec


DD_BYTES = re.compile(r"(\d+) bytes? (?:\([^)]*\) )?copied")
# What dd prints of its statistics: GNU dd's (LC_ALL=C) records and bytes.
DD_STATS = (re.compile(r"\d+\+\d+ records (?:in|out)"),
            re.compile(r"\d+ bytes? (?:\([^)]*\) )?copied,[^\n]*"))
_ZERO_SHA1 = {}


def zero_sha1(nbytes):
    """The SHA-1 of nbytes zero bytes, hex (computed once per size)."""
    if nbytes not in _ZERO_SHA1:
        digest = hashlib.sha1()
        block = bytes(1 << 20)
        for _ in range(nbytes >> 20):
            digest.update(block)
        digest.update(bytes(nbytes & ((1 << 20) - 1)))
        _ZERO_SHA1[nbytes] = digest.hexdigest()
    return _ZERO_SHA1[nbytes]


def program_stderr(err):
    """(the byte counts the dd stages reported, the lines that are neither
    dd's statistics nor libppipe's own: its messages, or a report of
    PPIPE_STATS=1). The stages share the stderr, so their statistics may
    interleave: they are found anywhere in it."""
    counts = [int(n) for n in DD_BYTES.findall(err)]
    rest = err
    for stats in DD_STATS:
        rest = stats.sub("", rest)
    odd = [line.strip() for line in rest.splitlines() if line.strip()
           and not re.match(r"libppipe\[\d+\]: |\{", line.strip())]
    return counts, odd


def program_env(env):
    """A side's environment for a pipeline of real programs: dd's
    statistics in the C locale, which program_stderr reads."""
    return dict(env, LC_ALL="C")


def program_failure(c, side, status, err, check):
    """A Fatal for a pipeline of real programs that failed or printed what
    none of its stages should, or None."""
    where = f"{label(c)} ({side})" + (" check" if check else "")
    _, odd = program_stderr(err)
    if status != 0 or odd:
        why = odd[0] if odd else stderr_line(err) or (
            f"exit status {status}" if status is not None else "no result")
        return Fatal(f"{PROG}: the pipeline failed for {where}: {why}", 1)
    return None


def check_program(c, side, env):
    """Before the timed runs of a pipeline whose sink throws its output
    away: the pipeline once with its sink counted, which must count every
    byte. The timed runs then keep the sink as it is, so that their CPU is
    the pipeline's own."""
    command = check_command(c)
    status, out, err = run_command(["sh", "-c", command], program_env(env),
                                   program_timeout(c))
    fatal = program_failure(c, side, status, err, True)
    if fatal:
        raise fatal
    if out.strip() != str(c["bytes"]):
        raise Fatal(f"{PROG}: verification failed: {label(c)} ({side}): "
                    f"{command.split('|')[-1].strip()} counted "
                    f"{out.strip() or 'nothing'}, not {c['bytes']} bytes", 1)


def program_timeout(c):
    """How long a pipeline of real programs may take: 1 MiB/s at least."""
    return 120 + c["bytes"] / (1 << 20)


def data_block(size):
    """size bytes of text-like lines, as a service's log has: a time, a
    level, a host and a process, words and numbers (the same bytes for the
    same size in every run)."""
    rng = random.Random(20260101)
    lines = []
    total = 0
    ms = 0
    while total < size:
        ms += rng.randrange(40)
        sec, milli = divmod(ms, 1000)
        minute, sec = divmod(sec, 60)
        hour, minute = divmod(minute, 60)
        words = " ".join(rng.choice(DATA_WORDS)
                         for _ in range(rng.randrange(2, 7)))
        line = (f"2026-01-{1 + hour // 24:02d}T{hour % 24:02d}:{minute:02d}:"
                f"{sec:02d}.{milli:03d}Z {rng.choice(DATA_LEVELS)} "
                f"host{rng.randrange(12):02d} {rng.choice(DATA_SERVICES)}"
                f"[{rng.randrange(1000, 1100)}]: {words} "
                f"id={rng.randrange(100000)} bytes={rng.randrange(20000)} "
                f"ms={rng.randrange(5000) / 10:.1f}\n")
        lines.append(line)
        total += len(line)
    return "".join(lines).encode("ascii")[:size]


def write_data(path, nbytes):
    """Write nbytes of text-like lines to path: a block of DATA_BLOCK bytes
    again and again (the last time cut short)."""
    block = data_block(min(nbytes, DATA_BLOCK))
    with open(path, "wb") as f:
        for _ in range(nbytes // len(block)):
            f.write(block)
        f.write(block[:nbytes % len(block)])


def make_program_data(folder, shapes, env, nbytes, quiet):
    """Make the data of the pipelines of real programs that read it (their
    shapes) in folder: nbytes of text-like lines and, for each of them
    that reads a compressed file, that file, compressed by its tool once,
    plain. Returns what settings.programs.data records."""
    if not quiet:
        tools = ", ".join(dict.fromkeys(shape.split()[0] for shape in shapes))
        sys.stderr.write(f"{PROG}: making {human_bytes(nbytes)} of data for "
                         f"{tools} in {folder}\n")
    os.mkdir(os.path.join(folder, DATA_SRC))
    os.mkdir(os.path.join(folder, DATA_OUT))
    source = f"{DATA_SRC}/{DATA_FILE}"
    write_data(os.path.join(folder, source), nbytes)
    compressed = {}
    for shape in shapes:
        name, argv, _ = PROGRAM_DATA[shape]
        if argv is None:
            continue
        command = list(argv) + [source]
        text = f"{' '.join(command)} > {name}"
        try:
            with open(os.path.join(folder, name), "wb") as out:
                proc = subprocess.run(
                    command, env=program_env(env), cwd=folder,
                    stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.PIPE, text=True,
                    timeout=120 + nbytes / (1 << 20), check=False)
            status, err = proc.returncode, proc.stderr
            size = os.path.getsize(os.path.join(folder, name))
        except (OSError, subprocess.TimeoutExpired) as exc:
            status, err, size = None, str(exc), 0
        if status != 0 or not size:
            why = stderr_line(err) or (f"exit status {status}" if status
                                       else "no output")
            raise Fatal(f"{PROG}: making the data of programs {shape} "
                        f"failed: {text}: {why}", 1)
        compressed[shape] = {"file": name, "command": text, "bytes": size}
    return {"what": DATA_NOTE, "compressed": compressed}


def empty_dir(path):
    """Make path an empty directory."""
    shutil.rmtree(path, ignore_errors=True)
    os.mkdir(path)


def program_record(c, side, env, data=None):
    """One timed run of a pipeline of real programs: its MB/s over the
    whole pipeline's wall time (the sh's start to its end) and the CPU of
    all its processes per GiB, after the checks that every byte went
    through: the count each dd reports, the digest sha1sum prints, the
    count of a final wc -c, the size of what tar x extracted. data is the
    directory of the run's data, in which a pipeline that reads it runs
    (its extraction directory emptied first)."""
    cwd = data if reads_data(c) else None
    extracted = PROGRAM_DATA[c["shape"]][2] if cwd else None
    if extracted:
        empty_dir(os.path.join(cwd, os.path.dirname(extracted)))
        # What the run before wrote goes to the disk now, not during this
        # run: else the side that runs second pays the other's writeback.
        os.sync()
    status, out, err, usage = run_measured(["sh", "-c", c["command"]],
                                           program_env(env),
                                           program_timeout(c), cwd)
    fatal = program_failure(c, side, status, err, False)
    if fatal:
        raise fatal
    where = f"{label(c)} ({side})"
    counts, _ = program_stderr(err)
    dds = program_stages(c).count("dd")
    if counts != [c["bytes"]] * dds:
        raise Fatal(f"{PROG}: verification failed: {where}: dd reported "
                    f"{', '.join(map(str, counts)) or 'no count'}, not "
                    f"{c['bytes']} bytes from each of {dds}", 1)
    if program_stages(c)[-1] == "sha1sum" and \
            out.split()[:1] != [zero_sha1(c["bytes"])]:
        raise Fatal(f"{PROG}: verification failed: {where}: sha1sum printed "
                    f"{out.strip()[:60]!r}, not the digest of "
                    f"{c['bytes']} zero bytes", 1)
    if program_stages(c)[-1] == "wc" and out.strip() != str(c["bytes"]):
        raise Fatal(f"{PROG}: verification failed: {where}: wc -c counted "
                    f"{out.strip()[:60] or 'nothing'}, not {c['bytes']} "
                    "bytes", 1)
    if extracted:
        try:
            size = os.stat(os.path.join(cwd, extracted)).st_size
        except OSError:
            size = None
        if size != c["bytes"]:
            got = "nothing" if size is None else f"{size} bytes"
            raise Fatal(f"{PROG}: verification failed: {where}: "
                        f"{program_stages(c)[-1]} extracted {got} into "
                        f"{extracted}, not {c['bytes']} bytes", 1)
    rec = {key: None for key in METRICS + SHARE_METRICS}
    rec["mbps"] = c["bytes"] / usage["wall_s"] / (1 << 20)
    rec.update(usage_cpu(usage, c["bytes"]))
    rec["wall_s"] = usage["wall_s"]
    rec["pressure"] = None
    return rec


def overhead_record(c, side, status, data, err):
    """Validate one ppipe-overhead result; return the per-rep record."""
    where = f"overhead {label(c)} ({side})"
    if status != 0:
        why = stderr_line(err) or f"exit status {status}"
        raise Fatal(f"{PROG}: ppipe-overhead failed for {where}: {why}", 1)
    if not isinstance(data, dict):
        raise Fatal(f"{PROG}: ppipe-overhead printed no JSON object for "
                    f"{where}", 1)
    value = data.get("ns_per_op")
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not value > 0:
        raise Fatal(f"{PROG}: ppipe-overhead output for {where} has no "
                    "positive 'ns_per_op'", 1)
    if data.get("case") != c["case"] or data.get("n") != c["n"]:
        raise Fatal(f"{PROG}: ppipe-overhead ran {data.get('case')!r} "
                    f"{data.get('n')!r} times for {where}", 1)
    faults = data.get("minflt_per_op")
    rec = {"ns_per_op": value}
    if isinstance(faults, (int, float)) and not isinstance(faults, bool) and faults >= 0:
        rec["minflt_per_op"] = faults
    return rec


def clock(seconds):
    """Format seconds as m:ss or h:mm:ss."""
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Progress reporting on stderr, in place on a terminal."""

    def __init__(self, total_runs, duration, quiet):
        self.total = total_runs
        self.duration = duration
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()
        self.done = 0

    def show(self, text):
        """Announce the run about to start."""
        if self.quiet:
            return
        elapsed = time.monotonic() - self.start
        left = self.total - self.done
        per_run = elapsed / self.done if self.done else self.duration + 0.1
        line = (f"{text}  elapsed {clock(elapsed)}  "
                f"left ~{clock(per_run * left)}")
        if self.tty:
            sys.stderr.write("\r" + line + "\x1b[K")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def step(self):
        """Count a finished run."""
        self.done += 1

    def finish(self):
        """End the in-place line."""
        if not self.quiet and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def side_result(runs, base):
    """A --config side's medians with its ratios to the baseline's."""
    side = summarize(runs)
    side["ratio_mbps"] = ratio(base["mbps"], side["mbps"])
    for key in ("avg", "p50", "p99"):
        side[f"ratio_lat_{key}"] = ratio(base[f"lat_{key}_ns"],
                                         side[f"lat_{key}_ns"])
    side["ratio_cpu_per_gib"] = ratio(base["cpu_s_per_gib"],
                                      side["cpu_s_per_gib"])
    return side


def config_reps(c, settings):
    """Repetitions per side of one configuration."""
    return settings["overhead"]["reps"] if is_overhead(c) \
        else settings["reps"]


def run_overhead_row(c, program, lib, envs, reps, progress, prefix,
                     empty=None):
    """Run one overhead row: every repetition runs plain, then the empty
    library (if there is one: its path), then each side with the library
    (progress lines start with prefix). Returns the result: medians of
    ns_per_op per side and the time ratio preloaded/plain (ratio_time:
    lower is better); with the empty library, its side ("empty", with its
    own ratio_time) and each library side's excess_time over it."""
    sides = {"baseline": (None, envs["baseline"])}
    if empty:
        # Nothing but the library: the PPIPE_ variables mean nothing to it.
        sides["empty"] = (empty, dict(envs["baseline"], LD_PRELOAD=empty))
    sides.update((side, (lib, envs[side])) for side in lib_sides(envs))
    runs = {side: [] for side in sides}
    for rep in range(1, reps + 1):
        for side, (side_lib, env) in sides.items():
            progress.show(f"{prefix} overhead {label(c)} rep {rep}/{reps} "
                          f"{side}")
            status, data, err = run_bench(
                overhead_command(program, c, side_lib),
                overhead_env(c, env), 120)
            runs[side].append(overhead_record(c, side, status, data, err))
            progress.step()
    result = dict(c)
    base = result["baseline"] = summarize_time(runs["baseline"])
    floor = None
    if empty:
        result["empty"] = summarize_time(runs["empty"])
        floor = result["empty"]["ratio_time"] = ratio(
            base["ns_per_op"], result["empty"]["ns_per_op"])
    if is_multi(envs):
        result["configs"] = {}
        for side in lib_sides(envs):
            one = summarize_time(runs[side])
            one["ratio_time"] = ratio(base["ns_per_op"], one["ns_per_op"])
            if empty:
                one["excess_time"] = excess(one["ratio_time"], floor)
            result["configs"][side] = one
    else:
        result["shim"] = summarize_time(runs["shim"])
        result["ratio_time"] = ratio(base["ns_per_op"],
                                     result["shim"]["ns_per_op"])
        if empty:
            result["excess_time"] = excess(result["ratio_time"], floor)
    return result


def condition_configs(c, settings):
    """The configuration c under each pressure condition of the run: one
    copy, or one per condition of --memory-pressure=none,memcg,..."""
    modes = settings.get("pressure_modes")
    if not modes:
        c = dict(c, memory_pressure=settings["memory_pressure"])
        if settings["memory_pressure"]:
            c["pressure_mode"] = settings["pressure_mode"]
        return [c]
    out = []
    for mode in modes:
        cc = dict(c, memory_pressure=mode != NO_PRESSURE)
        if mode != NO_PRESSURE:
            cc["pressure_mode"] = mode
        out.append(cc)
    return out


def run_conditions(conds, programs, lib, envs, settings, opts, progress,
                   prefix):
    """Run one configuration under each of its conditions: every
    repetition runs each condition in turn, and in each the plain side and
    then the library's (in the api matrix, then the library's API and the
    API without it), so that the machine's slower and faster spells fall
    on all of them.
    Returns a result per condition."""
    api = conds[0]["matrix"] == "api"
    sides = list(envs) + (list(API_SIDES) if api else [])
    reps = settings["reps"]
    programs_run = is_program(conds[0])
    pipeline = conds[0]["matrix"] == "pipeline" and not programs_run
    duration = settings["pipeline_duration_s" if pipeline else "duration_s"]
    runs = [{side: [] for side in sides} for _ in conds]
    # What ppipe_version() answered in the API runs, per condition and side.
    versions = [{side: [] for side in API_SIDES} for _ in conds]
    pipe_sizes = []
    for c in conds if programs_run and check_command(conds[0]) else ():
        for side in sides:
            progress.show(f"{prefix} {label(c)} check {side}")
            check_program(c, side, envs[side])
    for rep in range(1, reps + 1):
        for k, c in enumerate(conds):
            copts = dict(opts, memory_pressure=c["memory_pressure"],
                         pressure_mode=c.get("pressure_mode"))
            for side in sides:
                progress.show(f"{prefix} {label(c)} rep {rep}/{reps} {side}")
                env_side, produce = API_RUNS[side] if api else (side, None)
                side_lib = lib if env_side != "baseline" else None
                if programs_run:
                    runs[k][side].append(program_record(
                        c, side, envs[side], programs.get("data")))
                    progress.step()
                    continue
                usage = None
                if pipeline:
                    cmd = pipeline_command(programs["stage"], c,
                                           ["-d", f"{duration:g}"], copts,
                                           side_lib)
                    status, out, err, usage = run_measured(
                        cmd, envs[side], duration + 120)
                    try:
                        data = json.loads(out)
                    except ValueError:
                        data = None
                else:
                    cmd = bench_command(programs["bench"], c, duration,
                                        copts, side_lib, produce)
                    status, data, err = run_bench(cmd, envs[env_side],
                                                  duration + 120)
                runs[k][side].append(rep_record(c, side, status, data, err,
                                                opts["verify"], usage))
                if produce and data.get("produce") != produce:
                    raise Fatal(f"{PROG}: ppipe-bench did not produce by "
                                f"{produce} for {label(c)} ({side}): it "
                                f"says {data.get('produce')!r}", 1)
                if side in API_SIDES:
                    versions[k][side].append(data.get("ppipe_version"))
                if pipeline and isinstance(data.get("pipe_size"), int):
                    pipe_sizes.append(data["pipe_size"])
                progress.step()
    results = []
    for k, c in enumerate(conds):
        result = dict(c)
        if pipe_sizes:
            # The size the consumer read from (the kernel's default).
            result["pipe_size"] = statistics.mode(pipe_sizes)
        result["baseline"] = summarize(runs[k]["baseline"])
        if is_multi(envs):
            result["configs"] = {
                side: side_result(runs[k][side], result["baseline"])
                for side in lib_sides(envs)}
            results.append(result)
            continue
        result["shim"] = summarize(runs[k]["shim"])
        base, shim = result["baseline"], result["shim"]
        result["ratio_mbps"] = ratio(base["mbps"], shim["mbps"])
        result["ratio_lat_avg"] = ratio(base["lat_avg_ns"],
                                        shim["lat_avg_ns"])
        result["ratio_lat_p99"] = ratio(base["lat_p99_ns"],
                                        shim["lat_p99_ns"])
        result["ratio_cpu_per_gib"] = ratio(base["cpu_s_per_gib"],
                                            shim["cpu_s_per_gib"])
        if api:
            for side in API_SIDES:
                result[side] = summarize(runs[k][side])
                # What the library's API answered: None, its fallback.
                result[side]["ppipe_version"] = api_version(versions[k][side])
            result.update(api_ratios(result))
        results.append(result)
    return results


def api_version(values):
    """What ppipe_version() answered in a side's API runs: the version
    most of them saw, None where most saw no libppipe."""
    return statistics.mode(values) if values else None


def api_ratios(result):
    """An api result's ratios: MB/s, CPU per GiB and the writers' CPU per
    GiB of each pair of API_RATIOS, of the sides' medians (None where a
    side has no value)."""
    out = {}
    for infix, num, den in API_RATIOS:
        for suffix, key in API_RATIO_OF:
            out[f"ratio{infix}_{suffix}"] = ratio(result[den].get(key),
                                                  result[num].get(key))
    return out


def run_matrix(configs, programs, lib, envs, settings, quiet):
    """Run every configuration and repetition; return the result list.

    programs holds the paths of "bench" and (for pipelines) "stage" and
    (for the overhead matrix) "overhead", and "data", the directory of
    the data the pipelines of real programs read, when they do; envs the
    sides in the order each repetition runs them (child_envs).
    """
    sides = list(envs)
    opts = {"verify": settings["verify"],
            "memory_pressure": settings["memory_pressure"],
            "pressure_mode": settings.get("pressure_mode"),
            "filler_cpu": settings.get("filler_cpu"),
            "pin": settings["pin"]}
    conditions = settings.get("pressure_modes")
    empty = (settings.get("overhead") or {}).get("empty", {}).get("path")
    progress = Progress(sum(config_reps(c, settings)
                            * (len(sides) + bool(empty) if is_overhead(c)
                               else (len(sides) + len(API_SIDES)
                                     * (c["matrix"] == "api"))
                               * len(conditions or [0]))
                            for c in configs),
                        settings["duration_s"], quiet)
    results = []
    try:
        for i, c in enumerate(configs, 1):
            if is_overhead(c):
                results.append(run_overhead_row(
                    c, programs["overhead"], lib, envs,
                    config_reps(c, settings), progress,
                    f"[{i}/{len(configs)}]", empty))
                continue
            results += run_conditions(
                condition_configs(c, settings), programs, lib, envs,
                settings, opts, progress, f"[{i}/{len(configs)}]")
    finally:
        progress.finish()
    return results


# ---------------------------------------------------------------- host


def read_text(path):
    """Contents of a small file, or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def host_info():
    """Description of the machine the benchmark ran on."""
    cpu = None
    for line in (read_text("/proc/cpuinfo") or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            cpu = value.strip()
            break
    thp = None
    match = re.search(r"\[(\w+)\]", read_text(
        "/sys/kernel/mm/transparent_hugepage/enabled") or "")
    if match:
        thp = match.group(1)
    try:
        pipe_max = int((read_text("/proc/sys/fs/pipe-max-size") or "").strip())
    except ValueError:
        pipe_max = None
    uname = os.uname()
    return {"kernel": uname.release, "cpu": cpu, "cores": os.cpu_count(),
            "page_size": os.sysconf("SC_PAGE_SIZE"), "thp": thp,
            "pipe_max_size": pipe_max, "hostname": uname.nodename}


def memcpy_reference(bench, envs):
    """One thread's memcpy bandwidth for 1 MiB blocks, MB/s (None if unknown)."""
    return measure_reference(bench, envs, "memcpy", 1048576)[0]


def ring_reference(bench, envs):
    """Two threads' copy in and copy out of 1 MiB blocks through shared
    memory, no kernel (ppipe-bench --mode ring), MB/s (None if unknown)."""
    return measure_reference(bench, envs, "ring", 1048576)[0]
