#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layers of shim/ point one way.

Every module of shim/ (x.c and x.h are one module, x) names its layer in
the first comment of its header, or of its .c file when it has no header:

    Layer: pipes (may use: pipes, resources, base).

This checks, from the #include lines and the calls:
  - every module names exactly one known layer, and the "may use" list it
    gives is its own layer and the layers below;
  - a module includes only modules of its own layer or below;
  - no circle among the modules (within a layer too);
  - no module but interpose calls a libc function libppipe exports (the
    call would run back up through the interposers): the code below calls
    the real one through real.h or sys.h.

Usage: test-layers.py SHIM_DIR [--graph]   (--graph prints the module graph)
"""

import os
import re
import sys

LAYERS = ["interpose", "operations", "engine", "pipes", "resources", "base"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
LAYER = re.compile(r"Layer:\s*(\w+)\s*\(may use:\s*([^)]*)\)")
EXPORTED = re.compile(r"^[^#\n]*\bPP_EXPORT\b[^;{(]*?\b(\w+)\s*\(", re.M)


def strip_c(text):
    """The code without comments, string and character literals."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def first_comment(text):
    m = re.search(r"/\*.*?\*/", text, re.S)
    first = m.group(0) if m else ""
    # The SPDX line is a comment of its own: take the next one then.
    if "SPDX-License-Identifier" in first and "Layer:" not in first:
        m2 = re.search(r"/\*.*?\*/", text[m.end():], re.S)
        first = m2.group(0) if m2 else ""
    return re.sub(r"\s*\n\s*\*\s?", " ", first)


def load(shim):
    files = sorted(f for f in os.listdir(shim) if f.endswith((".c", ".h")))
    modules = {}
    for f in files:
        mod = f.rsplit(".", 1)[0]
        with open(os.path.join(shim, f), encoding="utf-8") as fh:
            text = fh.read()
        modules.setdefault(mod, {})[f[-1]] = text
    return modules


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    shim, graph_only = argv[1], "--graph" in argv[2:]
    modules = load(shim)
    errors = []
    layer = {}
    for mod, texts in modules.items():
        home = "h" if "h" in texts else "c"
        m = LAYER.search(first_comment(texts[home]))
        if not m:
            errors.append(f"{mod}.{home}: no 'Layer: NAME (may use: ...)' in its first comment")
            continue
        name, uses = m.group(1), [u.strip() for u in m.group(2).split(",") if u.strip()]
        if name not in LAYERS:
            errors.append(f"{mod}.{home}: unknown layer {name!r} (layers: {', '.join(LAYERS)})")
            continue
        allowed = LAYERS[LAYERS.index(name):]
        if uses != allowed:
            errors.append(f"{mod}.{home}: layer {name} may use {', '.join(allowed)}, "
                          f"the comment says {', '.join(uses)}")
        for other in texts:
            if other != home and "Layer:" in first_comment(texts[other]):
                errors.append(f"{mod}.{other}: the layer is named in {mod}.{home} only")
        layer[mod] = name

    edges = {}
    for mod, texts in modules.items():
        deps = set()
        for ext, text in texts.items():
            for inc in INCLUDE.findall(text):
                dep = os.path.basename(inc).rsplit(".", 1)[0]
                if dep != mod and dep in modules:
                    deps.add(dep)
        edges[mod] = deps

    if graph_only:
        for mod in sorted(edges, key=lambda m: (LAYERS.index(layer.get(m, "base")), m)):
            print(f"{layer.get(mod, '?'):10} {mod:18} -> {' '.join(sorted(edges[mod]))}")
        return 0

    for mod, deps in edges.items():
        for dep in sorted(deps):
            if mod in layer and dep in layer and \
               LAYERS.index(layer[dep]) < LAYERS.index(layer[mod]):
                errors.append(f"{mod} ({layer[mod]}) includes {dep}.h ({layer[dep]}): "
                              f"up the layers")

    # Circles: strongly connected components of more than one module.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    for comp in sccs:
        errors.append("include circle: " + " <-> ".join(comp))

    exported = set()
    for text in modules.get("interpose", {}).values():
        exported.update(n for n in EXPORTED.findall(strip_c(text)) if not n.startswith("__"))
    call = re.compile(r"(?<![\w.>])(" + "|".join(sorted(exported)) + r")\s*\(") if exported else None
    for mod, texts in modules.items():
        if mod == "interpose" or not call or "c" not in texts:
            continue
        code = strip_c(texts["c"])
        for m in call.finditer(code):
            line = code.count("\n", 0, m.start()) + 1
            # The definition of an exported function is not a call of it.
            if re.search(r"\bPP_EXPORT\b[^;{]*$", code[max(0, m.start() - 200):m.start()]):
                continue
            errors.append(f"{mod}.c:{line}: calls the exported {m.group(1)}(), which runs "
                          f"back up through the interposers")

    for e in errors:
        print("FAIL:", e)
    print(f"{len(modules)} modules, {sum(len(d) for d in edges.values())} include edges, "
          f"{len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
