"""Saved results: reading and checking a --json file, and what
'ppipe-compare compare' puts side by side."""

import json

from .common import Fatal, COMPARE as PROG
from .matrices import (
    API_SIDES, PRESSURE_MODES, api_sides, is_overhead, label, result_sides,
    side_of)
from .report import pair_cells, table_lines
from .stats import geomean, is_number, ratio


RESULT_KEYS = ("matrix", "mode", "writers", "readers", "size", "pipe_size",
               "memory_pressure", "baseline")
# A result holds these, or "configs" (a run with --config).
TWO_WAY_KEYS = ("shim", "ratio_mbps")
COMPARED = ("mbps", "lat_avg_ns", "lat_p99_ns")


def well_formed_overhead(r):
    """True if a saved overhead result has what compare and fleet read."""
    if not all(k in r for k in ("case", "n", "baseline")):
        return False
    if "configs" in r:
        if not isinstance(r["configs"], dict) or not r["configs"]:
            return False
        sides = [r["baseline"]] + list(r["configs"].values())
    elif "shim" in r and "ratio_time" in r:
        sides = [r["baseline"], r["shim"]]
    else:
        return False
    return all(isinstance(s, dict) and is_number(s.get("ns_per_op"))
               for s in sides)


def well_formed(r):
    """True if a saved result entry has what compare reads."""
    if isinstance(r, dict) and is_overhead(r):
        return well_formed_overhead(r)
    if not isinstance(r, dict) or not all(k in r for k in RESULT_KEYS):
        return False
    if r.get("matrix") == "pipeline" and "hops" not in r:
        return False
    if "configs" in r:
        if not isinstance(r["configs"], dict) or not r["configs"]:
            return False
        sides = [r["baseline"]] + list(r["configs"].values())
    elif all(k in r for k in TWO_WAY_KEYS):
        sides = [r["baseline"], r["shim"]]
    else:
        return False
    return all(isinstance(s, dict) and all(k in s for k in COMPARED)
               for s in sides)


def read_result(path, strict=True):
    """Load a saved --json result: (document, None), or (None, why not).
    strict: every result entry must be well formed; else the malformed
    ones are dropped, and only a document without any is refused."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        return None, exc.strerror
    except (ValueError, UnicodeDecodeError):
        return None, "not a ppipe-compare result (not JSON)"
    problem = None
    if isinstance(doc, dict) and doc.get("tool") == f"{PROG} fleet":
        problem = "a fleet table, not a run"
    elif not isinstance(doc, dict) or doc.get("tool") != PROG:
        problem = "tool is not ppipe-compare"
    elif not isinstance(doc.get("results"), list) or not doc["results"]:
        problem = "no results"
    elif strict and not all(well_formed(r) for r in doc["results"]):
        problem = "malformed result entry"
    elif not any(well_formed(r) for r in doc["results"]):
        problem = "no well-formed result entry"
    if problem:
        return None, f"not a ppipe-compare result ({problem})"
    if not strict:
        doc = dict(doc, results=[r for r in doc["results"] if well_formed(r)])
    return doc, None


def load_result(path):
    """Load and sanity-check a saved --json result."""
    doc, why = read_result(path)
    if doc is None:
        raise Fatal(f"{PROG}: compare: {path}: {why}", 2)
    return doc


def result_key(r):
    """What makes two results comparable. Work cells match by their
    multiple of the copy time: each run measures its own. Overhead rows
    match by case and write size; pipelines of real programs by their
    shape, whatever each run's amount."""
    if is_overhead(r):
        return ("overhead", r["case"], r.get("size"))
    return (r["mode"], r["writers"], r["readers"], r.get("hops"), r["size"],
            r["pipe_size"], r["memory_pressure"], result_pressure_mode(r),
            r.get("work_x"), r.get("shape")) \
        + (("api",) if r.get("matrix") == "api" else ())


def result_pressure_mode(r):
    """A result's pressure mode: files from before the modes existed ran
    the memcg filler."""
    if not r.get("memory_pressure"):
        return None
    return r.get("pressure_mode") or PRESSURE_MODES[0]


def side_values(r, side):
    """The values compared for one result: a side's medians or the ratios."""
    if is_overhead(r):
        if side != "ratio":
            return side_of(r, side)
        return {"ns_per_op": r.get("ratio_time")}
    if side != "ratio":
        return side_of(r, side)
    return {"mbps": r.get("ratio_mbps"), "lat_avg_ns": r.get("ratio_lat_avg"),
            "lat_p99_ns": r.get("ratio_lat_p99"),
            "cpu_s_per_gib": r.get("ratio_cpu_per_gib")}


def compare_overhead_lines(rows, side, notes):
    """compare's overhead table for (result, A values, B values) rows:
    time per operation (or, for the ratio side, the time ratio) A -> B,
    and its summary line; lower is better in both."""
    if not rows:
        return []
    what = "time ratio" if side == "ratio" else "ns/op"
    cells = pair_cells([(a["ns_per_op"], b["ns_per_op"]) for _, a, b in rows])
    body = []
    values = []
    for (r, a, b), cell in zip(rows, cells):
        rat = ratio(a["ns_per_op"], b["ns_per_op"])
        body.append([label(r), cell, f"{rat:.3f}" if rat else "n/a"])
        if rat:
            values.append((rat, r))
    lines = [f"== Overhead: time per operation, lower is better ({notes}) ==",
             ""]
    lines += table_lines(["row", f"{what} A -> B (delta)", "B/A"], body,
                         indent=2, align="lll")
    lines.append("")
    if values:
        worst = max(values, key=lambda t: t[0])
        lines.append(f"Summary, B/A {side} time per operation (overhead, "
                     f"lower is better): geomean "
                     f"{geomean([v for v, _ in values]):.3f} (worst "
                     f"{label(worst[1])} {worst[0]:.3f}, {len(values)} rows)")
    return lines


def check_side(path, doc, side):
    """Fail unless every result of a saved run has the side compared (the
    api matrix's own sides: unless none has it)."""
    if side in API_SIDES:
        if not any(side in api_sides(r) for r in doc["results"]):
            raise Fatal(f"{PROG}: compare: {path}: no side {side!r} (only "
                        "the api matrix's results have it)", 2)
        return
    for r in doc["results"]:
        sides = result_sides(r) + ([] if "configs" in r else ["ratio"])
        if side not in sides:
            raise Fatal(f"{PROG}: compare: {path}: no side {side!r} (it has "
                        f"{', '.join(sides)})", 2)


def describe(tag, path, doc):
    """One-line description of a saved run."""
    host = doc.get("host") or {}
    lib = doc.get("library") or {}
    env = " ".join(f"{k}={v}" for k, v in (lib.get("env") or {}).items())
    names = [c.get("name", "?") for c in lib.get("configs") or []
             if isinstance(c, dict)]
    return (f"{tag}: {path}: {doc.get('created', '?')}, kernel "
            f"{host.get('kernel', '?')}, cpu {host.get('cpu') or '?'}, "
            f"library {lib.get('path', '?')}" + (f" {env}" if env else "")
            + (f", configs {' '.join(names)}" if names else ""))
