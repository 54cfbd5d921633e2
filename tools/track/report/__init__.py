"""report: one self-contained, offline HTML file from a comparison, a history and runs.

    tbd_track report [--compare BASE NEW | --comparison compare.json] [--history history.json]
                     [--runs FILE_OR_DIR ...] [--title T] -o report.html

Sections, each present when its input is (an absent one says why):
  1 verdict        comparison: verdict, exit code, counts, labels, the statistics line
  2 tables         comparison: metric results (regressions first), status lists, families
  3 A/B plots      comparison: real_time samples of base vs new per benchmark, ratio CI
  4 history        history document: per-commit medians, samples, segments, change points
  5 throughput     runs: items_per_second (and FP32 utilization) vs batch size per model
  6 memory         runs: the six mem_* categories stacked per batch size, peak marked
  7 layers         runs: tbd_breakdown per model step (share of step, FLOP/s, table)
  8 context        runs and comparison: device, libraries, commit; the comparison's diff

Why hand-written SVG and not matplotlib or an inlined chart library: the file must be one
offline document (asv #1574: CDN assets break under a CSP) with the same bytes for the same
input (a diffable CI artifact); SVG strings built here are deterministic by construction and
render without any script. The only script sorts tables and counts errors for the test.

The report is not a gate: its exit code is 0 when the file was written, 2 on bad input (the
comparison's own exit code is in the page; `tbd_track compare` is the gate).

The package: assets (CSS, scripts, CSP), format (numbers for people), charts (axes, SVG
charts), sections (tables and the report's sections); this module builds the page
(build_html) and is the command (add_parser).
"""

from __future__ import annotations

import os
import sys

from ..gbjson import InputError, Run, load_runs
from ..inputs import arg_output_file
from .assets import CSP, CSS, JS_HEAD, JS_TAIL
from .charts import Axis
from .documents import load_comparison, load_frameworks, load_history
from .format import _e, fmt, fmt_pct
from .sections import (SECTIONS, parse_layer, parse_model, section_ab, section_context,
                       section_frameworks, section_history, section_layers, section_memory,
                       section_scaling, section_tables, section_throughput, section_verdict)

# What the tests and cli.py use as report.X (Axis, fmt, fmt_pct, parse_model and parse_layer
# live in the modules above).
__all__ = ["CSP", "SECTIONS", "Axis", "add_parser", "build_html", "fmt", "fmt_pct",
           "load_comparison", "load_frameworks", "load_history", "parse_layer", "parse_model",
           "run_report"]


# ---------------------------------------------------------------------------------------------
# The page

def build_html(comparison: dict | None, history: dict | None, runs: list, title: str,
               frameworks: dict | None = None) -> str:
    """The whole report as one string; the same input gives the same bytes. Runs of peer
    frameworks (tbd_track peer's files) go to the frameworks section only."""
    from .. import frameworks as fw  # noqa: PLC0415
    c = comparison
    runs = list(runs or [])
    peer_runs = [r for r in runs if fw.framework_of(r) != "tbd"]
    if peer_runs and frameworks is None:
        frameworks = fw.summarize(fw.group_sides(runs))
    runs = [r for r in runs if fw.framework_of(r) == "tbd"]
    no_cmp = "No comparison given (--compare BASE NEW or --comparison FILE)."
    body: dict[str, tuple[bool, str]] = {}
    body["verdict"] = (True, section_verdict(c)) if c else (False, no_cmp)
    body["tables"] = (True, section_tables(c)) if c else (False, no_cmp)
    body["ab"] = (True, section_ab(c)) if c else (False, no_cmp)
    body["history"] = ((True, section_history(history)) if history else
                       (False, "No history given (--history FILE, written by "
                        "<code>tbd_track history detect --format json</code>)."))
    no_runs = "No runs given (--runs FILE_OR_DIR, or the new side of --compare)."
    body["throughput"] = (True, section_throughput(runs)) if runs else (False, no_runs)
    body["memory"] = (True, section_memory(runs)) if runs else (False, no_runs)
    bd_present = bool(runs) or bool(c and c.get("breakdowns"))
    body["layers"] = (True, section_layers(runs, c)) if bd_present else (False, no_runs)
    has_dist = any(r.dist_steps for r in runs)
    body["scaling"] = ((True, section_scaling(runs)) if has_dist else
                       (False, "No data-parallel profile in the runs (tbd_bench --tbd_dist=mpi "
                        "writes one; see docs/data_parallel.md)."))
    body["frameworks"] = ((True, section_frameworks(frameworks)) if frameworks else
                          (False, "No peer framework's runs (tbd_track peer writes them; give "
                           "its folder to --runs, or its frameworks.json to --frameworks)."))
    body["context"] = ((True, section_context(runs, c)) if runs or c else
                       (False, "No runs or comparison: no context to show."))

    inputs = []
    if c:
        inputs.append(f'comparison: {_e(c.get("base_label", ""))} &#8594; '
                      f'{_e(c.get("new_label", ""))}')
    if history:
        inputs.append(f'history: {len(history.get("commits") or [])} commits, '
                      f'{len(history.get("series") or [])} series'
                      + (f' on <code>{_e(history.get("machine"))}</code>'
                         if history.get("machine") else ""))
    if frameworks:
        inputs.append("frameworks: " + ", ".join(_e(x) for x in frameworks.get("sides", [])))
    if runs:
        inputs.append("runs: " + ", ".join(f"<code>{_e(os.path.basename(r.path))}</code>"
                                           for r in runs[:12])
                      + (f" and {len(runs) - 12} more" if len(runs) > 12 else ""))
    out = ["<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n",
           f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n',
           '<meta charset="utf-8">\n',
           '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
           '<meta name="generator" content="tbd_track report">\n',
           f"<title>{_e(title)}</title>\n",
           f"<style>{CSS}</style>\n",
           f"<script>{JS_HEAD}</script>\n</head>\n<body>\n<main>\n",
           f"<h1>{_e(title)}</h1>\n",
           f'<p class="inputs">{" &#183; ".join(inputs) or "no input"}</p>\n',
           '<nav class="toc">']
    for i, (sid, name) in enumerate(SECTIONS):
        present = body[sid][0]
        off = "" if present else ' class="off"'
        out.append(f'<a href="#{sid}"{off}>{i + 1} {name}</a>')
    out.append("</nav>\n")
    for i, (sid, name) in enumerate(SECTIONS):
        present, content = body[sid]
        cls = "" if present else ' class="absent-section"'
        out.append(f'<section id="{sid}" data-section="{sid}" '
                   f'data-present="{1 if present else 0}"{cls}>\n'
                   f'<h2><span class="num">{i + 1}</span>{name}</h2>\n')
        out.append(content if present else f'<p class="absent">{content}</p>')
        out.append("\n</section>\n")
    out.append('<footer>Written by <code>tbd_track report</code>: one offline file (no network '
               "access, inline SVG); the same inputs give the same bytes. Click a table header "
               "to sort. Times are per iteration; rates divide by the measured time.</footer>\n")
    out.append(f"</main>\n<script>{JS_TAIL}</script>\n</body>\n</html>\n")
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Command line

def run_report(args) -> int:
    if not (args.compare or args.comparison or args.history or args.runs or args.frameworks):
        raise InputError("report needs an input: --compare BASE NEW, --comparison FILE, "
                         "--history FILE, --frameworks FILE or --runs FILE_OR_DIR ...")
    comparison = None
    new_runs: list[Run] = []
    if args.compare:
        from .. import compare as cmp  # noqa: PLC0415 (needs scipy; only for --compare)
        from ..config import load_config  # noqa: PLC0415
        from .. import frameworks as fw  # noqa: PLC0415
        base = load_runs([args.compare[0]])
        new_runs = load_runs([args.compare[1]])
        if fw.is_frameworks_comparison(base, new_runs):
            # tbd against a peer framework: the side-by-side, not a comparison of commits
            new_runs = base + new_runs
        else:
            comparison = cmp.compare(base, new_runs, load_config(None)).to_dict()
    elif args.comparison:
        comparison = load_comparison(args.comparison)
    history = load_history(args.history) if args.history else None
    frameworks = load_frameworks(args.frameworks) if args.frameworks else None
    runs = load_runs(args.runs) if args.runs else new_runs
    from ..cli import write_atomic  # noqa: PLC0415 (cli imports this module's siblings)
    text = build_html(comparison, history, runs, args.title, frameworks)
    write_atomic(args.output, text)
    print(f"tbd_track: wrote {args.output} ({len(text.encode('utf-8'))} bytes)",
          file=sys.stderr)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report", help="one self-contained offline HTML report (verdict, tables, A/B plots, "
        "history with change points, throughput, memory, per-layer breakdown, data-parallel "
        "scaling, frameworks side by side, context)",
        description="Writes one HTML file with no network reference (inline CSS, SVG and a "
        "little script for sorting tables). The same inputs give the same bytes. Exit code 0 "
        "when written, 2 on bad input; the comparison's own verdict is inside the page "
        "(tbd_track compare is the gate).")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--compare", nargs=2, metavar=("BASE", "NEW"),
                   help="compare two runs (files or folders) with the default configuration")
    g.add_argument("--comparison", metavar="FILE",
                   help="a comparison written by tbd_track compare --format json")
    p.add_argument("--history", metavar="FILE",
                   help="a history document (tbd_track history detect --format json)")
    p.add_argument("--runs", nargs="+", metavar="FILE_OR_DIR",
                   help="tbd_bench JSON files for throughput, memory, breakdown and context "
                   "(default: the new side of --compare)")
    p.add_argument("--frameworks", metavar="FILE",
                   help="tbd against peer frameworks: tbd_track peer's frameworks.json (or "
                   "give the peer's files to --runs)")
    p.add_argument("--title", default="tbd_track report", help="page title")
    p.add_argument("-o", "--output", required=True, metavar="FILE", type=arg_output_file,
                   help="the HTML file to write (atomically)")
    p.set_defaults(func=run_report)
