"""history: a store of runs keyed by machine fingerprint and commit, and change points over it.

Layout (plain files, committable, no server):

    <store>/<machine>/machine.json                 what the fingerprint was made of
    <store>/<machine>/<commit12>-<UTC time>.json   the run, as tbd_bench wrote it

<machine> is a readable slug plus a hash of what makes results comparable: backend, device,
CPUs, threads, math mode, ISA, cache sizes, build type (not the host name: two identical
machines share a history, and a re-imaged CI machine keeps its own). Commits are put in git
order (`git rev-list --topo-order` of a branch); runs of commits not on that branch are listed,
not used. Runs from a dirty tree are refused (the commit does not say what ran) unless
--allow-dirty.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

from . import changepoint, stats
from .config import load_config
from .gbjson import COMMIT_RE, InputError, Run, load_run, load_runs
from .inputs import arg_output_dir, arg_output_file, arg_regex, read_json, read_text
from .metrics import MetricTable

FINGERPRINT_KEYS = ("backend", "device", "num_cpus", "threads", "math", "onednn_isa",
                    "build_type", "library_build_type")
DEFAULT_STORE = "results/history"


def fingerprint(ctx: dict) -> tuple[str, dict]:
    info = {k: str(ctx.get(k)) for k in FINGERPRINT_KEYS if ctx.get(k) not in (None, "")}
    caches = ctx.get("caches")
    if isinstance(caches, list) and caches:
        info["caches"] = ",".join(f"L{c.get('level')}{c.get('type', '')[0:1]}:{c.get('size')}"
                                  for c in caches if isinstance(c, dict))
    h = hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()[:8]
    words = [info.get("backend", "gbench"), info.get("device", "unknown-device"),
             f"{info['num_cpus']}cpu" if "num_cpus" in info else "",
             f"{info['threads']}t" if "threads" in info else "", info.get("math", "")]
    slug = re.sub(r"[^a-z0-9]+", "-", "-".join(w for w in words if w).lower()).strip("-")
    return f"{slug[:48]}-{h}", info


def _git(repo: str, *args: str) -> str:
    try:
        return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                              text=True).stdout
    except FileNotFoundError:
        raise InputError("git is not installed") from None
    except subprocess.CalledProcessError as e:
        raise InputError(f"git {' '.join(args)}: {e.stderr.strip()}") from None


def git_order(repo: str, ref: str = "HEAD") -> list[str]:
    """Commits reachable from ref, oldest first, parents before children."""
    return _git(repo, "rev-list", "--topo-order", "--reverse", ref).split()


def commit_info(repo: str, commits: list[str]) -> dict[str, dict]:
    if not commits:
        return {}
    out = _git(repo, "show", "-s", "--format=%H%x00%s%x00%cI", *commits)
    info = {}
    for line in out.splitlines():
        parts = line.split("\x00")
        if len(parts) == 3:
            info[parts[0]] = {"subject": parts[1], "date": parts[2]}
    return info


def check_commit(sha: str, file: str | None = None, field: str = "--commit") -> str:
    """A commit hash (7 to 64 hex digits): it becomes part of a file name in the store."""
    if not COMMIT_RE.fullmatch(sha):
        raise InputError(f"expected a commit hash (7 to 64 hex digits), got {sha!r}", file,
                         field=field)
    return sha


def add(store: str, paths: list[str], allow_dirty: bool = False, commit: str | None = None,
        quiet: bool = False) -> list[str]:
    """Copies runs into the store; returns the stored paths."""
    if commit is not None:
        check_commit(commit)
    stored = []
    for run in load_runs(paths):
        sha = commit or run.commit
        if not sha:
            raise InputError(f"{run.path}: no git_commit in its context, or 'unknown' (give "
                             "--commit SHA)")
        if run.dirty and not allow_dirty:
            raise InputError(f"{run.path}: measured on a dirty tree (git_dirty true): its "
                             "commit does not say what ran; --allow-dirty stores it anyway")
        slug, info = fingerprint(run.context)
        d = os.path.join(store, slug)
        os.makedirs(d, exist_ok=True)
        mpath = os.path.join(d, "machine.json")
        if not os.path.exists(mpath):
            with open(mpath, "w", encoding="utf-8") as f:
                json.dump(info, f, indent=1, sort_keys=True)
                f.write("\n")
        stamp = _utc_stamp(str(run.context.get("date", "")))
        base = f"{sha[:12]}{'-dirty' if run.dirty else ''}-{stamp}"
        dst = os.path.join(d, base + ".json")
        k = 1
        while os.path.exists(dst):
            if _same_file(dst, run.path):
                break
            dst = os.path.join(d, f"{base}-{k}.json")
            k += 1
        if not os.path.exists(dst):
            tmp = dst + ".tmp"
            shutil.copyfile(run.path, tmp)
            os.replace(tmp, dst)
        if commit and commit != run.commit:  # record the override next to the file
            with open(dst[:-5] + ".commit", "w", encoding="utf-8") as f:
                f.write(sha + "\n")
        stored.append(dst)
        if not quiet:
            print(f"history: {run.path} -> {dst}")
    return stored


def _utc_stamp(date: str) -> str:
    """Google Benchmark's context date (ISO 8601 with offset) as YYYYMMDDTHHMMSSZ."""
    import datetime as _dt  # noqa: PLC0415
    try:
        d = _dt.datetime.fromisoformat(date)
        if d.tzinfo is not None:
            d = d.astimezone(_dt.timezone.utc)
    except (ValueError, OverflowError):  # not a date; a year 9999 date moved past the end
        return "nodate"
    return d.strftime("%Y%m%dT%H%M%SZ")


def _same_file(a: str, b: str) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def machines(store: str) -> list[str]:
    if not os.path.isdir(store):
        return []
    return sorted(d for d in os.listdir(store)
                  if os.path.isfile(os.path.join(store, d, "machine.json")))


def load_machine(store: str, machine: str) -> dict[str, list[Run]]:
    """commit (full sha) -> runs."""
    d = os.path.join(store, machine)
    by_commit: dict[str, list[Run]] = {}
    for f in sorted(os.listdir(d)):
        if not f.endswith(".json") or f == "machine.json":
            continue
        run = load_run(os.path.join(d, f))
        sha = run.commit
        override = os.path.join(d, f[:-5] + ".commit")
        if os.path.exists(override):
            sha = check_commit(read_text(override).strip(), override, "the commit")
        by_commit.setdefault(sha, []).append(run)
    return by_commit


def pick_machine(store: str, machine: str | None) -> str:
    ms = machines(store)
    if not ms:
        raise InputError(f"history store {store}: no runs (add some with `history add`)")
    if machine:
        hits = [m for m in ms if m == machine or m.startswith(machine)]
        if len(hits) != 1:
            raise InputError(f"history store {store}: machine '{machine}' "
                             f"{'is ambiguous' if hits else 'not found'}; have: {', '.join(ms)}")
        return hits[0]
    if len(ms) > 1:
        raise InputError(f"history store {store}: several machines, pick one with --machine: "
                         f"{', '.join(ms)}")
    return ms[0]


def _resolve_commits(repo: str, by_commit: dict, ref: str):
    order = git_order(repo, ref)
    known = set(order)
    # Stored commits may be abbreviated (a --commit override): expand by prefix.
    full = {}
    for c in by_commit:
        if c in known:
            full[c] = c
        else:
            hits = [o for o in order if o.startswith(c)] if len(c) >= 7 else []
            if len(hits) == 1:
                full[c] = hits[0]
    measured = [c for c in order if c in set(full.values())]
    off_branch = sorted(c for c in by_commit if c not in full)
    return order, measured, full, off_branch


def build_document(store: str, repo: str, machine: str | None = None, ref: str = "HEAD",
                   metrics: list[str] | None = None, bench_filter: str | None = None,
                   config_path: str | None = None) -> dict:
    """The history document: commits in git order, series, change points (see report/)."""
    cfg = load_config(config_path)
    machine = pick_machine(store, machine)
    by_commit = load_machine(store, machine)
    order, measured, full, off_branch = _resolve_commits(repo, by_commit, ref)
    runs_at: dict[str, list[Run]] = {}
    for c, runs in by_commit.items():
        if c in full:
            runs_at.setdefault(full[c], []).extend(runs)
    pos = {c: i for i, c in enumerate(order)}
    info = commit_info(repo, measured)
    commits = [{"commit": c, "short": c[:12], "subject": info.get(c, {}).get("subject", ""),
                "date": info.get(c, {}).get("date", ""), "files": len(runs_at[c])}
               for c in measured]
    all_runs = [r for c in measured for r in runs_at[c]]
    table = MetricTable([r.metrics_meta for r in reversed(all_runs)],
                        any(r.is_tbd for r in all_runs))
    rx = re.compile(bench_filter) if bench_filter else None
    names = list(dict.fromkeys(n for r in all_runs for n in r.benches))
    if rx:
        names = [n for n in names if rx.search(n)]
    wanted = metrics or ["real_time", "peak_memory_bytes"]
    series = []
    for name in names:
        avail = {m for r in all_runs if name in r.benches for m in r.benches[name].samples}
        if wanted == ["all"]:
            ms = sorted(m for m in avail if table.get(m).gated)
        else:
            ms = [m for m in wanted if m in avail]
        for metric in ms:
            info_m = table.get(metric)
            st = cfg.settings(name, metric)
            direction = st.direction or info_m.direction
            if direction not in ("lower", "higher"):
                continue
            points = []
            for i, c in enumerate(measured):
                per_file = [stats.median(r.benches[name].samples[metric]) for r in runs_at[c]
                            if name in r.benches and r.benches[name].ok
                            and metric in r.benches[name].samples]
                if not per_file:
                    continue
                samples = [x for r in runs_at[c] if name in r.benches and r.benches[name].ok
                           for x in r.benches[name].samples.get(metric, [])]
                points.append({"commit": c, "index": i, "value": stats.median(per_file),
                               "samples": samples})
            if not points:
                continue
            tol = max(st.tolerance_bytes, 0.0)
            gaps = [pos[measured[b["index"]]] - pos[measured[a["index"]]] - 1
                    for a, b in zip(points, points[1:])] + [0]
            det = changepoint.detect([p["value"] for p in points], direction, st.threshold,
                                     exact=info_m.exact, tolerance=tol, alpha=cfg.alpha,
                                     gap_after=gaps)
            idx = [p["index"] for p in points]  # series position -> commit index
            events = []
            for e in det.events:
                c_new, c_old = measured[idx[e.index]], measured[idx[e.prev_index]]
                ev = {"kind": e.kind, "verdict": e.verdict, "commit": c_new,
                      "prev_commit": c_old, "index": idx[e.index], "ratio": e.ratio,
                      "from": e.from_value, "to": e.to_value,
                      "fixed_by": measured[idx[e.fixed_by]] if e.fixed_by is not None else None,
                      "open": e.open, "detail": e.detail,
                      "unmeasured_between": max(0, pos[c_new] - pos[c_old] - 1)
                      if e.kind == "step" else 0}
                if e.kind == "step" and e.verdict == "regression" and e.open:
                    ack, expired = cfg.acknowledgement(name, metric, _today())
                    if ack and not expired:
                        ev["acknowledged"] = ack.reason
                events.append(ev)
            series.append({
                "benchmark": name, "metric": metric, "direction": direction,
                "unit": info_m.unit, "exact": info_m.exact, "threshold": st.threshold,
                "noise": det.noise, "points": points,
                "segments": [{"start": idx[s.start], "end": idx[s.end], "level": s.level}
                             for s in det.segments],
                "events": events})
    mpath = os.path.join(store, machine, "machine.json")
    slug_info = read_json(mpath, "the machine's fingerprint (an object)")
    if not isinstance(slug_info, dict):
        raise InputError("expected an object (what the machine's fingerprint was made of)",
                         mpath)
    return {"store": store, "machine": machine, "machine_info": slug_info, "ref": ref,
            "commits": commits, "off_branch": off_branch, "series": series}


def _today():
    import datetime as _dt  # noqa: PLC0415
    return _dt.date.today()


def open_regressions(doc: dict) -> list[tuple[dict, dict]]:
    return [(s, e) for s in doc["series"] for e in s["events"]
            if e["verdict"] == "regression" and e.get("open") and e["kind"] in ("step", "drift")
            and not e.get("acknowledged")]


def _fmt(v, unit):
    from .render import fmt_value  # noqa: PLC0415
    return fmt_value(v, unit)


def text(doc: dict, verbose: bool = False) -> str:
    L = [f"history: {doc['store']}, machine {doc['machine']}, {len(doc['commits'])} measured "
         f"commits on {doc['ref']}"]
    if doc["off_branch"]:
        L.append(f"  not on {doc['ref']} (ignored): " + ", ".join(c[:12] for c in doc["off_branch"]))
    for s in doc["series"]:
        evs = [e for e in s["events"] if verbose or e["kind"] != "outlier"]
        if not evs and not verbose:
            continue
        first, last = s["points"][0], s["points"][-1]
        L.append(f"{s['benchmark']}  {s['metric']}: {len(s['points'])} commits, "
                 f"{_fmt(first['value'], s['unit'])} -> {_fmt(last['value'], s['unit'])}")
        for e in evs:
            what = {"step": "step", "outlier": "one-off outlier", "drift": "gradual drift"}[e["kind"]]
            state = ""
            if e["kind"] == "step" and e["verdict"] == "regression":
                state = (f", fixed by {e['fixed_by'][:12]}" if e["fixed_by"] else
                         (f", acknowledged: {e['acknowledged']}" if e.get("acknowledged")
                          else ", OPEN"))
            where = (f"first bad {e['commit'][:12]} (last good {e['prev_commit'][:12]}"
                     + (f", {e['unmeasured_between']} unmeasured commits between: bisect"
                        if e.get("unmeasured_between") else "") + ")"
                     if e["kind"] == "step" else f"at {e['commit'][:12]}")
            L.append(f"  {e['verdict']} {what} {(e['ratio'] - 1) * 100:+.1f}% "
                     f"({_fmt(e['from'], s['unit'])} -> {_fmt(e['to'], s['unit'])}) {where}{state}"
                     + (f"; {e['detail']}" if e["detail"] else ""))
    opened = open_regressions(doc)
    L.append(f"open regressions: {len(opened)}")
    return "\n".join(L) + "\n"


def add_parser(sub) -> None:
    p = sub.add_parser("history", help="store runs by machine and commit; change points over "
                       "commits")
    hs = p.add_subparsers(dest="history_cmd", metavar="ACTION")
    a = hs.add_parser("add", help="copy runs into the store")
    a.add_argument("files", nargs="+")
    a.add_argument("--store", default=DEFAULT_STORE, type=arg_output_dir)
    a.add_argument("--allow-dirty", action="store_true")
    a.add_argument("--commit", help="the commit these runs measured (overrides the context)")
    ls = hs.add_parser("list", help="machines, commits and run counts in the store")
    ls.add_argument("--store", default=DEFAULT_STORE)
    d = hs.add_parser("detect", help="change points per benchmark and metric over commits; "
                      "exit 1 while a regression is open")
    d.add_argument("--store", default=DEFAULT_STORE)
    d.add_argument("--machine", help="fingerprint (prefix) when the store has several")
    d.add_argument("--repo", default=".", help="git checkout giving the commit order (.)")
    d.add_argument("--ref", default="HEAD", help="branch or commit whose history is used")
    d.add_argument("--metric", action="append", help="metric(s) to follow (default real_time "
                   "and peak_memory_bytes; 'all' for every gated metric)")
    d.add_argument("--filter", type=arg_regex, help="regex: benchmarks to follow")
    d.add_argument("--config", help="TOML config (thresholds, acknowledged regressions)")
    d.add_argument("--format", choices=("text", "json"), default="text")
    d.add_argument("--output", "-o", type=arg_output_file,
                   help="write the output here (atomically)")
    d.add_argument("--verbose", "-v", action="store_true", help="list outliers and quiet series")
    p.set_defaults(func=run_history, history_parser=p)


def run_history(args) -> int:
    from .cli import to_json, write_atomic  # noqa: PLC0415
    if not args.history_cmd:
        args.history_parser.print_help(sys.stderr)
        return 2
    if args.history_cmd == "add":
        add(args.store, args.files, allow_dirty=args.allow_dirty, commit=args.commit)
        return 0
    if args.history_cmd == "list":
        for m in machines(args.store):
            by = load_machine(args.store, m)
            print(f"{m}: {len(by)} commits, {sum(len(v) for v in by.values())} runs")
            for c, runs in sorted(by.items(), key=lambda kv: min(r.context.get('date', '') for r in kv[1])):
                print(f"  {c[:12]}  {len(runs)} run(s)  {min(r.context.get('date', '') for r in runs)}")
        return 0
    doc = build_document(args.store, args.repo, args.machine, args.ref, args.metric,
                         args.filter, args.config)
    out = to_json(doc) if args.format == "json" else text(doc, args.verbose)
    if args.output:
        write_atomic(args.output, out)
        print(f"tbd_track: wrote {args.output}", file=sys.stderr)
        if args.format == "text":
            sys.stdout.write(out)
    else:
        sys.stdout.write(out)
    return 1 if open_regressions(doc) else 0

