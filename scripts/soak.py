#!/usr/bin/python3
"""scripts/soak.py: the soak. tbd_bench's default run several times back to back under ASan and
UBSan (LeakSanitizer on), then a data-parallel run of every model at 2 ranks (Open MPI), with
every check a run must pass written down and measured:

- every process exits 0, and its log has no AddressSanitizer, LeakSanitizer or UBSan report;
- no error rows beyond the documented ones (ALLOWED_ERRORS, none today);
- the runs list the same rows, and every row's planned `peak_memory_bytes` is the same in each;
- flat memory: each run's peak resident set (the kernel's, of the tbd_bench process) is within
  RSS_SLACK of the first run's, and in the data-parallel run (two repetitions of each model)
  the ranks' resident set at the end of a model's second repetition is within RSS_SLACK of
  what it was at the end of its first (a step that leaks grows it).

  scripts/soak.py                          build both binaries, 3 default runs, the parallel run
  scripts/soak.py --runs 1 --no-dist       one ASan run only
  scripts/soak.py --asan-bench B --bench R use these binaries (no build)

The ASan binary is the `asan-bench` preset's (build/asan-bench/tbd_bench); the data-parallel one
the release preset's. Everything lands in --out (default build/soak/<UTC time>/): the runs'
JSON, their logs, the resident set sampled every 0.5 s (rss-*.csv: seconds, MiB) and
summary.md, which is also printed. Timings in these files are not measurements (ASan, and
nothing stops other work from sharing the machine). Exit: 0 every check holds, 1 one failed,
2 bad usage.
"""
import argparse
import csv
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Error rows a run may have by design, as (name regex, message regex). The default run has none
# (every configuration of the quick set runs on the CPU backend); in the data-parallel run, WGAN
# and A3C, whose steps are their own, are error rows (docs/data_parallel.md, "Rows").
ALLOWED_ERRORS = [(r"^(WGAN|A3C)/train/.*/ranks:", r"cannot run data-parallel")]
RSS_SLACK = (0.05, 32 << 20)  # relative, absolute: growth allowed before memory is "not flat"
SANITIZER_REPORT = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:")
ROW_LINE = re.compile(r"^\[(\d+)/(\d+)\] (\S+)")
DIST_FILTER = "^[A-Z][A-Za-z0-9]*/train/.*/ranks:2/"


def tree_rss(root_pid):
    """Bytes resident in root_pid and all its descendants (an mpiexec's ranks included)."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def run_sampled(cmd, env, log_path, rss_path):
    """Runs cmd, its output to log_path, sampling the process tree's resident set every 0.5 s.
    Returns (exit status, peak RSS of the process itself from wait4, [(row, k, rss)] at each
    row line the table prints, the tree's sampled peak, seconds)."""
    start = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, errors="replace", cwd=ROOT)
    samples, rows, done = [], [], threading.Event()

    def sample():
        while not done.is_set():
            samples.append((time.monotonic() - start, tree_rss(p.pid)))
            done.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    seen = {}
    with open(log_path, "w") as log:
        for line in p.stdout:
            log.write(line)
            m = ROW_LINE.match(line)
            if m and not re.search(r"_(mean|median|stddev|cv)$", m.group(3)):
                name = m.group(3)
                seen[name] = seen.get(name, 0) + 1
                rows.append((name, seen[name], tree_rss(p.pid)))
                print(f"  {line.rstrip()[:110]}", flush=True)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    with open(rss_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["seconds", "rss_mib"])
        for t, b in samples:
            w.writerow([f"{t:.1f}", f"{b / 2**20:.1f}"])
    tree_peak = max((b for _, b in samples), default=0)
    return p.returncode, usage.ru_maxrss * 1024, rows, tree_peak, time.monotonic() - start


def read_rows(path):
    """{name: row} of the iteration rows of a tbd_bench JSON file (none if it is missing)."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return {b["name"]: b for b in doc.get("benchmarks", []) if b.get("run_type") == "iteration"}


def error_rows(rows):
    """(undocumented error rows as 'name: message', names of the documented ones)."""
    bad, documented = [], []
    for name, b in rows.items():
        if b.get("error_occurred"):
            msg = b.get("error_message", "")
            if any(re.search(n, name) and re.search(m, msg) for n, m in ALLOWED_ERRORS):
                documented.append(name.split("/")[0])
            else:
                bad.append(f"{name}: {msg}")
    return bad, documented


def sanitizer_reports(log_path):
    with open(log_path, errors="replace") as f:
        return [l.rstrip() for l in f if SANITIZER_REPORT.search(l)]


def within_slack(first, later):
    return later <= first * (1 + RSS_SLACK[0]) + RSS_SLACK[1]


def mib(b):
    return f"{b / 2**20:.1f}"


def build(preset, target):
    if not os.path.isfile(os.path.join(ROOT, "build", preset, "build.ninja")):
        subprocess.run(["cmake", "--preset", preset], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", os.path.join(ROOT, "build", preset), "--target", target],
                   cwd=ROOT, check=True)
    return os.path.join(ROOT, "build", preset, target)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="ASan default runs (default 3)")
    ap.add_argument("--no-dist", action="store_true", help="skip the data-parallel run")
    ap.add_argument("--asan-bench", help="the ASan+UBSan tbd_bench (default: build it)")
    ap.add_argument("--bench", help="the release tbd_bench for the parallel run (default: build)")
    ap.add_argument("--out", help="output folder (default build/soak/<UTC time>)")
    ap.add_argument("--filter", help="--benchmark_filter of the default runs (default: all)")
    ap.add_argument("--dist-filter", default=DIST_FILTER,
                    help=f"--benchmark_filter of the parallel run (default {DIST_FILTER})")
    a = ap.parse_args()
    if a.runs < 1:
        ap.error(f"--runs={a.runs}: at least 1")
    mpiexec = shutil.which("mpiexec")
    if not a.no_dist and not mpiexec:
        ap.error("no mpiexec for the data-parallel run (apt-get install openmpi-bin), or --no-dist")
    for flag, path in (("--asan-bench", a.asan_bench), ("--bench", a.bench)):
        if path and not os.access(path, os.X_OK):
            ap.error(f"{flag}={path}: not an executable")
    out = a.out or os.path.join(
        ROOT, "build", "soak", datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ"))
    os.makedirs(out, exist_ok=True)

    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, text=True,
                          capture_output=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           text=True, capture_output=True).stdout.strip()
    built = (f"built here from {head}{' with uncommitted changes' if dirty else ''}")
    asan = a.asan_bench or build("asan-bench", "tbd_bench")
    asan_from = "given (--asan-bench)" if a.asan_bench else built
    failures, lines = [], []
    env = dict(os.environ, TBD_BENCH=asan, OMP_WAIT_POLICY="PASSIVE",
               ASAN_OPTIONS="detect_leaks=1:alloc_dealloc_mismatch=0:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1")
    lines += ["## Default run under ASan + UBSan (LeakSanitizer on)", "",
              f"`TBD_BENCH={os.path.relpath(asan, ROOT)} scripts/run_default.sh"
              f"{' --benchmark_filter=' + a.filter if a.filter else ''}`, {a.runs} times "
              f"back to back; the binary {asan_from}.", "",
              "| run | exit | rows | error rows | sanitizer reports | peak RSS MiB | minutes |",
              "|---|---|---|---|---|---|---|"]
    runs = []
    for i in range(1, a.runs + 1):
        js = os.path.join(out, f"default-{i}.json")
        if os.path.exists(js):
            os.remove(js)
        print(f"soak: default run {i}/{a.runs} under ASan -> {js}", flush=True)
        cmd = ["scripts/run_default.sh"] + ([f"--benchmark_filter={a.filter}"] if a.filter else [])
        rc, peak, _, _, secs = run_sampled(cmd, dict(env, TBD_OUT=js),
                                           os.path.join(out, f"default-{i}.log"),
                                           os.path.join(out, f"rss-default-{i}.csv"))
        rows = read_rows(js)
        reports = sanitizer_reports(os.path.join(out, f"default-{i}.log"))
        errs, _ = error_rows(rows) if rows is not None else (["no result file"], [])
        runs.append((rc, peak, rows))
        lines.append(f"| {i} | {rc} | {len(rows or {})} | {len(errs)} | {len(reports)} | "
                     f"{mib(peak)} | {secs / 60:.1f} |")
        if rc != 0:
            failures.append(f"default run {i}: exit {rc} (log: default-{i}.log)")
        failures += [f"default run {i}: error row {e}" for e in errs]
        failures += [f"default run {i}: {r}" for r in reports[:5]]
    first_rc, first_peak, first_rows = runs[0]
    for i, (rc, peak, rows) in enumerate(runs[1:], start=2):
        if not within_slack(first_peak, peak):
            failures.append(f"memory not flat: run {i}'s peak RSS {mib(peak)} MiB against run 1's "
                            f"{mib(first_peak)} MiB")
        if rows is None or first_rows is None:
            continue
        if set(rows) != set(first_rows):
            failures.append(f"run {i} lists other rows than run 1: "
                            f"{sorted(set(rows) ^ set(first_rows))[:5]}")
        changed = [n for n in rows if n in first_rows and
                   rows[n].get("peak_memory_bytes") != first_rows[n].get("peak_memory_bytes")]
        if changed:
            failures.append(f"run {i}: planned peak_memory_bytes differs from run 1 on "
                            f"{len(changed)} rows, e.g. {changed[0]}")
    lines.append("")

    if not a.no_dist:
        bench = a.bench or build("release", "tbd_bench")
        bench_from = "given (--bench)" if a.bench else built
        js = os.path.join(out, "dist.json")
        if os.path.exists(js):
            os.remove(js)
        cmd = [mpiexec, "-n", "2", "--oversubscribe"] + (
            ["--allow-run-as-root"] if os.geteuid() == 0 else []) + [
            bench, "--tbd_backend=cpu", "--tbd_dist=mpi", "--tbd_quick",
            "--benchmark_min_time=0.2", "--benchmark_repetitions=2",
            f"--benchmark_filter={a.dist_filter}", f"--benchmark_out={js}"]
        print("soak: data-parallel run, every model at 2 ranks, 2 repetitions", flush=True)
        rc, _, marks, tree_peak, secs = run_sampled(cmd, dict(os.environ, OMP_WAIT_POLICY="PASSIVE"),
                                                    os.path.join(out, "dist.log"),
                                                    os.path.join(out, "rss-dist.csv"))
        rows = read_rows(js) or {}
        errs, documented = error_rows(rows)
        models = sorted({n.split("/")[0] for n in rows})
        lines += ["## Data-parallel run (release, Open MPI, 2 ranks)", "",
                  f"`{' '.join(os.path.basename(c) if c == bench else c for c in cmd[1:])}`: "
                  f"exit {rc}, {len(rows)} rows ({len(models)} models: {', '.join(models)}), "
                  f"{len(errs)} undocumented error rows ({len(documented)} documented: "
                  f"{', '.join(documented) or 'none'}, whose steps are their own), "
                  f"ranks' peak RSS {mib(tree_peak)} MiB, "
                  f"{secs / 60:.1f} minutes; the binary {bench_from}.", "",
                  "| row | ranks' RSS after repetition 1 MiB | after repetition 2 MiB |",
                  "|---|---|---|"]
        if rc != 0:
            failures.append(f"data-parallel run: exit {rc} (log: dist.log)")
        failures += [f"data-parallel run: error row {e}" for e in errs]
        after = {}
        for name, k, rss in marks:
            after.setdefault(name, {})[k] = rss
        for name, reps in after.items():
            if 1 in reps and 2 in reps:
                lines.append(f"| `{name}` | {mib(reps[1])} | {mib(reps[2])} |")
                if not within_slack(reps[1], reps[2]):
                    failures.append(f"memory not flat: {name}: {mib(reps[1])} -> "
                                    f"{mib(reps[2])} MiB from its first repetition to its second")
        lines.append("")

    verdict = "every check holds" if not failures else f"{len(failures)} checks failed"
    lines = [f"# Soak: {verdict}", "",
             f"Started at commit {head}, ended {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC. "
             "Flat memory: a later peak "
             f"within {RSS_SLACK[0]:.0%} + {RSS_SLACK[1] >> 20} MiB of the earlier one.", ""
             ] + lines + [f"- FAILED: {f}" for f in failures]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"soak: {out}/summary.md")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
