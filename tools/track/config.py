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

from .gbjson import InputError
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


def _regex(v, where: str) -> re.Pattern:
    if not isinstance(v, str):
        raise InputError(f"{where}: expected a regular expression string, got {v!r}")
    try:
        return re.compile(v)
    except re.error as e:
        raise InputError(f"{where}: bad regular expression {v!r}: {e}") from None


def _fraction(v, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise InputError(f"{where}: expected a non-negative number, got {v!r}")
    return float(v)


def load_config(path: str | None) -> Config:
    cfg = Config()
    if not path:
        return cfg
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise InputError(f"config {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"config {path}: not TOML: {e}") from None
    cfg.source = path
    known = {"defaults", "rule", "acknowledged"}
    for k in doc:
        if k not in known:
            raise InputError(f"config {path}: unknown section [{k}] (known: {', '.join(sorted(known))})")
    d = doc.get("defaults", {})
    for k, v in d.items():
        where = f"config {path}: defaults.{k}"
        if k == "alpha":
            cfg.alpha = _fraction(v, where)
            if not 0 < cfg.alpha < 1:
                raise InputError(f"{where}: must be between 0 and 1")
        elif k == "threshold":
            cfg.threshold = _fraction(v, where)
        elif k == "memory_tolerance":
            cfg.memory_tolerance = _fraction(v, where)
        elif k == "memory_tolerance_bytes":
            cfg.memory_tolerance_bytes = _fraction(v, where)
        elif k == "refuse":
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise InputError(f"{where}: expected a list of context keys")
            cfg.refuse = list(v)
        else:
            raise InputError(f"{where}: unknown setting")
    for i, r in enumerate(doc.get("rule", [])):
        where = f"config {path}: rule {i + 1}"
        unknown = set(r) - {"benchmark", "metric", "threshold", "direction", "tolerance",
                            "tolerance_bytes"}
        if unknown:
            raise InputError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        rule = Rule(_regex(r.get("benchmark", ".*"), where + ".benchmark"),
                    _regex(r.get("metric", ".*"), where + ".metric"))
        if "threshold" in r:
            rule.threshold = _fraction(r["threshold"], where + ".threshold")
        if "direction" in r:
            if r["direction"] not in DIRECTIONS:
                raise InputError(f"{where}.direction: one of {', '.join(DIRECTIONS)}")
            rule.direction = r["direction"]
        if "tolerance" in r:
            rule.tolerance = _fraction(r["tolerance"], where + ".tolerance")
        if "tolerance_bytes" in r:
            rule.tolerance_bytes = _fraction(r["tolerance_bytes"], where + ".tolerance_bytes")
        cfg.rules.append(rule)
    for i, a in enumerate(doc.get("acknowledged", [])):
        where = f"config {path}: acknowledged {i + 1}"
        unknown = set(a) - {"benchmark", "metric", "reason", "expires"}
        if unknown:
            raise InputError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        if not a.get("reason"):
            raise InputError(f"{where}: a reason is required")
        exp = a.get("expires")
        if isinstance(exp, str):
            try:
                exp = _dt.date.fromisoformat(exp)
            except ValueError:
                raise InputError(f"{where}.expires: not a date (YYYY-MM-DD): {exp!r}") from None
        elif exp is not None and not isinstance(exp, _dt.date):
            raise InputError(f"{where}.expires: not a date: {exp!r}")
        cfg.acks.append(Ack(_regex(a.get("benchmark", ".*"), where + ".benchmark"),
                            _regex(a.get("metric", ".*"), where + ".metric"),
                            str(a["reason"]), exp))
    return cfg
