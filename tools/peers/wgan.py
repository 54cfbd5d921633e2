"""WGAN-GP (tbd's WGAN/train/batch:N): improved_wgan_training's 64x64 ResNet generator and
critic (models/wgan.h; LayerNorm over (C, H, W) with per-channel affine is nn.GroupNorm(1, C)),
Adam (lr 1e-4, betas (0, 0.9)) for each. One step is TBD's iteration: one generator step (the
critic's parameters with requires_grad off) and 5 critic steps, each on the next real and
noise batch of a pool drawn once, the gradient penalty (weight 10) through
autograd.grad(create_graph=True). The tiny configuration is models/wgan.cpp's wgan_tiny(): DIM 4,
one residual block per player (8x8 images), lr 1e-3.

Deviations from tbd: none in the networks or the step. In compile mode the penalty's double
backward goes through the compiled critic, which AOTAutograd may refuse: the row then says so.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import count_params, identity, only_params

MODEL = "WGAN"
PARAMS_GENERATOR = 8_540_483
PARAMS_CRITIC = 7_491_841
PARAMS = PARAMS_GENERATOR + PARAMS_CRITIC


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


def setup(n, params=None, tiny=False, device="cpu", wrap=None):
    """WGAN-GP at batch n: generator, critic, Adam(1e-4, betas (0, 0.9)) each, a pool of 5 real
    batches (uniform in [-1, 1)) and 6 noise batches (standard normal) drawn on the CPU (seed 0)
    and moved to `device`, and one iteration as TBD ran it (the step returns the last critic
    loss). Returns a dict: gen, critic, step, dims, and the common fields (peers/common.py)."""
    only_params(MODEL, params, ())
    wrap = wrap or identity
    torch.manual_seed(0)
    dims = dict(dim=4, blocks=1) if tiny else dict(dim=64, blocks=4)
    gen = WganGenerator(**dims).to(device)
    critic = WganCritic(**dims).to(device)
    gen.train()
    critic.train()
    lr = 1e-3 if tiny else 1e-4  # models/wgan.cpp's wgan_tiny() trains faster
    opt_g = torch.optim.Adam(gen.parameters(), lr=lr, betas=(0.0, 0.9))
    opt_d = torch.optim.Adam(critic.parameters(), lr=lr, betas=(0.0, 0.9))
    side = 4 << dims["blocks"]
    reals = [(torch.rand(n, 3, side, side) * 2 - 1).to(device) for _ in range(WGAN_CRITIC_ITERS)]
    noise = [torch.randn(n, 128).to(device) for _ in range(WGAN_CRITIC_ITERS + 1)]
    d_params = list(critic.parameters())
    g_fwd, d_fwd = wrap(gen), wrap(critic)

    def wgan_step():
        # The generator step: no critic weight gradients.
        for p in d_params:
            p.requires_grad_(False)
        opt_g.zero_grad(set_to_none=False)
        g_loss = -d_fwd(g_fwd(noise[-1])).mean()
        g_loss.backward()
        opt_g.step()
        for p in d_params:
            p.requires_grad_(True)
        for i in range(WGAN_CRITIC_ITERS):
            opt_d.zero_grad(set_to_none=False)
            real = reals[i]
            with torch.no_grad():
                fake = g_fwd(noise[i])
            alpha = torch.rand(n, 1, 1, 1, device=device)
            x_hat = (real + alpha * (fake - real)).requires_grad_(True)
            grad = torch.autograd.grad(d_fwd(x_hat).sum(), x_hat, create_graph=True)[0]
            gp = ((grad.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
            loss = d_fwd(fake).mean() - d_fwd(real).mean() + 10 * gp
            loss.backward()
            opt_d.step()
        return loss.item()

    return {"gen": gen, "critic": critic, "nets": [gen, critic], "step": wgan_step,
            "dims": dims, "per_step": {"items": n, "critic_steps": WGAN_CRITIC_ITERS},
            "params": count_params([gen, critic]), "config": {"tiny": tiny, **dims}}
