"""Shared helpers of the tracker's tests: synthetic Google Benchmark / tbd_bench JSON files."""

import json
import os
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOLS = os.path.join(ROOT, "tools")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)
TBD_TRACK = os.path.join(TOOLS, "tbd_track")
RESULTS = os.path.join(ROOT, "results")
# Committed tbd_bench results: layer rows (1 repetition), the same convs aggregates-only
# (5 repetitions), model rows with the per-layer breakdown.
GEMM_CONV = os.path.join(RESULTS, "e55b00a5d876-20261202T160435Z-cpu-gemm-conv3x3-fwd-batch32.json")
CONV_CL = os.path.join(RESULTS,
                       "17138fab2939-dirty-20261202T174629Z-cpu-conv3x3-channels-last-5reps.json")
MODELS = os.path.join(RESULTS,
                      "e55b00a5d876-dirty-20261202T160735Z-cpu-resnet50-transformer-breakdown.json")

TBD_CONTEXT = {
    "date": "2026-12-03T10:00:00+00:00", "host_name": "vm", "num_cpus": 2, "mhz_per_cpu": 2096,
    "backend": "cpu", "device": "AMD EPYC", "threads": "2", "math": "fp32",
    "build_type": "Release", "onednn_version": "2.6.3", "onednn_isa": "avx512_core_bf16",
    "peak_fp32_flops": "4.3e+11", "git_commit": "a" * 40, "git_dirty": "false",
    "library_build_type": "release",
}


def row(name, real, unit="ms", cpu=None, rep=0, reps=1, **counters):
    r = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": reps,
         "repetition_index": rep, "threads": 1, "iterations": 10, "real_time": real,
         "cpu_time": real if cpu is None else cpu, "time_unit": unit}
    r.update(counters)
    return r


def error_row(name, message="out of memory: needs 9.00 GiB, have 2.00 GiB"):
    return {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
            "repetition_index": 0, "threads": 1, "iterations": 0, "real_time": 0,
            "cpu_time": 0, "time_unit": "ms", "error_occurred": True,
            "error_message": message}


def reps(name, values, unit="ms", **counters):
    return [row(name, v, unit, rep=i, reps=len(values), **counters) for i, v in enumerate(values)]


def doc(rows, context=None, breakdown=None, tbd=True):
    ctx = dict(TBD_CONTEXT) if tbd else {"date": "2026-12-03T10:00:00+00:00",
                                         "host_name": "box", "num_cpus": 8}
    ctx.update(context or {})
    d = {"context": ctx, "benchmarks": rows}
    if breakdown is not None:
        d["tbd_breakdown"] = breakdown
    return d


class TempFiles:
    """Writes JSON documents into a temporary folder."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tbd_track_test.")

    def write(self, name, document):
        p = os.path.join(self.dir, name)
        with open(p, "w", encoding="utf-8") as f:
            if isinstance(document, str):
                f.write(document)
            else:
                json.dump(document, f)
        return p
