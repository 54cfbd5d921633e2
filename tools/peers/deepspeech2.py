"""Deep Speech 2 (tbd's DeepSpeech2/train/batch:N[/frames:T]) as TBD (2018) ran it in MXNet
(models/deepspeech2.h): conv (11x41, stride 2x2) -> ReLU -> BN, conv (11x21, stride 1x2) ->
ReLU -> BN, a 7-layer GRU stack forward and a separate one over the reversed sequence,
concatenated after the last layer, FC (no bias) -> BN over the T2*N rows -> ReLU, classifier
per step; CTC summed over the batch / N, element-wise clip 100, SGD (lr 3e-4, momentum 0.9).
T input frames (default 1000, 10 s of audio; the name's frames:), 161 bins, 15 labels per
second of audio. The tiny configuration is models/deepspeech2.cpp's deepspeech2_tiny(): 20
bins, 40 frames, 4 channels, convolutions 5x5 and 5x3, 2 GRU layers of 16 per stack, 4 labels,
lr 2e-2.

Deviations from tbd: PyTorch's GRU cells (cuDNN's formulation: reset gate after the recurrent
product), as tbd's. BatchNorm eps 1e-3 (MXNet's), as tbd. PyTorch's CPU GRU is a per-step
composite under autograd: its backward forms each step's recurrent weight gradient (3H x H,
37 MB at H = 1760) as its own product and adds it up, 485 steps x 14 layers at T = 1000: that
is what stock PyTorch does, not a fault of the peer.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import count_params, identity, only_params

MODEL = "DeepSpeech2"
PARAMS = 255_357_853
# tbd's defaults (models/deepspeech2.h): input frames, and labels per utterance (15 characters
# per second of audio, frames of 10 ms).
DS2_FRAMES = 1000


def label_len_for(frames):
    return max(1, frames * 15 // 100)


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
        self.bn1 = nn.BatchNorm2d(channels, eps=1e-3)
        self.conv2 = nn.Conv2d(channels, channels, k2, stride=(1, 2), bias=False)
        self.bn2 = nn.BatchNorm2d(channels, eps=1e-3)
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


def setup(n, params=None, tiny=False, device="cpu", wrap=None, label_len=None):
    """DeepSpeech2 at batch n, its synthetic batch (every utterance `frames` frames and
    `label_len` labels), SGD with momentum and its training step (forward, log-softmax, CTC
    summed / N, backward, element-wise clip 100, update) on `device`, drawn on the CPU as in
    seq2seq.setup. Raises ValueError when the frames leave fewer CTC steps than labels.
    Returns a dict: net, step, dims, frames, ctc_steps, label_len."""
    only_params(MODEL, params, ("frames",))
    wrap = wrap or identity
    frames = int((params or {}).get("frames", 40 if tiny else DS2_FRAMES))
    label_len = label_len or (4 if tiny else label_len_for(frames))
    torch.manual_seed(0)
    dims = (dict(bins=20, classes=29, hidden=16, layers=2, channels=4, k1=(5, 5), k2=(5, 3))
            if tiny else dict(bins=161, classes=29, hidden=1760, layers=7, channels=32,
                              k1=(11, 41), k2=(11, 21)))
    net = DeepSpeech2(**dims)
    t2 = net.out_frames(frames)
    if t2 < label_len:  # CTC needs at least one step per label
        raise ValueError(f"{MODEL}: frames:{frames} gives {t2} CTC steps, fewer than its "
                         f"{label_len} labels")
    net.to(device)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=2e-2 if tiny else 3e-4, momentum=0.9)
    x = torch.randn(n, 1, frames, dims["bins"]).to(device)
    lab = torch.randint(1, dims["classes"], (n, label_len))
    targets, in_len, lab_len = ctc_args(lab, t2, device)
    weights = list(net.parameters())
    fwd = wrap(net)

    def ds2_step():
        opt.zero_grad(set_to_none=False)
        logp = F.log_softmax(fwd(x), 2)
        # The mean over samples of -log p(label | x): summed, / N (warp-ctc as MXNet's
        # WarpCTC and TBD used it), not torch's 'mean', which divides by the label lengths.
        loss = F.ctc_loss(logp, targets, in_len, lab_len, blank=0, reduction="sum") / n
        loss.backward()
        nn.utils.clip_grad_value_(weights, 100.0)  # MXNet's clip_gradient 100: element-wise
        opt.step()
        return loss.item()

    return {"net": net, "nets": [net], "step": ds2_step, "dims": dims, "frames": frames,
            "ctc_steps": t2, "label_len": label_len,
            "per_step": {"items": n, "frames": n * frames}, "params": count_params([net]),
            "config": {"frames": frames, "ctc_steps": t2, "label_len": label_len, "tiny": tiny}}
