"""report: one self-contained, offline HTML file from a comparison, a history and runs.

    tbd_track report [--compare BASE NEW | --comparison compare.json] [--history history.json]
                     [--runs FILE_OR_DIR ...] [--title T] -o report.html

Sections, each present when its input is (an absent one says why):
  1 verdict        comparison: verdict, exit code, counts, labels, the statistics line
  2 tables         comparison: metric results (regressions first), status lists, families
  3 A/B plots      comparison: real_time samples of base vs new per benchmark, ratio CI
  4 history        history document: per-commit medians, samples, segments, change points
  5 throughput     runs: items_per_second (and FP32 utilization) vs batch size per model
  6 memory         runs: the six mem_* categories stacked per batch size, peak marked
  7 layers         runs: tbd_breakdown per model step (share of step, FLOP/s, table)
  8 context        runs and comparison: device, libraries, commit; the comparison's diff

Why hand-written SVG and not matplotlib or an inlined chart library: the file must be one
offline document (asv #1574: CDN assets break under a CSP) with the same bytes for the same
input (a diffable CI artifact); SVG strings built here are deterministic by construction and
render without any script. The only script sorts tables and counts errors for the test.

The report is not a gate: its exit code is 0 when the file was written, 2 on bad input (the
comparison's own exit code is in the page; `tbd_track compare` is the gate).
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import statistics
import sys

from .. import names
from ..gbjson import InputError, Run, load_runs

CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:")

# ---------------------------------------------------------------------------------------------
# Formatting: every number in the page goes through these (fixed precision, so fixed bytes).

TIME_SCALES = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))
BYTE_SCALES = (("GiB", 2.0 ** 30), ("MiB", 2.0 ** 20), ("KiB", 2.0 ** 10))
SI_SCALES = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
# Units written with an SI prefix glued on (374.8 GFLOP/s); other rates print as 1.6k/s.
SI_UNITS = ("FLOP/s", "FLOP", "bytes/s", "B/s")


def _e(s) -> str:
    """Escapes text and attribute values (quotes included)."""
    return html.escape("" if s is None else str(s), quote=True)


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _num(x):
    """A finite float or None (JSON null, NaN from to_dict(), strings)."""
    return float(x) if _finite(x) else None


def _g(x: float, digits: int = 4) -> str:
    """`digits` significant digits, never an exponent for numbers people read."""
    if x != 0 and abs(x) >= 10 ** digits:
        return f"{x:.0f}"
    s = f"{x:.{digits}g}"
    if "e" in s:
        s = f"{x:.{digits + 2}f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "-0.0") else s


def _scale(vmax: float, unit: str) -> tuple[float, str]:
    """(divisor, suffix) that shows values up to vmax in `unit` readably."""
    a = abs(vmax)
    if unit == "s":
        for name, s in TIME_SCALES:
            if a >= s:
                return s, " " + name
        return 1e-9, " ns"
    if unit == "bytes":
        for name, s in BYTE_SCALES:
            if a >= s:
                return s, " " + name
        return 1.0, " B"
    if unit == "fraction":
        return 0.01, "%"
    for p, s in SI_SCALES:
        if a >= s:
            if unit in SI_UNITS:
                return s, f" {p}{unit}"
            return s, p + ("/s" if unit.endswith("/s") else "")
    if unit in SI_UNITS:
        return 1.0, " " + unit
    return 1.0, "/s" if unit.endswith("/s") else ""


def fmt(v, unit: str = "", digits: int = 4) -> str:
    """A value for people: ns..s, B..GiB, %, SI prefixes for FLOP/s; '-' when missing."""
    x = _num(v)
    if x is None:
        return "-"
    if unit == "fraction":
        p = x * 100
        return f"{p:.1f}%" if abs(p) >= 10 else f"{_g(p, 3)}%"
    if unit not in ("s", "bytes") and unit not in SI_UNITS and abs(x) < 1e4:
        return _g(x, digits) + ("/s" if unit.endswith("/s") else "")
    s, suffix = _scale(x, unit)
    return _g(x / s, digits) + suffix


def fmt_pct(ratio, digits: int = 1) -> str:
    r = _num(ratio)
    if r is None:
        return "-"
    p = (r - 1) * 100
    s = f"{p:+.{digits}f}%"
    return s.replace("-0.0%", "+0.0%") if s.startswith("-0.0") and digits == 1 else s


def _c(x: float) -> str:
    """An SVG coordinate: one decimal, no negative zero."""
    s = f"{x:.1f}"
    return "0.0" if s == "-0.0" else s


def _slug(s: str, used: set) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-").lower()[:60] or "x"
    slug, i = base, 2
    while slug in used:
        slug, i = f"{base}-{i}", i + 1
    used.add(slug)
    return slug


# ---------------------------------------------------------------------------------------------
# Axes

def _nice_step(span: float, n: int) -> float:
    raw = span / max(n, 1)
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag * (1 + 1e-9):
            return m * mag
    return 10 * mag


class Axis:
    """A linear axis in `unit` over [lo, hi] (raw values), ticks at nice scaled numbers."""

    def __init__(self, lo: float, hi: float, unit: str = "", n: int = 5, zero: bool = False,
                 pad: float = 0.0):
        if zero:
            lo, hi = min(lo, 0.0), max(hi, 0.0)
        if hi < lo:
            lo, hi = hi, lo
        if hi == lo:
            d = abs(hi) * 0.05 or 1.0
            lo, hi = (lo if zero and lo == 0 else lo - d), hi + d
        span = hi - lo
        if pad:
            lo = lo if zero and lo == 0 else lo - span * pad
            hi = hi + span * pad
        self.unit = unit
        self.div, self.suffix = _scale(max(abs(lo), abs(hi)), unit)
        step = _nice_step((hi - lo) / self.div, n)
        t0 = math.floor(lo / self.div / step + 1e-9) * step
        t1 = math.ceil(hi / self.div / step - 1e-9) * step
        k = int(round((t1 - t0) / step))
        self.step = step
        self.ticks = [(t0 + i * step) * self.div for i in range(k + 1)]
        self.lo, self.hi = t0 * self.div, t1 * self.div
        if self.hi == self.lo:
            self.hi = self.lo + step * self.div
        dec = max(0, -math.floor(math.log10(step) + 1e-9))
        if abs(step / 10 ** math.floor(math.log10(step) + 1e-9) - 2.5) < 1e-9:
            dec += 1
        self.dec = dec

    def label(self, v: float) -> str:
        if abs(v) < abs(self.step * self.div) * 1e-9:
            return "0"
        s = f"{v / self.div:.{self.dec}f}"
        if s.startswith("-") and float(s) == 0:
            s = s[1:]
        return s + self.suffix

    def frac(self, v: float) -> float:
        return (v - self.lo) / (self.hi - self.lo)


PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")
C_BASE, C_NEW = "#8c959f", "#0969da"
C_REG, C_IMP, C_NOISE = "#cf222e", "#1a7f37", "#9a6700"
MEM_CATEGORIES = (("mem_weights", "weights", "#4e79a7"),
                  ("mem_weight_grads", "weight grads", "#a0cbe8"),
                  ("mem_optimizer_state", "optimizer state", "#f28e2b"),
                  ("mem_feature_maps", "feature maps", "#59a14f"),
                  ("mem_workspace", "workspace", "#b07aa1"),
                  ("mem_dynamic", "dynamic", "#bab0ac"))


def _svg_open(kind: str, w: int, h: int, label: str) -> str:
    return (f'<svg class="chart" data-chart="{_e(kind)}" viewBox="0 0 {w} {h}" width="{w}" '
            f'height="{h}" role="img" aria-label="{_e(label)}">')


def _yaxis(ax: Axis, x0: float, x1: float, y_of, title: str = "") -> list[str]:
    out = []
    for t in ax.ticks:
        y = y_of(t)
        out.append(f'<line class="grid" x1="{_c(x0)}" x2="{_c(x1)}" y1="{_c(y)}" y2="{_c(y)}"/>')
        out.append(f'<text x="{_c(x0 - 5)}" y="{_c(y + 3.5)}" text-anchor="end">'
                   f'{_e(ax.label(t))}</text>')
    if title:
        out.append(f'<text class="axt" x="{_c(x0)}" y="11">{_e(title)}</text>')
    return out


def _legend_layout(labels: list[str], x: float, y: float, width: float) -> list[tuple]:
    """(x, y) of each legend entry, wrapping at `width`; ~6.2 px per character at 10.5 px."""
    pos, cx, cy = [], x, y
    for label in labels:
        wlab = 6.2 * len(label) + 30
        if cx + wlab > x + width and cx > x:
            cx, cy = x, cy + 15
        pos.append((cx, cy))
        cx += wlab
    return pos


def _legend_rows(labels: list[str], width: float) -> int:
    pos = _legend_layout(labels, 0, 0, width)
    return 1 + int(round(pos[-1][1] / 15)) if pos else 0


def _legend(items: list[tuple[str, str, str]], x: float, y: float, width: float) -> list[str]:
    """items: (shape, colour, label); shape is 'dot', 'box', 'line', 'dash' or 'ring'."""
    out = []
    for (shape, colour, label), (cx, cy) in zip(items, _legend_layout(
            [lab for _, _, lab in items], x, y, width)):
        if shape == "dot":
            out.append(f'<circle cx="{_c(cx + 5)}" cy="{_c(cy - 3.5)}" r="3.5" fill="{colour}"/>')
        elif shape == "ring":
            out.append(f'<circle cx="{_c(cx + 5)}" cy="{_c(cy - 3.5)}" r="4.5" fill="none" '
                       f'stroke="{colour}" stroke-width="1.5"/>')
        elif shape == "box":
            out.append(f'<rect x="{_c(cx)}" y="{_c(cy - 9)}" width="10" height="10" '
                       f'fill="{colour}"/>')
        else:
            dash = ' stroke-dasharray="4 3"' if shape == "dash" else ""
            out.append(f'<line x1="{_c(cx - 2)}" x2="{_c(cx + 12)}" y1="{_c(cy - 3.5)}" '
                       f'y2="{_c(cy - 3.5)}" stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{_c(cx + 16)}" y="{_c(cy)}">{_e(label)}</text>')
    return out


def _jitter(i: int) -> float:
    """Deterministic spread in [-0.5, 0.5) (golden-ratio sequence)."""
    return (i * 0.6180339887498949) % 1.0 - 0.5


# ---------------------------------------------------------------------------------------------
# Tables

class Cell:
    __slots__ = ("html", "v", "cls", "title")

    def __init__(self, html_: str, v=None, cls: str = "", title: str = ""):
        self.html, self.v, self.cls, self.title = html_, v, cls, title


def _cell(c) -> str:
    if not isinstance(c, Cell):
        c = Cell(_e(c))
    attrs = ""
    if c.cls:
        attrs += f' class="{c.cls}"'
    if c.v is not None and _finite(c.v):
        attrs += f' data-v="{c.v:.17g}"'
    if c.title:
        attrs += f' title="{_e(c.title)}"'
    return f"<td{attrs}>{c.html}</td>"


def _table(cols: list[tuple[str, str]], rows: list[list], row_cls: list[str] | None = None,
           cls: str = "", sortable: bool = True, tid: str = "") -> str:
    """cols: (header, 'num' | 'text'); rows of cells (str = text to escape, or Cell)."""
    classes = " ".join(filter(None, ["sortable" if sortable else "", cls]))
    idattr = f' id="{tid}"' if tid else ""
    out = [f'<div class="tw"><table class="{classes}"{idattr}><thead><tr>']
    for h, kind in cols:
        out.append(f'<th class="{kind}">{_e(h)}</th>' if kind == "num" else f"<th>{_e(h)}</th>")
    out.append("</tr></thead><tbody>")
    for i, r in enumerate(rows):
        rc = row_cls[i] if row_cls else ""
        out.append(f'<tr class="{rc}">' if rc else "<tr>")
        for j, c in enumerate(r):
            if cols[j][1] == "num":
                if not isinstance(c, Cell):
                    c = Cell(_e(c))
                c = Cell(c.html, c.v, (c.cls + " num").strip(), c.title)
            out.append(_cell(c))
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _badge(verdict: str) -> str:
    v = verdict or "-"
    return f'<span class="badge b-{_e(re.sub(r"[^a-z]+", "-", v.lower()))}">{_e(v)}</span>'


# ---------------------------------------------------------------------------------------------
# Names

def _params_text(n) -> str:
    return " ".join(f"{k}:{v}" for k, v in n.params)


def parse_model(name: str):
    """(model with its non-batch parameters, batch) for `<Model>/train/batch:<N>[/k:v...]`."""
    n = names.parse(name)
    if n is None or n.family != "model":
        return None
    p = _params_text(n)
    return (n.kind + (" " + p if p else ""), n.batch)


def parse_layer(name: str):
    """(`<Kind>/<subject>/<phase>` with its parameters, batch) for a layer row's name."""
    n = names.parse(name)
    if n is None or n.family != "layer":
        return None
    p = _params_text(n)
    return (f"{n.kind}/{n.subject}/{n.phase}" + (" " + p if p else ""), n.batch)


def _median(xs) -> float | None:
    v = [float(x) for x in xs if _finite(x)]
    return statistics.median(v) if v else None


# ---------------------------------------------------------------------------------------------
# Section 1 and 2: the comparison

VERDICT_RANK = {"regression": 0, "acknowledged": 1, "improvement": 2, "noise": 3, "changed": 4,
                "same": 5, "info": 6}
STATUS_ORDER = ("broken", "fixed", "not-comparable", "added", "added (error)", "removed",
                "error-both")


def _counts(c: dict) -> list[tuple[str, int, str]]:
    rows = c.get("rows") or []

    def n(pred):
        return sum(1 for r in rows if pred(r))
    compared = lambda r: r.get("status") == "compared"  # noqa: E731
    return [
        ("regressed", n(lambda r: compared(r) and r.get("verdict") == "regression"), "bad"),
        ("broken", n(lambda r: r.get("status") == "broken"), "bad"),
        ("improved", n(lambda r: compared(r) and r.get("verdict") == "improvement"), "good"),
        ("fixed", n(lambda r: r.get("status") == "fixed"), "good"),
        ("acknowledged", n(lambda r: r.get("verdict") == "acknowledged"), ""),
        ("added", n(lambda r: str(r.get("status", "")).startswith("added")), ""),
        ("removed", n(lambda r: r.get("status") == "removed"), ""),
        ("not comparable", n(lambda r: r.get("status") == "not-comparable"), ""),
        ("unchanged", n(lambda r: compared(r) and r.get("verdict") == "same"), ""),
        ("compared", n(compared), ""),
    ]


def _shared_source_note(c: dict) -> str:
    notes = {r.get("source_note", "") for r in c.get("rows") or [] if r.get("status") == "compared"}
    return notes.pop() if len(notes) == 1 else ""


def section_verdict(c: dict) -> str:
    verdict = str(c.get("verdict", ""))
    cls = {"OK": "ok", "REGRESSION": "bad", "NOT COMPARABLE": "warn"}.get(verdict, "warn")
    out = [f'<div class="verdict v-{cls}"><span class="vword">{_e(verdict or "?")}</span>'
           f'<span class="vexit">exit code {_e(c.get("exit_code", "?"))}</span>']
    out.append('<span class="vsides"><b>base</b> ' + _e(c.get("base_label", "")) +
               ' <span class="arrow">&#8594;</span> <b>new</b> ' + _e(c.get("new_label", "")) +
               "</span></div>")
    out.append('<div class="tiles">')
    for label, n, kind in _counts(c):
        k = f" t-{kind}" if kind and n else ""
        out.append(f'<div class="tile{k}"><div class="n">{n}</div><div class="l">{_e(label)}'
                   "</div></div>")
    out.append('<span class="tnote">benchmarks, by their worst metric</span></div>')
    if not c.get("comparable", True):
        out.append('<p class="refuse"><b>Not comparable:</b> ' +
                   _e("; ".join(c.get("refuse_reasons") or [])) +
                   " (--allow-mismatch compares anyway). The tables below are for reading "
                   "only.</p>")
    ntests = sum(1 for r in c.get("rows") or [] for m in r.get("metrics") or []
                 if _num(m.get("q")) is not None)
    alpha, thr = _num(c.get("alpha")), _num(c.get("threshold"))
    stat = (f'<b>Statistics.</b> Unit of analysis: {_e(c.get("unit_of_analysis", "?"))}. '
            f"Two-sided Mann-Whitney U, Benjamini-Hochberg over {ntests} tests, "
            f'alpha {_e(_g(alpha) if alpha is not None else "?")}; a change needs significance '
            f'and at least {_e(_g(thr * 100) if thr is not None else "?")}% '
            f'(config: {_e(c.get("config", "?"))}); memory metrics are exact.')
    out.append(f'<p class="stat">{stat}</p>')
    notes = list(c.get("notes") or [])
    shared = _shared_source_note(c)
    if shared:
        notes.append(shared)
    if notes:
        out.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    files = [("base", c.get("base_files") or []), ("new", c.get("new_files") or [])]
    out.append('<p class="files">' + " &#183; ".join(
        f'{side}: {", ".join(f"<code>{_e(f)}</code>" for f in fs) or "-"}' for side, fs in files)
        + "</p>")
    return "".join(out)


def _change_cell(m: dict) -> Cell:
    ratio = _num(m.get("ratio"))
    base, new = _num(m.get("base")), _num(m.get("new"))
    if ratio is None:
        return Cell("-")
    txt = fmt_pct(ratio)
    if m.get("exact") and base is not None and new is not None and new != base:
        d = new - base
        sign = "+" if d > 0 else "-"
        txt += f' <span class="sub">({sign}{_e(fmt(abs(d), m.get("unit", "")))})</span>'
    elif m.get("exact") and new == base:
        txt = "="
    return Cell(txt, (ratio - 1) * 100)


def _ci_text(m: dict) -> str:
    ci = m.get("ci")
    if not ci or len(ci) != 2 or _num(ci[0]) is None or _num(ci[1]) is None:
        return ""
    lvl = _num(m.get("ci_level"))
    s = f"[{(ci[0] - 1) * 100:+.1f}, {(ci[1] - 1) * 100:+.1f}]%"
    if lvl is not None and abs(lvl - 0.95) > 0.005:
        s += f" ({lvl * 100:.0f}%)"
    return s


def _q_cell(m: dict) -> Cell:
    q = _num(m.get("q"))
    if q is not None:
        return Cell(_e(f"{q:.2g}"), q, title=m.get("test", ""))
    t = str(m.get("test", ""))
    if t.startswith("n=1"):
        return Cell("n=1", title=t)
    if t.startswith("fallback"):
        return Cell("min p&gt;&#945;", title=t)
    if m.get("exact"):
        return Cell("exact", title=t)
    return Cell("")


def section_tables(c: dict) -> str:
    rows = c.get("rows") or []
    shared = _shared_source_note(c)
    items = []
    for ri, r in enumerate(rows):
        if r.get("status") != "compared":
            continue
        for mi, m in enumerate(r.get("metrics") or []):
            v = "acknowledged" if m.get("acknowledged") else str(m.get("verdict", ""))
            items.append((VERDICT_RANK.get(v, 7), ri, mi, r, m, v))
    items.sort(key=lambda t: t[:3])
    cols = [("benchmark", "text"), ("metric", "text"), ("base", "num"), ("new", "num"),
            ("change", "num"), ("CI of ratio", "num"), ("q", "num"), ("n", "num"),
            ("verdict", "text"), ("note", "text")]
    trows, rcls = [], []
    nquiet = 0
    for rank, ri, mi, r, m, v in items:
        unit = m.get("unit", "")
        notes = [m.get("acknowledged") and f'acknowledged: {m["acknowledged"]}', m.get("note"),
                 r.get("unit_note"), r.get("source_note") if r.get("source_note") != shared
                 else ""]
        note = "; ".join(str(x) for x in notes if x)
        quiet = v in ("same", "info")
        nquiet += quiet
        trows.append([Cell(f'<code>{_e(r.get("name"))}</code>', cls="name"),
                      Cell(_e(m.get("metric")), title=f'{m.get("direction", "")} is better'
                           if m.get("direction") in ("lower", "higher")
                           else m.get("direction", "")),
                      Cell(_e(fmt(m.get("base"), unit)), _num(m.get("base"))),
                      Cell(_e(fmt(m.get("new"), unit)), _num(m.get("new"))),
                      _change_cell(m), Cell(_e(_ci_text(m))), _q_cell(m),
                      Cell(f'{_e(m.get("n_base", ""))}v{_e(m.get("n_new", ""))}',
                           _num(m.get("n_new"))),
                      Cell(_badge(v), VERDICT_RANK.get(v, 7)), Cell(_e(note), cls="note")])
        rcls.append(f"v-{v}" + (" quiet" if quiet else ""))
    out = ['<h3 id="metric-results">Metric results</h3>']
    if trows:
        nshown = len(trows) - nquiet
        out.append('<input type="checkbox" id="show-quiet" class="toggle"'
                   + (" checked" if nshown == 0 else "") + '>'
                   f'<label for="show-quiet">show the {nquiet} unchanged and informational '
                   f"metrics too ({nshown} shown: regressions first)</label>")
        out.append(_table(cols, trows, rcls, cls="metrics", tid="t-metrics"))
    else:
        out.append('<p class="absent">No benchmark was compared on both sides.</p>')

    st = []
    for status in STATUS_ORDER:
        for r in rows:
            if r.get("status") != status:
                continue
            detail = ""
            if status == "broken":
                detail = "now fails: " + "; ".join(r.get("errors_new") or [])
            elif status == "fixed":
                detail = "failed before: " + "; ".join(r.get("errors_base") or [])
            elif status == "not-comparable":
                detail = r.get("reason", "")
            elif status in ("error-both", "added (error)"):
                detail = "; ".join(r.get("errors_new") or r.get("errors_base") or [])
            if r.get("verdict") == "acknowledged":
                detail += " [acknowledged]"
            st.append((status, r, detail))
    for r in rows:
        if r.get("unit_note"):
            st.append(("unit-converted", r, r.get("unit_note")))
    out.append('<h3 id="status-lists">Status lists</h3>')
    if st:
        srows = [[Cell(_badge(s), STATUS_ORDER.index(s) if s in STATUS_ORDER else 9),
                  Cell(f'<code>{_e(r.get("name"))}</code>', cls="name"), r.get("family", ""),
                  Cell(_e(d), cls="note")] for s, r, d in st]
        scls = ["v-regression" if s == "broken" else "v-improvement" if s == "fixed" else ""
                for s, _, _ in st]
        out.append(_table([("status", "text"), ("benchmark", "text"), ("family", "text"),
                           ("detail", "text")], srows, scls, tid="t-status"))
        counts = {}
        for s, _, _ in st:
            counts[s] = counts.get(s, 0) + 1
        out.append('<p class="caption">' + ", ".join(f"{_e(k)} {v}" for k, v in counts.items())
                   + ". Broken rows are regressions; added and removed rows are listed, never "
                   "dropped.</p>")
    else:
        out.append('<p class="absent">Nothing broken, fixed, added, removed, not comparable or '
                   "unit-converted: both sides have the same benchmarks.</p>")

    fams = c.get("families") or []
    out.append('<h3 id="families">Per family</h3>')
    if fams:
        frows = []
        for f in fams:
            g = _num(f.get("geomean_time_ratio"))
            ci = f.get("ci") or []
            cit = (f"[{(ci[0] - 1) * 100:+.1f}, {(ci[1] - 1) * 100:+.1f}]%"
                   if len(ci) == 2 and _num(ci[0]) is not None and _num(ci[1]) is not None
                   else "")
            frows.append([f.get("family", ""), Cell(_e(f.get("compared", "")), f.get("compared")),
                          Cell(_e(fmt_pct(g)), (g - 1) * 100 if g is not None else None),
                          Cell(_e(cit)),
                          Cell(_e(f.get("regressions", "")), f.get("regressions")),
                          Cell(_e(f.get("improvements", "")), f.get("improvements")),
                          Cell(_e(f.get("unchanged", "")), f.get("unchanged"))])
        out.append(_table([("family", "text"), ("compared", "num"),
                           ("real_time geomean", "num"), ("95% CI", "num"),
                           ("regressed", "num"), ("improved", "num"), ("unchanged", "num")],
                          frows, tid="t-families"))
        out.append('<p class="caption">Geometric mean of new/base real_time over the benchmarks '
                   "compared on both sides (negative = faster).</p>")
    else:
        out.append('<p class="absent">No family has a benchmark compared on both sides.</p>')
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Section 3: A/B strip plots

def strip_plot(name: str, m: dict, threshold: float | None) -> str:
    sb = [float(x) for x in m.get("samples_base") or [] if _finite(x)]
    sn = [float(x) for x in m.get("samples_new") or [] if _finite(x)]
    mb, mn = _num(m.get("base")), _num(m.get("new"))
    vals = sb + sn + [v for v in (mb, mn) if v is not None]
    if not vals:
        return ""
    unit = m.get("unit") or "s"
    lo, hi = min(vals), max(vals)
    if threshold and mb is not None:
        lo, hi = min(lo, mb / (1 + threshold)), max(hi, mb * (1 + threshold))
    ax = Axis(lo, hi, unit, n=4, pad=0.04)
    w, h, left, right, top = 460, 104, 44, 14, 10
    band = 30
    x_of = lambda v: left + ax.frac(v) * (w - left - right)  # noqa: E731
    out = [_svg_open("ab-strip", w, h, f"A/B samples of {name}")]
    ybot = top + 2 * band + 4
    for t in ax.ticks:
        x = x_of(t)
        out.append(f'<line class="grid" x1="{_c(x)}" x2="{_c(x)}" y1="{top}" y2="{_c(ybot)}"/>')
        out.append(f'<text x="{_c(x)}" y="{_c(ybot + 13)}" text-anchor="middle">'
                   f"{_e(ax.label(t))}</text>")
    if threshold and mb is not None:
        x0, x1 = x_of(mb / (1 + threshold)), x_of(mb * (1 + threshold))
        out.append(f'<rect class="thr" x="{_c(x0)}" y="{top}" width="{_c(x1 - x0)}" '
                   f'height="{_c(2 * band)}"><title>within the minimum effect '
                   f"(&#177;{_e(_g(threshold * 100))}% of the base median)</title></rect>")
    for k, (lab, samples, med, colour) in enumerate((("base", sb, mb, C_BASE),
                                                     ("new", sn, mn, C_NEW))):
        yc = top + band * k + band / 2
        out.append(f'<text x="{left - 6}" y="{_c(yc + 4)}" text-anchor="end" '
                   f'class="lab">{lab}</text>')
        for i, v in enumerate(samples):
            y = yc + _jitter(i) * (band * 0.55) if len(samples) > 1 else yc
            out.append(f'<circle class="mark" cx="{_c(x_of(v))}" cy="{_c(y)}" r="3.5" '
                       f'fill="{colour}" fill-opacity="0.75"><title>{lab} sample {i + 1}: '
                       f"{_e(fmt(v, unit))}</title></circle>")
        if med is not None:
            x = x_of(med)
            out.append(f'<line class="median" x1="{_c(x)}" x2="{_c(x)}" '
                       f'y1="{_c(yc - band / 2 + 2)}" y2="{_c(yc + band / 2 - 2)}" '
                       f'stroke="{colour}"><title>{lab} median '
                       f"{_e(fmt(med, unit))}</title></line>")
    out.append("</svg>")
    return "".join(out)


def _ere_escape(s: str) -> str:
    """A POSIX extended regex matching s literally (tbd_bench's --benchmark_filter)."""
    return re.sub(r"([.\[\](){}*+?|^$\\])", r"\\\1", s)


def section_ab(c: dict) -> str:
    thr = _num(c.get("threshold"))
    picked = []
    for ri, r in enumerate(c.get("rows") or []):
        if r.get("status") != "compared":
            continue
        m = next((m for m in r.get("metrics") or [] if m.get("metric") == "real_time"), None)
        if m is None:
            continue
        mv = "acknowledged" if m.get("acknowledged") else str(m.get("verdict", ""))
        rv = str(r.get("verdict", ""))
        if rv == "same" and mv in ("same", "info") and r.get("family") != "models":
            continue
        picked.append((min(VERDICT_RANK.get(rv, 7), VERDICT_RANK.get(mv, 7)), ri, r, m, mv))
    picked.sort(key=lambda t: t[:2])
    limit = 60
    out = []
    if not picked:
        return ('<p class="absent">No strip plots: every compared benchmark is unchanged in '
                "real_time and none is a model step.</p>")
    out.append('<p class="caption">real_time of every sample (one dot each; base grey, new '
               "blue), medians as bars, the grey band is the minimum effect around the base "
               "median. Shown: benchmarks whose verdict is not &#8220;same&#8221; and every "
               "model step; regressions first.</p>")
    out.append('<div class="grid">')
    for _, _, r, m, mv in picked[:limit]:
        svg = strip_plot(r.get("name", ""), m, thr)
        ratio = _num(m.get("ratio"))
        ci = _ci_text(m)
        cap = (f'<code>{_e(r.get("name"))}</code> {_badge(mv)}<br>'
               f'median {_e(fmt(m.get("base"), "s"))} &#8594; {_e(fmt(m.get("new"), "s"))} '
               f'(n {_e(m.get("n_base"))} vs {_e(m.get("n_new"))}); ratio '
               f'{_e(_g(ratio, 4) if ratio is not None else "-")} ({_e(fmt_pct(ratio))}), '
               + (f"CI of the ratio {_e(ci)}" if ci else "no CI (too few samples)")
               + (f'; <span class="sub">{_e(m.get("test"))}</span>' if m.get("test") else ""))
        if mv == "regression":
            # Every row carries its parameters: this reruns exactly it, with more samples.
            flt = "^" + _ere_escape(str(r.get("name", ""))) + "$"
            cap += ('<br><span class="sub">rerun: </span><code class="cmd">tbd_bench '
                    f"--benchmark_filter='{_e(flt)}' --benchmark_repetitions=10</code>")
        out.append(f'<figure class="v-{_e(mv)}">{svg}<figcaption>{cap}</figcaption></figure>')
    out.append("</div>")
    if len(picked) > limit:
        out.append(f'<p class="caption">{len(picked) - limit} more not plotted; see the metric '
                   "table.</p>")
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Section 4: history

def history_chart(h: dict, s: dict) -> str:
    commits = h.get("commits") or []
    n = len(commits)
    pts = [p for p in s.get("points") or [] if isinstance(p.get("index"), int)
           and 0 <= p["index"] < n and _num(p.get("value")) is not None]
    if not pts or n == 0:
        return ""
    unit = s.get("unit", "")
    idx_of = {c.get("commit"): i for i, c in enumerate(commits)}
    vals = [float(p["value"]) for p in pts]
    for p in pts:
        vals += [float(x) for x in p.get("samples") or [] if _finite(x)]
    for g in s.get("segments") or []:
        if _num(g.get("level")) is not None:
            vals.append(float(g["level"]))
    ax = Axis(min(vals), max(vals), unit, n=5, pad=0.06)
    w = 660 if n <= HISTORY_GRID_MAX else int(min(1320, 90 + n * 30))
    rotate = n > 12
    lab_h = 58 if rotate else 20
    top, left, right = 44, 70, 16
    ph = 170
    h_ = top + ph + lab_h + 6
    step = (w - left - right) / n
    x_of = lambda i: left + (i + 0.5) * step  # noqa: E731
    y_of = lambda v: top + (1 - ax.frac(v)) * ph  # noqa: E731
    label = f'{s.get("benchmark", "")} {s.get("metric", "")}'
    out = [_svg_open("history", w, h_, f"history of {label}")]
    out += _yaxis(ax, left, w - right, y_of)
    out.append(f'<line class="axis" x1="{left}" x2="{w - right}" y1="{_c(top + ph)}" '
               f'y2="{_c(top + ph)}"/>')
    every = max(1, math.ceil(n / 44))
    for i, cm in enumerate(commits):
        x = x_of(i)
        if i % every and i != n - 1:
            continue
        out.append(f'<line class="tick" x1="{_c(x)}" x2="{_c(x)}" y1="{_c(top + ph)}" '
                   f'y2="{_c(top + ph + 4)}"/>')
        short = str(cm.get("short") or str(cm.get("commit", ""))[:12])[:8]
        tip = f'{cm.get("short", "")} {cm.get("subject", "")} ({cm.get("date", "")})'
        if rotate:
            out.append(f'<text class="cx" transform="translate({_c(x + 3)},{_c(top + ph + 10)}) '
                       f'rotate(-45)" text-anchor="end"><title>{_e(tip)}</title>'
                       f"{_e(short)}</text>")
        else:
            out.append(f'<text class="cx" x="{_c(x)}" y="{_c(top + ph + 15)}" '
                       f'text-anchor="middle"><title>{_e(tip)}</title>{_e(short)}</text>')
    events = s.get("events") or []
    # Regressions that were fixed later: a tinted span from the change to the fix.
    for ev in events:
        i0 = ev.get("index")
        fb = idx_of.get(ev.get("fixed_by")) if ev.get("fixed_by") else None
        if isinstance(i0, int) and fb is not None and fb > i0 and ev.get("verdict") == "regression":
            x0, x1 = x_of(i0) - step / 2, x_of(fb) - step / 2
            out.append(f'<rect class="recovered" x="{_c(x0)}" y="{top}" width="{_c(x1 - x0)}" '
                       f'height="{ph}"/>')
    for g in s.get("segments") or []:
        a, b, lv = g.get("start"), g.get("end"), _num(g.get("level"))
        if not isinstance(a, int) or not isinstance(b, int) or lv is None:
            continue
        y = y_of(lv)
        out.append(f'<line class="seg" x1="{_c(x_of(a) - step * 0.4)}" '
                   f'x2="{_c(x_of(b) + step * 0.4)}" y1="{_c(y)}" y2="{_c(y)}">'
                   f"<title>segment {a}..{b}: level {_e(fmt(lv, unit))}</title></line>")
    for p in pts:
        i = p["index"]
        for j, x in enumerate(v for v in p.get("samples") or [] if _finite(v)):
            cx = x_of(i) + _jitter(j) * min(step * 0.5, 12)
            out.append(f'<circle class="mark sample" cx="{_c(cx)}" cy="{_c(y_of(x))}" r="1.8"/>')
    pts_sorted = sorted(pts, key=lambda p: p["index"])
    path, prev = [], None
    for p in pts_sorted:
        cmd = "L" if prev is not None and p["index"] == prev + 1 else "M"
        path.append(f'{cmd}{_c(x_of(p["index"]))} {_c(y_of(p["value"]))}')
        prev = p["index"]
    out.append(f'<path class="line" d="{" ".join(path)}"/>')
    for p in pts_sorted:
        i = p["index"]
        cm = commits[i]
        tip = (f'{cm.get("short", "")} {cm.get("subject", "")}: {fmt(p["value"], unit)}'
               f' (median of {len(p.get("samples") or [])})')
        out.append(f'<circle class="mark point" cx="{_c(x_of(i))}" cy="{_c(y_of(p["value"]))}" '
                   f'r="3"><title>{_e(tip)}</title></circle>')
    value_at = {p["index"]: float(p["value"]) for p in pts}
    slot = 0
    for ev in events:
        i = ev.get("index")
        if not isinstance(i, int) or not 0 <= i < n:
            continue
        reg = ev.get("verdict") == "regression"
        colour = C_REG if reg else C_IMP
        ratio = _num(ev.get("ratio"))
        kind = str(ev.get("kind", ""))
        lab = (f"x{ratio:.3g}" if ratio is not None else kind)
        tip = (f'{kind} {ev.get("verdict", "")} at {str(ev.get("commit", ""))[:12]}: '
               f'{fmt(ev.get("from"), unit)} -> {fmt(ev.get("to"), unit)}'
               f' ({fmt_pct(ratio)}); {ev.get("detail", "")}')
        if kind == "outlier":
            if i in value_at:
                out.append(f'<circle class="mark outlier" cx="{_c(x_of(i))}" '
                           f'cy="{_c(y_of(value_at[i]))}" r="7" stroke="{colour}">'
                           f"<title>{_e(tip)}</title></circle>")
            continue
        x = x_of(i) - step / 2
        dash = ' stroke-dasharray="5 3"' if kind == "drift" else ""
        out.append(f'<line class="event" x1="{_c(x)}" x2="{_c(x)}" y1="{top - 2}" '
                   f'y2="{_c(top + ph)}" stroke="{colour}"{dash}><title>{_e(tip)}</title></line>')
        status = "" if not reg else (" open" if ev.get("open") else
                                     " fixed" if ev.get("fixed_by") else "")
        out.append(f'<text class="evl" x="{_c(x + 3)}" y="{_c(top - 5 - 11 * (slot % 3))}" '
                   f'fill="{colour}">{_e(kind + " " + lab + status)}</text>')
        slot += 1
        fb = idx_of.get(ev.get("fixed_by")) if ev.get("fixed_by") else None
        if fb is not None:
            xf = x_of(fb) - step / 2
            out.append(f'<line class="event fixed" x1="{_c(xf)}" x2="{_c(xf)}" y1="{top - 2}" '
                       f'y2="{_c(top + ph)}" stroke="{C_IMP}" stroke-dasharray="2 3">'
                       f'<title>recovered at {_e(str(ev.get("fixed_by"))[:12])}</title></line>')
            out.append(f'<text class="evl" x="{_c(xf + 3)}" y="{_c(top - 5 - 11 * (slot % 3))}" '
                       f'fill="{C_IMP}">recovered</text>')
            slot += 1
    out.append("</svg>")
    return "".join(out)


HISTORY_GRID_MAX = 30   # commits: up to this many, history charts sit two to a row


def _event_rank(ev: dict) -> int:
    """0 open regression, 1 acknowledged open one, 2 closed regression, 3 improvement."""
    if ev.get("verdict") == "regression" and ev.get("open"):
        return 1 if ev.get("acknowledged") else 0
    if ev.get("verdict") == "regression":
        return 2
    return 3


def section_history(h: dict) -> str:
    commits = h.get("commits") or []
    series = h.get("series") or []
    by_sha = {c.get("commit"): c for c in commits}
    out = []
    mi = h.get("machine_info") or {}
    facts = [("machine", h.get("machine", "")), ("store", h.get("store", "")),
             ("ref", h.get("ref", ""))]
    facts += [(k, v) for k, v in mi.items() if not isinstance(v, (dict, list))]
    off = [str(c) for c in h.get("off_branch") or []]
    out.append('<p class="facts">' + " &#183; ".join(
        f"<b>{_e(k)}</b> {_e(v)}" for k, v in facts if v not in (None, "")) +
        f" &#183; <b>commits</b> {len(commits)}"
        + (f' ({_e(commits[0].get("short", ""))} &#8230; {_e(commits[-1].get("short", ""))})'
           if commits else "")
        + (f' &#183; <span title="{_e(", ".join(c[:12] for c in off))}"><b>off the branch'
           f"</b> {len(off)} stored commits (not drawn)</span>" if off else "") + "</p>")
    evs = []
    for si, s in enumerate(series):
        for ei, ev in enumerate(s.get("events") or []):
            evs.append((_event_rank(ev), si, ei, s, ev))
    evs.sort(key=lambda t: t[:3])
    if evs:
        rows, rcls = [], []
        for rank, si, ei, s, ev in evs:
            unit = s.get("unit", "")
            cm = by_sha.get(ev.get("commit"), {})
            short = cm.get("short") or str(ev.get("commit", ""))[:12]
            level = f'{fmt(ev.get("from"), unit)} \u2192 {fmt(ev.get("to"), unit)}'
            ratio = _num(ev.get("ratio"))
            state = ("open" if ev.get("open") else
                     f'fixed in {str(ev.get("fixed_by"))[:8]}' if ev.get("fixed_by") else "closed")
            if ev.get("acknowledged"):
                state += ", acknowledged"
            um = ev.get("unmeasured_between")
            if isinstance(um, int) and um > 0:
                state += f"; {um} unmeasured commit{'s' if um > 1 else ''} before (bisect)"
            fb = by_sha.get(ev.get("fixed_by"), {}) if ev.get("fixed_by") else {}
            rows.append([Cell(f'<code>{_e(s.get("benchmark"))}</code>', cls="name"),
                         s.get("metric", ""),
                         Cell(_badge(str(ev.get("verdict", ""))) + " " + _e(ev.get("kind", "")),
                              rank),
                         Cell(f'<code>{_e(short)}</code> {_e(cm.get("subject", ""))}',
                              ev.get("index"), cls="subj",
                              title=f'{cm.get("subject", "")} (after '
                              f'{str(ev.get("prev_commit", ""))[:12]})'),
                         Cell(_e(f"x{ratio:.3g} ({fmt_pct(ratio)})" if ratio is not None
                                 else "-") + f'<br><span class="sub">{_e(level)}</span>', ratio),
                         Cell(_e(state), title=str(ev.get("acknowledged") or
                                                   fb.get("subject", ""))),
                         Cell(_e(ev.get("detail", "")), cls="note")])
            rcls.append("v-" + ("acknowledged" if rank == 1 else str(ev.get("verdict", ""))) +
                        (" open" if ev.get("open") else ""))
        nopen = sum(1 for t in evs if t[0] == 0)
        nack = sum(1 for t in evs if t[0] == 1)
        out.append(f'<h3 id="change-points">Change points ({len(evs)}; {nopen} open '
                   f"regressions{f', {nack} acknowledged' if nack else ''})</h3>")
        out.append(_table([("benchmark", "text"), ("metric", "text"),
                           ("verdict, kind", "text"), ("first commit after", "text"),
                           ("change, level", "num"),
                           ("state", "text"), ("detail", "text")], rows, rcls,
                          cls="events", tid="t-events"))
    else:
        out.append('<p class="absent">No change points in the history.</p>')
    order = sorted(range(len(series)), key=lambda i: (
        min([_event_rank(e) for e in series[i].get("events") or []] or [4]), i))
    limit = 80
    drawn = 0
    skipped = []
    used: set = set()
    figs = []
    for i in order:
        s = series[i]
        if drawn >= limit:
            skipped.append(s)
            continue
        svg = history_chart(h, s)
        thr, noise = _num(s.get("threshold")), _num(s.get("noise"))
        facts = [f'{s["direction"]} is better' if s.get("direction") in ("lower", "higher")
                 else s.get("direction", ""), "exact" if s.get("exact") else "",
                 s.get("unit", ""),
                 f"threshold {_g(thr * 100, 3)}%" if thr is not None and not s.get("exact") else "",
                 # the detector's noise is of log values for ratio-like metrics
                 f"noise {_g(math.expm1(noise) * 100, 2)}%" if noise and not s.get("exact")
                 else ""]
        facts = "; ".join(str(f) for f in facts if f)
        head = (f'<code>{_e(s.get("benchmark"))}</code> &#183; {_e(s.get("metric"))}'
                + (f' <span class="sub">({_e(facts)})</span>' if facts else ""))
        sid = _slug(f'h-{s.get("benchmark", "")}-{s.get("metric", "")}', used)
        if not svg:
            figs.append(f'<figure><h3 id="{sid}">{head}</h3><p class="absent">No points on '
                        "the commits of this history.</p></figure>")
            continue
        pts = [p for p in s.get("points") or [] if _num(p.get("value")) is not None]
        last = max(pts, key=lambda p: p.get("index", -1)) if pts else None
        latest = (f'latest {_e(fmt(last["value"], s.get("unit", "")))} at '
                  f'{_e(str(last.get("commit", ""))[:12])}; ' if last else "")
        nev = len(s.get("events") or [])
        figs.append(f'<figure><h3 id="{sid}">{head}</h3>{svg}<figcaption>{latest}'
                    f'{len(pts)} of {len(commits)} commits with data, {nev} change points.'
                    "</figcaption></figure>")
        drawn += 1
    if figs:
        wide = len(commits) > HISTORY_GRID_MAX
        out.append('<p class="caption">Per series: the per-commit median (line, points; hover '
                   "for the commit), samples as faint dots, segment levels as grey bars, the "
                   "first commit after a change as a vertical line labelled with new/old "
                   "level (red regression, green improvement, dashed drift), outliers ringed, "
                   "a regression later recovered tinted up to the fixing commit. Series with "
                   "open regressions first.</p>")
        out.append(f'<div class="grid {"g1" if wide else "g2"}">' + "".join(figs) + "</div>")
    if skipped:
        out.append(f'<p class="caption">{len(skipped)} more series without change points not '
                   "drawn: " + ", ".join(f'<code>{_e(s.get("benchmark"))}</code> '
                                         f'{_e(s.get("metric"))}' for s in skipped) + ".</p>")
    if not series:
        out.append('<p class="absent">The history document has no series.</p>')
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Sections 5 and 6: model rows of the runs

def _series_rows(runs: list[Run], parse) -> dict:
    """{series key: {batch: (bench, run)}}, the key naming the run when several runs have it."""
    found: dict[str, list] = {}
    for ri, run in enumerate(runs):
        for name, b in run.benches.items():
            pm = parse(name)
            if pm is None or not b.ok:
                continue
            found.setdefault(pm[0], []).append((ri, pm[1], b, run))
    out: dict[str, dict] = {}
    for key, items in found.items():
        multi = len({ri for ri, _, _, _ in items}) > 1
        for ri, n, b, run in items:
            k = f"{key} ({os.path.basename(run.path)})" if multi else key
            out.setdefault(k, {})[n] = (b, run)
    return out


def _med(b, metric):
    return _median(b.samples.get(metric, []))


def line_chart(kind: str, title: str, series: list[tuple[str, list[tuple[int, float]]]],
               unit: str, w: int = 620, h: int = 300, zero: bool = True,
               xlabel: str = "batch size") -> str:
    """y vs batch size (or `xlabel`) on a log2 x axis, one line per series."""
    xs = sorted({n for _, pts in series for n, _ in pts})
    ys = [v for _, pts in series for _, v in pts]
    if not xs or not ys:
        return ""
    ax = Axis(min(ys), max(ys), unit, n=5, zero=zero, pad=0.0 if zero else 0.05)
    if zero and ax.hi < max(ys) * 1.04:
        ax = Axis(0.0, max(ys) * 1.06, unit, n=5, zero=True)
    left, right, top = 72, 24, 26
    leg_rows = _legend_rows([name for name, _ in series], w - left - right)
    bottom = 36 + 15 * leg_rows
    ph = h - top - bottom
    l2 = [math.log2(n) if n > 0 else 0.0 for n in xs]
    lo2, hi2 = min(l2), max(l2)
    if hi2 == lo2:
        lo2, hi2 = lo2 - 1, hi2 + 1
    pad = (hi2 - lo2) * 0.06
    lo2, hi2 = lo2 - pad, hi2 + pad
    def x_of(n):
        return left + ((math.log2(n) if n > 0 else 0.0) - lo2) / (hi2 - lo2) * (w - left - right)

    y_of = lambda v: top + (1 - ax.frac(v)) * ph  # noqa: E731
    out = [_svg_open(kind, w, h, title)]
    out += _yaxis(ax, left, w - right, y_of, title)
    out.append(f'<line class="axis" x1="{left}" x2="{w - right}" y1="{_c(top + ph)}" '
               f'y2="{_c(top + ph)}"/>')
    for n in xs:
        x = x_of(n)
        out.append(f'<line class="tick" x1="{_c(x)}" x2="{_c(x)}" y1="{_c(top + ph)}" '
                   f'y2="{_c(top + ph + 4)}"/>')
        out.append(f'<text x="{_c(x)}" y="{_c(top + ph + 16)}" text-anchor="middle">{n}</text>')
    out.append(f'<text class="axt" x="{_c(w - right)}" y="{_c(top + ph + 30)}" '
               f'text-anchor="end">{_e(xlabel)} (log2)</text>')
    for k, (name, pts) in enumerate(series):
        colour = PALETTE[k % len(PALETTE)]
        pts = sorted(pts)
        if len(pts) > 1:
            d = " ".join(f'{"M" if i == 0 else "L"}{_c(x_of(n))} {_c(y_of(v))}'
                         for i, (n, v) in enumerate(pts))
            out.append(f'<path class="sline" d="{d}" stroke="{colour}"/>')
        for n, v in pts:
            out.append(f'<circle class="mark" cx="{_c(x_of(n))}" cy="{_c(y_of(v))}" r="3.5" '
                       f'fill="{colour}"><title>{_e(name)} {_e(xlabel)} {n}: '
                       f'{_e(fmt(v, unit))}</title></circle>')
    out += _legend([("dot", PALETTE[k % len(PALETTE)], name) for k, (name, _) in
                    enumerate(series)], left, top + ph + 46, w - left - right)
    out.append("</svg>")
    return "".join(out)


def section_throughput(runs: list[Run]) -> str:
    models = _series_rows(runs, parse_model)
    out = []
    if not models:
        return ('<p class="absent">No model rows (<code>&lt;Model&gt;/train/batch:&lt;N&gt;</code>)'
                " in the runs.</p>")
    tp = [(k, [(n, v) for n, (b, _) in sorted(d.items())
               if (v := _med(b, "items_per_second")) is not None]) for k, d in models.items()]
    tp = [(k, p) for k, p in tp if p]
    util = [(k, [(n, v) for n, (b, _) in sorted(d.items())
                 if (v := _med(b, "fp32_utilization")) is not None]) for k, d in models.items()]
    util = [(k, p) for k, p in util if p]
    ut_unit = "fraction"
    if not util:
        util = [(k, [(n, v) for n, (b, _) in sorted(d.items())
                     if (v := _med(b, "flops")) is not None]) for k, d in models.items()]
        util = [(k, p) for k, p in util if p]
        ut_unit = "FLOP/s"
    charts = []
    if tp:
        charts.append(line_chart("throughput", "samples/s (items_per_second)", tp, "samples/s"))
    if util:
        charts.append(line_chart("utilization", "FP32 utilization" if ut_unit == "fraction"
                                 else "achieved FLOP/s", util, ut_unit))
    if charts:
        out.append('<div class="grid g2">' + "".join(f"<figure>{c}</figure>" for c in charts)
                   + "</div>")
        if all(len(p) == 1 for _, p in tp):
            out.append('<p class="caption">One batch size per model in these runs: a sweep '
                       "(tbd_bench's default axis, or --tbd_batches) draws the curve.</p>")
    else:
        out.append('<p class="absent">The model rows carry no items_per_second.</p>')
    rows = []
    for k, d in models.items():
        for n, (b, run) in sorted(d.items()):
            extra = sorted(m for m in b.samples if m.endswith("_per_second")
                           and m not in ("items_per_second",))
            rows.append([Cell(f"<code>{_e(k)}</code>", cls="name"), Cell(str(n), n),
                         Cell(_e(fmt(_med(b, "real_time"), "s")), _med(b, "real_time")),
                         Cell(_e(fmt(_med(b, "items_per_second"), "samples/s")),
                              _med(b, "items_per_second")),
                         Cell(_e(", ".join(f'{m[:-11]} {fmt(_med(b, m), "items/s")}'
                                           for m in extra))),
                         Cell(_e(fmt(_med(b, "flops"), "FLOP/s")), _med(b, "flops")),
                         Cell(_e(fmt(_med(b, "fp32_utilization"), "fraction")),
                              _med(b, "fp32_utilization")),
                         Cell(_e(fmt(_med(b, "cpu_utilization"), "fraction")),
                              _med(b, "cpu_utilization")),
                         Cell(_e(fmt(_med(b, "peak_memory_bytes"), "bytes")),
                              _med(b, "peak_memory_bytes")),
                         Cell(_e(b.n()), b.n())])
    out.append(_table([("model", "text"), ("batch", "num"), ("step", "num"),
                       ("samples/s", "num"), ("other rates", "text"), ("FLOP/s", "num"),
                       ("FP32 util", "num"), ("CPU util", "num"), ("peak memory", "num"),
                       ("n", "num")], rows, tid="t-models"))
    layers = _series_rows(runs, parse_layer)
    multi = [(k, [(n, v) for n, (b, _) in sorted(d.items())
                  if (v := _med(b, "items_per_second")) is not None])
             for k, d in layers.items() if len(d) > 1]
    multi = [(k, p) for k, p in multi if len(p) > 1]
    if multi:
        cap = 10
        out.append('<h3 id="layer-throughput">Layer rows: samples/s vs batch</h3>')
        out.append('<div class="grid g2"><figure>' +
                   line_chart("layer-throughput", "samples/s (items_per_second)", multi[:cap],
                              "samples/s", w=620, h=320)
                   + "</figure></div>")
        if len(multi) > cap:
            out.append(f'<p class="caption">{len(multi) - cap} more layer rows with a batch '
                       "sweep not drawn.</p>")
    return "".join(out)


def memory_chart(key: str, d: dict) -> str:
    bars = []
    for n, (b, _) in sorted(d.items()):
        parts = [(lab, col, _med(b, m) or 0.0) for m, lab, col in MEM_CATEGORIES]
        peak = _med(b, "peak_memory_bytes")
        if sum(v for _, _, v in parts) <= 0:
            continue        # no categories (a peak alone is in the table)
        bars.append((n, parts, peak))
    if not bars:
        return ""
    top_v = max(max(sum(v for _, _, v in p), pk or 0.0) for _, p, pk in bars)
    ax = Axis(0.0, top_v * 1.04, "bytes", n=5, zero=True)
    w = max(360, min(640, 110 + 56 * len(bars)))
    left, right, top = 72, 16, 24
    leg = [("box", col, lab) for _, lab, col in MEM_CATEGORIES] + [("line", "#1f2328", "peak")]
    bottom = 36 + 15 * _legend_rows([lab for _, _, lab in leg], w - left + 40)
    h = 236 + bottom
    ph = h - top - bottom
    y_of = lambda v: top + (1 - ax.frac(v)) * ph  # noqa: E731
    slot = (w - left - right) / len(bars)
    bw = min(40.0, slot * 0.6)
    out = [_svg_open("memory", w, h, f"memory by category for {key}")]
    out += _yaxis(ax, left, w - right, y_of, "bytes at peak")
    out.append(f'<line class="axis" x1="{left}" x2="{w - right}" y1="{_c(top + ph)}" '
               f'y2="{_c(top + ph)}"/>')
    for i, (n, parts, peak) in enumerate(bars):
        xc = left + slot * (i + 0.5)
        acc = 0.0
        for lab, col, v in parts:
            if v <= 0:
                continue
            y1, y0 = y_of(acc + v), y_of(acc)
            out.append(f'<rect class="mark" x="{_c(xc - bw / 2)}" y="{_c(y1)}" width="{_c(bw)}" '
                       f'height="{_c(max(y0 - y1, 0.5))}" fill="{col}"><title>batch {n}: {lab} '
                       f"{_e(fmt(v, 'bytes'))}</title></rect>")
            acc += v
        if peak:
            y = y_of(peak)
            out.append(f'<line class="peak" x1="{_c(xc - bw / 2 - 5)}" x2="{_c(xc + bw / 2 + 5)}" '
                       f'y1="{_c(y)}" y2="{_c(y)}"><title>batch {n}: peak '
                       f"{_e(fmt(peak, 'bytes'))}</title></line>")
            out.append(f'<text x="{_c(xc)}" y="{_c(y - 4)}" text-anchor="middle" class="pk">'
                       f"{_e(fmt(peak, 'bytes', 3))}</text>")
        out.append(f'<text x="{_c(xc)}" y="{_c(top + ph + 15)}" text-anchor="middle">{n}</text>')
    out.append(f'<text class="axt" x="{_c(w - right)}" y="{_c(top + ph + 29)}" '
               'text-anchor="end">batch size</text>')
    out += _legend(leg, left - 50, top + ph + 46, w - left + 40)
    out.append("</svg>")
    return "".join(out)


def section_memory(runs: list[Run]) -> str:
    models = _series_rows(runs, parse_model)
    figs, rows = [], []
    for key, d in models.items():
        svg = memory_chart(key, d)
        if svg:
            figs.append(f'<figure><h3>{_e(key)}</h3>{svg}</figure>')
        for n, (b, _) in sorted(d.items()):
            vals = [_med(b, m) for m, _, _ in MEM_CATEGORIES]
            have = [v for v in vals if v is not None]
            total = sum(have) if have else None
            peak = _med(b, "peak_memory_bytes")
            if total is None and peak is None:
                continue
            rows.append([Cell(f"<code>{_e(key)}</code>", cls="name"), Cell(str(n), n)] +
                        [Cell(_e(fmt(v, "bytes")), v) for v in vals] +
                        [Cell(_e(fmt(total, "bytes")), total), Cell(_e(fmt(peak, "bytes")), peak),
                         Cell(_e(fmt(peak / total, "fraction")) if peak and total else "-",
                              peak / total if peak and total else None)])
    if not rows:
        return ('<p class="absent">No model rows with memory counters (mem_*, '
                "peak_memory_bytes) in the runs.</p>")
    out = []
    if figs:
        out.append('<div class="grid">' + "".join(figs) + "</div>")
    else:
        out.append('<p class="absent">No mem_* categories in the model rows: no stacked bars, '
                   "the peaks are in the table.</p>")
    out.append(_table([("model", "text"), ("batch", "num")] +
                      [(lab, "num") for _, lab, _ in MEM_CATEGORIES] +
                      [("sum", "num"), ("peak", "num"), ("peak/sum", "num")], rows,
                      tid="t-memory"))
    out.append('<p class="caption">Each category is its own peak during the timed step; with no '
               "allocation inside a step they sum to peak_memory_bytes (the black mark).</p>")
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Section 7: per-layer breakdown

OPTIONAL_BD = (("bytes", "bytes", "bytes"), ("arithmetic_intensity", "FLOP/B", ""),
               ("roofline_utilization", "roofline util", "fraction"),
               ("bandwidth_utilization", "bandwidth util", "fraction"), ("bound", "bound", None))


class LogAxis:
    """A log10 axis over [lo, hi] (positive), ticks at the powers of ten inside."""

    def __init__(self, lo: float, hi: float):
        self.lo = 10 ** math.floor(math.log10(lo) + 1e-9)
        self.hi = 10 ** math.ceil(math.log10(hi) - 1e-9)
        if self.hi <= self.lo:
            self.hi = self.lo * 10
        k0, k1 = round(math.log10(self.lo)), round(math.log10(self.hi))
        self.ticks = [10.0 ** k for k in range(k0, k1 + 1)]

    def frac(self, v: float) -> float:
        return (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) -
                                                        math.log10(self.lo))


def roofline_chart(bench: str, rows: list[dict], shares: list, peak: float | None,
                   bw: float | None) -> str:
    """Achieved FLOP/s vs arithmetic intensity per layer (log-log), with the roofs."""
    pts = []
    for r, (s, _) in zip(rows, shares):
        ai, fl = _num(r.get("arithmetic_intensity")), _num(r.get("flops"))
        if ai and fl and ai > 0 and fl > 0:
            pts.append((ai, fl, s, r))
    if len(pts) < 2:
        return ""
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts] + ([peak] if peak else [])
    xa, ya = LogAxis(min(xs), max(xs)), LogAxis(min(ys), max(ys) * 1.01)
    w, h, left, right, top, bottom = 660, 330, 84, 20, 24, 52
    pw, ph = w - left - right, h - top - bottom
    x_of = lambda v: left + xa.frac(v) * pw  # noqa: E731
    y_of = lambda v: top + (1 - ya.frac(v)) * ph  # noqa: E731
    out = [_svg_open("roofline", w, h, f"roofline of {bench}")]
    out.append(f'<text class="axt" x="{left}" y="12">achieved FLOP/s vs arithmetic intensity '
               "(log-log), dot area ~ share of the step</text>")
    for t in ya.ticks:
        y = y_of(t)
        out.append(f'<line class="grid" x1="{left}" x2="{w - right}" y1="{_c(y)}" y2="{_c(y)}"/>')
        out.append(f'<text x="{left - 5}" y="{_c(y + 3.5)}" text-anchor="end">'
                   f'{_e(fmt(t, "FLOP/s", 3))}</text>')
    for t in xa.ticks:
        x = x_of(t)
        out.append(f'<line class="grid" x1="{_c(x)}" x2="{_c(x)}" y1="{top}" y2="{_c(top + ph)}"/>')
        out.append(f'<text x="{_c(x)}" y="{_c(top + ph + 14)}" text-anchor="middle">'
                   f"{_e(_g(t, 3))}</text>")
    out.append(f'<text class="axt" x="{w - right}" y="{_c(top + ph + 30)}" text-anchor="end">'
               "arithmetic intensity (FLOP/byte)</text>")
    if peak and bw:
        # The roof: min(peak, intensity x bandwidth), drawn across the x range.
        knee = peak / bw
        a0, a1 = xa.lo, xa.hi
        seg = []
        for a in ([a0] + ([knee] if a0 < knee < a1 else []) + [a1]):
            seg.append((a, min(peak, a * bw)))
        seg = [(a, v) for a, v in seg if ya.lo <= v <= ya.hi * 1.0001] or seg
        d = " ".join(f'{"M" if i == 0 else "L"}{_c(x_of(a))} {_c(y_of(max(v, ya.lo)))}'
                     for i, (a, v) in enumerate(seg))
        out.append(f'<path class="roof" d="{d}"><title>roof: min({_e(fmt(peak, "FLOP/s"))}, '
                   f'intensity x {_e(fmt(bw, "bytes/s"))})</title></path>')
    elif peak:
        y = y_of(peak)
        out.append(f'<line class="roof" x1="{left}" x2="{w - right}" y1="{_c(y)}" y2="{_c(y)}">'
                   f'<title>peak FP32 {_e(fmt(peak, "FLOP/s"))}</title></line>')
    kinds = list(dict.fromkeys(str(p[3].get("kind", "")) for p in sorted(
        pts, key=lambda p: -p[2])))
    colour = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(kinds)}
    for ai, fl, sh, r in sorted(pts, key=lambda p: -p[2]):
        rad = 2.5 + 9 * math.sqrt(max(sh, 0.0))
        out.append(f'<circle class="mark" cx="{_c(x_of(ai))}" cy="{_c(y_of(fl))}" '
                   f'r="{_c(rad)}" fill="{colour[str(r.get("kind", ""))]}" fill-opacity="0.6">'
                   f'<title>{_e(r.get("layer", ""))} ({_e(r.get("kind", ""))}): '
                   f'{_e(_g(ai, 3))} FLOP/B, {_e(fmt(fl, "FLOP/s"))}, '
                   f'{_e(fmt(sh, "fraction"))} of the step'
                   f'{", " + _e(r.get("bound")) + "-bound" if r.get("bound") else ""}'
                   "</title></circle>")
    out += _legend([("dot", colour[k], k or "-") for k in kinds[:8]], left,
                   top + ph + 46, pw)
    out.append("</svg>")
    return "".join(out)


def _bd_time(r: dict) -> float:
    return (_num(r.get("fwd_time_s")) or 0.0) + (_num(r.get("bwd_time_s")) or 0.0)


def _bd_flop(r: dict):
    # Files written before the fprop/dgrad/wgrad names say flop_fwd, flop_bwd_data, ...
    keys = (("flop_fprop", "flop_fwd"), ("flop_dgrad", "flop_bwd_data"),
            ("flop_wgrad", "flop_bwd_weights"))
    parts = [_num(r.get(new, r.get(old))) for new, old in keys]
    parts = [p for p in parts if p is not None]
    return sum(parts) if parts else None


def _hbar_frame(kind: str, title: str, w: int, h: int, left: int, top: int, yb: float,
                ax: "Axis", x_of, suffix: str) -> list[str]:
    """The opening of a horizontal-bar chart: title, vertical grid lines and tick labels."""
    out = [_svg_open(kind, w, h, title)]
    out.append(f'<text class="axt" x="{left}" y="12">{_e(title)}</text>')
    for t in ax.ticks:
        x = x_of(t)
        out.append(f'<line class="grid" x1="{_c(x)}" x2="{_c(x)}" y1="{top - 2}" y2="{_c(yb)}"/>')
        out.append(f'<text x="{_c(x)}" y="{_c(yb + 13)}" text-anchor="middle">'
                   f"{_e(ax.label(t))}{suffix}</text>")
    return out


def share_chart(kind: str, title: str, items: list[tuple[str, float, float, str]]) -> str:
    """Horizontal bars: (label, fwd share, bwd share, right-hand text) per item."""
    if not items:
        return ""
    w, left, top, rowh = 660, 250, 24, 17
    right = int(min(250, max(120, 6.0 * max(len(t) for _, _, _, t in items) + 12)))
    h = top + rowh * len(items) + 30
    vmax = max(f + b for _, f, b, _ in items)
    ax = Axis(0.0, vmax, "fraction", n=4, zero=True)
    pw = w - left - right
    x_of = lambda v: left + ax.frac(v) * pw  # noqa: E731
    yb = top + rowh * len(items)
    out = _hbar_frame(kind, title, w, h, left, top, yb, ax, x_of, "")
    for i, (lab, f, b, txt) in enumerate(items):
        y = top + rowh * i
        name, _, kind_ = lab.partition("\t")
        lab = f"{name} ({kind_})" if kind_ else name
        if len(name) > 28:
            name = name[:13] + "\u2026" + name[-14:]
        if len(kind_) > 14:
            kind_ = kind_[:13] + "\u2026"
        ktxt = f' <tspan class="k">{_e(kind_)}</tspan>' if kind_ else ""
        out.append(f'<text x="{left - 6}" y="{_c(y + 12)}" text-anchor="end" class="rl">'
                   f"<title>{_e(lab)}</title>{_e(name)}{ktxt}</text>")
        x0 = x_of(0)
        if f > 0:
            out.append(f'<rect class="mark fwd" x="{_c(x0)}" y="{_c(y + 2)}" '
                       f'width="{_c(max(x_of(f) - x0, 0.5))}" height="{rowh - 4}">'
                       f"<title>{_e(lab)}: forward {_e(fmt(f, 'fraction'))} of the step</title>"
                       "</rect>")
        if b > 0:
            out.append(f'<rect class="mark bwd" x="{_c(x_of(f))}" y="{_c(y + 2)}" '
                       f'width="{_c(max(x_of(f + b) - x_of(f), 0.5))}" height="{rowh - 4}">'
                       f"<title>{_e(lab)}: backward {_e(fmt(b, 'fraction'))} of the step</title>"
                       "</rect>")
        out.append(f'<text x="{_c(x_of(f + b) + 4)}" y="{_c(y + 12)}" class="bt">{_e(txt)}'
                   "</text>")
    out += _legend([("box", "#4e79a7", "forward"), ("box", "#a0cbe8", "backward")],
                   left, yb + 28, pw)
    out.append("</svg>")
    return "".join(out)


def ratio_chart(kind: str, title: str, items: list[tuple[str, list[tuple[str, dict]]]],
                ref: str) -> str:
    """Horizontal bars of ref's rate over each peer's, per row: (row, [(peer, ratio dict)]),
    with the confidence interval as a whisker and parity (1x) as a line."""
    items = [(n, [(p, r) for p, r in rs if r and _finite(r.get("ratio"))]) for n, rs in items]
    items = [(n, rs) for n, rs in items if rs]
    if not items:
        return ""
    peers: list[str] = []
    for _, rs in items:
        peers += [p for p, _ in rs if p not in peers]
    colour = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(peers)}
    w, left, right, top, barh = 660, 230, 70, 24, 12
    rowh = barh * len(peers) + 8
    h = top + rowh * len(items) + 30 + 16 * _legend_rows(peers, w - left - right)
    vals = [1.0]
    for _, rs in items:
        for _, r in rs:
            ci = [x for x in r.get("ci", []) if _finite(x)]
            vals += [r["ratio"]] + ci
    ax = Axis(0.0, max(vals), "", n=5, zero=True)
    pw = w - left - right
    x_of = lambda v: left + ax.frac(v) * pw  # noqa: E731
    yb = top + rowh * len(items)
    out = _hbar_frame(kind, title, w, h, left, top, yb, ax, x_of, "x")
    x1 = x_of(1.0)
    out.append(f'<line class="parity" x1="{_c(x1)}" x2="{_c(x1)}" y1="{top - 4}" '
               f'y2="{_c(yb)}" stroke="#24292f" stroke-dasharray="4 3"/>')
    for i, (name, rs) in enumerate(items):
        y = top + rowh * i
        short = name if len(name) <= 34 else name[:16] + "\u2026" + name[-17:]
        out.append(f'<text x="{left - 6}" y="{_c(y + rowh / 2 + 3)}" text-anchor="end" '
                   f'class="rl"><title>{_e(name)}</title>{_e(short)}</text>')
        for j, (p, r) in enumerate(rs):
            yy = y + 4 + barh * peers.index(p)
            v = r["ratio"]
            x0 = x_of(0)
            tip = f"{name}: {ref} / {p} = {v:.3g}x"
            ci = r.get("ci") or []
            if len(ci) == 2 and all(_finite(c) for c in ci):
                tip += f" (CI {ci[0]:.3g} to {ci[1]:.3g})"
            out.append(f'<rect class="mark" x="{_c(x0)}" y="{_c(yy)}" '
                       f'width="{_c(max(x_of(v) - x0, 0.5))}" height="{barh - 2}" '
                       f'fill="{colour[p]}"><title>{_e(tip)}</title></rect>')
            if len(ci) == 2 and all(_finite(c) for c in ci):
                ym = yy + (barh - 2) / 2
                out.append(f'<line class="whisker" x1="{_c(x_of(ci[0]))}" '
                           f'x2="{_c(x_of(ci[1]))}" y1="{_c(ym)}" y2="{_c(ym)}" '
                           'stroke="#24292f"/>')
            out.append(f'<text x="{_c(max(x_of(v), x_of(max(ci or [v]))) + 4)}" '
                       f'y="{_c(yy + barh - 3)}" class="bt">{v:.2f}x</text>')
    out += _legend([("box", colour[p], f"{ref} / {p}") for p in peers], left, yb + 28, pw)
    out.append("</svg>")
    return "".join(out)


def section_frameworks(summary: dict) -> str:
    """tbd against peer frameworks (tbd_track peer, or runs of both): ratio bars per row with
    their confidence intervals, then the table with rates and peak memory on every side."""
    from .. import frameworks as fw  # noqa: PLC0415
    ref = summary["reference"]
    short = fw.short_labels(summary["sides"])
    peers = [s for s in summary["sides"] if s != ref]
    items = []
    for row in summary["rows"]:
        m = row.get("rate")
        items.append((row["benchmark"],
                      [(short[p], (row["ratios"].get(p) or {}).get(m) if m else None)
                       for p in peers]))
    units = sorted({row["unit"] for row in summary["rows"]})
    out = [f'<p class="caption">{_e(ref)}\'s rate over each peer\'s (median; bars from 0, '
           f'whiskers: the {summary["level"] * 100:g}% confidence interval; the dashed line is '
           "parity). Right of the line, tbd is faster. Different frameworks are not a "
           "regression gate: this is the side-by-side. Unit of analysis: "
           f"{_e(', '.join(units))}.</p>"]
    out.append(ratio_chart("frameworks", "rate ratio by row", items, short[ref]))
    head, body = fw.table_rows(summary)
    cols = [(h, "text" if i < 2 else "num") for i, h in enumerate(head)]
    out.append(_table(cols, body, tid="frameworks-table"))
    ctx_rows = [[label, ", ".join(f"{k}={v}" for k, v in ctx.items())]
                for label, ctx in summary.get("contexts", {}).items()]
    if ctx_rows:
        out.append(_table([("side", "text"), ("context", "text")], ctx_rows, sortable=False))
    notes = list(summary.get("notes", [])) + [f"error: {e}" for e in fw._errors(summary)]
    if notes:
        out.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    return "".join(out)


def _breakdown_block(run: Run, bench: str, rows: list[dict], used: set) -> str:
    step = None
    b = run.benches.get(bench)
    if b is not None and b.ok:
        step = _med(b, "real_time")
    total = sum(_bd_time(r) for r in rows)
    denom = step or total
    shares = []
    for r in rows:
        s = _num(r.get("share_of_step"))
        t = _bd_time(r)
        if s is None:
            s = t / denom if denom else 0.0
        fr = (_num(r.get("fwd_time_s")) or 0.0) / t if t else 1.0
        shares.append((s, fr))
    order = sorted(range(len(rows)), key=lambda i: (-shares[i][0], i))
    peak = _num(_float_str(run.context.get("peak_fp32_flops")))
    top = []
    for i in order[:20]:
        r = rows[i]
        s, fr = shares[i]
        fl = _num(r.get("flops"))
        txt = fmt(s, "fraction")
        if fl is not None:
            txt += " \u00b7 " + fmt(fl, "FLOP/s", 3)
        ru = _num(r.get("roofline_utilization"))
        if ru is not None:
            txt += " \u00b7 " + fmt(ru, "fraction") + " roofline"
        top.append((f'{r.get("layer", "")}\t{r.get("kind", "")}', s * fr, s * (1 - fr), txt))
    kinds: dict[str, list] = {}
    for i, r in enumerate(rows):
        k = str(r.get("kind", ""))
        a = kinds.setdefault(k, [0, 0.0, 0.0, 0.0, 0.0, 0])
        a[0] += 1
        a[5] += str(r.get("bound", "")) == "mem"
        s, fr = shares[i]
        a[1] += s * fr
        a[2] += s * (1 - fr)
        a[3] += _bd_time(r)
        a[4] += _bd_flop(r) or 0.0
    kitems = []
    for k, a in sorted(kinds.items(), key=lambda kv: (-(kv[1][1] + kv[1][2]), kv[0])):
        rate = a[4] / a[3] if a[3] and a[4] else None
        txt = fmt(a[1] + a[2], "fraction") + f" \u00b7 {a[0]} layers"
        if rate:
            txt += " \u00b7 " + fmt(rate, "FLOP/s", 3)
        if a[5]:
            txt += f" \u00b7 {a[5]} mem-bound"
        kitems.append((k, a[1], a[2], txt))
    sid = _slug("bd-" + bench, used)
    cover = f"layer rows sum to {fmt(total, 's')}"
    if step:
        cover += f" = {fmt(total / step, 'fraction')} of the measured step ({fmt(step, 's')})"
    out = [f'<h3 id="{sid}"><code>{_e(bench)}</code> <span class="sub">'
           f"{_e(os.path.basename(run.path))}: {len(rows)} layers, {_e(cover)}</span></h3>"]
    out.append('<div class="grid g2">')
    out.append("<figure>" + share_chart("layer-share", "share of the step, top layers "
                                        "(fwd | bwd) \u00b7 achieved FLOP/s", top) + "</figure>")
    out.append("<figure>" + share_chart("kind-share", "share of the step by layer kind "
                                        "\u00b7 FLOP/s over the kind's time",
                                        kitems[:20]) + "</figure>")
    bw = _num(_float_str(run.context.get("peak_bandwidth_bytes_per_s")))
    roof = roofline_chart(bench, rows, shares, peak, bw)
    if roof:
        out.append(f"<figure>{roof}</figure>")
    out.append("</div>")
    opt = [(k, lab, u) for k, lab, u in OPTIONAL_BD if any(k in r for r in rows)]
    cols = [("#", "num"), ("layer", "text"), ("kind", "text"), ("problem", "text"),
            ("fwd", "num"), ("bwd", "num"), ("fwd+bwd", "num"), ("share", "num"),
            ("FLOP", "num"), ("FLOP/s", "num")]
    if peak:
        cols.append(("of FP32 peak", "num"))
    cols += [("memory", "num")] + [(lab, "text" if u is None else "num") for _, lab, u in opt]
    cols.append(("timer", "text"))
    trows = []
    for rank, i in enumerate(order):
        r = rows[i]
        s, _ = shares[i]
        fl = _num(r.get("flops"))
        cells = [Cell(str(rank + 1), rank + 1), Cell(f'<code>{_e(r.get("layer"))}</code>'),
                 r.get("kind", ""), Cell(_e(r.get("problem", "")), cls="note"),
                 Cell(_e(fmt(r.get("fwd_time_s"), "s")), _num(r.get("fwd_time_s"))),
                 Cell(_e(fmt(r.get("bwd_time_s"), "s")), _num(r.get("bwd_time_s"))),
                 Cell(_e(fmt(_bd_time(r), "s")), _bd_time(r)),
                 Cell(_e(fmt(s, "fraction")), s),
                 Cell(_e(fmt(_bd_flop(r), "FLOP", 3)), _bd_flop(r)),
                 Cell(_e(fmt(fl, "FLOP/s")), fl)]
        if peak:
            cells.append(Cell(_e(fmt(fl / peak, "fraction")) if fl is not None else "-",
                              fl / peak if fl is not None else None))
        cells.append(Cell(_e(fmt(r.get("memory_bytes"), "bytes")), _num(r.get("memory_bytes"))))
        for k, _, u in opt:
            v = r.get(k)
            cells.append(Cell(_e(v if u is None else fmt(v, u)), None if u is None else _num(v)))
        cells.append(r.get("timer", ""))
        trows.append(cells)
    out.append(f"<details><summary>All {len(rows)} layers of <code>{_e(bench)}</code> "
               "(sortable table)</summary>" + _table(cols, trows, cls="layers") + "</details>")
    return "".join(out)


def _float_str(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def section_layers(runs: list[Run], c: dict | None) -> str:
    out = []
    used: set = set()
    any_bd = False
    for run in runs:
        groups: dict[str, list] = {}
        for r in run.breakdown:
            if isinstance(r, dict) and r.get("benchmark") is not None:
                groups.setdefault(str(r["benchmark"]), []).append(r)
        for bench, rows in groups.items():
            any_bd = True
            out.append(_breakdown_block(run, bench, rows, used))
    if not any_bd:
        out.append('<p class="absent">No per-layer breakdown in the runs (tbd_bench writes '
                   "<code>tbd_breakdown</code> with --tbd_breakdown).</p>")
    for bd in (c or {}).get("breakdowns") or []:
        bs, ns = _num(bd.get("base_step_s")), _num(bd.get("new_step_s"))
        out.append(f'<h3><code>{_e(bd.get("benchmark"))}</code>: where the step changed '
                   f'<span class="sub">(base &#8594; new: {_e(fmt(bs, "s"))} &#8594; '
                   f'{_e(fmt(ns, "s"))}, {_e(fmt_pct(ns / bs if bs and ns else None))}; layer '
                   f'rows {_e(fmt(bd.get("base_sum_s"), "s"))} &#8594; '
                   f'{_e(fmt(bd.get("new_sum_s"), "s"))})</span></h3>')
        rows, rcls = [], []
        for ld in (bd.get("layers") or [])[:60]:
            d = _num(ld.get("delta_s"))
            soc = _num(ld.get("share_of_change"))
            dm = _num(ld.get("delta_memory_bytes"))
            rows.append([Cell(f'<code>{_e(ld.get("layer"))}</code>'), ld.get("kind", ""),
                         Cell(_e(fmt(ld.get("base_s"), "s")), _num(ld.get("base_s"))),
                         Cell(_e(fmt(ld.get("new_s"), "s")), _num(ld.get("new_s"))),
                         Cell(_e(("+" if (d or 0) >= 0 else "-") + fmt(abs(d), "s"))
                              if d is not None else "-", d),
                         Cell(_e(fmt(soc, "fraction")), soc),
                         Cell(_e(fmt(ld.get("base_flops"), "FLOP/s")), _num(ld.get("base_flops"))),
                         Cell(_e(fmt(ld.get("new_flops"), "FLOP/s")), _num(ld.get("new_flops"))),
                         Cell(_e(("+" if dm >= 0 else "-") + fmt(abs(dm), "bytes"))
                              if dm else "-", dm),
                         "" if ld.get("status") == "both" else ld.get("status", "")])
            rcls.append("v-regression" if (d or 0) > 0 else "v-improvement" if (d or 0) < 0 else "")
        cols = [("layer", "text"), ("kind", "text"), ("base", "num"), ("new", "num"),
                ("delta", "num"), ("of change", "num"), ("base FLOP/s", "num"),
                ("new FLOP/s", "num"), ("memory delta", "num"), ("", "text")]
        out.append(_table(cols, rows[:10], rcls[:10], cls="deltas"))
        if len(rows) > 10:
            n_all = len(bd.get("layers") or [])
            out.append(f"<details><summary>{len(rows) - 10} more layers ranked by their part "
                       f"of the change{' (of ' + str(n_all) + ')' if n_all > len(rows) else ''}"
                       "</summary>" + _table(cols, rows[10:], rcls[10:], cls="deltas")
                       + "</details>")
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Section 8: context

CONTEXT_ORDER = ("device", "backend", "backend_flag", "math", "threads", "peak_fp32_flops",
                 "peak_tf32_flops", "peak_bandwidth_bytes_per_s", "gpu_counters",
                 "onednn_version", "onednn_isa", "git_commit", "git_dirty", "build_type",
                 "timing", "rates_over", "omp_wait_policy", "memory_limit_bytes", "quick",
                 "breakdown", "cold_l2", "h2d_per_step", "host_name", "num_cpus", "mhz_per_cpu",
                 "cpu_scaling_enabled", "library_build_type", "date", "executable")
CONTEXT_SKIP = {"tbd_metrics", "caches"}
CONTEXT_UNITS = {"peak_fp32_flops": "FLOP/s", "peak_tf32_flops": "FLOP/s",
                 "peak_bandwidth_bytes_per_s": "bytes/s", "memory_limit_bytes": "bytes"}


def _ctx_value(k: str, v) -> str:
    if isinstance(v, list):
        return ", ".join(_g(x, 4) if _finite(x) else str(x) for x in v)
    s = str(v).lower() if isinstance(v, bool) else str(v)
    u = CONTEXT_UNITS.get(k)
    f = _float_str(v) if u else None
    if u and f is not None:
        human = fmt(f, "bytes") if u == "bytes" else fmt(f, u)
        return f"{s} ({human})"
    return s


def section_context(runs: list[Run], c: dict | None) -> str:
    out = []
    if runs:
        shown = runs[:8]
        keys = [k for k in CONTEXT_ORDER if any(k in r.context for r in shown)]
        keys += sorted({k for r in shown for k in r.context} - set(keys) - CONTEXT_SKIP)
        rows, rcls = [], []
        for k in keys:
            vals = [_ctx_value(k, r.context[k]) if k in r.context else "" for r in shown]
            if all(isinstance(r.context.get(k), dict) for r in shown if k in r.context):
                continue
            differs = len(set(vals)) > 1
            rows.append([Cell(f"<code>{_e(k)}</code>")] + [Cell(_e(v), cls="note") for v in vals])
            rcls.append("differs" if differs else "")
        cols = [("key", "text")] + [(os.path.basename(r.path), "text") for r in shown]
        out.append('<h3 id="run-context">Runs</h3>')
        out.append(_table(cols, rows, rcls, sortable=False, tid="t-context"))
        if len(runs) > len(shown):
            out.append(f'<p class="caption">{len(runs) - len(shown)} more runs not shown.</p>')
        if len(shown) > 1:
            out.append('<p class="caption">Rows where the runs differ are highlighted.</p>')
    if c is not None and c.get("context"):
        rows, rcls = [], []
        for e in c["context"]:
            mark = "refuse" if e.get("refuse") else ("differs" if e.get("differs") else "")
            k = str(e.get("key", ""))
            rows.append([Cell(f"<code>{_e(k)}</code>"),
                         Cell(_e(_ctx_value(k, e.get("base", "")) if e.get("base") else "-"),
                              cls="note"),
                         Cell(_e(_ctx_value(k, e.get("new", "")) if e.get("new") else "-"),
                              cls="note"),
                         Cell(_badge(mark) if mark else "")])
            rcls.append("v-regression" if e.get("refuse") else "differs" if e.get("differs")
                        else "")
        out.append('<h3 id="context-diff">Comparison: base vs new</h3>')
        out.append(_table([("key", "text"), ("base", "text"), ("new", "text"), ("", "text")],
                          rows, rcls, sortable=False, tid="t-context-diff"))
        out.append('<p class="caption">A difference in a key the configuration refuses on '
                   "(device, backend, math by default) makes the comparison not comparable. "
                   "Utilizations whose peak differs are reported, not gated.</p>")
    if not out:
        out.append('<p class="absent">No context: give --runs or a comparison.</p>')
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# The page

CSS = """
:root{--fg:#1f2328;--mut:#59636e;--line:#d1d9e0;--soft:#eef1f4;--bg2:#f6f8fa;--red:#cf222e;
--redbg:#ffebe9;--green:#1a7f37;--greenbg:#dafbe1;--amber:#9a6700;--amberbg:#fff8c5;
--blue:#0969da;--bluebg:#ddf4ff}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;color:var(--fg);background:#fff;font:13px/1.45 system-ui,-apple-system,
"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans","Liberation Sans",sans-serif}
main{max-width:1400px;margin:0 auto;padding:18px 28px 60px}
h1{font-size:20px;margin:0 0 2px;font-weight:650}
h2{font-size:16px;margin:30px 0 10px;padding-bottom:5px;border-bottom:1px solid var(--line);
font-weight:650}
h2 .num{color:var(--mut);font-weight:400;margin-right:6px}
h3{font-size:13px;margin:18px 0 6px;font-weight:600}
figure h3{margin:0 0 4px}
code,.mono{font-family:ui-monospace,SFMono-Regular,"SF Mono",Menlo,Consolas,"Liberation Mono",
"DejaVu Sans Mono",monospace;font-size:11.5px}
p{margin:6px 0}
.sub{color:var(--mut);font-weight:400}
.inputs{color:var(--mut);margin:0 0 10px}
nav.toc{position:sticky;top:0;z-index:5;background:rgba(255,255,255,.96);border-bottom:1px solid
var(--line);padding:6px 0;margin:0 0 6px;display:flex;flex-wrap:wrap;gap:4px 14px}
nav.toc a{color:var(--blue);text-decoration:none;font-size:12.5px}
nav.toc a.off{color:var(--mut)}
nav.toc a:hover{text-decoration:underline}
.absent{color:var(--mut);font-style:italic}
section.absent-section h2{color:var(--mut)}
.verdict{display:flex;flex-wrap:wrap;align-items:baseline;gap:6px 18px;padding:10px 14px;
border-radius:6px;border:1px solid var(--line);border-left-width:6px;margin:8px 0 10px}
.verdict .vword{font-size:20px;font-weight:700;letter-spacing:.02em}
.verdict .vexit{font-family:ui-monospace,Menlo,Consolas,monospace;color:var(--mut)}
.v-ok{border-left-color:var(--green)}.v-ok .vword{color:var(--green)}
.v-bad{border-left-color:var(--red);background:#fffafa}.v-bad .vword{color:var(--red)}
.v-warn{border-left-color:var(--amber);background:#fffdf2}.v-warn .vword{color:var(--amber)}
.tiles{display:flex;flex-wrap:wrap;gap:6px;margin:6px 0 10px}
.tile{border:1px solid var(--line);border-radius:6px;padding:4px 12px 5px;min-width:88px}
.tile .n{font-size:19px;font-weight:650;font-variant-numeric:tabular-nums}
.tile .l{font-size:11px;color:var(--mut)}
.tnote{align-self:flex-end;font-size:11px;color:var(--mut)}
.tile.t-bad{border-color:#ffb8b0;background:var(--redbg)}.tile.t-bad .n{color:var(--red)}
.tile.t-good{border-color:#aceebb;background:var(--greenbg)}.tile.t-good .n{color:var(--green)}
.stat,.files,.facts{color:var(--fg);max-width:1200px}
.files{color:var(--mut)}
.refuse{background:var(--amberbg);border:1px solid #eac54f;padding:6px 10px;border-radius:6px}
ul.notes{margin:4px 0;padding-left:18px;color:var(--mut)}
.tw{overflow-x:auto;max-width:100%;margin:4px 0 6px}
table{border-collapse:collapse;font-size:12px;font-variant-numeric:tabular-nums}
th,td{padding:2px 9px;border-bottom:1px solid var(--soft);text-align:left;vertical-align:top;
white-space:nowrap}
td.note{white-space:normal;min-width:180px;max-width:520px;color:var(--mut)}
th{background:var(--bg2);font-weight:600;border-bottom:1px solid var(--line);position:sticky;
top:0}
th.num,td.num{text-align:right}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th:hover{background:#eaeef2}
table.sortable th[aria-sort=ascending]::after{content:" \\25B2";font-size:9px}
table.sortable th[aria-sort=descending]::after{content:" \\25BC";font-size:9px}
tbody tr:hover td{background:#f6f8fa}
tr.v-regression td:first-child{box-shadow:inset 3px 0 var(--red)}
tr.v-improvement td:first-child{box-shadow:inset 3px 0 var(--green)}
tr.v-regression td.num:nth-child(5){color:var(--red);font-weight:600}
tr.v-improvement td.num:nth-child(5){color:var(--green);font-weight:600}
tr.differs td{background:#fff8e5}
input.toggle{margin:0 5px 0 0;vertical-align:-2px}
input.toggle+label{color:var(--mut);font-size:12px}
#show-quiet:not(:checked)~.tw tr.quiet{display:none}
.badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:11px;font-weight:600;
line-height:17px;background:var(--soft);color:var(--mut)}
.b-regression,.b-broken,.b-refuse{background:var(--redbg);color:var(--red)}
.b-improvement,.b-fixed{background:var(--greenbg);color:var(--green)}
.b-noise,.b-not-comparable,.b-differs{background:var(--amberbg);color:var(--amber)}
.b-acknowledged,.b-added,.b-unit-converted{background:var(--bluebg);color:var(--blue)}
.caption,figcaption{font-size:11.5px;color:var(--mut);margin:4px 0}
figcaption code{font-size:11px;color:var(--fg)}
code.cmd{user-select:all;background:var(--bg2);padding:0 3px;border-radius:3px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(470px,1fr));gap:10px;
margin:6px 0}
.grid.g2{grid-template-columns:repeat(auto-fill,minmax(640px,1fr))}
.grid.g1{grid-template-columns:1fr}
td.subj{max-width:250px;overflow:hidden;text-overflow:ellipsis}
table.events td.note{min-width:200px;max-width:420px}
figure{margin:0;border:1px solid var(--line);border-radius:6px;padding:8px 10px;min-width:0}
figure.wide{margin:10px 0}
figure.v-regression{border-left:3px solid var(--red)}
figure.v-improvement{border-left:3px solid var(--green)}
details{margin:6px 0 12px}
summary{cursor:pointer;color:var(--blue);font-size:12px}
svg.chart{display:block;max-width:100%;height:auto;overflow:visible}
svg.chart text{font-size:10.5px;fill:#57606a;font-family:inherit}
svg.chart text.axt{fill:#1f2328;font-weight:600}
svg.chart text.lab,svg.chart text.rl{fill:#1f2328}
svg.chart text.cx{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:9.5px}
svg.chart text.pk{fill:#1f2328;font-size:9.5px}
svg.chart text.evl{font-size:10px;font-weight:600}
svg.chart tspan.k{fill:#8c959f;font-size:9.5px}
svg.chart .grid{stroke:#e6e9ed;stroke-width:1}
svg.chart .axis{stroke:#8c959f;stroke-width:1}
svg.chart .tick{stroke:#8c959f}
svg.chart .thr{fill:#eaeef2;opacity:.7}
svg.chart .median{stroke-width:2.5}
svg.chart .line{fill:none;stroke:#0969da;stroke-width:1.6}
svg.chart .sline{fill:none;stroke-width:1.8}
svg.chart .point{fill:#0969da}
svg.chart .sample{fill:#8c959f;opacity:.45}
svg.chart .seg{stroke:#1f2328;stroke-width:2;opacity:.35}
svg.chart .outlier{fill:none;stroke-width:1.6}
svg.chart .event{stroke-width:1.4}
svg.chart .recovered{fill:#cf222e;opacity:.06}
svg.chart .peak{stroke:#1f2328;stroke-width:2}
svg.chart .roof{fill:none;stroke:#1f2328;stroke-width:1.5;stroke-dasharray:6 3}
svg.chart .fwd{fill:#4e79a7}
svg.chart .bwd{fill:#a0cbe8}
footer{margin-top:40px;color:var(--mut);font-size:11.5px;border-top:1px solid var(--line);
padding-top:8px}
@media print{nav.toc{position:static}th{position:static}}
"""

# Installed before anything else runs: counts script errors, console.error calls and CSP
# violations (a network reference the CSP blocked) so a headless browser test can read them.
JS_HEAD = """(function(){var s={errors:0,csp:0};window.__tbd=s;
window.addEventListener('error',function(){s.errors++;},true);
window.addEventListener('unhandledrejection',function(){s.errors++;});
document.addEventListener('securitypolicyviolation',function(){s.csp++;});
var ce=console.error;console.error=function(){s.errors++;return ce.apply(console,arguments);};
})();"""

# Table sorting (click or Enter on a header; numbers sort by data-v), then a summary of the
# page written into <body data-*>: charts, charts drawn (a .mark with a non-empty box),
# errors. With #tbd-selftest in the URL it also sorts every numeric column both ways, checks
# the order and puts the rows back.
JS_TAIL = """(function(){
function key(td){if(!td)return[2,''];var v=td.getAttribute('data-v');
if(v!==null&&v!==''){var f=parseFloat(v);if(!isNaN(f))return[0,f];}
return[1,td.textContent.trim().toLowerCase()];}
function cmp(a,b){if(a[0]!==b[0])return a[0]-b[0];return a[1]<b[1]?-1:a[1]>b[1]?1:0;}
function sortBy(t,ths,th,i){var asc=th.getAttribute('aria-sort')!=='ascending';
for(var j=0;j<ths.length;j++)ths[j].removeAttribute('aria-sort');
th.setAttribute('aria-sort',asc?'ascending':'descending');
var tb=t.tBodies[0],rows=Array.prototype.slice.call(tb.rows);
rows.sort(function(a,b){var r=cmp(key(a.cells[i]),key(b.cells[i]));return asc?r:-r;});
for(var k=0;k<rows.length;k++)tb.appendChild(rows[k]);return asc;}
var tables=document.querySelectorAll('table.sortable');
Array.prototype.forEach.call(tables,function(t){if(!t.tHead)return;var ths=t.tHead.rows[0].cells;
Array.prototype.forEach.call(ths,function(th,i){th.tabIndex=0;th.title='sort';
th.addEventListener('click',function(){sortBy(t,ths,th,i);});
th.addEventListener('keydown',function(e){if(e.key==='Enter')sortBy(t,ths,th,i);});});});
function selftest(){var checked=0,failed=0;
Array.prototype.forEach.call(tables,function(t){if(!t.tHead||t.tBodies[0].rows.length<2)return;
var ths=t.tHead.rows[0].cells,orig=Array.prototype.slice.call(t.tBodies[0].rows);
Array.prototype.forEach.call(ths,function(th,i){
if(!th.classList.contains('num'))return;for(var pass=0;pass<2;pass++){
var asc=sortBy(t,ths,th,i);checked++;var rows=t.tBodies[0].rows;for(var k=1;k<rows.length;k++){
var c=cmp(key(rows[k-1].cells[i]),key(rows[k].cells[i]));if(asc?c>0:c<0){failed++;break;}}}});
for(var j=0;j<ths.length;j++)ths[j].removeAttribute('aria-sort');
for(var k=0;k<orig.length;k++)t.tBodies[0].appendChild(orig[k]);});
document.body.setAttribute('data-sort-checked',checked);
document.body.setAttribute('data-sort-failed',failed);}
function summary(){var charts=document.querySelectorAll('svg.chart'),drawn=0,marks=0;
Array.prototype.forEach.call(charts,function(svg){var r=svg.getBoundingClientRect();
var ms=svg.querySelectorAll('.mark');marks+=ms.length;if(!(r.width>0&&r.height>0))return;
for(var i=0;i<ms.length;i++){var b=ms[i].getBBox();if(b.width>0&&b.height>0){drawn++;break;}}});
var b=document.body;b.setAttribute('data-charts',charts.length);
b.setAttribute('data-charts-drawn',drawn);b.setAttribute('data-marks',marks);
b.setAttribute('data-tables-sortable',tables.length);
b.setAttribute('data-errors',window.__tbd.errors);
b.setAttribute('data-csp-violations',window.__tbd.csp);}
if(location.hash==='#tbd-selftest')selftest();
summary();window.addEventListener('load',summary);
})();"""

SECTIONS = (("verdict", "Verdict"), ("tables", "Comparison tables"), ("ab", "A/B samples"),
            ("history", "History and change points"), ("throughput", "Throughput vs batch"),
            ("memory", "Memory by category"), ("layers", "Per-layer breakdown"),
            ("scaling", "Data-parallel scaling"), ("frameworks", "Frameworks side by side"),
            ("context", "Context"))


def section_scaling(runs: list[Run]) -> str:
    """Weak-scaling efficiency predicted by tbd_track simulate for each model with a one-rank
    data-parallel profile, on each named link (ring all-reduce, 25 MiB buckets), and the
    model's validation against the measured multi-rank rows."""
    from .. import dist_sim  # noqa: PLC0415
    profs = [p for p in dist_sim.profiles(runs) if p.ranks == 1]
    ranks = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    out = ['<p class="caption">Predicted from the one-rank step profile of a '
           "<code>--tbd_dist</code> run (when backward completed each gradient) and an "
           "alpha-beta model of a ring all-reduce over each link (nominal figures; "
           "<code>tbd_track simulate</code> prints them and other algorithms). Efficiency is "
           "the one-rank step over the P-rank step at the same per-rank batch.</p>"]
    for prof in profs:
        series = []
        for key, link in dist_sim.LINKS.items():
            pts = [(p, dist_sim.simulate(prof, p, link).efficiency) for p in ranks]
            series.append((link.name, pts))
        chart = line_chart("scaling", f"weak-scaling efficiency of {prof.name}", series,
                           "fraction", xlabel="ranks")
        grad_mb = sum(b for b, _ in prof.grads) / 1e6
        out.append(f"<figure><h3>{_e(prof.name)}</h3>{chart}<figcaption>one-rank step "
                   f"{_e(fmt(prof.step_s, 's'))}, {grad_mb:.4g} MB of gradients per step"
                   "</figcaption></figure>")
    try:
        val = dist_sim.validate(runs, dist_sim.profiles(runs), "ring", 25.0, 1.0)
    except InputError as e:
        val = []
        out.append(f'<p class="absent">No validation: {_e(str(e))}</p>')
    if val:
        rows = [[Cell(f"<code>{_e(v['name'])}</code>", cls="name"),
                 Cell(_e(fmt(v["measured_s"], "s")), v["measured_s"]),
                 Cell(_e(fmt(v["predicted_s"], "s")), v["predicted_s"]),
                 Cell(f"{v['error'] * 100:+.1f}%", v["error"]), Cell(_e(v["link"]))]
                for v in val]
        out.append("<h3>The model against this machine</h3>")
        out.append('<p class="caption">Each measured multi-rank row against the model fed with '
                   "the same run's one-rank row and AllReduce rows (and its ranks' share of "
                   "cores: CPU ranks without a spare core share them with the all-reduce).</p>")
        out.append(_table([("row", "text"), ("measured step", "num"), ("predicted", "num"),
                           ("error", "num"), ("link fitted from the AllReduce rows", "text")],
                          rows))
    return "".join(out)


def build_html(comparison: dict | None, history: dict | None, runs: list, title: str,
               frameworks: dict | None = None) -> str:
    """The whole report as one string; the same input gives the same bytes. Runs of peer
    frameworks (tbd_track peer's files) go to the frameworks section only."""
    from .. import frameworks as fw  # noqa: PLC0415
    c = comparison
    runs = list(runs or [])
    peer_runs = [r for r in runs if fw.framework_of(r) != "tbd"]
    if peer_runs and frameworks is None:
        frameworks = fw.summarize(fw.group_sides(runs))
    runs = [r for r in runs if fw.framework_of(r) == "tbd"]
    no_cmp = "No comparison given (--compare BASE NEW or --comparison FILE)."
    body: dict[str, tuple[bool, str]] = {}
    body["verdict"] = (True, section_verdict(c)) if c else (False, no_cmp)
    body["tables"] = (True, section_tables(c)) if c else (False, no_cmp)
    body["ab"] = (True, section_ab(c)) if c else (False, no_cmp)
    body["history"] = ((True, section_history(history)) if history else
                       (False, "No history given (--history FILE, written by "
                        "<code>tbd_track history detect --format json</code>)."))
    no_runs = "No runs given (--runs FILE_OR_DIR, or the new side of --compare)."
    body["throughput"] = (True, section_throughput(runs)) if runs else (False, no_runs)
    body["memory"] = (True, section_memory(runs)) if runs else (False, no_runs)
    bd_present = bool(runs) or bool(c and c.get("breakdowns"))
    body["layers"] = (True, section_layers(runs, c)) if bd_present else (False, no_runs)
    has_dist = any(r.dist_steps for r in runs)
    body["scaling"] = ((True, section_scaling(runs)) if has_dist else
                       (False, "No data-parallel profile in the runs (tbd_bench --tbd_dist=mpi "
                        "writes one; see README, Data-parallel training)."))
    body["frameworks"] = ((True, section_frameworks(frameworks)) if frameworks else
                          (False, "No peer framework's runs (tbd_track peer writes them; give "
                           "its folder to --runs, or its frameworks.json to --frameworks)."))
    body["context"] = ((True, section_context(runs, c)) if runs or c else
                       (False, "No runs or comparison: no context to show."))

    inputs = []
    if c:
        inputs.append(f'comparison: {_e(c.get("base_label", ""))} &#8594; '
                      f'{_e(c.get("new_label", ""))}')
    if history:
        inputs.append(f'history: {len(history.get("commits") or [])} commits, '
                      f'{len(history.get("series") or [])} series'
                      + (f' on <code>{_e(history.get("machine"))}</code>'
                         if history.get("machine") else ""))
    if frameworks:
        inputs.append("frameworks: " + ", ".join(_e(x) for x in frameworks.get("sides", [])))
    if runs:
        inputs.append("runs: " + ", ".join(f"<code>{_e(os.path.basename(r.path))}</code>"
                                           for r in runs[:12])
                      + (f" and {len(runs) - 12} more" if len(runs) > 12 else ""))
    out = ["<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n",
           f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n',
           '<meta charset="utf-8">\n',
           '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
           '<meta name="generator" content="tbd_track report">\n',
           f"<title>{_e(title)}</title>\n",
           f"<style>{CSS}</style>\n",
           f"<script>{JS_HEAD}</script>\n</head>\n<body>\n<main>\n",
           f"<h1>{_e(title)}</h1>\n",
           f'<p class="inputs">{" &#183; ".join(inputs) or "no input"}</p>\n',
           '<nav class="toc">']
    for i, (sid, name) in enumerate(SECTIONS):
        present = body[sid][0]
        off = "" if present else ' class="off"'
        out.append(f'<a href="#{sid}"{off}>{i + 1} {name}</a>')
    out.append("</nav>\n")
    for i, (sid, name) in enumerate(SECTIONS):
        present, content = body[sid]
        cls = "" if present else ' class="absent-section"'
        out.append(f'<section id="{sid}" data-section="{sid}" '
                   f'data-present="{1 if present else 0}"{cls}>\n'
                   f'<h2><span class="num">{i + 1}</span>{name}</h2>\n')
        out.append(content if present else f'<p class="absent">{content}</p>')
        out.append("\n</section>\n")
    out.append('<footer>Written by <code>tbd_track report</code>: one offline file (no network '
               "access, inline SVG); the same inputs give the same bytes. Click a table header "
               "to sort. Times are per iteration; rates divide by the measured time.</footer>\n")
    out.append(f"</main>\n<script>{JS_TAIL}</script>\n</body>\n</html>\n")
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Command line

def _read_json(path: str, what: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e.msg} at line {e.lineno}); expected {what}") \
            from None


def load_comparison(path: str) -> dict:
    doc = _read_json(path, "a comparison (tbd_track compare --format json)")
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or "verdict" not in doc:
        raise InputError(f"{path}: not a comparison (tbd_track compare --format json): "
                         "no 'rows' list or 'verdict'")
    return doc


def load_history(path: str) -> dict:
    doc = _read_json(path, "a history document (tbd_track history detect --format json)")
    if not isinstance(doc, dict) or not isinstance(doc.get("commits"), list) or \
            not isinstance(doc.get("series"), list):
        raise InputError(f"{path}: not a history document: needs 'commits' and 'series' lists")
    for s in doc["series"]:
        if not isinstance(s, dict) or not isinstance(s.get("points", []), list):
            raise InputError(f"{path}: a series is not an object with a 'points' list")
    return doc


def load_frameworks(path: str) -> dict:
    doc = _read_json(path, "a frameworks summary (tbd_track peer's frameworks.json)")
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or \
            not isinstance(doc.get("sides"), list) or "reference" not in doc:
        raise InputError(f"{path}: not a frameworks summary (tbd_track peer's frameworks.json, "
                         "or compare --format json of a tbd file against a peer's): needs "
                         "'reference', 'sides' and 'rows'")
    return doc


def run_report(args) -> int:
    if not (args.compare or args.comparison or args.history or args.runs or args.frameworks):
        raise InputError("report needs an input: --compare BASE NEW, --comparison FILE, "
                         "--history FILE, --frameworks FILE or --runs FILE_OR_DIR ...")
    comparison = None
    new_runs: list[Run] = []
    if args.compare:
        from .. import compare as cmp  # noqa: PLC0415 (needs scipy; only for --compare)
        from ..config import load_config  # noqa: PLC0415
        from .. import frameworks as fw  # noqa: PLC0415
        base = load_runs([args.compare[0]])
        new_runs = load_runs([args.compare[1]])
        if fw.is_frameworks_comparison(base, new_runs):
            # tbd against a peer framework: the side-by-side, not a comparison of commits
            new_runs = base + new_runs
        else:
            comparison = cmp.compare(base, new_runs, load_config(None)).to_dict()
    elif args.comparison:
        comparison = load_comparison(args.comparison)
    history = load_history(args.history) if args.history else None
    frameworks = load_frameworks(args.frameworks) if args.frameworks else None
    runs = load_runs(args.runs) if args.runs else new_runs
    from ..cli import write_atomic  # noqa: PLC0415 (cli imports this module's siblings)
    text = build_html(comparison, history, runs, args.title, frameworks)
    write_atomic(args.output, text)
    print(f"tbd_track: wrote {args.output} ({len(text.encode('utf-8'))} bytes)",
          file=sys.stderr)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report", help="one self-contained offline HTML report (verdict, tables, A/B plots, "
        "history with change points, throughput, memory, per-layer breakdown, data-parallel "
        "scaling, frameworks side by side, context)",
        description="Writes one HTML file with no network reference (inline CSS, SVG and a "
        "little script for sorting tables). The same inputs give the same bytes. Exit code 0 "
        "when written, 2 on bad input; the comparison's own verdict is inside the page "
        "(tbd_track compare is the gate).")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--compare", nargs=2, metavar=("BASE", "NEW"),
                   help="compare two runs (files or folders) with the default configuration")
    g.add_argument("--comparison", metavar="FILE",
                   help="a comparison written by tbd_track compare --format json")
    p.add_argument("--history", metavar="FILE",
                   help="a history document (tbd_track history detect --format json)")
    p.add_argument("--runs", nargs="+", metavar="FILE_OR_DIR",
                   help="tbd_bench JSON files for throughput, memory, breakdown and context "
                   "(default: the new side of --compare)")
    p.add_argument("--frameworks", metavar="FILE",
                   help="tbd against peer frameworks: tbd_track peer's frameworks.json (or "
                   "give the peer's files to --runs)")
    p.add_argument("--title", default="tbd_track report", help="page title")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the HTML file to write (atomically)")
    p.set_defaults(func=run_report)
