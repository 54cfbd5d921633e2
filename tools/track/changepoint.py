"""Change points in one metric's series over commits (git order).

Model: piecewise-constant levels plus noise, as asv's step detection assumes. The series is the
per-commit median, on a log scale for ratio-like metrics (a 10 % step is the same size at any
level). The segmentation minimises

    sum over segments of sum |x_i - median(segment)|  +  penalty x (number of segments)

exactly, by dynamic programming over all split points (optimal partitioning; O(n^2) segment
costs, fine for hundreds of commits). The penalty is proportional to the robust noise of the
series (1.4826 x MAD of successive differences / sqrt 2, so steps do not inflate it) and to
log n (a BIC-like choice), with a floor so a noise-free series does not split on rounding.

Then, in order:
  - adjacent segments whose levels differ by less than the minimum effect (threshold) merge;
  - a one-commit segment between two segments at the same level (within the threshold) is a
    one-off outlier, not two steps;
  - every remaining boundary is a step: regression or improvement by the metric's direction,
    at the first commit of the new level (the commits between the last measured good commit
    and it are what bisect searches);
  - a regression step is "fixed" by the first later step that brings the level back within the
    threshold of the level before it; regressions never fixed are open;
  - gradual drift: a straight line (Theil-Sen) fits the series better than the steps do, by
    the same L1 cost with a penalty per parameter, the Kendall tau trend test (scipy) is
    significant at alpha, and the line's change over the span exceeds the threshold; the
    staircase of small steps a ramp would otherwise be cut into is then reported as one drift.
Exact metrics (memory) are deterministic: every change beyond the tolerance is a step, and a
one-commit excursion is an outlier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps


@dataclass
class Segment:
    start: int
    end: int          # inclusive
    level: float      # median of the segment, in the metric's units


@dataclass
class Event:
    kind: str         # step | outlier | drift
    verdict: str      # regression | improvement
    index: int        # first index of the new level (the outlier's index; drift: last index)
    prev_index: int   # last index of the old level (drift: first index)
    ratio: float      # new level / old level (exact metrics: too)
    from_value: float
    to_value: float
    fixed_by: int | None = None
    open: bool = False
    detail: str = ""


@dataclass
class Detection:
    segments: list = field(default_factory=list)
    events: list = field(default_factory=list)
    noise: float = 0.0


def robust_noise(x: np.ndarray) -> float:
    if len(x) < 3:
        return 0.0
    d = np.diff(x)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def _segment_costs(x: np.ndarray) -> list[list[float]]:
    n = len(x)
    cost = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            seg = x[i:j + 1]
            cost[i][j] = float(np.sum(np.abs(seg - np.median(seg))))
    return cost


def optimal_partition(x: np.ndarray, penalty: float) -> list[tuple[int, int]]:
    """Segments (start, end inclusive) minimising L1 cost + penalty per segment."""
    n = len(x)
    if n == 0:
        return []
    cost = _segment_costs(x)
    best = [0.0] * (n + 1)
    prev = [0] * (n + 1)
    for j in range(1, n + 1):
        cands = [(best[i] + cost[i][j - 1] + penalty, i) for i in range(j)]
        best[j], prev[j] = min(cands)
    segs = []
    j = n
    while j > 0:
        i = prev[j]
        segs.append((i, j - 1))
        j = i
    return segs[::-1]


def _levels(x: np.ndarray, segs: list[tuple[int, int]]) -> list[float]:
    return [float(np.median(x[s:e + 1])) for s, e in segs]


def _merge_small(x, segs, min_step):
    """Merge neighbours whose levels differ by less than min_step (smallest gap first)."""
    segs = list(segs)
    while len(segs) > 1:
        lv = _levels(x, segs)
        gaps = [abs(lv[k + 1] - lv[k]) for k in range(len(segs) - 1)]
        k = int(np.argmin(gaps))
        if gaps[k] >= min_step:
            break
        segs[k:k + 2] = [(segs[k][0], segs[k + 1][1])]
    return segs


def detect(values: list[float], direction: str, threshold: float, exact: bool = False,
           tolerance: float = 0.0, alpha: float = 0.05, penalty_scale: float = 3.0,
           gap_after: list[int] | None = None) -> Detection:
    """Segments and events of one series (per-commit medians, oldest first).

    gap_after[i]: commits not measured between point i and i+1. A point off its neighbours'
    level is a one-off outlier only when it is a single commit, i.e. no unmeasured commit on
    either side; otherwise it may be a regression spanning the commits nobody measured, and
    it is reported as a step (and its return as another), for bisect to look into.
    """
    v = np.asarray(values, dtype=float)
    n = len(v)
    gaps = list(gap_after or [0] * n)
    isolated = lambda i: (i == 0 or gaps[i - 1] == 0) and gaps[i] == 0  # noqa: E731
    det = Detection()
    if n == 0:
        return det
    if exact:
        x = v.copy()
        min_step = max(tolerance, 0.0)
        # Runs of equal values (within the tolerance); any change is a step.
        segs, start = [], 0
        for i in range(1, n):
            if abs(x[i] - x[start]) > min_step:
                segs.append((start, i - 1))
                start = i
        segs.append((start, n - 1))
        to_value = lambda lv: lv  # noqa: E731
        same = lambda a, b: abs(a - b) <= min_step  # noqa: E731
    else:
        if np.any(v <= 0):
            return det  # log scale needs positive values; nothing is claimed
        x = np.log(v)
        min_step = math.log1p(threshold)
        noise = robust_noise(x)
        det.noise = noise
        penalty = penalty_scale * max(noise, min_step / 4) * math.log(max(n, 2))
        segs = optimal_partition(x, penalty)
        segs = _merge_small(x, segs, min_step)
        to_value = math.exp
        same = lambda a, b: abs(a - b) < min_step  # noqa: E731

    # One-commit excursions between equal levels are outliers.
    outliers = []
    changed = True
    while changed and len(segs) >= 3:
        changed = False
        lv = _levels(x, segs)
        for k in range(1, len(segs) - 1):
            s, e = segs[k]
            if s == e and same(lv[k - 1], lv[k + 1]) and isolated(s):
                outliers.append((s, lv[k - 1], lv[k]))
                segs[k - 1:k + 2] = [(segs[k - 1][0], segs[k + 1][1])]
                changed = True
                break
    lv = _levels(x, segs) if not exact else [float(np.median(x[s:e + 1])) for s, e in segs]
    # An outlier's level is not part of its merged segment's level.
    if outliers and not exact:
        for k, (s, e) in enumerate(segs):
            keep = [i for i in range(s, e + 1) if i not in {o[0] for o in outliers}]
            if keep:
                lv[k] = float(np.median(x[keep]))
    det.segments = [Segment(s, e, to_value(l)) for (s, e), l in zip(segs, lv)]

    def verdict(a, b):
        worse = b > a if direction == "lower" else b < a
        return "regression" if worse else "improvement"

    def ratio(a, b):
        fa, fb = to_value(a), to_value(b)
        return fb / fa if fa else math.inf

    # Single commits far off their segment's level (robust z > 5 and beyond the threshold)
    # and off both neighbours, which the penalty keeps from becoming a segment of their own.
    if not exact:
        seen = {o[0] for o in outliers}
        split = []
        for (s, e), l in zip(segs, lv):
            for i in range(s, e + 1):
                nb = [x[j] for j in (i - 1, i + 1) if 0 <= j < n]
                if i not in seen and abs(x[i] - l) > max(min_step, 5 * det.noise) and \
                        all(abs(x[i] - y) > min_step for y in nb):
                    if isolated(i):
                        outliers.append((i, l, float(x[i])))
                    else:
                        split.append(i)
        for i in split:  # its own segment: a step up and a step back, with commits between
            k = next(k for k, (s, e) in enumerate(segs) if s <= i <= e)
            s, e = segs[k]
            segs[k:k + 1] = [p for p in ((s, i - 1), (i, i), (i + 1, e)) if p[0] <= p[1]]
        if split:
            lv = _levels(x, segs)
    for i, base_lv, out_lv in outliers:
        det.events.append(Event("outlier", verdict(base_lv, out_lv), i, i - 1,
                                ratio(base_lv, out_lv), to_value(base_lv), to_value(out_lv),
                                detail="one commit off its neighbours' level"))
    steps = []
    for k in range(1, len(segs)):
        a, b = lv[k - 1], lv[k]
        ev = Event("step", verdict(a, b), segs[k][0], segs[k - 1][1], ratio(a, b),
                   to_value(a), to_value(b))
        steps.append((k, ev))
    for k, ev in steps:
        if ev.verdict != "regression":
            continue
        before = lv[k - 1]
        for k2 in range(k + 1, len(segs)):
            if same(lv[k2], before) or verdict(before, lv[k2]) == "improvement":
                ev.fixed_by = segs[k2][0]
                break
        ev.open = ev.fixed_by is None
    det.events += [ev for _, ev in steps]

    # Gradual drift: a straight line (Theil-Sen, two parameters) explains the series better
    # than the steps do (same L1 cost plus penalty per parameter), the trend is significant
    # (Kendall tau at alpha) and its total change exceeds the threshold. Then the "steps" were
    # a staircase cut out of a ramp: one drift event replaces them.
    if not exact and n >= 6:
        tau, p = sps.kendalltau(np.arange(n), x)
        slope, icpt = sps.theilslopes(x, np.arange(n))[:2]
        total = slope * (n - 1)
        line = icpt + slope * np.arange(n)
        cost_steps = float(np.sum(np.abs(x - np.repeat(lv, [e - s + 1 for s, e in segs])))) + \
            penalty * len(segs)
        cost_line = float(np.sum(np.abs(x - line))) + 2 * penalty
        if p < alpha and abs(total) > min_step and cost_line < cost_steps:
            a, b = float(line[0]), float(line[-1])
            det.events = [e for e in det.events if e.kind == "outlier"]
            det.segments = [Segment(0, n - 1, to_value(float(np.median(x))))]
            det.events.append(Event(
                "drift", verdict(a, b), n - 1, 0, math.exp(total), to_value(a), to_value(b),
                open=verdict(a, b) == "regression",
                detail=f"gradual: a trend over all {n} commits fits better than steps "
                       f"(Kendall tau {tau:.2f}, p {p:.2g}; Theil-Sen change "
                       f"{math.exp(total) - 1:+.1%})"))
    det.events.sort(key=lambda e: (e.index, e.kind))
    return det
