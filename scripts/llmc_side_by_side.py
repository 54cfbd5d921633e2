#!/usr/bin/env python3
"""llm.c's CPU trainer (train_gpt2.c) against tbd's GPT2 row, alternated on this machine.

  scripts/llmc_side_by_side.py --llmc ../llm.c                    # B 4, T 64, 3 rounds
  scripts/llmc_side_by_side.py --llmc ../llm.c --batch 4 --len 1024 --steps 4 --rounds 2

llm.c is not part of tbd: clone it beside the project (git clone
https://github.com/karpathy/llm.c ../llm.c) and pass its directory; nothing of it is committed.
The script builds train_gpt2.c as llm.c's Makefile does (cc -Ofast -march=native -fopenmp -DOMP)
from a copy whose main() is changed only in what it runs: B and T from the flags, --steps
training steps, no validation passes and no text generation between them (both outside the
timed region in llm.c too, but minutes long). The timed region is llm.c's own: clock_gettime
around one step (next batch, forward, zero_grad, backward, AdamW update), printed as "took X
ms". llm.c's first step is left out (warm-up: page faults of its lazily touched buffers).

Its inputs are synthetic, as tbd's: a GPT-2 124M checkpoint in llm.c's format (version 3, the
vocabulary 50257 padded to 50304) with N(0, 0.02) weights, LayerNorm scales one and biases
zero, and uniformly random tokens in llm.c's token-file format; no tokenizer (llm.c then warns
and skips decoding). They are written once under --work (default
~/.cache/tbd-peers/llmc). Training speed does not depend on the weights' values.

tbd's side is `tbd_bench --benchmark_filter=^GPT2/train/batch:B/len:T$` with the same thread
count (OMP_NUM_THREADS for both). Each round runs llm.c, then tbd, alternating which goes first,
so both see the same spells of a machine whose speed drifts; the table gives each round's
medians and, last, the median over rounds of tbd's speed-up (llm.c's step time over tbd's).
Differences in the work: llm.c's loss takes the softmax over the 50257 real tokens, tbd's over
all 50304 (0.1% of the head's FLOPs); llm.c's attention loops over the causal half only,
tbd's computes all T^2 scores (the same model FLOPs, more executed ones for tbd).
Exit status: 0 the table was made, 1 a side failed, 2 bad arguments or no llm.c.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# GPT-2 124M (llm.c's d12), as models/gpt2.h.
L, C, NH, MAX_T, V, VP = 12, 768, 12, 1024, 50257, 50304
# main()'s lines the copy changes, each of which must be found exactly once.
PATCHES = [
    ("int B = 4;", "int B = TBD_B;"),
    ("int T = 64;", "int T = TBD_T;"),
    ("for (int step = 0; step <= 40; step++) {", "for (int step = 0; step < TBD_STEPS; step++) {"),
    ("if (step % 10 == 0) {", "if (0) { // tbd: no validation passes"),
    ("if (step > 0 && step % 20 == 0) {", "if (0) { // tbd: no generation"),
]


def die(msg, code=2):
    print(f"llmc_side_by_side: {msg}", file=sys.stderr)
    sys.exit(code)


def write_checkpoint(path):
    import numpy as np
    header = np.zeros(256, dtype=np.int32)
    header[:8] = [20240326, 3, MAX_T, V, L, NH, C, VP]
    rng = np.random.default_rng(0)
    # llm.c's parameter tensors in order (fill_in_parameter_sizes); LayerNorm weights are ones.
    tensors = [("wte", VP * C), ("wpe", MAX_T * C), ("ln1w", L * C), ("ln1b", L * C),
               ("qkvw", L * 3 * C * C), ("qkvb", L * 3 * C), ("attprojw", L * C * C),
               ("attprojb", L * C), ("ln2w", L * C), ("ln2b", L * C), ("fcw", L * 4 * C * C),
               ("fcb", L * 4 * C), ("fcprojw", L * C * 4 * C), ("fcprojb", L * C),
               ("lnfw", C), ("lnfb", C)]
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        header.tofile(f)
        for name, n in tensors:
            if name.endswith("b"):
                a = np.zeros(n, dtype=np.float32)
            elif name in ("ln1w", "ln2w", "lnfw"):
                a = np.ones(n, dtype=np.float32)
            else:
                a = (rng.standard_normal(n, dtype=np.float32) * 0.02).astype(np.float32)
            a.tofile(f)
    os.replace(tmp, path)
    return sum(n for _, n in tensors)


def write_tokens(path, n):
    import numpy as np
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [20240520, 1, n]
    tokens = np.random.default_rng(1).integers(0, V, size=n, dtype=np.uint16)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        header.tofile(f)
        tokens.tofile(f)
    os.replace(tmp, path)


def prepare(llmc, work, batch, length, steps):
    src = os.path.join(llmc, "train_gpt2.c")
    if not os.path.isfile(src):
        die(f"--llmc {llmc}: no train_gpt2.c there (clone https://github.com/karpathy/llm.c)")
    os.makedirs(os.path.join(work, "dev/data/tinyshakespeare"), exist_ok=True)
    ckpt = os.path.join(work, "gpt2_124M.bin")
    if not os.path.exists(ckpt):
        print("llmc_side_by_side: writing a synthetic GPT-2 124M checkpoint "
              f"({write_checkpoint(ckpt):,} parameters)", flush=True)
    data = os.path.join(work, "dev/data/tinyshakespeare")
    need = 4 * batch * length * (steps + 2) + 1
    for split in ("train", "val"):
        p = os.path.join(data, f"tiny_shakespeare_{split}.bin")
        if not os.path.exists(p) or os.path.getsize(p) < 1024 + 2 * need:
            write_tokens(p, max(need, 1 << 16))
    with open(src, encoding="utf-8") as f:
        code = f.read()
    for old, new in PATCHES:
        if code.count(old) != 1:
            die(f"{src}: expected `{old}` once in main(), found it {code.count(old)} times "
                "(a newer llm.c? adjust PATCHES)")
        code = code.replace(old, new)
    copy = os.path.join(work, "train_gpt2_tbd.c")
    with open(copy, "w", encoding="utf-8") as f:
        f.write(code)
    exe = os.path.join(work, f"train_gpt2_b{batch}_t{length}")
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-Ofast", "-Wno-unused-result", "-Wno-ignored-pragmas", "-Wno-unknown-attributes",
           "-march=native", "-fopenmp", "-DOMP", f"-DTBD_B={batch}", f"-DTBD_T={length}",
           f"-DTBD_STEPS={steps}", "-I", llmc, copy, "-lm", "-lgomp", "-o", exe]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"building llm.c failed: {' '.join(cmd)}\n{r.stderr[-2000:]}", 1)
    return exe


def run_llmc(exe, work, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run([exe], cwd=work, capture_output=True, text=True, env=env)
    times = [float(m) for m in re.findall(r"took ([0-9.]+) ms", r.stdout)]
    if r.returncode != 0 or len(times) < 2:
        die(f"llm.c failed (exit {r.returncode}):\n{(r.stdout + r.stderr)[-2000:]}", 1)
    return times[1:]  # the first step is the warm-up


def run_tbd(tbd, batch, length, threads, min_time):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "tbd.json")
        cmd = [tbd, f"--benchmark_filter=^GPT2/train/batch:{batch}/len:{length}$",
               f"--tbd_seq_len={length}", f"--tbd_batches={batch}", f"--tbd_threads={threads}",
               f"--benchmark_min_time={min_time}", "--benchmark_repetitions=3",
               f"--benchmark_out={out}", "--benchmark_out_format=json"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0 or not os.path.exists(out):
            die(f"tbd_bench failed (exit {r.returncode}):\n{r.stderr[-2000:]}", 1)
        with open(out, encoding="utf-8") as f:
            rows = json.load(f)["benchmarks"]
    ms = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    times = [b["real_time"] * ms[b["time_unit"]] for b in rows
             if b.get("run_type") == "iteration" and "error_message" not in b]
    if not times:
        die("tbd_bench gave no timed row: " + "; ".join(b.get("error_message", "")
                                                        for b in rows), 1)
    mfu = [b["mfu"] for b in rows if b.get("run_type") == "iteration" and "mfu" in b]
    return times, mfu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llmc", required=True, help="a clone of karpathy/llm.c")
    ap.add_argument("--tbd", default=os.path.join(ROOT, "build/release/tbd_bench"))
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--len", type=int, default=64, dest="length")
    ap.add_argument("--steps", type=int, default=8, help="llm.c steps per round (first dropped)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--min-time", type=float, default=2.0, help="tbd's seconds per repetition")
    ap.add_argument("--work", default=os.path.join(os.path.expanduser("~"), ".cache/tbd-peers/llmc"))
    a = ap.parse_args()
    if a.batch < 1 or not 1 <= a.length <= MAX_T:
        die(f"--batch {a.batch} --len {a.length}: need B >= 1 and 1 <= T <= {MAX_T}")
    if a.steps < 2 or a.rounds < 1 or a.threads < 1:
        die("--steps must be at least 2, --rounds and --threads at least 1")
    if not (os.path.isfile(a.tbd) and os.access(a.tbd, os.X_OK)):
        die(f"--tbd {a.tbd} is not an executable (build it: cmake --build build/release)")
    if shutil.which(os.environ.get("CC", "cc")) is None:
        die("no C compiler (cc) to build llm.c")
    exe = prepare(a.llmc, a.work, a.batch, a.length, a.steps)
    commit = subprocess.run(["git", "-C", a.llmc, "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown commit"
    print(f"llm.c {commit} train_gpt2.c against tbd GPT2/train/batch:{a.batch}/len:{a.length}, "
          f"{a.threads} threads, {a.rounds} rounds", flush=True)
    tokens = a.batch * a.length
    rows, ratios = [], []
    for r in range(a.rounds):
        order = ("llmc", "tbd") if r % 2 == 0 else ("tbd", "llmc")
        got = {}
        for side in order:
            got[side] = run_llmc(exe, a.work, a.threads) if side == "llmc" else \
                run_tbd(a.tbd, a.batch, a.length, a.threads, a.min_time)
        lm = statistics.median(got["llmc"])
        tm = statistics.median(got["tbd"][0])
        ratios.append(lm / tm)
        mfu = statistics.median(got["tbd"][1]) if got["tbd"][1] else None
        rows.append((r + 1, lm, tm, mfu))
        print(f"  round {r + 1}: llm.c {lm:.0f} ms, tbd {tm:.0f} ms: {lm / tm:.2f}x", flush=True)
    print()
    print("| round | llm.c ms/step | llm.c tokens/s | tbd ms/step | tbd tokens/s | tbd mfu | "
          "tbd/llm.c |")
    print("|---|---|---|---|---|---|---|")
    for r, lm, tm, mfu in rows:
        print(f"| {r} | {lm:.0f} | {tokens / lm * 1e3:.0f} | {tm:.0f} | {tokens / tm * 1e3:.0f} | "
              f"{'-' if mfu is None else f'{100 * mfu:.1f}%'} | {lm / tm:.2f}x |")
    print(f"\ntbd's speed-up over llm.c, median of {a.rounds} rounds: "
          f"{statistics.median(ratios):.2f}x (rounds: "
          f"{', '.join(f'{x:.2f}' for x in ratios)})")


if __name__ == "__main__":
    main()
