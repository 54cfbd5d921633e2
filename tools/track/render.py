"""Text and markdown renderings of a Comparison (JSON is Comparison.to_dict())."""

from __future__ import annotations

import math

from .compare import Comparison, MetricResult

TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))


def fmt_value(v: float | None, unit: str, time_unit: str = "") -> str:
    """A value for people: times scaled to s/ms/us/ns, bytes to KiB..GiB, fractions as %."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if unit == "s":
        scale, name = next(((s, u) for u, s in TIME_UNITS if abs(v) >= s), (1e-9, "ns"))
        return f"{v / scale:.4g} {name}"
    if unit == "bytes":
        for u, s in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if abs(v) >= s:
                return f"{v / s:.4g} {u}"
        return f"{v:.0f} B"
    if unit == "fraction":
        return f"{v * 100:.2f}%"
    return f"{v:.4g}"


def fmt_change(m: MetricResult) -> str:
    if m.exact:
        d = m.new - m.base
        if d == 0:
            return "="
        rel = f" ({d / m.base * 100:+.1f}%)" if m.base else ""
        return f"{'+' if d > 0 else '-'}{fmt_value(abs(d), m.unit)}{rel}"
    if m.ratio is None:
        return "-"
    return f"{(m.ratio - 1) * 100:+.1f}%"


def fmt_ci(m: MetricResult) -> str:
    if not m.ci:
        return ""
    lo, hi = m.ci
    return f"[{(lo - 1) * 100:+.1f}, {(hi - 1) * 100:+.1f}]"


def fmt_p(m: MetricResult) -> str:
    if m.q is not None:
        return f"{m.q:.2g}"
    if m.test.startswith("n=1"):
        return "n=1"
    if m.test.startswith("fallback"):
        return "min-p>a"
    if m.exact:
        return "exact"
    return ""


def _signif_cols(m: MetricResult) -> str:
    return fmt_p(m)


def _table(rows: list[list[str]], header: list[str], right: set[int]) -> list[str]:
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    out = []
    for i, r in enumerate([header] + rows):
        cells = [str(c).rjust(w[j]) if j in right else str(c).ljust(w[j]) for j, c in enumerate(r)]
        out.append("  " + "  ".join(cells).rstrip())
        if i == 0:
            out.append(("  " + "  ".join("-" * x for x in w)).rstrip())
    return out


def _metric_rows(c: Comparison, verdicts: set[str], exact: bool | None = None) -> list[list[str]]:
    """One line per (benchmark, metric); the benchmark's name and notes on its first line."""
    rows = []
    for r in c.rows:
        if r.status != "compared":
            continue
        first = True
        for m in r.metrics:
            v = "acknowledged" if m.acknowledged else m.verdict
            if v not in verdicts or (exact is not None and m.exact != exact):
                continue
            row_notes = [r.unit_note]
            note = "; ".join(filter(None, [m.acknowledged and f"acknowledged: {m.acknowledged}",
                                           m.note] + (row_notes if first else [])))
            ci = fmt_ci(m)
            lvl = (f" ({m.ci_level * 100:.0f}%)" if m.ci and m.ci_level and
                   abs(m.ci_level - 0.95) > 0.005 else "")
            rows.append([r.name if first else "", m.metric, fmt_value(m.base, m.unit),
                         fmt_value(m.new, m.unit), fmt_change(m), ci + lvl,
                         fmt_p(m), f"{m.n_base}v{m.n_new}", note])
            first = False
    return rows


def grouped_notes(c: Comparison) -> list[str]:
    """Row notes said once each, with the rows they apply to ("all" when every row)."""
    compared = [r for r in c.rows if r.status in ("compared", "not-comparable")]
    by: dict[str, list[str]] = {}
    for r in compared:
        for n in r.notes:
            by.setdefault(n, []).append(r.name)
    out = []
    for n, names in by.items():
        if len(names) == len(compared):
            out.append(f"{n} (all {len(names)} rows)" if len(names) > 1 else f"{n}: {names[0]}")
        else:
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            out.append(f"{n}: {', '.join(names[:3])}{more}")
    return out


HEAD = ["benchmark", "metric", "base", "new", "change", "CI (95%)", "q", "n", "note"]


def _moved(c: Comparison, bench: str) -> bool:
    """Whether a model row's step time moved beyond the threshold (its breakdown is shown)."""
    for r in c.rows:
        if r.name == bench:
            return any(m.metric == "real_time" and m.ratio and
                       abs(m.ratio - 1) > (m.threshold or c.threshold) for m in r.metrics)
    return False


def _breakdown_lines(c: Comparison, top: int, show_all: bool = False) -> list[str]:
    out = []
    for bd in c.breakdowns:
        if not show_all and not _moved(c, bd.benchmark):
            continue
        d_step = bd.new_step_s - bd.base_step_s
        pct = (bd.new_step_s / bd.base_step_s - 1) * 100 if bd.base_step_s else float("nan")
        out.append(f"{bd.benchmark}: step {fmt_value(bd.base_step_s, 's')} -> "
                   f"{fmt_value(bd.new_step_s, 's')} ({pct:+.1f}%, {'+' if d_step >= 0 else '-'}"
                   f"{fmt_value(abs(d_step), 's')}); layer rows sum "
                   f"{fmt_value(bd.base_sum_s, 's')} -> {fmt_value(bd.new_sum_s, 's')}")
        rows = []
        for ld in bd.layers[:top]:
            rows.append([ld.layer, ld.kind, fmt_value(ld.base_s, "s"), fmt_value(ld.new_s, "s"),
                         f"{ld.delta_s * 1e3:+.3f} ms",
                         f"{ld.delta_fwd_s * 1e3:+.3f}", f"{ld.delta_bwd_s * 1e3:+.3f}",
                         "-" if ld.share_of_change is None else f"{ld.share_of_change * 100:.0f}%",
                         "-" if ld.delta_memory_bytes in (None, 0) else fmt_value(ld.delta_memory_bytes, "bytes"),
                         "" if ld.status == "both" else ld.status])
        out += _table(rows, ["layer", "kind", "base", "new", "delta", "fwd ms", "bwd ms",
                             "of change", "d memory", ""], {2, 3, 4, 5, 6, 7, 8})
        out.append("")
    return out


def _context_lines(c: Comparison) -> list[str]:
    rows = []
    for e in c.context:
        if not e["differs"] and e["key"] not in ("device", "backend", "math", "threads"):
            continue
        mark = "REFUSE" if e["refuse"] else ("differs" if e["differs"] else "")
        rows.append([e["key"], e["base"] or "-", e["new"] or "-", mark])
    return _table(rows, ["context", "base", "new", ""], set())


def _status_lines(c: Comparison, status: str, title: str) -> list[str]:
    rs = c.by_status(status)
    if not rs:
        return []
    out = [f"{title} ({len(rs)})"]
    for r in rs:
        extra = ""
        if status == "broken":
            extra = ": " + "; ".join(r.errors_new)
        elif status == "fixed":
            extra = " (was: " + "; ".join(r.errors_base) + ")"
        elif status == "not-comparable":
            extra = ": " + r.reason
        elif status in ("error-both", "added (error)"):
            extra = ": " + "; ".join(r.errors_new or r.errors_base)
        ack = " [acknowledged]" if r.verdict == "acknowledged" else ""
        out.append(f"  {r.name}{extra}{ack}")
    out.append("")
    return out


def text(c: Comparison, show_all: bool = False, top: int = 10) -> str:
    L = ["tbd_track compare", f"  base: {c.base_label}", f"  new:  {c.new_label}", ""]
    L += _context_lines(c) + [""]
    if not c.comparable:
        L.append("NOT COMPARABLE: " + "; ".join(c.refuse_reasons) +
                 " (--allow-mismatch compares anyway)")
        L.append(f"verdict: {c.verdict} (exit {c.exit_code})")
        return "\n".join(L) + "\n"
    ntests = sum(1 for r in c.rows for m in r.metrics if m.q is not None)
    L.append(f"statistics: unit = {c.unit_of_analysis}; two-sided Mann-Whitney U, "
             f"Benjamini-Hochberg over {ntests} tests, alpha {c.alpha:g}; a change needs "
             f"significance and >= {c.threshold * 100:g}% (config: {c.config}); memory exact")
    for n in c.notes + grouped_notes(c):
        L.append("note: " + n)
    L.append("")
    for title, verdicts, exact in (("Regressions", {"regression"}, False),
                                   ("Memory regressions", {"regression"}, True),
                                   ("Improvements", {"improvement"}, False),
                                   ("Memory improvements", {"improvement"}, True),
                                   ("Acknowledged", {"acknowledged"}, None)):
        rows = _metric_rows(c, verdicts, exact)
        if rows:
            L.append(f"{title} ({len(rows)})")
            L += _table(rows, HEAD, {2, 3, 4}) + [""]
    L += _status_lines(c, "broken", "Broken (ok -> error): regressions")
    L += _status_lines(c, "fixed", "Fixed (error -> ok)")
    L += _status_lines(c, "added", "Added")
    L += _status_lines(c, "added (error)", "Added, failing")
    L += _status_lines(c, "removed", "Removed")
    L += _status_lines(c, "error-both", "Failing on both sides")
    L += _status_lines(c, "not-comparable", "Not comparable (work changed)")
    conv = [r for r in c.rows if r.unit_note]
    if conv:
        L.append(f"Unit-converted ({len(conv)})")
        L += [f"  {r.name}: {r.unit_note}" for r in conv] + [""]
    if show_all:
        rows = _metric_rows(c, {"same", "noise", "info", "changed"})
        if rows:
            L.append(f"Unchanged, within noise, informational ({len(rows)})")
            L += _table(rows, HEAD, {2, 3, 4}) + [""]
    else:
        noise = _metric_rows(c, {"noise"})
        if noise:
            L.append(f"Beyond the threshold but not significant ({len(noise)}; more samples "
                     "would tell)")
            L += _table(noise, HEAD, {2, 3, 4}) + [""]
    if c.families:
        L.append("Summary per family (benchmarks compared on both sides only)")
        rows = []
        for f in c.families:
            g = "-" if f.geomean_time_ratio is None else f"{(f.geomean_time_ratio - 1) * 100:+.1f}%"
            ci = "" if not f.ci else f"[{(f.ci[0] - 1) * 100:+.1f}, {(f.ci[1] - 1) * 100:+.1f}]"
            rows.append([f.family, str(f.compared), g, ci, str(f.regressions),
                         str(f.improvements), str(f.unchanged)])
        L += _table(rows, ["family", "compared", "time geomean", "95% CI", "regressed",
                           "improved", "unchanged"], {1, 2, 4, 5, 6}) + [""]
    bl = _breakdown_lines(c, top, show_all)
    if bl:
        L.append("Per-layer breakdown: layers ranked by their part of the step's change")
        L += bl
    elif c.breakdowns:
        L += [f"Per-layer breakdown: {len(c.breakdowns)} model(s) with breakdowns on both "
              "sides, no step moved beyond the threshold (--all shows them)", ""]
    L.append(_verdict_line(c))
    return "\n".join(L) + "\n"


def _verdict_line(c: Comparison) -> str:
    nreg = sum(1 for r in c.rows if r.verdict == "regression" and r.status == "compared")
    nbroken = sum(1 for r in c.rows if r.status == "broken" and r.verdict == "regression")
    nimp = sum(1 for r in c.rows if r.verdict == "improvement")
    parts = [f"{nreg} benchmarks regressed", f"{nbroken} broken", f"{nimp} improved",
             f"{len(c.by_status('added'))} added", f"{len(c.by_status('removed'))} removed"]
    return f"verdict: {c.verdict} (exit {c.exit_code}): " + ", ".join(parts)


def _md_table(rows: list[list[str]], header: list[str]) -> list[str]:
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(esc(x) for x in r) + " |" for r in rows]
    return out


def markdown(c: Comparison, top: int = 10) -> str:
    icon = {"OK": "✅", "REGRESSION": "❌", "NOT COMPARABLE": "⚠️"}.get(c.verdict, "")
    L = [f"### tbd_track: {icon} {c.verdict}", "",
         f"**base** {c.base_label} · **new** {c.new_label}", ""]
    diff = [e for e in c.context if e["differs"]]
    if diff:
        L += _md_table([[e["key"], e["base"] or "-", e["new"] or "-",
                         "**refuse**" if e["refuse"] else ""] for e in diff],
                       ["context", "base", "new", ""]) + [""]
    if not c.comparable:
        L.append("Not comparable: " + "; ".join(c.refuse_reasons))
        return "\n".join(L) + "\n"
    L.append(f"<sub>{c.unit_of_analysis}; Mann-Whitney U + Benjamini-Hochberg at "
             f"alpha {c.alpha:g}, minimum effect {c.threshold * 100:g}%, memory exact</sub>")
    L.append("")
    for title, verdicts, exact in (("Regressions", {"regression"}, None),
                                   ("Improvements", {"improvement"}, None),
                                   ("Acknowledged", {"acknowledged"}, None)):
        rows = _metric_rows(c, verdicts, exact)
        if rows:
            L += [f"#### {title} ({len(rows)})", ""] + _md_table(rows, HEAD) + [""]
    for status, title in (("broken", "Broken (ok → error)"), ("fixed", "Fixed (error → ok)"),
                          ("added", "Added"), ("removed", "Removed"),
                          ("not-comparable", "Not comparable (work changed)")):
        rs = c.by_status(status)
        if rs:
            L += [f"#### {title} ({len(rs)})", ""]
            for r in rs:
                extra = {"broken": "; ".join(r.errors_new), "fixed": "; ".join(r.errors_base),
                         "not-comparable": r.reason}.get(status, "")
                L.append(f"- `{r.name}`" + (f": {extra}" if extra else ""))
            L.append("")
    if c.families:
        rows = [[f.family, str(f.compared),
                 "-" if f.geomean_time_ratio is None else f"{(f.geomean_time_ratio - 1) * 100:+.1f}%",
                 "" if not f.ci else f"[{(f.ci[0] - 1) * 100:+.1f}, {(f.ci[1] - 1) * 100:+.1f}]",
                 str(f.regressions), str(f.improvements)] for f in c.families]
        L += ["#### Per family", ""] + _md_table(
            rows, ["family", "compared", "time geomean", "95% CI", "regressed", "improved"]) + [""]
    for bd in c.breakdowns:
        if not _moved(c, bd.benchmark):
            continue
        L += [f"#### Where {bd.benchmark} changed", ""]
        rows = [[ld.layer, ld.kind, f"{ld.delta_s * 1e3:+.3f} ms",
                 "-" if ld.share_of_change is None else f"{ld.share_of_change * 100:.0f}%"]
                for ld in bd.layers[:top]]
        L += _md_table(rows, ["layer", "kind", "delta", "of change"]) + [""]
    L.append(_verdict_line(c))
    return "\n".join(L) + "\n"
