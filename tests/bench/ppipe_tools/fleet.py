"""The fleet table: many hosts' saved runs folded into one row per host,
kernel and kind of run, with geometric means per matrix, the worst cell
and a verdict ('ppipe-compare fleet')."""

import csv
import os
import re
import statistics
import sys

from .common import COMPARE as PROG
from .matrices import PRESSURE_MODES, is_overhead, label, with_matrix
from .report import csv_cell, table_lines
from .results import read_result, result_key
from .stats import geomean, is_number


# The fleet table's matrices: throughput ratios (libppipe/plain MB/s,
# higher is better) and the overhead matrix's time ratio (lower is
# better). work shows only when some run has it (--full).
FLEET_THROUGHPUT = ("sweep", "sizes", "small", "pipeline", "work")
FLEET_MATRICES = FLEET_THROUGHPUT + ("overhead",)
# The verdict (fleet --help; tests/bench/README.md, "The verdict").
# Where libppipe is meant to help: large writes.
FLEET_GAIN_MATRICES = ("sweep", "sizes", "pipeline", "work")
GAIN_AT = 1.10
THROUGHPUT_COST_BELOW = 0.95
OVERHEAD_COST_ABOVE = 1.10
FLEET_CSV_FIELDS = (("hostname", "kernel", "cpu", "run", "files")
                    + tuple(f"{m}_ratio_mbps" for m in FLEET_THROUGHPUT)
                    + ("overhead_ratio_time", "worst_matrix", "worst_row",
                       "worst_ratio", "verdict", "cpu_ratio_per_gib"))
FLEET_RULE = """\
Rows: one per host, kernel, CPU and kind of run (preset, library if not
libppipe.so, --env, --config side, memory pressure). Several files of one
row are merged: each cell's median ratio over the files, then the
geometric means per matrix.

Verdict, from a row's geometric means as shown (3 decimals):
  costs    overhead above {over:.2f} (what libppipe cannot speed up takes
           more than {percent}% longer), or a throughput matrix (sweep,
           sizes, small, pipeline, work) below {low:.2f}
  gains    no cost, and sweep, sizes, pipeline or work at least {gain:.2f}
  no gain  neither
A missing matrix (-) counts neither way. The worst cell is the row's
largest slowdown: 1/ratio for throughput, the ratio for overhead time.
CPU/GiB, the geometric mean over the throughput cells of libppipe/plain
CPU seconds per GiB moved (lower is better), is shown, not judged.
""".format(over=OVERHEAD_COST_ABOVE, low=THROUGHPUT_COST_BELOW, gain=GAIN_AT,
           percent=round(OVERHEAD_COST_ABOVE * 100) - 100)


def fleet_note(text):
    """One line about an input on stderr."""
    sys.stderr.write(f"{PROG} fleet: {text}\n")


def fleet_files(paths):
    """The files named: directories stand for their *.json files (not
    recursively, sorted by name)."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if n.endswith(".json")
                           and os.path.isfile(os.path.join(path, n)))
            if not names:
                fleet_note(f"{path}: no *.json files")
            files += [os.path.join(path, n) for n in names]
        else:
            files.append(path)
    return files


def run_kind(doc, side):
    """What kind of run a file's side is: preset, library if not
    libppipe.so, --env, --config name, memory pressure ('quick', 'full
    uring', 'quick libppipe-passthru PPIPE_MIN_WRITE=8192',
    'quick memory-pressure')."""
    settings = doc.get("settings") if isinstance(doc.get("settings"),
                                                 dict) else {}
    lib = doc.get("library") if isinstance(doc.get("library"), dict) else {}
    words = [str(settings.get("matrix") or "?")]
    name = os.path.basename(str(lib.get("path") or "libppipe.so"))
    # The library by any of its names: the link, the SONAME, the file.
    if not re.fullmatch(r"libppipe\.so(\.[0-9]+)*", name):
        words.append(name[:-3] if name.endswith(".so") else name)
    if isinstance(lib.get("env"), dict):
        words += [f"{k}={v}" for k, v in lib["env"].items()]
    if side != "shim":
        words.append(side)
    if settings.get("memory_pressure"):
        mode = settings.get("pressure_mode")
        words.append("memory-pressure" if mode in (None, PRESSURE_MODES[0])
                     else f"memory-pressure={mode}")
    return " ".join(words)


def fleet_ratio(r, side):
    """A result's ratio for one library side: MB/s libppipe/plain, or for
    the overhead matrix time libppipe/plain; None if it has none."""
    key = "ratio_time" if is_overhead(r) else "ratio_mbps"
    value = r.get(key) if side == "shim" else \
        (r["configs"].get(side) or {}).get(key)
    return value if is_number(value) and value > 0 else None


def fleet_cpu_ratio(r, side):
    """A throughput result's CPU per GiB ratio libppipe/plain for one
    library side; None if it has none (the overhead matrix, files saved
    before CPU was measured)."""
    value = r.get("ratio_cpu_per_gib") if side == "shim" else \
        (r["configs"].get(side) or {}).get("ratio_cpu_per_gib")
    return value if is_number(value) and value > 0 else None


def fleet_cells(doc):
    """{side: {cell key: (matrix, row label, ratio, CPU ratio or None)}}
    of one saved run."""
    sides = {}
    for r in doc["results"]:
        names = list(r["configs"]) if "configs" in r else ["shim"]
        for side in names:
            value = fleet_ratio(r, side)
            if value is not None:
                cells = sides.setdefault(side, {})
                cells[(r["matrix"],) + result_key(r)] = \
                    (r["matrix"], label(r), value, fleet_cpu_ratio(r, side))
    return sides


def slowdown(matrix, value):
    """How much slower a cell makes things: time ratio, or 1/throughput."""
    return value if matrix == "overhead" else 1 / value


def fleet_verdict(geo):
    """(verdict, reasons) from a row's geometric means (see FLEET_RULE)."""
    shown = {m: round(v, 3) for m, v in geo.items() if v is not None}
    costs = []
    if shown.get("overhead", 0) > OVERHEAD_COST_ABOVE:
        costs.append(f"overhead {shown['overhead']:.3f} > "
                     f"{OVERHEAD_COST_ABOVE:.2f}")
    costs += [f"{m} {shown[m]:.3f} < {THROUGHPUT_COST_BELOW:.2f}"
              for m in FLEET_THROUGHPUT
              if m in shown and shown[m] < THROUGHPUT_COST_BELOW]
    if costs:
        return "costs", costs
    gains = [f"{m} {shown[m]:.3f} >= {GAIN_AT:.2f}"
             for m in FLEET_GAIN_MATRICES
             if m in shown and shown[m] >= GAIN_AT]
    if gains:
        return "gains", gains
    return "no gain", [f"no {', '.join(FLEET_GAIN_MATRICES)} >= "
                       f"{GAIN_AT:.2f}"]


def fleet_row(key, runs):
    """One table row from the (path, cells) of the files of one host,
    kernel, CPU and kind of run."""
    hostname, kernel, cpu, kind = key
    merged, cpus = {}, {}
    for _, cells in runs:
        for cell, (matrix, name, value, cpu_ratio) in cells.items():
            merged.setdefault(cell, (matrix, name, []))[2].append(value)
            if cpu_ratio is not None:
                cpus.setdefault(cell, []).append(cpu_ratio)
    values = {cell: (matrix, name, statistics.median(vals))
              for cell, (matrix, name, vals) in merged.items()}
    cpu_cells = [statistics.median(vals) for vals in cpus.values()]
    geo, count = {}, {}
    for m in FLEET_MATRICES:
        mine = [v for matrix, _, v in values.values() if matrix == m]
        geo[m] = geomean(mine) if mine else None
        count[m] = len(mine)
    worst = None
    if values:
        matrix, name, value = max(values.values(),
                                  key=lambda t: slowdown(t[0], t[2]))
        worst = {"matrix": matrix, "row": name, "ratio": value,
                 "ratio_kind": "time" if matrix == "overhead"
                 else "throughput",
                 "slowdown": slowdown(matrix, value)}
    verdict, reasons = fleet_verdict(geo)
    return {"hostname": hostname, "kernel": kernel, "cpu": cpu, "run": kind,
            "files": [path for path, _ in runs], "geomean": geo,
            "cells": count, "worst": worst, "verdict": verdict,
            "reasons": reasons,
            "cpu_per_gib": {"geomean": geomean(cpu_cells) if cpu_cells
                            else None, "cells": len(cpu_cells)}}


def fleet_rows(files):
    """Read the files; return (rows, skipped [(path, why)])."""
    groups = {}
    skipped = []
    for path in files:
        doc, why = read_result(path, strict=False)
        if doc is None:
            fleet_note(f"{path}: skipped: {why}")
            skipped.append((path, why))
            continue
        host = doc.get("host") if isinstance(doc.get("host"), dict) else {}
        stem = os.path.basename(path)
        stem = stem[:-5] if stem.endswith(".json") else stem
        hostname = str(host.get("hostname") or stem)
        kernel = str(host.get("kernel") or "?")
        cpu = str(host.get("cpu") or "?")
        sides = fleet_cells(doc)
        if not sides:
            why = "no result with a ratio"
            fleet_note(f"{path}: skipped: {why}")
            skipped.append((path, why))
            continue
        present = {r["matrix"] for r in doc["results"]}
        missing = [m for m in FLEET_MATRICES if m not in present
                   and m != "work"]
        if missing:
            fleet_note(f"{path}: no {', '.join(missing)} results "
                       "(shown as - unless another file of its row has them)")
        for side, cells in sides.items():
            key = (hostname, kernel, cpu, run_kind(doc, side))
            groups.setdefault(key, []).append((path, cells))
    rows = [fleet_row(key, groups[key]) for key in sorted(groups)]
    return rows, skipped


def fleet_text(rows, files, skipped):
    """The fleet table as text."""
    matrices = [m for m in FLEET_MATRICES
                if m != "work" or any(r["geomean"]["work"] for r in rows)]
    lines = [f"{PROG} fleet: {len(files) - len(skipped)} of {len(files)} "
             f"files read, {len(rows)} rows",
             "Geometric means per matrix of libppipe/plain: throughput "
             f"ratios ({', '.join(m for m in matrices if m != 'overhead')}),"
             " higher is better;",
             "CPU/GiB: CPU seconds per GiB moved libppipe/plain over the "
             "throughput cells, lower is better (- where not measured);",
             "overhead: time ratio libppipe/plain, lower is better.", ""]
    throughput = [m for m in matrices if m != "overhead"]
    columns = throughput + ["CPU/GiB"] + \
        (["overhead"] if "overhead" in matrices else [])
    header = ["host", "kernel", "cpu", "run", "files"] + columns \
        + ["worst cell", "verdict", "why"]
    body = []
    for r in rows:
        worst = r["worst"]
        geo = dict(r["geomean"], **{"CPU/GiB": r["cpu_per_gib"]["geomean"]})
        body.append(
            [r["hostname"], r["kernel"], r["cpu"], r["run"],
             str(len(r["files"]))]
            + [f"{geo[m]:.3f}" if geo[m] is not None else "-"
               for m in columns]
            + [f"{with_matrix(worst['matrix'], worst['row'])}: "
               f"{worst['ratio']:.3f}"
               if worst else "-", r["verdict"], "; ".join(r["reasons"])])
    align = "lllll" + "r" * len(columns) + "lll"
    lines += table_lines(header, body, indent=2, align=align)
    verdicts = [r["verdict"] for r in rows]
    lines += ["", "Verdicts: " + ", ".join(
        f"{verdicts.count(v)} {v}" for v in ("gains", "no gain", "costs")),
        ""] + FLEET_RULE.rstrip("\n").splitlines()
    return "\n".join(lines) + "\n"


def write_fleet_csv(path, rows):
    """The fleet table as CSV, one row per table row."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        out = csv.writer(f)
        out.writerow(FLEET_CSV_FIELDS)
        for r in rows:
            worst = r["worst"] or {}
            out.writerow(
                [r["hostname"], r["kernel"], r["cpu"], r["run"],
                 len(r["files"])]
                + [csv_cell(r["geomean"][m]) for m in FLEET_MATRICES]
                + [csv_cell(worst.get(k)) for k in ("matrix", "row", "ratio")]
                + [r["verdict"], csv_cell(r["cpu_per_gib"]["geomean"])])
