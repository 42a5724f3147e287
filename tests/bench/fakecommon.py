"""Pieces shared by the harness's fakes (fake-bench.py, fake-stage.py).

The importer sets PROG to the name of the program it stands in for; the
errors below are printed under that name.
"""

import argparse
import os
import sys

PROG = "fake"


class Parser(argparse.ArgumentParser):
    """One-line usage errors, exit 2."""

    def error(self, message):
        sys.stderr.write(f"{PROG}: {message}\n")
        sys.exit(2)


def positive(kind):
    """argparse type for a positive int or float."""
    def convert(text):
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if value <= 0:
            raise argparse.ArgumentTypeError(f"bad value {text!r}")
        return value
    return convert


def fail(status, message):
    """One-line error and exit."""
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.exit(status)


def invocation():
    """Bump and return the FAKE_BENCH_STATE counter (0 without it)."""
    path = os.environ.get("FAKE_BENCH_STATE")
    if not path:
        return 0
    try:
        with open(path, encoding="ascii") as f:
            count = int(f.read().strip() or 0)
    except (OSError, ValueError):
        count = 0
    count += 1
    with open(path, "w", encoding="ascii") as f:
        f.write(f"{count}\n")
    return count
