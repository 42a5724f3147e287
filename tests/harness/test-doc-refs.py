#!/usr/bin/env python3
"""Every pointer into the project's documents leads somewhere.

Checks, under SOURCE_ROOT:
  - references of the form  docs/<name>.md, "Heading"  (the two READMEs,
    README.md and tests/bench/README.md, the same way) in shim/, include/,
    tests/, examples/ and the Markdown files: the file must exist and have
    a heading with exactly that text (a reference may wrap between the
    comma and the quoted heading, never inside the heading);
  - any other mention of docs/<name>.md there: the file must exist;
  - relative Markdown links [text](path) and [text](path#anchor) in
    README.md, docs/*.md and tests/bench/README.md: the path must exist
    inside the tree, and an anchor must be one GitHub makes of a heading
    of the target (of the same file for a bare #anchor);
  - no mention of the upper-case design file that never existed, which
    docs/design.md replaced.
usage: test-doc-refs.py SOURCE_ROOT
"""
import os
import re
import sys
import unicodedata

SCANNED_DIRS = ("shim", "include", "tests", "examples")
LINKING_DOCS = ("README.md", "docs/*.md", "tests/bench/README.md")
# Spelled in two pieces so that this file does not mention it itself.
OLD_NAME = "DESIGN" + ".md"

# docs/<name>.md, "Heading" -- between the comma and the quote, blanks and the
# leaders of a wrapped comment (" * ", "// ", "# ") may stand.
REF_RE = re.compile(r'(?<![\w/.-])(docs/[\w.-]+\.md|README\.md|tests/bench/README\.md),'
                    r'(?:\s|\*|//|#)*?"([^"\n]+)"')
MENTION_RE = re.compile(r"\bdocs/([\w.-]+\.md)\b")
FENCE_RE = re.compile(r"^\s*(```|~~~)")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN_RE = re.compile(r"(`+)(.+?)\1")
LINK_RE = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def read_text(path):
    """The file's text, or None for a file that is not UTF-8 text."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_build_dir(path):
    return os.path.isdir(os.path.join(path, "meson-private")) or os.path.isdir(
        os.path.join(path, "meson-info"))


def scanned_files(root):
    """Files of the scanned directories and every Markdown file outside them."""
    files = []
    for top in SCANNED_DIRS:
        base = os.path.join(root, top)
        for d, dirs, names in os.walk(base):
            dirs[:] = sorted(x for x in dirs if not x.startswith(".")
                             and not is_build_dir(os.path.join(d, x)))
            files += [os.path.join(d, n) for n in sorted(names)]
    for d in (root, os.path.join(root, "docs")):
        if os.path.isdir(d):
            files += [os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith(".md")]
    return files


def markdown_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for no, line in enumerate(text.splitlines(), 1):
        m = FENCE_RE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield no, line


def slug(heading):
    """The anchor GitHub gives a heading (before de-duplication)."""
    text = CODE_SPAN_RE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link: its text
    text = text.replace("*", "").strip().lower()
    out = []
    for ch in text:
        if ch in "-_ " or unicodedata.category(ch)[0] in "LN":
            out.append("-" if ch == " " else ch)
    return "".join(out)


def headings(path, cache={}):
    """(exact heading texts, GitHub anchors) of a Markdown file."""
    if path not in cache:
        texts, anchors, seen = set(), set(), {}
        for _, line in markdown_lines(read_text(path) or ""):
            m = HEADING_RE.match(line)
            if not m:
                continue
            h = m.group(2)
            texts.add(h)
            texts.add(h.replace("`", ""))
            s = slug(h)
            n = seen.get(s, 0)
            seen[s] = n + 1
            anchors.add(s if n == 0 else f"{s}-{n}")
        cache[path] = (texts, anchors)
    return cache[path]


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def check_refs(root, files, failures):
    """The fixed-form references and bare mentions of docs/<name>.md."""
    count = 0
    for path in files:
        text = read_text(path)
        if text is None:
            continue
        rel = os.path.relpath(path, root)
        for no, line in enumerate(text.splitlines(), 1):
            if OLD_NAME in line:
                failures.append(f"{rel}:{no}: still mentions {OLD_NAME}; "
                                f"point at a heading of docs/design.md instead")
        for m in REF_RE.finditer(text):
            count += 1
            doc = os.path.join(root, m.group(1))
            where = f"{rel}:{line_of(text, m.start())}"
            if not os.path.isfile(doc):
                failures.append(f"{where}: {m.group(1)} does not exist")
            elif m.group(2) not in headings(doc)[0]:
                failures.append(f'{where}: {m.group(1)} has no heading "{m.group(2)}"')
        for m in MENTION_RE.finditer(text):
            if not os.path.isfile(os.path.join(root, "docs", m.group(1))):
                failures.append(f"{rel}:{line_of(text, m.start())}: "
                                f"docs/{m.group(1)} does not exist")
    return count


def linking_docs(root):
    out = []
    for pattern in LINKING_DOCS:
        d, _, name = pattern.rpartition("/")
        d = os.path.join(root, d)
        if name.startswith("*"):
            if os.path.isdir(d):
                out += [os.path.join(d, n) for n in sorted(os.listdir(d))
                        if n.endswith(name[1:])]
        elif os.path.isfile(os.path.join(d, name)):
            out.append(os.path.join(d, name))
        else:
            out.append(os.path.join(d, name))  # reported missing below
    return out


def check_links(root, failures):
    """Relative links of the linking documents."""
    count = 0
    real_root = os.path.realpath(root)
    for path in linking_docs(root):
        rel = os.path.relpath(path, root)
        text = read_text(path)
        if text is None:
            failures.append(f"{rel}: missing or not text")
            continue
        for no, line in markdown_lines(text):
            for m in LINK_RE.finditer(CODE_SPAN_RE.sub("``", line)):
                target = m.group(1)
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                    continue  # a URL, not a file of the tree
                count += 1
                file_part, _, anchor = target.partition("#")
                dest = (os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                        if file_part else path)
                where = f"{rel}:{no}: ({target})"
                inside = os.path.realpath(dest)
                if inside != real_root and not inside.startswith(real_root + os.sep):
                    failures.append(f"{where}: leads outside the tree")
                    continue
                if not os.path.exists(dest):
                    failures.append(f"{where}: {os.path.relpath(dest, root)} does not exist")
                    continue
                if not anchor:
                    continue
                if not dest.endswith(".md") or not os.path.isfile(dest):
                    failures.append(f"{where}: an anchor into a file that is not Markdown")
                elif anchor not in headings(dest)[1]:
                    failures.append(f"{where}: {os.path.relpath(dest, root)} has no "
                                    f"heading whose anchor is #{anchor}")
    return count


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 1
    root = argv[1]
    failures = []
    refs = check_refs(root, scanned_files(root), failures)
    links = check_links(root, failures)
    # The code cites the design by heading: finding none means the scan is blind.
    if refs == 0:
        failures.append('no reference of the form docs/<name>.md, "Heading" found at all')
    if links == 0:
        failures.append("no relative link found in the linking documents")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"ok: {refs} heading references and {links} relative links lead somewhere")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
