"""python3 -m peers.run: PyTorch training steps of tbd's models, written as Google Benchmark JSON
with tbd's row names and counter names, so that tbd_track and Google Benchmark's compare.py
read a peer's file like a tbd_bench file.

Run it from tools/ (PYTHONPATH=tools) under the interpreter that has the torch to measure;
`tools/tbd_track peer` makes that interpreter (a virtual environment per pinned PyTorch) and
runs this module in alternation with tbd_bench. Selected by tbd's own names:

  python3 -m peers.run --rows ResNet50/train/batch:4 Transformer/train/batch:8/len:32 \
      --mode compile --threads 2 --benchmark_out=peer.json
  python3 -m peers.run --benchmark_filter='^(ResNet50|Seq2Seq)/' --benchmark_list_tests

A row is one process's measurement of one model step: `--warmup` untimed steps (in compile mode
the first of them compiles), then --benchmark_repetitions repetitions, each of as many steps as
fill --benchmark_min_time seconds (at least one). Each repetition is one iteration row:
real_time and cpu_time per step (ms), `<x>_per_second` for each item the step processes (tbd's
counters: items_per_second, tokens_per_second, frames_per_second, critic_steps_per_second,
rois_per_second), peak_memory_bytes (below), cpu_utilization and params. A row that fails to
build, compile or run is an error row with the reason; the other rows still run.

Peak memory on the CPU is measured from the kernel's resident-set counters: the process's peak
resident set (VmHWM, reset through /proc/self/clear_refs after the warm-up) during the timed
steps, less its file-backed resident pages after them (RssFile + RssShmem: torch's libraries
and compiled kernels, which are code) and less its anonymous resident memory before the model
was built (RssAnon: the interpreter and torch's own state). What remains is the heap the model
needs at its peak: weights, gradients, optimizer state, activations, the batch and the
allocator's cached and fragmented blocks, comparable with tbd's peak_memory_bytes. `step_peak_growth_bytes` is the peak during one timed step over the resident
set just before it: what a step allocates beyond what it keeps.

Exit status: 0 every row ran, 1 a row is an error row, 2 bad arguments (no row selected, an
unknown model, a regex that does not compile) or the output could not be written.
"""
import argparse
import datetime as _dt
import json
import os
import platform
import re
import sys
import time

from . import MODULES, module
from .common import autocast_bf16, blas_info, identity
from track.files import write_atomic

# The rows run when neither --rows nor a tbd_bench list names them: each model at the batch
# docs/peers.md's framework table uses (the TBD paper's CPU-sized configurations).
DEFAULT_ROWS = (
    "ResNet50/train/batch:4",
    "InceptionV3/train/batch:4",
    "Transformer/train/batch:8/len:32",
    "Seq2Seq/train/batch:16/len:30",
    "DeepSpeech2/train/batch:2/frames:100",
    "WGAN/train/batch:4",
    "A3C/train/batch:5/actors:1",
    "FasterRCNN/train/batch:1",
    "GPT2/train/batch:4/len:64",  # llm.c's CPU trainer's B and T
    "Llama/train/batch:4/len:64/size:45",  # the small shape: the 1B needs 24 GiB before activations
)

METRICS = {
    "real_time": {"direction": "lower", "unit": "time_unit", "exact": False,
                  "description": "wall time per training step (host clock), the mean of the "
                                 "repetition's steps"},
    "cpu_time": {"direction": "lower", "unit": "time_unit", "exact": False,
                 "description": "the process's CPU time per step (all threads)"},
    "items_per_second": {"direction": "higher", "unit": "samples/s", "exact": False,
                         "description": "samples per second, as tbd_bench counts them"},
    "*_per_second": {"direction": "higher", "unit": "items/s", "exact": False,
                     "description": "the model's other items per second (tokens, frames, "
                                    "critic steps, RoIs), as tbd_bench counts them"},
    "peak_memory_bytes": {"direction": "lower", "unit": "bytes", "exact": False,
                          "description": "the model's peak heap: peak resident set of the timed "
                                         "steps less file-backed pages and the anonymous memory "
                                         "before the model was built"},
    "step_peak_growth_bytes": {"direction": "lower", "unit": "bytes", "exact": False,
                               "description": "peak resident set during one timed step minus "
                                              "the resident set just before it"},
    "cpu_utilization": {"direction": "info", "unit": "fraction", "exact": False,
                        "description": "process CPU time over wall time x threads"},
    "params": {"direction": "work", "unit": "parameters", "exact": True,
               "description": "the model's parameters (asserted equal to tbd's)"},
}


class RowError(Exception):
    """A row that cannot run; its message becomes the error row's."""


def _status_kib(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak():
    """Resets VmHWM to the current resident set (Linux 4.0 and later); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def error_text(e):
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    # torch.compile's errors put the reason on the first line, then pages of context.
    return f"{type(e).__name__}: {first}"[:400]


def parse_row(name):
    """(model, batch, params) for a tbd model row; RowError where the name is no model row."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from track.names import parse  # noqa: PLC0415 (tools/ on the path)
    n = parse(name)
    if n is None or n.family != "model":
        raise RowError(f"'{name}' is not a model row (<Model>/train/batch:<N>[/<key>:<value>])")
    if n.kind not in MODULES:
        raise RowError(f"no PyTorch peer for the model '{n.kind}' (peers: {', '.join(MODULES)})")
    if n.param("ranks") is not None:
        raise RowError(f"'{name}': data-parallel rows have no peer")
    return n.kind, n.batch, {k: v for k, v in n.params}


def make_wrap(torch, mode, math="fp32"):
    inner = identity if mode == "eager" else \
        (lambda m: torch.compile(m, backend="inductor", dynamic=False))
    return autocast_bf16(torch, inner) if math == "bf16" else inner


def measure(torch, name, args):
    """The iteration rows of one benchmark (or raises RowError / whatever the model raised)."""
    model, batch, params = parse_row(name)
    mod = module(model)
    torch.manual_seed(0)
    import gc  # noqa: PLC0415
    gc.collect()
    anon_before = _status_kib("RssAnon")
    s = mod.setup(batch, params=params, tiny=args.tiny, device="cpu",
                  wrap=make_wrap(torch, args.mode, args.math))
    # PARAMS is the default configuration's count; a module whose sizes come by argument says
    # the count for the row's (expected_params).
    want = mod.expected_params(params or {}) if hasattr(mod, "expected_params") else mod.PARAMS
    if not args.tiny and s["params"] != want:
        raise RowError(f"{model}: the peer has {s['params']:,} parameters, tbd {want:,}")
    step = s["step"]
    for _ in range(args.warmup):
        step()
    peak_ok = _reset_peak()
    rows, growth = [], 0
    for rep in range(args.repetitions):
        steps, wall, cpu = 0, 0.0, 0.0
        while steps == 0 or wall < args.min_time:
            before = _status_kib("VmRSS")
            step_reset = _reset_peak() if peak_ok else False
            c0, t0 = time.process_time(), time.perf_counter()
            step()
            wall += time.perf_counter() - t0
            cpu += time.process_time() - c0
            steps += 1
            hwm = _status_kib("VmHWM")
            if step_reset and hwm is not None and before is not None:
                growth = max(growth, hwm - before)
        per_step = wall / steps
        row = {"name": name, "run_name": name, "run_type": "iteration",
               "repetitions": args.repetitions, "repetition_index": rep, "threads": 1,
               "iterations": steps, "real_time": per_step * 1e3,
               "cpu_time": cpu / steps * 1e3, "time_unit": "ms",
               "cpu_utilization": cpu / wall / args.threads}
        for what, count in s["per_step"].items():
            row[f"{what}_per_second"] = count / per_step
        row["params"] = s["params"]
        rows.append(row)
    hwm, file_rss = _status_kib("VmHWM"), _status_kib("RssFile")
    shmem = _status_kib("RssShmem") or 0
    if peak_ok and None not in (hwm, file_rss, anon_before):
        for row in rows:
            row["peak_memory_bytes"] = hwm - file_rss - shmem - anon_before
            row["step_peak_growth_bytes"] = growth
    return rows, s.get("config", {})


def onednn_version(config_text):
    m = re.search(r"(?:oneDNN|MKL-DNN)[^\n]*?v(\d+\.\d+(?:\.\d+)?)", config_text)
    return m.group(1) if m else "unknown"


def context(torch, args, blas):
    cfg = torch.__config__.show()
    ctx = {
        "date": _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds"),
        "host_name": platform.node(),
        "executable": f"{sys.executable} -m peers.run",
        "num_cpus": os.cpu_count(),
        "library_build_type": "release",
        "framework": "PyTorch",
        "framework_version": torch.__version__,
        "torch_mode": args.mode,
        "compile": ("torch.compile(backend='inductor', dynamic=False) on each network the step "
                    "calls; loss, backward driver and optimizer eager" if args.mode == "compile"
                    else "none (eager)"),
        "peer_device": "cpu",
        "device": _cpu_name(),
        "math": args.math,
        "autocast": ("torch.autocast('cpu', dtype=torch.bfloat16) around each network's forward, "
                     "its outputs cast to f32 for the loss; backward and optimizer outside"
                     if args.math == "bf16" else "none"),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "threads": str(torch.get_num_threads()),
        "interop_threads": str(torch.get_num_interop_threads()),
        "blas": blas["kind"],
        "blas_detail": json.dumps(blas, sort_keys=True),
        "onednn_version": onednn_version(cfg),
        "mkldnn_enabled": str(torch.backends.mkldnn.is_available()).lower(),
        "torch_config": cfg,
        "denormals": args.denormals_state,
        "python": platform.python_version(),
        "env": json.dumps({k: v for k, v in sorted(os.environ.items())
                           if k.startswith(("MALLOC_", "OMP_", "GOMP_", "KMP_", "MKL_",
                                            "OPENBLAS_", "DNNL_", "ONEDNN_", "TORCHINDUCTOR_"))
                           or k in ("LD_PRELOAD", "LD_LIBRARY_PATH")}, sort_keys=True),
        "peak_memory_method": ("peak resident set of the timed steps (VmHWM, reset after the "
                               "warm-up) less file-backed pages (RssFile + RssShmem) and the "
                               "anonymous memory before the model was built (RssAnon)"),
        "timing": "host perf_counter per step; a repetition is the mean of its steps",
        "warmup_steps": str(args.warmup),
        "tbd_metrics": METRICS,
    }
    for k in ("fp32_precision",):
        v = getattr(getattr(torch.backends, "mkldnn", None), k, None)
        if isinstance(v, str):
            ctx["mkldnn_fp32_precision"] = v
    return ctx


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python3 -m peers.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", metavar="NAME", help="tbd row names to run")
    ap.add_argument("--benchmark_filter", default=None,
                    help="regex (Google Benchmark's semantics: search) over the rows")
    ap.add_argument("--benchmark_list_tests", action="store_true")
    ap.add_argument("--benchmark_out", default=None)
    ap.add_argument("--benchmark_out_format", default="json", choices=("json",))
    ap.add_argument("--benchmark_repetitions", dest="repetitions", type=int, default=3)
    ap.add_argument("--benchmark_min_time", dest="min_time", type=float, default=1.0,
                    help="seconds per repetition (at least one step); a trailing 's' is allowed")
    ap.add_argument("--warmup", type=int, default=None,
                    help="untimed steps first (default 2 eager, 3 compile)")
    ap.add_argument("--mode", choices=("eager", "compile"), default="eager")
    ap.add_argument("--math", choices=("fp32", "bf16"), default="fp32",
                    help="fp32 (strict) or bf16: PyTorch's CPU autocast, as tbd_bench "
                    "--tbd_math=bf16")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--denormals", choices=("flush", "keep"), default="flush",
                    help="as tbd_bench --tbd_denormals (default flush: FTZ+DAZ)")
    ap.add_argument("--profile", metavar="FILE",
                    help="instead of timing: one row's step layer by layer (torch.profiler, "
                    "eager), as JSON rows shaped like tbd_bench --tbd_breakdown's")
    ap.add_argument("--tiny", action="store_true",
                    help="tbd's tiny configurations (models/*.cpp: <model>_tiny()), for functional "
                    "checks; their counts are checked by tests/track/peers_test.py")
    argv = [re.sub(r"^(--benchmark_min_time=[0-9.eE+-]+)s$", r"\1", a) for a in argv]
    a = ap.parse_args(argv)
    if a.repetitions < 1:
        ap.error(f"--benchmark_repetitions={a.repetitions}: must be at least 1")
    if a.min_time < 0:
        ap.error(f"--benchmark_min_time={a.min_time}: must be >= 0")
    if a.threads < 1:
        ap.error(f"--threads={a.threads}: must be at least 1")
    if a.warmup is None:
        a.warmup = 3 if a.mode == "compile" else 2
    if a.warmup < 0:
        ap.error(f"--warmup={a.warmup}: must be >= 0")
    rows = list(a.rows or DEFAULT_ROWS)
    if a.benchmark_filter is not None:
        try:
            rx = re.compile(a.benchmark_filter)
        except re.error as e:
            ap.error(f"--benchmark_filter={a.benchmark_filter!r} is not a regex: {e}")
        rows = [r for r in rows if rx.search(r)]
    if not rows:
        ap.error("no row selected (--rows and --benchmark_filter leave none)")
    a.row_names = rows
    if a.profile and (len(rows) != 1 or a.mode != "eager"):
        ap.error("--profile: one row (--rows NAME), in eager mode (torch.compile fuses across "
                 "layers)")
    return a


def profile_row(torch, a, blas):
    """--profile: the row's step layer by layer, written to a.profile."""
    from .profile import profile  # noqa: PLC0415
    name = a.row_names[0]
    try:
        model, batch, params = parse_row(name)
        mod = module(model)
        torch.manual_seed(0)
        s = mod.setup(batch, params=params, tiny=a.tiny, device="cpu", wrap=identity)
        for _ in range(a.warmup):
            s["step"]()
        doc = profile(torch, s["step"], s["nets"], steps=max(1, a.repetitions))
    except Exception as e:
        print(f"peers.run: --profile {name}: ERROR {error_text(e)}", file=sys.stderr)
        return 1
    doc.update(benchmark=name, context=context(torch, a, blas))
    try:
        write_atomic(a.profile, json.dumps(doc, indent=1, default=str) + "\n")
    except OSError as e:
        print(f"peers.run: cannot write {a.profile}: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.benchmark_list_tests:
        print("\n".join(a.row_names))
        return 0
    import torch  # noqa: PLC0415 (listing needs no torch)
    torch.set_num_threads(a.threads)
    torch.set_float32_matmul_precision("highest")
    mk = getattr(torch.backends, "mkldnn", None)
    if mk is not None and isinstance(getattr(mk, "fp32_precision", None), str):
        mk.fp32_precision = "ieee"  # strict FP32 in oneDNN too (no implicit bf16/tf32)
    flushed = torch.set_flush_denormal(a.denormals == "flush")
    a.denormals_state = "flushed to zero" if flushed and a.denormals == "flush" else "kept"
    blas = blas_info(torch, a.threads)
    if a.profile:
        return profile_row(torch, a, blas)
    benchmarks, configs, failed = [], {}, 0
    for name in a.row_names:
        t0 = time.monotonic()
        try:
            rows, cfg = measure(torch, name, a)
            benchmarks += rows
            configs[name] = cfg
            print(f"peers.run: {name} ({a.mode}): {rows[len(rows) // 2]['real_time']:.1f} ms a "
                  f"step, {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        except Exception as e:  # one failing row is an error row; the others still run
            failed += 1
            benchmarks.append({"name": name, "run_name": name, "run_type": "iteration",
                               "repetitions": a.repetitions, "repetition_index": 0,
                               "threads": 1, "iterations": 0, "real_time": 0, "cpu_time": 0,
                               "time_unit": "ms", "error_occurred": True,
                               "error_message": f"{a.mode}: {error_text(e)}"})
            print(f"peers.run: {name} ({a.mode}): ERROR {error_text(e)}", file=sys.stderr,
                  flush=True)
    doc = {"context": context(torch, a, blas), "benchmarks": benchmarks,
           "peer_configs": configs}
    text = json.dumps(doc, indent=1, default=str) + "\n"
    if a.benchmark_out:
        try:
            write_atomic(a.benchmark_out, text)
        except OSError as e:
            print(f"peers.run: cannot write {a.benchmark_out}: {e}", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
