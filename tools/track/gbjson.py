"""Reading Google Benchmark JSON (tbd_bench's and anybody's) into samples per benchmark.

A file is one process: its iteration rows are repetitions of the same benchmark (grouped by
`run_name`), its aggregate rows (`_mean`, `_median`, `_stddev`, `_cv`) summarise them. A file
written with --benchmark_report_aggregates_only has aggregates only: then the `_median` row
(else `_mean`) stands for the file as one sample, and the tool says so.

Times are converted to seconds on load, so a row whose `time_unit` changed between two files
is compared, not dropped; the original units are kept to report the conversion.

Everything the tracker uses is checked on load (InputError, exit 2, naming the file, the row
and the field): a `context` object (its commit a hash, its metric descriptions well formed), a
non-empty `benchmarks` list, rows with a name, a known time unit, and in every measured row
(an iteration, or the mean/median of an aggregates-only file) a positive finite `real_time`, a
finite `cpu_time` >= 0 and finite counters. NaN, null or a negative time would otherwise drop a
metric from the comparison, and the gate would pass on data it could not read. Error rows and
the stddev/cv statistics rows may hold null (Google Benchmark's NaN, rewritten by tbd_bench).
InputError is defined in inputs.py; the readers' modules import it from here.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

from .inputs import (MAX_MAGNITUDE, InputError, NotBenchmarkJSON, finite_number, is_number,
                     read_json, row_label)
from .metrics import DIRECTIONS

__all__ = ["Bench", "InputError", "NotBenchmarkJSON", "Run", "load_run", "load_runs"]

# Row fields that are bookkeeping, not measurements.
NON_METRIC_FIELDS = {
    "name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
    "iterations", "time_unit", "family_index", "per_family_instance_index",
    "aggregate_name", "aggregate_unit", "label", "error_occurred", "error_message",
    "big_o", "rms", "complexity_n",
}
TIME_METRICS = ("real_time", "cpu_time")
TIME_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


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
        c = str(self.context.get("git_commit", "") or "")
        return "" if c in NO_COMMIT else c

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
    """A finite number, else None (aggregate statistics rows: a `_cv` of a zero mean is null)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        try:
            f = float(v)
        except OverflowError:
            return None
        return f if math.isfinite(f) and abs(f) <= MAX_MAGNITUDE else None
    return None


def _row_metrics(row: dict) -> dict[str, float]:
    """Numeric fields of a row; times converted to seconds. The row has been checked
    (_check_row): its time_unit is known."""
    scale = TIME_UNIT_SECONDS[row.get("time_unit", "ns")]
    out = {}
    for k, v in row.items():
        if k in NON_METRIC_FIELDS:
            continue
        x = _number(v)
        if x is None:
            continue
        out[k] = x * scale if k in TIME_METRICS else x
    return out


# ---- checking what a file says, before anything uses it

# Context entries the tracker reads as text (compare's header and refusals, the history's
# machine fingerprint, the frameworks' side labels): a scalar each.
CONTEXT_TEXT_KEYS = (
    "backend", "device", "math", "threads", "build_type", "library_build_type",
    "onednn_version", "onednn_isa", "peak_fp32_flops", "peak_tf32_flops",
    "peak_bandwidth_bytes_per_s", "roofline_compute_roof", "omp_wait_policy", "host_name",
    "framework", "framework_version", "torch_mode", "dist_summary", "peak_memory_method")
COMMIT_RE = re.compile(r"[0-9a-fA-F]{7,64}")  # a git hash, abbreviated or whole (fullmatch)
NO_COMMIT = ("", "unknown")  # tbd_bench outside a git checkout writes "unknown"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Rows: fields that hold text; every other field of a measured row is a number.
_ROW_TEXT = ("run_name", "run_type", "time_unit", "aggregate_name", "aggregate_unit", "label",
             "error_message", "big_o")
# tbd_breakdown rows: text fields, true/false fields; the rest are numbers.
_BREAKDOWN_TEXT = ("benchmark", "layer", "kind", "problem", "timer", "bound")
_BREAKDOWN_FLAGS = ("backward_split",)
_DIST_REQUIRED = ("step_s", "forward_s", "backward_s", "optimizer_s")


def check_name(name, path: str, row: str, field: str = "name") -> str:
    """A benchmark name: non-empty text without control characters (a newline in a name
    would forge lines in the text and markdown reports)."""
    if not isinstance(name, str) or not name:
        got = "null" if name is None else repr(name)
        raise InputError(f"expected a benchmark name (non-empty text), got {got}", path, row,
                         field)
    m = _CONTROL.search(name)
    if m:
        raise InputError(f"a benchmark name with a control character "
                         f"({m.group()!r} at {m.start()})", path, row, field)
    return name


def _check_context(ctx, path: str) -> dict:
    if ctx is None:
        raise InputError("no 'context' object (Google Benchmark writes one: the machine, the "
                         "build, the commit)", path, field="context")
    if not isinstance(ctx, dict):
        raise InputError(f"expected an object, got {type(ctx).__name__}", path,
                         field="context")
    for k in CONTEXT_TEXT_KEYS + ("date",):
        v = ctx.get(k)
        if v is not None and (not isinstance(v, (str, int, float, bool)) or
                              (isinstance(v, float) and not math.isfinite(v))):
            raise InputError(f"expected text or a number, got {_kind(v)}", path,
                             field=f"context.{k}")
    if "date" in ctx and not isinstance(ctx["date"], str):
        raise InputError(f"expected a date (text), got {ctx['date']!r}", path,
                         field="context.date")
    commit = ctx.get("git_commit")
    if commit is not None and (not isinstance(commit, str) or
                               (commit not in NO_COMMIT and not COMMIT_RE.fullmatch(commit))):
        raise InputError(f"expected a commit hash (7 to 64 hex digits) or 'unknown', got "
                         f"{commit!r}", path, field="context.git_commit")
    dirty = ctx.get("git_dirty")
    if dirty is not None and not isinstance(dirty, bool) and \
            str(dirty).lower() not in ("true", "false", "unknown"):
        raise InputError(f"expected true, false or unknown, got {dirty!r}", path,
                         field="context.git_dirty")
    if "num_cpus" in ctx:
        v = ctx["num_cpus"]
        if not (is_number(v) and isinstance(v, int) and v >= 0):
            raise InputError(f"expected a whole number >= 0, got {v!r}", path,
                             field="context.num_cpus")
    caches = ctx.get("caches")
    if caches is not None:
        if not isinstance(caches, list):
            raise InputError(f"expected a list, got {_kind(caches)}", path,
                             field="context.caches")
        for i, c in enumerate(caches):
            if not isinstance(c, dict) or not isinstance(c.get("type", ""), str) or \
                    not all(is_number(c.get(k, 0)) for k in ("level", "size")):
                raise InputError("expected an object with a text 'type' and numbers 'level' "
                                 "and 'size'", path, field=f"context.caches[{i}]")
    meta = ctx.get("tbd_metrics")
    if meta is not None:
        _check_metrics_meta(meta, path)
    return ctx


def _check_metrics_meta(meta, path: str) -> None:
    """context.tbd_metrics: what each metric means; a wrong entry would ungate a metric."""
    where = "context.tbd_metrics"
    if not isinstance(meta, dict):
        raise InputError(f"expected an object, got {_kind(meta)}", path, field=where)
    for k, v in meta.items():
        f = f"{where}.{k}"
        if not isinstance(v, dict):
            raise InputError(f"expected an object, got {_kind(v)}", path, field=f)
        if v.get("direction") not in DIRECTIONS:
            raise InputError(f"expected one of {', '.join(DIRECTIONS)}, got "
                             f"{v.get('direction')!r}", path, field=f + ".direction")
        for key, typ, what in (("unit", str, "text"), ("description", str, "text"),
                               ("exact", bool, "true or false")):
            if key in v and not isinstance(v[key], typ):
                raise InputError(f"expected {what}, got {v[key]!r}", path, field=f"{f}.{key}")
        rel = v.get("relative_to")
        if rel is not None and (not isinstance(rel, list) or
                                not all(isinstance(x, str) for x in rel)):
            raise InputError(f"expected a list of context keys, got {rel!r}", path,
                             field=f + ".relative_to")


def _kind(v) -> str:
    return "null" if v is None else {dict: "an object", list: "a list", str: "text",
                                     bool: "a boolean"}.get(type(v), type(v).__name__)


def _check_row(row, i: int, path: str) -> tuple[str, str]:
    """Checks one entry of `benchmarks`; returns (its key, its label for messages)."""
    if not isinstance(row, dict):
        raise InputError(f"expected an object, got {_kind(row)}", path, row_label(i))
    label = row_label(i, row.get("name"))
    name = check_name(row.get("name"), path, label)
    for k in _ROW_TEXT:
        if k in row and not isinstance(row[k], str):
            raise InputError(f"expected text, got {_kind(row[k])}", path, label, k)
    if "run_name" in row:
        check_name(row["run_name"], path, label, "run_name")
    if row.get("run_type", "iteration") not in ("iteration", "aggregate"):
        raise InputError(f"expected iteration or aggregate, got {row['run_type']!r}", path,
                         label, "run_type")
    if row.get("time_unit", "ns") not in TIME_UNIT_SECONDS:
        raise InputError(f"unknown time unit {row['time_unit']!r} (known: "
                         f"{', '.join(TIME_UNIT_SECONDS)})", path, label, "time_unit")
    if "error_occurred" in row and not isinstance(row["error_occurred"], bool):
        raise InputError(f"expected true or false, got {row['error_occurred']!r}", path, label,
                         "error_occurred")
    statistic = row.get("run_type") == "aggregate" and \
        row.get("aggregate_name") not in ("mean", "median")
    if row.get("error_occurred") or statistic:
        # An error row's times are zeros; a stddev or cv row may hold null (a cv of a zero
        # mean): kept out of the samples, not refused.
        return row.get("run_name") or name, label
    # A measured row (an iteration, or the mean/median an aggregates-only file compares).
    finite_number(row.get("real_time"), file=path, row=label, field="real_time", positive=True)
    finite_number(row.get("cpu_time"), file=path, row=label, field="cpu_time", minimum=0)
    for k, v in row.items():
        if k not in NON_METRIC_FIELDS:
            finite_number(v, file=path, row=label, field=k)
    return row.get("run_name") or name, label


def _check_records(v, path: str, key: str, text: tuple, required: tuple = (),
                   nonnegative: bool = False, lists: dict | None = None,
                   flags: tuple = ()) -> list[dict]:
    """A list of objects (tbd_breakdown, tbd_dist_steps): the `text` fields are text, the
    `flags` fields true or false, the `lists` fields lists of such objects (with the fields
    each requires), every other field a finite number."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise InputError(f"expected a list, got {_kind(v)}", path, field=key)
    for i, r in enumerate(v):
        where = f"{key}[{i}]"
        if not isinstance(r, dict):
            raise InputError(f"expected an object, got {_kind(r)}", path, field=where)
        for k in required:
            if k not in r:
                raise InputError("missing", path, field=f"{where}.{k}")
        for k, x in r.items():
            if k in text:
                if not isinstance(x, str):
                    raise InputError(f"expected text, got {_kind(x)}", path,
                                     field=f"{where}.{k}")
            elif k in flags:
                if not isinstance(x, bool):
                    raise InputError(f"expected true or false, got {_kind(x)}", path,
                                     field=f"{where}.{k}")
            elif k in (lists or {}):
                _check_records(x, path, f"{where}.{k}", ("name",), lists[k],
                               nonnegative=nonnegative)
            else:
                finite_number(x, file=path, field=f"{where}.{k}",
                              minimum=0 if nonnegative else None)
    return v


def load_run(path: str) -> Run:
    """One Google Benchmark JSON file, checked: InputError (naming the file, the row and the
    field) for anything the comparison could not use. NotBenchmarkJSON for well-formed JSON
    that is not a Google Benchmark file."""
    doc = read_json(path, "Google Benchmark JSON")
    if not isinstance(doc, dict) or "benchmarks" not in doc:
        raise NotBenchmarkJSON("not Google Benchmark JSON (no 'benchmarks' list)", path)
    if not isinstance(doc["benchmarks"], list):
        raise InputError(f"expected a list, got {_kind(doc['benchmarks'])}", path,
                         field="benchmarks")
    if not doc["benchmarks"]:
        raise InputError("no benchmarks (an empty list): nothing to compare", path,
                         field="benchmarks")
    ctx = _check_context(doc.get("context"), path)
    meta = ctx.get("tbd_metrics") or {}

    iters: dict[str, list[dict]] = {}
    aggs: dict[str, dict[str, dict]] = {}
    order: list[str] = []
    for i, row in enumerate(doc["benchmarks"]):
        key, _ = _check_row(row, i, path)
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

    bd = _check_records(doc.get("tbd_breakdown"), path, "tbd_breakdown", _BREAKDOWN_TEXT,
                        required=("benchmark", "layer"), flags=_BREAKDOWN_FLAGS)
    ds = _check_records(doc.get("tbd_dist_steps"), path, "tbd_dist_steps", ("name",),
                        required=("name",) + _DIST_REQUIRED, nonnegative=True,
                        lists={"grads": ("bytes",), "buckets": ()})
    return Run(path=path, context=ctx, benches=benches, breakdown=bd, metrics_meta=meta,
               dist_steps=ds)


def load_runs(paths: list[str], warn=None) -> list[Run]:
    """Files, or folders of files. In a folder, JSON files that are not benchmark runs (a
    peer's summary, a comparison) are skipped with a warning; a file that is not JSON, or a
    Google Benchmark file with a row the comparison cannot use, is an error there too (a gate
    never passes on data it could not read). A file named alone must be a run."""
    runs = []
    for p in paths:
        if os.path.isdir(p):
            try:
                names = sorted(os.listdir(p))
            except OSError as e:
                raise InputError(e.strerror or str(e), p) from None
            files = [os.path.join(p, f) for f in names if f.endswith(".json")]
            found = 0
            for f in files:
                try:
                    runs.append(load_run(f))
                    found += 1
                except NotBenchmarkJSON as e:
                    (warn or _warn)(f"skipped {e}")
            if not found:
                raise InputError("a folder without benchmark JSON files", p)
        else:
            runs.append(load_run(p))
    return runs


def _warn(msg: str) -> None:
    import sys  # noqa: PLC0415
    print(f"tbd_track: {msg}", file=sys.stderr)
