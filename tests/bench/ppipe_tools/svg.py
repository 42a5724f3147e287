"""The SVG chart of a run: heat maps, the write-size chart and the result
tables (ppipe-compare --svg)."""

import math
from xml.sax.saxutils import escape

from .matrices import (
    MATRICES, SIDES, hops_label, is_overhead, is_program, label)
from .report import (
    PIPELINE_SHAPES, fmt_num, overhead_what, pressure_label, set_shim_name,
    shim_name)
from .stats import human_bytes


def size_label(n):
    """Tick label for a write size: 4K, 32K, 1M, 128."""
    if n >= 1 << 20:
        return f"{n / (1 << 20):.3g}M"
    if n >= 1 << 10:
        return f"{round(n / 1024)}K"
    return str(n)


def ratio_colour(value):
    """Diverging colour around 1.0: red below, white at 1.0, green above.

    Returns (fill, text colour). Saturates at 0.71x and 1.41x.
    """
    if not value:
        return "#cccccc", "#000000"
    t = max(-1.0, min(1.0, math.log2(value) / 0.5))
    end = (215, 48, 39) if t < 0 else (26, 152, 80)
    mix = [round(255 + (e - 255) * abs(t)) for e in end]
    return "#%02x%02x%02x" % tuple(mix), "#ffffff" if abs(t) > 0.65 else \
        "#000000"


class Svg:
    """Minimal SVG builder."""

    def __init__(self):
        self.parts = []

    def text(self, x, y, content, size=12, anchor="start", weight="normal",
             fill="#000000", rotate=None, cls=None):
        """Add escaped text."""
        extra = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' \
            if rotate is not None else ""
        extra += f' class="{cls}"' if cls else ""
        self.parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" '
            f'text-anchor="{anchor}" font-weight="{weight}" '
            f'fill="{fill}"{extra}>{escape(str(content))}</text>')

    def line(self, x1, y1, x2, y2, stroke="#000000", width=1, dash=None):
        """Add a line."""
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
            f'stroke="{stroke}" stroke-width="{width}"{extra}/>')

    def rect(self, x, y, w, h, fill, cls=None, title=None, stroke="#ffffff"):
        """Add a rectangle, optionally with a hover title."""
        attrs = (f'x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                 f'fill="{fill}" stroke="{stroke}"')
        if cls:
            attrs += f' class="{cls}"'
        if title:
            self.parts.append(f"<rect {attrs}><title>{escape(title)}</title>"
                              "</rect>")
        else:
            self.parts.append(f"<rect {attrs}/>")

    def raw(self, markup):
        """Add pre-built markup."""
        self.parts.append(markup)


SVG_WIDTH = 960
BASE_COLOUR = "#e08214"
SHIM_COLOUR = "#2166ac"


def svg_heatmap(svg, y, key, rows):
    """Writers x readers ratio heatmap; returns the next free y."""
    mode, size, pipe, mp, pmode = key
    writers = sorted({r["writers"] for r in rows})
    readers = sorted({r["readers"] for r in rows})
    cw, ch, left = 170, 64, 110
    svg.text(20, y + 18, f"Throughput ratio {shim_name()}/plain: {mode}, "
             f"{size_label(size)} writes, {human_bytes(pipe)} pipe, "
             f"{pressure_label(mp, pmode)}", size=15, weight="bold")
    top = y + 70
    svg.text(left + cw * len(readers) / 2, top - 24, "readers", size=13,
             anchor="middle", weight="bold")
    svg.text(left - 62, top + ch * len(writers) / 2, "writers", size=13,
             anchor="middle", weight="bold", rotate=-90)
    for j, n in enumerate(readers):
        svg.text(left + cw * (j + 0.5), top - 6, f"{n}", anchor="middle")
    for i, w in enumerate(writers):
        svg.text(left - 10, top + ch * (i + 0.5) + 4, f"{w}", anchor="end")
    cells = {(r["writers"], r["readers"]): r for r in rows}
    for i, w in enumerate(writers):
        for j, n in enumerate(readers):
            r = cells.get((w, n))
            x, cy = left + cw * j, top + ch * i
            if r is None:
                svg.rect(x, cy, cw, ch, "#eeeeee")
                continue
            fill, ink = ratio_colour(r["ratio_mbps"])
            base, shim = r["baseline"]["mbps"], r["shim"]["mbps"]
            svg.rect(x, cy, cw, ch, fill, cls="heatmap-cell",
                     title=f"{label(r)}: {base:.0f} -> {shim:.0f} MB/s")
            svg.text(x + cw / 2, cy + 28, f"{fmt_num(r['ratio_mbps'])}x",
                     size=17, anchor="middle", weight="bold", fill=ink)
            svg.text(x + cw / 2, cy + 48, f"{base:.0f} \u2192 {shim:.0f} MB/s",
                     size=11, anchor="middle", fill=ink)
    svg_colour_key(svg, left + cw * len(readers) + 40, top,
                   max(ch * len(writers), 120))
    return top + max(ch * len(writers), 120) + 30


def svg_colour_key(svg, x, y, height):
    """Vertical colour bar for the diverging ratio scale."""
    steps = 24
    for k in range(steps):
        value = 2 ** (0.5 - k / (steps - 1))        # 1.41 down to 0.71
        svg.rect(x, y + height * k / steps, 18, height / steps + 0.5,
                 ratio_colour(value)[0], stroke="none")
    svg.rect(x, y, 18, height, "none", stroke="#666666")
    svg.text(x, y - 8, "ratio", size=11)
    for value, frac in ((1.41, 0.0), (1.0, 0.5), (0.71, 1.0)):
        svg.text(x + 24, y + height * frac + 4, f"{value:.2f}x", size=11)


def nice_step(span, ticks=5):
    """A 1/2/5 x 10^k step giving about `ticks` intervals over span."""
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 5, 10):
        if mult * mag >= raw:
            return mult * mag
    return 10 * mag


def svg_size_chart(svg, y, key, rows):
    """Throughput against write size, one line per side; returns next y."""
    mode, w, r, pipe, mp, pmode = key
    rows = sorted(rows, key=lambda row: row["size"])
    svg.text(20, y + 18, f"Throughput vs write size: {mode} {w}x{r}, "
             f"{human_bytes(pipe)} pipe, {pressure_label(mp, pmode)}",
             size=15, weight="bold")
    x0, y0, pw, ph = 100, y + 40, SVG_WIDTH - 160, 280
    logs = [math.log2(row["size"]) for row in rows]
    lo, hi = min(logs) - 0.4, max(logs) + 0.4
    top = max(row[s]["mbps"] for row in rows for s in SIDES) * 1.1
    step = nice_step(top)
    top = math.ceil(top / step) * step

    def px(size):
        return x0 + (math.log2(size) - lo) / (hi - lo) * pw

    def py(value):
        return y0 + ph - value / top * ph

    for k in range(int(round(top / step)) + 1):
        tick = k * step
        svg.line(x0, py(tick), x0 + pw, py(tick), stroke="#dddddd")
        svg.text(x0 - 8, py(tick) + 4, f"{tick:g}", size=11, anchor="end")
    for row in rows:
        svg.line(px(row["size"]), y0 + ph, px(row["size"]), y0 + ph + 5)
        svg.text(px(row["size"]), y0 + ph + 19, size_label(row["size"]),
                 size=11, anchor="middle")
    svg.line(x0, y0 + ph, x0 + pw, y0 + ph)
    svg.line(x0, y0, x0, y0 + ph)
    svg.text(x0 + pw / 2, y0 + ph + 40, "write size (bytes, log2 scale)",
             size=13, anchor="middle")
    svg.text(x0 - 62, y0 + ph / 2, "throughput (MB/s)", size=13,
             anchor="middle", rotate=-90)
    for side, colour, name in (("baseline", BASE_COLOUR, "plain pipe"),
                               ("shim", SHIM_COLOUR, shim_name())):
        points = " ".join(f"{px(row['size']):.1f},{py(row[side]['mbps']):.1f}"
                          for row in rows)
        svg.raw(f'<polyline class="series {side}" points="{points}" '
                f'fill="none" stroke="{colour}" stroke-width="2.5"/>')
        for row in rows:
            tip = escape(f"{name}, {row['size']} B: "
                         f"{row[side]['mbps']:.0f} MB/s")
            svg.raw(f'<circle class="point {side}" '
                    f'cx="{px(row["size"]):.1f}" '
                    f'cy="{py(row[side]["mbps"]):.1f}" r="4" '
                    f'fill="{colour}"><title>{tip}</title></circle>')
    for k, (colour, name) in enumerate(((BASE_COLOUR, "plain pipe"),
                                        (SHIM_COLOUR, shim_name()))):
        lx = SVG_WIDTH - 250 + 120 * k
        svg.line(lx, y + 14, lx + 30, y + 14, stroke=colour, width=2.5)
        svg.text(lx + 36, y + 18, name, size=12)
    return y0 + ph + 66


def svg_table_head(svg, y, cols):
    """A table's header line, (x, name) per column, under a title at y;
    returns the y of the header."""
    head = y + 46
    for x, name in cols:
        svg.text(x, head, name, size=12, weight="bold")
    svg.line(20, head + 6, SVG_WIDTH - 20, head + 6, stroke="#999999")
    return head


def svg_result_table(svg, y, title, heads, rows, values, cls, side="shim",
                     ratio_key="ratio_mbps", side_head=None):
    """Results as a table: three columns of values(result), plain's and a
    side's MB/s (the library's), and the ratio in a coloured cell; returns
    the next free y."""
    svg.text(20, y + 18, title, size=15, weight="bold")
    cols = list(zip((30, 150, 310), heads)) + [
        (430, "plain MB/s"), (570, side_head or f"{shim_name()} MB/s"),
        (730, "ratio")]
    head = svg_table_head(svg, y, cols)
    for k, r in enumerate(rows):
        ry = head + 12 + 24 * k
        fill, ink = ratio_colour(r[ratio_key])
        svg.raw(f'<g class="{cls}">')
        svg.rect(720, ry, 110, 22, fill, title=label(r))
        cells = tuple(values(r)) + (fmt_num(r["baseline"]["mbps"]),
                                    fmt_num(r[side]["mbps"]))
        for (x, _), value in zip(cols, cells):
            svg.text(x, ry + 16, value, size=12)
        svg.text(730, ry + 16, f"{fmt_num(r[ratio_key])}x", size=12,
                 weight="bold", fill=ink)
        svg.raw("</g>")
    return head + 12 + 24 * len(rows) + 30


def svg_small_table(svg, y, rows):
    """Small-write results as a table with coloured ratio cells."""
    return svg_result_table(
        svg, y, "Small writes (goal: no regression)",
        ("mode", "writers x readers", "size (B)"), rows,
        lambda r: (r["mode"], f"{r['writers']}x{r['readers']}", r["size"]),
        "small-row")


def svg_pipeline_table(svg, y, rows):
    """sh pipeline results as a table with coloured ratio cells."""
    pipes = ", ".join(sorted({human_bytes(r["pipe_size"]) for r in rows}))
    rows = sorted(rows, key=lambda r: (r["hops"], r["size"]))
    return svg_result_table(
        svg, y, f"sh pipelines of exec'd programs ({pipes} pipes)",
        ("stages", "", "write size (B)"), rows,
        lambda r: (PIPELINE_SHAPES.get(r["hops"], hops_label(r["hops"])), "",
                   r["size"]),
        "pipeline-row")


def svg_program_table(svg, y, rows):
    """Pipelines of real programs as a table with coloured ratio cells."""
    return svg_result_table(
        svg, y, "Pipelines of real programs (sh -c, the library in every "
        "stage)", ("pipeline", "", ""), rows,
        lambda r: (r["shape"], "", ""), "program-row")


def svg_work_table(svg, y, rows):
    """Work matrix results as a table with coloured ratio cells."""
    rows = sorted(rows, key=lambda r: r["work_ns"])
    return svg_result_table(
        svg, y, "Producer work before each write (1x = one thread's memcpy "
        "of a write)", ("work (ns)", "x memcpy", "W x R, size (B)"), rows,
        lambda r: (r["work_ns"], f"{r['work_x']}x",
                   f"{r['writers']}x{r['readers']}, {r['size']}"),
        "work-row")


def svg_api_table(svg, y, rows):
    """The api matrix as a table: plain write() against the library's API,
    the ratio in a coloured cell."""
    rows = sorted(rows, key=lambda r: (r["mode"], r["writers"], r["size"]))
    return svg_result_table(
        svg, y, f"Writers that generate every block: ppipe.h's spans with "
        f"{shim_name()} against plain write()", ("mode", "writers x readers",
                                                "size (B)"), rows,
        lambda r: (r["mode"], f"{r['writers']}x{r['readers']}", r["size"]),
        "api-row", side="api", ratio_key="ratio_api_mbps",
        side_head="API MB/s")


def svg_overhead_table(svg, y, rows, reps):
    """Overhead results as a table: both sides' ns per operation and the
    time ratio in a coloured cell, red where the library costs (the
    colour scale of the throughput ratios, turned around), and the empty
    library's time ratio when it ran; returns the next free y."""
    svg.text(20, y + 18, f"What {shim_name()} costs where it cannot help: "
             f"time ratio {shim_name()}/plain, lower is better (median of "
             f"{reps})", size=15, weight="bold")
    cols = [(30, "row"), (150, "what"), (430, "plain ns/op"),
            (570, f"{shim_name()} ns/op"), (730, "time ratio")]
    empty = any("empty" in r for r in rows)
    if empty:
        cols.append((850, "empty/plain"))
    head = svg_table_head(svg, y, cols)
    for k, r in enumerate(rows):
        ry = head + 12 + 24 * k
        rat = r["ratio_time"]
        fill, ink = ratio_colour(1 / rat if rat else None)
        svg.raw('<g class="overhead-row">')
        svg.rect(720, ry, 110, 22, fill, title=f"{label(r)}, {r['n']} "
                 "operations per run")
        cells = (label(r), overhead_what(r),
                 fmt_num(r["baseline"]["ns_per_op"]),
                 fmt_num(r["shim"]["ns_per_op"]))
        for (x, _), value in zip(cols, cells):
            svg.text(x, ry + 16, value, size=12)
        svg.text(730, ry + 16, f"{fmt_num(rat)}x", size=12, weight="bold",
                 fill=ink)
        if empty and "empty" in r:
            svg.text(850, ry + 16, f"{fmt_num(r['empty']['ratio_time'])}x",
                     size=12)
        svg.raw("</g>")
    return head + 12 + 24 * len(rows) + 30


def svg_report(doc):
    """The whole SVG report as a string."""
    host, lib, st = doc["host"], doc["library"], doc["settings"]
    results = doc["results"]
    set_shim_name(lib["path"])
    body = Svg()
    body.text(20, 32, f"{shim_name()} vs plain pipes (ppipe-compare "
              f"{doc['version']})", size=20, weight="bold")
    dot = " \u00b7 "
    body.text(20, 54, f"kernel {host['kernel']}{dot}{host['cpu'] or 'cpu ?'}"
              f"{dot}{host['cores']} cores{dot}{doc['created']}", size=12)
    env = " ".join(f"{k}={v}" for k, v in lib["env"].items())
    body.text(20, 72, f"library {lib['path']}" + (f" ({env})" if env else ""),
              size=12)
    runs = f"{st['duration_s']:g} s runs"
    if any(r["matrix"] == "pipeline" for r in results) \
            and st["pipeline_duration_s"] != st["duration_s"]:
        runs += f" ({st['pipeline_duration_s']:g} s for pipelines)"
    if all(is_overhead(r) for r in results):
        body.text(20, 90, f"{st['matrix']} matrix, overhead rows only, "
                  f"median of {st['overhead']['reps']} runs per side",
                  size=12)
    else:
        body.text(20, 90, f"{st['matrix']} matrix, median of {st['reps']} x "
                  f"{runs} per side, "
                  f"{pressure_label(st['memory_pressure'], st.get('pressure_mode'))}",
                  size=12)
    y = 110
    by_matrix = {m: [r for r in results if r["matrix"] == m]
                 for m in MATRICES}
    sweep_groups = {}
    for r in by_matrix["sweep"]:
        key = (r["mode"], r["size"], r["pipe_size"], r["memory_pressure"],
               r.get("pressure_mode"))
        sweep_groups.setdefault(key, []).append(r)
    for key, rows in sweep_groups.items():
        y = svg_heatmap(body, y, key, rows)
    size_groups = {}
    for r in by_matrix["sizes"]:
        key = (r["mode"], r["writers"], r["readers"], r["pipe_size"],
               r["memory_pressure"], r.get("pressure_mode"))
        size_groups.setdefault(key, []).append(r)
    for key, rows in size_groups.items():
        y = svg_size_chart(body, y, key, rows)
    if by_matrix["small"]:
        y = svg_small_table(body, y, by_matrix["small"])
    stages = [r for r in by_matrix["pipeline"] if not is_program(r)]
    if stages:
        y = svg_pipeline_table(body, y, stages)
    if any(is_program(r) for r in by_matrix["pipeline"]):
        y = svg_program_table(body, y, [r for r in by_matrix["pipeline"]
                                        if is_program(r)])
    if by_matrix["work"]:
        y = svg_work_table(body, y, by_matrix["work"])
    if by_matrix["api"]:
        y = svg_api_table(body, y, by_matrix["api"])
    if by_matrix["overhead"]:
        y = svg_overhead_table(body, y, by_matrix["overhead"],
                               st.get("overhead", {}).get("reps", "?"))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_WIDTH}" '
            f'height="{y:.0f}" viewBox="0 0 {SVG_WIDTH} {y:.0f}" '
            'font-family="sans-serif">\n'
            f'<rect x="0" y="0" width="{SVG_WIDTH}" height="{y:.0f}" '
            'fill="#ffffff"/>\n' + "\n".join(body.parts) + "\n</svg>\n")


def write_svg(path, doc):
    """Save the SVG report."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(svg_report(doc))
