"""Inception-v3 (tbd's InceptionV3/train/batch:N): torchvision's network with its auxiliary
classifier trained as models/inception_v3.cpp does (loss CE(logits) + 0.4 CE(aux)), 299x299
inputs uniform in [-1, 1), SGD (lr 0.1, momentum 0.9, weight decay 1e-4).

Deviations from tbd: none in the network or the step (tbd's 3x3 stride-1 average pools count
the padding, as PyTorch's default). torchvision's initialisation is not tbd's; it changes no
timing.
"""
import torch
import torch.nn.functional as F

from .common import count_params, identity, only_params

MODEL = "InceptionV3"
PARAMS = 27_161_264


def setup(n, params=None, tiny=False, device="cpu", wrap=None):
    """The net and its step on `device`; `wrap` is applied to the network's forward."""
    only_params(MODEL, params, ())
    if tiny:
        raise ValueError(f"{MODEL}: no tiny configuration in the peer")
    import torchvision
    wrap = wrap or identity
    torch.manual_seed(0)
    net = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=False)
    net.to(device).train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = (torch.rand(n, 3, 299, 299) * 2 - 1).to(device)
    y = torch.randint(0, 1000, (n,)).to(device)
    fwd = wrap(net)

    def inception_step():
        opt.zero_grad(set_to_none=False)
        logits, aux = fwd(x)
        loss = F.cross_entropy(logits, y) + 0.4 * F.cross_entropy(aux, y)
        loss.backward()
        opt.step()
        return loss.item()

    return {"net": net, "nets": [net], "step": inception_step, "per_step": {"items": n},
            "params": count_params([net]), "config": {"definition": "torchvision",
                                                      "aux_weight": 0.4}}
