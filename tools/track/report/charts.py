"""The report's charts, hand-written SVG (deterministic strings that render without script):
Axis and LogAxis, the palette and memory categories, SVG helpers (y axis, legends), and the
charts: A/B strip plots, history, lines vs batch size, stacked memory bars, roofline,
horizontal share bars and ratio bars."""

from __future__ import annotations

import math

from .format import _c, _e, _finite, _g, _med, _num, _scale, fmt, fmt_pct


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


# ---------------------------------------------------------------------------------------------
# Sections 5 and 6: model rows of the runs

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


# ---------------------------------------------------------------------------------------------
# Section 7: per-layer breakdown

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
