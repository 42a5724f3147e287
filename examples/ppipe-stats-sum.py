#!/usr/bin/env python3
"""Sum libppipe's per-process statistics into one line for a process tree.

usage: ppipe-stats-sum [--json] PATH...

Each PATH is a file of PPIPE_STATS reports (one JSON object per line, as
libppipe appends them) or a directory of such files, e.g. the one that
PPIPE_STATS=<dir>/%p.json fills. Prints, for all the processes together:

  libppipe: 12 processes, 1.21 GiB accelerated (97.1%), 36.0 MiB passed through;
  plain pipes: 2 read end inherited across exec, 1 packet mode (O_DIRECT)

A pipe is plain when no process accelerated a byte into it but some wrote
into it; each is counted once, however many processes wrote into it, under
the reason the library gave: the pipe's reason where it took the plain path
for good, else the kind of fallback its large writes took, else "writes below
PPIPE_MIN_WRITE". --json prints the same as one JSON object, bytes exact.

Exit status: 0, or 2 when a PATH cannot be read.
"""
import json
import os
import sys

SMALL = "writes below PPIPE_MIN_WRITE"


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


def read_reports(paths):
    """The report objects of every file, and how many lines could not be read."""
    reports, bad = [], 0
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += [os.path.join(p, n) for n in sorted(os.listdir(p))]
        else:
            files.append(p)
    for f in files:
        with open(f, errors="replace") as fh:
            for ln in fh:
                if not ln.strip():
                    continue
                try:
                    obj = json.loads(ln)
                    obj["totals"]["bytes_accelerated"]
                except (ValueError, KeyError, TypeError):
                    bad += 1
                    continue
                reports.append(obj)
    return reports, bad


def pipe_stories(report):
    """A process's stories of its pipes: one per pipe object it had open, plus the closed ones."""
    open_pipes = {}
    for f in report.get("fds", []):
        # Both ends of a pipe share its counters: one entry per pipe.
        open_pipes.setdefault(f.get("inode"), f)
    return list(open_pipes.values()) + list(report.get("closed_pipes", []))


def plain_reason(stories):
    """Why a pipe stayed plain, from the stories of the processes that wrote most into it."""
    by_bytes = sorted(stories, key=lambda s: -s.get("bytes_passthrough", 0))
    for s in by_bytes:
        if s.get("path") == "passthrough" and s.get("reason"):
            return s["reason"]
    for s in by_bytes:
        if s.get("last_fallback"):
            return s["last_fallback"]
    return SMALL


def summarise(reports):
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
        pt = sum(s.get("bytes_passthrough", 0) for s in stories)
        if acc == 0 and pt > 0:
            why = plain_reason(stories)
            plain[why] = plain.get(why, 0) + 1
    return {
        "processes": len({r.get("pid") for r in reports}),
        "bytes_accelerated": sum(r["totals"]["bytes_accelerated"] for r in reports),
        "bytes_passthrough": sum(r["totals"].get("bytes_passthrough", 0) for r in reports),
        "plain_pipes": dict(sorted(plain.items(), key=lambda kv: (-kv[1], kv[0]))),
        "closed_pipes_unlisted": sum(r.get("closed_pipes_unlisted", 0) for r in reports),
    }


def line(s, bad):
    if not s["processes"]:
        text = ("libppipe: no process reported (none ran with libppipe: not found, "
                "static, or setuid?)")
    else:
        acc, pt = s["bytes_accelerated"], s["bytes_passthrough"]
        share = f" ({100.0 * acc / (acc + pt):.1f}%)" if acc + pt else ""
        n = s["processes"]
        text = (f"libppipe: {n} process{'' if n == 1 else 'es'}, {human(acc)} accelerated"
                f"{share}, {human(pt)} passed through; plain pipes: ")
        if s["plain_pipes"]:
            text += ", ".join(f"{k} {why}" for why, k in s["plain_pipes"].items())
        else:
            text += "none"
        if s["closed_pipes_unlisted"]:
            text += f"; {s['closed_pipes_unlisted']} closed pipes not itemised"
    if bad:
        text += f" ({bad} unreadable report line{'' if bad == 1 else 's'})"
    return text


def main(argv):
    as_json = "--json" in argv
    paths = [a for a in argv if a != "--json"]
    if paths and paths[0] == "--":
        paths = paths[1:]
    if not paths or any(p.startswith("-") for p in paths):
        sys.stderr.write(__doc__)
        return 2
    try:
        reports, bad = read_reports(paths)
    except OSError as e:
        sys.stderr.write(f"ppipe-stats-sum: {e}\n")
        return 2
    s = summarise(reports)
    if as_json:
        s["unreadable_lines"] = bad
        print(json.dumps(s))
    else:
        print(line(s, bad))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
