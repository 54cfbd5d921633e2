"""Llama (tbd's Llama/train/batch:N/len:T[/size:S][/tied:1]) as models/llama.h defines it: a
Llama-3-style decoder. Token embedding (no position table); L pre-norm blocks of RMSNorm (eps
1e-5), causal grouped-query attention with rotary position embeddings (theta 500000, Meta's
interleaved pairs) on q and k, and a SwiGLU MLP, no biases; a final RMSNorm; an untied output
head (tied:1 ties it to the embedding); cross-entropy over the next tokens; AdamW (lr 3e-4,
betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the matrices and embeddings, none on the norms).
Initialisation N(0, 0.02), the residual projections (wo, w2) N(0, 0.02/sqrt(2L)). Sizes 1498
(Llama 3.2 1B's shape: 16 layers, 2048 channels, 32/8 heads, MLP 8192, vocabulary 128256; the
default) and 45 (4 layers, 512 channels, 8/2 heads, MLP 1536, vocabulary 32000). Length T (the
name's len:, 1024 by default). The tiny configuration is models/llama.cpp's llama_tiny(): 2
layers, 32 channels, 4/2 heads, MLP 64, vocabulary 64, T 8, lr 3e-3.

Deviations from tbd: attention is PyTorch's scaled_dot_product_attention(is_causal=True) on k
and v repeated per query head (written out under PyTorch 1.13); tbd's is its own fused kind
reading the grouped heads in place. RMSNorm and RoPE are written out here (PyTorch 1.13 has
neither). wq, wk, wv (and w1, w3) are separate matrices here, one packed matrix each in tbd:
the same parameters and FLOPs, other draws.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import count_params, identity, only_params

MODEL = "Llama"
PARAMS = 1_498_482_688
DEFAULT_LEN = 1024
SIZES = {1498: dict(layers=16, channels=2048, heads=32, kv_heads=8, hidden=8192, vocab=128256),
         45: dict(layers=4, channels=512, heads=8, kv_heads=2, hidden=1536, vocab=32000)}
FULL = dict(lr=3e-4, theta=500000.0)
TINY = dict(layers=2, channels=32, heads=4, kv_heads=2, hidden=64, vocab=64, len=8, lr=3e-3,
            theta=500000.0)


def expected_params(params):
    """tbd's parameter count for the row's size: and tied: (models/llama.h's formula)."""
    c = SIZES[int(params.get("size", 1498))]
    ch, d = c["channels"], c["channels"] // c["heads"]
    block = 2 * ch + ch * (c["heads"] + 2 * c["kv_heads"]) * d + c["heads"] * d * ch + \
        3 * ch * c["hidden"]
    tied = int(params.get("tied", 0)) != 0
    return c["vocab"] * ch * (1 if tied else 2) + c["layers"] * block + ch


class RMSNorm(nn.Module):
    def __init__(self, c, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(c))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(t, d, theta, device):
    freqs = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.outer(torch.arange(t, dtype=torch.float64), freqs)
    return angles.cos().float().to(device), angles.sin().float().to(device)


def rope(x, cos, sin):
    """x (B, H, T, d): pairs (2i, 2i+1) rotated by t * theta^(-2i/d)."""
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, c, heads, kv_heads, hidden, layers):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, c // heads
        self.attention_norm = RMSNorm(c)
        self.wq = nn.Linear(c, heads * self.d, bias=False)
        self.wk = nn.Linear(c, kv_heads * self.d, bias=False)
        self.wv = nn.Linear(c, kv_heads * self.d, bias=False)
        self.wo = nn.Linear(heads * self.d, c, bias=False)
        self.ffn_norm = RMSNorm(c)
        self.w1 = nn.Linear(c, hidden, bias=False)
        self.w3 = nn.Linear(c, hidden, bias=False)
        self.w2 = nn.Linear(hidden, c, bias=False)
        for lin in (self.wq, self.wk, self.wv, self.w1, self.w3):
            nn.init.normal_(lin.weight, 0.0, 0.02)
        for lin in (self.wo, self.w2):  # residual projections
            nn.init.normal_(lin.weight, 0.0, 0.02 / math.sqrt(2 * layers))

    def attn(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.heads, self.d).transpose(1, 2)
        k = self.wk(x).view(b, t, self.kv_heads, self.d).transpose(1, 2)
        v = self.wv(x).view(b, t, self.kv_heads, self.d).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        g = self.heads // self.kv_heads  # query head h reads key/value head h // g
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch 1.13
            s = (q @ k.transpose(-2, -1)) / math.sqrt(self.d)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = s.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v
        return self.wo(y.transpose(1, 2).reshape(b, t, self.heads * self.d))

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attention_norm(x), cos, sin)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, layers, channels, heads, kv_heads, hidden, vocab, tied):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, channels)
        nn.init.normal_(self.tok_embeddings.weight, 0.0, 0.02)
        self.layers = nn.ModuleList(Block(channels, heads, kv_heads, hidden, layers)
                                    for _ in range(layers))
        self.norm = RMSNorm(channels)
        self.output = None if tied else nn.Linear(channels, vocab, bias=False)
        if self.output is not None:
            nn.init.normal_(self.output.weight, 0.0, 0.02)
        self.d = channels // heads

    def forward(self, idx, cos, sin):
        x = self.tok_embeddings(idx)
        for block in self.layers:
            x = block(x, cos, sin)
        x = self.norm(x)
        w = self.tok_embeddings.weight if self.output is None else self.output.weight
        return F.linear(x, w)


def setup(n, params=None, tiny=False, device="cpu", wrap=None):
    only_params(MODEL, params, ("len", "size", "tied"))
    wrap = wrap or identity
    params = params or {}
    if tiny:
        c = dict(TINY)
    else:
        size = int(params.get("size", 1498))
        if size not in SIZES:
            raise ValueError(f"{MODEL}: size:{size} is not one of {', '.join(map(str, SIZES))}")
        c = dict(FULL, **SIZES[size], len=DEFAULT_LEN)
    length = int(params.get("len", c["len"]))
    if length < 1:
        raise ValueError(f"{MODEL}: len:{length} must be positive")
    tied = int(params.get("tied", 0)) != 0
    torch.manual_seed(0)
    net = Llama(c["layers"], c["channels"], c["heads"], c["kv_heads"], c["hidden"], c["vocab"],
                tied).to(device)
    net.train()
    cos, sin = rope_tables(length, c["channels"] // c["heads"], c["theta"], device)
    decay = [p for p in net.parameters() if p.dim() >= 2]
    no_decay = [p for p in net.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=c["lr"], betas=(0.9, 0.95), eps=1e-8)
    tokens = torch.randint(0, c["vocab"], (n, length)).to(device)
    labels = torch.randint(0, c["vocab"], (n * length,)).to(device)
    fwd = wrap(net)

    def llama_step():
        opt.zero_grad(set_to_none=False)
        logits = fwd(tokens, cos, sin).reshape(-1, c["vocab"])
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        opt.step()
        return loss.item()

    return {
  "net" : net,
          "nets" : [net],
                   "step" : llama_step,
                            "per_step" : {"items" : n, "tokens" : n * length},
                                         "params" : count_params([net]),
                                                    "config" : {
    "len" : length, "tiny" : tiny
  }}
