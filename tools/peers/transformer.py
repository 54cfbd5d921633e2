"""Transformer-base (tbd's Transformer/train/batch:N[/len:L]) as models/transformer.h defines
it: 6 + 6 pre-norm layers (nn.Transformer with norm_first, whose final encoder and decoder
norms are tbd's final norms), d_model 512, 8 heads, FFN 2048 (ReLU), dropout 0.1, one
embedding of the 32,000-token vocabulary scaled by sqrt(d_model) for source and target and
tied to the output projection (no bias), sinusoidal positions, a causal target mask,
cross-entropy with label smoothing 0.1 over every target token, Adam (lr 1e-4, betas (0.9,
0.98), eps 1e-9). Source and target length L (default 128, the name's len:). The tiny
configuration is models/transformer.cpp's transformer_tiny(): 2 + 2 layers, d_model 32, 4
heads, FFN 64, vocabulary 50, 8 tokens a side, no label smoothing, lr 3e-3.

Deviations from tbd: none in the network or the step. nn.Transformer's attention is
PyTorch's (scaled_dot_product_attention where it applies), tbd's its own.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import count_params, identity, only_params

MODEL = "Transformer"
PARAMS = 60_524_544
DEFAULT_LEN = 128  # models/transformer.h's src_len and tgt_len
VOCAB = 32000
FULL = dict(vocab=VOCAB, d=512, heads=8, ffn=2048, layers=6, len=DEFAULT_LEN, smoothing=0.1,
            lr=1e-4)
TINY = dict(vocab=50, d=32, heads=4, ffn=64, layers=2, len=8, smoothing=0.0, lr=3e-3)


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


def setup(n, params=None, tiny=False, device="cpu", wrap=None):
    only_params(MODEL, params, ("len",))
    wrap = wrap or identity
    c = TINY if tiny else FULL
    length = int((params or {}).get("len", c["len"]))
    vocab = c["vocab"]
    torch.manual_seed(0)
    tr = Transformer(vocab=vocab, d=c["d"], heads=c["heads"], ffn=c["ffn"], layers=c["layers"],
                     max_len=max(1024, length)).to(device)
    tr.train()
    opt = torch.optim.Adam(tr.parameters(), lr=c["lr"], betas=(0.9, 0.98), eps=1e-9)
    src = torch.randint(1, vocab, (n, length)).to(device)
    tgt = torch.randint(1, vocab, (n, length)).to(device)
    lab = torch.randint(1, vocab, (n * length,)).to(device)
    fwd = wrap(tr)

    def transformer_step():
        opt.zero_grad(set_to_none=False)
        logits = fwd(src, tgt).reshape(-1, vocab)
        loss = F.cross_entropy(logits, lab, label_smoothing=c["smoothing"])
        loss.backward()
        opt.step()
        return loss.item()

    return {"net": tr, "nets": [tr], "step": transformer_step,
            "per_step": {"items": n, "tokens": n * length}, "params": count_params([tr]),
            "config": {"len": length, "tiny": tiny}}
