"""The tracker's configuration: thresholds, per-benchmark rules, acknowledged regressions.

A TOML file (read with the standard library's tomllib), e.g. tools/track/example.toml:

    [defaults]
    alpha = 0.05                 # significance level after Benjamini-Hochberg
    threshold = 0.05             # minimum effect: 5 % (log-symmetric: x1.05 or /1.05)
    memory_tolerance = 0.0       # relative tolerance of exact (memory) metrics
    memory_tolerance_bytes = 0   # absolute tolerance of exact metrics
    refuse = ["device", "backend", "math"]   # context keys that must match

    [[rule]]                     # every matching rule applies, later ones override earlier
    benchmark = "^Gemm/"         # regex searched in the benchmark name
    metric = "real_time|items_per_second"   # regex matched against the whole metric name
    threshold = 0.10
    # direction = "info"         # override: lower | higher | work | info
    # tolerance = 0.01           # exact metrics: relative tolerance
    # tolerance_bytes = 4096

    [[acknowledged]]             # a known regression: reported, does not fail the gate
    benchmark = "^ResNet50/train/batch:32$"
    metric = "mem_workspace"
    reason = "brgconv keeps a larger scratchpad (measured +3 MiB)"
    expires = "2027-01-31"       # after this date it fails again
"""

from __future__ import annotations

import datetime as _dt
import re
import tomllib
from dataclasses import dataclass, field

from .inputs import InputError, compile_regex, finite_number, read_text
from .metrics import DIRECTIONS


@dataclass
class Rule:
    benchmark: re.Pattern
    metric: re.Pattern
    threshold: float | None = None
    direction: str | None = None
    tolerance: float | None = None
    tolerance_bytes: float | None = None


@dataclass
class Ack:
    benchmark: re.Pattern
    metric: re.Pattern
    reason: str
    expires: _dt.date | None


@dataclass
class Settings:
    """Resolved thresholds for one (benchmark, metric)."""

    threshold: float
    direction: str | None
    tolerance: float
    tolerance_bytes: float


@dataclass
class Config:
    alpha: float = 0.05
    threshold: float = 0.05
    memory_tolerance: float = 0.0
    memory_tolerance_bytes: float = 0.0
    refuse: list[str] = field(default_factory=lambda: ["device", "backend", "math"])
    rules: list[Rule] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    source: str = "built-in defaults"

    def settings(self, bench: str, metric: str) -> Settings:
        s = Settings(self.threshold, None, self.memory_tolerance, self.memory_tolerance_bytes)
        for r in self.rules:
            if r.benchmark.search(bench) and r.metric.fullmatch(metric):
                if r.threshold is not None:
                    s.threshold = r.threshold
                if r.direction is not None:
                    s.direction = r.direction
                if r.tolerance is not None:
                    s.tolerance = r.tolerance
                if r.tolerance_bytes is not None:
                    s.tolerance_bytes = r.tolerance_bytes
        return s

    def acknowledgement(self, bench: str, metric: str, today: _dt.date):
        """(ack, expired) for the first acknowledgement matching, else (None, False)."""
        for a in self.acks:
            if a.benchmark.search(bench) and a.metric.fullmatch(metric):
                return a, a.expires is not None and today > a.expires
        return None, False


def _fraction(v, path: str, row: str, key: str) -> float:
    """A threshold or tolerance: a finite number >= 0 (TOML has nan and inf; they never pass)."""
    return finite_number(v, file=path, row=row, field=key, minimum=0)


def _table(v, path: str, row: str) -> dict:
    if not isinstance(v, dict):
        raise InputError(f"expected a table, got {v!r}", path, row)
    return v


def _tables(v, path: str, name: str) -> list[dict]:
    """An array of tables ([[rule]], [[acknowledged]])."""
    if not isinstance(v, list):
        raise InputError(f"expected an array of tables ([[{name}]]), got {v!r}", path, name)
    return [_table(x, path, f"{name} {i + 1}") for i, x in enumerate(v)]


def _unknown(d: dict, known: set, path: str, row: str) -> None:
    unknown = set(d) - known
    if unknown:
        raise InputError(f"unknown key(s) {', '.join(sorted(unknown))} (known: "
                         f"{', '.join(sorted(known))})", path, row)


def load_config(path: str | None) -> Config:
    """The TOML file, checked: InputError (exit 2) naming the file, the table and the key."""
    cfg = Config()
    if not path:
        return cfg
    text = read_text(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"not TOML: {e}", path) from None
    except RecursionError:
        raise InputError("not TOML this reader can take (nested too deeply)", path) from None
    except ValueError as e:  # an integer beyond int()'s 4300 digits
        raise InputError(f"not TOML this reader can take ({e})", path) from None
    cfg.source = path
    _unknown(doc, {"defaults", "rule", "acknowledged"}, path, "top level")
    d = _table(doc.get("defaults", {}), path, "defaults")
    for k, v in d.items():
        if k == "alpha":
            cfg.alpha = _fraction(v, path, "defaults", k)
            if not 0 < cfg.alpha < 1:
                raise InputError(f"must be between 0 and 1, got {v!r}", path, "defaults", k)
        elif k == "threshold":
            cfg.threshold = _fraction(v, path, "defaults", k)
        elif k == "memory_tolerance":
            cfg.memory_tolerance = _fraction(v, path, "defaults", k)
        elif k == "memory_tolerance_bytes":
            cfg.memory_tolerance_bytes = _fraction(v, path, "defaults", k)
        elif k == "refuse":
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise InputError(f"expected a list of context keys, got {v!r}", path,
                                 "defaults", k)
            cfg.refuse = list(v)
        else:
            raise InputError("unknown setting (known: alpha, threshold, memory_tolerance, "
                             "memory_tolerance_bytes, refuse)", path, "defaults", k)
    for i, r in enumerate(_tables(doc.get("rule", []), path, "rule")):
        where = f"rule {i + 1}"
        _unknown(r, {"benchmark", "metric", "threshold", "direction", "tolerance",
                     "tolerance_bytes"}, path, where)
        rule = Rule(compile_regex(r.get("benchmark", ".*"), file=path, row=where,
                                  field="benchmark"),
                    compile_regex(r.get("metric", ".*"), file=path, row=where, field="metric"))
        if "threshold" in r:
            rule.threshold = _fraction(r["threshold"], path, where, "threshold")
        if "direction" in r:
            if r["direction"] not in DIRECTIONS:
                raise InputError(f"expected one of {', '.join(DIRECTIONS)}, got "
                                 f"{r['direction']!r}", path, where, "direction")
            rule.direction = r["direction"]
        if "tolerance" in r:
            rule.tolerance = _fraction(r["tolerance"], path, where, "tolerance")
        if "tolerance_bytes" in r:
            rule.tolerance_bytes = _fraction(r["tolerance_bytes"], path, where,
                                             "tolerance_bytes")
        cfg.rules.append(rule)
    for i, a in enumerate(_tables(doc.get("acknowledged", []), path, "acknowledged")):
        where = f"acknowledged {i + 1}"
        _unknown(a, {"benchmark", "metric", "reason", "expires"}, path, where)
        if not isinstance(a.get("reason"), str) or not a["reason"].strip():
            raise InputError("a reason (text) is required", path, where, "reason")
        exp = a.get("expires")
        if isinstance(exp, str):
            try:
                exp = _dt.date.fromisoformat(exp)
            except ValueError:
                raise InputError(f"not a date (YYYY-MM-DD): {exp!r}", path, where,
                                 "expires") from None
        elif isinstance(exp, _dt.datetime) or (exp is not None and
                                                not isinstance(exp, _dt.date)):
            # TOML's date-time is a datetime (a date too, in Python); a day is what expires.
            raise InputError(f"not a date (YYYY-MM-DD): {exp!r}", path, where, "expires")
        cfg.acks.append(Ack(compile_regex(a.get("benchmark", ".*"), file=path, row=where,
                                          field="benchmark"),
                            compile_regex(a.get("metric", ".*"), file=path, row=where,
                                          field="metric"),
                            a["reason"], exp))
    return cfg
