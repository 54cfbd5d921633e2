#!/usr/bin/env python3
"""scripts/torch_cpu_compare.py: PyTorch CPU training steps of the same models, for the
side-by-side (tbd must be at least as fast as a mainstream framework on the same machine).

Builds ResNet-50 v1.5 (torchvision's definition when available, else an equivalent one here)
and the same pre-norm Transformer-base as models/transformer.cpp (tied embeddings, sinusoidal
positions, dropout 0.1, label smoothing 0.1, Adam), times full training steps (forward, loss,
backward, optimizer) after warm-up with the same thread count, and prints one JSON object.
WGAN-GP (models/wgan.h, gan_64x64.py's ResNet generator and critic; LayerNorm over (C, H, W)
with per-channel affine is nn.GroupNorm(1, C)) times TBD's iteration: one generator step (the
critic's parameters with requires_grad off) and 5 critic steps, each on the next real and noise
batch of a pool drawn once, the penalty through autograd.grad(create_graph=True).

Every model's entry has the same fields: batch, step_s (the median of the timed steps),
step_times_s (each timed step), the model's items per second at the median step, params,
losses (warm-up and timed steps, in order), threads and blas; a batch of 0 skips the model.

Which BLAS torch runs its matrix products on is recorded ("blas"): Debian's torch is built
against the generic BLAS interface and gets whichever libblas.so.3 the alternatives system
points at. Without an optimized one installed (libopenblas0-*) that is the reference
(netlib) BLAS, several times slower on every Linear and RNN, and the peer is then not a
mainstream framework; the script warns on stderr. apt-get install python3-torch brings
OpenBLAS through its Recommends; --no-install-recommends leaves the reference BLAS.
Debian's default OpenBLAS is the pthreads build, whose spinning thread pool fights torch's
OpenMP threads for the cores: a Transformer step at --threads 2 took 1.8-5 s with it against
0.4 s with the OpenMP build (libopenblas0-openmp), which shares torch's OpenMP pool. Run with
LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp (or make it the libblas.so.3
alternative); the script warns otherwise. OpenBLAS's thread count is set to --threads.
The environment that changes these runtimes (MALLOC_*, LD_PRELOAD, LD_LIBRARY_PATH, OMP_*,
GOMP_*, OPENBLAS_*) is recorded ("env"): the RNN models' backward allocates a weight-sized
gradient per time step, and glibc hands blocks that large out and back by mmap/munmap, so
page faults are part of those steps by default.

The models and their training steps are importable and run on any device:
scripts/torch_side_by_side.py builds Seq2Seq and DeepSpeech2 with seq2seq_setup() and
ds2_setup() on CUDA (weights and data drawn on the CPU with the same seeds, then moved). On the
CPU their arithmetic is exactly what this script always ran.

Inception-v3 is torchvision's (aux classifier on, weight 0.4, as models/inception_v3.cpp).

Usage: python3 scripts/torch_cpu_compare.py --threads 2 --resnet-batch 4 \
           --transformer-batch 8 --seq-len 32 --steps 5
       (each under LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp, see above)
       python3 scripts/torch_cpu_compare.py --resnet-batch 0 --transformer-batch 0 \
           --seq2seq-batch 16 --seq2seq-len 30             # Seq2Seq alone
       python3 scripts/torch_cpu_compare.py --resnet-batch 0 --transformer-batch 0 \
           --inception-batch 4                             # Inception-v3 alone
       python3 scripts/torch_cpu_compare.py --resnet-batch 0 --transformer-batch 0 \
           --ds2-batch 2 --ds2-frames 1000 --warmup 1 --steps 3   # DeepSpeech2 alone (slow)
       python3 scripts/torch_cpu_compare.py --resnet-batch 0 --transformer-batch 0 \
           --wgan-batch 16 --warmup 1 --steps 3   # WGAN-GP alone (one step = 1 G + 5 D steps)
       python3 scripts/torch_cpu_compare.py --resnet-batch 0 --transformer-batch 0 --tiny \
           --seq2seq-batch 4 --ds2-batch 4 --warmup 0 --steps 30  # functional: losses fall
       python3 scripts/torch_cpu_compare.py --resnet-batch 0 --transformer-batch 0 \
           --a3c-batch 5 --steps 20                     # A3C, one actor-learner
       python3 scripts/torch_cpu_compare.py --resnet-batch 0 --transformer-batch 0 \
           --fasterrcnn-batch 1 --warmup 1 --steps 5    # Faster R-CNN, one 600x1000 image

A3C's peer is one actor-learner in one process (tbd's A3C/train/batch:5/actors:1): a step is
8 updates, as one tbd_bench iteration at K = 1 (models/a3c.h), each a pull of the global
weights into the local network, t_max + 1 batch-1 forwards without gradients with actions
sampled from the policy, a batch-t_max forward and backward on the local network, global-norm
clipping to 5 and the shared RMSprop step on the global weights (the local gradients handed to
the global parameters). The frames are synthetic as in tbd (a pool of random uint8 frames);
several workers would need torch.multiprocessing and are not compared.

Faster R-CNN's peer is tbd's FasterRCNN model: MXNet's rcnn example end to end with ResNet-101
v2 (pre-activation units, every BatchNorm frozen with eps 2e-5, conv0 and stage 1 frozen), as
TBD ran it: 600x1000 images uniform in [-1, 1), 100 ground-truth rows per image of which
--fasterrcnn-gt are real random boxes. A step computes the anchor targets, proposals (decode,
clip, min size 16, top 12000, torchvision.ops.nms 0.7, 2000 kept) and proposal targets (128
RoIs, a quarter foreground) with vectorised torch ops on the step's device, pools the RoIs with
torchvision.ops.roi_pool (14x14 at 1/16), runs stage 4 and the heads, the four losses, backward,
element-wise clip 5 and SGD. Stored parameters 47,454,565, trained 47,134,367 (asserted). Its
entry adds "detection": the time of those three no-grad parts per timed step and their share of
the step (timers around each). All boxes are inclusive pixel boxes (IoU with +1); torchvision's
nms computes IoU without the +1, so it gets the boxes with x2 + 1, y2 + 1, which gives the same
IoU.
"""
import argparse
import ctypes
import json
import math
import os
import re
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def bottleneck_resnet50(num_classes=1000):
    try:
        import torchvision
        return torchvision.models.resnet50(num_classes=num_classes), "torchvision"
    except Exception:  # torchvision missing: the same architecture, written out
        pass

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride, down):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, 4 * width, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(4 * width)
            self.down = (nn.Sequential(nn.Conv2d(cin, 4 * width, 1, stride, bias=False),
                                       nn.BatchNorm2d(4 * width)) if down else None)

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            y = F.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return F.relu(y + (self.down(x) if self.down is not None else x))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for blocks, width, stride in [(3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)]:
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1, b == 0))
            cin = 4 * width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, num_classes)]
    return nn.Sequential(*layers), "own definition (torchvision missing)"


class Transformer(nn.Module):
    def __init__(self, vocab=32000, d=512, heads=8, ffn=2048, layers=6, dropout=0.1, max_len=1024):
        super().__init__()
        self.d = d
        self.emb = nn.Embedding(vocab, d)
        nn.init.normal_(self.emb.weight, 0.0, 0.02)
        pe = torch.zeros(max_len, d)
        pos = torch.arange(max_len).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)
        self.drop = nn.Dropout(dropout)
        self.core = nn.Transformer(d, heads, layers, layers, ffn, dropout, batch_first=True,
                                   norm_first=True)
        self.proj = nn.Linear(d, vocab, bias=False)
        self.proj.weight = self.emb.weight  # tied

    def embed(self, ids):
        return self.drop(self.emb(ids) * math.sqrt(self.d) + self.pe[: ids.shape[1]])

    def forward(self, src, tgt):
        t = tgt.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf"), device=tgt.device), diagonal=1)
        h = self.core(self.embed(src), self.embed(tgt), tgt_mask=mask)
        return self.proj(h)


class Seq2Seq(nn.Module):
    """Sockeye 1.5's RNN model as TBD ran it on IWSLT15 en-vi (docs: the models note, section
    2.2): reversed source, a bi-LSTM (hidden/2 per direction) then an LSTM encoder, four tanh
    FCs of the last valid encoder output as the decoder's initial (h, c) of both layers, a
    2-layer LSTM decoder run step by step with input feeding, MLP attention, a tanh hidden FC
    and the classifier over all steps at once. Time-major: ids (S, N), (T, N).
    PyTorch's LSTMs have two bias vectors per gate, as MXNet's LSTMCell (i2h and h2h).
    src_len, when given, stays on the CPU (pack_padded_sequence wants it there) whatever the
    model's device."""

    def __init__(self, src_vocab=17192, tgt_vocab=7710, embed=512, hidden=512):
        super().__init__()
        self.src_emb = nn.Embedding(src_vocab, embed)
        self.tgt_emb = nn.Embedding(tgt_vocab, embed)
        self.enc0 = nn.LSTM(embed, hidden // 2, bidirectional=True)
        self.enc1 = nn.LSTM(hidden, hidden)
        # h0, c0, h1, c1 of the decoder's two layers
        self.init_fc = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(4))
        self.keys = nn.Linear(hidden, hidden, bias=False)  # the attention's e2h
        self.dec0 = nn.LSTMCell(embed + hidden, hidden)
        self.dec1 = nn.LSTMCell(hidden, hidden)
        self.query = nn.Linear(hidden, hidden, bias=False)  # q2h
        self.v = nn.Parameter(torch.empty(hidden).uniform_(-0.1, 0.1))  # h2s
        self.hidden_fc = nn.Linear(2 * hidden, hidden)
        self.cls = nn.Linear(hidden, tgt_vocab)

    def forward(self, src, tgt, src_len=None):
        """src: (S, N) ids, already reversed; tgt: (T, N) decoder input ids; src_len: (N,)
        valid source lengths (None: all S). Returns logits (T, N, V_tgt)."""
        s_len, n = src.shape
        emb = self.src_emb(src)
        if src_len is None:
            enc, _ = self.enc1(self.enc0(emb)[0])  # (S, N, H)
            last = enc[-1]
            pad = None
        else:
            # Packed, so that each direction sees exactly the valid steps (Sockeye reverses
            # within the valid length, so its backward direction starts at the last token).
            packed = nn.utils.rnn.pack_padded_sequence(emb, src_len, enforce_sorted=False)
            enc, _ = self.enc1(self.enc0(packed)[0])
            enc, _ = nn.utils.rnn.pad_packed_sequence(enc, total_length=s_len)
            lengths = src_len.to(enc.device)
            last = enc[lengths - 1, torch.arange(n, device=enc.device)]
            pad = torch.arange(s_len, device=enc.device).unsqueeze(1) >= lengths.unsqueeze(0)
        h0, c0, h1, c1 = (torch.tanh(fc(last)) for fc in self.init_fc)
        keys = self.keys(enc)  # (S, N, H), once
        enc_b = enc.transpose(0, 1)  # (N, S, H) for the context's batched product
        temb = self.tgt_emb(tgt)  # (T, N, E)
        feed = enc.new_zeros(n, enc.shape[2])
        outs = []
        for t in range(tgt.shape[0]):
            h0, c0 = self.dec0(torch.cat([temb[t], feed], 1), (h0, c0))
            h1, c1 = self.dec1(h0, (h1, c1))
            ctx = self.attention(keys, self.query(h1), enc_b, pad)
            feed = torch.tanh(self.hidden_fc(torch.cat([h1, ctx], 1)))
            outs.append(feed)
        return self.cls(torch.stack(outs))

    def attention(self, keys, query, enc_b, pad=None):
        """One decoder step's MLP attention (tbd's MlpAttention layer): keys (S, N, A) = the
        e2h projection of the encoder states, query (N, A) = q2h of the decoder output, enc_b
        (N, S, H) the encoder states batch-major, pad (S, N) bool or None. Returns ctx (N, H)."""
        score = torch.tanh(keys + query).matmul(self.v)  # (S, N)
        if pad is not None:
            score = score.masked_fill(pad, float("-inf"))
        alpha = torch.softmax(score, 0)
        return torch.bmm(alpha.t().unsqueeze(1), enc_b).squeeze(1)  # (N, H)


class DeepSpeech2(nn.Module):
    """Deep Speech 2 as TBD (2018) ran it in MXNet (docs: the models note, section 4.1), with
    cuDNN/PyTorch GRU cells instead of MXNet's (reset gate after the recurrent product, no
    BatchNorm inside the cell): conv (11x41, stride 2x2) -> ReLU -> BN, conv (11x21, stride
    1x2) -> ReLU -> BN, a 7-layer GRU stack forward and a separate one over the reversed
    sequence, concatenated after the last layer, FC (no bias) -> BN over the T2*N rows -> ReLU,
    classifier per step. Input (N, 1, T, F): T frames (H), F frequency bins (W).
    PyTorch's CPU GRU is a per-step composite under autograd: the backward forms each step's
    recurrent weight gradient (3H x H, 37 MB at H = 1760) as its own product and adds it up,
    485 steps x 14 layers at T = 1000. That is memory-bound and nearly independent of the
    batch (measured at 60 frames: the same backward time at batch 1 and 4), so the step is
    slow at small batches; it is what stock PyTorch does, not a fault of this script."""

    def __init__(self, bins=161, classes=29, hidden=1760, layers=7, channels=32,
                 k1=(11, 41), k2=(11, 21)):
        super().__init__()
        self.k1, self.k2 = k1, k2
        self.conv1 = nn.Conv2d(1, channels, k1, stride=(2, 2), bias=False)
        self.bn1 = nn.BatchNorm2d(channels, eps=1e-5)
        self.conv2 = nn.Conv2d(channels, channels, k2, stride=(1, 2), bias=False)
        self.bn2 = nn.BatchNorm2d(channels, eps=1e-5)
        feat = channels * (((bins - k1[1]) // 2 + 1 - k2[1]) // 2 + 1)
        self.gru_fwd = nn.GRU(feat, hidden, num_layers=layers)
        self.gru_bwd = nn.GRU(feat, hidden, num_layers=layers)
        self.fc = nn.Linear(2 * hidden, hidden, bias=False)
        self.bn = nn.BatchNorm1d(hidden)
        self.cls = nn.Linear(hidden, classes)

    def out_frames(self, frames):
        """T2, the steps the GRUs and the CTC see for `frames` input frames."""
        return (frames - self.k1[0]) // 2 + 1 - self.k2[0] + 1

    def forward(self, x):
        """x: (N, 1, T, F); returns logits (T2, N, classes)."""
        y = self.bn1(F.relu(self.conv1(x)))
        y = self.bn2(F.relu(self.conv2(y)))  # (N, C, T2, bins2)
        n, c, t2, f2 = y.shape
        y = y.permute(2, 0, 1, 3).reshape(t2, n, c * f2)
        fwd, _ = self.gru_fwd(y)
        bwd, _ = self.gru_bwd(torch.flip(y, [0]))
        h = torch.cat([fwd, torch.flip(bwd, [0])], 2).reshape(t2 * n, -1)
        h = F.relu(self.bn(self.fc(h)))
        return self.cls(h).reshape(t2, n, -1)


class A3cNet(nn.Module):
    """TBD's TensorFlow A3C network (models/a3c.h): uint8 frames / 255, conv 16 8x8/4 pad 2,
    conv 32 4x4/2 pad 2 (TensorFlow 'SAME' sizes: 21, 11), FC 256, policy and value heads."""

    def __init__(self, actions=4, frame=84, hidden=256):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 16, 8, 4, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 4, 2, padding=2)
        s2 = -(-(-(-frame // 4)) // 2)
        self.fc = nn.Linear(32 * s2 * s2, hidden)
        self.policy = nn.Linear(hidden, actions)
        self.value = nn.Linear(hidden, 1)

    def forward(self, frames):
        x = frames.float() / 255.0
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = F.relu(self.fc(x.flatten(1)))
        return self.policy(x), self.value(x).squeeze(1)


def a3c_setup(t_max=5, updates=8, tiny=False, pool=64, seed=0, device="cpu"):
    """One A3C actor-learner: the global and local networks, the shared RMSprop and a step of
    `updates` updates. Returns a dict: net (the global one), step, t_max, updates. On another
    device the actions and rewards are still drawn on the CPU (the same generator)."""
    torch.manual_seed(seed)
    frame = 36 if tiny else 84
    kw = dict(frame=frame, hidden=32 if tiny else 256)
    global_net, local = A3cNet(**kw).to(device), A3cNet(**kw).to(device)
    opt = torch.optim.RMSprop(global_net.parameters(), lr=2.5e-4, alpha=0.99, eps=1e-6)
    frames = torch.randint(0, 256, (pool, frame, frame), dtype=torch.uint8).to(device)
    gen = torch.Generator().manual_seed(seed)
    state = {"pos": 0}

    def observe():
        idx = [(state["pos"] + s) % pool for s in range(4)]
        return frames[idx].unsqueeze(0)

    def update():
        local.load_state_dict(global_net.state_dict())  # pull
        states, actions, rewards = [], [], []
        with torch.no_grad():
            for t in range(t_max + 1):
                s = observe()
                logits, value = local(s)
                if t == t_max:
                    ret = value.item()  # the bootstrap value
                    break
                a = torch.multinomial(F.softmax(logits, 1).cpu(), 1, generator=gen).item()
                states.append(s)
                actions.append(a)
                rewards.append(1.0 if torch.rand((), generator=gen).item() < 0.1 else 0.0)
                state["pos"] = (state["pos"] + 1 + a) % pool
        returns = []
        for r in reversed(rewards):
            ret = r + 0.99 * ret
            returns.append(ret)
        returns = torch.tensor(returns[::-1], device=device)
        local.zero_grad(set_to_none=False)
        logits, value = local(torch.cat(states))
        q = F.softmax(logits, 1) + 1e-8
        entropy = -(q * q.log()).sum(1)
        adv = (returns - value).detach()
        picked = q.gather(1, torch.tensor(actions, device=device).unsqueeze(1)).squeeze(1)
        loss = (-(picked.log() * adv + 0.01 * entropy)).sum() + ((value - returns) ** 2).sum()
        loss.backward()
        nn.utils.clip_grad_norm_(local.parameters(), 5.0)
        for g, l in zip(global_net.parameters(), local.parameters()):
            g.grad = l.grad  # the local gradients, applied to the global weights
        opt.step()
        return loss.item()

    def a3c_step():
        loss = 0.0
        for _ in range(updates):
            loss = update()
        return loss

    return {"net": global_net, "step": a3c_step, "t_max": t_max, "updates": updates}


def reverse_within(ids, lengths):
    """ids: (S, N); reverses each column's first lengths[n] entries, leaving the padding."""
    s_len = ids.shape[0]
    t = torch.arange(s_len, device=ids.device).unsqueeze(1)
    lengths = lengths.to(ids.device)
    idx = torch.where(t < lengths.unsqueeze(0), lengths.unsqueeze(0) - 1 - t, t)
    return ids.gather(0, idx)


def blas_info(threads):
    """The BLAS library this process loaded (torch's matrix products go there), what it is,
    and, for OpenBLAS, its build config and thread count after setting it to `threads`."""
    m = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    info = {"torch_build": m.group(1) if m else "unknown", "kind": "unknown", "library": None}
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and re.match(r"lib(open)?blas|libmkl_rt|libblis|lib[st]atlas",
                                                os.path.basename(parts[5])):
                    path = os.path.realpath(parts[5])
                    if path not in libs:
                        libs.append(path)
    except OSError:  # not Linux: the library stays unknown
        pass
    if not libs:
        return info
    info["library"] = libs[0] if len(libs) == 1 else libs
    low = " ".join(libs).lower()
    if "openblas" in low:
        info["kind"] = "OpenBLAS"
        try:
            lib = ctypes.CDLL(libs[0])
            lib.openblas_get_config.restype = ctypes.c_char_p
            lib.openblas_set_num_threads(ctypes.c_int(threads))
            info["config"] = lib.openblas_get_config().decode()
            info["threads"] = lib.openblas_get_num_threads()
            info["kind"] += " (OpenMP)" if "USE_OPENMP" in info["config"] else " (pthreads)"
        except (OSError, AttributeError):  # a build without these entry points
            pass
    elif "mkl" in low:
        info["kind"] = "MKL"
    elif "blis" in low:
        info["kind"] = "BLIS"
    elif "atlas" in low:
        info["kind"] = "ATLAS"
    elif "/blas/libblas" in low:
        info["kind"] = "reference BLAS (netlib, Debian libblas3)"
    return info


def time_steps(step, warmup, steps):
    """Runs `step` (which returns the loss) warmup + steps times; returns the timed steps'
    durations and every step's loss."""
    losses = [step() for _ in range(warmup)]
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - t0)
    return times, losses


def entry(net, times, losses, batch, items, common, **extra):
    """One model's JSON entry; items maps a name ('images', ...) to how many one step does."""
    med = statistics.median(times)
    e = {"batch": batch, **extra, "step_s": med, "step_times_s": times}
    for name, count in items.items():
        e[name + "_per_s"] = count / med
    e["params"] = sum(p.numel() for p in net.parameters())
    e["losses"] = losses
    e.update(common)
    return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--resnet-batch", type=int, default=4, help="0 skips ResNet-50")
    ap.add_argument("--transformer-batch", type=int, default=8, help="0 skips the Transformer")
    ap.add_argument("--seq-len", type=int, default=32, help="the Transformer's source and target")
    ap.add_argument("--inception-batch", type=int, default=0, help="0 skips Inception-v3")
    ap.add_argument("--seq2seq-batch", type=int, default=0, help="0 skips Seq2Seq")
    ap.add_argument("--seq2seq-len", type=int, default=None,
                    help="Seq2Seq's source and target length (default 30, tiny 8)")
    ap.add_argument("--seq2seq-mask", action="store_true",
                    help="Seq2Seq with random valid lengths (sample 0 full) instead of all full")
    ap.add_argument("--ds2-batch", type=int, default=0, help="0 skips DeepSpeech2")
    ap.add_argument("--ds2-frames", type=int, default=None,
                    help="DeepSpeech2's input frames T (10 ms each; default 1000, tiny 40)")
    ap.add_argument("--ds2-label-len", type=int, default=None,
                    help="DeepSpeech2's label length, every sample (default 150, tiny 5)")
    ap.add_argument("--wgan-batch", type=int, default=0, help="0 skips WGAN-GP")
    ap.add_argument("--a3c-batch", type=int, default=0,
                    help="A3C's t_max (tbd's batch; TBD ran 5), one actor-learner; 0 skips A3C")
    ap.add_argument("--fasterrcnn-batch", type=int, default=0,
                    help="Faster R-CNN's images per step (TBD ran 1); 0 skips Faster R-CNN")
    ap.add_argument("--fasterrcnn-size", default=None,
                    help="Faster R-CNN's image HxW (default 600x1000, tiny 128x192)")
    ap.add_argument("--fasterrcnn-gt", type=int, default=5,
                    help="real ground-truth boxes per image (of 100 rows; the rest padding)")
    ap.add_argument("--tiny", action="store_true",
                    help="functional check: Seq2Seq, DeepSpeech2, WGAN-GP, A3C and Faster R-CNN "
                         "at toy sizes")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--denormals", choices=("flush", "keep"), default="flush",
                    help="as tbd_bench --tbd_denormals (default flush: FTZ+DAZ)")
    a = ap.parse_args()
    if a.steps < 1:
        ap.error("--steps must be at least 1")
    if not 0 <= a.fasterrcnn_gt <= 100:
        ap.error("--fasterrcnn-gt must be in [0, 100] (100 ground-truth rows per image)")
    torch.set_num_threads(a.threads)
    # The same denormal handling as tbd_bench (backends/cpu/denormals.h), or the comparison
    # measures microcode assists rather than the frameworks.
    flushed = torch.set_flush_denormal(a.denormals == "flush")
    out = {"torch_version": torch.__version__, "threads": a.threads,
           "mkldnn": torch.backends.mkldnn.is_available(),
           "denormals": ("flushed to zero" if flushed and a.denormals == "flush" else "kept")}
    out["env"] = {k: v for k, v in sorted(os.environ.items())
                  if k.startswith(("MALLOC_", "OMP_", "GOMP_", "OPENBLAS_"))
                  or k in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    blas = blas_info(a.threads)
    out["blas"] = blas
    if blas["kind"] == "OpenBLAS (pthreads)" and a.threads > 1:
        print("torch_cpu_compare: torch's BLAS is OpenBLAS's pthreads build, whose threads "
              "compete with torch's OpenMP threads; run with LD_LIBRARY_PATH="
              "/usr/lib/x86_64-linux-gnu/openblas-openmp (apt-get install libopenblas0-openmp)",
              file=sys.stderr)
    elif not blas["kind"].startswith(("OpenBLAS", "MKL")):
        print(f"torch_cpu_compare: torch's BLAS is {blas['kind']} ({blas['library']}), not an "
              "optimized one: apt-get install libopenblas0-openmp and run with LD_LIBRARY_PATH="
              "/usr/lib/x86_64-linux-gnu/openblas-openmp", file=sys.stderr)
    common = {"threads": torch.get_num_threads(), "blas": blas["kind"]}
    if a.resnet_batch > 0:
        run_resnet(a, out, common)
    if a.transformer_batch > 0:
        run_transformer(a, out, common)
    if a.inception_batch > 0:
        run_inception(a, out, common)
    if a.seq2seq_batch > 0:
        run_seq2seq(a, out, common)
    if a.ds2_batch > 0:
        run_ds2(a, out, common, ap)
    if a.wgan_batch > 0:
        run_wgan(a, out, common)
    if a.a3c_batch > 0:
        run_a3c(a, out, common)
    if a.fasterrcnn_batch > 0:
        run_fasterrcnn(a, out, common)
    print(json.dumps(out, indent=2))


def run_resnet(a, out, common):
    torch.manual_seed(0)  # each model's data and weights do not depend on which others run
    net, source = bottleneck_resnet50()
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.rand(a.resnet_batch, 3, 224, 224) * 2 - 1
    y = torch.randint(0, 1000, (a.resnet_batch,))

    def resnet_step():
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    times, losses = time_steps(resnet_step, a.warmup, a.steps)
    out["resnet50"] = entry(net, times, losses, a.resnet_batch, {"images": a.resnet_batch},
                            common, definition=source)


def run_transformer(a, out, common):
    torch.manual_seed(0)
    tr = Transformer()
    tr.train()
    topt = torch.optim.Adam(tr.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    src = torch.randint(1, 32000, (a.transformer_batch, a.seq_len))
    tgt = torch.randint(1, 32000, (a.transformer_batch, a.seq_len))
    lab = torch.randint(1, 32000, (a.transformer_batch * a.seq_len,))

    def transformer_step():
        topt.zero_grad(set_to_none=False)
        logits = tr(src, tgt).reshape(-1, 32000)
        loss = F.cross_entropy(logits, lab, label_smoothing=0.1)
        loss.backward()
        topt.step()
        return loss.item()

    times, losses = time_steps(transformer_step, a.warmup, a.steps)
    out["transformer"] = entry(tr, times, losses, a.transformer_batch,
                               {"sentences": a.transformer_batch,
                                "tokens": a.transformer_batch * a.seq_len},
                               common, seq_len=a.seq_len)


def inception_setup(n, device="cpu"):
    """torchvision's Inception-v3 with its aux classifier trained as models/inception_v3.cpp
    does: loss = CE(logits) + 0.4 CE(aux), SGD momentum 0.9, weight decay 1e-4, 299x299 inputs
    in [-1, 1). Returns the net and its step."""
    import torchvision
    torch.manual_seed(0)
    net = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=False)
    net.to(device).train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = (torch.rand(n, 3, 299, 299) * 2 - 1).to(device)
    y = torch.randint(0, 1000, (n,)).to(device)

    def inception_step():
        opt.zero_grad(set_to_none=False)
        logits, aux = net(x)
        loss = F.cross_entropy(logits, y) + 0.4 * F.cross_entropy(aux, y)
        loss.backward()
        opt.step()
        return loss.item()

    return net, inception_step


def run_inception(a, out, common):
    net, step = inception_setup(a.inception_batch)
    times, losses = time_steps(step, a.warmup, a.steps)
    out["inception_v3"] = entry(net, times, losses, a.inception_batch,
                                {"images": a.inception_batch}, common,
                                definition="torchvision", aux_weight=0.4)


# tbd's defaults (models/seq2seq.h, models/deepspeech2.h): source and target length, input
# frames, and labels per utterance (15 characters per second of audio).
SEQ2SEQ_LEN = 30
DS2_FRAMES = 1000
DS2_LABEL_LEN = 150


def seq2seq_setup(n, length=None, tiny=False, mask=False, device="cpu"):
    """Seq2Seq at batch n, its synthetic batch, Adam and its training step (forward,
    cross-entropy over the non-pad tokens, backward, element-wise clip 1, update) on `device`.
    Weights and data are drawn on the CPU (seed 0) and then moved, so every device starts from
    the same values. Returns a dict: net, step (one training step; returns the loss, a float),
    dims, length, lab (the labels, on the device)."""
    torch.manual_seed(0)
    length = length or (8 if tiny else SEQ2SEQ_LEN)
    dims = (dict(src_vocab=50, tgt_vocab=50, embed=16, hidden=16) if tiny
            else dict(src_vocab=17192, tgt_vocab=7710, embed=512, hidden=512))
    net = Seq2Seq(**dims).to(device)
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=3e-4)
    src = torch.randint(1, dims["src_vocab"], (length, n))
    tgt = torch.randint(1, dims["tgt_vocab"], (length, n))
    lab = torch.randint(1, dims["tgt_vocab"], (length, n))
    src_len = None
    if mask:
        src_len = torch.randint(1, length + 1, (n,))  # stays on the CPU (Seq2Seq.forward)
        tgt_len = torch.randint(1, length + 1, (n,))
        src_len[0] = tgt_len[0] = length  # the batch's longest fills the bucket
        t = torch.arange(length).unsqueeze(1)
        src = src.masked_fill(t >= src_len, 0)
        tgt = tgt.masked_fill(t >= tgt_len, 0)
        lab = lab.masked_fill(t >= tgt_len, 0)  # pad: ignored by the loss
    src, tgt, lab = src.to(device), tgt.to(device), lab.to(device)
    params = list(net.parameters())

    def seq2seq_step():
        opt.zero_grad(set_to_none=False)
        rsrc = torch.flip(src, [0]) if src_len is None else reverse_within(src, src_len)
        logits = net(rsrc, tgt, src_len)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[2]), lab.reshape(-1),
                               ignore_index=0)  # mean over the non-pad tokens
        loss.backward()
        nn.utils.clip_grad_value_(params, 1.0)  # MXNet's clip_gradient: element-wise
        opt.step()
        return loss.item()

    return {"net": net, "step": seq2seq_step, "dims": dims, "length": length, "lab": lab}


def run_seq2seq(a, out, common):
    n = a.seq2seq_batch
    s = seq2seq_setup(n, a.seq2seq_len, a.tiny, a.seq2seq_mask)
    times, losses = time_steps(s["step"], a.warmup, a.steps)
    out["seq2seq"] = entry(s["net"], times, losses, n,
                           {"sentences": n, "target_tokens": int((s["lab"] != 0).sum())}, common,
                           src_len=s["length"], tgt_len=s["length"], masked=a.seq2seq_mask,
                           tiny=a.tiny, **s["dims"])


def ctc_args(lab, frames_out, device):
    """F.ctc_loss's targets, input lengths and target lengths for the labels lab (N, S), every
    sample with S labels and frames_out input steps. On the CPU: the padded (N, S) int64 labels
    and int64 length tensors (what this script has always run). Elsewhere: the form for which
    PyTorch hands the loss to cuDNN (F.ctc_loss's notes): concatenated int32 targets on the
    host and the lengths as ints, every input length the full T (with blank 0 and S < 256);
    in any other form PyTorch runs its own CUDA kernels."""
    n, s = lab.shape
    if torch.device(device).type == "cpu":
        return (lab, torch.full((n,), frames_out, dtype=torch.long),
                torch.full((n,), s, dtype=torch.long))
    return lab.to(torch.int32).reshape(-1).cpu().contiguous(), (frames_out,) * n, (s,) * n


def ds2_setup(n, frames=None, label_len=None, tiny=False, device="cpu"):
    """DeepSpeech2 at batch n, its synthetic batch (every utterance `frames` frames and
    `label_len` labels), SGD with momentum and its training step (forward, log-softmax, CTC
    summed / N, backward, element-wise clip 100, update) on `device`, drawn on the CPU as in
    seq2seq_setup. Raises ValueError when the frames leave fewer CTC steps than labels.
    Returns a dict: net, step, dims, frames, ctc_steps, label_len."""
    torch.manual_seed(0)
    frames = frames or (40 if tiny else DS2_FRAMES)
    label_len = label_len or (5 if tiny else DS2_LABEL_LEN)
    dims = (dict(bins=20, classes=29, hidden=16, layers=7, channels=4, k1=(5, 5), k2=(5, 5))
            if tiny else dict(bins=161, classes=29, hidden=1760, layers=7, channels=32,
                              k1=(11, 41), k2=(11, 21)))
    net = DeepSpeech2(**dims)
    t2 = net.out_frames(frames)
    if t2 < label_len:  # CTC needs at least one step per label
        raise ValueError(f"--ds2-frames {frames} gives {t2} CTC steps, fewer than "
                         f"--ds2-label-len {label_len}")
    net.to(device)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=3e-4, momentum=0.9)
    x = torch.randn(n, 1, frames, dims["bins"]).to(device)
    lab = torch.randint(1, dims["classes"], (n, label_len))
    targets, in_len, lab_len = ctc_args(lab, t2, device)
    params = list(net.parameters())

    def ds2_step():
        opt.zero_grad(set_to_none=False)
        logp = F.log_softmax(net(x), 2)
        # The mean over samples of -log p(label | x): summed, / N (warp-ctc as MXNet's
        # WarpCTC and TBD used it), not torch's 'mean', which divides by the label lengths.
        loss = F.ctc_loss(logp, targets, in_len, lab_len, blank=0, reduction="sum") / n
        loss.backward()
        nn.utils.clip_grad_value_(params, 100.0)  # MXNet's clip_gradient 100: element-wise
        opt.step()
        return loss.item()

    return {"net": net, "step": ds2_step, "dims": dims, "frames": frames, "ctc_steps": t2,
            "label_len": label_len}


def run_ds2(a, out, common, ap):
    n = a.ds2_batch
    try:
        s = ds2_setup(n, a.ds2_frames, a.ds2_label_len, a.tiny)
    except ValueError as e:
        ap.error(str(e))
    times, losses = time_steps(s["step"], a.warmup, a.steps)
    dims = dict(s["dims"])
    dims["k1"], dims["k2"] = list(dims["k1"]), list(dims["k2"])
    out["deepspeech2"] = entry(s["net"], times, losses, n,
                               {"utterances": n, "frames": n * s["frames"]}, common,
                               frames=s["frames"], ctc_steps=s["ctc_steps"],
                               label_len=s["label_len"], tiny=a.tiny, **dims)


class WganUp(nn.Module):
    """Up-sampling residual block (gan_64x64.py ResidualBlock, resample='up'): shortcut =
    upsample, conv 1x1 (+b); main = BN, ReLU, upsample, conv 3x3 (no bias), BN, ReLU, conv 3x3
    (+b). Upsampling nearest 2x (tflib's tile-and-depth_to_space)."""

    def __init__(self, cin, cout):
        super().__init__()
        self.shortcut = nn.Conv2d(cin, cout, 1)
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)

    def forward(self, x):
        def up(t):
            return F.interpolate(t, scale_factor=2, mode="nearest")
        h = self.conv1(up(F.relu(self.bn1(x))))
        return self.shortcut(up(x)) + self.conv2(F.relu(self.bn2(h)))


class WganDown(nn.Module):
    """Down-sampling residual block (resample='down'): shortcut = 2x2 mean pool, conv 1x1 (+b);
    main = LN, ReLU, conv 3x3 in->in (no bias), LN, ReLU, conv 3x3 in->out (+b), mean pool. LN
    over (C, H, W) with per-channel affine = GroupNorm(1, C), eps 1e-5."""

    def __init__(self, cin, cout):
        super().__init__()
        self.shortcut = nn.Conv2d(cin, cout, 1)
        self.ln1 = nn.GroupNorm(1, cin)
        self.conv1 = nn.Conv2d(cin, cin, 3, padding=1, bias=False)
        self.ln2 = nn.GroupNorm(1, cin)
        self.conv2 = nn.Conv2d(cin, cout, 3, padding=1)

    def forward(self, x):
        h = self.conv1(F.relu(self.ln1(x)))
        h = F.avg_pool2d(self.conv2(F.relu(self.ln2(h))), 2)
        return self.shortcut(F.avg_pool2d(x, 2)) + h


class WganGenerator(nn.Module):
    def __init__(self, dim=64, blocks=4, z=128):
        super().__init__()
        w = [c * dim for c in [8, 8, 4, 2, 1][-(blocks + 1):]]
        self.c0 = w[0]
        self.input = nn.Linear(z, w[0] * 16)
        self.blocks = nn.Sequential(*[WganUp(w[i], w[i + 1]) for i in range(blocks)])
        self.out_bn = nn.BatchNorm2d(w[-1])
        self.output = nn.Conv2d(w[-1], 3, 3, padding=1)

    def forward(self, z):
        h = self.blocks(self.input(z).view(-1, self.c0, 4, 4))
        return torch.tanh(self.output(F.relu(self.out_bn(h))))


class WganCritic(nn.Module):
    def __init__(self, dim=64, blocks=4):
        super().__init__()
        w = [c * dim for c in [1, 2, 4, 8, 8][:blocks + 1]]
        self.input = nn.Conv2d(3, w[0], 3, padding=1)
        self.blocks = nn.Sequential(*[WganDown(w[i], w[i + 1]) for i in range(blocks)])
        self.output = nn.Linear(w[-1] * 16, 1)

    def forward(self, x):
        return self.output(self.blocks(self.input(x)).flatten(1))


WGAN_CRITIC_ITERS = 5


def wgan_setup(n, tiny=False, device="cpu"):
    """WGAN-GP at batch n: generator, critic, Adam(1e-4, betas (0, 0.9)) each, a pool of 5 real
    batches (uniform in [-1, 1)) and 6 noise batches (standard normal) drawn on the CPU (seed 0)
    and moved to `device`, and one iteration as TBD ran it (the step returns the last critic
    loss). Returns a dict: gen, critic, step, dims."""
    torch.manual_seed(0)
    dims = dict(dim=4, blocks=1) if tiny else dict(dim=64, blocks=4)
    gen = WganGenerator(**dims).to(device)
    critic = WganCritic(**dims).to(device)
    gen.train()
    critic.train()
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-4, betas=(0.0, 0.9))
    opt_d = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
    side = 4 << dims["blocks"]
    reals = [(torch.rand(n, 3, side, side) * 2 - 1).to(device) for _ in range(WGAN_CRITIC_ITERS)]
    noise = [torch.randn(n, 128).to(device) for _ in range(WGAN_CRITIC_ITERS + 1)]
    d_params = list(critic.parameters())

    def wgan_step():
        # The generator step: no critic weight gradients.
        for p in d_params:
            p.requires_grad_(False)
        opt_g.zero_grad(set_to_none=False)
        g_loss = -critic(gen(noise[-1])).mean()
        g_loss.backward()
        opt_g.step()
        for p in d_params:
            p.requires_grad_(True)
        for i in range(WGAN_CRITIC_ITERS):
            opt_d.zero_grad(set_to_none=False)
            real = reals[i]
            with torch.no_grad():
                fake = gen(noise[i])
            alpha = torch.rand(n, 1, 1, 1, device=device)
            x_hat = (real + alpha * (fake - real)).requires_grad_(True)
            grad = torch.autograd.grad(critic(x_hat).sum(), x_hat, create_graph=True)[0]
            gp = ((grad.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
            loss = critic(fake).mean() - critic(real).mean() + 10 * gp
            loss.backward()
            opt_d.step()
        return loss.item()

    return {"gen": gen, "critic": critic, "step": wgan_step, "dims": dims}


def run_wgan(a, out, common):
    n = a.wgan_batch
    s = wgan_setup(n, a.tiny)
    times, losses = time_steps(s["step"], a.warmup, a.steps)
    e = entry(s["gen"], times, losses, n,
              {"images": n, "critic_steps": WGAN_CRITIC_ITERS}, common, tiny=a.tiny, **s["dims"])
    e["params"] = {"generator": e["params"],
                   "critic": sum(p.numel() for p in s["critic"].parameters())}
    out["wgan"] = e

def run_a3c(a, out, common):
    s = a3c_setup(a.a3c_batch, tiny=a.tiny)
    times, losses = time_steps(s["step"], a.warmup, a.steps)
    u = s["updates"]
    out["a3c"] = entry(s["net"], times, losses, a.a3c_batch,
                       {"updates": u, "frames": u * s["t_max"]}, common, actors=1,
                       updates_per_step=u, tiny=a.tiny)


# ---- Faster R-CNN: MXNet's rcnn example (end to end, ResNet-101 v2) as TBD ran it, the
# network and training step of tbd's FasterRCNN model (docs: the models note, section 3.1) ----

FRCNN_BN_EPS = 2e-5
# The full configuration; frcnn_setup(tiny=True) shrinks it to a toy that trains in a second.
FRCNN_FULL = dict(image=(600, 1000), classes=21, gt_rows=100, stem=64,
                  units=(3, 4, 23, 3), widths=(256, 512, 1024, 2048), rpn=512,
                  scales=(8, 16, 32), ratios=(0.5, 1, 2), stride=16,
                  rpn_batch=256, pre_nms=12000, post_nms=2000, rois=128, pool=14, lr=0.001)
FRCNN_TINY = dict(FRCNN_FULL, image=(128, 192), classes=3, stem=8, units=(1, 1, 1, 1),
                  widths=(32, 64, 128, 256), rpn=32, scales=(2, 4, 8), rpn_batch=64,
                  pre_nms=600, post_nms=100, rois=32, pool=6, lr=0.01)
# MXNet's stored and trained parameters of the full configuration (the models note, 3.3).
FRCNN_PARAMS = 47_454_565
FRCNN_TRAINABLE = 47_134_367


class FrozenBN(nn.Module):
    """MXNet's BatchNorm with use_global_stats (and gamma, beta in FIXED_PARAMS): a fixed
    per-channel affine from the running statistics, eps 2e-5. gamma and beta are stored
    parameters without gradients (counted as MXNet counts them), the statistics buffers.
    torchvision.ops.FrozenBatchNorm2d keeps gamma and beta as buffers and computes the affine
    in two element-wise passes; F.batch_norm in inference mode is one fused pass each way."""

    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(c), requires_grad=False)
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))

    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            False, 0.0, FRCNN_BN_EPS)


class PreActUnit(nn.Module):
    """MXNet's residual_unit (bottle_neck=True, ResNet v2): act1 = relu(bn1(x)); 1x1 -> mid,
    BN-ReLU, 3x3 stride s -> mid, BN-ReLU, 1x1 -> out; shortcut x, or a 1x1 stride-s
    convolution of act1 where the unit changes shape. No biases."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        mid = cout // 4
        self.bn1 = FrozenBN(cin)
        self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn2 = FrozenBN(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False)
        self.bn3 = FrozenBN(mid)
        self.conv3 = nn.Conv2d(mid, cout, 1, bias=False)
        self.shortcut = (None if cin == cout and stride == 1
                         else nn.Conv2d(cin, cout, 1, stride, bias=False))

    def forward(self, x):
        act1 = F.relu(self.bn1(x))
        y = self.conv2(F.relu(self.bn2(self.conv1(act1))))
        y = self.conv3(F.relu(self.bn3(y)))
        return y + (x if self.shortcut is None else self.shortcut(act1))


def frcnn_stage(cin, cout, units, stride):
    return nn.Sequential(*[PreActUnit(cin if u == 0 else cout, cout, stride if u == 0 else 1)
                           for u in range(units)])


class FasterRCNN(nn.Module):
    """The network of MXNet's rcnn example with ResNet-101 v2 (symbol_resnet.get_resnet_train):
    bn_data, conv0 7x7/2, bn0-ReLU, max pool 3x3/2, stages 1-3 to stride 16 (conv_feat), the
    RPN (3x3 conv + ReLU, 1x1 objectness 2A, 1x1 deltas 4A), and on the pooled RoIs stage 4
    (stride 2 in its first unit), bn1-ReLU, global average pool and the two FCs. conv0,
    bn_data, bn0 and stage 1 are frozen (no weight or data gradients), every BN too."""

    def __init__(self, c):
        super().__init__()
        w = c["widths"]
        anchors = len(c["scales"]) * len(c["ratios"])
        self.bn_data = FrozenBN(3)
        self.conv0 = nn.Conv2d(3, c["stem"], 7, 2, 3, bias=False)
        self.bn0 = FrozenBN(c["stem"])
        self.stage1 = frcnn_stage(c["stem"], w[0], c["units"][0], 1)
        self.stage2 = frcnn_stage(w[0], w[1], c["units"][1], 2)
        self.stage3 = frcnn_stage(w[1], w[2], c["units"][2], 2)
        self.rpn_conv = nn.Conv2d(w[2], c["rpn"], 3, 1, 1)
        self.rpn_cls = nn.Conv2d(c["rpn"], 2 * anchors, 1)
        self.rpn_bbox = nn.Conv2d(c["rpn"], 4 * anchors, 1)
        self.stage4 = frcnn_stage(w[2], w[3], c["units"][3], 2)
        self.bn1 = FrozenBN(w[3])
        self.cls_score = nn.Linear(w[3], c["classes"])
        self.bbox_pred = nn.Linear(w[3], 4 * c["classes"])
        # MXNet's rcnn initialisation of the new layers (the backbone was pretrained).
        for m, std in ((self.rpn_conv, 0.01), (self.rpn_cls, 0.01), (self.rpn_bbox, 0.01),
                       (self.cls_score, 0.01), (self.bbox_pred, 0.001)):
            nn.init.normal_(m.weight, 0.0, std)
            nn.init.zeros_(m.bias)
        for m in (self.bn_data, self.conv0, self.bn0, self.stage1):
            m.requires_grad_(False)

    def features(self, x):
        """conv_feat (N, widths[2], H/16, W/16)."""
        y = F.relu(self.bn0(self.conv0(self.bn_data(x))))
        y = F.max_pool2d(y, 3, 2, 1)
        return self.stage3(self.stage2(self.stage1(y)))

    def rpn(self, feat):
        """Objectness logits (N, 2A, H, W), channels 0..A-1 background of anchor a, A..2A-1
        foreground; deltas (N, 4A, H, W), channel 4a + k."""
        h = F.relu(self.rpn_conv(feat))
        return self.rpn_cls(h), self.rpn_bbox(h)

    def head(self, pooled):
        h = F.relu(self.bn1(self.stage4(pooled))).mean((2, 3))
        return self.cls_score(h), self.bbox_pred(h)


def frcnn_anchors(stride, scales, ratios, feat_h, feat_w):
    """py-faster-rcnn's generate_anchors (base box 0..stride-1; ratio enumeration with its
    round-half-to-even, then scales), shifted by `stride` over the feature map. Returns
    (A*H*W, 4) float32 (x1, y1, x2, y2) in the (a, h, w) order."""
    size = float(stride * stride)
    ctr = 0.5 * (stride - 1)
    base = []
    for r in ratios:
        ws = round(math.sqrt(size / r))
        hs = round(ws * r)
        for s in scales:
            w, h = ws * s, hs * s
            base.append([ctr - 0.5 * (w - 1), ctr - 0.5 * (h - 1),
                         ctr + 0.5 * (w - 1), ctr + 0.5 * (h - 1)])
    base = torch.tensor(base, dtype=torch.float64)
    sy, sx = torch.meshgrid(torch.arange(feat_h, dtype=torch.float64) * stride,
                            torch.arange(feat_w, dtype=torch.float64) * stride, indexing="ij")
    shifts = torch.stack([sx, sy, sx, sy], 2)  # (H, W, 4)
    return (base[:, None, None, :] + shifts[None]).reshape(-1, 4).float()


def box_iou_plus1(a, b):
    """IoU matrix (len(a), len(b)) of inclusive pixel boxes (width = x2 - x1 + 1)."""
    area_a = (a[:, 2] - a[:, 0] + 1) * (a[:, 3] - a[:, 1] + 1)
    area_b = (b[:, 2] - b[:, 0] + 1) * (b[:, 3] - b[:, 1] + 1)
    iw = (torch.min(a[:, None, 2], b[None, :, 2]) - torch.max(a[:, None, 0], b[None, :, 0])
          + 1).clamp(min=0)
    ih = (torch.min(a[:, None, 3], b[None, :, 3]) - torch.max(a[:, None, 1], b[None, :, 1])
          + 1).clamp(min=0)
    inter = iw * ih
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def bbox_encode(ex, gt):
    """py-faster-rcnn's bbox_transform: (dx, dy, dw, dh) of gt relative to ex."""
    ew, eh = ex[:, 2] - ex[:, 0] + 1, ex[:, 3] - ex[:, 1] + 1
    gw, gh = gt[:, 2] - gt[:, 0] + 1, gt[:, 3] - gt[:, 1] + 1
    return torch.stack([(gt[:, 0] + 0.5 * gw - ex[:, 0] - 0.5 * ew) / ew,
                        (gt[:, 1] + 0.5 * gh - ex[:, 1] - 0.5 * eh) / eh,
                        torch.log(gw / ew), torch.log(gh / eh)], 1)


def bbox_decode(boxes, d):
    """MXNet's Proposal op (BBoxTransformInv): the exact inverse of bbox_encode."""
    w, h = boxes[:, 2] - boxes[:, 0] + 1, boxes[:, 3] - boxes[:, 1] + 1
    cx, cy = boxes[:, 0] + 0.5 * (w - 1), boxes[:, 1] + 0.5 * (h - 1)
    pcx, pcy = d[:, 0] * w + cx, d[:, 1] * h + cy
    pw, ph = torch.exp(d[:, 2]) * w, torch.exp(d[:, 3]) * h
    return torch.stack([pcx - 0.5 * (pw - 1), pcy - 0.5 * (ph - 1),
                        pcx + 0.5 * (pw - 1), pcy + 0.5 * (ph - 1)], 1)


def frcnn_synthetic_gt(n, rows, real, image, classes, gen):
    """(n, rows, 5) ground truth: `real` random boxes per image inside the image (integer
    pixel corners, sides 32 px to half the image), classes in [1, classes); the other rows
    padding (every field -1)."""
    h, w = image
    gt = torch.full((n, rows, 5), -1.0)
    if real == 0:
        return gt
    bw = 32 + torch.rand(n, real, generator=gen) * (w / 2 - 32)
    bh = 32 + torch.rand(n, real, generator=gen) * (h / 2 - 32)
    x1 = (torch.rand(n, real, generator=gen) * (w - bw)).floor()
    y1 = (torch.rand(n, real, generator=gen) * (h - bh)).floor()
    gt[:, :real, 0], gt[:, :real, 1] = x1, y1
    gt[:, :real, 2], gt[:, :real, 3] = x1 + bw.floor() - 1, y1 + bh.floor() - 1
    gt[:, :real, 4] = torch.randint(1, classes, (n, real), generator=gen).float()
    return gt


def sample_down(mask_idx, keep, gen):
    """Indices of mask_idx beyond a random `keep` of them (to be disabled)."""
    if mask_idx.numel() <= keep:
        return mask_idx[:0]
    perm = torch.randperm(mask_idx.numel(), generator=gen, device=gen.device)
    return mask_idx[perm[keep:].to(mask_idx.device)]


@torch.no_grad()
def frcnn_anchor_targets(anchors, gt, c, feat_hw, gen):
    """MXNet's AnchorLoader assign_anchor on the device: labels (N, A*H*W) int64 in {-1, 0, 1},
    bbox targets and weights (N, 4A, H, W) (channel 4a + k)."""
    n = gt.shape[0]
    img_h, img_w = c["image"]
    fh, fw = feat_hw
    k_all = anchors.shape[0]
    a = k_all // (fh * fw)
    inside = ((anchors[:, 0] >= 0) & (anchors[:, 1] >= 0) & (anchors[:, 2] < img_w)
              & (anchors[:, 3] < img_h)).nonzero()[:, 0]
    ins = anchors[inside]
    labels = torch.full((n, k_all), -1, dtype=torch.long, device=anchors.device)
    targets = torch.zeros(n, k_all, 4, device=anchors.device)
    weights = torch.zeros(n, k_all, 4, device=anchors.device)
    fg_max = int(c["rpn_batch"] * 0.5)
    for i in range(n):
        g = gt[i][gt[i, :, 4] >= 0, :4]
        lab = torch.zeros(ins.shape[0], dtype=torch.long, device=anchors.device)
        if g.shape[0]:
            ov = box_iou_plus1(ins, g)  # (inside anchors, G)
            max_ov, argmax = ov.max(1)
            gt_max = ov.max(0).values
            lab.fill_(-1)
            lab[max_ov < 0.3] = 0
            # The best anchors of each gt box (ties included), as py-faster-rcnn; a box that
            # overlaps no anchor at all has none.
            lab[((ov == gt_max[None]) & (ov > 0)).any(1)] = 1
            lab[max_ov >= 0.7] = 1
        lab[sample_down((lab == 1).nonzero()[:, 0], fg_max, gen)] = -1
        bg_keep = c["rpn_batch"] - int((lab == 1).sum())
        lab[sample_down((lab == 0).nonzero()[:, 0], bg_keep, gen)] = -1
        labels[i, inside] = lab
        if g.shape[0]:
            pos = (lab == 1).nonzero()[:, 0]
            targets[i, inside[pos]] = bbox_encode(ins[pos], g[argmax[pos]])
            weights[i, inside[pos]] = 1.0

    def to_map(t):  # (N, A*H*W, 4) in (a, h, w) order -> (N, 4A, H, W), channel 4a + k
        return t.view(n, a, fh, fw, 4).permute(0, 1, 4, 2, 3).reshape(n, 4 * a, fh, fw)

    return labels, to_map(targets), to_map(weights)


@torch.no_grad()
def frcnn_proposals(cls, deltas, anchors, c):
    """MXNet's Proposal op: per image, decode the deltas on the anchors, clip to the image,
    drop boxes under 16 px a side, the top pre_nms by score (fg - bg logit, monotone in the
    softmax), torchvision's NMS at 0.7 (on boxes with x2, y2 + 1, which makes its IoU the
    inclusive one), keep post_nms, padded by repeating cyclically. Returns (N*post_nms, 5)."""
    n, a2, fh, fw = cls.shape
    a = a2 // 2
    img_h, img_w = c["image"]
    score = (cls[:, a:] - cls[:, :a]).reshape(n, -1)
    d = deltas.view(n, a, 4, fh, fw).permute(0, 1, 3, 4, 2).reshape(n, -1, 4)
    out = []
    for i in range(n):
        b = bbox_decode(anchors, d[i])
        b = torch.stack([b[:, 0].clamp(0, img_w - 1), b[:, 1].clamp(0, img_h - 1),
                         b[:, 2].clamp(0, img_w - 1), b[:, 3].clamp(0, img_h - 1)], 1)
        big = ((b[:, 2] - b[:, 0] + 1 >= 16) & (b[:, 3] - b[:, 1] + 1 >= 16)).nonzero()[:, 0]
        if big.numel() == 0:  # nothing survives: the whole image, as one proposal
            b, s = b.new_tensor([[0, 0, img_w - 1, img_h - 1]]), score.new_ones(1)
        else:
            b, s = b[big], score[i, big]
        s, order = s.topk(min(c["pre_nms"], s.numel()))
        b = b[order]
        shifted = torch.cat([b[:, :2], b[:, 2:] + 1], 1)
        keep = torchvision_ops().nms(shifted, s, 0.7)[:c["post_nms"]]
        if keep.numel() < c["post_nms"]:
            keep = keep.repeat(-(-c["post_nms"] // keep.numel()))[:c["post_nms"]]
        out.append(torch.cat([b.new_full((keep.numel(), 1), float(i)), b[keep]], 1))
    return torch.cat(out)


@torch.no_grad()
def frcnn_proposal_targets(rois, gt, c, gen):
    """MXNet's proposal_target op: per image the gt boxes appended to its RoIs, foreground
    IoU >= 0.5 (at most a quarter of the RoIs, sampled), background [0, 0.5) filling the rest
    (repeated when too few), labels, and box targets / (0.1, 0.1, 0.2, 0.2) in the 4 columns of
    the class with weights 1 there. Returns rois (N*R, 5), labels (N*R), targets and weights
    (N*R, 4*classes)."""
    n = gt.shape[0]
    per, classes = c["rois"], c["classes"]
    fg_max = round(0.25 * per)
    stds = rois.new_tensor([0.1, 0.1, 0.2, 0.2])
    dev = rois.device
    post = rois.shape[0] // n
    out_rois, out_lab, out_t, out_w = [], [], [], []
    for i in range(n):
        g = gt[i][gt[i, :, 4] >= 0]
        r = torch.cat([rois[i * post:(i + 1) * post, 1:], g[:, :4]])
        if g.shape[0]:
            max_ov, assign = box_iou_plus1(r, g[:, :4]).max(1)
            lab = g[assign, 4].long()
        else:
            max_ov = r.new_zeros(r.shape[0])
            assign = torch.zeros(r.shape[0], dtype=torch.long, device=dev)
            lab = assign.clone()
        fg = (max_ov >= 0.5).nonzero()[:, 0]
        bg = ((max_ov < 0.5) & (max_ov >= 0)).nonzero()[:, 0]
        nfg = min(fg_max, fg.numel())
        fg = fg[torch.randperm(fg.numel(), generator=gen, device=gen.device)[:nfg].to(dev)]
        pool = bg if bg.numel() else fg  # (no background at all: repeat foreground)
        keep = [fg]
        have = nfg
        while have < per:
            take = min(pool.numel(), per - have)
            keep.append(pool[torch.randperm(pool.numel(), generator=gen,
                                            device=gen.device)[:take].to(dev)])
            have += take
        keep = torch.cat(keep)
        lab = lab[keep]
        lab[nfg:] = 0
        t = bbox_encode(r[keep], g[assign[keep], :4]) / stds if g.shape[0] else None
        tgt = r.new_zeros(per, 4 * classes)
        wgt = r.new_zeros(per, 4 * classes)
        rows = (lab > 0).nonzero()[:, 0]
        if rows.numel():
            cols = lab[rows, None] * 4 + torch.arange(4, device=dev)
            tgt[rows[:, None], cols] = t[rows]
            wgt[rows[:, None], cols] = 1.0
        out_rois.append(torch.cat([r.new_full((per, 1), float(i)), r[keep]], 1))
        out_lab.append(lab)
        out_t.append(tgt)
        out_w.append(wgt)
    return torch.cat(out_rois), torch.cat(out_lab), torch.cat(out_t), torch.cat(out_w)


def torchvision_ops():
    import torchvision
    return torchvision.ops


def frcnn_setup(n, image=None, num_gt=5, tiny=False, device="cpu", seed=0):
    """Faster R-CNN at n images per step: the network, its synthetic batch (images uniform in
    [-1, 1), `num_gt` real boxes of 100 ground-truth rows per image), SGD (lr 0.001, momentum
    0.9, weight decay 5e-4) over the trainable parameters, and the training step: anchor
    targets, forward, proposals + NMS, proposal targets, RoI max pooling (torchvision's
    roi_pool, 14x14 at 1/16), the four losses, backward, element-wise clip 5, update,
    zero_grad. Weights and data are drawn on the CPU (seed 0) and moved; the sampling draws
    from a seeded generator on the device. The step's no-grad detection parts are timed
    (synchronised on CUDA) into det_s: one dict per step run. Returns a dict: net, step,
    config, params, trainable, det_s, gt."""
    c = dict(FRCNN_TINY if tiny else FRCNN_FULL)
    if image:
        c["image"] = tuple(image)
    ops = torchvision_ops()
    torch.manual_seed(seed)
    net = FasterRCNN(c)
    params = sum(p.numel() for p in net.parameters())
    trainable = [p for p in net.parameters() if p.requires_grad]
    ntrain = sum(p.numel() for p in trainable)
    if not tiny:
        assert params == FRCNN_PARAMS and ntrain == FRCNN_TRAINABLE, (params, ntrain)
    net.to(device).train()  # every BN is frozen whatever the mode
    opt = torch.optim.SGD(trainable, lr=c["lr"], momentum=0.9, weight_decay=5e-4)
    gen_cpu = torch.Generator().manual_seed(seed)
    img_h, img_w = c["image"]
    x = (torch.rand(n, 3, img_h, img_w, generator=gen_cpu) * 2 - 1).to(device)
    gt = frcnn_synthetic_gt(n, c["gt_rows"], num_gt, c["image"], c["classes"], gen_cpu).to(device)
    fh, fw = img_h, img_w  # conv_feat: conv0, the max pool, stage 2's and stage 3's 3x3
    for k, st, p in ((7, 2, 3), (3, 2, 1), (3, 2, 1), (3, 2, 1)):
        fh, fw = (fh + 2 * p - k) // st + 1, (fw + 2 * p - k) // st + 1
    anchors = frcnn_anchors(c["stride"], c["scales"], c["ratios"], fh, fw).to(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    cuda = torch.device(device).type == "cuda"
    det_s = []
    last = {}

    def tick():
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def frcnn_step():
        t = {}
        t0 = tick()
        rpn_labels, rpn_t, rpn_w = frcnn_anchor_targets(anchors, gt, c, (fh, fw), gen)
        t["anchor_targets"] = tick() - t0
        feat = net.features(x)
        rpn_cls, rpn_bbox = net.rpn(feat)
        t0 = tick()
        rois = frcnn_proposals(rpn_cls.detach(), rpn_bbox.detach(), anchors, c)
        t["proposals_nms"] = tick() - t0
        t0 = tick()
        rois, labels, bbox_t, bbox_w = frcnn_proposal_targets(rois, gt, c, gen)
        t["proposal_targets"] = tick() - t0
        pooled = ops.roi_pool(feat, rois, (c["pool"], c["pool"]), 1.0 / c["stride"])
        cls_score, bbox_pred = net.head(pooled)
        a = rpn_cls.shape[1] // 2
        rpn_cls_loss = F.cross_entropy(rpn_cls.view(n, 2, a * fh * fw), rpn_labels,
                                       ignore_index=-1)
        rpn_box_loss = (F.smooth_l1_loss(rpn_bbox, rpn_t, reduction="none", beta=1.0 / 9)
                        * rpn_w).sum() / (c["rpn_batch"] * n)
        cls_loss = F.cross_entropy(cls_score, labels)
        box_loss = (F.smooth_l1_loss(bbox_pred, bbox_t, reduction="none", beta=1.0)
                    * bbox_w).sum() / (c["rois"] * n)
        parts = (rpn_cls_loss, rpn_box_loss, cls_loss, box_loss)
        loss = sum(parts)
        loss.backward()
        nn.utils.clip_grad_value_(trainable, 5.0)  # MXNet's clip_gradient: element-wise
        opt.step()
        opt.zero_grad(set_to_none=False)
        det_s.append(t)
        last["losses"] = dict(zip(("rpn_cls", "rpn_bbox", "rcnn_cls", "rcnn_bbox"),
                                  (v.item() for v in parts)))
        return loss.item()

    return {"net": net, "step": frcnn_step, "config": c, "params": params,
            "trainable": ntrain, "det_s": det_s, "last": last, "gt": gt, "feature": (fh, fw)}


def run_fasterrcnn(a, out, common):
    n = a.fasterrcnn_batch
    image = None
    if a.fasterrcnn_size:
        image = tuple(int(v) for v in a.fasterrcnn_size.lower().split("x"))
    s = frcnn_setup(n, image, a.fasterrcnn_gt, a.tiny)
    times, losses = time_steps(s["step"], a.warmup, a.steps)
    det = s["det_s"][-a.steps:]
    det_total = [sum(d.values()) for d in det]
    share = [d / t for d, t in zip(det_total, times)]
    c = s["config"]
    e = entry(s["net"], times, losses, n, {"images": n}, common, image=list(c["image"]),
              feature=list(s["feature"]), gt_real=a.fasterrcnn_gt, gt_rows=c["gt_rows"],
              classes=c["classes"], tiny=a.tiny,
              trainable_params=s["trainable"], last_losses=s["last"].get("losses"),
              detection={"parts_s": {k: statistics.median(d[k] for d in det) for k in det[0]},
                         "step_s": det_total, "share": share,
                         "share_median": statistics.median(share)})
    out["fasterrcnn"] = e


if __name__ == "__main__":
    main()
