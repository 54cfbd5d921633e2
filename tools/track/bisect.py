"""bisect: the first commit between GOOD and BAD at which a benchmark regressed.

Each step measures the middle commit against GOOD in alternation (as `run` does: the same
minutes of the machine for both) and applies compare's verdict to the chosen benchmarks and
metric: a regression there means "bad". Measurements already in the history store (same
machine, at least --rounds runs of both commits) are reused instead of re-running, and every
new run is added to the store. Commits that do not build are skipped (as `git bisect skip`);
if skips hide the boundary, the candidates are listed. GOOD must be an ancestor of BAD.

Exit: 1 when a first bad commit was found (the regression is real), 0 when BAD is not worse
than GOOD at this noise, 2 for bad input or when GOOD does not build.

The search runs along BAD's first-parent chain (every commit on it contains the earlier
ones): a regression that arrived with a merge is reported at the merge commit.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

from . import abrun, builds, compare as cmp, history
from .gbjson import InputError, load_run
from .inputs import arg_number, arg_regex


def add_parser(sub, add_compare_options) -> None:
    p = sub.add_parser("bisect", help="find the first bad commit between GOOD and BAD",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("good", help="a commit without the regression")
    p.add_argument("bad", help="a later commit with it (GOOD must be its ancestor)")
    p.add_argument("--bench-filter", dest="bench_filter", required=True, type=arg_regex,
                   help="regex: the benchmark(s) that regressed (also --benchmark_filter)")
    p.add_argument("--metric", default="real_time", help="metric that regressed (real_time)")
    p.add_argument("--rounds", type=arg_number(int, low=1), default=4,
                   help="processes per side per step (4)")
    p.add_argument("--repetitions", type=arg_number(int, low=1), default=3,
                   help="repetitions per process (3)")
    p.add_argument("--order", choices=("abab", "abba"), default="abab")
    p.add_argument("--min-time", type=arg_number(low=0),
                   help="--benchmark_min_time per repetition (seconds)")
    p.add_argument("--repo", default=".", help="git checkout (.)")
    p.add_argument("--work", help="worktrees and builds (default ~/.cache/tbd-track)")
    p.add_argument("--store", default=history.DEFAULT_STORE,
                   help=f"history store to reuse and extend ({history.DEFAULT_STORE})")
    p.add_argument("--machine", help="the store's machine fingerprint (when it has several)")
    p.add_argument("--cuda", action="store_true", help="build with the CUDA backend")
    add_compare_options(p)
    p.set_defaults(func=run_bisect)


class Judge:
    """Measures commits against GOOD and says good or bad."""

    def __init__(self, args, good: str):
        self.args = args
        self.good = good
        from .cli import config_with_flags  # noqa: PLC0415 (cli imports this module)
        self.cfg = config_with_flags(args)
        self.rx = re.compile(args.bench_filter)
        self.extra = [a for a in args.bench_args if a != "--"]
        self.good_exe = builds.build_commit(args.repo, good, args.work, cuda=args.cuda)
        self.stored = self._stored_runs()
        self.evidence: list[dict] = []

    def _stored_runs(self) -> dict[str, list[str]]:
        """commit -> run files in the store for this machine (if the machine is known)."""
        try:
            m = history.pick_machine(self.args.store, self.args.machine)
        except InputError:
            return {}
        out: dict[str, list[str]] = {}
        for c, runs in history.load_machine(self.args.store, m).items():
            for r in runs:
                if any(self.rx.search(n) for n in r.benches):
                    out.setdefault(c, []).append(r.path)
        return {c: sorted(v) for c, v in out.items()}

    def _measure(self, sha: str, exe: str) -> tuple[list[str], list[str]]:
        a, b = self.stored.get(self.good, []), self.stored.get(sha, [])
        if len(a) >= self.args.rounds and len(b) >= self.args.rounds:
            print(f"  {sha[:12]}: reusing {len(b)} stored runs (and {len(a)} of GOOD)",
                  file=sys.stderr)
            return a, b
        out_dir = os.path.join(self.args.work or builds.default_work_dir(), "bisect",
                               f"{self.good[:12]}-vs-{sha[:12]}")
        os.makedirs(out_dir, exist_ok=True)
        files = {"A": [], "B": []}
        args = self.args
        for side in abrun.schedule(args.rounds, args.order):
            i = len(files[side]) + 1
            out = os.path.join(out_dir, f"{side}-{i}.json")
            abrun.run_process(self.good_exe if side == "A" else exe, out, args, self.extra)
            files[side].append(out)
        if self.args.store:
            for side, c in (("A", self.good), ("B", sha)):
                try:
                    history.add(self.args.store, files[side], commit=c, quiet=True)
                except InputError as e:
                    print(f"  (not stored: {e})", file=sys.stderr)
        return files["A"], files["B"]

    def verdict(self, sha: str) -> str:
        """'bad', 'good' or 'skip' (does not build)."""
        try:
            exe = builds.build_commit(self.args.repo, sha, self.args.work, cuda=self.args.cuda)
        except builds.BuildError as e:
            print(f"  {sha[:12]}: skipped: {e}", file=sys.stderr)
            self.evidence.append({"commit": sha, "verdict": "skip", "detail": str(e)})
            return "skip"
        a, b = self._measure(sha, exe)
        c = cmp.compare([load_run(f) for f in a], [load_run(f) for f in b], self.cfg,
                        unit=self.args.unit, allow_mismatch=self.args.allow_mismatch)
        bad, parts = False, []
        for r in c.rows:
            if not self.rx.search(r.name):
                continue
            if r.status == "broken":
                bad = True
                parts.append(f"{r.name}: broken")
                continue
            for m in r.metrics:
                if m.metric == self.args.metric:
                    parts.append(f"{r.name} {self.args.metric} {(m.ratio - 1) * 100:+.1f}%"
                                 f" ({m.verdict})" if m.ratio else f"{r.name}: {m.verdict}")
                    bad = bad or m.verdict == "regression"
        v = "bad" if bad else "good"
        print(f"  {sha[:12]}: {v}: {'; '.join(parts) or 'no matching benchmark'}",
              file=sys.stderr, flush=True)
        self.evidence.append({"commit": sha, "verdict": v, "detail": "; ".join(parts)})
        return v


def run_bisect(args) -> int:
    good = builds.resolve(args.repo, args.good)
    bad = builds.resolve(args.repo, args.bad)
    if subprocess.run(["git", "-C", args.repo, "merge-base", "--is-ancestor", good, bad]
                      ).returncode != 0:
        raise InputError(f"{args.good} is not an ancestor of {args.bad}")
    # Along the first-parent chain: every commit on it contains all earlier ones, so "bad"
    # is monotone and binary search is sound. A regression that came in with a merge is
    # reported at the merge commit; bisect that branch next.
    commits = builds.git(args.repo, "rev-list", "--first-parent", "--ancestry-path",
                         "--reverse", f"{good}..{bad}").split()
    if not commits:
        raise InputError("no commits between GOOD and BAD")
    print(f"tbd_track bisect: {len(commits)} commits after {good[:12]} up to {bad[:12]}; "
          f"benchmarks /{args.bench_filter}/, metric {args.metric}", file=sys.stderr, flush=True)
    try:
        judge = Judge(args, good)
    except builds.BuildError as e:
        raise InputError(f"GOOD does not build: {e}") from None
    if judge.verdict(bad) != "bad":
        print(f"bisect: {bad[:12]} is not a regression against {good[:12]} at this noise "
              "(nothing to bisect; more --rounds would tell smaller changes)")
        return 0
    lo, hi = -1, len(commits) - 1  # commits[lo] good (GOOD itself at -1), commits[hi] bad
    skipped: set[int] = set()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        cands = sorted((i for i in range(lo + 1, hi) if i not in skipped),
                       key=lambda i: (abs(i - mid), i))
        if not cands:
            break
        i = cands[0]
        v = judge.verdict(commits[i])
        if v == "skip":
            skipped.add(i)
        elif v == "bad":
            hi = i
        else:
            lo = i
    info = history.commit_info(args.repo, [commits[hi]])
    first = commits[hi]
    between = [commits[i] for i in range(lo + 1, hi) if i in skipped]
    if between:
        print(f"bisect: the first bad commit is one of {', '.join(c[:12] for c in between)} or "
              f"{first[:12]} (the others do not build)")
    else:
        print(f"bisect: first bad commit {first[:12]} {info.get(first, {}).get('subject', '')}")
    print("evidence:")
    for e in judge.evidence:
        print(f"  {e['commit'][:12]}  {e['verdict']:5}  {e['detail']}")
    return 1
