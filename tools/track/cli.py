"""Command line of tbd_track: one command, subcommands compare, run, peer, history, bisect,
simulate, report.

Exit codes (every subcommand):
  0  no regression (or nothing to gate)
  1  a regression: a gated metric got worse beyond its threshold with significance, an exact
     metric (memory) moved beyond its tolerance the wrong way, or a row broke (ok -> error)
  2  input that could not be read or validated: a missing, binary or non-UTF-8 file, not
     benchmark JSON, a row without a usable name or time (NaN, null, negative), a file
     without a context or benchmarks, a bad flag value (NaN, out of range, a bad regex, an
     output path that cannot be written), a bad config; or a build/run that failed. Nothing
     is gated on such input: the message names the file, the row and the field
  3  not comparable: device, backend or math mode differ (unless --allow-mismatch)
compare of a tbd file against a peer framework's file (context `framework`) and `peer` print
the frameworks side by side and are no gate: 0 when the table was made, 2 on bad input.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import sys

from . import compare as cmp
from . import frameworks as fw
from . import render
from .config import load_config
from .files import write_atomic
from .gbjson import load_runs
from .inputs import InputError, arg_number, arg_output_file, arg_regex

EPILOG = """exit codes: 0 no regression, 1 regression, 2 input that could not be read or
validated (nothing is gated on it), 3 not comparable (device, backend or math differ;
--allow-mismatch compares anyway)"""


def _filter_runs(runs, pattern: str | None):
    if not pattern:
        return runs
    rx = re.compile(pattern)  # checked by argparse (arg_regex)
    for r in runs:
        r.benches = {k: v for k, v in r.benches.items() if rx.search(k)}
        r.breakdown = [b for b in r.breakdown if rx.search(str(b.get("benchmark", "")))]
    return runs


def _date(s: str) -> _dt.date:
    try:
        return _dt.date.fromisoformat(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date (YYYY-MM-DD), got {s!r}") from None


def add_compare_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="TOML file: thresholds, per-benchmark rules, "
                   "acknowledged regressions (see tools/track/example.toml)")
    p.add_argument("--alpha", type=arg_number(low=0, high=1, open_low=True, open_high=True),
                   help="significance level, between 0 and 1 (default 0.05)")
    p.add_argument("--threshold", type=arg_number(low=0),
                   help="minimum effect as a fraction >= 0 (default 0.05 = 5%%)")
    p.add_argument("--unit", choices=("auto", "process", "repetition"), default="auto",
                   help="unit of analysis: per-file medians (process) or all repetitions; "
                   "auto = process when both sides have enough files for the test to reach "
                   "alpha (4 at 0.05)")
    p.add_argument("--allow-mismatch", action="store_true",
                   help="compare even when device, backend or math mode differ")
    p.add_argument("--fail-on-removed", action="store_true",
                   help="a benchmark missing from the new side is a failure too")
    p.add_argument("--filter", type=arg_regex,
                   help="regex: only benchmarks whose name matches (one must)")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.add_argument("--output", "-o", type=arg_output_file,
                   help="write the report here (atomically) as well as "
                   "to stdout for text; JSON/markdown go only here when given")
    p.add_argument("--json", dest="json_out", type=arg_output_file,
                   help="also write the comparison as JSON here")
    p.add_argument("--all", action="store_true", help="list unchanged metrics too")
    p.add_argument("--top", type=arg_number(int, low=0), default=10,
                   help="layers shown per breakdown (10)")
    p.add_argument("--today", type=_date, help=argparse.SUPPRESS)  # tests: ack expiry


def config_with_flags(args):
    """The --config file with --alpha and --threshold (checked by argparse) over it."""
    cfg = load_config(args.config)
    if args.alpha is not None:
        cfg.alpha = args.alpha
    if args.threshold is not None:
        cfg.threshold = args.threshold
    return cfg


def run_compare(args, base_paths: list[str], new_paths: list[str]) -> int:
    cfg = config_with_flags(args)
    base = _filter_runs(load_runs(base_paths), args.filter)
    new = _filter_runs(load_runs(new_paths), args.filter)
    if args.filter and not any(r.benches for r in base + new):
        raise InputError(f"--filter {args.filter!r} matches no benchmark on either side: "
                         "nothing would be compared")
    if fw.is_frameworks_comparison(base, new):
        return emit_frameworks(fw.summarize(fw.group_sides(base + new)), args)
    c = cmp.compare(base, new, cfg, unit=args.unit, allow_mismatch=args.allow_mismatch,
                    today=args.today, fail_on_removed=args.fail_on_removed)
    emit(c, args)
    return c.exit_code


def emit_frameworks(summary: dict, args) -> int:
    """A tbd file against a peer framework's (or two frameworks): the side-by-side table, never
    a gate (exit 0)."""
    if args.format == "json":
        out = to_json(summary)
    elif args.format == "markdown":
        out = fw.markdown(summary)
    else:
        out = fw.text(summary)
    if args.output:
        write_atomic(args.output, out)
        if args.format == "text":
            sys.stdout.write(out)
    else:
        sys.stdout.write(out)
    if args.json_out:
        write_atomic(args.json_out, to_json(summary))
    return 0


def emit(c: cmp.Comparison, args) -> None:
    if args.format == "json":
        out = to_json(c.to_dict())
    elif args.format == "markdown":
        out = render.markdown(c, top=args.top)
    else:
        out = render.text(c, show_all=args.all, top=args.top)
    if args.output:
        write_atomic(args.output, out)
        if args.format == "text":
            sys.stdout.write(out)
        else:
            print(f"tbd_track: wrote {args.output} ({c.verdict})", file=sys.stderr)
    else:
        sys.stdout.write(out)
    if args.json_out:
        write_atomic(args.json_out, to_json(c.to_dict()))


def to_json(doc) -> str:
    """Strict JSON (NaN and infinities become null)."""
    return json.dumps(_clean_nan(doc), indent=1, allow_nan=False) + "\n"


def _clean_nan(o):
    """NaN/inf -> None, recursively (the JSON output is strict)."""
    if isinstance(o, float):
        return o if o == o and o not in (float("inf"), float("-inf")) else None
    if isinstance(o, dict):
        return {k: _clean_nan(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean_nan(v) for v in o]
    return o


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tbd_track", description="Per-commit performance tracking for tbd_bench JSON "
        "(and any Google Benchmark JSON).", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", metavar="SUBCOMMAND")

    c = sub.add_parser("compare", help="compare two runs (files or folders of files) on every "
                       "metric", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("base", nargs="?", help="baseline JSON file or folder of JSON files")
    c.add_argument("new", nargs="?", help="contender JSON file or folder")
    c.add_argument("--base", dest="base_list", nargs="+", metavar="FILE",
                   help="baseline files (a set of runs)")
    c.add_argument("--new", dest="new_list", nargs="+", metavar="FILE",
                   help="contender files (a set of runs)")
    add_compare_options(c)

    from . import abrun, bisect, dist_sim, history, peer  # noqa: PLC0415 (subcommands)
    abrun.add_parser(sub, add_compare_options)
    peer.add_parser(sub)
    history.add_parser(sub)
    bisect.add_parser(sub, add_compare_options)
    dist_sim.add_parser(sub)
    try:
        from . import report  # noqa: PLC0415
        report.add_parser(sub)
    except ImportError:
        pass
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after "--" goes to the benchmark binaries (run, bisect).
    bench_args: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, bench_args = argv[:k], argv[k + 1:]
    args = p.parse_args(argv)
    args.bench_args = bench_args
    if not args.cmd:
        p.print_help(sys.stderr)
        return 2
    try:
        if args.cmd == "compare":
            pos = [x for x in (args.base, args.new) if x]
            base = args.base_list or (pos[:1] if pos else [])
            if not args.base_list:
                pos = pos[1:]
            new = args.new_list or pos[:1]
            if args.new_list is None:
                pos = pos[1:]
            if not base or not new or pos:
                p.error("compare needs a baseline and a contender: compare BASE NEW, or "
                        "--base FILE... --new FILE...")
            return run_compare(args, base, new)
        return args.func(args)
    except InputError as e:
        print(f"tbd_track: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        # Reading goes through inputs.read_text (an InputError); what is left is mostly
        # writing: an output or a store that could not be written (a full disk, a path the
        # early checks of arg_output_file could not foresee), or a program that would not start.
        where = f"{e.filename}: " if e.filename else ""
        print(f"tbd_track: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tbd_track: interrupted", file=sys.stderr)
        return 130
