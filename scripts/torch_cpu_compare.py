#!/usr/bin/env python3
"""scripts/torch_cpu_compare.py: PyTorch CPU training steps of the same models, for the
side-by-side (tbd must be at least as fast as a mainstream framework on the same machine).

Builds ResNet-50 v1.5 (torchvision's definition when available, else an equivalent one here)
and the same pre-norm Transformer-base as models/transformer.cpp (tied embeddings, sinusoidal
positions, dropout 0.1, label smoothing 0.1, Adam), times full training steps (forward, loss,
backward, optimizer) after warm-up with the same thread count, and prints one JSON object.

Usage: python3 scripts/torch_cpu_compare.py --threads 2 --resnet-batch 4 \
           --transformer-batch 8 --seq-len 32 --steps 5
"""
import argparse
import json
import math
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
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        h = self.core(self.embed(src), self.embed(tgt), tgt_mask=mask)
        return self.proj(h)


def time_steps(step, warmup, steps):
    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--resnet-batch", type=int, default=4)
    ap.add_argument("--transformer-batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--denormals", choices=("flush", "keep"), default="flush",
                    help="as tbd_bench --tbd_denormals (default flush: FTZ+DAZ)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    # The same denormal handling as tbd_bench (backends/cpu/denormals.h), or the comparison
    # measures microcode assists rather than the frameworks.
    flushed = torch.set_flush_denormal(a.denormals == "flush")
    out = {"torch_version": torch.__version__, "threads": a.threads,
           "mkldnn": torch.backends.mkldnn.is_available(),
           "denormals": ("flushed to zero" if flushed and a.denormals == "flush" else "kept")}

    net, source = bottleneck_resnet50()
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.rand(a.resnet_batch, 3, 224, 224) * 2 - 1
    y = torch.randint(0, 1000, (a.resnet_batch,))

    def resnet_step():
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(net(x), y).backward()
        opt.step()

    s = time_steps(resnet_step, a.warmup, a.steps)
    out["resnet50"] = {"batch": a.resnet_batch, "step_s": s, "images_per_s": a.resnet_batch / s,
                       "definition": source}

    tr = Transformer()
    tr.train()
    topt = torch.optim.Adam(tr.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    src = torch.randint(1, 32000, (a.transformer_batch, a.seq_len))
    tgt = torch.randint(1, 32000, (a.transformer_batch, a.seq_len))
    lab = torch.randint(1, 32000, (a.transformer_batch * a.seq_len,))

    def transformer_step():
        topt.zero_grad(set_to_none=False)
        logits = tr(src, tgt).reshape(-1, 32000)
        F.cross_entropy(logits, lab, label_smoothing=0.1).backward()
        topt.step()

    s = time_steps(transformer_step, a.warmup, a.steps)
    out["transformer"] = {"batch": a.transformer_batch, "seq_len": a.seq_len, "step_s": s,
                          "sentences_per_s": a.transformer_batch / s,
                          "params": sum(p.numel() for p in tr.parameters())}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
