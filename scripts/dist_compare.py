#!/usr/bin/env python3
"""scripts/dist_compare.py: the data-parallel performance checks on this machine, side by side.

1. All-reduce: tbd_bench's AllReduce/mpi rows against Open MPI's own MPI_Allreduce in a plain
   loop (scripts/mpi_allreduce_peer.cpp, built here with mpicxx), both at 2 ranks, alternated
   ROUNDS times; per size the medians and tbd / peer (1.00: tbd adds nothing).
2. --tbd_dist=mpi at one rank: <Model>/train/batch:<B> without --tbd_dist against
   <Model>/train/batch:<B>/ranks:1 under `mpirun -np 1 --bind-to none` (Open MPI would bind
   the one rank to one core), alternated ROUNDS times; the ratio of the medians.
3. The scaling model: a 2-rank --tbd_dist run of the models (their ranks:1 and ranks:2 rows and
   the AllReduce rows), then `tbd_track simulate`'s validation: the 2-rank step predicted from
   the one-rank profile and the all-reduce rows, against the measured one.

This machine drifts by several percent over minutes, hence the alternation and the medians.
Usage (after scripts/setup.sh; as root Open MPI needs OMPI_ALLOW_RUN_AS_ROOT, set here):
  scripts/dist_compare.py [--rounds 5] [--out DIR] [--part allreduce,overhead,model]
Writes DIR/summary.json and prints the tables; exit 0 (the numbers are for the notes).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.environ.get("TBD_BENCH", os.path.join(ROOT, "build/release/tbd_bench"))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
SIZES = [8, 1024, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]


def run(cmd, **kw):
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"dist_compare: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r.stdout


def bench_json(args, mpirun=None):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    run((mpirun or []) + [BENCH, *args, f"--benchmark_out={path}", "--benchmark_format=json"])
    with open(path) as f:
        doc = json.load(f)
    os.unlink(path)
    return doc


def seconds(row):
    return row["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[row["time_unit"]]


def part_allreduce(rounds, out):
    peer = os.path.join(out, "mpi_allreduce_peer")
    run(["mpicxx", "-O2", "-o", peer, os.path.join(ROOT, "scripts/mpi_allreduce_peer.cpp")])
    tbd = {n: [] for n in SIZES}
    ref = {n: [] for n in SIZES}
    ref_al = {n: [] for n in SIZES}
    sizes = ",".join(str(n) for n in SIZES)
    for _ in range(rounds):
        doc = bench_json(["--tbd_dist=mpi", f"--tbd_allreduce_sizes={sizes}",
                          "--benchmark_filter=^AllReduce/"], ["mpirun", "-np", "2"])
        for row in doc["benchmarks"]:
            n = int(row["name"].split("bytes:")[1].split("/")[0])
            tbd[n].append(seconds(row))
        for flag, into in (([], ref), (["--aligned"], ref_al)):
            for line in run(["mpirun", "-np", "2", peer, *flag, *map(str, SIZES)]).splitlines():
                r = json.loads(line)
                into[r["bytes"]].append(r["time_s"])
    rows = []
    print("MPI loop: a std::vector buffer; aligned: aligned_alloc(64), as tbd's allocator")
    print(f"{'bytes':>12} {'tbd':>12} {'MPI loop':>12} {'aligned':>12} {'tbd/loop':>8} "
          f"{'tbd/aligned':>11} {'busbw tbd GB/s':>15}")
    for n in SIZES:
        a, b, c = (statistics.median(x[n]) for x in (tbd, ref, ref_al))
        rows.append({"bytes": n, "tbd_s": a, "mpi_loop_s": b, "mpi_loop_aligned_s": c,
                     "ratio": a / b, "ratio_aligned": a / c, "tbd_samples": tbd[n],
                     "mpi_samples": ref[n], "mpi_aligned_samples": ref_al[n]})
        print(f"{n:>12} {a * 1e6:>10.1f}us {b * 1e6:>10.1f}us {c * 1e6:>10.1f}us {a / b:>8.3f} "
              f"{a / c:>11.3f} {n / a / 1e9:>15.3f}")
    return rows


def part_overhead(rounds, model, batch):
    none_name = f"{model}/train/batch:{batch}"
    a_s, b_s = [], []
    for _ in range(rounds):
        # min_time 2 s: a step of half a second would otherwise be timed twice.
        d = bench_json([f"--benchmark_filter=^{none_name}$", f"--tbd_batches={batch}",
                        "--benchmark_min_time=2"])
        a_s += [seconds(r) for r in d["benchmarks"] if r["name"] == none_name]
        d = bench_json(["--tbd_dist=mpi", f"--benchmark_filter=^{none_name}/ranks:1",
                        f"--tbd_batches={batch}", "--benchmark_min_time=2"],
                       ["mpirun", "-np", "1", "--bind-to", "none"])
        b_s += [seconds(r) for r in d["benchmarks"] if r["name"].startswith(none_name + "/ranks:1")]
    a, b = statistics.median(a_s), statistics.median(b_s)
    print(f"{none_name}: none {a * 1e3:.1f} ms, --tbd_dist=mpi ranks:1 {b * 1e3:.1f} ms, "
          f"ratio {b / a:.4f} ({rounds} alternated rounds, medians)")
    return {"row": none_name, "none_s": a, "mpi_one_rank_s": b, "ratio": b / a,
            "none_samples": a_s, "mpi_samples": b_s}


def part_model(out, filt):
    path = os.path.join(out, "dist_np2.json")
    run(["mpirun", "-np", "2", BENCH, "--tbd_dist=mpi", "--tbd_quick",
         f"--benchmark_filter={filt}|^AllReduce/", f"--benchmark_out={path}"])
    text = run([sys.executable, os.path.join(ROOT, "tools/tbd_track"), "simulate", path,
                "--link", "measured", "--ranks", "2", "--format", "json"])
    doc = json.loads(text)
    for v in doc["validation"]:
        print(f"{v['name']}: measured {v['measured_s'] * 1e3:.1f} ms, predicted "
              f"{v['predicted_s'] * 1e3:.1f} ms ({v['error'] * 100:+.1f}%)")
    return doc["validation"]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=None)
    p.add_argument("--part", default="allreduce,overhead,model")
    p.add_argument("--model", default="ResNet50")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--models", default="^(ResNet50|InceptionV3|Transformer|Seq2Seq)/train/",
                   help="the rows the scaling model is validated on (quick batches)")
    a = p.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="dist_compare.")
    os.makedirs(out, exist_ok=True)
    summary = {"bench": BENCH}
    parts = a.part.split(",")
    if "allreduce" in parts:
        summary["allreduce"] = part_allreduce(a.rounds, out)
    if "overhead" in parts:
        summary["overhead"] = part_overhead(a.rounds, a.model, a.batch)
    if "model" in parts:
        summary["model"] = part_model(out, a.models)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"dist_compare: wrote {os.path.join(out, 'summary.json')}")


if __name__ == "__main__":
    main()
