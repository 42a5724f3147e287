#!/usr/bin/env python3
"""Sum libppipe's statistics: per-process reports and host-wide counters files.

usage: ppipe-stats-sum [--json | --prometheus] PATH...

Each PATH is a file of PPIPE_STATS reports (one JSON object per line, as
libppipe appends them), a PPIPE_COUNTERS file (told by its magic,
"PPIPECNT"), or a directory of such files, e.g. the one that
PPIPE_STATS=<dir>/%p.json fills. For the reports, prints one line for all
the processes together:

  libppipe: 12 processes, 1.21 GiB accelerated (97.1%), 36.0 MiB passed through;
  plain pipes: 2 read end inherited across exec, 1 packet mode (O_DIRECT)

A pipe is plain when no process accelerated a byte into it but some wrote
into it; each is counted once, however many processes wrote into it, under
the reason the library gave: the pipe's reason where it took the plain path
for good, else the kind of fallback its large writes took, else "written
through stdio inside libc" when stdio wrote more into it than write() did,
else "writes below PPIPE_MIN_WRITE". Bytes that stdio calls left to libc,
which writes them where libppipe does not see (bytes_stdio: counted only
where statistics are asked for, as here), are passed-through bytes, and the
line says how many of them there were:

  libppipe: 3 processes, 0 B accelerated (0.0%), 64.0 MiB passed through
  (64.0 MiB of it by stdio inside libc); plain pipes: 1 written through
  stdio inside libc

An exec that hands pipes to a program writes a note of it (the image's
name and the pipes); a note that no report of that pid and image answers
means the program did not run libppipe (static, setuid, an environment
without LD_PRELOAD) or was killed, and the line ends with that:

  ...; 1 pipe handed to programs that did not report (staticw: no libppipe
  there, or killed), their writes unseen A line that is not a report (a report cut short when its
writer was killed, anything else) is skipped and counted: "(2 unreadable
report lines)" at the end of the line, "unreadable_lines" in the JSON.

For counters files, one line per uid (files of the same uid are added up):

  libppipe counters, uid 1000: 40 processes (38 accelerated), 1.21 GiB
  accelerated (97.1% of large-write bytes), ...

--json prints all of it as one JSON object, bytes exact ("counters": uid ->
counter -> value). --prometheus prints the counters files in the Prometheus
text exposition format (node_exporter's textfile collector), one series per
uid: ppipe_<counter>_total, _bytes_total, _seconds_total.

Reading a counters file takes a shared lock on each of its shards, waiting
for a writer at most about a second per shard; a shard still locked then
(its writer stopped) is read without the lock, twice, until two reads agree.

Exit status: 0, or 2 when a PATH cannot be read.
"""
import fcntl
import json
import os
import re
import struct
import sys
import time

SMALL = "writes below PPIPE_MIN_WRITE"
STDIO = "written through stdio inside libc"


def human(n):
    """Bytes with three significant digits: 512 B, 9.77 KiB, 36.0 MiB, 1.21 GiB."""
    if n < 1024:
        return f"{n} B"
    v = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        v /= 1024
        if v < 1000 or unit == "PiB":
            break
    digits = 2 if v < 10 else 1 if v < 100 else 0
    return f"{v:.{digits}f} {unit}"


def list_files(paths):
    """Every file the PATHs name, a directory's in name order."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += [os.path.join(p, n) for n in sorted(os.listdir(p))
                      if not os.path.isdir(os.path.join(p, n))]
        else:
            files.append(p)
    return files


def is_counters_file(path):
    """True for a PPIPE_COUNTERS file: it starts with the magic."""
    with open(path, "rb") as fh:
        return fh.read(len(MAGIC)) == MAGIC


def is_exec_note(obj):
    """True for the line an exec writes for the image it hands pipes to:
    {"pid": .., "exec": {"image": .., "pipes": [inode, ...]}, "totals": {all 0}}."""
    return isinstance(obj, dict) and isinstance(obj.get("exec"), dict) and \
        isinstance(obj["exec"].get("pipes"), list) and "pid" in obj


def read_reports(files):
    """The report objects of every file, and how many lines could not be
    read. Exec notes are kept among them, as they are."""
    reports, bad = [], 0
    for f in files:
        with open(f, errors="replace") as fh:
            for ln in fh:
                if not ln.strip():
                    continue
                try:
                    obj = json.loads(ln)
                    if not is_exec_note(obj):
                        obj["totals"]["bytes_accelerated"]
                    else:
                        obj["exec"]["image"]
                except (ValueError, KeyError, TypeError):
                    bad += 1
                    continue
                reports.append(obj)
    return reports, bad


def unseen_execs(reports, notes):
    """The exec notes no report answers: no report of that pid names that
    image, so the program did not run libppipe (static, setuid, an
    environment without LD_PRELOAD) or was killed, and what it wrote into
    the pipes it was handed was out of libppipe's sight. {image: pipes}."""
    ran = {(r.get("pid"), r.get("image")) for r in reports}
    unseen = {}
    for n in notes:
        image = n["exec"].get("image")
        if (n.get("pid"), image) not in ran:
            unseen.setdefault(image, set()).update(n["exec"]["pipes"])
    return unseen


# ---- PPIPE_COUNTERS files (shim/hostcounters.h has the format) ----

MAGIC = b"PPIPECNT"
VERSION = 1
# magic, version, header size, shards, shard size, slots, name size, help
# size, slots used, uid, reserved, created (seconds since the Epoch)
HEADER = struct.Struct("=8s10IQ8x")
LOCK_WAIT_S = 1.0       # how long a reader waits for a shard's writer
F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", 37)


class BadFile(Exception):
    pass


def flock(kind, start, length):
    """A struct flock for the OFD lock calls (l_pid 0)."""
    return struct.pack("=hhxxxxqqixxxx", kind, os.SEEK_SET, start, length, 0)


def read_shard(fd, off, size):
    """One shard's bytes under a shared OFD lock; unlocked, twice until two
    reads agree, if a writer keeps it past LOCK_WAIT_S. (bytes, locked)."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.fcntl(fd, F_OFD_SETLK, flock(fcntl.F_RDLCK, off, size))
        except OSError:
            if time.monotonic() < deadline:
                time.sleep(0.005)
                continue
            last = os.pread(fd, size, off)
            for _ in range(10):
                again = os.pread(fd, size, off)
                if again == last:
                    break
                last = again
            return last, False
        try:
            return os.pread(fd, size, off), True
        finally:
            fcntl.fcntl(fd, F_OFD_SETLK, flock(fcntl.F_UNLCK, off, size))


def cstr(raw):
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def read_counters(path):
    """A counters file: {"path", "uid", "created", "counters": {name: value},
    "help": {name: text}, "unlocked_shards": n}. Raises BadFile."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, HEADER.size, 0)
        if len(head) < HEADER.size or head[:8] != MAGIC:
            raise BadFile("not a counters file")
        (_, version, hsize, shards, shard_size, slots, name_size, help_size, used, uid, _,
         created) = HEADER.unpack(head)
        if version != VERSION:
            raise BadFile(f"version {version}, this reader knows {VERSION}")
        names_at = HEADER.size
        helps_at = names_at + slots * name_size
        if (used > slots or slots * 8 > shard_size or helps_at + slots * help_size > hsize
                or size != hsize + shards * shard_size):
            raise BadFile(f"a layout that does not hold together ({size} bytes)")
        header = os.pread(fd, hsize, 0)
        names = [cstr(header[names_at + i * name_size:names_at + (i + 1) * name_size])
                 for i in range(used)]
        helps = [cstr(header[helps_at + i * help_size:helps_at + (i + 1) * help_size])
                 for i in range(used)]
        totals = [0] * used
        unlocked = 0
        for k in range(shards):
            raw, locked = read_shard(fd, hsize + k * shard_size, shard_size)
            unlocked += not locked
            values = struct.unpack_from(f"={used}Q", raw)
            totals = [t + v for t, v in zip(totals, values)]
    finally:
        os.close(fd)
    counters = {n: t for n, t in zip(names, totals) if n}
    return {"path": path, "uid": uid, "created": created, "counters": counters,
            "help": {n: h for n, h in zip(names, helps) if n}, "unlocked_shards": unlocked}


def read_counters_files(files):
    """(files read, [{"path", "why"}] of those skipped)."""
    good, skipped = [], []
    for f in files:
        try:
            good.append(read_counters(f))
        except (BadFile, OSError, struct.error) as e:
            skipped.append({"path": f, "why": str(e)})
    return good, skipped


def by_uid(files):
    """uid -> {name: value}, the files of one uid added up; and name -> help."""
    out, helps = {}, {}
    for f in files:
        mine = out.setdefault(f["uid"], {})
        for name, v in f["counters"].items():
            mine[name] = mine.get(name, 0) + v
        for name, h in f["help"].items():
            helps.setdefault(name, h)
    return dict(sorted(out.items())), helps


def metric(name):
    """The Prometheus name of a counter, and what its value is divided by:
    "_bytes" stays, "_ns" becomes seconds, the rest counts events."""
    base, factor = name, 1
    if name.endswith("_ns"):
        base, factor = name[:-3] + "_seconds", 10**9
    return "ppipe_" + re.sub(r"[^a-zA-Z0-9_]", "_", base) + "_total", factor


def help_text(text):
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def prometheus(files, skipped):
    """The text exposition format (version 0.0.4): a family per counter,
    a series per uid."""
    uids, helps = by_uid(files)
    names = []
    for counters in uids.values():
        names += [n for n in counters if n not in names]
    out = []
    for name in names:
        mname, factor = metric(name)
        out.append(f"# HELP {mname} libppipe: {help_text(helps.get(name, name))}")
        out.append(f"# TYPE {mname} counter")
        for uid, counters in uids.items():
            if name in counters:
                v = counters[name]
                # Nanoseconds as seconds, exact: no float rounding.
                value = f"{v // 10**9}.{v % 10**9:09d}" if factor != 1 else str(v)
                out.append(f'{mname}{{uid="{uid}"}} {value}')
    out.append("# HELP ppipe_counters_files_skipped libppipe: counters files that "
               "could not be read (damaged, foreign, another version)")
    out.append("# TYPE ppipe_counters_files_skipped gauge")
    out.append(f"ppipe_counters_files_skipped {len(skipped)}")
    return "\n".join(out) + "\n"


def counters_lines(files, skipped):
    """One line per uid for people."""
    uids, _ = by_uid(files)
    lines = []
    for uid, c in uids.items():
        acc, large = c.get("accelerated_bytes", 0), c.get("passthrough_large_bytes", 0)
        share = f" ({100.0 * acc / (acc + large):.1f}% of large-write bytes)" if acc + large \
            else ""
        n = c.get("processes", 0)
        lines.append(
            f"libppipe counters, uid {uid}: {n} process{'' if n == 1 else 'es'} "
            f"({c.get('processes_accelerated', 0)} accelerated), {human(acc)} accelerated"
            f"{share}, {human(c.get('passthrough_bytes', 0))} passed through "
            f"({human(large)} in large writes), {c.get('fallbacks', 0)} fallbacks, "
            f"{c.get('efaults', 0)} efaults, "
            f"{c.get('accelerated_write_ns', 0) / 1e9:.2f} s in accelerated writes")
    for s in skipped:
        lines.append(f"libppipe counters: {s['path']} skipped: {s['why']}")
    return lines


def pipe_stories(report):
    """A process's stories of its pipes: one per pipe object it had open, plus the closed ones."""
    open_pipes = {}
    for f in report.get("fds", []):
        # Both ends of a pipe share its counters: one entry per pipe.
        open_pipes.setdefault(f.get("inode"), f)
    return list(open_pipes.values()) + list(report.get("closed_pipes", []))


def passed(story):
    """Bytes a process wrote into a pipe that did not go by vmsplice: by
    write() that took the real call, and by stdio inside libc."""
    return story.get("bytes_passthrough", 0) + story.get("bytes_stdio", 0)


def plain_reason(stories):
    """Why a pipe stayed plain, from the stories of the processes that wrote most into it."""
    by_bytes = sorted(stories, key=lambda s: -passed(s))
    for s in by_bytes:
        if s.get("path") == "passthrough" and s.get("reason"):
            return s["reason"]
    for s in by_bytes:
        if s.get("last_fallback"):
            return s["last_fallback"]
    if sum(s.get("bytes_stdio", 0) for s in stories) > \
            sum(s.get("bytes_passthrough", 0) for s in stories):
        return STDIO
    return SMALL


def _count(items):
    out = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out


def summarise(objs):
    notes = [o for o in objs if is_exec_note(o)]
    reports = [o for o in objs if not is_exec_note(o)]
    pipes = {}
    for n, r in enumerate(reports):
        for k, s in enumerate(pipe_stories(r)):
            # Inode 0: a pipe that never needed its inode (it never crossed into
            # another process, nor took a large write): its own story.
            key = s.get("inode") or ("unknown", n, k)
            pipes.setdefault(key, []).append(s)
    plain = {}
    for stories in pipes.values():
        acc = sum(s.get("bytes_accelerated", 0) for s in stories)
        pt = sum(passed(s) for s in stories)
        if acc == 0 and pt > 0:
            why = plain_reason(stories)
            plain[why] = plain.get(why, 0) + 1
    return {
        "processes": len({r.get("pid") for r in reports}),
        "bytes_accelerated": sum(r["totals"]["bytes_accelerated"] for r in reports),
        "bytes_passthrough": sum(passed(r["totals"]) for r in reports),
        "bytes_stdio": sum(r["totals"].get("bytes_stdio", 0) for r in reports),
        "plain_pipes": dict(sorted(plain.items(), key=lambda kv: (-kv[1], kv[0]))),
        "closed_pipes_unlisted": sum(r.get("closed_pipes_unlisted", 0) for r in reports),
        "no_registry": dict(sorted(_count(r.get("registry_missing") for r in reports
                                          if r.get("registry_missing")).items())),
        "unseen_programs": {image: len(p) for image, p in
                            sorted(unseen_execs(reports, notes).items(),
                                   key=lambda kv: str(kv[0]))},
    }


def line(s, bad):
    if not s["processes"]:
        text = ("libppipe: no process reported (none ran with libppipe: not found, "
                "static, or setuid?)")
    else:
        acc, pt = s["bytes_accelerated"], s["bytes_passthrough"]
        share = f" ({100.0 * acc / (acc + pt):.1f}%)" if acc + pt else ""
        n = s["processes"]
        stdio = (f" ({human(s['bytes_stdio'])} of it by stdio inside libc)"
                 if s["bytes_stdio"] else "")
        text = (f"libppipe: {n} process{'' if n == 1 else 'es'}, {human(acc)} accelerated"
                f"{share}, {human(pt)} passed through{stdio}; plain pipes: ")
        if s["plain_pipes"]:
            text += ", ".join(f"{k} {why}" for why, k in s["plain_pipes"].items())
        else:
            text += "none"
        if s["closed_pipes_unlisted"]:
            text += f"; {s['closed_pipes_unlisted']} closed pipes not itemised"
        for why, k in s["no_registry"].items():
            text += (f"; {k} process{'' if k == 1 else 'es'} went without a pipe registry "
                     f"({why.removeprefix('no pipe registry: ')}): their pipes that "
                     f"crossed stayed plain")
        if s["unseen_programs"]:
            n = sum(s["unseen_programs"].values())
            names = ", ".join(str(k) for k in s["unseen_programs"])
            text += (f"; {n} pipe{'' if n == 1 else 's'} handed to programs that did not "
                     f"report ({names}: no libppipe there, or killed), their writes unseen")
    if bad:
        text += f" ({bad} unreadable report line{'' if bad == 1 else 's'})"
    return text


def main(argv):
    as_json = "--json" in argv
    as_prom = "--prometheus" in argv
    paths = [a for a in argv if a not in ("--json", "--prometheus")]
    if paths and paths[0] == "--":
        paths = paths[1:]
    if not paths or any(p.startswith("-") for p in paths) or (as_json and as_prom):
        sys.stderr.write(__doc__)
        return 2
    try:
        files = list_files(paths)
        counter_files = [f for f in files if is_counters_file(f)]
        report_files = [f for f in files if f not in counter_files]
        reports, bad = read_reports(report_files)
    except OSError as e:
        sys.stderr.write(f"ppipe-stats-sum: {e}\n")
        return 2
    counters, skipped = read_counters_files(counter_files)
    if as_prom:
        if report_files:
            sys.stderr.write(f"ppipe-stats-sum: {len(report_files)} file(s) of reports left "
                             "out: --prometheus shows counters files\n")
        sys.stdout.write(prometheus(counters, skipped))
        return 0
    s = summarise(reports)
    if as_json:
        s["unreadable_lines"] = bad
        s["counters"], _ = by_uid(counters)
        s["counters_files"] = [{"path": f["path"], "uid": f["uid"], "created": f["created"],
                                "unlocked_shards": f["unlocked_shards"]} for f in counters]
        s["counters_files_skipped"] = skipped
        print(json.dumps(s))
    else:
        if report_files or not counter_files:
            print(line(s, bad))
        for ln in counters_lines(counters, skipped):
            print(ln)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
