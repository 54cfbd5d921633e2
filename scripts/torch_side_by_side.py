#!/usr/bin/env python3
"""scripts/torch_side_by_side.py: PyTorch timings of the layers and models tbd benchmarks, beside tbd's.

Run by scripts/gpu_check.sh on a GPU machine. For each case in TBD_ROWS below and each math
mode (strict FP32: TF32 off in cuBLAS and cuDNN; TF32: on), it times with CUDA events after a
warm-up: for a layer, the forward pass ("fwd") and forward + backward ("train", tbd's fwdbwd);
for a model, its whole training step ("train": forward, loss, backward, clipping, optimizer, as
tbd's <Model>/train). It reads tbd_bench's Google Benchmark JSON for the same math mode (several
files per mode are merged) and prints a short table of times and tbd/torch ratios LAST.

  python3 scripts/torch_side_by_side.py --tbd-json fp32=OUT/bench_fp32.json \
      --tbd-json fp32=OUT/bench_fp32_ds2.json --tbd-json fp32=OUT/bench_fp32_gan.json \
      --tbd-json tf32=OUT/bench_tf32.json --tbd-json tf32=OUT/bench_tf32_ds2.json \
      --tbd-json tf32=OUT/bench_tf32_gan.json --out OUT/torch.json

The cases:
  - a 1024^3 GEMM, the Transformer's FFN GEMM, a ResNet-50 3x3 convolution, the Transformer's
    self-attention and a ResNet-50 BatchNorm (PyTorch's modules at tbd's shapes);
  - Seq2Seq's encoder LSTM (T = 30), decoder LSTMCell (layer 0: input 1024 = embedding and
    attentional state, hidden 512) and MLP attention (S = 30), run by the modules of the
    Seq2Seq model of tools/peers/seq2seq.py;
  - DeepSpeech2's GRU layers 0 (672 -> 1760) and 1 (1760 -> 1760) over T2 = 485 steps (1000
    frames) and its CTC loss (29 classes, 150 labels; handed to cuDNN, which PyTorch does only
    for targets in the form peers.deepspeech2.ctc_args makes; the table's notes say whether
    it did), at the shapes of the DeepSpeech2 model of tools/peers/deepspeech2.py;
  - Inception-v3's 1x7 convolution of Mixed_6e (192 -> 192 at 17x17, padding (0, 3));
  - Inception-v3's (batch 32, torchvision's, aux classifier trained; --tiny: the tiny one),
    Seq2Seq's (batch 32) and DeepSpeech2's (batch 8, 1000 frames) whole training steps,
    WGAN-GP's iteration (batch 16: one generator and 5 critic steps), A3C's (t_max 5, one
    actor-learner, 8 updates) and Faster R-CNN's training step (1 image of 600x1000, anchor
    targets, proposals with torchvision's NMS, proposal targets and roi_pool on the device),
    the models, data and steps of the CPU side-by-side's peers (tools/peers: each model's
    module's setup()) on CUDA.
TBD_ROWS is the one table that pairs each case (its builder case_<case> below) with the
tbd_bench rows it is compared against and the batch both run at: tbd_bench's names look like
`Conv2d/resnet50.layer2.0.conv2/fwd/batch:32` and `DeepSpeech2/train/batch:8`; adjust the table
when the fixtures name things differently. A case with no matching tbd row shows "-" in the tbd
columns; a case that fails shows "-" and its error, and the others still run.

  python3 scripts/torch_side_by_side.py --check-names NAMES.txt
checks, without PyTorch, that every TBD_ROWS pattern matches one of the benchmark names in
NAMES.txt (the output of `tbd_bench --benchmark_list_tests` with gpu_check.sh's filters and
batches) and that every case has a builder: gpu_check.sh runs it before anything else.
  python3 scripts/torch_side_by_side.py --device cpu --tiny
is a functional check of the cases anywhere (Seq2Seq, DeepSpeech2, WGAN-GP, A3C and Faster
R-CNN at toy sizes, Inception-v3 at batch 2, one warm-up
and two timed iterations; the times mean nothing).

Exit status: 0 done, 1 a case failed (or --check-names found a mismatch), 2 no PyTorch or no
CUDA device (nothing timed).
"""
import argparse
import json
import math
import os
import re
import sys
import time

WARMUP = 5
ITERS = 20
# Whole training steps (a DeepSpeech2 step at batch 8 is a few hundred ms): fewer.
MODEL_WARMUP = 2
MODEL_ITERS = 5

# DeepSpeech2's benchmarks carry /frames:N when tbd_bench gets --tbd_model_args=frames:N; the
# PyTorch side runs the default 1000 frames, so only that suffix (or none) matches.
DS2_SUFFIX = r"(/frames:1000)?"


def layer_rows(bench, batch, case, suffix=""):
    """A layer case: tbd_bench's rows of `bench` (<Kind>/<model>.<layer>) at `batch`, "fwd" the
    forward pass alone and "train" forward + backward (fwdbwd); `case` names its builder."""
    b = re.escape(bench)
    return {"case": case, "batch": batch,
            "fwd": rf"^{b}/fwd/batch:{batch}{suffix}$",
            "train": rf"^{b}/fwdbwd/batch:{batch}{suffix}$"}


def model_rows(model, batch, case, suffix=""):
    """A model case: tbd_bench's training step <model>/train/batch:<batch> ("train" only)."""
    return {"case": case, "batch": batch,
            "train": rf"^{re.escape(model)}/train/batch:{batch}{suffix}$"}


# The pairing: table name -> the PyTorch case (builder case_<case>, batch) and the regular
# expressions, per phase, of the tbd_bench rows it is compared with (the first match is used).
# Rows print in this order.
TBD_ROWS = {
    "gemm_1024^3": layer_rows("Gemm/square1024", 1, "gemm_square"),
    "ffn_gemm_4096x512x2048": layer_rows("Linear/transformer.encoder.0.ffn.fc1", 32, "ffn_gemm"),
    "conv_resnet50.layer2.0.conv2_b32": layer_rows("Conv2d/resnet50.layer2.0.conv2", 32,
                                                   "resnet_conv"),
    "attention_d512_h8_T128_b16": layer_rows(
        "MultiHeadAttention/transformer.encoder.0.self_attn", 16, "transformer_attention"),
    "batchnorm_c256_56x56_b32": layer_rows("BatchNorm2d/resnet50.layer1.0.bn3", 32,
                                           "resnet_batchnorm"),
    "lstm_seq2seq.encoder.rnn_b32": layer_rows("LSTM/seq2seq.encoder.rnn", 32,
                                               "seq2seq_encoder_lstm"),
    "lstmcell_seq2seq.decoder.l0_b32": layer_rows("LSTMCell/seq2seq.decoder.step0.l0", 32,
                                                  "seq2seq_decoder_cell"),
    "mlp_attention_seq2seq_b32": layer_rows("MlpAttention/seq2seq.decoder.step0.attention", 32,
                                            "seq2seq_attention"),
    "gru_deepspeech2.rnn.l0_b32": layer_rows("GRU/deepspeech2.rnn.l0", 32, "ds2_gru_l0",
                                             DS2_SUFFIX),
    "gru_deepspeech2.rnn.l1_b32": layer_rows("GRU/deepspeech2.rnn.l1", 32, "ds2_gru_l1",
                                             DS2_SUFFIX),
    "ctc_deepspeech2_b32": layer_rows("CtcLoss/deepspeech2.ctc", 32, "ds2_ctc", DS2_SUFFIX),
    "conv_inceptionv3.Mixed_6e.branch7x7_2_b32": layer_rows(
        "Conv2d/inceptionv3.Mixed_6e.branch7x7_2.conv", 32, "inception_conv_1x7"),
    "InceptionV3_train_b32": model_rows("InceptionV3", 32, "inception_train"),
    "Seq2Seq_train_b32": model_rows("Seq2Seq", 32, "seq2seq_train"),
    "DeepSpeech2_train_b8": model_rows("DeepSpeech2", 8, "ds2_train", DS2_SUFFIX),
    "WGAN_train_b16": model_rows("WGAN", 16, "wgan_train"),
    "A3C_train_b5_actors1": model_rows("A3C", 5, "a3c_train", "/actors:1"),
    "FasterRCNN_train_b1": model_rows("FasterRCNN", 1, "frcnn_train"),
}

PHASES = ("fwd", "train")


def set_math(torch, mode):
    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32  # cuDNN's convolutions and RNNs
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


# ---- the cases: case_<name>(torch, dev, n, models) -> {"fwd": closure returning a tensor or a
# tuple of tensors, "leaves": inputs that take gradients} for a layer (its parameters take
# theirs too), {"step": closure running one training step} for a model; "note" optional ----

def case_gemm_square(torch, dev, n, models):
    a = torch.randn(1024, 1024, device=dev, requires_grad=True)
    b = torch.randn(1024, 1024, device=dev, requires_grad=True)
    return {"fwd": lambda: a @ b, "leaves": [a, b]}


def case_ffn_gemm(torch, dev, n, models):
    x = torch.randn(n * 128, 512, device=dev, requires_grad=True)  # n sentences x 128 tokens
    w = torch.randn(2048, 512, device=dev, requires_grad=True)
    return {"fwd": lambda: x @ w.t(), "leaves": [x, w]}


def case_resnet_conv(torch, dev, n, models):
    conv = torch.nn.Conv2d(128, 128, 3, stride=2, padding=1, bias=False).to(dev)
    x = torch.randn(n, 128, 56, 56, device=dev, requires_grad=True)
    return {"fwd": lambda: conv(x), "leaves": [x]}


def case_transformer_attention(torch, dev, n, models):
    attn = torch.nn.MultiheadAttention(512, 8, batch_first=True).to(dev)
    x = torch.randn(n, 128, 512, device=dev, requires_grad=True)
    return {"fwd": lambda: attn(x, x, x, need_weights=False)[0], "leaves": [x]}


def case_resnet_batchnorm(torch, dev, n, models):
    bn = torch.nn.BatchNorm2d(256).to(dev).train()
    x = torch.randn(n, 256, 56, 56, device=dev, requires_grad=True)
    return {"fwd": lambda: bn(x), "leaves": [x]}


def case_seq2seq_encoder_lstm(torch, dev, n, models):
    """The encoder's unidirectional LSTM (after the bi-LSTM), time-major (S, N, H)."""
    s2s = models.seq2seq()
    lstm = s2s["net"].enc1
    x = torch.randn(s2s["length"], n, lstm.input_size, device=dev, requires_grad=True)
    return {"fwd": lambda: lstm(x)[0], "leaves": [x]}


def case_seq2seq_decoder_cell(torch, dev, n, models):
    """One step of the decoder's layer-0 LSTMCell: input [embedding; attentional state],
    gradients into x, h and c from both outputs."""
    cell = models.seq2seq()["net"].dec0
    x = torch.randn(n, cell.input_size, device=dev, requires_grad=True)
    h = torch.randn(n, cell.hidden_size, device=dev, requires_grad=True)
    c = torch.randn(n, cell.hidden_size, device=dev, requires_grad=True)
    return {"fwd": lambda: cell(x, (h, c)), "leaves": [x, h, c]}


def case_seq2seq_attention(torch, dev, n, models):
    """One decoder step's MLP attention (Seq2Seq.attention, the score vector v its parameter)
    over S source positions, all valid (tbd's lengths are all S without mask:1): query
    (N, A), keys (S, N, A), encoder states (S, N, D) read batch-major as the model does."""
    s2s = models.seq2seq()
    net = s2s["net"]
    a, d = net.keys.out_features, net.keys.in_features
    keys = torch.randn(s2s["length"], n, a, device=dev, requires_grad=True)
    query = torch.randn(n, a, device=dev, requires_grad=True)
    enc = torch.randn(s2s["length"], n, d, device=dev, requires_grad=True)
    return {"fwd": lambda: net.attention(keys, query, enc.transpose(0, 1)),
            "leaves": [keys, query, enc]}


def ds2_gru(torch, dev, n, models, layer):
    """DeepSpeech2's GRU layer 0 (input the conv features) or 1 (input layer 0's output),
    time-major over the T2 steps of the model's frames."""
    ds2 = models.ds2()
    g = ds2["net"].gru_fwd
    inputs = g.input_size if layer == 0 else g.hidden_size
    gru = torch.nn.GRU(inputs, g.hidden_size).to(dev)
    x = torch.randn(ds2["ctc_steps"], n, inputs, device=dev, requires_grad=True)
    return {"fwd": lambda: gru(x)[0], "leaves": [x]}


def case_ds2_gru_l0(torch, dev, n, models):
    return ds2_gru(torch, dev, n, models, 0)


def case_ds2_gru_l1(torch, dev, n, models):
    return ds2_gru(torch, dev, n, models, 1)


def case_ds2_ctc(torch, dev, n, models):
    """DeepSpeech2's loss: log-softmax and CTC over T2 steps, the model's labels per sample,
    summed / N (tbd's CtcLoss takes the logits and folds the softmax in)."""
    F = torch.nn.functional
    ds2 = models.ds2()
    t2, classes = ds2["ctc_steps"], ds2["net"].cls.out_features
    z = torch.randn(t2, n, classes, device=dev, requires_grad=True)
    lab = torch.randint(1, classes, (n, ds2["label_len"]))
    targets, in_len, lab_len = models.peers.module("DeepSpeech2").ctc_args(lab, t2, dev)

    def fwd():
        return F.ctc_loss(F.log_softmax(z, 2), targets, in_len, lab_len, blank=0,
                          reduction="sum") / n

    return {"fwd": fwd, "leaves": [z], "note": "PyTorch ran " + ctc_kind(fwd())}


def ctc_kind(loss):
    """Which CTC implementation produced `loss`, from its autograd graph."""
    seen, todo = set(), [loss.grad_fn]
    while todo:
        f = todo.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        name = type(f).__name__
        if "Ctc" in name:
            return "cuDNN's CTC loss" if "Cudnn" in name else f"its own CTC kernels ({name})"
        todo += [g for g, _ in f.next_functions]
    return "an unknown CTC implementation"


def case_inception_conv_1x7(torch, dev, n, models):
    conv = torch.nn.Conv2d(192, 192, (1, 7), padding=(0, 3), bias=False).to(dev)
    x = torch.randn(n, 192, 17, 17, device=dev, requires_grad=True)
    return {"fwd": lambda: conv(x), "leaves": [x]}


def case_inception_train(torch, dev, n, models):
    s = models.inception(n)
    return {"step": s["step"], "note": "aux classifier trained (0.4)" if s["config"]["aux_weight"]
            else "tiny: no aux classifier"}


def case_a3c_train(torch, dev, n, models):
    return {"step": models.a3c(n)["step"], "note": "one actor-learner, 8 updates per step"}


def case_seq2seq_train(torch, dev, n, models):
    return {"step": models.seq2seq(n)["step"]}


def case_ds2_train(torch, dev, n, models):
    return {"step": models.ds2(n)["step"], "note": "CTC as in the ctc row"}


def case_wgan_train(torch, dev, n, models):
    return {"step": models.wgan(n)["step"], "note": "1 G + 5 D steps"}


def case_frcnn_train(torch, dev, n, models):
    s = models.frcnn(n)
    h, w = s["config"]["image"]
    return {"step": s["step"], "note": f"{h}x{w}, anchor/proposal targets on the device, "
                                        "torchvision's nms and roi_pool"}


class Models:
    """The models of tools/peers on the device, built once per batch. Layer
    cases take their modules and shapes from the model at its model case's batch."""

    def __init__(self, peers, dev, tiny):
        self.peers, self.dev, self.tiny = peers, dev, tiny
        self.built = {}

    @staticmethod
    def model_batch(case):
        return next((r["batch"] for r in TBD_ROWS.values() if r["case"] == case), 1)

    def seq2seq(self, n=None):
        n = n or self.model_batch("seq2seq_train")
        if ("seq2seq", n) not in self.built:
            self.built[("seq2seq", n)] = self.peers.module("Seq2Seq").setup(
                n, tiny=self.tiny, device=self.dev)
        return self.built[("seq2seq", n)]

    def a3c(self, n=None):
        n = n or self.model_batch("a3c_train")  # t_max
        if ("a3c", n) not in self.built:
            self.built[("a3c", n)] = self.peers.module("A3C").setup(
                n, tiny=self.tiny, device=self.dev)
        return self.built[("a3c", n)]

    def inception(self, n=None):
        n = n or self.model_batch("inception_train")
        if ("inception", n) not in self.built:
            self.built[("inception", n)] = self.peers.module("InceptionV3").setup(
                n, tiny=self.tiny, device=self.dev)
        return self.built[("inception", n)]

    def ds2(self, n=None):
        n = n or self.model_batch("ds2_train")
        if ("ds2", n) not in self.built:
            self.built[("ds2", n)] = self.peers.module("DeepSpeech2").setup(
                n, tiny=self.tiny, device=self.dev)
        return self.built[("ds2", n)]

    def frcnn(self, n=None):
        n = n or self.model_batch("frcnn_train")
        if ("frcnn", n) not in self.built:
            self.built[("frcnn", n)] = self.peers.module("FasterRCNN").setup(
                n, tiny=self.tiny, device=self.dev)
        return self.built[("frcnn", n)]

    def wgan(self, n=None):
        n = n or self.model_batch("wgan_train")
        if ("wgan", n) not in self.built:
            self.built[("wgan", n)] = self.peers.module("WGAN").setup(
                n, tiny=self.tiny, device=self.dev)
        return self.built[("wgan", n)]


def builder(rows):
    return globals().get("case_" + rows["case"])


def time_ms(torch, fn, warmup, iters, cuda):
    """Median of per-iteration times (CUDA events on a GPU) after `warmup` untimed runs."""
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        if cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def as_tuple(y):
    return tuple(y) if isinstance(y, (tuple, list)) else (y,)


def error_text(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]


def build_cases(torch, dev, tiny):
    """name -> case, or -> {"error": ...} where building failed."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "tools"))
    import peers
    models = Models(peers, dev, tiny)
    cases = {}
    for name, rows in TBD_ROWS.items():
        try:
            cases[name] = builder(rows)(torch, dev, rows["batch"], models)
        except Exception as e:  # reported in the table; the other cases still run
            cases[name] = {"error": "build: " + error_text(e)}
            print(f"torch_side_by_side: {name}: {cases[name]['error']}", file=sys.stderr)
    return cases


def run_torch(torch, modes, cases, cuda, warmup, iters, model_warmup, model_iters):
    """(name, phase, mode) -> ms, or -> error text."""
    results = {}
    for mode in modes:
        if cuda:
            set_math(torch, mode)
        for name, case in cases.items():
            if "error" in case:
                continue
            try:
                if "step" in case:
                    results[(name, "train", mode)] = time_ms(torch, case["step"], model_warmup,
                                                             model_iters, cuda)
                    continue
                fwd, leaves = case["fwd"], case["leaves"]
                with torch.no_grad():
                    results[(name, "fwd", mode)] = time_ms(torch, fwd, warmup, iters, cuda)
                grads = [torch.ones_like(y) for y in as_tuple(fwd())]

                def train():
                    for t in leaves:
                        t.grad = None
                    torch.autograd.backward(as_tuple(fwd()), grads)

                results[(name, "train", mode)] = time_ms(torch, train, warmup, iters, cuda)
            except Exception as e:  # e.g. out of memory: this case only
                results[(name, "error", mode)] = error_text(e)
                print(f"torch_side_by_side: {name} ({mode}): {error_text(e)}", file=sys.stderr)
                if cuda:
                    torch.cuda.empty_cache()
    return results


UNIT_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def load_tbd(specs):
    """mode -> list of benchmark rows, from `mode=path` arguments (a mode may come several
    times: its files are merged in order)."""
    rows = {}
    for spec in specs or []:
        mode, _, path = spec.partition("=")
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print(f"torch_side_by_side: cannot read tbd JSON {path}: {e}", file=sys.stderr)
            continue
        rows.setdefault(mode, []).extend(
            b for b in data.get("benchmarks", [])
            if b.get("run_type") != "aggregate" or b.get("aggregate_name") == "median")
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


def check_names(path):
    """Every TBD_ROWS pattern against the benchmark names in `path`; 0 all found, 1 not."""
    try:
        with open(path) as f:
            names = [line.strip() for line in f if line.strip()]
    except OSError as e:
        print(f"torch_side_by_side: cannot read {path}: {e}", file=sys.stderr)
        return 1
    bad = []
    for name, rows in TBD_ROWS.items():
        if builder(rows) is None:
            bad.append(f"{name}: no builder case_{rows['case']}")
        for phase in PHASES:
            if phase in rows and not any(re.search(rows[phase], n) for n in names):
                bad.append(f"{name} {phase}: no benchmark matches {rows[phase]}")
    for b in bad:
        print(f"torch_side_by_side: {b}")
    patterns = sum(phase in rows for rows in TBD_ROWS.values() for phase in PHASES)
    print(f"torch_side_by_side: {len(TBD_ROWS)} cases, {patterns} tbd patterns checked against "
          f"{len(names)} benchmark names: {'all found' if not bad else f'{len(bad)} problems'}")
    return 1 if bad else 0


def fmt(v, spec=".3f"):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tbd-json", action="append",
                    help="mode=path of a tbd_bench JSON (fp32|tf32); repeat a mode to merge files")
    ap.add_argument("--out", help="write the PyTorch timings here (JSON)")
    ap.add_argument("--modes", default="fp32,tf32")
    ap.add_argument("--check-names", metavar="FILE",
                    help="only check TBD_ROWS against the benchmark names in FILE (no PyTorch)")
    ap.add_argument("--device", default="cuda", help="cuda (default), or cpu with --tiny")
    ap.add_argument("--tiny", action="store_true",
                    help="functional check: the models at toy sizes, 1 warm-up, 2 timed")
    args = ap.parse_args()
    if args.check_names:
        return check_names(args.check_names)
    modes = [m for m in args.modes.split(",") if m]

    try:
        import torch
    except ImportError as e:
        print(f"torch_side_by_side: no PyTorch ({e}): nothing timed", file=sys.stderr)
        return 2
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("torch_side_by_side: PyTorch sees no CUDA device: nothing timed", file=sys.stderr)
        return 2
    warmup, iters, model_warmup, model_iters = ((1, 2, 1, 2) if args.tiny
                                                else (WARMUP, ITERS, MODEL_WARMUP, MODEL_ITERS))

    t0 = time.time()
    cases = build_cases(torch, args.device, args.tiny)
    torch_ms = run_torch(torch, modes, cases, cuda, warmup, iters, model_warmup, model_iters)
    tbd_rows = load_tbd(args.tbd_json)
    info = {
        "device": torch.cuda.get_device_name(0) if cuda else args.device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "warmup": warmup,
        "iters": iters,
        "model_warmup": model_warmup,
        "model_iters": model_iters,
        "tiny": args.tiny,
        "statistic": "median of per-iteration " + ("CUDA event" if cuda else "wall-clock") + " times",
        "seconds": round(time.time() - t0, 1),
    }
    table = []
    for mode in modes:
        for name, rows in TBD_ROWS.items():
            case = cases[name]
            for phase in PHASES:
                if phase not in rows:
                    continue
                t = torch_ms.get((name, phase, mode))
                err = case.get("error") or torch_ms.get((name, "error", mode))
                tbd_ms, util = tbd_time(tbd_rows.get(mode, []), name, phase)
                table.append({"layer": name, "phase": phase, "math": mode, "batch": rows["batch"],
                              "torch_ms": t, "tbd_ms": tbd_ms,
                              "tbd_over_torch": tbd_ms / t if tbd_ms and t else None,
                              "tbd_util": util, "note": err or case.get("note")})
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"info": info, "rows": table}, f, indent=1)

    print(f"\nPyTorch {info['torch']} (CUDA {info['cuda']}, cuDNN {info['cudnn']}) on {info['device']}; "
          f"{info['statistic']}, {warmup} warm-up and {iters} timed ({model_warmup} and "
          f"{model_iters} for the models' training steps)"
          + ("; --tiny: functional check only, times mean nothing" if args.tiny else ""))
    hdr = f"{'layer / model':34} {'phase':5} {'math':4} {'torch ms':>10} {'tbd ms':>10} {'tbd/torch':>9}  tbd utilization"
    print(hdr)
    print("-" * len(hdr))
    notes = {}
    for r in table:
        util = " ".join(f"{k}={v:.3g}" for k, v in sorted((r["tbd_util"] or {}).items()))
        mark = f"  [{notes.setdefault(r['note'], len(notes) + 1)}]" if r["note"] else ""
        print(f"{r['layer']:34} {r['phase']:5} {r['math']:4} {fmt(r['torch_ms']):>10} "
              f"{fmt(r['tbd_ms']):>10} {fmt(r['tbd_over_torch'], '.2f'):>9}  {util}{mark}")
    for note, k in notes.items():
        print(f"[{k}] {note}")
    failed = any("error" in c for c in cases.values()) or any(k[1] == "error" for k in torch_ms)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
