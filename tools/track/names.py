"""The benchmark name grammar (fixtures/names.h), parsed in Python: one parser for the tracker,
its report and the PyTorch peers, which name their rows as tbd_bench does.

  layer      <Kind>/<model>.<layer>/<phase>/batch:<N>[/<key>:<value>...]
             <Kind>/<problem>/<phase>/batch:<N>
  optimizer  <Kind>/<model>/step
  model      <Model>/train/batch:<N>[/<key>:<value>...]   (data-parallel: .../ranks:<P> last)
             a run of several math modes names each model and layer row's last: .../math:bf16
  collective <Kind>/<backend>/bytes:<n>/ranks:<P>

Google Benchmark's own components (/manual_time, /real_time, /iterations:<n>, /repeats:<n>,
/threads:<n>, /min_time:<s>, /min_warmup_time:<s>) and aggregate endings (_mean, _median,
_stddev, _cv) are kept apart in `suffixes` and `aggregate`. tests/track/names_test.py checks
this parser against the names that fixtures/names.cpp's test accepts and refuses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

AGGREGATES = ("mean", "median", "stddev", "cv")
_GB_VALUED = ("iterations:", "repeats:", "threads:", "min_time:", "min_warmup_time:")
# fullmatch, not ^...$: '$' also matches before a final newline.
_IDENT = re.compile(r"[A-Za-z0-9_-]+")
_IDENT_DOTS = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass
class BenchName:
    family: str                     # "layer", "optimizer", "model", "collective"
    kind: str                       # "Conv2d", "SGD", the model "ResNet50", "AllReduce"
    subject: str = ""               # "resnet50.layer2.0.conv2", "square1024", "resnet50", "mpi"
    phase: str = ""                 # fwd | bwd | fwdbwd | dgrad | wgrad | step | train
    batch: int | None = None
    params: list[tuple[str, int]] = field(default_factory=list)  # [("len", 32)], in order
    suffixes: list[str] = field(default_factory=list)
    math: str = ""                  # "bf16" from /math:bf16; "" where the name has none
    aggregate: str = ""

    @property
    def model(self) -> str:
        return self.subject.split(".", 1)[0] if "." in self.subject else ""

    @property
    def layer(self) -> str:
        return self.subject.split(".", 1)[1] if "." in self.subject else self.subject

    def param(self, key: str, default=None):
        return next((v for k, v in self.params if k == key), default)

    def str(self) -> str:
        """The canonical name, without Google Benchmark's suffixes and the aggregate."""
        tail = "".join(f"/{k}:{v}" for k, v in self.params)
        if self.math:
            tail += f"/math:{self.math}"
        if self.family == "model":
            return f"{self.kind}/train/batch:{self.batch}{tail}"
        if self.family == "layer":
            return f"{self.kind}/{self.subject}/{self.phase}/batch:{self.batch}{tail}"
        if self.family == "optimizer":
            return f"{self.kind}/{self.subject}/step"
        return f"{self.kind}/{self.subject}{tail}"


def is_gbench_suffix(s: str) -> bool:
    return s in ("manual_time", "real_time") or any(
        s.startswith(p) and len(s) > len(p) for p in _GB_VALUED)


def _ident(s: str, dots: bool) -> bool:
    return bool((_IDENT_DOTS if dots else _IDENT).fullmatch(s)) and not (
        s.startswith(".") or s.endswith("."))


def _positive(s: str) -> int | None:
    # ASCII digits only, as fixtures/names.cpp reads them: str.isdigit() is true of '²' and
    # of other scripts' digits, which int() refuses or reads as another number.
    if not s or len(s) > 12 or not (s.isascii() and s.isdigit()):
        return None
    v = int(s)
    return v if v > 0 else None


def strip_gbench(name: str) -> str:
    """The name without Google Benchmark's components and aggregate ending."""
    n = parse(name)
    if n is not None:
        return n.str()
    parts = name.split("/")
    while len(parts) > 1 and is_gbench_suffix(parts[-1]):
        parts.pop()
    return "/".join(parts)


def parse(full: str) -> BenchName | None:
    """The parts of a benchmark name, or None where it is not in the grammar."""
    name, aggregate = full, ""
    for agg in AGGREGATES:
        if name.endswith("_" + agg) and len(name) > len(agg) + 1:
            name, aggregate = name[:-len(agg) - 1], agg
            break
    parts = name.split("/")
    suffixes: list[str] = []
    while len(parts) > 1 and is_gbench_suffix(parts[-1]):
        suffixes.insert(0, parts.pop())
    # The math mode of a row of a several-mode run: the last component of a model or layer row.
    math = ""
    if len(parts) > 3 and parts[-1] in ("math:fp32", "math:tf32", "math:bf16"):
        math = parts.pop()[5:]

    def params_from(first: int):
        out = []
        for p in parts[first:]:
            key, colon, value = p.partition(":")
            v = _positive(value) if colon else None
            if not colon or not _ident(key, False) or key == "batch" or v is None:
                return None
            out.append((key, v))
        return out

    def batch_of(s: str):
        return _positive(s[6:]) if s.startswith("batch:") else None

    n = None
    if math and not (len(parts) >= 3 and (parts[1] == "train" or parts[2] in (
            "fwd", "bwd", "fwdbwd", "dgrad", "wgrad"))):
        return None
    if len(parts) >= 3 and parts[1] == "train":
        b, ps = batch_of(parts[2]), params_from(3)
        if b is None or ps is None or not _ident(parts[0], False):
            return None
        n = BenchName("model", parts[0], phase="train", batch=b, params=ps)
    elif len(parts) >= 4 and parts[2] in ("fwd", "bwd", "fwdbwd", "dgrad", "wgrad"):
        b, ps = batch_of(parts[3]), params_from(4)
        if b is None or ps is None or not _ident(parts[0], False) or not _ident(parts[1], True):
            return None
        n = BenchName("layer", parts[0], parts[1], parts[2], b, ps)
    elif len(parts) == 4 and parts[2].startswith("bytes:"):
        ps = params_from(2)
        if (not _ident(parts[0], False) or not _ident(parts[1], False) or ps is None
                or [k for k, _ in ps] != ["bytes", "ranks"]):
            return None
        n = BenchName("collective", parts[0], parts[1], params=ps)
    elif len(parts) == 3 and parts[2] == "step":
        if not _ident(parts[0], False) or not _ident(parts[1], True):
            return None
        n = BenchName("optimizer", parts[0], parts[1], "step")
    if n is not None:
        n.suffixes, n.aggregate, n.math = suffixes, aggregate, math
    return n
