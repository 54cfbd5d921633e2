"""ResNet-50 v1.5 (tbd's ResNet50/train/batch:N): torchvision's definition (the same network
written out here when torchvision is missing), 224x224 inputs uniform in [-1, 1), 1000
classes, cross-entropy, SGD (lr 0.1, momentum 0.9, weight decay 1e-4), as models/resnet50.cpp.
The tiny configuration is models/resnet50.cpp's resnet50_tiny(): 32x32 images, 10 classes,
widths / 16, two stages of one block, lr 0.05 (the written-out network, narrowed).

Deviations from tbd: none in the network or the step. PyTorch's BatchNorm keeps running
statistics as tbd's does; its kernels are PyTorch's (oneDNN or ATen's own), not tbd's.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import count_params, identity, only_params

MODEL = "ResNet50"
PARAMS = 25_557_032  # tbd's (docs/models.md)


# models/resnet50.cpp: ResNet-50's stages (blocks, bottleneck width, stride of the first block).
STAGES = ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2))
# models/resnet50.cpp's resnet50_tiny().
TINY = dict(image=32, classes=10, width_div=16, stages=2, blocks=1, lr=0.05)


def bottleneck_resnet50(num_classes=1000, width_div=1, stages=4, blocks=0):
    """torchvision's ResNet-50, or (torchvision missing, or a narrowed variant) the same
    architecture written out (written_resnet). Returns (network, where it comes from)."""
    if (width_div, stages, blocks) == (1, 4, 0):
        try:
            import torchvision
            return torchvision.models.resnet50(num_classes=num_classes), "torchvision"
        except Exception:  # torchvision missing: the same architecture, written out
            return written_resnet(num_classes), "own definition (torchvision missing)"
    return (written_resnet(num_classes, width_div, stages, blocks),
            f"own definition (widths / {width_div}, {stages} stages)")


def written_resnet(num_classes=1000, width_div=1, stages=4, blocks=0):
    """ResNet-50 v1.5 written out, narrowed as models/resnet50.cpp narrows it: widths /
    width_div, the first `stages` stages, `blocks` blocks in each where nonzero."""

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

    stem = 64 // width_div
    layers = [nn.Conv2d(3, stem, 7, 2, 3, bias=False), nn.BatchNorm2d(stem), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = stem
    for n_blocks, width, stride in STAGES[:stages]:
        width //= width_div
        for b in range(blocks or n_blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1, b == 0))
            cin = 4 * width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


def setup(n, params=None, tiny=False, device="cpu", wrap=None):
    only_params(MODEL, params, ())
    wrap = wrap or identity
    torch.manual_seed(0)  # each model's data and weights do not depend on which others run
    c = TINY if tiny else dict(image=224, classes=1000, width_div=1, stages=4, blocks=0, lr=0.1)
    net, source = bottleneck_resnet50(c["classes"], c["width_div"], c["stages"], c["blocks"])
    net.to(device).train()
    opt = torch.optim.SGD(net.parameters(), lr=c["lr"], momentum=0.9, weight_decay=1e-4)
    x = (torch.rand(n, 3, c["image"], c["image"]) * 2 - 1).to(device)
    y = torch.randint(0, c["classes"], (n,)).to(device)
    fwd = wrap(net)

    def resnet_step():
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return {"net": net, "nets": [net], "step": resnet_step, "per_step": {"items": n},
            "params": count_params([net]), "config": {"definition": source, "tiny": tiny}}
