"""What each metric means for a comparison: its direction, unit and whether it is exact.

Directions:
  lower / higher  which way is better; gated
  work            the amount of work (flop, bytes); must be equal for two rows to be comparable
  info            reported, never gated

`exact` metrics are deterministic (tbd's memory peaks): compared value against value within a
tolerance, not by a statistical test.

Where a metric's description comes from, in order: the file's own `context.tbd_metrics` (tbd_bench
writes one entry per metric it can emit, so a new counter is never silently ungated), a rule in
the config file (direction override), the table below for tbd files written before
`tbd_metrics` existed, and Google Benchmark's conventions for anything else. A metric known by
none of them is reported as `info` and the output says it was not gated.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

DIRECTIONS = ("lower", "higher", "work", "info")


@dataclass(frozen=True)
class MetricInfo:
    name: str
    direction: str
    unit: str = ""
    exact: bool = False
    description: str = ""
    source: str = "default"   # file | config | tbd-builtin | gbench | unknown
    relative_to: tuple = ()   # context keys of the peak a utilization divides by

    @property
    def gated(self) -> bool:
        return self.direction in ("lower", "higher")


# tbd_bench's counters as documented in results/README.md, for files that predate the
# context's own `tbd_metrics`.
_TBD_BUILTIN = {
    "real_time": ("lower", "s", False, "wall time per iteration"),
    "cpu_time": ("lower", "s", False, "main-thread CPU time per iteration"),
    "items_per_second": ("higher", "samples/s", False, "samples per second"),
    "*_per_second": ("higher", "items/s", False, "a model's extra items per second"),
    "flop": ("work", "FLOP", False, "analytic FLOPs per iteration"),
    "flops": ("higher", "FLOP/s", False, "achieved FLOP/s"),
    "fp32_utilization": ("higher", "fraction", False, "FP32 FLOP/s over peak"),
    "device_fp32_flop": ("info", "FLOP", False, "FP32 FLOPs executed on the GPU (CUPTI)"),
    "tensor_utilization": ("higher", "fraction", False, "TF32 tensor work over its peak"),
    "bf16_utilization": ("higher", "fraction", False, "FLOP/s over the bf16 peak (bf16 math)"),
    "gpu_utilization": ("higher", "fraction", False, "kernel-busy fraction"),
    "cpu_utilization": ("info", "fraction", False, "process CPU time over wall x threads"),
    "peak_memory_bytes": ("lower", "bytes", True, "peak tracked memory"),
    "mem_*": ("lower", "bytes", True, "peak of one memory category"),
    "breakdown_coverage": ("info", "fraction", False, "breakdown rows over the step"),
    "bytes": ("work", "bytes", False, "analytic bytes moved per iteration"),
    "bytes_per_second": ("higher", "bytes/s", False, "achieved (lower-bound) bandwidth"),
    "arithmetic_intensity": ("work", "FLOP/byte", False, "flop / bytes"),
    "roofline_utilization": ("higher", "fraction", False, "achieved over the roofline"),
    "bandwidth_utilization": ("higher", "fraction", False, "bytes/s over peak bandwidth"),
}

# Google Benchmark's own conventions.
_GBENCH = {
    "real_time": ("lower", "s", False, "wall time per iteration"),
    "cpu_time": ("lower", "s", False, "CPU time per iteration"),
    "items_per_second": ("higher", "items/s", False, "SetItemsProcessed rate"),
    "bytes_per_second": ("higher", "bytes/s", False, "SetBytesProcessed rate"),
    "*_per_second": ("higher", "1/s", False, "a rate"),
    "max_bytes_used": ("lower", "bytes", True, "memory manager: peak bytes"),
    "allocs_per_iter": ("lower", "1", True, "memory manager: allocations per iteration"),
    "total_allocated_bytes": ("lower", "bytes", True, "memory manager: bytes allocated"),
    "net_heap_growth": ("lower", "bytes", True, "memory manager: heap growth"),
}


def _lookup(table: dict, metric: str):
    if metric in table:
        return table[metric]
    for pat, v in table.items():
        if "*" in pat and fnmatch.fnmatchcase(metric, pat):
            return v
    return None


class MetricTable:
    """Resolves a metric name to its MetricInfo for one comparison."""

    def __init__(self, file_meta: list[dict], is_tbd: bool):
        self.file_meta = {}
        for m in file_meta:
            for k, v in (m or {}).items():
                if isinstance(v, dict) and v.get("direction") in DIRECTIONS:
                    self.file_meta.setdefault(k, v)
        self.is_tbd = is_tbd
        self._cache: dict[str, MetricInfo] = {}

    def get(self, metric: str) -> MetricInfo:
        if metric in self._cache:
            return self._cache[metric]
        info = None
        v = _lookup(self.file_meta, metric)
        if v is not None:
            rel = v.get("relative_to") or ()
            info = MetricInfo(metric, v["direction"], str(v.get("unit", "")),
                              bool(v.get("exact", False)), str(v.get("description", "")), "file",
                              tuple(rel) if isinstance(rel, list) else ())
        if info is None and self.is_tbd:
            t = _lookup(_TBD_BUILTIN, metric)
            if t is not None:
                info = MetricInfo(metric, *t, source="tbd-builtin")
        if info is None:
            t = _lookup(_GBENCH, metric)
            if t is not None:
                info = MetricInfo(metric, *t, source="gbench")
        if info is None:
            info = MetricInfo(metric, "info", "", False,
                              "no direction known: reported, not gated", "unknown")
        if metric in TIME_UNIT_METRICS:
            info = MetricInfo(info.name, info.direction, "s", info.exact, info.description,
                              info.source, info.relative_to)
        self._cache[metric] = info
        return info


TIME_UNIT_METRICS = ("real_time", "cpu_time")
