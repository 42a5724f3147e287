#!/usr/bin/env python3
"""README.md's option table lists exactly the options of shim/options.def.

Fails when an option is missing from the table, when the table names a
PPIPE_ variable options.def does not have, or when either lists one twice.
The table is the Markdown table whose first header cell is "variable".
usage: test-options-doc.py OPTIONS_DEF README_MD
"""
import re
import sys


def options_def(path):
    """The ENVNAME column of every PP_OPT row, in order."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.findall(r"\bPP_OPT\s*\(\s*\w+\s*,\s*(\w+)\s*,", text)


def cells(line):
    """The cells of a Markdown table row (\\| is a literal bar)."""
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)]


def readme_table(path):
    """PPIPE_ names in the first column of every option table; None if there is none."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    names, found, i = [], False, 0
    while i < len(lines):
        line = lines[i]
        is_header = (line.lstrip().startswith("|") and i + 1 < len(lines)
                     and re.match(r"^\s*\|?\s*:?-{3,}", lines[i + 1]))
        if is_header and cells(line)[0].strip("`* ").lower() == "variable":
            found = True
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                names += re.findall(r"\bPPIPE_\w+", cells(lines[i])[0])
                i += 1
            continue
        i += 1
    return names if found else None


def duplicates(seq):
    seen, dup = set(), []
    for x in seq:
        if x in seen and x not in dup:
            dup.append(x)
        seen.add(x)
    return dup


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 1
    failures = []
    opts = options_def(argv[1])
    table = readme_table(argv[2])
    if not opts:
        failures.append(f"{argv[1]}: no PP_OPT rows found")
    for name in opts:
        if not name.startswith("PPIPE_"):
            failures.append(f"{argv[1]}: {name} does not start with PPIPE_")
    for name in duplicates(opts):
        failures.append(f"{argv[1]}: {name} is defined twice")
    if table is None:
        failures.append(f"{argv[2]}: no option table (a table whose first column is 'variable')")
        table = []
    for name in duplicates(table):
        failures.append(f"{argv[2]}: {name} is listed twice")
    for name in opts:
        if name not in table:
            failures.append(f"{argv[2]}: the option table lacks {name} (from options.def)")
    for name in table:
        if name not in opts:
            failures.append(f"{argv[2]}: the option table lists {name}, which options.def lacks")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"ok: {len(opts)} options, all documented")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
