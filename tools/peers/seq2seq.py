"""Seq2Seq (tbd's Seq2Seq/train/batch:N[/len:L][/mask:1]): Sockeye 1.5's RNN model as TBD ran
it on IWSLT15 en-vi (models/seq2seq.h): reversed source, a bi-LSTM then an LSTM encoder, the
decoder's initial states from the last valid encoder output, a 2-layer LSTM decoder run step
by step with input feeding, MLP attention, a tanh hidden FC and the classifier over all
steps; cross-entropy over the non-pad tokens, element-wise clip 1, Adam (lr 3e-4). Source and
target length L (default 30); mask:1 gives random valid lengths (sample 0 full). The tiny
configuration is models/seq2seq.cpp's seq2seq_tiny(): vocabularies of 50, embedding, hidden and
attention 16, 8 tokens a side, lr 1e-2 (tbd's draws random lengths; here mask:1 does).

Deviations from tbd: PyTorch's LSTMs have two bias vectors per gate (as MXNet's LSTMCell:
i2h and h2h), tbd's one (models/seq2seq.h): the peer has 27,734,558 parameters (Sockeye's
count), 8,192 more than tbd; the count compared with tbd's leaves out the h2h biases, and the
extra additions cost nothing measurable. With mask:1 the encoder runs packed sequences
(pack_padded_sequence), tbd masks instead; both see exactly the valid steps.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import count_params, identity, only_params

MODEL = "Seq2Seq"
PARAMS = 27_726_366
# tbd's default source and target length (models/seq2seq.h).
SEQ2SEQ_LEN = 30


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


def reverse_within(ids, lengths):
    """ids: (S, N); reverses each column's first lengths[n] entries, leaving the padding."""
    s_len = ids.shape[0]
    t = torch.arange(s_len, device=ids.device).unsqueeze(1)
    lengths = lengths.to(ids.device)
    idx = torch.where(t < lengths.unsqueeze(0), lengths.unsqueeze(0) - 1 - t, t)
    return ids.gather(0, idx)


# frames, and labels per utterance (15 characters per second of audio).
SEQ2SEQ_LEN = 30
DS2_FRAMES = 1000
DS2_LABEL_LEN = 150


def h2h_biases(net):
    """The parameters of PyTorch's second bias vector per gate, which tbd's LSTMs lack."""
    return sum(p.numel() for name, p in net.named_parameters() if "bias_hh" in name)


def setup(n, params=None, tiny=False, device="cpu", wrap=None):
    """Seq2Seq at batch n, its synthetic batch, Adam and its training step (forward,
    cross-entropy over the non-pad tokens, backward, element-wise clip 1, update) on `device`.
    Weights and data are drawn on the CPU (seed 0) and then moved, so every device starts from
    the same values. Returns a dict: net, step (one training step; returns the loss, a float),
    dims, length, lab (the labels, on the device), and the common fields (peers/common.py)."""
    only_params(MODEL, params, ("len", "mask"))
    wrap = wrap or identity
    params = params or {}
    length = int(params.get("len", 8 if tiny else SEQ2SEQ_LEN))
    mask = bool(params.get("mask", 0))
    torch.manual_seed(0)
    dims = (dict(src_vocab=50, tgt_vocab=50, embed=16, hidden=16) if tiny
            else dict(src_vocab=17192, tgt_vocab=7710, embed=512, hidden=512))
    net = Seq2Seq(**dims).to(device)
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2 if tiny else 3e-4)
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
    weights = list(net.parameters())
    fwd = wrap(net)

    def seq2seq_step():
        opt.zero_grad(set_to_none=False)
        rsrc = torch.flip(src, [0]) if src_len is None else reverse_within(src, src_len)
        logits = fwd(rsrc, tgt, src_len)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[2]), lab.reshape(-1),
                               ignore_index=0)  # mean over the non-pad tokens
        loss.backward()
        nn.utils.clip_grad_value_(weights, 1.0)  # MXNet's clip_gradient: element-wise
        opt.step()
        return loss.item()

    tokens = int((lab != 0).sum())
    return {"net": net, "nets": [net], "step": seq2seq_step, "dims": dims, "length": length,
            "lab": lab, "per_step": {"items": n, "tokens": tokens},
            "params": count_params([net]) - h2h_biases(net), "torch_params": count_params([net]),
            "config": {"len": length, "mask": mask, "tiny": tiny, **dims}}
