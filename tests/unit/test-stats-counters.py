#!/usr/bin/env python3
"""ppipe-stats-sum reads PPIPE_COUNTERS files: text, JSON and Prometheus.

usage: test-stats-counters.py PPIPE-STATS-SUM text|prometheus

Writes counters files in the format of shim/hostcounters.h (made here, from
the format, not by the library), beside reports, and checks:

  text        files told from reports by their magic (never "unreadable
              lines"); one line per uid, files of one uid added up; JSON
              exact; a file of another version or a damaged one skipped and
              named; a shard locked by a writer that never lets go is read
              anyway (unlocked, counted); a report line cut short is skipped
              and counted while the whole report after it is read.
  prometheus  --prometheus parses with prometheus_client's parser
              (text_string_to_metric_families) and passes `promtool check
              metrics`, whichever is installed; names and units
              (_total, _bytes_total, _seconds_total), HELP, a uid label per
              series, values exact (nanoseconds as seconds). Exit 77 if
              neither is installed. prometheus_client is looked for in this
              Python, then in the system's /usr/bin/python3 (Debian's
              python3-prometheus-client installs it there).
"""
import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

EXIT_SKIP = 77
HEADER = struct.Struct("=8s10IQ8x")
HSIZE, SHARDS, SHARD, SLOTS, NAME, HELP = 12288, 32, 512, 64, 32, 96
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL " + what)


def make_counters(path, uid, per_shard, names=None, version=1):
    """A counters file: per_shard is {shard: {name: value}}."""
    names = names or ["processes", "processes_accelerated", "accelerated_bytes",
                      "passthrough_bytes", "passthrough_large_bytes", "fallbacks", "efaults",
                      "accelerated_write_ns"]
    data = bytearray(HSIZE + SHARDS * SHARD)
    HEADER.pack_into(data, 0, b"PPIPECNT", version, HSIZE, SHARDS, SHARD, SLOTS, NAME, HELP,
                     len(names), uid, 0, 1700000000)
    for i, n in enumerate(names):
        data[64 + i * NAME:64 + i * NAME + len(n)] = n.encode()
        h = f"help of {n}".encode()
        at = 64 + SLOTS * NAME + i * HELP
        data[at:at + len(h)] = h
    for shard, values in per_shard.items():
        for n, v in values.items():
            struct.pack_into("=Q", data, HSIZE + shard * SHARD + names.index(n) * 8, v)
    with open(path, "wb") as f:
        f.write(data)


def run(script, *args):
    return subprocess.run([sys.executable, script] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=60)


def report(pid, acc):
    return json.dumps({"pid": pid, "totals": {"bytes_accelerated": acc, "bytes_passthrough": 0},
                       "fds": [], "closed_pipes": []})


def case_text(script, base):
    d = os.path.join(base, "mixed")
    os.mkdir(d)
    make_counters(os.path.join(d, "counters-1000"), 1000,
                  {0: {"processes": 3, "accelerated_bytes": 3 << 20,
                       "accelerated_write_ns": 1500000000},
                   31: {"processes": 2, "processes_accelerated": 2,
                        "accelerated_bytes": 1 << 20, "passthrough_large_bytes": 1 << 20}})
    make_counters(os.path.join(d, "counters-0"), 0, {5: {"processes": 1, "fallbacks": 4}})
    other = os.path.join(base, "elsewhere-1000")
    make_counters(other, 1000, {7: {"processes": 10}})
    make_counters(os.path.join(d, "counters-v2"), 1001, {0: {"processes": 1}}, version=2)
    with open(os.path.join(d, "counters-cut"), "wb") as f:
        with open(os.path.join(d, "counters-0"), "rb") as g:
            f.write(g.read()[:20000])
    # Reports, one of them cut short by a kill, the next whole on its own line.
    cut = report(42, 100)[:30]
    with open(os.path.join(d, "stats.json"), "w") as f:
        f.write(report(41, 1 << 20) + "\n" + cut + "\n" + report(43, 1 << 20) + "\n")

    r = run(script, "--json", d, other)
    check(r.returncode == 0, f"json: exit {r.returncode}: {r.stderr}")
    s = json.loads(r.stdout)
    check(s["unreadable_lines"] == 1, f"json: unreadable lines {s['unreadable_lines']}, want 1 "
          "(the cut report; counters files are not report lines)")
    check(s["processes"] == 2 and s["bytes_accelerated"] == 2 << 20, f"json: reports {s}")
    want = {"1000": {"processes": 15, "processes_accelerated": 2, "accelerated_bytes": 4 << 20,
                     "passthrough_bytes": 0, "passthrough_large_bytes": 1 << 20,
                     "fallbacks": 0, "efaults": 0, "accelerated_write_ns": 1500000000},
            "0": {"processes": 1, "processes_accelerated": 0, "accelerated_bytes": 0,
                  "passthrough_bytes": 0, "passthrough_large_bytes": 0, "fallbacks": 4,
                  "efaults": 0, "accelerated_write_ns": 0}}
    check(s["counters"] == want, f"json: counters\n  {s['counters']}\nwant\n  {want}")
    skipped = {os.path.basename(x["path"]): x["why"] for x in s["counters_files_skipped"]}
    check(set(skipped) == {"counters-v2", "counters-cut"} and "version 2" in
          skipped["counters-v2"], f"json: skipped {skipped}")
    check(len(s["counters_files"]) == 3, f"json: files read {s['counters_files']}")

    text = run(script, d, other).stdout.splitlines()
    check(len(text) == 5, f"text: {len(text)} lines: {text}")
    check(text and text[0].endswith("(1 unreadable report line)"), f"text: {text[:1]}")
    want_line = ("libppipe counters, uid 1000: 15 processes (2 accelerated), 4.00 MiB "
                 "accelerated (80.0% of large-write bytes), 0 B passed through (1.00 MiB in "
                 "large writes), 0 fallbacks, 0 efaults, 1.50 s in accelerated writes")
    check(want_line in text, f"text: no line\n  {want_line}\nin\n  {text}")
    check(any("counters-v2 skipped: version 2" in ln for ln in text), f"text: {text}")
    # Only counters files: no line about reports.
    text = run(script, other).stdout.splitlines()
    check(len(text) == 1 and text[0].startswith("libppipe counters, uid 1000: 10 processes"),
          f"text, counters only: {text}")


def case_locked(script, base):
    """A writer that holds a shard's lock and never lets go: read anyway."""
    path = os.path.join(base, "locked")
    make_counters(path, 7, {3: {"processes": 5}, 4: {"processes": 6}})
    fd = os.open(path, os.O_RDWR)
    lock = struct.pack("=hhxxxxqqixxxx", fcntl.F_WRLCK, os.SEEK_SET, HSIZE + 3 * SHARD, SHARD,
                       0)
    fcntl.fcntl(fd, getattr(fcntl, "F_OFD_SETLK", 37), lock)
    try:
        r = run(script, "--json", path)
    finally:
        os.close(fd)
    s = json.loads(r.stdout)
    check(s["counters"].get("7", {}).get("processes") == 11,
          f"locked shard: {s['counters']}")
    check(s["counters_files"][0]["unlocked_shards"] == 1,
          f"locked shard: {s['counters_files']}")


def system_python_with_client():
    """This Python if it has prometheus_client, else the system's, else None."""
    try:
        import prometheus_client  # noqa: F401
        return sys.executable
    except ImportError:
        pass
    for py in ("/usr/bin/python3",):
        if os.path.exists(py) and subprocess.run(
                [py, "-c", "import prometheus_client"], stderr=subprocess.DEVNULL).returncode == 0:
            return py
    return None


PARSE = """
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    out.append({"name": fam.name, "type": fam.type, "help": fam.documentation,
                "samples": [[s.name, s.labels, s.value] for s in fam.samples]})
print(json.dumps(out))
"""


def case_prometheus(script, base):
    d = os.path.join(base, "prom")
    os.mkdir(d)
    make_counters(os.path.join(d, "c-1000"), 1000,
                  {0: {"processes": 3, "accelerated_bytes": 12345,
                       "accelerated_write_ns": 2000000001}})
    make_counters(os.path.join(d, "c-0"), 0, {9: {"processes": 1, "fallbacks": 2}})
    r = run(script, "--prometheus", d)
    check(r.returncode == 0, f"prometheus: exit {r.returncode}: {r.stderr}")
    text = r.stdout
    ran = 0
    py = system_python_with_client()
    if py:
        ran += 1
        p = subprocess.run([py, "-c", PARSE], input=text, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
        check(p.returncode == 0, f"prometheus_client: cannot parse:\n{p.stderr}\n{text}")
        fams = {f["name"]: f for f in json.loads(p.stdout)} if p.returncode == 0 else {}
        want = {
            "ppipe_processes": ("counter", "ppipe_processes_total", {"1000": 3, "0": 1}),
            "ppipe_accelerated_bytes": ("counter", "ppipe_accelerated_bytes_total",
                                        {"1000": 12345, "0": 0}),
            "ppipe_accelerated_write_seconds": (
                "counter", "ppipe_accelerated_write_seconds_total",
                {"1000": 2.000000001, "0": 0}),
            "ppipe_fallbacks": ("counter", "ppipe_fallbacks_total", {"1000": 0, "0": 2}),
        }
        for name, (typ, sample, values) in want.items():
            f = fams.get(name)
            check(f is not None and f["type"] == typ, f"prometheus_client: family {name}: {f}")
            if not f:
                continue
            got = {s[1].get("uid"): s[2] for s in f["samples"] if s[0] == sample}
            check(got == values, f"prometheus_client: {sample} {got}, want {values}")
            check(f["help"] == "libppipe: help of " + name[len("ppipe_"):].replace(
                "_seconds", "_ns"), f"prometheus_client: help of {name}: {f['help']!r}")
        check(fams.get("ppipe_counters_files_skipped", {}).get("type") == "gauge",
              "prometheus_client: the skipped-files gauge")
        print(f"prometheus_client ({py}): {len(fams)} families parsed")
    promtool = shutil.which("promtool")
    if promtool:
        ran += 1
        p = subprocess.run([promtool, "check", "metrics"], input=text, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
        check(p.returncode == 0 and not p.stdout.strip(),
              f"promtool check metrics: exit {p.returncode}: {p.stdout}")
        print("promtool check metrics: clean")
    return ran


def main(argv):
    if len(argv) != 2 or argv[1] not in ("text", "prometheus"):
        print(__doc__)
        return 99
    script = os.path.abspath(argv[0])
    base = tempfile.mkdtemp(prefix="ppipe-counters-sum-")
    try:
        if argv[1] == "text":
            case_text(script, base)
            case_locked(script, base)
        elif not case_prometheus(script, base):
            print("SKIP: neither prometheus_client nor promtool is installed")
            return EXIT_SKIP
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
