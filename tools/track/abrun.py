"""run: measure A against B on a noisy machine, alternately, then compare.

This machine drifts by several percent over minutes, so two runs made minutes apart differ
although nothing changed. `run` takes two tbd_bench binaries (or two commits, each built once
in a git worktree) and runs them in alternation (A B A B ..., or A B B A ... with --order abba,
which also cancels a linear drift), each process with --benchmark_repetitions and Google
Benchmark's random interleaving, so both sides see the same spells of the machine. With 4 or
more rounds the unit of analysis is the process (each file's median): run-to-run noise is then
inside the test. It reports, per benchmark, the observed noise and the processes needed to
detect a given change at that noise. An A/A run (the same binary twice) must find nothing.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import subprocess
import sys
import time

from . import builds, compare as cmp, stats
from .gbjson import InputError, load_run
from .inputs import arg_number, arg_output_dir


def add_parser(sub, add_compare_options) -> None:
    p = sub.add_parser("run", help="run two binaries or commits alternately (ABAB...), then "
                       "compare", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", help="baseline: a tbd_bench executable or a git commit (built once)")
    p.add_argument("b", help="contender: executable or commit")
    p.add_argument("--rounds", type=arg_number(int, low=1), default=5,
                   help="processes per side (5)")
    p.add_argument("--repetitions", type=arg_number(int, low=1), default=3,
                   help="--benchmark_repetitions per process (3)")
    p.add_argument("--order", choices=("abab", "abba"), default="abab",
                   help="abab alternates; abba counterbalances (A B B A A B ...)")
    p.add_argument("--bench-filter", dest="bench_filter",
                   help="--benchmark_filter for both binaries")
    p.add_argument("--min-time", type=arg_number(low=0),
                   help="--benchmark_min_time per repetition (seconds)")
    p.add_argument("--detect", type=arg_number(low=0, open_low=True),
                   help="change (fraction) to size the repetitions for (default: threshold)")
    p.add_argument("--out-dir", type=arg_output_dir,
                   help="folder for the runs' JSON files and the comparison "
                   "(default <work>/ab/<a>-vs-<b>-<UTC time>)")
    p.add_argument("--repo", default=".", help="git checkout for commits (.)")
    p.add_argument("--work", help="worktrees and builds (default ~/.cache/tbd-track)")
    p.add_argument("--cuda", action="store_true", help="build commits with the CUDA backend")
    add_compare_options(p)
    p.set_defaults(func=run_ab)


def resolve_binary(spec: str, repo: str, work: str | None, cuda: bool) -> tuple[str, str]:
    """(executable, label) for a path or a commit."""
    if builds.is_binary(spec):
        return os.path.abspath(spec), os.path.basename(spec)
    sha = builds.resolve(repo, spec)
    try:
        return builds.build_commit(repo, sha, work, cuda=cuda), sha[:12]
    except builds.BuildError as e:
        raise InputError(str(e)) from None


def run_process(exe: str, out: str, args, extra: list[str], log=sys.stderr) -> float:
    def given(flag: str) -> bool:  # tbd_bench refuses a --benchmark_* flag given twice
        return any(a == flag or a.startswith(flag + "=") for a in extra)

    cmd = [exe, f"--benchmark_out={out}", "--benchmark_out_format=json"]
    if not given("--benchmark_repetitions"):
        cmd.append(f"--benchmark_repetitions={args.repetitions}")
    if not given("--benchmark_enable_random_interleaving"):
        cmd.append("--benchmark_enable_random_interleaving=true")
    if args.bench_filter and not given("--benchmark_filter"):
        cmd.append(f"--benchmark_filter={args.bench_filter}")
    if args.min_time is not None and not given("--benchmark_min_time"):
        cmd.append(f"--benchmark_min_time={args.min_time}")
    cmd += extra
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if r.returncode != 0 or not os.path.exists(out):
        tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-8:])
        raise InputError(f"{' '.join(cmd)} failed (exit {r.returncode}):\n{tail}")
    return time.monotonic() - t0


def schedule(rounds: int, order: str) -> list[str]:
    seq = []
    for i in range(rounds):
        pair = ["A", "B"] if order == "abab" or i % 2 == 0 else ["B", "A"]
        seq += pair
    return seq


def power_table(c: cmp.Comparison, change: float, alpha: float) -> list[dict]:
    rows = []
    for r in c.rows:
        if r.status != "compared":
            continue
        m = next((m for m in r.metrics if m.metric == "real_time"), None)
        if m is None:
            continue
        noises = [x for x in (m.noise_base, m.noise_new) if x is not None and x > 0]
        noise = max(noises) if noises else None
        rows.append({"benchmark": r.name, "noise": noise,
                     "needed": stats.repetitions_needed(noise or 0.0, change, alpha),
                     "have": min(m.n_base, m.n_new)})
    return rows


def run_ab(args) -> int:
    from .cli import config_with_flags, emit, to_json, write_atomic  # noqa: PLC0415
    extra = [a for a in args.bench_args if a != "--"]
    cfg = config_with_flags(args)
    exe_a, la = resolve_binary(args.a, args.repo, args.work, args.cuda)
    exe_b, lb = resolve_binary(args.b, args.repo, args.work, args.cuda)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_dir = args.out_dir or os.path.join(args.work or builds.default_work_dir(), "ab",
                                           f"{la}-vs-{lb}-{stamp}")
    os.makedirs(out_dir, exist_ok=True)
    seq = schedule(args.rounds, args.order)
    files = {"A": [], "B": []}
    print(f"tbd_track run: A = {exe_a}\n               B = {exe_b}\n"
          f"  {args.rounds} rounds x {args.repetitions} repetitions, order "
          f"{''.join(seq[:8])}{'...' if len(seq) > 8 else ''}, random interleaving; "
          f"files in {out_dir}", file=sys.stderr, flush=True)
    t_start = time.monotonic()
    for k, side in enumerate(seq):
        i = len(files[side]) + 1
        out = os.path.join(out_dir, f"{side}-{i}.json")
        exe = exe_a if side == "A" else exe_b
        secs = run_process(exe, out, args, extra)
        files[side].append(out)
        left = (time.monotonic() - t_start) / (k + 1) * (len(seq) - k - 1)
        print(f"  [{k + 1}/{len(seq)}] {side} round {i}: {secs:.1f} s"
              f"{f' (about {left / 60:.1f} min left)' if k + 1 < len(seq) else ''}",
              file=sys.stderr, flush=True)
    base = [load_run(f) for f in files["A"]]
    new = [load_run(f) for f in files["B"]]
    c = cmp.compare(base, new, cfg, unit=args.unit, allow_mismatch=args.allow_mismatch,
                    fail_on_removed=args.fail_on_removed)
    change = args.detect if args.detect is not None else cfg.threshold
    table = power_table(c, change, cfg.alpha)
    c.notes.append(_power_note(table, change, cfg.alpha, c.unit_of_analysis))
    emit(c, args)
    doc = c.to_dict()
    doc["power"] = {"change": change, "alpha": cfg.alpha, "power": 0.8, "rows": table,
                    "schedule": "".join(seq), "files": files}
    write_atomic(os.path.join(out_dir, "comparison.json"), to_json(doc))
    print(f"tbd_track: runs and comparison.json in {out_dir}", file=sys.stderr)
    return c.exit_code


def _power_note(table: list[dict], change: float, alpha: float, unit: str) -> str:
    if not table:
        return "no timed rows to size repetitions for"
    need = sorted(r["needed"] for r in table)
    med = need[len(need) // 2]
    worst = max(table, key=lambda r: r["needed"])
    what = "processes" if unit.startswith("process") else "repetitions"
    noisy = worst["noise"]
    return (f"to detect a {change * 100:g}% change at the observed noise (alpha {alpha:g}, "
            f"power 0.8) the median benchmark needs {med} {what} per side, the noisiest "
            f"({worst['benchmark']}, noise {'-' if noisy is None else f'{noisy * 100:.1f}%'}) "
            f"{worst['needed']}; this run had {min(r['have'] for r in table)}")
