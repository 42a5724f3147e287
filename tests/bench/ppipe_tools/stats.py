"""Numbers: medians and spreads of repetitions, ratios, geometric means,
the test for a number, byte units (ppipe-compare)."""

import math
import statistics

from .matrices import METRICS, OPTIONAL_METRICS


def summarize(reps):
    """Medians and spread of one side's repetitions: each value's median,
    None where a repetition lacks it (a pipeline of real programs has no
    write latency; its wall time is its own)."""
    side = {}
    for key in METRICS + OPTIONAL_METRICS + (
            ("wall_s",) if "wall_s" in reps[0] else ()):
        values = [r.get(key) for r in reps]
        side[key] = statistics.median(values) \
            if None not in values else None
    values = [r["mbps"] for r in reps]
    side["spread_mbps"] = (max(values) - min(values)) / side["mbps"]
    side["reps"] = reps
    return side


def summarize_time(reps):
    """Median and spread of one side's times per operation."""
    values = [r["ns_per_op"] for r in reps]
    median = statistics.median(values)
    out = {"ns_per_op": median,
           "spread_ns_per_op": (max(values) - min(values)) / median,
           "reps": reps}
    # Minor page faults per operation (an older ppipe-overhead prints none).
    faults = [r["minflt_per_op"] for r in reps if "minflt_per_op" in r]
    if len(faults) == len(reps) and faults:
        out["minflt_per_op"] = statistics.median(faults)
    return out


def ratio(a, b):
    """b / a, or None when either is missing or a is zero."""
    return b / a if a and b is not None else None


def excess(value, floor):
    """The library's time ratio minus the empty library's, or None."""
    return value - floor if value is not None and floor is not None else None


def human_bytes(n):
    """1048576 -> '1 MiB', 65536 -> '64 KiB'."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def geomean(values):
    """Geometric mean of positive numbers."""
    return math.exp(statistics.fmean(math.log(v) for v in values))


def number(value):
    """value if it is a number (not a boolean), else None."""
    return value if isinstance(value, (int, float)) \
        and not isinstance(value, bool) else None


def is_number(value):
    """True for an int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
