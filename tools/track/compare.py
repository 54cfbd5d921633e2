"""compare: two runs, or two sets of runs, on every metric, with honest statistics.

The decision for one (benchmark, metric):
  work metrics (flop, bytes)   must be equal, else the row is "not comparable" (work changed)
  info metrics                 shown, never gated
  exact metrics (memory)       new vs old value, beyond the tolerance -> regression/improvement
  other gated metrics          a change is a regression (improvement) only if the ratio of
                               medians is beyond the minimum effect (threshold) in the bad
                               (good) direction AND the Mann-Whitney test is significant after
                               Benjamini-Hochberg over all tests of the comparison. Where no
                               exact test can reach alpha with the samples at hand (n = 1,
                               2 vs 2, 3 vs 3), the stated fallback is: beyond the threshold
                               AND full separation (every new sample beyond every old one);
                               with one sample a side that is the threshold alone.
A row that worked and now fails (broken) is a regression; one that failed and now works is
fixed. Rows present on one side only are added or removed, never silently dropped.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import asdict, dataclass, field

from . import names, stats
from .config import Config
from .gbjson import Bench, Run
from .metrics import MetricTable

EXIT_OK, EXIT_REGRESSION, EXIT_INPUT, EXIT_NOT_COMPARABLE = 0, 1, 2, 3

# Context keys shown in the header, in this order (others that differ are appended).
CONTEXT_KEYS = ("device", "backend", "math", "threads", "build_type", "onednn_version",
                "onednn_isa", "peak_fp32_flops", "peak_bandwidth_bytes_per_s",
                "omp_wait_policy", "host_name", "num_cpus", "git_commit", "git_dirty")
CONTEXT_IGNORE = {"date", "load_avg", "executable", "tbd_metrics", "caches", "mhz_per_cpu",
                  "peak_fp32_method", "peak_bf16_method", "peak_bandwidth_method"}


FAMILIES = {"model": "models", "optimizer": "optimizers", "collective": "collectives",
            "layer": "layers"}


def family_of(name: str) -> str:
    n = names.parse(name)
    return FAMILIES[n.family] if n is not None else "other"


@dataclass
class MetricResult:
    metric: str
    direction: str
    exact: bool
    unit: str
    base: float                 # median (exact metrics: the value)
    new: float
    ratio: float | None         # new / base
    ci: list | None = None      # [low, high] of the ratio
    ci_level: float | None = None
    p: float | None = None
    q: float | None = None      # Benjamini-Hochberg adjusted
    test: str = ""
    threshold: float | None = None
    n_base: int = 0
    n_new: int = 0
    noise_base: float | None = None   # robust relative noise of each side
    noise_new: float | None = None
    verdict: str = "same"       # regression | improvement | same | noise | info | changed
    samples_base: list = field(default_factory=list)   # what the test saw (seconds for times)
    samples_new: list = field(default_factory=list)
    note: str = ""
    acknowledged: str = ""      # the reason, when an acknowledgement covers a regression


@dataclass
class RowResult:
    name: str
    family: str
    status: str                 # compared | added | removed | fixed | broken | error-both |
                                # not-comparable
    verdict: str = "same"       # regression | improvement | same | acknowledged | info
    time_unit: str = ""
    unit_note: str = ""         # "time unit us -> ms (compared in seconds)"
    source_note: str = ""       # the notes below, joined
    notes: list = field(default_factory=list)   # aggregate-only input, partial errors, ...
    errors_base: list = field(default_factory=list)
    errors_new: list = field(default_factory=list)
    reason: str = ""            # not-comparable: what work changed
    metrics: list = field(default_factory=list)


@dataclass
class LayerDelta:
    layer: str
    kind: str
    base_s: float
    new_s: float
    delta_s: float
    delta_fwd_s: float
    delta_bwd_s: float
    share_of_change: float | None
    base_share: float | None
    new_share: float | None
    delta_memory_bytes: float | None
    base_flops: float | None
    new_flops: float | None
    status: str = "both"        # both | added | removed


@dataclass
class BreakdownDiff:
    benchmark: str
    base_step_s: float
    new_step_s: float
    base_sum_s: float
    new_sum_s: float
    layers: list


@dataclass
class FamilySummary:
    family: str
    compared: int
    geomean_time_ratio: float | None
    ci: list | None
    regressions: int
    improvements: int
    unchanged: int


@dataclass
class Comparison:
    base_files: list
    new_files: list
    base_label: str
    new_label: str
    context: list               # [{key, base, new, differs, refuse}]
    comparable: bool
    refuse_reasons: list
    unit_of_analysis: str
    alpha: float
    threshold: float
    config: str
    rows: list
    families: list
    breakdowns: list
    notes: list
    exit_code: int = 0
    verdict: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def by_status(self, status: str) -> list:
        return [r for r in self.rows if r.status == status]


def _side_context(runs: list[Run]) -> dict:
    ctx: dict = {}
    for r in runs:
        for k, v in r.context.items():
            if k in CONTEXT_IGNORE or isinstance(v, (dict, list)):
                continue
            ctx.setdefault(k, set()).add(str(v))
    return {k: " | ".join(sorted(v)) for k, v in ctx.items()}


def context_diff(base: list[Run], new: list[Run], refuse: list[str]) -> tuple[list, list]:
    a, b = _side_context(base), _side_context(new)
    keys = [k for k in CONTEXT_KEYS if k in a or k in b]
    keys += sorted(k for k in set(a) | set(b) if k not in keys and a.get(k) != b.get(k))
    out, reasons = [], []
    for k in keys:
        va, vb = a.get(k, ""), b.get(k, "")
        differs = va != vb
        ref = differs and k in refuse and bool(va) and bool(vb)
        if ref:
            reasons.append(f"{k} differs: '{va}' vs '{vb}'")
        out.append({"key": k, "base": va, "new": vb, "differs": differs, "refuse": ref})
    return out, reasons


def _label(runs: list[Run]) -> str:
    if len(runs) == 1:
        return runs[0].label()
    commits = sorted({r.commit[:12] or "no commit" for r in runs})
    return f"{len(runs)} files ({', '.join(commits)})"


def _gather(runs: list[Run], name: str) -> list[Bench]:
    return [r.benches[name] for r in runs if name in r.benches]


def _samples(benches: list[Bench], metric: str, unit: str) -> list[float]:
    per_file = [b.samples[metric] for b in benches if b.ok and metric in b.samples]
    if unit == "process":
        return [stats.median(v) for v in per_file if v]
    return [x for v in per_file for x in v]


def _signed_log(ratio: float, direction: str) -> float:
    """log of the ratio, positive when worse."""
    lr = math.log(ratio)
    return lr if direction == "lower" else -lr


# Utilizations are measured rates over a peak the run measured or looked up; when the two
# sides' peaks differ, the utilization moves although nothing ran faster or slower, so it is
# reported, not gated (the rate itself, e.g. flops, is).
RELATIVE_TO = {
    "fp32_utilization": ("peak_fp32_flops",),
    "tensor_utilization": ("peak_tf32_flops",),
    "bf16_utilization": ("peak_bf16_flops",),
    "roofline_utilization": ("peak_fp32_flops", "peak_tf32_flops", "peak_bf16_flops",
                             "peak_bandwidth_bytes_per_s", "roofline_compute_roof"),
    "bandwidth_utilization": ("peak_bandwidth_bytes_per_s",),
}


def _peak_change(metric: str, info, ctx_diff: dict) -> str:
    keys = tuple(info.relative_to) if getattr(info, "relative_to", None) else \
        RELATIVE_TO.get(metric, ())
    moved = [f"{k} {ctx_diff[k][0]} -> {ctx_diff[k][1]}" for k in keys if k in ctx_diff]
    return "; ".join(moved)


def _compare_metric(name: str, metric: str, base: list[float], new: list[float], table,
                    cfg: Config, level: float, ctx_diff: dict) -> MetricResult:
    info = table.get(metric)
    st = cfg.settings(name, metric)
    direction = st.direction or info.direction
    mb, mn = stats.median(base), stats.median(new)
    ratio = mn / mb if mb != 0 else None
    r = MetricResult(metric=metric, direction=direction, exact=info.exact, unit=info.unit,
                     base=mb, new=mn, ratio=ratio, n_base=len(base), n_new=len(new),
                     samples_base=list(base), samples_new=list(new))
    if info.source == "unknown" and st.direction is None:
        r.note = "no direction known: not gated"
    if direction == "work":
        rel = abs(mn - mb) / max(abs(mb), abs(mn), 1e-300)
        r.verdict = "changed" if rel > 1e-9 else "same"
        return r
    moved = _peak_change(metric, info, ctx_diff)
    if moved and direction in ("lower", "higher"):
        direction = r.direction = "info"
        r.note = f"not gated: the peak it divides by differs ({moved})"
    if direction == "info":
        r.verdict = "info"
        return r
    if info.exact:
        tol = max(st.tolerance_bytes, st.tolerance * abs(mb))
        r.threshold = tol
        if len(set(base)) > 1 or len(set(new)) > 1:
            r.note = "exact metric varies between samples: medians compared"
        d = mn - mb
        if abs(d) <= tol:
            r.verdict = "same"
        else:
            worse = d > 0 if direction == "lower" else d < 0
            r.verdict = "regression" if worse else "improvement"
        r.test = "exact" + (f" (tolerance {tol:g})" if tol else "")
        return r
    r.threshold = st.threshold
    r.noise_base = _nan_none(stats.log_noise(base))
    r.noise_new = _nan_none(stats.log_noise(new))
    if not (mb > 0 and mn > 0) or min(base + new) <= 0:
        r.verdict = "info"
        r.note = "non-positive values: no ratio"
        return r
    if not 0 < ratio < math.inf:  # 1e-300 against 1e300: the ratio under/overflows a float
        r.verdict, r.ratio = "info", None
        r.note = "values too far apart for a ratio (beyond a float's range)"
        return r
    lo, hi, cov = stats.ratio_ci(base, new, level)
    if cov > 0:
        r.ci, r.ci_level = [lo, hi], cov
    return r


def _nan_none(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def _decide(r: MetricResult, base: list[float], new: list[float], alpha: float):
    """Sets p (test part) for a statistically compared metric; returns True if it is tested."""
    if r.verdict != "same" or r.exact or r.direction not in ("lower", "higher") or r.ratio is None:
        return False
    n, m = len(base), len(new)
    floor = stats.min_achievable_p(n, m)
    if floor > alpha:
        sep = max(new) < min(base) or min(new) > max(base)
        beyond = abs(math.log(r.ratio)) > math.log1p(r.threshold)
        if n == 1 and m == 1:
            r.test = "n=1: threshold only"
        else:
            r.test = (f"fallback: no test reaches alpha={alpha:g} with {n} vs {m} "
                      f"(min p {floor:.3g}): threshold + full separation")
        if beyond and (sep or (n == 1 and m == 1)):
            r.verdict = "regression" if _signed_log(r.ratio, r.direction) > 0 else "improvement"
        elif beyond:
            r.verdict = "noise"
        return False
    r.p, r.test = stats.mann_whitney(base, new)
    r.test = f"Mann-Whitney U, {r.test}"
    return True


def compare(base: list[Run], new: list[Run], cfg: Config, unit: str = "auto",
            allow_mismatch: bool = False, level: float = 0.95,
            today: _dt.date | None = None, fail_on_removed: bool = False) -> Comparison:
    today = today or _dt.date.today()
    ctx, reasons = context_diff(base, new, cfg.refuse)
    is_tbd = any(r.is_tbd for r in base + new)
    table = MetricTable([r.metrics_meta for r in new + base], is_tbd)
    notes: list[str] = []
    need = stats.min_n_for_alpha(cfg.alpha)
    if unit == "auto":
        unit = "process" if len(base) >= need and len(new) >= need else "repetition"
    if unit == "process":
        uoa = (f"process medians ({len(base)} vs {len(new)} files): each file's median is one "
               "sample, so run-to-run noise is in the test")
    else:
        uoa = ("repetitions, pooled over files" if len(base) + len(new) > 2 else
               "repetitions within one process per side")
        if len(base) < need or len(new) < need:
            uoa += (f" (repetitions in one process understate run-to-run noise; "
                    f"{need}+ files per side switch to process medians)")

    ctx_moved = {e["key"]: (e["base"], e["new"]) for e in ctx if e["differs"]}
    names = list(dict.fromkeys([n for r in base for n in r.benches] +
                               [n for r in new for n in r.benches]))
    rows: list[RowResult] = []
    tested: list[tuple[MetricResult, list, list]] = []
    unknown_metrics: set[str] = set()
    for name in names:
        bb, bn = _gather(base, name), _gather(new, name)
        row = RowResult(name=name, family=family_of(name), status="compared")
        ok_b = [b for b in bb if b.ok]
        ok_n = [b for b in bn if b.ok]
        row.errors_base = sorted({e for b in bb for e in b.errors})
        row.errors_new = sorted({e for b in bn for e in b.errors})
        if not bb:
            row.status = "added" if ok_n else "added (error)"
        elif not bn:
            row.status = "removed"
        elif not ok_b and not ok_n:
            row.status = "error-both"
        elif ok_b and not ok_n:
            row.status, row.verdict = "broken", "regression"
        elif not ok_b and ok_n:
            row.status, row.verdict = "fixed", "improvement"
        if row.status != "compared":
            if row.status == "broken":
                ack, expired = cfg.acknowledgement(name, "error", today)
                if ack and not expired:
                    row.verdict = "acknowledged"
            rows.append(row)
            continue
        units = {b.time_unit for b in ok_b} | {b.time_unit for b in ok_n}
        row.time_unit = ok_n[0].time_unit or ok_b[0].time_unit
        if len(units) > 1:
            row.unit_note = (f"time unit {'/'.join(sorted({b.time_unit for b in ok_b}))} -> "
                             f"{'/'.join(sorted({b.time_unit for b in ok_n}))} "
                             "(compared in seconds)")
        srcs = {b.source for b in ok_b + ok_n}
        if srcs != {"iterations"}:
            row.notes.append("aggregate-only input: the file's " +
                             "/".join(sorted(s.split(':')[1] for s in srcs if ':' in s)) +
                             " row is one sample per file")
        if row.errors_base:
            row.notes.append(f"errors in {len(bb) - len(ok_b)} of {len(bb)} base files")
        if row.errors_new:
            row.notes.append(f"errors in {len(bn) - len(ok_n)} of {len(bn)} new files")
        metrics_b = {k for b in ok_b for k in b.samples}
        metrics_n = {k for b in ok_n for k in b.samples}
        work_changes = []
        for metric in sorted(metrics_b & metrics_n, key=_metric_order):
            sb, sn = _samples(ok_b, metric, unit), _samples(ok_n, metric, unit)
            if not sb or not sn:
                continue
            mr = _compare_metric(name, metric, sb, sn, table, cfg, level, ctx_moved)
            if table.get(metric).source == "unknown":
                unknown_metrics.add(metric)
            if mr.direction == "work" and mr.verdict == "changed":
                work_changes.append(f"{metric} {mr.base:.6g} -> {mr.new:.6g}")
            if _decide(mr, sb, sn, cfg.alpha):
                tested.append((mr, sb, sn))
            row.metrics.append(mr)
        for side, ms in (("base", sorted(metrics_b - metrics_n)), ("new", sorted(metrics_n - metrics_b))):
            if ms:
                row.notes.append(f"only in {side}: {', '.join(ms)}")
        row.source_note = "; ".join(row.notes)
        if work_changes:
            row.status = "not-comparable"
            row.reason = "work changed: " + ", ".join(work_changes)
        rows.append(row)

    # Benjamini-Hochberg over every test run as evidence, then the verdicts.
    qs = stats.benjamini_hochberg([t[0].p for t in tested])
    for (mr, sb, sn), q in zip(tested, qs):
        mr.q = q
        beyond = abs(math.log(mr.ratio)) > math.log1p(mr.threshold)
        if beyond and q < cfg.alpha:
            mr.verdict = "regression" if _signed_log(mr.ratio, mr.direction) > 0 else "improvement"
        elif beyond:
            mr.verdict = "noise"
    for row in rows:
        if row.status not in ("compared",):
            continue
        verdicts = []
        for mr in row.metrics:
            if mr.verdict == "regression":
                ack, expired = cfg.acknowledgement(row.name, mr.metric, today)
                if ack and not expired:
                    mr.acknowledged = ack.reason
                elif ack and expired:
                    mr.note = (mr.note + "; " if mr.note else "") + \
                        f"acknowledgement expired {ack.expires}: {ack.reason}"
            verdicts.append(("acknowledged" if mr.acknowledged else mr.verdict))
        if "regression" in verdicts:
            row.verdict = "regression"
        elif "improvement" in verdicts:
            row.verdict = "improvement"
        elif "acknowledged" in verdicts:
            row.verdict = "acknowledged"
        else:
            row.verdict = "same"

    if unknown_metrics:
        notes.append("not gated (no direction known): " + ", ".join(sorted(unknown_metrics)))
    if any(m.test.startswith("fallback") or m.test.startswith("n=1") for r in rows for m in r.metrics):
        notes.append(f"some rows have too few samples for a test to reach alpha={cfg.alpha:g} "
                     f"(needs {need} vs {need}): their verdicts use the threshold and full "
                     "separation only")

    families = _families(rows)
    breakdowns = _breakdowns(base, new, rows)
    comparable = allow_mismatch or not reasons
    if reasons and allow_mismatch:
        notes.append("context differs (" + "; ".join(reasons) + "): compared anyway "
                     "(--allow-mismatch)")
    c = Comparison(base_files=[r.path for r in base], new_files=[r.path for r in new],
                   base_label=_label(base), new_label=_label(new), context=ctx,
                   comparable=comparable, refuse_reasons=reasons, unit_of_analysis=uoa,
                   alpha=cfg.alpha, threshold=cfg.threshold, config=cfg.source, rows=rows,
                   families=families, breakdowns=breakdowns, notes=notes)
    nreg = sum(1 for r in rows if r.verdict == "regression")
    removed = sum(1 for r in rows if r.status == "removed")
    if not comparable:
        c.exit_code, c.verdict = EXIT_NOT_COMPARABLE, "NOT COMPARABLE"
    elif nreg or (fail_on_removed and removed):
        c.exit_code, c.verdict = EXIT_REGRESSION, "REGRESSION"
    else:
        c.exit_code, c.verdict = EXIT_OK, "OK"
    return c


_ORDER = ("real_time", "cpu_time", "items_per_second")


def _metric_order(m: str):
    if m in _ORDER:
        return (0, _ORDER.index(m), m)
    if m.endswith("_per_second"):
        return (1, 0, m)
    if m == "peak_memory_bytes":
        return (3, 0, m)
    if m.startswith("mem_"):
        return (3, 1, m)
    return (2, 0, m)


def _families(rows: list[RowResult]) -> list[FamilySummary]:
    out = []
    for fam in ("layers", "optimizers", "models", "other"):
        rs = [r for r in rows if r.family == fam and r.status == "compared"]
        if not rs:
            continue
        ratios = []
        for r in rs:
            for m in r.metrics:
                if m.metric == "real_time" and m.ratio:
                    ratios.append(m.ratio)
        g, ci = stats.geomean_ci(ratios)
        out.append(FamilySummary(
            family=fam, compared=len(rs), geomean_time_ratio=_nan_none(g),
            ci=list(ci) if ci else None,
            regressions=sum(r.verdict == "regression" for r in rs),
            improvements=sum(r.verdict == "improvement" for r in rs),
            unchanged=sum(r.verdict in ("same", "acknowledged", "info") for r in rs)))
    return out


def _breakdown_rows(runs: list[Run], bench: str) -> dict[str, dict]:
    """Per layer: medians over files of fwd/bwd time, memory, flops."""
    acc: dict[str, dict[str, list]] = {}
    kinds: dict[str, str] = {}
    for r in runs:
        for row in r.breakdown:
            if row.get("benchmark") != bench:
                continue
            layer = str(row.get("layer"))
            kinds[layer] = str(row.get("kind", ""))
            a = acc.setdefault(layer, {})
            for k in ("fwd_time_s", "bwd_time_s", "memory_bytes", "flops", "share_of_step"):
                v = row.get(k)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    a.setdefault(k, []).append(float(v))
    out = {}
    for layer, a in acc.items():
        out[layer] = {k: stats.median(v) for k, v in a.items()}
        out[layer]["kind"] = kinds[layer]
    return out


def _breakdowns(base: list[Run], new: list[Run], rows: list[RowResult]) -> list[BreakdownDiff]:
    out = []
    for row in rows:
        if row.family != "models" or row.status != "compared":
            continue
        lb, ln = _breakdown_rows(base, row.name), _breakdown_rows(new, row.name)
        if not lb or not ln:
            continue
        step = {m.metric: m for m in row.metrics}.get("real_time")
        t = lambda d: d.get("fwd_time_s", 0.0) + d.get("bwd_time_s", 0.0)  # noqa: E731
        sum_b = sum(t(d) for d in lb.values())
        sum_n = sum(t(d) for d in ln.values())
        total = sum_n - sum_b
        layers = []
        for layer in list(dict.fromkeys(list(lb) + list(ln))):
            db, dn = lb.get(layer), ln.get(layer)
            tb, tn = (t(db) if db else 0.0), (t(dn) if dn else 0.0)
            layers.append(LayerDelta(
                layer=layer, kind=(dn or db)["kind"], base_s=tb, new_s=tn, delta_s=tn - tb,
                delta_fwd_s=(dn or {}).get("fwd_time_s", 0.0) - (db or {}).get("fwd_time_s", 0.0),
                delta_bwd_s=(dn or {}).get("bwd_time_s", 0.0) - (db or {}).get("bwd_time_s", 0.0),
                share_of_change=(tn - tb) / total if total else None,
                base_share=(db or {}).get("share_of_step"), new_share=(dn or {}).get("share_of_step"),
                delta_memory_bytes=((dn or {}).get("memory_bytes", 0.0) -
                                    (db or {}).get("memory_bytes", 0.0)) if db and dn else None,
                base_flops=(db or {}).get("flops"), new_flops=(dn or {}).get("flops"),
                status="both" if db and dn else ("added" if dn else "removed")))
        layers.sort(key=lambda d: -abs(d.delta_s))
        out.append(BreakdownDiff(benchmark=row.name,
                                 base_step_s=step.base if step else math.nan,
                                 new_step_s=step.new if step else math.nan,
                                 base_sum_s=sum_b, new_sum_s=sum_n, layers=layers))
    return out
