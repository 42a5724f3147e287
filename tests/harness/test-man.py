#!/usr/bin/env python3
"""The manual pages render cleanly and keep up with the code.

PAGE... are the pages as meson installs them (docs/man/meson.build fills
in the version and paths). They are laid out as a manual tree
(man1/, man3/, man7/) in a temporary directory, and checked:
  1. every page renders with groff -man -ww, for a terminal (-Tutf8) and
     for PostScript (-Tps, which knows fonts), without a word on stderr
     (a .so link with its target, as man(1) reads it), and, where
     man(1) is installed, man -w finds every name under its section;
  2. every option of shim/options.def has an entry in libppipe(7)'s
     ENVIRONMENT that gives its default, its range (size, int), its
     longest value (string) and every name (enum); no entry names a
     PPIPE_ variable the library does not know;
  3. every ppipe_* name shim/ppipe.map exports is in the NAME section of a
     section 3 page and has a page of its own name (a file or a .so link),
     and no section 3 page names a call that is not exported;
  4. ppipe-run(1) lists every option examples/ppipe-run.in accepts, in its
     SYNOPSIS and OPTIONS, and every environment variable it reads or sets
     in ENVIRONMENT;
and besides: every docs/man page is installed, each page's .TH matches
its file, no @VARIABLE@ is left, and every ppipe or libppipe page a page
refers to exists.
Skips (exit 77) when groff is not installed.
usage: test-man.py SOURCE_ROOT PAGE...
"""
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile

failures = []


def fail(msg):
    failures.append(msg)


# ---------------------------------------------------------------- roff text

ESCAPES = [
    (re.compile(r"\\f(\[[^\]]*\]|\(..|.)"), ""),  # font changes
    (re.compile(r"\\\(aq"), "'"),
    (re.compile(r"\\\((dq|lq|rq)"), '"'),
    (re.compile(r"\\\(bu"), "*"),
    (re.compile(r"\\\(em"), "--"),
    (re.compile(r"\\\(..|\\\[[^\]]*\]"), ""),  # any other special character
    (re.compile(r"\\-"), "-"),
    (re.compile(r"\\e"), "\\\\"),
    (re.compile(r"\\[%&|^ ]"), lambda m: " " if m.group(0) == "\\ " else ""),
]
MACRO_ARGS = re.compile(r'"((?:[^"]|"")*)"|(\S+)')
# Macros whose arguments are set in alternating fonts, without blanks between.
ALTERNATING = {"BR", "RB", "BI", "IB", "IR", "RI"}


def unescape(text):
    for rx, repl in ESCAPES:
        text = rx.sub(repl, text)
    return text


def line_text(line):
    """What a line of roff source shows, roughly: macros dropped, escapes resolved."""
    if line.startswith((".", "'")):
        m = re.match(r"[.'](\S+)\s*(.*)", line)
        if not m:
            return ""
        name, rest = m.group(1), m.group(2)
        if name.startswith('\\"'):
            return ""
        args = [a if a else q.replace('""', '"') for q, a in MACRO_ARGS.findall(rest)]
        sep = "" if name in ALTERNATING else " "
        return unescape(sep.join(args))
    return unescape(line)


def read_page(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def sections(lines):
    """{SECTION TITLE: [source lines]} of a page (titles upper-cased)."""
    out, cur = {}, None
    for line in lines:
        m = re.match(r"\.SH\s+(.*)", line)
        if m:
            cur = line_text(".B " + m.group(1)).strip().upper()
            out[cur] = []
        elif cur is not None:
            out[cur].append(line)
    return out


def text_of(lines):
    return " ".join(line_text(l) for l in lines if not l.startswith('.\\"'))


ENTRY_END = (".TP", ".SH", ".SS", ".PP", ".LP", ".P ")


def tp_entries(lines):
    """[(tag text, body text)] of the .TP entries among lines."""
    entries, i = [], 0
    while i < len(lines):
        if re.match(r"\.TP\b", lines[i]) and i + 1 < len(lines):
            tag = line_text(lines[i + 1]).strip()
            j = i + 2
            while j < len(lines) and not (lines[j].startswith(ENTRY_END) or lines[j] == ".P"):
                j += 1
            entries.append((tag, text_of(lines[i + 2:j])))
            i = j
        else:
            i += 1
    return entries


def name_list(lines):
    """The names of a NAME section: the words before \\-."""
    text = " ".join(l for l in lines if not l.startswith("."))
    if "\\-" not in text:
        return []
    return [n.strip() for n in unescape(text.split("\\-", 1)[0]).split(",") if n.strip()]


def has_token(text, word):
    return re.search(r"(?<![\w.-])" + re.escape(word) + r"(?![\w])", text, re.I) is not None


# ---------------------------------------------------------------- options.def


def c_tokens_outside_comments(text):
    """text with C comments blanked, strings kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_args(text, start):
    """The comma-separated arguments of the call whose '(' is at start; and where it ends."""
    args, depth, cur, i = [], 0, [], start + 1
    while i < len(text):
        c = text[i]
        if c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                args.append("".join(cur).strip())
                return args, i
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    raise ValueError("unterminated PP_OPT(")


def c_value(expr):
    """An options.def number: integer literals, PIPE_BUF, false/true, + - * <<."""
    expr = re.sub(r"\b(\d+)(?:[uU]?[lL]{0,2}|[lL]{1,2}[uU])\b", r"\1", expr)
    expr = re.sub(r"\bPIPE_BUF\b", "4096", expr)
    expr = re.sub(r"\bfalse\b", "0", expr)
    expr = re.sub(r"\btrue\b", "1", expr)

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp):
            ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
                   ast.Mult: lambda a, b: a * b, ast.LShift: lambda a, b: a << b}
            for k, f in ops.items():
                if isinstance(node.op, k):
                    return f(ev(node.left), ev(node.right))
        raise ValueError(f"not a number options.def may use: {expr!r}")

    return ev(ast.parse(expr, mode="eval"))


def c_string(lit):
    return ast.literal_eval(lit)


def options_def(path):
    """[{name, type, default, min, max, names}] from the PP_OPT rows."""
    with open(path, encoding="utf-8") as f:
        text = c_tokens_outside_comments(f.read())
    opts = []
    for m in re.finditer(r"\bPP_OPT\s*\(", text):
        args, _ = split_args(text, m.end() - 1)
        if len(args) != 8:
            raise ValueError(f"PP_OPT with {len(args)} arguments: {args[:2]}")
        _, name, typ, default, lo, hi, names, _ = args
        o = {"name": name, "type": typ, "names": []}
        nm = re.match(r"PP_NAMES\s*\((.*)\)\s*$", names, re.S)
        if nm:
            o["names"] = [c_string(s) for s in re.findall(r'"(?:[^"\\]|\\.)*"', nm.group(1))]
        if typ in ("size", "int"):
            o["default"], o["min"], o["max"] = c_value(default), c_value(lo), c_value(hi)
        elif typ == "bool":
            o["default"] = c_value(default)
        elif typ in ("string", "fdset"):
            o["default"] = c_string(default)
            o["max"] = c_value(hi)
        elif typ == "enum":
            # PP_MODE_AUTO: the enumerator's last word names the default.
            o["default"] = default.rsplit("_", 1)[-1].lower()
            if o["default"] not in o["names"]:
                raise ValueError(f"{name}: default {default} is none of {o['names']}")
        else:
            raise ValueError(f"{name}: unknown type {typ}")
        opts.append(o)
    return opts


def spellings(value, typ):
    """How a page may write a number: 16384, 16K (sizes), -1."""
    out = [str(value)]
    if typ == "size" and value > 0:
        for suffix, shift in (("G", 30), ("M", 20), ("K", 10)):
            if value % (1 << shift) == 0:
                out.append(f"{value >> shift}{suffix}")
    return out


def check_options(root, pages):
    page = pages.get(("libppipe", "7"))
    if not page:
        fail("no libppipe.7")
        return
    env = sections(read_page(page)).get("ENVIRONMENT")
    if env is None:
        fail("libppipe.7: no ENVIRONMENT section")
        return
    entries = {}
    for tag, body in tp_entries(env):
        for name in re.findall(r"\b[A-Z][A-Z0-9_]*\b", tag):
            entries[name] = body
    opts = options_def(os.path.join(root, "shim", "options.def"))
    if not opts:
        fail("shim/options.def: no PP_OPT rows")
    for o in opts:
        name, body = o["name"], entries.get(o["name"])
        if body is None:
            fail(f"libppipe.7: ENVIRONMENT has no entry for {name} (shim/options.def)")
            continue
        if "default" not in body:
            fail(f"libppipe.7: {name}: the entry does not say its default")
        typ, want = o["type"], []
        if typ in ("size", "int"):
            want.append(("default", spellings(o["default"], typ)))
            want.append(("minimum", spellings(o["min"], typ)))
            want.append(("maximum", spellings(o["max"], typ)))
        elif typ == "bool":
            want.append(("default", [str(o["default"])]))
        elif typ == "string":
            want.append(("default", [o["default"] or "empty"]))
            want.append(("longest value", [str(o["max"])]))
        elif typ == "fdset":
            want.append(("default", [o["default"]]))
        elif typ == "enum":
            if not re.search(re.escape(o["default"]) + r"\s*\(the default\)", body):
                fail(f"libppipe.7: {name}: the entry does not say "
                     f"'{o['default']} (the default)'")
            for n in o["names"]:
                want.append((f"value {n}", [n]))
        for what, words in want:
            if not any(has_token(body, w) for w in words):
                fail(f"libppipe.7: {name}: the entry lacks its {what} "
                     f"({' or '.join(words)}, from shim/options.def)")
    # What the library reads besides its options: PPIPE_ names it spells out.
    known = {o["name"] for o in opts}
    for top, _, files in os.walk(os.path.join(root, "shim")):
        for fname in files:
            if fname.endswith((".c", ".h")):
                with open(os.path.join(top, fname), encoding="utf-8") as f:
                    known.update(re.findall(r'"(PPIPE_[A-Z0-9_]*[A-Z0-9])\b', f.read()))
    for name in entries:
        if name.startswith("PPIPE_") and name not in known:
            fail(f"libppipe.7: ENVIRONMENT lists {name}, which libppipe does not read")
    return len(opts)


# ---------------------------------------------------------------- ppipe.map


def exported(root):
    with open(os.path.join(root, "shim", "ppipe.map"), encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    m = re.search(r"global\s*:(.*?)(?:local\s*:|\})", text, re.S)
    if not m:
        fail("shim/ppipe.map: no global: section")
        return []
    return [n for n in re.findall(r"[\w.]+", m.group(1)) if n.startswith("ppipe_")]


# ---------------------------------------------------------------- ppipe-run


def run_script_interface(path):
    """The options ppipe-run.in compares its arguments with, and its environment."""
    with open(path, encoding="utf-8") as f:
        code = "\n".join(l for l in f.read().splitlines() if not l.lstrip().startswith("#"))
    opts = set(re.findall(r'"\$[1-9@*]"\s*!?=\s*"(-[^"]*)"', code))
    for arm in re.findall(r"^\s*\(?\s*(-[^)\s]*)\)", code, re.M):  # case arms
        opts.update(a for a in arm.split("|") if a.startswith("-"))
    for spec in re.findall(r"\bgetopts\s+[\"']?([\w:]+)", code):
        opts.update("-" + c for c in spec if c != ":")
    env = set(re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", code))
    env.update(re.findall(r"(?:^|[\s;])([A-Z][A-Z0-9_]*)=", code, re.M))
    return opts, env


def check_run(root, pages):
    page = pages.get(("ppipe-run", "1"))
    if not page:
        fail("no ppipe-run.1")
        return
    secs = sections(read_page(page))
    opts, env = run_script_interface(os.path.join(root, "examples", "ppipe-run.in"))
    if not opts:
        fail("examples/ppipe-run.in: no option found in its argument parsing")
    synopsis = text_of(secs.get("SYNOPSIS", []))
    tags = {t for t, _ in tp_entries(secs.get("OPTIONS", []))}
    for o in sorted(opts):
        if not has_token(synopsis, o):
            fail(f"ppipe-run.1: SYNOPSIS lacks {o} (examples/ppipe-run.in)")
        if o not in tags:
            fail(f"ppipe-run.1: OPTIONS has no entry for {o} (examples/ppipe-run.in)")
    env_tags = {t for t, _ in tp_entries(secs.get("ENVIRONMENT", []))}
    for v in sorted(env):
        if v not in env_tags:
            fail(f"ppipe-run.1: ENVIRONMENT has no entry for {v} (examples/ppipe-run.in)")
    return opts, env


# ---------------------------------------------------------------- main


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 1
    root, given = argv[1], argv[2:]
    groff = shutil.which("groff")
    if not groff:
        print("SKIP: groff is not installed")
        return 77

    src_dir = os.path.join(root, "docs", "man")
    sources = sorted(f for f in os.listdir(src_dir) if re.search(r"\.[1-9]$", f))
    names = [os.path.basename(p) for p in given]
    for f in sources:
        if f not in names:
            fail(f"docs/man/{f} is not installed (docs/man/meson.build)")
    for f in names:
        if f not in sources:
            fail(f"{f}: not a page of docs/man")

    tree = tempfile.mkdtemp(prefix="test-man.")
    try:
        pages = {}  # (name, section) -> path in the tree
        for p in given:
            base = os.path.basename(p)
            name, sec = base.rsplit(".", 1)
            os.makedirs(os.path.join(tree, "man" + sec), exist_ok=True)
            shutil.copy(p, os.path.join(tree, "man" + sec, base))
            pages[(name, sec)] = os.path.join(tree, "man" + sec, base)

        # The pages' own headers and NAME sections; .so links and their targets.
        named = {}  # section 3 name -> pages naming it
        listed_by = {}  # page -> the names its NAME section lists
        links = {}
        for (name, sec), path in sorted(pages.items()):
            lines = read_page(path)
            for l in lines:
                for v in re.findall(r"@[A-Za-z_]+@", l):
                    fail(f"{name}.{sec}: {v} was not filled in (docs/man/meson.build)")
            so = [l for l in lines if l.startswith(".so")]
            if so:
                m = re.match(r"\.so\s+man([1-9])/(\S+)\.([1-9])\s*$", so[0])
                if len(lines) != 1 or not m or m.group(1) != m.group(3):
                    fail(f"{name}.{sec}: a link must be one line, .so manN/NAME.N")
                    continue
                links[(name, sec)] = (m.group(2), m.group(3))
                continue
            th = [l for l in lines if l.startswith(".TH")]
            args = MACRO_ARGS.findall(th[0][3:]) if th else []
            args = [q or a for q, a in args]
            if len(args) < 2 or args[0].lower() != name.lower() or args[1] != sec:
                fail(f"{name}.{sec}: .TH must begin with {name} {sec}, not {args[:2]}")
            listed = name_list(sections(lines).get("NAME", []))
            listed_by[(name, sec)] = listed
            if name not in listed:
                fail(f"{name}.{sec}: its NAME section does not list {name}")
            if sec == "3":
                for n in listed:
                    named.setdefault(n, []).append(name)
        for (name, sec), target in links.items():
            if target not in listed_by:
                fail(f"{name}.{sec}: links to {target[0]}.{target[1]}, which is not a page")
            elif name not in listed_by[target]:
                fail(f"{name}.{sec}: {target[0]}.{target[1]}'s NAME does not list {name}")

        # 1. Rendering, as man(1) does it: from the tree's top, .so resolved
        # there. For a terminal, and for PostScript, which also knows fonts.
        for (name, sec), path in sorted(pages.items()):
            rel = os.path.relpath(path, tree)
            for dev in ("utf8", "ps"):
                r = subprocess.run([groff, "-man", "-T" + dev, "-ww", "-z", rel], cwd=tree,
                                   capture_output=True, text=True)
                if r.returncode or r.stderr.strip():
                    fail(f"{name}.{sec}: groff -man -T{dev} -ww (exit {r.returncode}):\n"
                         + r.stderr.rstrip())
        man = shutil.which("man")
        lookups = sorted({(n, "3") for n in named} | set(pages))
        if man:
            env = {k: v for k, v in os.environ.items() if k not in ("MANOPT", "MANPATH")}
            for name, sec in lookups:
                r = subprocess.run([man, "-M", tree, "-w", sec, name], capture_output=True,
                                   text=True, env=env)
                found = r.stdout.strip()
                if r.returncode or not os.path.realpath(found).startswith(
                        os.path.realpath(tree) + os.sep):
                    fail(f"man -w {sec} {name} finds no page of this manual "
                         f"({(found or r.stderr.strip())!r})")
        else:
            print("note: man is not installed; lookups not checked")

        # 3. Exported calls.
        calls = exported(root)
        if not calls:
            fail("shim/ppipe.map: no ppipe_ name exported")
        for c in calls:
            if c not in named:
                fail(f"{c} (exported by shim/ppipe.map) is in no section 3 page's NAME")
            if (c, "3") not in pages:
                fail(f"{c} has no page {c}.3 (a page or a .so link in docs/man)")
        for n, where in sorted(named.items()):
            if n not in calls:
                fail(f"{', '.join(where)}.3 names {n}, which shim/ppipe.map does not export")

        # Cross references to this manual's own pages.
        for (name, sec), path in sorted(pages.items()):
            if (name, sec) in links:
                continue
            for ref, rsec in re.findall(r"\b((?:lib)?ppipe[\w-]*)\s*\(([1-9])\)",
                                        text_of(read_page(path))):
                if (ref, rsec) not in pages:
                    fail(f"{name}.{sec}: refers to {ref}({rsec}), which is no page here")

        # 2. and 4.
        nopts = check_options(root, pages)
        run = check_run(root, pages)
    finally:
        shutil.rmtree(tree, ignore_errors=True)

    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"ok: {len(pages)} pages render cleanly; {nopts} options, "
          f"{len(calls)} exported calls and ppipe-run's {sorted(run[0])} "
          f"and {sorted(run[1])} documented")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
