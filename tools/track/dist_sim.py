"""dist_sim: data-parallel scaling predicted from one machine's measurements.

`tbd_track simulate RUN.json` takes a `--tbd_dist` run of tbd_bench and predicts a model's
data-parallel training step at P = 2 .. 1024 ranks on links this machine is not on.

Inputs, from the run's JSON:
  - tbd_dist_steps: rank 0's profile of each data-parallel row (fixtures/parallel_fixture.cpp):
    forward, backward and optimizer time, and when backward completed each gradient (the CPU
    backend runs the graph node by node, so that is the per-layer backward breakdown). The
    one-rank row (`.../ranks:1`) is the model's step without communication.
  - AllReduce/<backend>/bytes:<n>/ranks:<P> rows: the all-reduce time at each size, from which
    the link's alpha (per-message latency) and beta (seconds per byte) are fitted.

The all-reduce (Hockney's alpha-beta model; shared/notes/distributed.md 3.6), n bytes, P ranks:
  ring          2(P-1) alpha + 2(P-1)/P n beta
  tree          2 ceil(log2 P) alpha + 2 n beta            (pipelined binary trees)
  hierarchical  ring inside each node of g ranks over the intra-node link, then a ring over
                the N = P/g nodes on the network link (one NIC per node)

The step (an event simulation of DDP's buckets): gradients are cut into buckets as tbd cuts
them (a bucket closes once it reaches its cap; the first has its own cap); bucket k is ready
when its last gradient is (the profile's ready time); all-reduces run one after another in
bucket order, each starting when it is ready and the previous one is done; the optimizer runs
after the last. Compute and communication overlap, except for the share `cpu_share` of the
all-reduce that needs the same cores as compute: while both run, each progresses at
1 / (1 + cpu_share) of its speed (processor sharing). cpu_share is 1 for CPU ranks whose
communication thread has no core of its own (MPI over shared memory copies with the CPU), 0
for a device whose collectives run beside its compute (GPU with NCCL, a NIC doing the
transfer). Outputs: step time T(P), weak-scaling efficiency T(1)/T(P), communication time,
the part of it exposed (T(P) - T(1)) and the overlap fraction.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from .gbjson import InputError, Run, load_runs
from .inputs import arg_number, arg_regex

MIB = 1 << 20


@dataclass
class Link:
    name: str
    alpha: float        # s per message step
    beta: float         # s per byte (1 / bandwidth of the bottleneck link)
    source: str


# Named links: nominal figures (not measured here), the note's 3.6.
LINKS = {
    "1GbE": Link("1 Gb/s Ethernet", 50e-6, 8e-9, "nominal: 125 MB/s, 50 us per message (TCP)"),
    "10GbE": Link("10 Gb/s Ethernet", 20e-6, 0.8e-9, "nominal: 1.25 GB/s, 20 us per message"),
    "100GbIB": Link("100 Gb/s InfiniBand", 2e-6, 0.08e-9,
                    "nominal: 12.5 GB/s, 2 us per message (RDMA)"),
    "NVLink": Link("NVLink (H100/H200 class)", 3e-6, 1 / 400e9,
                   "nominal: 400 GB/s bus bandwidth, 3 us per message; not measured here (one "
                   "GPU per lent box)"),
}
ALGORITHMS = ("ring", "tree", "hierarchical")


def t_allreduce(n: float, p: int, link: Link, algo: str = "ring", per_node: int = 8,
                intra: Link | None = None) -> float:
    if p <= 1 or n <= 0:
        return 0.0
    if algo == "ring":
        return 2 * (p - 1) * link.alpha + 2 * (p - 1) / p * n * link.beta
    if algo == "tree":
        return 2 * math.ceil(math.log2(p)) * link.alpha + 2 * n * link.beta
    if algo == "hierarchical":
        g = max(1, min(per_node, p))
        nodes = math.ceil(p / g)
        inner = intra or LINKS["NVLink"]
        t = 2 * (g - 1) * inner.alpha + 2 * (g - 1) / g * n * inner.beta if g > 1 else 0.0
        if nodes > 1:
            t += 2 * (nodes - 1) * link.alpha + 2 * (nodes - 1) / nodes * n * link.beta
        return t
    raise InputError(f"unknown all-reduce algorithm '{algo}' (valid: {', '.join(ALGORITHMS)})")


# ---- the measured inputs ----

ALLREDUCE_RE = re.compile(r"^AllReduce/([A-Za-z0-9_-]+)/bytes:(\d+)/ranks:(\d+)")


def allreduce_rows(runs: list[Run]) -> dict[int, list[tuple[int, float]]]:
    """ranks -> [(bytes, median seconds)] of the runs' AllReduce rows."""
    out: dict[int, list[tuple[int, float]]] = {}
    for run in runs:
        for name, b in run.benches.items():
            m = ALLREDUCE_RE.match(name)
            if not m or not b.ok or not b.samples.get("real_time"):
                continue
            t = sorted(b.samples["real_time"])[len(b.samples["real_time"]) // 2]
            out.setdefault(int(m.group(3)), []).append((int(m.group(2)), t))
    return {p: sorted(v) for p, v in out.items()}


def fit_link(rows: list[tuple[int, float]], p: int) -> Link:
    """alpha from the small-message plateau (median time at <= 64 B over 2(P-1) steps), beta
    from a least-squares line t = a + b n over the sizes >= 1 MiB (b = 2(P-1)/P beta)."""
    if p < 2:
        raise InputError("fitting a link needs all-reduce rows at 2 or more ranks")
    big = [(n, t) for n, t in rows if n >= MIB]
    small = sorted(t for n, t in rows if n <= 64)
    if len(big) < 2:
        raise InputError(f"fitting beta needs AllReduce rows of 1 MiB or more at ranks:{p} "
                         f"(found {len(big)}); run tbd_bench with --tbd_dist and the default "
                         "--tbd_allreduce_sizes")
    mx = sum(n for n, _ in big) / len(big)
    my = sum(t for _, t in big) / len(big)
    sxx = sum((n - mx) ** 2 for n, _ in big)
    b = sum((n - mx) * (t - my) for n, t in big) / sxx
    a = my - b * mx
    beta = b * p / (2 * (p - 1))
    alpha = (small[len(small) // 2] if small else max(a, 0.0)) / (2 * (p - 1))
    return Link(f"measured here ({p} ranks)", alpha, beta,
                f"fitted: alpha from {len(small)} sizes <= 64 B, beta from {len(big)} sizes "
                f">= 1 MiB (busbw {1 / beta / 1e9:.3g} GB/s)")


@dataclass
class Profile:
    name: str            # the row, without /ranks:P
    model: str
    batch: int
    ranks: int
    step_s: float        # the row's measured step (max over ranks)
    forward_s: float
    backward_s: float
    optimizer_s: float
    other_s: float       # step - forward - backward - wait - optimizer (bookkeeping)
    grads: list[tuple[int, float]]   # (bytes, ready seconds from the step's start), in order
    comm_busy_s: float
    wait_s: float


def profiles(runs: list[Run]) -> list[Profile]:
    out = []
    for run in runs:
        for r in run.dist_steps:
            name = str(r.get("name", ""))
            m = re.match(r"^([^/]+)/train/batch:(\d+)(.*?)/ranks:(\d+)$", name)
            if not m:
                continue
            grads = r.get("grads") or []
            if not grads or any("ready_s" not in g for g in grads):
                continue  # no per-gradient completion times (a run from before they were recorded)
            fwd, bwd = float(r["forward_s"]), float(r["backward_s"])
            opt, wait = float(r["optimizer_s"]), float(r.get("wait_s", 0))
            step = float(r["step_s"])
            own = float(r.get("rank0_step_s", step))
            out.append(Profile(
                name=f"{m.group(1)}/train/batch:{m.group(2)}{m.group(3)}", model=m.group(1),
                batch=int(m.group(2)), ranks=int(m.group(4)), step_s=step, forward_s=fwd,
                backward_s=bwd, optimizer_s=opt, other_s=max(0.0, own - fwd - bwd - wait - opt),
                grads=[(int(g["bytes"]), float(g["ready_s"])) for g in grads],
                comm_busy_s=float(r.get("comm_busy_s", 0)), wait_s=wait))
    return out


def cpu_share_of(run: Run) -> float:
    """1 when the run's ranks have no spare core for the communication thread (CPU backend,
    ranks x threads >= cores on the machine), else 0."""
    ctx = run.context
    if ctx.get("backend") != "cpu":
        return 0.0
    m = re.search(r"\((\d+) on this machine, (\d+) threads each\)",
                  str(ctx.get("dist_summary", "")))
    cores = int(ctx.get("num_cpus") or 0)
    if not m or not cores:
        return 1.0
    return 1.0 if int(m.group(1)) * int(m.group(2)) >= cores else 0.0


# ---- the step ----

def buckets_of(grads: list[tuple[int, float]], cap_mib: float, first_mib: float
               ) -> list[tuple[int, float]]:
    """tbd's bucketing (parallel/data_parallel.cpp): close once the cap is reached."""
    out, n, ready = [], 0, 0.0
    for b, r in grads:
        n += b
        ready = max(ready, r)
        cap = (first_mib if not out and first_mib > 0 else cap_mib) * MIB
        if cap > 0 and n >= cap:
            out.append((n, ready))
            n, ready = 0, 0.0
    if n:
        out.append((n, ready))
    return out


@dataclass
class Prediction:
    ranks: int
    step_s: float
    efficiency: float
    comm_s: float
    exposed_s: float
    overlap: float
    buckets: int


def simulate(prof: Profile, p: int, link: Link, algo: str = "ring", bucket_mib: float = 25,
             first_mib: float = 1, cpu_share: float = 0.0, per_node: int = 8) -> Prediction:
    """One data-parallel step at P ranks from the one-rank profile (see the top)."""
    bks = buckets_of(prof.grads, bucket_mib, first_mib)
    work = [t_allreduce(n, p, link, algo, per_node) for n, _ in bks]
    ready = [r for _, r in bks]
    compute_end = prof.forward_s + prof.backward_s + prof.other_s
    eps = 1e-15
    t = c = 0.0       # wall time; compute done so far (seconds of one-rank compute)
    k, left = 0, 0.0  # the next bucket to reduce; the work left of it while it runs
    active = False
    slow = 1.0 + max(0.0, cpu_share)
    while True:
        if not active and k < len(bks) and (c >= ready[k] - eps or c >= compute_end - eps):
            active, left = True, work[k]
        comp_on = c < compute_end - eps
        if not active:
            if k >= len(bks):
                t += max(0.0, compute_end - c)  # no communication left
                break
            dt = min(ready[k], compute_end) - c  # compute alone until bucket k is ready
            t, c = t + dt, c + dt
            continue
        rc = 1.0 / slow if comp_on else 0.0  # both share the cores while both run
        rm = 1.0 / slow if comp_on else 1.0
        dt = min(left / rm, (compute_end - c) / rc if comp_on else math.inf)
        t += dt
        c += rc * dt
        left -= rm * dt
        if left <= eps:
            active = False
            k += 1
    step = t + prof.optimizer_s
    base = compute_end + prof.optimizer_s
    comm = sum(work)
    exposed = max(0.0, step - base)
    return Prediction(p, step, base / step if step > 0 else float("nan"), comm, exposed,
                      (1 - exposed / comm) if comm > 0 else float("nan"), len(bks))


# ---- the command ----

def _ranks_list(s: str) -> list[int]:
    try:
        v = [int(x) for x in s.split(",") if x]
    except ValueError:
        raise InputError(f"--ranks: '{s}' is not a comma-separated list of integers") from None
    if not v or any(x < 2 for x in v):
        raise InputError(f"--ranks: '{s}': every rank count must be 2 or more")
    return v


def validate(runs: list[Run], profs: list[Profile], algo: str, bucket_mib: float,
             first_mib: float) -> list[dict]:
    """Each measured ranks:P row against the prediction from its ranks:1 row and the
    AllReduce rows at P of the same runs."""
    fits = {}
    rows = allreduce_rows(runs)
    out = []
    share = max((cpu_share_of(r) for r in runs), default=0.0)
    one = {pr.name: pr for pr in profs if pr.ranks == 1}
    for pr in profs:
        if pr.ranks < 2 or pr.name not in one or pr.ranks not in rows:
            continue
        if pr.ranks not in fits:
            fits[pr.ranks] = fit_link(rows[pr.ranks], pr.ranks)
        pred = simulate(one[pr.name], pr.ranks, fits[pr.ranks], algo, bucket_mib, first_mib,
                        share)
        out.append({"name": f"{pr.name}/ranks:{pr.ranks}", "ranks": pr.ranks,
                    "measured_s": pr.step_s, "predicted_s": pred.step_s,
                    "error": pred.step_s / pr.step_s - 1, "one_rank_s": one[pr.name].step_s,
                    "cpu_share": share, "link": fits[pr.ranks].source})
    return out


def run_simulate(args) -> int:
    runs = load_runs(args.runs)
    profs = profiles(runs)
    ones = [p for p in profs if p.ranks == 1 and (not args.model or re.search(args.model, p.name))]
    if not ones:
        raise InputError("no one-rank data-parallel profile (a <Model>/train/batch:<N>/ranks:1 "
                         "row with per-gradient times) in the runs; run tbd_bench --tbd_dist=mpi "
                         "(CPU) or --tbd_dist=nccl (CUDA), e.g. mpirun -np 2 tbd_bench "
                         "--tbd_dist=mpi --tbd_quick --benchmark_out=dist.json")
    ranks = _ranks_list(args.ranks)
    links: list[Link] = []
    for name in args.link.split(","):
        if name == "measured":
            rows = allreduce_rows(runs)
            if not rows:
                raise InputError("--link measured: the runs have no AllReduce rows")
            p = max(rows)
            links.append(fit_link(rows[p], p))
        elif name in LINKS:
            links.append(LINKS[name])
        else:
            raise InputError(f"--link: unknown link '{name}' (valid: measured, "
                             f"{', '.join(LINKS)})")
    share = args.cpu_share
    doc = {"links": [vars(lk) for lk in links], "algorithm": args.algorithm,
           "bucket_mib": args.bucket_mb, "first_bucket_mib": args.first_bucket_mb,
           "models": [], "validation": validate(runs, profs, args.algorithm, args.bucket_mb,
                                                args.first_bucket_mb)}
    for prof in ones:
        scaled = prof
        if args.step_s:
            f = args.step_s / prof.step_s
            scaled = Profile(**{**vars(prof), "step_s": prof.step_s * f,
                                "forward_s": prof.forward_s * f, "backward_s": prof.backward_s * f,
                                "optimizer_s": prof.optimizer_s * f, "other_s": prof.other_s * f,
                                "grads": [(b, r * f) for b, r in prof.grads]})
        entry = {"name": prof.name, "one_rank_step_s": scaled.step_s,
                 "grad_bytes": sum(b for b, _ in prof.grads), "predictions": []}
        for lk in links:
            s = share if share is not None else 0.0
            for p in ranks:
                pr = simulate(scaled, p, lk, args.algorithm, args.bucket_mb,
                              args.first_bucket_mb, s)
                entry["predictions"].append({"link": lk.name, **vars(pr)})
        doc["models"].append(entry)
    if args.format == "json":
        print(json.dumps(doc, indent=1))
        return 0
    print(render_text(doc))
    return 0


def _ms(s: float) -> str:
    return f"{s * 1e3:.4g} ms"


def render_text(doc: dict) -> str:
    L = [f"all-reduce: {doc['algorithm']}; buckets {doc['bucket_mib']:g} MiB (first "
         f"{doc['first_bucket_mib']:g} MiB)"]
    for lk in doc["links"]:
        L.append(f"  link {lk['name']}: alpha {lk['alpha'] * 1e6:.3g} us, "
                 f"{1 / lk['beta'] / 1e9:.3g} GB/s ({lk['source']})")
    for m in doc["models"]:
        L.append("")
        L.append(f"{m['name']}: one-rank step {_ms(m['one_rank_step_s'])}, "
                 f"{m['grad_bytes'] / 1e6:.4g} MB of gradients")
        L.append(f"  {'link':<28} {'ranks':>6} {'step':>12} {'efficiency':>10} "
                 f"{'comm':>12} {'exposed':>12} {'overlap':>8}")
        for p in m["predictions"]:
            ov = "-" if p["overlap"] != p["overlap"] else f"{p['overlap'] * 100:.0f}%"
            L.append(f"  {p['link']:<28} {p['ranks']:>6} {_ms(p['step_s']):>12} "
                     f"{p['efficiency'] * 100:>9.1f}% {_ms(p['comm_s']):>12} "
                     f"{_ms(p['exposed_s']):>12} {ov:>8}")
    if doc["validation"]:
        L.append("")
        L.append("validation (measured here, predicted from the ranks:1 row and the AllReduce "
                 "rows of the same run):")
        for v in doc["validation"]:
            L.append(f"  {v['name']}: measured {_ms(v['measured_s'])}, predicted "
                     f"{_ms(v['predicted_s'])} ({v['error'] * 100:+.1f}%), cpu_share "
                     f"{v['cpu_share']:g}")
    return "\n".join(L)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "simulate", help="predict data-parallel step time and scaling at 2..1024 ranks from a "
        "--tbd_dist run (alpha-beta all-reduce model, DDP bucket event simulation)",
        description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="FILE_OR_DIR",
                   help="tbd_bench JSON of a --tbd_dist run (with its AllReduce rows)")
    p.add_argument("--model", type=arg_regex,
                   help="regex over the model rows (default: every one-rank row)")
    p.add_argument("--link", default="measured,1GbE,10GbE,100GbIB,NVLink",
                   help="comma-separated: measured (fitted from the AllReduce rows), "
                   + ", ".join(LINKS) + " (default: all)")
    p.add_argument("--algorithm", default="ring", choices=ALGORITHMS)
    p.add_argument("--ranks", default="2,4,8,16,32,64,128,256,512,1024",
                   help="rank counts to predict (default 2..1024)")
    p.add_argument("--bucket-mb", type=arg_number(low=0), default=25.0,
                   help="bucket cap, MiB (default 25; 0: no cap)")
    p.add_argument("--first-bucket-mb", type=arg_number(low=0), default=1.0,
                   help="first bucket's cap, MiB (default 1; 0: the cap of the others)")
    p.add_argument("--cpu-share", type=arg_number(low=0, high=1), default=None,
                   help="share of an all-reduce that competes with compute for the same cores "
                   "(default 0 for the predictions: a NIC or GPU does the transfer; the "
                   "validation uses the run's own: 1 for CPU ranks without a spare core)")
    p.add_argument("--step-s", type=arg_number(low=0, open_low=True), default=None,
                   help="rescale the one-rank profile to this step time (seconds), e.g. to "
                   "ask what a device that much faster would see")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run_simulate)
