"""peer: tbd against PyTorch on the same models, alternated, in tbd's own JSON.

  tools/tbd_track peer --benchmark_filter='^(ResNet50|Transformer)/'
  tools/tbd_track peer --rows Seq2Seq/train/batch:16/len:30 --modes eager --rounds 5
  tools/tbd_track peer --torch=debian --no-tbd

The PyTorch side runs tools/peers (one module per model: the same network, optimizer,
hyperparameters, inputs and loss as tbd's) under an interpreter made for the pinned version: a
virtual environment under ~/.cache/tbd-peers/torch-<version> (TBD_PEERS_CACHE moves it) with
torch and torchvision from PyPI, made on first use; `--torch=debian` takes Debian's
python3-torch (1.13) instead. Rows are tbd's names, selected by --rows and --benchmark_filter
(Google Benchmark's semantics) from peers.run's default rows, each model at the batch of the
docs/peers.md's framework table. Each round runs, for every row, one tbd_bench process and one peer
process per mode (eager: plain PyTorch; compile: torch.compile with inductor), in an order that
rotates from round to round, so every side sees the same spells of the machine; each process
does --repetitions repetitions of at least --min-time seconds. The files are Google Benchmark
JSON (the peer's carry tbd's row and counter names); the table printed last has, per row, the
rate on each side, tbd's rate over each peer's with a confidence interval, and peak memory.
Not a gate: the exit status is 0 when the table was made, 2 on bad input (1 is never used).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

from . import frameworks as fw
from .gbjson import InputError, load_run
from .inputs import arg_number, arg_output_dir, arg_output_file, arg_regex, read_json
from .names import parse

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TOOLS)
# The pinned PyTorch of the side-by-side and the torchvision released with it.
PINS = {"2.15.0": "0.29.2"}
DEFAULT_TORCH = "2.15.0"
DEBIAN_OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-openmp"


def add_parser(sub) -> None:
    p = sub.add_parser("peer", help="tbd against PyTorch (eager, torch.compile) on the same "
                       "rows, alternated; prints the side-by-side table", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--torch", default=DEFAULT_TORCH,
                   help=f"PyTorch version from PyPI ({', '.join(PINS)} pinned with its "
                   "torchvision), or 'debian' for Debian's python3-torch (default "
                   f"{DEFAULT_TORCH})")
    p.add_argument("--torchvision", help="torchvision version for an unpinned --torch")
    p.add_argument("--modes", default="eager,compile",
                   help="peer modes, comma-separated: eager, compile (default both)")
    p.add_argument("--math", choices=("fp32", "bf16"), default="fp32",
                   help="both sides' math: fp32, or bf16 (tbd_bench --tbd_math=bf16 against "
                   "PyTorch's CPU autocast)")
    p.add_argument("--rows", nargs="+", metavar="NAME", help="tbd row names")
    p.add_argument("--benchmark_filter", "--bench-filter", dest="bench_filter", type=arg_regex,
                   help="regex over the rows (default: every default row)")
    p.add_argument("--tbd", help="tbd_bench binary (default build/release/tbd_bench)")
    p.add_argument("--no-tbd", action="store_true", help="run the peer side only")
    p.add_argument("--rounds", type=arg_number(int, low=1), default=3,
                   help="processes per side and row (3)")
    p.add_argument("--repetitions", type=arg_number(int, low=1), default=3,
                   help="repetitions per process (3)")
    p.add_argument("--min-time", type=arg_number(low=0), default=1.0,
                   help="seconds per repetition, at least one step (1)")
    p.add_argument("--threads", type=arg_number(int, low=1), default=os.cpu_count() or 1,
                   help="threads on both sides (default: every core)")
    p.add_argument("--timeout", type=arg_number(low=0, open_low=True), default=3600,
                   help="seconds per process (3600)")
    p.add_argument("--out-dir", type=arg_output_dir,
                   help="folder for the files and frameworks.json (default "
                   "~/.cache/tbd-peers/runs/<UTC time>)")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("--output", "-o", type=arg_output_file,
                   help="also write the table here (atomically)")
    p.add_argument("--breakdown", action="store_true",
                   help="one row's step layer by layer on both sides instead: tbd_bench "
                   "--tbd_breakdown against torch.profiler (eager), aligned by layer and kind")
    p.add_argument("--dry-run", action="store_true",
                   help="print the processes it would run, and run none")
    p.set_defaults(func=run_peer)


def cache_root() -> str:
    return os.environ.get("TBD_PEERS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "tbd-peers")


def _missing_debs(pkgs: list[str]) -> list[str]:
    if not shutil.which("dpkg-query"):
        return []
    out = []
    for p in pkgs:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
                           text=True)
        if "install ok installed" not in r.stdout:
            out.append(p)
    return out


def ensure_debs(pkgs: list[str], why: str) -> None:
    missing = _missing_debs(pkgs)
    if not missing:
        return
    if os.geteuid() != 0:
        raise InputError(f"{why} needs the Debian packages {' '.join(missing)}: run as root, or "
                         f"have them installed (apt-get install {' '.join(missing)})")
    print(f"tbd_track peer: installing {' '.join(missing)} ({why})", file=sys.stderr,
          flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing):
        if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode != 0:
            raise InputError(f"'{' '.join(cmd)}' failed")


def check_torch(spec: str, torchvision: str | None) -> str | None:
    """The torchvision that goes with --torch=spec (None for Debian's); InputError if unusable."""
    if spec == "debian":
        return None
    if not re.fullmatch(r"\d+\.\d+\.\d+", spec):
        raise InputError(f"--torch={spec}: a version such as {DEFAULT_TORCH}, or 'debian'")
    tv = torchvision or PINS.get(spec)
    if not tv:
        raise InputError(f"--torch={spec} is not pinned ({', '.join(PINS)} are): say which "
                         "torchvision goes with it (--torchvision)")
    return tv


def peer_python(spec: str, torchvision: str | None, modes: list[str]) -> tuple[str, dict, str]:
    """(interpreter, environment additions, description) of the peer side, made if need be."""
    if spec == "debian":
        ensure_debs(["python3-torch", "python3-torchvision", "libopenblas0-openmp"],
                    "--torch=debian")
        env = {}
        if os.path.isdir(DEBIAN_OPENBLAS):
            # The OpenMP OpenBLAS shares torch's thread pool; the pthreads build's spinning
            # threads fight torch's for the cores (a Transformer step took 1.8-5 s with it
            # against 0.4 s at 2 threads).
            env["LD_LIBRARY_PATH"] = DEBIAN_OPENBLAS
        return "/usr/bin/python3", env, "Debian's python3-torch"
    tv = check_torch(spec, torchvision)
    venv = os.path.join(cache_root(), f"torch-{spec}")
    py = os.path.join(venv, "bin", "python")
    marker = os.path.join(venv, ".tbd-peer.json")
    want = {"torch": spec, "torchvision": tv}
    # torch.compile's kernel cache lives with the environment, not in the /tmp folder every
    # PyTorch of the user shares (a stale shared entry failed to load here: "undefined symbol
    # Sleef_tanhf16_u10"); a TORCHINDUCTOR_CACHE_DIR the user set wins.
    env = {} if os.environ.get("TORCHINDUCTOR_CACHE_DIR") else \
        {"TORCHINDUCTOR_CACHE_DIR": os.path.join(venv, "inductor-cache")}
    try:
        with open(marker, encoding="utf-8") as f:
            if json.load(f) == want and os.access(py, os.X_OK):
                return py, env, f"PyPI torch {spec}, torchvision {tv} in {venv}"
    except (OSError, ValueError):
        pass
    debs = ["python3-venv"] + (["python3-dev", "g++"] if "compile" in modes else [])
    ensure_debs(debs, "the PyTorch peer's virtual environment (and torch.compile's C++ "
                "kernels)")
    print(f"tbd_track peer: making {venv} (torch=={spec}, torchvision=={tv} from PyPI; "
          "a few GB, once)", file=sys.stderr, flush=True)
    base = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    steps = [[base, "-m", "venv", "--clear", venv],
             [py, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar",
              "off", f"torch=={spec}", f"torchvision=={tv}"]]
    for cmd in steps:
        r = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr)
        if r.returncode != 0:
            raise InputError(f"'{' '.join(cmd)}' failed (exit {r.returncode})")
    r = subprocess.run([py, "-c", "import torch, torchvision; print(torch.__version__)"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise InputError(f"{venv}: torch does not import: {r.stderr.strip()[-400:]}")
    with open(marker, "w", encoding="utf-8") as f:
        json.dump(want, f)
    return py, env, f"PyPI torch {spec}, torchvision {tv} in {venv}"


def tbd_row_args(name: str) -> list[str]:
    """tbd_bench's flags that make exactly row `name`: its filter, and the name's parameters
    (len: through --tbd_seq_len, the others through --tbd_model_args)."""
    n = parse(name)
    args = [f"--benchmark_filter=^{re.escape(n.str())}$"]
    other = [(k, v) for k, v in n.params if k != "len"]
    if n.param("len") is not None:
        args.append(f"--tbd_seq_len={n.param('len')}")
    if other:
        args.append("--tbd_model_args=" + ",".join(f"{k}:{v}" for k, v in other))
    return args


def select_rows(args) -> list[str]:
    sys.path.insert(0, TOOLS)
    from peers import MODULES  # noqa: PLC0415 (no torch imported)
    from peers.run import DEFAULT_ROWS  # noqa: PLC0415
    rows = list(args.rows or DEFAULT_ROWS)
    for r in rows:
        n = parse(r)
        if n is None or n.family != "model":
            raise InputError(f"--rows: '{r}' is not a model row (<Model>/train/batch:<N>"
                             "[/<key>:<value>...])")
        if n.kind not in MODULES:
            raise InputError(f"--rows: no PyTorch peer for '{n.kind}' (peers: "
                             f"{', '.join(MODULES)})")
    if args.bench_filter:  # a Python regex: checked by argparse (arg_regex)
        rx = re.compile(args.bench_filter)
        rows = [r for r in rows if rx.search(r)]
    if not rows:
        raise InputError("no row selected (--rows and --benchmark_filter leave none)")
    return rows


def schedule(rows: list[str], sides: list[str], rounds: int) -> list[tuple[int, str, str]]:
    """(round, row, side) in run order: round r runs every row with its sides rotated by r."""
    out = []
    for r in range(rounds):
        for row in rows:
            k = r % len(sides)
            for side in sides[k:] + sides[:k]:
                out.append((r + 1, row, side))
    return out


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def _error_file(path: str, name: str, side: str, message: str) -> None:
    """A Google Benchmark file with one error row, for a process that wrote none."""
    ctx = {"framework": "PyTorch", "torch_mode": side} if side != "tbd" else {}
    doc = {"context": ctx, "benchmarks": [{
        "name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
        "repetition_index": 0, "threads": 1, "iterations": 0, "real_time": 0, "cpu_time": 0,
        "time_unit": "ms", "error_occurred": True, "error_message": message}]}
    from .cli import write_atomic  # noqa: PLC0415
    write_atomic(path, json.dumps(doc, indent=1) + "\n")


def run_one(cmd: list[str], env: dict, out: str, name: str, side: str, timeout: float,
            cwd: str | None = None) -> tuple[float, str]:
    """Runs one process; where it left no file, an error file takes its place. Returns the
    seconds it took and a short status."""
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
        tail = (r.stderr or r.stdout or "").strip().splitlines()
        rc, why = r.returncode, (tail[-1] if tail else "")
    except subprocess.TimeoutExpired:
        rc, why = 124, f"over --timeout {timeout:g} s"
    secs = time.monotonic() - t0
    if not os.path.exists(out):
        _error_file(out, name, side, f"{side}: the process wrote no result (exit {rc}): {why}"
                    [:400])
        return secs, f"FAILED (exit {rc})"
    return secs, "ok" if rc == 0 else f"exit {rc}"


def run_breakdown(args, rows: list[str], tbd: str | None) -> int:
    """--breakdown: one row, one tbd_bench --tbd_breakdown process and one profiled peer."""
    from .cli import to_json, write_atomic  # noqa: PLC0415
    if len(rows) != 1:
        raise InputError("--breakdown: exactly one row (--rows NAME, or a --benchmark_filter "
                         f"that selects one); this selects {len(rows)}")
    if not tbd:
        raise InputError("--breakdown compares with tbd's own breakdown: drop --no-tbd")
    row = rows[0]
    if args.dry_run:
        print(f"breakdown: tbd: {row}\nbreakdown: eager (profiled): {row}")
        return 0
    py, peer_env, what = peer_python(args.torch, args.torchvision, ["eager"])
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_dir = os.path.abspath(args.out_dir or os.path.join(cache_root(), "runs", stamp))
    os.makedirs(out_dir, exist_ok=True)
    tbd_out = os.path.join(out_dir, f"tbd-breakdown-{_slug(row)}.json")
    peer_out = os.path.join(out_dir, f"eager-profile-{_slug(row)}.json")
    env = dict(os.environ)
    cmd = [tbd, "--benchmark_out_format=json", f"--tbd_threads={args.threads}",
           f"--benchmark_out={tbd_out}", "--benchmark_repetitions=1",
           f"--benchmark_min_time={args.min_time:g}", "--tbd_breakdown"] + tbd_row_args(row)
    print(f"tbd_track peer --breakdown: {row}: tbd, then {what} (eager, profiled); files in "
          f"{out_dir}", file=sys.stderr, flush=True)
    secs, status = run_one(cmd, env, tbd_out, row, "tbd", args.timeout)
    print(f"  tbd: {secs:.1f} s {status}", file=sys.stderr, flush=True)
    penv = dict(env, **peer_env)
    penv["PYTHONPATH"] = TOOLS + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    pcmd = [py, "-m", "peers.run", "--rows", row, "--mode", "eager", f"--threads={args.threads}",
            f"--benchmark_repetitions={args.repetitions}", f"--profile={peer_out}"]
    t0 = time.monotonic()
    r = subprocess.run(pcmd, env=penv, cwd=TOOLS, capture_output=True, text=True,
                       timeout=args.timeout)
    print(f"  eager (profiled): {time.monotonic() - t0:.1f} s "
          f"{'ok' if r.returncode == 0 else f'FAILED (exit {r.returncode})'}", file=sys.stderr,
          flush=True)
    if r.returncode != 0 or not os.path.exists(peer_out):
        raise InputError(f"--breakdown: the peer's profile of {row} failed: "
                         f"{(r.stderr or r.stdout).strip()[-600:]}")
    run = load_run(tbd_out)
    bench = run.benches.get(row)
    if bench is None or not bench.ok:
        why = "; ".join(bench.errors) if bench else "no such row in its output"
        raise InputError(f"--breakdown: tbd_bench's {row}: {why}")
    tbd_rows = [x for x in run.breakdown if x.get("benchmark") in (row, bench.name)] or \
        run.breakdown
    times = bench.samples.get("real_time") or []  # seconds (gbjson converts)
    step = statistics.median(times) if times else None
    peer = read_json(peer_out, "the peer's profile (an object)")
    if not isinstance(peer, dict):
        raise InputError("expected an object: the peer's profile", peer_out)
    summary = fw.breakdown_summary(tbd_rows, step, peer)
    write_atomic(os.path.join(out_dir, "breakdown.json"), to_json(summary))
    out = to_json(summary) if args.format == "json" else \
        fw.breakdown_text(summary, f"PyTorch {peer.get('context', {}).get('framework_version', '')}"
                          .strip())
    if args.output:
        write_atomic(args.output, out)
    sys.stdout.write(out)
    return 0


def run_peer(args) -> int:
    from .cli import to_json, write_atomic  # noqa: PLC0415
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in ("eager", "compile")]
    if bad or not modes:
        raise InputError(f"--modes={args.modes}: each of eager, compile")
    rows = select_rows(args)
    check_torch(args.torch, args.torchvision)
    tbd = None
    if not args.no_tbd:
        tbd = args.tbd or os.path.join(REPO, "build", "release", "tbd_bench")
        if not (os.path.isfile(tbd) and os.access(tbd, os.X_OK)):
            raise InputError(f"--tbd: {tbd} is not an executable (build it with "
                             "scripts/setup.sh, name one with --tbd, or run --no-tbd)")
    if args.breakdown:
        return run_breakdown(args, rows, tbd)
    sides = (["tbd"] if tbd else []) + modes
    plan = schedule(rows, sides, args.rounds)
    extra = [a for a in args.bench_args if a != "--"]
    if args.dry_run:
        for rnd, row, side in plan:
            print(f"round {rnd}: {side}: {row}")
        return 0
    py, peer_env, what = peer_python(args.torch, args.torchvision, modes)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_dir = os.path.abspath(args.out_dir or os.path.join(cache_root(), "runs", stamp))
    os.makedirs(out_dir, exist_ok=True)
    print(f"tbd_track peer: {len(rows)} rows x {len(sides)} sides ({', '.join(sides)}) x "
          f"{args.rounds} rounds, {args.repetitions} repetitions of >= {args.min_time:g} s; "
          f"peer: {what}; files in {out_dir}", file=sys.stderr, flush=True)
    env = dict(os.environ)
    penv = dict(env, **peer_env)
    penv["PYTHONPATH"] = TOOLS + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    files = []
    t_start = time.monotonic()
    for k, (rnd, row, side) in enumerate(plan):
        out = os.path.join(out_dir, f"{side}-{rnd}-{_slug(row)}.json")
        common = [f"--benchmark_out={out}", f"--benchmark_repetitions={args.repetitions}",
                  f"--benchmark_min_time={args.min_time:g}"]
        if side == "tbd":
            cmd = [tbd, "--benchmark_out_format=json", f"--tbd_threads={args.threads}",
                   f"--tbd_math={args.math}"] + common + tbd_row_args(row) + extra
            secs, status = run_one(cmd, env, out, row, side, args.timeout)
        else:
            cmd = [py, "-m", "peers.run", "--rows", row, "--mode", side,
                   f"--threads={args.threads}", f"--math={args.math}"] + common
            secs, status = run_one(cmd, penv, out, row, side, args.timeout, cwd=TOOLS)
        files.append(out)
        left = (time.monotonic() - t_start) / (k + 1) * (len(plan) - k - 1)
        print(f"  [{k + 1}/{len(plan)}] round {rnd} {side:<7} {row}: {secs:.1f} s {status}"
              f"{f' (about {left / 60:.1f} min left)' if k + 1 < len(plan) else ''}",
              file=sys.stderr, flush=True)
    runs = []
    for f in files:
        try:
            runs.append(load_run(f))
        except InputError as e:
            print(f"tbd_track peer: skipped {e}", file=sys.stderr)
    summary = fw.summarize(fw.group_sides(runs))
    summary["files"] = files
    summary["schedule"] = [list(p) for p in plan]
    write_atomic(os.path.join(out_dir, "frameworks.json"), to_json(summary))
    out = {"json": to_json, "markdown": fw.markdown}.get(args.format, fw.text)(summary)
    if args.output:
        write_atomic(args.output, out)
    print(f"tbd_track peer: files and frameworks.json in {out_dir}", file=sys.stderr)
    sys.stdout.write(out)
    return 0
