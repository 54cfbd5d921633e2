"""GPT-2 (tbd's GPT2/train/batch:N/len:T[/size:S]) as models/gpt2.h defines it, which is llm.c's
GPT-2 (and nanoGPT's, which llm.c's train_gpt2.py is): token embedding of the vocabulary 50257
padded to 50304 plus a learned position embedding (1024 rows); L pre-LayerNorm blocks (eps
1e-5) of causal multi-head self-attention with biases and a 4x MLP with GELU (tanh
approximation); a final LayerNorm; the output head tied to the token embedding; cross-entropy
over the next tokens; AdamW (lr 3e-4, betas 0.9/0.999, eps 1e-8, weight decay 0.1 on the
matrices and embeddings, none on biases and LayerNorm parameters). Initialisation N(0, 0.02),
the residual projections N(0, 0.02/sqrt(2L)), as llm.c's. Sizes 124 (12 layers, 768 channels,
12 heads), 350 (24, 1024, 16), 774 (36, 1280, 20): the name's size:, 124 by default. Length T
(the name's len:, 1024 by default). The tiny configuration is models/gpt2.cpp's gpt2_tiny(): 2
layers, 32 channels, 4 heads, 16 positions, vocabulary 64 (no padding), T 8, lr 3e-3.

Deviations from tbd: attention is PyTorch's scaled_dot_product_attention(is_causal=True)
(fused, flash-style on the CPU in PyTorch 2.x) where it exists, and written out (masked softmax)
under PyTorch 1.13; tbd's is its own fused kind (ScaledDotProductAttention), or with unfused:1
its unfused MultiHeadAttention, whose q, k and v come from three (C, C) matrices: the same
parameters and FLOPs as the one (3C, C) matrix here.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import count_params, identity, only_params

MODEL = "GPT2"
PARAMS = 124_475_904
DEFAULT_LEN = 1024
SIZES = {124: dict(layers=12, channels=768, heads=12), 350: dict(layers=24, channels=1024, heads=16),
         774: dict(layers=36, channels=1280, heads=20)}
FULL = dict(vocab=50257, vocab_pad=50304, max_len=1024, lr=3e-4)
TINY = dict(layers=2, channels=32, heads=4, vocab=64, vocab_pad=64, max_len=16, len=8, lr=3e-3)


def expected_params(params):
    """tbd's parameter count for the row's size: (models/gpt2.h's formula)."""
    c = dict(FULL, **SIZES[int(params.get("size", 124))])
    ch = c["channels"]
    return c["vocab_pad"] * ch + c["max_len"] * ch + c["layers"] * (12 * ch * ch + 13 * ch) + 2 * ch


class Block(nn.Module):
    def __init__(self, c, heads, layers):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(c, eps=1e-5)
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c, eps=1e-5)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)
        for lin in (self.c_attn, self.c_fc):
            nn.init.normal_(lin.weight, 0.0, 0.02)
            nn.init.zeros_(lin.bias)
        for lin in (self.c_proj, self.mlp_proj):  # residual projections
            nn.init.normal_(lin.weight, 0.0, 0.02 / math.sqrt(2 * layers))
            nn.init.zeros_(lin.bias)

    def attn(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch 1.13
            s = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = s.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, layers, channels, heads, vocab_pad, max_len):
        super().__init__()
        self.wte = nn.Embedding(vocab_pad, channels)
        self.wpe = nn.Embedding(max_len, channels)
        nn.init.normal_(self.wte.weight, 0.0, 0.02)
        nn.init.normal_(self.wpe.weight, 0.0, 0.02)
        self.h = nn.ModuleList(Block(channels, heads, layers) for _ in range(layers))
        self.ln_f = nn.LayerNorm(channels, eps=1e-5)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # the head tied to wte


def setup(n, params=None, tiny=False, device="cpu", wrap=None):
    only_params(MODEL, params, ("len", "size"))
    wrap = wrap or identity
    params = params or {}
    if tiny:
        c = dict(TINY)
    else:
        size = int(params.get("size", 124))
        if size not in SIZES:
            raise ValueError(f"{MODEL}: size:{size} is not one of {', '.join(map(str, SIZES))}")
        c = dict(FULL, **SIZES[size], len=DEFAULT_LEN)
    length = int(params.get("len", c["len"]))
    if not 1 <= length <= c["max_len"]:
        raise ValueError(f"{MODEL}: len:{length} is outside [1, {c['max_len']}]")
    torch.manual_seed(0)
    net = GPT2(c["layers"], c["channels"], c["heads"], c["vocab_pad"], c["max_len"]).to(device)
    net.train()
    decay = [p for p in net.parameters() if p.dim() >= 2]
    no_decay = [p for p in net.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=c["lr"], betas=(0.9, 0.999), eps=1e-8)
    tokens = torch.randint(0, c["vocab"], (n, length)).to(device)
    labels = torch.randint(0, c["vocab"], (n * length,)).to(device)
    fwd = wrap(net)

    def gpt2_step():
        opt.zero_grad(set_to_none=False)
        logits = fwd(tokens).reshape(-1, c["vocab_pad"])
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        opt.step()
        return loss.item()

    return {"net": net, "nets": [net], "step": gpt2_step,
            "per_step": {"items": n, "tokens": n * length}, "params": count_params([net]),
            "config": {"len": length, "tiny": tiny}}
