"""Inception-v3 (tbd's InceptionV3/train/batch:N): torchvision's network with its auxiliary
classifier trained as models/inception_v3.cpp does (loss CE(logits) + 0.4 CE(aux)), 299x299
inputs uniform in [-1, 1), SGD (lr 0.1, momentum 0.9, weight decay 1e-4). The tiny
configuration is models/inception_v3.cpp's inception_v3_tiny(): 75x75 images, 10 classes, no
auxiliary head, every channel count / 16 (at least 1), dropout 0.5, lr 0.05; torchvision cannot
narrow its network, so the tiny one is the same architecture written out here (its full width
has torchvision's parameter count; the tests check it).

Deviations from tbd: none in the network or the step (tbd's 3x3 stride-1 average pools count
the padding, as PyTorch's default). torchvision's initialisation is not tbd's; it changes no
timing.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import count_params, identity, only_params

MODEL = "InceptionV3"
PARAMS = 27_161_264
FULL = dict(image=299, classes=1000, aux=True, width_div=1, lr=0.1)
TINY = dict(image=75, classes=10, aux=False, width_div=16, lr=0.05)


class BasicConv(nn.Module):
    """torchvision's BasicConv2d: conv (no bias), BatchNorm (eps 1e-3), ReLU."""

    def __init__(self, cin, cout, kernel, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride, padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-3)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Branches(nn.Module):
    """Parallel branches over one input, concatenated along channels. Each branch is a list of
    steps: ("conv", out, kernel, stride, padding), ("avg",) (3x3/1 pad 1) or ("max",) (3x3/2);
    a ("split", [branch, branch]) step forks the branch into sub-branches concatenated in
    order (InceptionE's 1x3 and 3x1 pairs)."""

    def __init__(self, cin, branches, ch):
        super().__init__()
        self.paths = nn.ModuleList()
        self.cout = 0
        for steps in branches:
            seq, c = self._build(cin, steps, ch)
            self.paths.append(seq)
            self.cout += c

    def _build(self, cin, steps, ch):
        mods, c = [], cin
        for st in steps:
            if st[0] == "conv":
                mods.append(BasicConv(c, ch(st[1]), st[2], st[3], st[4]))
                c = ch(st[1])
            elif st[0] == "avg":
                mods.append(nn.AvgPool2d(3, 1, 1))
            elif st[0] == "max":
                mods.append(nn.MaxPool2d(3, 2))
            else:  # split
                mods.append(Branches(c, st[1], ch))
                c = mods[-1].cout
        return nn.Sequential(*mods), c

    def forward(self, x):
        return torch.cat([p(x) for p in self.paths], 1)


def conv(out, k, stride=1, pad=None):
    if isinstance(k, int):
        k = (k, k)
    if pad is None:
        pad = ((k[0] - 1) // 2, (k[1] - 1) // 2) if stride == 1 else (0, 0)
    return ("conv", out, k, stride, pad)


def block_a(pool):
    return [[conv(64, 1)], [conv(48, 1), conv(64, 5)],
            [conv(64, 1), conv(96, 3), conv(96, 3)], [("avg",), conv(pool, 1)]]


BLOCK_B = [[conv(384, 3, 2)], [conv(64, 1), conv(96, 3), conv(96, 3, 2)], [("max",)]]


def block_c(c7):
    return [[conv(192, 1)], [conv(c7, 1), conv(c7, (1, 7)), conv(192, (7, 1))],
            [conv(c7, 1), conv(c7, (7, 1)), conv(c7, (1, 7)), conv(c7, (7, 1)),
             conv(192, (1, 7))], [("avg",), conv(192, 1)]]


BLOCK_D = [[conv(192, 1), conv(320, 3, 2)],
           [conv(192, 1), conv(192, (1, 7)), conv(192, (7, 1)), conv(192, 3, 2)], [("max",)]]
BLOCK_E = [[conv(320, 1)], [conv(384, 1), ("split", [[conv(384, (1, 3))], [conv(384, (3, 1))]])],
           [conv(448, 1), conv(384, 3), ("split", [[conv(384, (1, 3))], [conv(384, (3, 1))]])],
           [("avg",), conv(192, 1)]]


class InceptionV3(nn.Module):
    """torchvision's Inception-v3 (transform_input off) with every channel count / width_div
    (at least 1), as models/inception_v3.cpp narrows it. Returns (logits, aux logits or None)."""

    def __init__(self, classes=1000, aux=True, width_div=1, dropout=0.5):
        super().__init__()

        def ch(c):
            return max(1, c // width_div)

        stem = [("conv", 32, 3, 2, 0), ("conv", 32, 3, 1, 0), ("conv", 64, 3, 1, 1), ("max",),
                ("conv", 80, 1, 1, 0), ("conv", 192, 3, 1, 0), ("max",)]
        self.stem = Branches(3, [stem], ch)
        c = self.stem.cout
        mods = []
        for branches in (block_a(32), block_a(64), block_a(64), BLOCK_B, block_c(128),
                         block_c(160), block_c(160), block_c(192)):
            mods.append(Branches(c, branches, ch))
            c = mods[-1].cout
        self.mixed6 = nn.Sequential(*mods)
        self.aux = None
        if aux:
            self.aux = nn.Sequential(nn.AvgPool2d(5, 3), BasicConv(c, ch(128), 1),
                                     BasicConv(ch(128), ch(768), 5), nn.AdaptiveAvgPool2d(1),
                                     nn.Flatten(), nn.Linear(ch(768), classes))
        mods = []
        for branches in (BLOCK_D, BLOCK_E, BLOCK_E):
            mods.append(Branches(c, branches, ch))
            c = mods[-1].cout
        self.mixed7 = nn.Sequential(*mods)
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        h = self.mixed6(self.stem(x))
        aux = self.aux(h) if self.aux is not None else None
        h = self.mixed7(h)
        return self.fc(self.drop(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))), aux


def setup(n, params=None, tiny=False, device="cpu", wrap=None):
    """The net and its step on `device`; `wrap` is applied to the network's forward."""
    only_params(MODEL, params, ())
    wrap = wrap or identity
    c = TINY if tiny else FULL
    torch.manual_seed(0)
    if tiny:
        net = InceptionV3(c["classes"], c["aux"], c["width_div"])
        source = f"own definition (channels / {c['width_div']})"
    else:
        import torchvision
        net = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=False)
        source = "torchvision"
    net.to(device).train()
    opt = torch.optim.SGD(net.parameters(), lr=c["lr"], momentum=0.9, weight_decay=1e-4)
    x = (torch.rand(n, 3, c["image"], c["image"]) * 2 - 1).to(device)
    y = torch.randint(0, c["classes"], (n,)).to(device)
    fwd = wrap(net)

    def inception_step():
        opt.zero_grad(set_to_none=False)
        logits, aux = fwd(x)
        loss = F.cross_entropy(logits, y)
        if aux is not None:
            loss = loss + 0.4 * F.cross_entropy(aux, y)
        loss.backward()
        opt.step()
        return loss.item()

    return {"net": net, "nets": [net], "step": inception_step, "per_step": {"items": n},
            "params": count_params([net]),
            "config": {"definition": source, "aux_weight": 0.4 if c["aux"] else 0,
                       "tiny": tiny}}
