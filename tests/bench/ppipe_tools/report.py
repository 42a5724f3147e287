"""The run's report: the text tables (throughput, latency, CPU, the
overhead and api matrices, memory pressure) and the CSV rows
(ppipe-compare)."""

import csv
import math
import os
import statistics
import textwrap

from .matrices import (
    API_PRODUCE_NOTE, API_RATIOS, API_RATIO_OF, API_SIDES, CPU_METRICS,
    EMPTY_NOTE, NO_PRESSURE, OVERHEAD_WHAT, SIDES, api_sides, hops_label,
    is_overhead, is_program, label, result_sides, side_of, split_overhead,
    with_matrix)
from .stats import geomean, human_bytes, number, ratio


# A helper that takes more than this share of one CPU makes a pressure run
# measure CPU contention as well: the report says so.
HELPER_CPU_WARN = 0.5
CSV_FIELDS = ("matrix", "mode", "writers", "readers", "size", "pipe_size",
              "memory_pressure", "baseline_mbps", "shim_mbps", "ratio_mbps",
              "baseline_lat_avg_ns", "shim_lat_avg_ns", "baseline_lat_p99_ns",
              "shim_lat_p99_ns", "baseline_spread_mbps", "shim_spread_mbps",
              "hops")
# One long-table row per configuration and side, with --config.
MULTI_CSV_FIELDS = ("matrix", "mode", "writers", "readers", "size",
                    "pipe_size", "memory_pressure", "hops", "work_ns",
                    "config", "mbps", "ratio_mbps", "lat_avg_ns",
                    "lat_p50_ns", "lat_p99_ns", "spread_mbps",
                    "write_time_share")
# The overhead matrix's columns, after the others when it ran.
OVERHEAD_CSV_FIELDS = ("case", "n", "baseline_ns_per_op", "shim_ns_per_op",
                       "ratio_time")
MULTI_OVERHEAD_CSV_FIELDS = ("case", "n", "ns_per_op", "ratio_time")
# CPU per GiB moved, after every other column (whose places stay), when a
# throughput matrix ran.
CPU_CSV_FIELDS = (("baseline_cpu_s_per_gib", "shim_cpu_s_per_gib",
                   "ratio_cpu_per_gib")
                  + tuple(f"{side}_{key}" for key in CPU_METRICS[1:]
                          for side in SIDES))
MULTI_CPU_CSV_FIELDS = (CPU_METRICS[0], "ratio_cpu_per_gib") + CPU_METRICS[1:]
# The pipelines of real programs, last, when they ran.
PROGRAM_CSV_FIELDS = ("shape", "command", "bytes", "baseline_wall_s",
                      "shim_wall_s")
MULTI_PROGRAM_CSV_FIELDS = ("shape", "command", "bytes", "wall_s")
# The api matrix's sides and ratios, last, when it ran (ratio_mbps and
# ratio_cpu_per_gib, the library's transparent path over plain, are its
# columns as every matrix's).
API_CSV_FIELDS = (tuple(f"{side}_{key}" for side in API_SIDES
                        for key in ("mbps", "lat_avg_ns", "lat_p99_ns",
                                    "spread_mbps", "cpu_s_per_gib",
                                    "cpu_writers_s_per_gib"))
                  + ("ratio_writers_cpu_per_gib",)
                  + tuple(f"ratio{infix}_{suffix}"
                          for infix, _, _ in API_RATIOS[1:]
                          for suffix, _ in API_RATIO_OF))
# ...and the empty library's, when it ran beside the library.
EMPTY_CSV_FIELDS = ("empty_ns_per_op", "empty_ratio_time", "excess_time")
MULTI_EMPTY_CSV_FIELDS = ("excess_time",)


# ---------------------------------------------------------------- text


def fmt_scaled(value, missing, whole_from, small_digits):
    """@value with no decimals from @whole_from up, one from 10, else
    @small_digits; @missing for None."""
    if value is None:
        return missing
    if abs(value) >= whole_from:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.{small_digits}f}"


def fmt_num(value):
    """Compact number: more decimals for small values."""
    return fmt_scaled(value, "n/a", 100, 2)


def fmt_delta(a, b):
    """'(+21%)' for a -> b."""
    if not a or b is None:
        return "(n/a)"
    return f"({int(round((b / a - 1) * 100)):+d}%)"


def fmt_cpu(value):
    """CPU seconds per GiB, or a ratio of them: three decimals below 10;
    "-" where unknown (a result saved before CPU was measured)."""
    return fmt_scaled(value, "-", 1000, 3)


def is_cpu(key):
    """True for a CPU per GiB value (formatted by fmt_cpu)."""
    return key in CPU_METRICS


def pair_cells(pairs, fmt=fmt_num):
    """Format (a, b) pairs as equal-width 'a -> b (delta)' cells; a pair
    of two unknown CPU values is '-'."""
    nums = [(fmt(a), fmt(b)) for a, b in pairs]
    width = max((len(s) for p in nums for s in p), default=1)
    return ["-" if fmt is fmt_cpu and a is None and b is None else
            f"{x:>{width}} -> {y:>{width}} {fmt_delta(a, b):>7}"
            for (x, y), (a, b) in zip(nums, pairs)]


def table_lines(header, rows, indent=4, sep=3, align=None):
    """Align columns as align says ("r" or "l" per column); by default the
    first right-aligned, the others left-aligned."""
    widths = [max(len(r[i]) for r in [header] + rows)
              for i in range(len(header))]
    align = align or "r" + "l" * (len(header) - 1)
    lines = []
    for row in [header] + rows:
        cells = [cell.rjust(w) if how == "r" else cell.ljust(w)
                 for cell, w, how in zip(row, widths, align)]
        lines.append((" " * indent + (" " * sep).join(cells)).rstrip())
    return lines


def pressure_label(mp, mode=None):
    """Header words for the memory pressure setting (and its mode)."""
    if not mp:
        return "no memory pressure"
    if mode and "," in mode:
        return f"under each of: {mode.replace(',', ', ')}"
    return f"under memory pressure ({mode})" if mode else \
        "under memory pressure"


def group_by(rows, fields):
    """Group (result, ...) rows by result fields, keeping first-seen order."""
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row[0].get(f) for f in fields),
                          []).append(row)
    return groups


_SHIM = {"name": "libppipe"}


def set_shim_name(path):
    """Names the preload side after its library: libppipe, libppipe-passthru..."""
    base = os.path.basename(path or "") or "libppipe"
    _SHIM["name"] = base[:-3] if base.endswith(".so") else base


def shim_name():
    """The label of the preload side in tables and pictures."""
    return _SHIM["name"]


def side_name(side):
    """A side's name in the text: plain, the library's, or the --config's."""
    return {"baseline": "plain", "shim": shim_name()}.get(side, side)


class View:
    """What a set of tables shows: metrics, arrow label, header note, the
    heads of the ratio columns (MB/s, CPU per GiB)."""

    def __init__(self, metrics, arrow, note, ratio_head, cpu_ratio_head):
        self.metrics = metrics      # [(long title, short title, key)]
        self.arrow = arrow
        self.note = note
        self.ratio_head = ratio_head
        self.cpu_ratio_head = cpu_ratio_head


RUN_METRICS = [("Throughput in MB/s", "MB/s", "mbps"),
               ("Avg write latency in ns", "avg ns", "lat_avg_ns"),
               ("p99 write latency in ns", "p99 ns", "lat_p99_ns"),
               ("CPU seconds per GiB moved, lower is better", "CPU s/GiB",
                "cpu_s_per_gib")]
RATIO_METRICS = [("Throughput ratio libppipe/plain", "MB/s ratio", "mbps"),
                 ("Avg latency ratio libppipe/plain", "avg ratio",
                  "lat_avg_ns"),
                 ("p99 latency ratio libppipe/plain", "p99 ratio",
                  "lat_p99_ns"),
                 ("CPU per GiB ratio libppipe/plain, lower is better",
                  "CPU ratio", "cpu_s_per_gib")]
# The two-way table's CPU ratio column.
CPU_RATIO_HEAD = "CPU ratio (lower is better)"


def has_values(rows, key):
    """True if some row has the value on either side."""
    return any(row[i].get(key) is not None for row in rows for i in (1, 2))
# The work table's extra column: what write-behind could give back.
WRITE_SHARE = ("Share of the writers' time in write()", "in write()",
               "write_time_share")


def grid_tables(title, rows, view):
    """Writers x readers tables for one sweep group."""
    lines = list(title)
    writers = sorted({r[0]["writers"] for r in rows})
    readers = sorted({r[0]["readers"] for r in rows})
    for name, _, metric in view.metrics:
        if not has_values(rows, metric):
            continue
        pairs = [(r[1].get(metric), r[2].get(metric)) for r in rows]
        text = dict(zip(((r[0]["writers"], r[0]["readers"]) for r in rows),
                        pair_cells(pairs, fmt_cpu if is_cpu(metric)
                                   else fmt_num)))
        header = ["writers"] + [f"readers={n}" for n in readers]
        body = [[str(w)] + [text.get((w, n), "-") for n in readers]
                for w in writers]
        lines.append(f"  {name} ({view.arrow}, delta):")
        lines += table_lines(header, body)
    return lines


def keyed_table(title, rows, view, keys, extra=()):
    """One row per result: its key columns, a -> b cells per metric that
    some row has (and per extra metric that every row has on both sides),
    the ratio, and the CPU ratio where CPU was measured."""
    metrics = [m for m in view.metrics if has_values(rows, m[2])] + [
        m for m in extra
        if all(row[i].get(m[2]) is not None for row in rows for i in (1, 2))]
    columns = [pair_cells([(row[1].get(m), row[2].get(m)) for row in rows],
                          fmt_cpu if is_cpu(m) else fmt_num)
               for _, _, m in metrics]
    cpu = has_values(rows, "cpu_s_per_gib")
    header = [head for head, _ in keys] \
        + [f"{short} {view.arrow} (delta)" for _, short, _ in metrics] \
        + [view.ratio_head] + ([view.cpu_ratio_head] if cpu else [])
    body = []
    for i, row in enumerate(rows):
        rat = ratio(row[1]["mbps"], row[2]["mbps"])
        body.append([value(row[0]) for _, value in keys]
                    + [col[i] for col in columns]
                    + [f"{rat:.3f}" if rat is not None else "n/a"]
                    + ([fmt_cpu(ratio(row[1].get("cpu_s_per_gib"),
                                      row[2].get("cpu_s_per_gib")))]
                       if cpu else []))
    # A command reads from the left; numbers line up on the right.
    align = None if keys[0][0] != "pipeline" else \
        "l" * len(header)
    return list(title) + table_lines(header, body, indent=2, align=align)


PIPELINE_SHAPES = {1: "produce | consume",
                   2: "produce | relay | consume"}


def work_label(r):
    """A work row's work per write: '0', '5000 (1x)'."""
    return f"{r['work_ns']} ({r['work_x']}x)" if r["work_x"] else "0"


def work_unit_line(size, rows):
    """What 1x is in a work table, from its rows' work per write."""
    units = {row[0]["work_ns"] / row[0]["work_x"] for row in rows
             if row[0]["work_x"]}
    if len(units) != 1:
        return "work in ns before each write"
    unit = units.pop()
    return (f"work in ns before each write; 1x = {unit:.0f} ns, one "
            f"thread's memcpy of a write ({size / unit * 1e9 / (1 << 20):.0f}"
            " MB/s)")


def table_groups(rows, note):
    """The tables for (result, ...) rows, matrix by matrix, as (matrix,
    title lines, key columns, rows in table order); a key column is
    (header, function of a result)."""
    tables = []
    for (matrix,), mrows in group_by(rows, ("matrix",)).items():
        if matrix == "sweep":
            fields = ("mode", "size", "pipe_size", "memory_pressure")
        elif matrix in ("pipeline", "api"):
            fields = ("mode", "pipe_size", "memory_pressure")
        elif matrix == "work":
            fields = ("mode", "writers", "readers", "size", "pipe_size",
                      "memory_pressure")
        else:
            fields = ("mode", "writers", "readers", "pipe_size",
                      "memory_pressure")
        # memcg and hog runs of one file are tables of their own.
        fields += ("pressure_mode",)
        for key, grows in group_by(mrows, fields).items():
            k = dict(zip(fields, key))
            mode, pipe = k["mode"], human_bytes(k["pipe_size"])
            plabel = pressure_label(k["memory_pressure"],
                                    grows[0][0].get("pressure_mode"))
            where = f"{plabel} ({note}) =="
            if matrix == "sweep":
                title = [f"== {mode}: {k['size']} B writes, {pipe} pipe, "
                         f"{where}", ""]
                keys = [("W x R", lambda r: f"{r['writers']}x{r['readers']}")]
                order = ("writers", "readers")
            elif matrix == "pipeline" and mode == "programs":
                amounts = sorted({row[0]["bytes"] for row in grows})
                title = [f"== pipelines of real programs, {pipe} pipes, "
                         f"{where}",
                         "   sh -c COMMAND, the library in LD_PRELOAD of the "
                         "sh and so of every stage;",
                         f"   {' or '.join(map(human_bytes, amounts))} per "
                         "run, MB/s over the pipeline's wall time, CPU of "
                         "all its processes", ""]
                keys = [("pipeline", lambda r: r["command"])]
                # The order they ran in.
                order = ()
            elif matrix == "pipeline":
                shapes = "; ".join(
                    f"{hops_label(h)}: {PIPELINE_SHAPES.get(h, '...')}"
                    for h in sorted({row[0]["hops"] for row in grows}))
                title = [f"== {mode} pipelines of exec'd programs, {pipe} "
                         f"pipes, {where}", f"   {shapes}", ""]
                keys = [("hops", lambda r: str(r["hops"])),
                        ("size", lambda r: str(r["size"]))]
                order = ("hops", "size")
            elif matrix == "api":
                title = [f"== api {mode}: writers that generate every block, "
                         f"{pipe} pipe, {where}", ""]
                keys = [("W x R", lambda r: f"{r['writers']}x{r['readers']}"),
                        ("size", lambda r: str(r["size"]))]
                order = ("writers", "readers", "size")
            elif matrix == "work":
                title = [f"== {mode} {k['writers']}x{k['readers']}, "
                         f"{k['size']} B writes, {pipe} pipe, "
                         f"{plabel}: producer "
                         f"work per write ({note}) ==",
                         f"   {work_unit_line(k['size'], grows)}", ""]
                keys = [("work", work_label)]
                order = ("work_ns",)
            else:
                what = ("small writes, goal: no regression"
                        if matrix == "small" else "write-size sweep")
                title = [f"== {mode} {k['writers']}x{k['readers']}, {pipe} "
                         f"pipe, {plabel}: "
                         f"{what} ({note}) ==", ""]
                keys = [("size", lambda r: str(r["size"]))]
                order = ("size",)
            grows = sorted(grows, key=lambda row, o=order:
                           tuple(row[0][f] for f in o))
            tables.append((matrix, title, keys, grows))
    return tables


def report_tables(rows, view):
    """All tables for (result, a, b) rows, grouped by matrix."""
    lines = []
    for matrix, title, keys, grows in table_groups(rows, view.note):
        if matrix == "sweep":
            lines += grid_tables(title, grows, view)
        else:
            extra = (WRITE_SHARE,) if matrix == "work" else ()
            lines += keyed_table(title, grows, view, keys, extra)
        lines.append("")
    return lines


# The api matrix's tables: what each shows, its key and format.
API_VALUES = (("Throughput in MB/s", "mbps", fmt_num),
              ("CPU seconds per GiB moved, lower is better", "cpu_s_per_gib",
               fmt_cpu),
              ("The writers' CPU seconds per GiB moved, lower is better",
               "cpu_writers_s_per_gib", fmt_cpu))


def api_side_heads():
    """The api tables' value columns, side by side."""
    return {"baseline": "plain", "shim": shim_name(), "api": "API",
            "api_plain": "API plain"}


def api_ratio_heads():
    """The api tables' ratio columns, in the order of API_RATIOS."""
    heads = api_side_heads()
    return [f"{heads[num]}/{heads[den]}" for _, num, den in API_RATIOS]


def api_notes(results):
    """Lines under an api table about what the API runs found: a library
    that did not answer ppipe_version() (its API runs measured the
    header's fallback), libppipe in the runs without LD_PRELOAD."""
    lines = []
    if any(r["api"].get("ppipe_version", "") is None for r in results):
        lines.append(f"  note: {shim_name()} did not answer ppipe_version(): "
                     "the API column measured the header's fallback, not "
                     "libppipe's spans")
    if any(r["api_plain"].get("ppipe_version") for r in results):
        lines.append("  note: libppipe answered ppipe_version() in the runs "
                     "without LD_PRELOAD (preloaded system-wide?): API plain "
                     "is not the header's fallback")
    return lines


def api_tables(results, note):
    """The api matrix's tables, one set per mode (and pressure): MB/s, CPU
    per GiB and the writers' CPU per GiB of the four sides side by side,
    and the four ratios; the tables of CPU only where it was measured."""
    lines = []
    heads = api_side_heads()
    fields = ("mode", "pipe_size", "memory_pressure", "pressure_mode")
    for key, grows in group_by([(r,) for r in results], fields).items():
        mode, pipe, mp, pmode = key
        grows = sorted(grows, key=lambda row: (row[0]["writers"],
                                               row[0]["readers"],
                                               row[0]["size"]))
        legend = (f"{API_PRODUCE_NOTE}; plain: write() of the writer's "
                  f"buffer, no library; {heads['shim']}: the same write() "
                  "with LD_PRELOAD (the library's transparent path); API: "
                  "generated in place into ppipe_span_get() spans and "
                  "committed (ppipe.h), with LD_PRELOAD; API plain: the same "
                  "API program without the library (the header's buffers "
                  "and write())")
        lines += [f"== api {mode}: how writers hand each block to the pipe, "
                  f"{human_bytes(pipe)} pipe, {pressure_label(mp, pmode)} "
                  f"({note}) =="]
        lines += textwrap.wrap(legend, 96, initial_indent="   ",
                               subsequent_indent="   ") + [""]
        for title, value, fmt in API_VALUES:
            if all(row[0][side].get(value) is None for row in grows
                   for side in heads):
                continue
            suffix = next(s for s, v in API_RATIO_OF if v == value)
            header = ["W x R", "size"] + list(heads.values()) \
                + api_ratio_heads()
            body = [[f"{r['writers']}x{r['readers']}", str(r["size"])]
                    + [fmt(r[side].get(value)) for side in heads]
                    + [fmt_ratio(r.get(f"ratio{infix}_{suffix}"))
                       for infix, _, _ in API_RATIOS]
                    for (r,) in grows]
            lines.append(f"  {title}:")
            lines += table_lines(header, body, align="r" * len(header))
        lines += api_notes([r for (r,) in grows]) + [""]
    return lines


def api_summary_lines(results):
    """Geometric mean, min and max of each api ratio over the api results,
    for MB/s, CPU per GiB and the writers' CPU per GiB (where measured);
    per pressure condition when there are several."""
    if not results:
        return []
    conditions = len({r.get("pressure_mode") for r in results}) > 1
    lines = []
    for suffix, what in (("mbps", "MB/s"),
                         ("cpu_per_gib", "CPU per GiB moved (lower is "
                          "better)"),
                         ("writers_cpu_per_gib", "writers' CPU per GiB "
                          "moved (lower is better)")):
        parts = []
        for (mode,), rows in group_by([(r,) for r in results],
                                      ("pressure_mode",)).items():
            for (infix, _, _), head in zip(API_RATIOS, api_ratio_heads()):
                values = [v for v in (r.get(f"ratio{infix}_{suffix}")
                                      for (r,) in rows) if v]
                if not values:
                    continue
                where = f" ({mode or NO_PRESSURE})" if conditions else ""
                parts.append(f"{head}{where} geomean {geomean(values):.3f} "
                             f"(min {min(values):.3f}, max "
                             f"{max(values):.3f}, {len(values)} configs)")
        if parts:
            lines.append(f"Summary, api matrix {what}: " + "; ".join(parts))
    return lines


def fmt_share(value):
    """A share as a percentage, 'n/a' when unknown."""
    return "n/a" if value is None else f"{100 * value:.0f}%"


def fmt_ns(value):
    """A latency in ns, 'n/a' when unknown."""
    return "n/a" if value is None else f"{value:.0f}"


def side_by_side_tables(results, sides, note):
    """With --config: one row per configuration and side, with MB/s, the
    ratio to plain, write latency p50 and p99, and the writers' time share
    in write(); and, where it was measured, CPU seconds per GiB and its
    ratio to plain (lower is better)."""
    lines = []
    for _, title, keys, grows in table_groups([(r,) for r in results], note):
        cpu = any(side_of(r, side).get("cpu_s_per_gib") is not None
                  for (r,) in grows for side in sides)
        header = [head for head, _ in keys] + [
            "config", "MB/s", "ratio", "p50 ns", "p99 ns", "in write()"] \
            + (["CPU s/GiB", CPU_RATIO_HEAD] if cpu else [])
        body = []
        for (r,) in grows:
            for k, side in enumerate(sides):
                v = side_of(r, side)
                rat = v.get("ratio_mbps")
                body.append(
                    [value(r) if not k else "" for _, value in keys]
                    + [side_name(side), fmt_num(v["mbps"]),
                       "-" if side == "baseline" else
                       f"{rat:.3f}" if rat is not None else "n/a",
                       fmt_ns(v["lat_p50_ns"]), fmt_ns(v["lat_p99_ns"]),
                       fmt_share(v.get("write_time_share"))]
                    + ([fmt_cpu(v.get("cpu_s_per_gib")),
                        "-" if side == "baseline"
                        else fmt_cpu(v.get("ratio_cpu_per_gib"))]
                       if cpu else []))
        align = "r" * len(keys) + "l" + "r" * (7 if cpu else 5)
        lines += list(title) + table_lines(header, body, indent=2,
                                           align=align) + [""]
    return lines


def summary_line(rows, what):
    """Geometric mean, min and max of b/a throughput per matrix."""
    parts = []
    conditions = len({r[0].get("pressure_mode") for r in rows}) > 1
    for (matrix, mode), mrows in group_by(
            rows, ("matrix", "pressure_mode")).items():
        values = [ratio(r[1]["mbps"], r[2]["mbps"]) for r in mrows]
        values = [v for v in values if v]
        if not values:
            continue
        geo = math.exp(statistics.fmean(math.log(v) for v in values))
        if conditions:
            matrix += f" ({mode or NO_PRESSURE})"
        parts.append(f"{matrix} geomean {geo:.3f} "
                     f"(min {min(values):.3f}, max {max(values):.3f}, "
                     f"{len(values)} configs)")
    return f"Summary, {what} MB/s: " + "; ".join(parts)


def cpu_summary_line(rows, what):
    """Geometric mean, min and max of b/a CPU per GiB per matrix, where it
    was measured; None where it was nowhere."""
    parts = []
    conditions = len({r[0].get("pressure_mode") for r in rows}) > 1
    for (matrix, mode), mrows in group_by(
            rows, ("matrix", "pressure_mode")).items():
        values = [ratio(r[1].get("cpu_s_per_gib"), r[2].get("cpu_s_per_gib"))
                  for r in mrows]
        values = [v for v in values if v]
        if not values:
            continue
        if conditions:
            matrix += f" ({mode or NO_PRESSURE})"
        parts.append(f"{matrix} geomean {geomean(values):.3f} "
                     f"(min {min(values):.3f}, max {max(values):.3f}, "
                     f"{len(values)} configs)")
    if not parts:
        return None
    return (f"Summary, {what} CPU per GiB moved (lower is better): "
            + "; ".join(parts))


def overhead_what(c):
    """What an overhead row times, in words."""
    if c["case"] == "small":
        return f"{c['size']} B writes, a thread drains"
    return OVERHEAD_WHAT.get(c["case"], c["case"])


def fmt_ratio(value):
    """A time ratio: '1.034', or 'n/a'."""
    return f"{value:.3f}" if value is not None else "n/a"


def fmt_faults(result, sides):
    """Minor page faults per operation of the sides of an overhead row:
    '336.4 / 355.5 / 381.9', or 'n/a' from a ppipe-overhead that counts none."""
    values = [side_of(result, side).get("minflt_per_op") for side in sides]
    if any(v is None for v in values):
        return "n/a"
    return " / ".join(f"{v:.1f}" for v in values)


def fmt_excess(value):
    """An excess over the empty library: '+0.012', or 'n/a'."""
    return f"{value:+.3f}" if value is not None else "n/a"


def overhead_tables(results, sides, note, skipped, no_empty=None):
    """The overhead matrix's table: time per operation, plain -> library,
    and the time ratio (lower is better); with --config, one row per
    side. With the empty library, its time ratio and the library's excess
    over it. Rows left out (skipped: {case: why}) are named below it, and
    so is the empty library when it was left out (no_empty: why)."""
    if not results and not skipped:
        return []
    two_way = sides == ["baseline", "shim"]
    empty = any("empty" in r for r in results)
    # Page faults per operation, from a ppipe-overhead that counts them.
    faults = bool(results) and all("minflt_per_op" in r["baseline"] for r in results)
    who = shim_name() if two_way else "the library"
    lines = [f"== What {who} costs where it cannot help: time per operation "
             f"({note}) ==",
             f"   time ratio {shim_name() if two_way else 'config'}/plain, "
             "lower is better: 1.00 = free, above 1 = costs"]
    if empty:
        lines.append(f"   {EMPTY_NOTE}")
    lines.append("")
    if two_way:
        cells = pair_cells([(r["baseline"]["ns_per_op"],
                             r["shim"]["ns_per_op"]) for r in results])
        header = ["row", "N", "what", f"ns/op plain -> {shim_name()} (delta)",
                  "time ratio (lower is better)"]
        header += ["empty/plain", "excess"] if empty else []
        header += ["page faults/op plain" + (", empty" if empty else "")
                   + f", {shim_name()}"] if faults else []
        body = [[label(r), str(r["n"]), overhead_what(r), cell,
                 fmt_ratio(r["ratio_time"])]
                + ([fmt_ratio(r["empty"]["ratio_time"]),
                    fmt_excess(r.get("excess_time"))] if empty else [])
                + ([fmt_faults(r, ["baseline"] + (["empty"] if empty else [])
                               + ["shim"])] if faults else [])
                for r, cell in zip(results, cells)]
        align = "lrlll" + ("ll" if empty else "") + ("l" if faults else "")
    else:
        header = ["row", "N", "config", "ns/op",
                  "time ratio (lower is better)", "spread"]
        header += ["excess"] if empty else []
        header += ["page faults/op"] if faults else []
        body = []
        for r in results:
            row_sides = sides[:1] + (["empty"] if empty else []) + sides[1:]
            for k, side in enumerate(row_sides):
                v = side_of(r, side)
                body.append([label(r) if not k else "",
                             str(r["n"]) if not k else "", side_name(side),
                             fmt_num(v["ns_per_op"]),
                             "-" if side == "baseline" else
                             fmt_ratio(v.get("ratio_time")),
                             f"{100 * v['spread_ns_per_op']:.1f}%"]
                            + ([fmt_excess(v.get("excess_time"))
                                if side in sides[1:] else "-"]
                               if empty else [])
                            + ([fmt_faults(r, [side])] if faults else []))
        align = "lrlrrr" + ("r" if empty else "") + ("r" if faults else "")
    lines += table_lines(header, body, indent=2, align=align)
    lines += [f"  {case}: skipped, {why}" for case, why in skipped.items()]
    if no_empty:
        lines.append(f"  empty library: skipped, {no_empty}")
    return lines + [""]


def overhead_summary_line(results, side, what):
    """Geometric mean and worst row of one side's time ratios; with the
    empty library, its geometric mean and worst row, and the largest and
    mean excess of the side over it."""
    values = [(side_of(r, side).get("ratio_time") if side != "shim"
               else r.get("ratio_time"), r) for r in results]
    values = [(v, r) for v, r in values if v]
    if not values:
        return f"Summary, {what} time per operation (overhead): n/a"
    worst = max(values, key=lambda t: t[0])
    best = min(values, key=lambda t: t[0])
    line = (f"Summary, {what} time per operation (overhead, lower is "
            f"better): geomean {geomean([v for v, _ in values]):.3f} (worst "
            f"{label(worst[1])} {worst[0]:.3f}, best {label(best[1])} "
            f"{best[0]:.3f}, {len(values)} rows)")
    floors = [(r["empty"]["ratio_time"], r) for r in results
              if r.get("empty") and r["empty"].get("ratio_time")]
    extra = [((side_of(r, side) if side != "shim" else r).get("excess_time"),
              r) for r in results]
    extra = [(v, r) for v, r in extra if v is not None]
    if floors and extra:
        top = max(floors, key=lambda t: t[0])
        most = max(extra, key=lambda t: t[0])
        line += (f"; empty/plain geomean "
                 f"{geomean([v for v, _ in floors]):.3f} (worst "
                 f"{label(top[1])} {top[0]:.3f}); excess over empty: worst "
                 f"{label(most[1])} {most[0]:+.3f}, mean "
                 f"{statistics.fmean(v for v, _ in extra):+.3f}")
    return line


def overhead_spread_line(results):
    """The largest spread of ns/op across repetitions."""
    worst = max(((side_of(r, s)["spread_ns_per_op"], r, s) for r in results
                 for s in result_sides(r) + (["empty"] if "empty" in r
                                             else [])),
                key=lambda t: t[0])
    return (f"Max spread of ns/op across reps ((max-min)/median), overhead: "
            f"{worst[0] * 100:.1f}% ({label(worst[1])}, {worst[2]})")


def spread_line(results):
    """The largest spread of MB/s across repetitions."""
    worst = max(((side_of(r, s)["spread_mbps"], r, s) for r in results
                 for s in result_sides(r) + api_sides(r)), key=lambda t: t[0])
    return (f"Max spread of MB/s across reps ((max-min)/median): "
            f"{worst[0] * 100:.1f}% "
            f"({with_matrix(worst[1]['matrix'], label(worst[1]))}, "
            f"{worst[2]})")


def rep_pressure(rep):
    """A repetition's pressure evidence (ppipe-bench's "pressure"), or {}."""
    value = rep.get("pressure")
    return value if isinstance(value, dict) else {}


def helper_share(rep):
    """The pressure helpers' CPU time over the run, in CPUs, or None."""
    helper = rep_pressure(rep).get("helper")
    return number(helper.get("cpu_share")) if isinstance(helper, dict) \
        else None


RECLAIM_SCOPES = {"benchmark": "in the benchmark's own tasks",
                  "cgroup": "in the benchmark's memory cgroup",
                  "system": "anywhere on the system"}


def pressure_warning(results):
    """Warning lines: plain runs under pressure that saw no direct reclaim
    (libppipe's runs may rightly see none: it allocates no pipe pages), and
    helpers that took more than HELPER_CPU_WARN of one CPU, which makes a
    run measure CPU contention too."""
    bad, hot, scopes, helpers = [], [], set(), set()
    for r in results:
        base = r["baseline"]["reps"]
        scopes |= {rep_pressure(rep).get("direct_reclaim_scope")
                   for rep in base}
        n = sum(1 for rep in base
                if not rep_pressure(rep).get("direct_reclaim"))
        if n:
            bad.append(f"{label(r)} plain ({n} of {len(base)})")
        for side in result_sides(r):
            reps = side_of(r, side)["reps"]
            shares = [v for v in map(helper_share, reps) if v is not None]
            if shares and max(shares) > HELPER_CPU_WARN:
                hot.append(f"{label(r)} {side_name(side)} "
                           f"(up to {100 * max(shares):.0f}%)")
                helpers |= {str((rep_pressure(rep).get("helper") or {})
                                .get("what")) for rep in reps}
    bar = "!" * 72
    lines = []
    if bad:
        where = "; ".join(RECLAIM_SCOPES[s] for s in sorted(
            x for x in scopes if x in RECLAIM_SCOPES)) or "anywhere"
        lines += [bar,
                  "!! WARNING: these plain runs saw NO direct reclaim "
                  f"({where});",
                  "!! their numbers are not \"under memory pressure\" "
                  "numbers:"] + [f"!!   {b}" for b in bad] + [bar, ""]
    if hot:
        lines += [bar,
                  f"!! WARNING: the pressure's helpers ({', '.join(sorted(helpers))}) "
                  f"took more than {100 * HELPER_CPU_WARN:.0f}% of one CPU;",
                  "!! these runs measure CPU contention as well as memory "
                  "pressure:"] + [f"!!   {h}" for h in hot] + [bar, ""]
    return lines


def evidence_row(r):
    """A result's short name in the evidence table."""
    text = f"{r['matrix']} {r['mode']} {r['writers']}x{r['readers']} " \
        f"{r['size']} B"
    if r.get("work_x") is not None:
        text += f" work {r['work_x']}x"
    return text


def rep_evidence(rep):
    """(reclaimed, stall in us per second, limit hits or direct scans per
    second, helper CPU share) of one repetition; None where unknown."""
    pr = rep_pressure(rep)
    wall = number(pr.get("wall_s"))
    stall = number(pr.get("bench_stall_us"))
    memcg = pr.get("memcg_delta") if isinstance(pr.get("memcg_delta"),
                                                dict) else None
    vmstat = pr.get("vmstat_delta") if isinstance(pr.get("vmstat_delta"),
                                                  dict) else {}
    if memcg is not None:
        hits = number(memcg.get("max_events", memcg.get("failcnt")))
    else:
        hits = number(vmstat.get("pgscan_direct"))
    per_s = hits / wall if hits is not None and wall else None
    stall_per_s = stall / wall if stall is not None and wall else None
    return bool(pr.get("direct_reclaim")), stall_per_s, per_s, helper_share(rep)


def pressure_evidence(results):
    """The table of reclaim evidence per result and side: how many
    repetitions reclaimed, the benchmark's memory stall, the cgroup's limit
    hits (or the system's direct scans) per second, the helpers' CPU."""
    first = next((rep_pressure(rep) for r in results
                  for rep in r["baseline"]["reps"] if rep_pressure(rep)), {})
    if not first:
        return []
    method = first.get("method")
    mode = first.get("mode") or "memcg"
    rate = {"cgroup-v2": "memcg max/s", "cgroup-v1": "failcnt/s"}.get(
        method, "pgscan_direct/s")
    scope = RECLAIM_SCOPES.get(first.get("direct_reclaim_scope"),
                               "anywhere")
    lines = [f"== Memory pressure evidence: {mode}, {method}, "
             f"{first.get('stressor')} ==",
             f"   reclaim: repetitions with direct reclaim {scope}; stall: "
             "the benchmark's memory stall",
             f"   in us per second of the run (median); {rate}: "
             + ("the cgroup's limit hits" if method != "global" else
                "the system's direct reclaim scans")
             + " per second (median); helper CPU: share of one CPU (max)", ""]
    header = ["run", "side", "reclaim", "stall us/s", rate, "helper CPU"]
    body = []
    for r in results:
        for k, side in enumerate(result_sides(r)):
            reps = side_of(r, side)["reps"]
            ev = [rep_evidence(rep) for rep in reps]

            def med(i, ev=ev):
                vals = [e[i] for e in ev if e[i] is not None]
                return statistics.median(vals) if vals else None
            shares = [e[3] for e in ev if e[3] is not None]
            stall, hits = med(1), med(2)
            body.append([evidence_row(r) if not k else "", side_name(side),
                         f"{sum(e[0] for e in ev)}/{len(ev)}",
                         "n/a" if stall is None else f"{stall:.0f}",
                         "n/a" if hits is None else f"{hits:.0f}",
                         f"{100 * max(shares):.1f}%" if shares else "n/a"])
    return lines + table_lines(header, body, indent=2, align="llrrrr") + [""]


def paired_change(none, pressed):
    """The median over repetitions of (libppipe/plain under pressure) over
    (libppipe/plain without), repetition by repetition; None if unknown."""
    if not none or not pressed:
        return None
    values = []
    for a, b, c, d in zip(none["baseline"]["reps"], none["shim"]["reps"],
                          pressed["baseline"]["reps"], pressed["shim"]["reps"]):
        if a["mbps"] > 0 and b["mbps"] > 0 and c["mbps"] > 0:
            values.append((d["mbps"] / c["mbps"]) / (b["mbps"] / a["mbps"]))
    return statistics.median(values) if values else None


def conditions_table(results, modes, note):
    """With --memory-pressure=none,memcg,...: each configuration's ratio
    under each condition side by side, and what each pressure mode does to
    the ratio: in every repetition, the ratio under the mode over the ratio
    without pressure (both measured back to back, so that the machine's
    slower and faster spells fall on both), and the median of those."""
    if any("ratio_mbps" not in r for r in results):
        return []
    cells = {}
    for r in results:
        key = tuple(r.get(f) for f in ("matrix", "mode", "writers", "readers",
                                       "hops", "size", "pipe_size",
                                       "work_x"))
        cells.setdefault(key, {})[r.get("pressure_mode") or NO_PRESSURE] = r
    against = [m for m in modes if m != NO_PRESSURE] \
        if NO_PRESSURE in modes else []
    lines = [f"== Each configuration under each condition ({note}, "
             "interleaved in every repetition) ==",
             f"   plain -> {shim_name()} MB/s and the ratio per condition"
             + ("; vs none: the median over repetitions of the ratio under "
                "pressure over the ratio without it in the same repetition"
                if against else ""), ""]
    header = ["configuration"]
    for m in modes:
        header += [f"{m}: MB/s", "ratio"]
    header += [f"{m} vs none" for m in against]
    body, ratios = [], {m: [] for m in modes}
    change = {m: [] for m in against}
    for per in cells.values():
        first = next(iter(per.values()))
        row = [evidence_row(first)]
        for m in modes:
            r = per.get(m)
            if r is None:
                row += ["-", "-"]
                continue
            row += [f"{fmt_num(r['baseline']['mbps'])} -> "
                    f"{fmt_num(r['shim']['mbps'])}",
                    f"{r['ratio_mbps']:.2f}" if r["ratio_mbps"] else "n/a"]
            if r["ratio_mbps"]:
                ratios[m].append(r["ratio_mbps"])
        for m in against:
            v = paired_change(per.get(NO_PRESSURE), per.get(m))
            if v:
                change[m].append(v)
                row.append(f"{100 * (v - 1):+.0f}%")
            else:
                row.append("n/a")
        body.append(row)
    geo = ["geomean"]
    for m in modes:
        geo += ["", f"{geomean(ratios[m]):.2f}" if ratios[m] else "n/a"]
    geo += [f"{100 * (geomean(change[m]) - 1):+.0f}%" if change[m] else "n/a"
            for m in against]
    align = "l" + "rr" * len(modes) + "r" * len(against)
    return lines + table_lines(header, body + [geo], indent=2,
                               align=align) + [""]


def memcpy_line(results, memcpy_mbps, ring_mbps=None):
    """1 MiB pipe throughput as a share of one thread's memcpy, and of what a
    copy in and a copy out between two threads reach without a kernel."""
    if not memcpy_mbps:
        return []
    for r in results:
        if r["size"] == 1048576 and r["writers"] == 1 and r["readers"] == 1 \
                and r["matrix"] != "pipeline":
            b = r["baseline"]["mbps"]
            sides = result_sides(r)
            others = "".join(
                f", {side_name(side)} {side_of(r, side)['mbps']:.0f} MB/s "
                f"({100 * side_of(r, side)['mbps'] / memcpy_mbps:.0f}%)"
                for side in sides[1:])
            lines = [f"1 MiB writes, {r['mode']} 1x1: plain {b:.0f} MB/s "
                     f"({100 * b / memcpy_mbps:.0f}% of one thread's memcpy, "
                     f"{memcpy_mbps:.0f} MB/s){others}"]
            if ring_mbps:
                shares = ", ".join(
                    f"{side_name(side)} "
                    f"{100 * side_of(r, side)['mbps'] / ring_mbps:.0f}%"
                    for side in sides)
                lines.append(f"  of a copy in and a copy out between two threads "
                             f"without a kernel ({ring_mbps:.0f} MB/s, "
                             f"ppipe-bench --mode ring): {shares}")
            return lines
    return []


def program_skip_lines(settings):
    """The data the pipelines of real programs read, when they did, and
    the pipelines left out, and why."""
    programs = settings.get("programs") or {}
    skipped = programs.get("skipped") or {}
    lines = [f"  pipeline of real programs {shape}: skipped, {why}"
             for shape, why in skipped.items()]
    data = programs.get("data")
    if data:
        made = [f"{100 * v['bytes'] / programs['bytes']:.1f}% by "
                f"{v['command'].split(' -c ')[0]}"
                for v in data["compressed"].values()]
        lines.insert(0, "  data of the pipelines of real programs: "
                     f"{human_bytes(programs['bytes'])} of text-like lines, "
                     "made once"
                     + (f"; compressed to {', '.join(made)}" if made else ""))
    return lines + [""] if lines else []


def run_report(results, settings, memcpy_mbps=None, ring_mbps=None):
    """The text report for a finished run."""
    note = f"median of {settings['reps']}"
    sides = result_sides(results[0])
    results, over = split_overhead(results)
    over_settings = settings.get("overhead") or {}
    over_note = f"median of {over_settings.get('reps')}"
    skipped = over_settings.get("skipped") or {}
    no_empty = (over_settings.get("empty") or {}).get("skipped")
    pressured = [r for r in results if r.get("memory_pressure")]
    warning = pressure_warning(pressured) if pressured else []
    if sides == ["baseline", "shim"]:
        rows = [(r, r["baseline"], r["shim"]) for r in results]
        view = View(RUN_METRICS, f"plain -> {shim_name()}", note, "ratio",
                    CPU_RATIO_HEAD)
        api = [r for r in results if r["matrix"] == "api"]
        lines = warning + report_tables(
            [row for row in rows if row[0]["matrix"] != "api"], view)
        lines += api_tables(api, note)
        lines += program_skip_lines(settings)
        lines += overhead_tables(over, sides, over_note, skipped, no_empty)
        if rows:
            lines.append(summary_line(rows, f"{shim_name()}/plain"))
            lines += [line for line in [cpu_summary_line(
                rows, f"{shim_name()}/plain")] if line]
        lines += api_summary_lines(api)
    else:
        lines = warning + side_by_side_tables(results, sides, note)
        lines += program_skip_lines(settings)
        lines += overhead_tables(over, sides, over_note, skipped, no_empty)
        for side in sides[1:] if results else ():
            rows = [(r, r["baseline"], side_of(r, side)) for r in results]
            lines.append(summary_line(rows, f"{side}/plain"))
            lines += [line for line in [cpu_summary_line(
                rows, f"{side}/plain")] if line]
    if over:
        lines += [overhead_summary_line(over, side,
                                        f"{side_name(side)}/plain")
                  for side in sides[1:]]
    if results:
        lines.append(spread_line(results))
    if over:
        lines.append(overhead_spread_line(over))
    lines += memcpy_line(results, memcpy_mbps, ring_mbps)
    if settings.get("pressure_modes") and results:
        lines += [""] + conditions_table(results, settings["pressure_modes"],
                                         note)
    for mode in dict.fromkeys(r.get("pressure_mode") for r in pressured):
        lines += [""] + pressure_evidence(
            [r for r in pressured if r.get("pressure_mode") == mode])
    if any("NO direct reclaim" in w for w in warning):
        lines.append("WARNING: some plain runs saw no direct reclaim (see top).")
    if any("CPU contention" in w for w in warning):
        lines.append("WARNING: the pressure's helpers took more than "
                     f"{100 * HELPER_CPU_WARN:.0f}% of one CPU (see top).")
    return "\n".join(lines) + "\n"


def csv_cell(value):
    """A CSV cell: JSON's booleans, empty for None."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else value


def write_csv(path, results):
    """One row per configuration; with --config, one per configuration
    and side (plain is "baseline"). The overhead matrix's rows leave the
    throughput columns empty and fill their own, at the end (ratio_time
    is preloaded/plain time: lower is better), then the empty library's,
    when it ran beside the library (with --config, its rows follow
    plain's). CPU per GiB follows, when a throughput matrix ran, then the
    pipelines of real programs' own columns, when they ran, and the api
    matrix's sides and ratios last, when it ran."""
    over = any(is_overhead(r) for r in results)
    empty = any(is_overhead(r) and "empty" in r for r in results)
    cpu = not all(is_overhead(r) for r in results)
    progs = any(is_program(r) for r in results)
    api = any(api_sides(r) for r in results)
    # Which pressure mode, only in runs under one: memcg and hog apart.
    modes = ("pressure_mode",) if any(r.get("pressure_mode")
                                      for r in results) else ()
    with open(path, "w", encoding="utf-8", newline="") as f:
        out = csv.writer(f)
        if "configs" in results[0]:
            fields = MULTI_CSV_FIELDS + modes \
                + (MULTI_OVERHEAD_CSV_FIELDS if over else ()) \
                + (MULTI_EMPTY_CSV_FIELDS if empty else ()) \
                + (MULTI_CPU_CSV_FIELDS if cpu else ()) \
                + (MULTI_PROGRAM_CSV_FIELDS if progs else ())
            out.writerow(fields)
            for r in results:
                sides = result_sides(r)
                if "empty" in r:
                    sides.insert(1, "empty")
                for side in sides:
                    flat = dict(r, config=side, **side_of(r, side))
                    out.writerow([csv_cell(flat.get(k)) for k in fields])
            return
        # The work matrix's column only when it ran: other runs keep theirs.
        fields = CSV_FIELDS + (("work_ns",) if any("work_ns" in r
                                                   for r in results) else ())
        fields += modes
        fields += OVERHEAD_CSV_FIELDS if over else ()
        fields += EMPTY_CSV_FIELDS if empty else ()
        fields += CPU_CSV_FIELDS if cpu else ()
        fields += PROGRAM_CSV_FIELDS if progs else ()
        fields += API_CSV_FIELDS if api else ()
        out.writerow(fields)
        for r in results:
            flat = dict(r)
            flat.setdefault("hops", None)
            flat.setdefault("work_ns", None)
            if "empty" in r:
                flat["empty_ns_per_op"] = r["empty"]["ns_per_op"]
                flat["empty_ratio_time"] = r["empty"]["ratio_time"]
            for side in SIDES:
                if is_overhead(r):
                    flat[f"{side}_ns_per_op"] = r[side]["ns_per_op"]
                    continue
                for key in ("mbps", "lat_avg_ns", "lat_p99_ns",
                            "spread_mbps"):
                    flat[f"{side}_{key}"] = r[side][key]
                for key in CPU_METRICS + ("wall_s",):
                    flat[f"{side}_{key}"] = r[side].get(key)
            for side in api_sides(r):
                for key in ("mbps", "lat_avg_ns", "lat_p99_ns", "spread_mbps",
                            "cpu_s_per_gib", "cpu_writers_s_per_gib"):
                    flat[f"{side}_{key}"] = r[side].get(key)
            out.writerow([csv_cell(flat.get(k)) for k in fields])
