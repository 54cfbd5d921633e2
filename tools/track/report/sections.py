"""The report's sections, each an HTML fragment: table helpers (Cell, _table, badges), model and
layer names (parse_model, parse_layer, through tools/track/names.py), the section_* functions
and SECTIONS, the page's order of them."""

from __future__ import annotations

import math
import os
import re

from .. import names
from ..gbjson import InputError, Run
from .charts import (HISTORY_GRID_MAX, MEM_CATEGORIES, history_chart, line_chart, memory_chart,
                     ratio_chart, roofline_chart, share_chart, strip_plot)
from .format import _e, _finite, _g, _med, _num, _slug, fmt, fmt_pct


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
                 # the detector's noise is of log values for ratio-like metrics; exp() of
                 # more than 709 overflows (and no measurement is that noisy)
                 f"noise {_g(math.expm1(noise) * 100, 2)}%"
                 if noise and noise < 709 and not s.get("exact") else ""]
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


def _bd_time(r: dict) -> float:
    return (_num(r.get("fwd_time_s")) or 0.0) + (_num(r.get("bwd_time_s")) or 0.0)


def _bd_flop(r: dict):
    # Files written before the fprop/dgrad/wgrad names say flop_fwd, flop_bwd_data, ...
    keys = (("flop_fprop", "flop_fwd"), ("flop_dgrad", "flop_bwd_data"),
            ("flop_wgrad", "flop_bwd_weights"))
    parts = [_num(r.get(new, r.get(old))) for new, old in keys]
    parts = [p for p in parts if p is not None]
    return sum(parts) if parts else None


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
# The page's sections in order; data-parallel scaling

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
