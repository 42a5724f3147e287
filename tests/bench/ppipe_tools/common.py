"""What ppipe-compare and ppipe-soak share: their names, the one-line
error that ends them, the values meson configures into them, finding the
harness's programs, and saving a JSON document."""

import json
import os
import shutil
import sys

COMPARE = "ppipe-compare"
SOAK = "ppipe-soak"


class Fatal(Exception):
    """A one-line error: message and exit status."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


def configured(value):
    """Return a configure_file() value, or "" if it was never substituted."""
    if len(value) > 1 and value.startswith("@") and value.endswith("@"):
        return ""
    return value


def version(value):
    """The configured project version, or 'unconfigured' when run from the
    source."""
    return configured(value) or "unconfigured"


def is_executable(path):
    """True if path is an executable regular file."""
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def locate(name, configured_path, here, test=is_executable):
    """A program or file of the harness that no option named: the
    configured one, the one in here (the tool's own directory), or (for
    programs) the one on PATH; None if none passes test."""
    for path in (configured(configured_path), os.path.join(here, name),
                 shutil.which(name) if test is is_executable else None):
        if path and test(path):
            return path
    return None


def write_json(path, doc, replace=False):
    """Save a document as indented JSON ('-': to stdout). With replace,
    the file is written beside and renamed over path, so that a reader
    never sees half of it."""
    text = json.dumps(doc, indent=1) + "\n"
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = path + ".tmp" if replace else path
    with open(target, "w", encoding="utf-8") as f:
        f.write(text)
    if replace:
        os.replace(target, path)
