#!/usr/bin/env python3
"""scripts/torch_side_by_side.py: PyTorch timings of the layers tbd benchmarks, beside tbd's.

Run by scripts/gpu_check.sh on a GPU machine. For each layer below and each math mode (strict
FP32: TF32 off in cuBLAS and cuDNN; TF32: on), it times the forward pass and the training step
(forward + backward) with CUDA events after a warm-up, reads tbd_bench's Google Benchmark JSON
for the same math mode, and prints a short table of times and tbd/torch ratios LAST.

  python3 scripts/torch_side_by_side.py --tbd-json fp32=OUT/bench_fp32.json \
      --tbd-json tf32=OUT/bench_tf32.json --out OUT/torch.json

The layer set and the regular expressions that find the matching tbd_bench rows are at the top
(TBD_ROWS): tbd_bench's names look like `Conv2d/resnet50.layer2.0.conv2/fwd/batch:32`; adjust
the patterns when the fixtures name things differently. A layer with no matching tbd row shows
"-" in the tbd columns. Exit status: 0 done, 2 no PyTorch or no CUDA device (nothing timed).
"""
import argparse
import json
import math
import re
import sys
import time

WARMUP = 5
ITERS = 20

# name -> regex on tbd_bench benchmark names per phase ("fwd": forward only, "train": forward +
# backward). The first matching row (by the phase's regex) is used.
TBD_ROWS = {
    "gemm_1024^3": {
        "fwd": r"^Gemm/square1024/fwd/batch:1$",
        "train": r"^Gemm/square1024/fwdbwd/batch:1$"},
    "ffn_gemm_4096x512x2048": {
        "fwd": r"^Linear/transformer\.encoder\.0\.ffn\.fc1/fwd/batch:32$",
        "train": r"^Linear/transformer\.encoder\.0\.ffn\.fc1/fwdbwd/batch:32$"},
    "conv_resnet50.layer2.0.conv2_b32": {
        "fwd": r"^Conv2d/resnet50\.layer2\.0\.conv2/fwd/batch:32$",
        "train": r"^Conv2d/resnet50\.layer2\.0\.conv2/fwdbwd/batch:32$"},
    "lstm_h512_T50_b32": {
        "fwd": r"^LSTM/seq2seq\.encoder\.l1/fwd/batch:32$",
        "train": r"^LSTM/seq2seq\.encoder\.l1/fwdbwd/batch:32$"},
    "attention_d512_h8_T128_b16": {
        "fwd": r"^MultiHeadAttention/transformer\.encoder\.0\.self_attn/fwd/batch:16$",
        "train": r"^MultiHeadAttention/transformer\.encoder\.0\.self_attn/fwdbwd/batch:16$"},
    "batchnorm_c256_56x56_b32": {
        "fwd": r"^BatchNorm2d/resnet50\.layer1\.0\.bn3/fwd/batch:32$",
        "train": r"^BatchNorm2d/resnet50\.layer1\.0\.bn3/fwdbwd/batch:32$"},
}



def set_math(torch, mode):
    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def make_layers(torch):
    """name -> (forward closure, parameters and inputs that get gradients)."""
    dev = "cuda"
    nn = torch.nn
    layers = {}

    a = torch.randn(1024, 1024, device=dev, requires_grad=True)
    b = torch.randn(1024, 1024, device=dev, requires_grad=True)
    layers["gemm_1024^3"] = (lambda: a @ b, [a, b])

    x = torch.randn(4096, 512, device=dev, requires_grad=True)  # 32 sentences x 128 tokens
    w = torch.randn(2048, 512, device=dev, requires_grad=True)
    layers["ffn_gemm_4096x512x2048"] = (lambda: x @ w.t(), [x, w])

    conv = nn.Conv2d(128, 128, 3, stride=2, padding=1, bias=False).to(dev)
    xc = torch.randn(32, 128, 56, 56, device=dev, requires_grad=True)
    layers["conv_resnet50.layer2.0.conv2_b32"] = (lambda: conv(xc), [xc])

    lstm = nn.LSTM(512, 512).to(dev)  # time-major (T, N, I)
    xl = torch.randn(50, 32, 512, device=dev, requires_grad=True)
    layers["lstm_h512_T50_b32"] = (lambda: lstm(xl)[0], [xl])

    attn = nn.MultiheadAttention(512, 8, batch_first=True).to(dev)
    xa = torch.randn(16, 128, 512, device=dev, requires_grad=True)
    layers["attention_d512_h8_T128_b16"] = (lambda: attn(xa, xa, xa, need_weights=False)[0], [xa])

    bn = nn.BatchNorm2d(256).to(dev).train()
    xb = torch.randn(32, 256, 56, 56, device=dev, requires_grad=True)
    layers["batchnorm_c256_56x56_b32"] = (lambda: bn(xb), [xb])
    return layers


def time_ms(torch, fn):
    """Median of per-iteration CUDA-event times after WARMUP untimed runs."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(ITERS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def run_torch(torch, modes):
    results = {}
    layers = make_layers(torch)
    for mode in modes:
        set_math(torch, mode)
        for name, (fwd, leaves) in layers.items():
            with torch.no_grad():
                t_fwd = time_ms(torch, fwd)
            grad = torch.ones_like(fwd())

            def train():
                for t in leaves:
                    t.grad = None
                fwd().backward(grad)

            t_train = time_ms(torch, train)
            results[(name, "fwd", mode)] = t_fwd
            results[(name, "train", mode)] = t_train
    return results


UNIT_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def load_tbd(specs):
    """mode -> list of benchmark rows, from `mode=path` arguments."""
    rows = {}
    for spec in specs or []:
        mode, _, path = spec.partition("=")
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print(f"torch_side_by_side: cannot read tbd JSON {path}: {e}", file=sys.stderr)
            continue
        rows[mode] = [b for b in data.get("benchmarks", []) if b.get("run_type") != "aggregate"
                      or b.get("aggregate_name") == "median"]
    return rows


def tbd_time(rows, name, phase):
    pattern = TBD_ROWS.get(name, {}).get(phase)
    if not pattern:
        return None, None
    for b in rows:
        if re.search(pattern, b.get("name", "")):
            t = b.get("real_time")
            if t is None:
                continue
            util = {k: v for k, v in b.items() if "util" in k and isinstance(v, (int, float))}
            return t * UNIT_TO_MS.get(b.get("time_unit", "ns"), 1e-6), util
    return None, None


def fmt(v, spec=".3f"):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tbd-json", action="append", help="mode=path of a tbd_bench JSON (fp32|tf32)")
    ap.add_argument("--out", help="write the PyTorch timings here (JSON)")
    ap.add_argument("--modes", default="fp32,tf32")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]

    try:
        import torch
    except ImportError as e:
        print(f"torch_side_by_side: no PyTorch ({e}): nothing timed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_side_by_side: PyTorch sees no CUDA device: nothing timed", file=sys.stderr)
        return 2

    t0 = time.time()
    torch_ms = run_torch(torch, modes)
    tbd_rows = load_tbd(args.tbd_json)
    info = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "warmup": WARMUP,
        "iters": ITERS,
        "statistic": "median of per-iteration CUDA event times",
        "seconds": round(time.time() - t0, 1),
    }
    table = []
    for (name, phase, mode), t in torch_ms.items():
        tbd_ms, util = tbd_time(tbd_rows.get(mode, []), name, phase)
        table.append({"layer": name, "phase": phase, "math": mode, "torch_ms": t, "tbd_ms": tbd_ms,
                      "tbd_over_torch": tbd_ms / t if tbd_ms and t else None, "tbd_util": util})
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"info": info, "rows": table}, f, indent=1)

    print(f"\nPyTorch {info['torch']} (CUDA {info['cuda']}, cuDNN {info['cudnn']}) on {info['device']}; "
          f"{info['statistic']}, {WARMUP} warm-up, {ITERS} timed")
    hdr = f"{'layer':34} {'phase':5} {'math':4} {'torch ms':>10} {'tbd ms':>10} {'tbd/torch':>9}  tbd utilization"
    print(hdr)
    print("-" * len(hdr))
    for r in table:
        util = " ".join(f"{k}={v:.3g}" for k, v in sorted((r["tbd_util"] or {}).items()))
        print(f"{r['layer']:34} {r['phase']:5} {r['math']:4} {fmt(r['torch_ms']):>10} "
              f"{fmt(r['tbd_ms']):>10} {fmt(r['tbd_over_torch'], '.2f'):>9}  {util}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
