"""A peer's training step, layer by layer: torch.profiler's operators attributed to the network's
modules, in the shape of tbd_bench --tbd_breakdown's rows.

Every module of the step's networks is hooked (a profiler range per call). Each forward
operator goes to its innermost module: to the module itself when that is a leaf (a Conv2d, an
LSTM, a MultiheadAttention: the layers tbd has) and otherwise to a row of its own named after
the enclosing module and the operator (`layer1.0.(relu)`, `layer1.0.(relu)#2`: the F.relu
and residual adds a network's forward() calls, one row per call in the step). A backward node goes to the row whose forward operator recorded
the node's sequence number, so a layer's backward time is that of its autograd nodes (PyTorch
runs dgrad and wgrad of one node as one operator, so they are not separated). Parameter
gradient accumulation, the optimizer and zero_grad get rows of their own; the rest of the step
(Python, hooks, the profiler's own cost) is the gap between the rows' sum and the step.

Eager mode only: torch.compile fuses across modules, so its operators belong to no one layer.
"""

from __future__ import annotations

import time

# torch module classes -> tbd's layer kinds (layers/*.h kKind), for aligning the two tables.
KINDS = {
    "Conv2d": "Conv2d", "ConvTranspose2d": "Conv2dDgrad", "BatchNorm2d": "BatchNorm2d",
    "BatchNorm1d": "SequenceBatchNorm", "ReLU": "Activation", "Tanh": "Activation",
    "Sigmoid": "Activation", "Hardtanh": "Activation", "LeakyReLU": "Activation",
    "GELU": "Activation", "ELU": "Activation", "Linear": "Linear",
    "NonDynamicallyQuantizableLinear": "Linear", "MaxPool2d": "Pool2d", "AvgPool2d": "Pool2d",
    "AdaptiveAvgPool2d": "GlobalAvgPool2d", "Dropout": "Dropout", "Embedding": "Embedding",
    "LayerNorm": "LayerNorm", "LSTM": "LSTM", "LSTMCell": "LSTMCell", "GRU": "GRU",
    "MultiheadAttention": "MultiHeadAttention", "Upsample": "Upsample2d",
}
# Modules timed as one layer although they have children (tbd has them as one layer).
COMPOSITES = ("MultiheadAttention",)
# Operators called directly in a forward() -> tbd's kinds.
OP_KINDS = {
    "relu": "Activation", "relu_": "Activation", "tanh": "Activation", "sigmoid": "Activation",
    "leaky_relu": "Activation", "leaky_relu_": "Activation", "hardtanh": "Activation",
    "hardtanh_": "Activation", "gelu": "Activation", "add": "Add", "add_": "Add",
    "cat": "Concat", "max_pool2d": "Pool2d", "avg_pool2d": "Pool2d",
    "adaptive_avg_pool2d": "GlobalAvgPool2d", "linear": "Linear", "conv2d": "Conv2d",
    "cross_entropy_loss": "SoftmaxCrossEntropy", "log_softmax": "SoftmaxCrossEntropy",
    "nll_loss_nd": "SoftmaxCrossEntropy", "mse_loss": "MseLoss", "ctc_loss": "CtcLoss",
    "smooth_l1_loss": "SmoothL1Loss", "dropout": "Dropout", "layer_norm": "LayerNorm",
    "embedding": "Embedding", "flatten": "Reshape", "view": "Reshape", "reshape": "Reshape",
    "transpose": "Transpose", "permute": "Transpose", "mean": "MeanLoss",
}
MOD = "tbd.module:"
STEP = "tbd.step"


def _modules(nets):
    """(name, module, leaf) of every module of the networks, composites' children left out."""
    out, seen = [], set()
    prefix = len(nets) > 1
    for i, net in enumerate(nets):
        skip = []
        for name, m in net.named_modules():
            if id(m) in seen or any(name.startswith(s + ".") for s in skip):
                continue
            seen.add(id(m))
            cls = type(m).__name__
            leaf = cls in COMPOSITES or not any(True for _ in m.children())
            if cls in COMPOSITES:
                skip.append(name)
            full = ".".join(x for x in ((f"{type(net).__name__.lower()}{i}" if prefix else ""),
                                        name) if x)
            out.append((full or type(net).__name__.lower(), m, leaf))
    return out


def _op_short(name: str) -> str:
    return name.split("::", 1)[-1]


class _Attribution:
    def __init__(self, info):
        self.info = info          # module name -> (class, leaf, without parameters)
        self.rows = {}            # layer -> dict
        self.order = []
        self.seq = {}             # forward sequence number -> layer
        self.seen = {}            # (module, op) -> calls so far in this step

    def row(self, layer, kind):
        r = self.rows.get(layer)
        if r is None:
            r = self.rows[layer] = {"layer": layer, "kind": kind, "fwd_time_s": 0.0,
                                    "bwd_time_s": 0.0, "calls": 0}
            self.order.append(layer)
        return r

    def forward_op(self, e, module, label):
        op = _op_short(e.name)
        if module is not None and self.info[module][1]:
            layer, kind = label, KINDS.get(self.info[module][0], self.info[module][0])
        else:
            layer = f"({op})" if module is None else f"{module}.({op})"
            kind = OP_KINDS.get(op, op)
            layer = self.call_name(layer)
        r = self.row(layer, kind)
        r["fwd_time_s"] += e.cpu_time_total * 1e-6
        r["calls"] += 1
        stack = [e]
        while stack:
            x = stack.pop(0)
            # An operator that makes no autograd node records the number the next one will
            # take; the last operator to record a number is the one whose node it is.
            if x.sequence_nr is not None and x.sequence_nr >= 0:
                self.seq[x.sequence_nr] = layer
            stack += x.cpu_children

    def call_name(self, name):
        """Each call of an operator in a forward(), and of a module without parameters, is a
        layer of its own, as in tbd's graph (a bottleneck's three ReLUs): the k-th call in the
        step is `name#k`. A module with parameters is one layer however often it runs."""
        k = self.seen.get(name, 0) + 1
        self.seen[name] = k
        return name if k == 1 else f"{name}#{k}"

    def backward_node(self, e):
        node = e.name.split(": ", 1)[-1]
        seqs = [x.sequence_nr for x in [e] + list(e.cpu_children)
                if x.sequence_nr is not None and x.sequence_nr >= 0]
        layer = next((self.seq[s] for s in seqs if s in self.seq), None)
        if layer is None:
            layer = "(accumulate_grad)" if "AccumulateGrad" in node else "(backward, unmatched)"
            r = self.row(layer, "-")
        else:
            r = self.rows[layer]
        r["bwd_time_s"] += e.cpu_time_total * 1e-6

    def walk(self, e, module, label=None):
        name = e.name
        if name == STEP:
            self.seen = {}
            for c in e.cpu_children:
                self.walk(c, module, label)
        elif name.startswith(MOD):
            m = name[len(MOD):]
            cls, leaf, stateless = self.info[m]
            lab = self.call_name(m) if leaf and stateless else m
            for c in e.cpu_children:
                self.walk(c, m, lab)
        elif name.startswith("autograd::engine::evaluate_function"):
            self.backward_node(e)
        elif name.startswith("Optimizer.step"):
            self.row("(optimizer)", "-")["bwd_time_s"] += e.cpu_time_total * 1e-6
        elif name.startswith("Optimizer.zero_grad"):
            self.row("(zero_grad)", "-")["bwd_time_s"] += e.cpu_time_total * 1e-6
        elif "::" in name and not name.startswith(("autograd::", "torch::autograd")):
            self.forward_op(e, module, label)
        else:
            for c in e.cpu_children:
                self.walk(c, module, label)


def profile(torch, step, nets, steps=3):
    """{"rows": [...], "step_s", "profiled_step_s", "ops": [...]} of `steps` profiled steps
    (means per step), after timing `steps` plain ones."""
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    plain = (time.perf_counter() - t0) / steps
    mods = _modules(nets)
    info = {name: (type(m).__name__, leaf, not any(True for _ in m.parameters()))
            for name, m, leaf in mods}
    live, handles = [], []
    record_function = torch.autograd.profiler.record_function

    def hook_pair(name):
        def pre(_m, _inp):
            live.append(record_function(MOD + name).__enter__())

        def post(_m, _inp, _out):
            live.pop().__exit__(None, None, None)
        return pre, post

    for name, m, leaf in mods:
        pre, post = hook_pair(name)
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
    try:
        act = [torch.profiler.ProfilerActivity.CPU]
        with torch.profiler.profile(activities=act, record_shapes=False) as prof:
            t0 = time.perf_counter()
            for _ in range(steps):
                with record_function(STEP):
                    step()
            profiled = (time.perf_counter() - t0) / steps
    finally:
        for h in handles:
            h.remove()
    a = _Attribution(info)
    events = sorted((e for e in prof.events() if e.cpu_parent is None),
                    key=lambda e: e.time_range.start)
    for e in events:
        a.walk(e, None)
    rows = []
    for layer in a.order:
        r = dict(a.rows[layer])
        r["fwd_time_s"] /= steps
        r["bwd_time_s"] /= steps
        r["calls"] = r["calls"] // steps if r["calls"] % steps == 0 else r["calls"] / steps
        rows.append(r)
    ops = []
    for k in sorted(prof.key_averages(), key=lambda k: -k.self_cpu_time_total)[:25]:
        ops.append({"op": k.key, "self_time_s": k.self_cpu_time_total * 1e-6 / steps,
                    "time_s": k.cpu_time_total * 1e-6 / steps, "calls": k.count / steps})
    return {"rows": rows, "step_s": plain, "profiled_step_s": profiled, "ops": ops,
            "steps": steps, "timer": "torch.profiler (CPU), operator time per layer"}
