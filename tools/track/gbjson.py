"""Reading Google Benchmark JSON (tbd_bench's and anybody's) into samples per benchmark.

A file is one process: its iteration rows are repetitions of the same benchmark (grouped by
`run_name`), its aggregate rows (`_mean`, `_median`, `_stddev`, `_cv`) summarise them. A file
written with --benchmark_report_aggregates_only has aggregates only: then the `_median` row
(else `_mean`) stands for the file as one sample, and the tool says so.

Times are converted to seconds on load, so a row whose `time_unit` changed between two files
is compared, not dropped; the original units are kept to report the conversion.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

# Row fields that are bookkeeping, not measurements.
NON_METRIC_FIELDS = {
    "name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
    "iterations", "time_unit", "family_index", "per_family_instance_index",
    "aggregate_name", "aggregate_unit", "label", "error_occurred", "error_message",
    "big_o", "rms", "complexity_n",
}
TIME_METRICS = ("real_time", "cpu_time")
TIME_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class InputError(Exception):
    """A file that cannot be read as benchmark JSON (exit code 2)."""


@dataclass
class Bench:
    """One benchmark in one file: its samples per metric (times in seconds)."""

    name: str
    time_unit: str = ""
    samples: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    source: str = "iterations"      # or "aggregate:median" / "aggregate:mean"
    aggregates: dict[str, dict[str, float]] = field(default_factory=dict)  # stddev/cv rows
    label: str = ""

    @property
    def ok(self) -> bool:
        return not self.errors and bool(self.samples)

    def n(self, metric: str = "real_time") -> int:
        return len(self.samples.get(metric, []))


@dataclass
class Run:
    """One JSON file: context, benchmarks in file order, the per-layer breakdown."""

    path: str
    context: dict
    benches: dict[str, Bench]
    breakdown: list[dict]
    metrics_meta: dict          # context.tbd_metrics, or {} for files without it
    dist_steps: list[dict] = field(default_factory=list)  # tbd_dist_steps (--tbd_dist runs)

    @property
    def commit(self) -> str:
        return str(self.context.get("git_commit", "") or "")

    @property
    def dirty(self) -> bool:
        return str(self.context.get("git_dirty", "false")).lower() == "true"

    @property
    def is_tbd(self) -> bool:
        return "backend" in self.context or bool(self.metrics_meta)

    def label(self) -> str:
        c = self.commit[:12] or "no commit"
        return f"{os.path.basename(self.path)} ({c}{' dirty' if self.dirty else ''})"


def _number(v) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        f = float(v)
        return f if math.isfinite(f) else None
    return None


def _row_metrics(row: dict) -> dict[str, float]:
    """Numeric fields of a row; times converted to seconds."""
    unit = row.get("time_unit", "ns")
    scale = TIME_UNIT_SECONDS.get(unit)
    out = {}
    for k, v in row.items():
        if k in NON_METRIC_FIELDS:
            continue
        x = _number(v)
        if x is None:
            continue
        if k in TIME_METRICS:
            if scale is None:
                raise InputError(f"unknown time_unit '{unit}' in row '{row.get('name')}'")
            x *= scale
        out[k] = x
    return out


def load_run(path: str) -> Run:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}") from None
    try:
        # Google Benchmark writes bare NaN/Infinity; Python's json accepts them.
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise InputError(f"{path}: not Google Benchmark JSON (no 'benchmarks' list)")
    ctx = doc.get("context") if isinstance(doc.get("context"), dict) else {}
    meta = ctx.get("tbd_metrics") if isinstance(ctx.get("tbd_metrics"), dict) else {}

    iters: dict[str, list[dict]] = {}
    aggs: dict[str, dict[str, dict]] = {}
    order: list[str] = []
    for row in doc["benchmarks"]:
        if not isinstance(row, dict) or "name" not in row:
            raise InputError(f"{path}: a benchmark row without a name")
        key = row.get("run_name") or row["name"]
        if key not in iters and key not in aggs:
            order.append(key)
        if row.get("run_type") == "aggregate":
            aggs.setdefault(key, {})[row.get("aggregate_name", "")] = row
        else:
            iters.setdefault(key, []).append(row)

    benches: dict[str, Bench] = {}
    for key in order:
        b = Bench(name=key)
        rows = iters.get(key, [])
        ag = aggs.get(key, {})
        if rows:
            b.time_unit = rows[0].get("time_unit", "")
            b.label = rows[0].get("label", "") or ""
            for r in rows:
                if r.get("error_occurred"):
                    msg = r.get("error_message") or "error (no message)"
                    if msg not in b.errors:
                        b.errors.append(msg)
                    continue
                for k, v in _row_metrics(r).items():
                    b.samples.setdefault(k, []).append(v)
        else:
            pick = "median" if "median" in ag else "mean" if "mean" in ag else None
            if pick is None:
                continue  # only stddev/cv rows, or a BigO/RMS pair: nothing to compare
            r = ag[pick]
            b.time_unit = r.get("time_unit", "")
            b.source = f"aggregate:{pick}"
            if r.get("error_occurred"):
                b.errors.append(r.get("error_message") or "error (no message)")
            else:
                for k, v in _row_metrics(r).items():
                    b.samples[k] = [v]
        for an in ("stddev", "cv"):
            if an in ag:
                b.aggregates[an] = _row_metrics(ag[an]) if an == "stddev" else {
                    k: v for k, v in ag[an].items() if _number(v) is not None
                    and k not in NON_METRIC_FIELDS}
        benches[key] = b

    bd = doc.get("tbd_breakdown")
    ds = doc.get("tbd_dist_steps")
    return Run(path=path, context=ctx, benches=benches,
               breakdown=bd if isinstance(bd, list) else [], metrics_meta=meta,
               dist_steps=[r for r in ds if isinstance(r, dict)] if isinstance(ds, list) else [])


def load_runs(paths: list[str], warn=None) -> list[Run]:
    """Files, or folders of files. In a folder, JSON files that are not benchmark runs (a
    peer's results, a comparison) are skipped with a warning; a file named alone must be one."""
    runs = []
    for p in paths:
        if os.path.isdir(p):
            files = sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".json"))
            found = 0
            for f in files:
                try:
                    runs.append(load_run(f))
                    found += 1
                except InputError as e:
                    (warn or _warn)(f"skipped {e}")
            if not found:
                raise InputError(f"{p}: a folder without benchmark JSON files")
        else:
            runs.append(load_run(p))
    return runs


def _warn(msg: str) -> None:
    import sys  # noqa: PLC0415
    print(f"tbd_track: {msg}", file=sys.stderr)
