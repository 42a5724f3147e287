"""The soak's accounting: the libppipe reports of the tree's processes,
the accelerated share, one line per interval, and the verdict against
the acceptance criteria (ppipe-soak)."""

import json
import os
import sys

from .soak_stream import GROWTH, MIB, RING_FLOOR, SHARE_POINTS


def passthrough_reasons(report, reasons):
    """Adds a report's passed-through bytes to reasons, by why: the pipe's
    reason where it took the plain path for good, else its last kind of
    fallback, else small writes (which an accelerated pipe takes too)."""
    stories = {}
    for f in report.get("fds", []):
        stories.setdefault(f.get("inode"), f)      # both ends share a pipe's counters
    for pipe in list(stories.values()) + report.get("closed_pipes", []):
        n = pipe.get("bytes_passthrough", 0)
        if not n:
            continue
        if pipe.get("path") == "passthrough":
            why = pipe.get("reason") or "plain"
        else:
            why = pipe.get("last_fallback") or "writes below PPIPE_MIN_WRITE"
        reasons[why] = reasons.get(why, 0) + n


def collect_reports(stats_dir):
    """Sums and removes the PPIPE_STATS reports of the tree's processes that
    ended since the last call: (reports, bytes accelerated, bytes passed
    through, {why: bytes passed through})."""
    n = acc = pas = 0
    reasons = {}
    for name in os.listdir(stats_dir):
        path = os.path.join(stats_dir, name)
        try:
            with open(path, errors="replace") as f:
                text = f.read()
            os.unlink(path)
        except OSError:
            continue
        for line in text.splitlines():
            try:
                report = json.loads(line)
                totals = report["totals"]
                acc += int(totals["bytes_accelerated"])
                pas += int(totals["bytes_passthrough"])
                n += 1
                passthrough_reasons(report, reasons)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
    return n, acc, pas, reasons


def accelerated_share(accelerated, large_written):
    """The share (percent) of the tree's large-write bytes that went by vmsplice.

    accelerated: what libppipe counted as accelerated in the tree's
    processes that reported (bytes_accelerated). large_written: what those
    processes wrote into pipes in calls of MIN_WRITE or more, from the
    soak's own ledger of its shapes, not from libppipe's counters: a pipe
    libppipe stopped tracking (its registry full) is counted neither
    accelerated nor passed through, and a share of the counted bytes alone
    would not drop. None when nothing large was written."""
    if not large_written:
        return None
    return 100.0 * min(accelerated, large_written) / large_written


class Interval:
    """One report period, from its results, the reports and samples."""

    def __init__(self, index, start, end, tally, reports, driver_delta, driver, samples, rest,
                 ring_source):
        self.index = index
        self.seconds = end - start
        self.shapes = tally.shapes
        self.runs = tally.runs
        self.verified = tally.verified
        self.failures = tally.failures
        self.failed = tally.failed
        self.unexpected = tally.unexpected
        self.bytes_lost = tally.bytes_lost
        self.data_errors = tally.data_errors
        n, acc, pas, reasons = reports
        acc += driver_delta["bytes_accelerated"]
        pas += driver_delta["bytes_passthrough"]
        small, large = tally.small, tally.large
        # At least this many large-write bytes went into pipes libppipe did
        # not track at all (it counted them neither way): a pipe end received
        # over a socket, any pipe handed on once the registry is full. (Small
        # writes to an inherited end it never took over are not counted
        # either, so this is a lower bound.)
        self.accel = {"reports": n, "bytes_accelerated": acc, "bytes_passthrough": pas,
                      "small_written": small, "large_written": large,
                      "large_untracked": max(0, large - acc - pas),
                      "this_process": dict(driver_delta),
                      "passthrough_by_reason": dict(sorted(reasons.items(),
                                                           key=lambda kv: -kv[1]))}
        self.share = accelerated_share(acc, large)
        self.registry = {k[len("registry_"):]: v for k, v in driver.items()
                         if k.startswith("registry_")}
        self.ring = {"source": ring_source,
                     "mean": int(sum(samples["ring"]) / len(samples["ring"])) if samples["ring"]
                     else rest["ring"],
                     "max": max(samples["ring"] + [rest["ring"]]), "rest": rest["ring"],
                     "samples": len(samples["ring"])}
        self.rss = {"rest": rest["rss"], "max": max(samples["rss"] + [rest["rss"]])}
        self.hygiene = {"fds": rest["fds"], "children": rest["children"],
                        "zombies": rest["zombies"]}

    def json(self):
        return {"index": self.index, "seconds": round(self.seconds, 3), "shapes_run": self.runs,
                "shapes": self.shapes, "bytes_verified": self.verified,
                "failed": self.failed, "bytes_lost": self.bytes_lost,
                "data_errors": self.data_errors, "failures": self.failures, "accelerated": self.accel,
                "accelerated_share": None if self.share is None else round(self.share, 3),
                "registry": self.registry, "ring_bytes": self.ring, "rss_bytes": self.rss,
                "at_rest": self.hygiene}


HEADER = (f"{'time':>7}  {'shapes':>6}  {'failed':>6}  {'MiB checked':>11}  {'accel %':>7}  "
          f"{'registry slots':>14}  {'records':>11}  {'reclaimed':>9}  "
          f"{'ring KiB mean/max/rest':>22}  {'RSS MiB':>7}")


def line(iv, elapsed):
    share = "-" if iv.share is None else f"{iv.share:.1f}"
    reg = iv.registry
    ring = f"{iv.ring['mean'] >> 10}/{iv.ring['max'] >> 10}/{iv.ring['rest'] >> 10}"
    failed = iv.failed
    return (f"{elapsed:>6.0f}s  {iv.runs:>6}  {failed:>6}  {iv.verified / MIB:>11.1f}  {share:>7}  "
            f"{reg['slots']:>6}/{reg['slots_max']:<7}  {reg['records']:>5}/{reg['records_max']:<5}  "
            f"{reg['reclaimed']:>9}  {ring:>22}  {iv.rss['rest'] / MIB:>7.1f}")


def verdict(intervals, warm, baseline, extra_failures):
    """The acceptance criteria, each {"ok", ...}; intervals from the
    baseline on are judged against the baseline's. warm: the warm-up's Tally."""
    out = {}
    lost = sum(iv.bytes_lost for iv in intervals) + warm.bytes_lost
    errors = sum(iv.data_errors for iv in intervals) + warm.data_errors
    out["bytes"] = {"ok": lost == 0 and errors == 0, "bytes_lost": lost, "data_errors": errors,
                    "rule": "no byte lost or altered"}
    failed = sum(iv.unexpected for iv in intervals) + warm.unexpected
    out["shapes"] = {"ok": not failed and not extra_failures,
                     "failed": failed + len(extra_failures),
                     "rule": "no shape fails unexpectedly (an error, a hang); the soak itself "
                             "leaves no child and no fd behind"}
    if extra_failures:
        out["shapes"]["soak"] = extra_failures
    b = baseline - 1
    judged = intervals[b:]
    if not judged:
        for k in ("share", "rss", "ring"):
            out[k] = {"ok": None, "rule": "not judged: fewer intervals than --baseline"}
        return out
    base = intervals[b]
    full = [iv for iv in judged if iv.seconds >= 0.5 * base.seconds]
    shares = [(iv.index, iv.share) for iv in full if iv.share is not None]
    if base.share is None or not shares:
        out["share"] = {"ok": None, "rule": "not judged: no large write was counted"}
    else:
        worst = max(shares, key=lambda x: abs(x[1] - base.share))
        out["share"] = {"ok": abs(worst[1] - base.share) <= SHARE_POINTS,
                        "baseline_interval": base.index, "baseline": round(base.share, 3),
                        "worst_interval": worst[0], "worst": round(worst[1], 3),
                        "limit_points": SHARE_POINTS,
                        "rule": f"every interval's share within {SHARE_POINTS:g} points of "
                                f"interval {base.index}'s"}
    for key, get, floor in (("rss", lambda iv: iv.rss["rest"], 0),
                            ("ring", lambda iv: iv.ring["rest"], RING_FLOOR)):
        bv = get(base)
        limit = max(bv * GROWTH, bv + floor)
        worst = max(judged, key=get)
        out[key] = {"ok": get(worst) <= limit, "baseline_interval": base.index,
                    "baseline": bv, "worst_interval": worst.index, "worst": get(worst),
                    "limit": int(limit),
                    "rule": f"at rest, at most {GROWTH:.2f} times interval {base.index}'s"
                            + (f" or {floor >> 10} KiB more" if floor else "")}
    return out


def print_verdict(v, out=sys.stdout):
    names = {"bytes": "bytes", "shapes": "shapes", "share": "accelerated share",
             "rss": "RSS of this process", "ring": "ring memory of the tree"}
    print("\nverdict:", file=out)
    for key, c in v.items():
        tag = {True: "ok  ", False: "FAIL", None: "-   "}[c["ok"]]
        detail = ""
        if key == "bytes":
            detail = f"{c['bytes_lost']} bytes lost, {c['data_errors']} data errors"
        elif key == "shapes":
            detail = f"{c['failed']} failed"
        elif key == "share" and c["ok"] is not None:
            detail = (f"interval {c['baseline_interval']}: {c['baseline']:.1f}%, furthest "
                      f"interval {c['worst_interval']}: {c['worst']:.1f}% "
                      f"(limit {c['limit_points']:g} points)")
        elif key in ("rss", "ring") and c["ok"] is not None:
            detail = (f"interval {c['baseline_interval']}: {c['baseline'] / 1024:.0f} KiB, "
                      f"highest interval {c['worst_interval']}: {c['worst'] / 1024:.0f} KiB "
                      f"(limit {c['limit'] / 1024:.0f} KiB)")
        print(f"  {tag} {names[key]}: {c['rule']}" + (f": {detail}" if detail else ""),
              file=out)
