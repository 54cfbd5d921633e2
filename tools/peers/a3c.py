"""A3C (tbd's A3C/train/batch:T/actors:1): TBD's TensorFlow A3C network (models/a3c.h), one
actor-learner in one process. A step is 8 updates, as one tbd_bench iteration at K = 1, each a
pull of the global weights into the local network, t_max + 1 batch-1 forwards without
gradients with actions sampled from the policy, a batch-t_max forward and backward on the local
network, global-norm clipping to 5 and the shared RMSprop (lr 2.5e-4, alpha 0.99, eps 1e-6)
step on the global weights (the local gradients handed to the global parameters). Synthetic
frames as in tbd (a pool of random uint8 frames), reward 1 with probability 0.1. The tiny
configuration is models/a3c.cpp's a3c_tiny(): 36x36 frames, a 32-wide hidden layer.

Deviations from tbd: only actors:1 (several workers would need torch.multiprocessing, whose
processes are not tbd's threads). The parameter count is one network's (tbd's mem_weights
counts the global and each local copy).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import count_params, identity, only_params

MODEL = "A3C"
PARAMS = 1_005_109
UPDATES = 8  # per tbd_bench iteration and worker (models/a3c.h)


class A3cNet(nn.Module):
    """TBD's TensorFlow A3C network (models/a3c.h): uint8 frames / 255, conv 16 8x8/4 pad 2,
    conv 32 4x4/2 pad 2 (TensorFlow 'SAME' sizes: 21, 11), FC 256, policy and value heads."""

    def __init__(self, actions=4, frame=84, hidden=256):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 16, 8, 4, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 4, 2, padding=2)
        s2 = -(-(-(-frame // 4)) // 2)
        self.fc = nn.Linear(32 * s2 * s2, hidden)
        self.policy = nn.Linear(hidden, actions)
        self.value = nn.Linear(hidden, 1)

    def forward(self, frames):
        x = frames.float() / 255.0
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = F.relu(self.fc(x.flatten(1)))
        return self.policy(x), self.value(x).squeeze(1)


def setup(t_max=5, params=None, tiny=False, device="cpu", wrap=None, updates=UPDATES, pool=64,
          seed=0):
    """One A3C actor-learner: the global and local networks, the shared RMSprop and a step of
    `updates` updates. Returns a dict: net (the global one), step, t_max, updates. On another
    device the actions and rewards are still drawn on the CPU (the same generator). t_max is
    tbd's batch; params may name actors:1."""
    only_params(MODEL, params, ("actors",))
    if int((params or {}).get("actors", 1)) != 1:
        raise ValueError(f"{MODEL}: the peer runs one actor-learner (actors:1), not "
                         f"actors:{params['actors']}")
    wrap = wrap or identity
    torch.manual_seed(seed)
    frame = 36 if tiny else 84
    kw = dict(frame=frame, hidden=32 if tiny else 256)
    global_net, local = A3cNet(**kw).to(device), A3cNet(**kw).to(device)
    opt = torch.optim.RMSprop(global_net.parameters(), lr=2.5e-4, alpha=0.99, eps=1e-6)
    frames = torch.randint(0, 256, (pool, frame, frame), dtype=torch.uint8).to(device)
    gen = torch.Generator().manual_seed(seed)
    state = {"pos": 0}
    fwd = wrap(local)

    def observe():
        idx = [(state["pos"] + s) % pool for s in range(4)]
        return frames[idx].unsqueeze(0)

    def update():
        local.load_state_dict(global_net.state_dict())  # pull
        states, actions, rewards = [], [], []
        with torch.no_grad():
            for t in range(t_max + 1):
                s = observe()
                logits, value = fwd(s)
                if t == t_max:
                    ret = value.item()  # the bootstrap value
                    break
                a = torch.multinomial(F.softmax(logits, 1).cpu(), 1, generator=gen).item()
                states.append(s)
                actions.append(a)
                rewards.append(1.0 if torch.rand((), generator=gen).item() < 0.1 else 0.0)
                state["pos"] = (state["pos"] + 1 + a) % pool
        returns = []
        for r in reversed(rewards):
            ret = r + 0.99 * ret
            returns.append(ret)
        returns = torch.tensor(returns[::-1], device=device)
        local.zero_grad(set_to_none=False)
        logits, value = fwd(torch.cat(states))
        q = F.softmax(logits, 1) + 1e-8
        entropy = -(q * q.log()).sum(1)
        adv = (returns - value).detach()
        picked = q.gather(1, torch.tensor(actions, device=device).unsqueeze(1)).squeeze(1)
        loss = (-(picked.log() * adv + 0.01 * entropy)).sum() + ((value - returns) ** 2).sum()
        loss.backward()
        nn.utils.clip_grad_norm_(local.parameters(), 5.0)
        for g, l in zip(global_net.parameters(), local.parameters()):
            g.grad = l.grad  # the local gradients, applied to the global weights
        opt.step()
        return loss.item()

    def a3c_step():
        loss = 0.0
        for _ in range(updates):
            loss = update()
        return loss

    return {"net": global_net, "nets": [global_net], "step": a3c_step, "t_max": t_max,
            "updates": updates, "per_step": {"items": updates, "frames": updates * t_max},
            "params": count_params([global_net]),
            "config": {"actors": 1, "updates_per_step": updates, "tiny": tiny}}
