"""Statistics for comparing two sets of samples without over-claiming.

- The test is the two-sided Mann-Whitney U test. Without ties and for small samples its exact
  null distribution is used (scipy's `mannwhitneyu(method="exact")`); with ties, the exact
  permutation distribution of U (scipy's `permutation_test`, every split enumerated) while
  there are at most 200,000 splits; beyond that scipy's normal approximation with the tie
  correction. Which one ran is reported with each p-value.
- A test over n and m samples can never give a p-value below 2 / C(n+m, n) (0.100 for 3 vs 3,
  0.029 for 4 vs 4, 0.0079 for 5 vs 5). When that floor is above the significance level the
  test is not run as evidence; the comparison falls back to a stated rule (see compare.py).
- The confidence interval of the ratio new/old is the distribution-free (Hodges-Lehmann /
  Moses) interval for a shift of log values: order statistics of the n*m pairwise ratios, with
  the index taken from the exact null distribution of U. Its actual coverage is reported;
  when the requested level is not attainable with n and m samples, the widest interval
  (min to max pairwise ratio) is returned with the coverage it does have. Beyond 1,000,000
  pairs (1000 vs 1000 samples) the two order statistics are found by bisection over the log
  ratios rather than by sorting every pair: the same values, in memory and time linear in n + m
  (5000 vs 5000 repetitions a side compare in well under a second).
- Large samples: binomial coefficients stay exact integers (C(1040, 520) is beyond a float);
  the floor 2 / C(n+m, n) is divided as integers and is simply 0.0 where it is below the
  smallest float. Above 200,000 splits the p-value is the normal approximation (above).
- Many rows are tested at once: p-values are adjusted by Benjamini-Hochberg (false discovery
  rate); scipy 1.10 has no `false_discovery_control`, so it is written here and tested against
  published values.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats as sps

EXACT_SPLIT_LIMIT = 200_000


def median(xs) -> float:
    return float(np.median(np.asarray(xs, dtype=float)))


def min_achievable_p(n: int, m: int) -> float:
    """Smallest two-sided p-value any rank test can reach with n and m samples."""
    if n < 1 or m < 1:
        return 1.0
    # int / int: Python divides the exact integers and rounds once (to 0.0 when the floor is
    # below the smallest float); 2.0 / C(n+m, n) would first convert C to a float, which
    # overflows from 520 vs 520 samples on.
    return min(1.0, 2 / math.comb(n + m, n))


@lru_cache(maxsize=256)
def u_null_counts(n: int, m: int) -> tuple[int, ...]:
    """Number of the C(n+m, n) equally likely splits giving U = 0..n*m (no ties)."""
    # f[i][j][u]: arrangements of i x's and j y's with u (x > y) pairs; recurrence on the
    # largest element: it is an x (adds j pairs) or a y (adds none).
    prev = [[1] for _ in range(m + 1)]  # i = 0: only U = 0
    for i in range(1, n + 1):
        cur = [[1]]  # j = 0
        for j in range(1, m + 1):
            a = [0] * (i * j + 1)
            for u, c in enumerate(prev[j]):  # largest is an x: i-1 x's, j y's, +j pairs
                a[u + j] += c
            for u, c in enumerate(cur[j - 1]):  # largest is a y
                a[u] += c
            cur.append(a)
        prev = cur
    return tuple(prev[m])


def u_null_cdf(n: int, m: int) -> list[float]:
    counts = u_null_counts(n, m)
    total = math.comb(n + m, n)
    acc, out = 0, []
    for c in counts:
        acc += c
        out.append(acc / total)
    return out


def mann_whitney(a, b) -> tuple[float, str]:
    """Two-sided p-value of the Mann-Whitney U test and the method used."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    n, m = len(a), len(b)
    if n < 1 or m < 1:
        return 1.0, "none"
    pooled = np.concatenate([a, b])
    ties = len(np.unique(pooled)) < len(pooled)
    if np.all(pooled == pooled[0]):
        return 1.0, "exact (all values equal)"
    if not ties and math.comb(n + m, n) <= EXACT_SPLIT_LIMIT:
        r = sps.mannwhitneyu(a, b, alternative="two-sided", method="exact")
        return float(r.pvalue), "exact"
    if ties and math.comb(n + m, n) <= EXACT_SPLIT_LIMIT:
        def u_stat(x, y, axis):
            return sps.mannwhitneyu(x, y, axis=axis, method="asymptotic").statistic
        r = sps.permutation_test((a, b), u_stat, permutation_type="independent",
                                 alternative="two-sided", n_resamples=np.inf, vectorized=True)
        return float(min(1.0, r.pvalue)), "exact permutation (ties)"
    r = sps.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic",
                         use_continuity=True)
    return float(r.pvalue), "normal approximation"


# Above this many pairs the CI's order statistics are found by bisection over log ratios
# (O((n + m) log) memory and time) instead of sorting all n*m ratios: 5000 vs 5000 repetitions
# would sort 25 million (200 MB, seconds); 20000 vs 20000 would not fit in memory.
PAIRWISE_SORT_LIMIT = 1_000_000


def _pairwise_ratios(old: np.ndarray, new: np.ndarray, ranks: list[int]) -> list[float]:
    """The ranks-th smallest (1-based) of the n*m ratios new[j] / old[i]."""
    n, m = len(old), len(new)
    if n * m <= PAIRWISE_SORT_LIMIT:
        ratios = np.sort((new[None, :] / old[:, None]).ravel())
        return [float(ratios[k - 1]) for k in ranks]
    lo_old, lo_new = np.sort(np.log(old)), np.sort(np.log(new))
    out = []
    for k in ranks:
        # The smallest t with #{(i, j): log new_j - log old_i <= t} >= k, bisected until the
        # bracket is as narrow as a float allows (the result is exact to rounding).
        lo, hi = lo_new[0] - lo_old[-1], lo_new[-1] - lo_old[0]
        for _ in range(200):
            mid = (lo + hi) / 2.0
            if not lo < mid < hi:
                break
            if int(np.searchsorted(lo_new, lo_old + mid, side="right").sum()) >= k:
                hi = mid
            else:
                lo = mid
        out.append(math.exp(hi))
    return out


def ratio_ci(old, new, level: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free CI of new/old (both positive): (low, high, actual coverage)."""
    old = np.asarray(old, dtype=float)
    new = np.asarray(new, dtype=float)
    n, m = len(old), len(new)
    if n < 1 or m < 1 or np.any(old <= 0) or np.any(new <= 0):
        return math.nan, math.nan, 0.0
    nm = n * m
    if nm == 1:
        r = float(new[0] / old[0])
        return r, r, 0.0
    half = (1.0 - level) / 2.0
    if math.comb(n + m, n) <= 5_000_000:
        cdf = u_null_cdf(n, m)
        # k = 1 + the largest u with P(U <= u) <= half; CI = [r_(k), r_(nm+1-k)].
        k = 0
        while k < len(cdf) and cdf[k] <= half:
            k += 1
        if k == 0:  # not attainable: the widest interval and its coverage
            lo, hi = _pairwise_ratios(old, new, [1, nm])
            return lo, hi, 1.0 - 2.0 * cdf[0]
        coverage = 1.0 - 2.0 * cdf[k - 1]
    else:  # normal approximation of U's quantile
        z = sps.norm.ppf(1.0 - half)
        k = int(math.floor(nm / 2.0 - z * math.sqrt(nm * (n + m + 1) / 12.0)))
        k = max(k, 1)
        coverage = level
    lo, hi = _pairwise_ratios(old, new, [k, nm + 1 - k])
    return lo, hi, coverage


def benjamini_hochberg(pvalues: list[float]) -> list[float]:
    """BH-adjusted p-values (q-values), in the input order."""
    p = np.asarray(pvalues, dtype=float)
    k = len(p)
    if k == 0:
        return []
    order = np.argsort(p, kind="stable")
    ranked = p[order] * k / np.arange(1, k + 1)
    q = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(k)
    out[order] = np.minimum(q, 1.0)
    return [float(x) for x in out]


def log_noise(xs) -> float:
    """Robust relative noise: 1.4826 x MAD of log values (about the cv for small noise)."""
    x = np.asarray(xs, dtype=float)
    x = x[x > 0]
    if len(x) < 2:
        return math.nan
    return float(sps.median_abs_deviation(np.log(x), scale="normal"))


def min_n_for_alpha(alpha: float) -> int:
    """Smallest n per side for which the exact test can reach `alpha`."""
    n = 1
    while min_achievable_p(n, n) > alpha:
        n += 1
    return n


def repetitions_needed(noise: float, change: float, alpha: float = 0.05,
                       power: float = 0.8) -> int:
    """Samples per side for the U test to detect a relative `change` at relative `noise`.

    Normal approximation for a shift of log values, divided by the U test's asymptotic
    relative efficiency against the t test for normal data (3/pi), plus one sample for the
    exact test's discreteness at small n (without it a simulation falls short of the power
    asked: 0.74 instead of 0.80 at n = 12), and never below the smallest n at which the exact
    test can reach alpha.
    """
    floor = min_n_for_alpha(alpha)
    if not (noise > 0) or not (change > 0):
        return floor
    d = math.log1p(change)
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    n = 2 * (z * noise / d) ** 2 / (3 / math.pi)
    return max(floor, int(math.ceil(n)) + 1)


def geomean_ci(ratios, level: float = 0.95, seed: int = 12345):
    """Geometric mean of ratios with a bootstrap CI (percentile, seeded); CI None below 3."""
    r = np.asarray([x for x in ratios if x > 0 and math.isfinite(x)], dtype=float)
    if len(r) == 0:
        return math.nan, None
    g = float(np.exp(np.mean(np.log(r))))
    if len(r) < 3 or np.all(r == r[0]):
        return g, None
    res = sps.bootstrap((np.log(r),), np.mean, confidence_level=level, method="percentile",
                        n_resamples=2000, random_state=np.random.default_rng(seed))
    return g, (float(np.exp(res.confidence_interval.low)),
               float(np.exp(res.confidence_interval.high)))
