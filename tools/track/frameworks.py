"""Frameworks side by side: tbd's rows against a peer framework's rows of the same names.

Not a regression gate: different frameworks are not "not comparable", they are the point. Each
side is a set of files (one per process) whose context names its framework (a file without
`framework` in its context is tbd_bench's). Per row and side: the median of the row's rate (its
`items_per_second`, and the model's own items: tokens, frames, ...), its time per step and its
peak memory; per row and peer side: tbd's rate over the peer's with a distribution-free
confidence interval (stats.ratio_ci). The unit of analysis is the process (each file's median)
when every side has at least three files with the row, else the pooled repetitions, and the
summary says which.
"""

from __future__ import annotations

import math
import statistics

from . import stats
from .gbjson import Run

LEVEL = 0.95


def framework_of(run: Run) -> str:
    """'tbd', or the peer's 'PyTorch 2.15.0 eager' (framework, version, mode)."""
    ctx = run.context
    fw = ctx.get("framework")
    if not fw:
        return "tbd"
    ver = str(ctx.get("framework_version", "")).split("+")[0]
    mode = ctx.get("torch_mode", "")
    return " ".join(x for x in (str(fw), ver, str(mode)) if x)


def is_frameworks_comparison(base: list[Run], new: list[Run]) -> bool:
    fb = {framework_of(r) for r in base}
    fn = {framework_of(r) for r in new}
    return fb != fn


def group_sides(runs: list[Run]) -> dict[str, list[Run]]:
    """{side label: runs}, tbd first, then the peers in the order met."""
    sides: dict[str, list[Run]] = {}
    for r in runs:
        sides.setdefault(framework_of(r), []).append(r)
    return dict(sorted(sides.items(), key=lambda kv: kv[0] != "tbd"))


def _rate_metrics(names: list[str]) -> list[str]:
    """items_per_second first, then the model's other rates, in a fixed order."""
    rates = sorted(m for m in names if m.endswith("_per_second") and m != "items_per_second"
                   and m != "bytes_per_second")
    return (["items_per_second"] if "items_per_second" in names else []) + rates


def _unit_samples(runs: list[Run], name: str, metric: str, by_process: bool) -> list[float]:
    out = []
    for r in runs:
        b = r.benches.get(name)
        if b is None or not b.ok:
            continue
        xs = [x for x in b.samples.get(metric, []) if x is not None and math.isfinite(x)]
        if not xs:
            continue
        if by_process:
            out.append(statistics.median(xs))
        else:
            out += xs
    return out


def summarize(sides: dict[str, list[Run]], reference: str = "tbd") -> dict:
    """The side-by-side table as a JSON-able dict (see the module's doc)."""
    labels = list(sides)
    if reference not in sides:
        reference = labels[0]
    names: list[str] = []
    for label in labels:
        for r in sides[label]:
            for n in r.benches:
                if n not in names:
                    names.append(n)
    rows = []
    for name in names:
        files = {label: [r for r in sides[label] if name in r.benches] for label in labels}
        by_process = all(len(f) >= 3 for f in files.values())
        row = {"benchmark": name, "unit": "process" if by_process else "repetition",
               "sides": {}, "ratios": {}}
        metric_names: list[str] = []
        for label in labels:
            for r in files[label]:
                metric_names += [m for m in r.benches[name].samples if m not in metric_names]
        rate_names = _rate_metrics(metric_names)
        for label in labels:
            errors = sorted({e for r in files[label] for e in r.benches[name].errors})
            side = {"files": len(files[label])}
            if errors:
                side["errors"] = errors
            for m in rate_names + ["real_time", "peak_memory_bytes"]:
                xs = _unit_samples(files[label], name, m, by_process)
                if xs:
                    side[m] = {"median": statistics.median(xs), "n": len(xs), "samples": xs}
            if not files[label]:
                side["absent"] = True
            row["sides"][label] = side
        ref = row["sides"][reference]
        for label in labels:
            if label == reference:
                continue
            other = row["sides"][label]
            ratio = {}
            # A side whose median is 0 (a rate of 0: nothing ran) has no ratio: "-".
            for m in rate_names:
                if m in ref and m in other and other[m]["median"] != 0:
                    a, b = ref[m]["samples"], other[m]["samples"]
                    lo, hi, cov = stats.ratio_ci(b, a, LEVEL)
                    ratio[m] = {"ratio": ref[m]["median"] / other[m]["median"],
                                "ci": [lo, hi], "coverage": cov}
            if "peak_memory_bytes" in ref and "peak_memory_bytes" in other and \
                    other["peak_memory_bytes"]["median"] != 0:
                ratio["peak_memory_bytes"] = {
                    "ratio": ref["peak_memory_bytes"]["median"]
                    / other["peak_memory_bytes"]["median"]}
            row["ratios"][label] = ratio
        row["rate"] = rate_names[0] if rate_names else None
        rows.append(row)
    notes = []
    for label in labels:
        if label == "tbd":
            continue
        ctx = next((r.context for r in sides[label]), {})
        if ctx.get("peak_memory_method"):
            notes.append(f"{label}: peak memory is the {ctx['peak_memory_method']}")
    if "tbd" in sides:
        notes.append("tbd: peak memory is tbd's tracked peak (peak_memory_bytes: every buffer "
                     "the step holds, by category)")
    return {"reference": reference, "sides": labels, "level": LEVEL, "rows": rows,
            "contexts": {label: _context_summary(sides[label]) for label in labels},
            "notes": notes}


def _context_summary(runs: list[Run]) -> dict:
    keys = ("framework", "framework_version", "torch_mode", "compile", "device", "threads",
            "math", "blas", "onednn_version", "denormals", "float32_matmul_precision",
            "backend", "build_type", "git_commit", "peak_fp32_flops")
    ctx = runs[0].context if runs else {}
    return {k: ctx[k] for k in keys if k in ctx}


def _fmt_rate(x: float | None) -> str:
    if x is None:
        return "-"
    for lim, fmt in ((100, "{:.3g}"), (1e5, "{:.0f}"), (1e8, "{:.3g}")):
        if abs(x) < lim:
            return fmt.format(x)
    return f"{x:.3g}"


def _fmt_mib(x: float | None) -> str:
    return "-" if x is None else f"{x / 2**20:.0f}"


def _fmt_ratio(r: dict | None) -> str:
    if not r:
        return "-"
    lo, hi = r.get("ci", [math.nan, math.nan])
    ci = "" if not (math.isfinite(lo) and math.isfinite(hi)) else f" [{lo:.2f}, {hi:.2f}]"
    return f"{r['ratio']:.2f}x{ci}"


def short_labels(sides: list[str]) -> dict[str, str]:
    """Column labels: a peer's mode alone ('eager') where every peer is the same framework and
    version, else the whole label."""
    peers = [s for s in sides if s != "tbd"]
    prefixes = {s.rsplit(" ", 1)[0] for s in peers if " " in s}
    if len(prefixes) == 1 and all(" " in s for s in peers):
        return {s: (s.rsplit(" ", 1)[1] if s != "tbd" else s) for s in sides}
    return {s: s for s in sides}


def table_rows(summary: dict) -> tuple[list[str], list[list[str]]]:
    """Header and cells: per row the rate on each side, tbd's ratio over each peer with its CI,
    and peak memory (MiB) on each side."""
    ref = summary["reference"]
    peers = [s for s in summary["sides"] if s != ref]
    short = short_labels(summary["sides"])
    head = ["benchmark", "rate"] + [short[s] for s in summary["sides"]] + \
        [f"{short[ref]}/{short[p]}" for p in peers] + [f"MiB {short[s]}" for s in summary["sides"]]
    body = []
    for row in summary["rows"]:
        m = row["rate"]
        cells = [row["benchmark"], (m or "-").replace("_per_second", "/s")]
        for s in summary["sides"]:
            side = row["sides"][s]
            if side.get("errors"):
                cells.append("error")
            elif side.get("absent"):
                cells.append("absent")
            else:
                cells.append(_fmt_rate(side.get(m, {}).get("median") if m else None))
        for p in peers:
            cells.append(_fmt_ratio(row["ratios"].get(p, {}).get(m) if m else None))
        for s in summary["sides"]:
            cells.append(_fmt_mib(row["sides"][s].get("peak_memory_bytes", {}).get("median")))
        body.append(cells)
    return head, body


def _errors(summary: dict) -> list[str]:
    out = []
    for row in summary["rows"]:
        for s, side in row["sides"].items():
            for e in side.get("errors", []):
                out.append(f"{row['benchmark']} ({s}): {e}")
    return out


def text(summary: dict) -> str:
    head, body = table_rows(summary)
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    lines = ["Frameworks side by side (not a gate): rates are medians; "
             f"{summary['reference']}/peer = {summary['reference']}'s rate over the peer's, "
             f"{summary['level'] * 100:g}% CI; MiB = peak memory"]
    for r in [head] + body:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))))
    units = sorted({row["unit"] for row in summary["rows"]})
    lines.append(f"unit of analysis: {', '.join(units)} (process: each file's median, when "
                 "every side has 3 or more files of the row)")
    for label, ctx in summary["contexts"].items():
        lines.append(f"{label}: " + ", ".join(f"{k}={v}" for k, v in ctx.items()))
    lines += summary["notes"]
    errs = _errors(summary)
    if errs:
        lines.append("errors:")
        lines += [f"  {e}" for e in errs]
    return "\n".join(lines) + "\n"


def markdown(summary: dict) -> str:
    head, body = table_rows(summary)
    out = ["### Frameworks side by side", "",
           f"{summary['reference']} / peer: {summary['reference']}'s rate over the peer's, "
           f"median, {summary['level'] * 100:g}% CI. Not a gate.", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in body]
    out.append("")
    out += [f"- {n}" for n in summary["notes"]]
    out += [f"- error: {e}" for e in _errors(summary)]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# One model's step layer by layer on both sides: tbd_bench --tbd_breakdown's rows against the
# peer's profile (peers.run --profile), aligned by layer and summed by tbd's layer kinds.

SPECIAL = ("(zero_grad)", "(optimizer)", "(accumulate_grad)", "(backward, unmatched)")


def _kind_of(row: dict) -> str:
    return row["layer"] if row["layer"] in SPECIAL else row.get("kind") or "-"


def align_layers(tbd_rows: list[dict], peer_rows: list[dict]) -> list[tuple]:
    """(tbd row | None, peer row | None, how) pairs: the same name first, then, kind by kind,
    the remaining layers in their order of execution; the rest unpaired."""
    pairs, used_t, used_p = [], set(), set()
    by_name = {r["layer"]: i for i, r in enumerate(peer_rows)}
    for i, t in enumerate(tbd_rows):
        j = by_name.get(t["layer"])
        if j is not None and j not in used_p and _kind_of(peer_rows[j]) == _kind_of(t):
            pairs.append((t, peer_rows[j], "name"))
            used_t.add(i)
            used_p.add(j)
    kinds: dict[str, tuple[list, list]] = {}
    for i, t in enumerate(tbd_rows):
        if i not in used_t:
            kinds.setdefault(_kind_of(t), ([], []))[0].append(t)
    for j, p in enumerate(peer_rows):
        if j not in used_p:
            kinds.setdefault(_kind_of(p), ([], []))[1].append(p)
    for kind, (ts, ps) in kinds.items():
        for k in range(max(len(ts), len(ps))):
            t = ts[k] if k < len(ts) else None
            p = ps[k] if k < len(ps) else None
            pairs.append((t, p, "order" if t and p else "unpaired"))
    return pairs


def _time(r: dict | None, key: str | None = None) -> float | None:
    if r is None:
        return None
    if key:
        return r.get(key, 0.0)
    return r.get("fwd_time_s", 0.0) + r.get("bwd_time_s", 0.0)


def breakdown_summary(tbd_rows: list[dict], tbd_step_s: float | None, peer: dict) -> dict:
    """Kinds (summed) and layers (paired) of both sides' step, as a JSON-able dict."""
    peer_rows = peer.get("rows", [])
    kinds: dict[str, dict] = {}
    for side, rows in (("tbd", tbd_rows), ("peer", peer_rows)):
        for r in rows:
            k = kinds.setdefault(_kind_of(r), {"kind": _kind_of(r)})
            for key in ("fwd_time_s", "bwd_time_s"):
                k[f"{side}_{key}"] = k.get(f"{side}_{key}", 0.0) + r.get(key, 0.0)
            k[f"{side}_layers"] = k.get(f"{side}_layers", 0) + 1
    layers = []
    for t, p, how in align_layers(tbd_rows, peer_rows):
        layers.append({"tbd_layer": t["layer"] if t else None,
                       "peer_layer": p["layer"] if p else None,
                       "kind": _kind_of(t or p), "paired_by": how,
                       "tbd_fwd_time_s": _time(t, "fwd_time_s"),
                       "tbd_bwd_time_s": _time(t, "bwd_time_s"),
                       "peer_fwd_time_s": _time(p, "fwd_time_s"),
                       "peer_bwd_time_s": _time(p, "bwd_time_s")})
    return {"benchmark": peer.get("benchmark"), "kinds": list(kinds.values()), "layers": layers,
            "tbd_step_s": tbd_step_s, "tbd_sum_s": sum(_time(r) for r in tbd_rows),
            "peer_step_s": peer.get("step_s"), "peer_profiled_step_s": peer.get("profiled_step_s"),
            "peer_sum_s": sum(_time(r) for r in peer_rows), "peer_ops": peer.get("ops", []),
            "peer_timer": peer.get("timer")}


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.2f}"


def _speed(t: float | None, p: float | None) -> str:
    """The peer's time over tbd's: above 1, tbd is faster."""
    if not t or p is None or t <= 0:
        return "-"
    return f"{p / t:.2f}x"


def _grid(head: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                      for i, (c, w) in enumerate(zip(r, widths))) for r in [head] + body]


def breakdown_text(b: dict, peer_label: str = "PyTorch", top: int = 25) -> str:
    lines = [f"Step layer by layer: {b['benchmark']} (ms per step; peer/tbd = the peer's time "
             "over tbd's, above 1x tbd is faster)"]
    ts, ps = b.get("tbd_step_s"), b.get("peer_step_s")
    lines.append(f"step: tbd {_ms(ts)} ms (its layers sum to {_ms(b['tbd_sum_s'])}), "
                 f"{peer_label} {_ms(ps)} ms (profiled {_ms(b.get('peer_profiled_step_s'))}, "
                 f"its layers sum to {_ms(b['peer_sum_s'])}); peer/tbd {_speed(ts, ps)}")
    kinds = sorted(b["kinds"], key=lambda k: -max(k.get("tbd_fwd_time_s", 0)
                                                     + k.get("tbd_bwd_time_s", 0),
                                                     k.get("peer_fwd_time_s", 0)
                                                     + k.get("peer_bwd_time_s", 0)))
    head = ["kind", "layers tbd/peer", "fwd tbd", "fwd peer", "bwd tbd", "bwd peer", "tbd",
            "peer", "peer/tbd"]
    body = []
    for k in kinds:
        t = k.get("tbd_fwd_time_s", 0) + k.get("tbd_bwd_time_s", 0) if "tbd_layers" in k else None
        p = (k.get("peer_fwd_time_s", 0) + k.get("peer_bwd_time_s", 0)
             if "peer_layers" in k else None)
        body.append([k["kind"], f"{k.get('tbd_layers', 0)}/{k.get('peer_layers', 0)}",
                     _ms(k.get("tbd_fwd_time_s")), _ms(k.get("peer_fwd_time_s")),
                     _ms(k.get("tbd_bwd_time_s")), _ms(k.get("peer_bwd_time_s")),
                     _ms(t), _ms(p), _speed(t, p)])
    lines += ["", "by kind (tbd's layer kinds; the peer's modules and forward() operators mapped "
              "to them):"] + _grid(head, body)
    paired = [x for x in b["layers"] if x["paired_by"] != "unpaired"]
    gap = sorted(paired, key=lambda x: (x["peer_fwd_time_s"] + x["peer_bwd_time_s"])
                 - (x["tbd_fwd_time_s"] + x["tbd_bwd_time_s"]))
    head = ["tbd layer", "peer layer", "kind", "fwd tbd", "fwd peer", "bwd tbd", "bwd peer",
            "peer/tbd"]

    def cells(x):
        t = x["tbd_fwd_time_s"] + x["tbd_bwd_time_s"]
        p = x["peer_fwd_time_s"] + x["peer_bwd_time_s"]
        return [x["tbd_layer"], x["peer_layer"], x["kind"], _ms(x["tbd_fwd_time_s"]),
                _ms(x["peer_fwd_time_s"]), _ms(x["tbd_bwd_time_s"]), _ms(x["peer_bwd_time_s"]),
                _speed(t, p)]
    wins = [x for x in gap if (x["peer_fwd_time_s"] + x["peer_bwd_time_s"])
            < (x["tbd_fwd_time_s"] + x["tbd_bwd_time_s"])]
    lines += ["", f"where the peer is faster ({len(wins)} of {len(paired)} paired layers; the "
              f"{min(top, len(wins))} largest gaps):"]
    lines += _grid(head, [cells(x) for x in wins[:top]]) if wins else ["  none"]
    heavy = sorted(paired, key=lambda x: -max(x["tbd_fwd_time_s"] + x["tbd_bwd_time_s"],
                                              x["peer_fwd_time_s"] + x["peer_bwd_time_s"]))
    lines += ["", f"the {min(top, len(heavy))} heaviest paired layers:"]
    lines += _grid(head, [cells(x) for x in heavy[:top]])
    by_name = sum(1 for x in paired if x["paired_by"] == "name")
    lone = [x for x in b["layers"] if x["paired_by"] == "unpaired"]
    lines.append(f"paired: {by_name} by name, {len(paired) - by_name} by order within their "
                 f"kind; unpaired: {len(lone)}"
                 + (f" ({', '.join(sorted({x['kind'] for x in lone}))})" if lone else ""))
    if b.get("peer_ops"):
        lines += ["", f"{peer_label}'s operators by self time (torch.profiler):"]
        lines += _grid(["operator", "self ms", "total ms", "calls"],
                       [[o["op"], _ms(o["self_time_s"]), _ms(o["time_s"]), f"{o['calls']:g}"]
                        for o in b["peer_ops"][:15]])
    lines.append(f"timers: tbd's host timer per node (--tbd_breakdown); peer: "
                 f"{b.get('peer_timer')}; backward is dgrad and wgrad together on both sides")
    return "\n".join(lines) + "\n"
