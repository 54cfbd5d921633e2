"""The tracker's statistics against scipy and against brute force."""

import itertools
import math
import unittest

import numpy as np
from scipy import stats as sps

import track_support  # noqa: F401  (puts tools/ on sys.path)
from track import stats


def brute_u_counts(n, m):
    """Distribution of U = #(x > y) over all splits of ranks 1..n+m (no ties)."""
    counts = [0] * (n * m + 1)
    for xs in itertools.combinations(range(n + m), n):
        ys = [r for r in range(n + m) if r not in xs]
        counts[sum(1 for x in xs for y in ys if x > y)] += 1
    return counts


def brute_perm_p(a, b):
    """Two-sided exact permutation p of U with ties (mid-ranks), by enumeration."""
    pooled = np.concatenate([a, b])
    n = len(a)
    ranks = sps.rankdata(pooled)
    def u_of(idx):
        return ranks[list(idx)].sum() - n * (n + 1) / 2
    obs = u_of(range(n))
    us = np.array([u_of(idx) for idx in itertools.combinations(range(len(pooled)), n)])
    lo = np.mean(us <= obs + 1e-9)
    hi = np.mean(us >= obs - 1e-9)
    return min(1.0, 2 * min(lo, hi))


class MinAchievableP(unittest.TestCase):
    def test_known_floors(self):
        # 2 / C(n+m, n). (The tracking notes quote 0.00041 for 9 vs 9: scipy gives 4.1e-5.)
        self.assertAlmostEqual(stats.min_achievable_p(3, 3), 0.100, places=3)
        self.assertAlmostEqual(stats.min_achievable_p(4, 4), 0.0286, places=4)
        self.assertAlmostEqual(stats.min_achievable_p(5, 5), 0.0079, places=4)
        self.assertAlmostEqual(stats.min_achievable_p(9, 9), 4.1135e-5, places=8)

    def test_floor_is_scipys_p_of_full_separation(self):
        for n, m in [(2, 3), (3, 3), (4, 4), (5, 3), (6, 6)]:
            a, b = np.arange(n, dtype=float), np.arange(n, n + m, dtype=float)
            p = sps.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue
            self.assertAlmostEqual(stats.min_achievable_p(n, m), p, places=12)

    def test_min_n_for_alpha(self):
        self.assertEqual(stats.min_n_for_alpha(0.05), 4)
        self.assertEqual(stats.min_n_for_alpha(0.01), 5)
        self.assertEqual(stats.min_n_for_alpha(0.2), 3)


class UNullDistribution(unittest.TestCase):
    def test_against_enumeration(self):
        for n, m in [(1, 1), (2, 3), (3, 3), (4, 2), (4, 5)]:
            self.assertEqual(list(stats.u_null_counts(n, m)), brute_u_counts(n, m), (n, m))

    def test_against_scipy_exact_p(self):
        # scipy's two-sided exact p of an observed U is 2 * min(P(U <= u), P(U >= u)).
        rng = np.random.default_rng(3)
        for n, m in [(3, 4), (5, 5), (6, 4), (7, 7)]:
            cdf = stats.u_null_cdf(n, m)
            for _ in range(10):
                a, b = rng.normal(size=n), rng.normal(size=m)
                r = sps.mannwhitneyu(a, b, alternative="two-sided", method="exact")
                u = int(r.statistic)
                lower = cdf[u]
                upper = 1 - (cdf[u - 1] if u > 0 else 0)
                self.assertAlmostEqual(min(1.0, 2 * min(lower, upper)), r.pvalue, places=12)


class MannWhitney(unittest.TestCase):
    def test_no_ties_is_scipy_exact(self):
        rng = np.random.default_rng(1)
        for n, m in [(3, 3), (5, 5), (4, 7), (9, 9)]:
            a, b = rng.normal(size=n), rng.normal(0.7, size=m)
            p, method = stats.mann_whitney(a, b)
            ref = sps.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue
            self.assertEqual(method, "exact")
            self.assertAlmostEqual(p, ref, places=12)

    def test_ties_use_the_exact_permutation_distribution(self):
        a = np.array([1.0, 2.0, 2.0, 3.0, 5.0])
        b = np.array([2.0, 3.0, 4.0, 4.0, 6.0, 7.0])
        p, method = stats.mann_whitney(a, b)
        self.assertIn("permutation", method)
        self.assertAlmostEqual(p, brute_perm_p(a, b), places=10)

    def test_large_samples_use_the_normal_approximation(self):
        rng = np.random.default_rng(2)
        a, b = rng.normal(size=30), rng.normal(0.3, size=30)
        p, method = stats.mann_whitney(a, b)
        self.assertEqual(method, "normal approximation")
        ref = sps.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue
        self.assertAlmostEqual(p, ref, places=12)

    def test_identical_samples(self):
        self.assertEqual(stats.mann_whitney([1.0, 1.0], [1.0, 1.0])[0], 1.0)


class RatioCI(unittest.TestCase):
    def test_interval_is_the_inversion_of_scipys_exact_test(self):
        # The distribution-free CI of a shift contains exactly the shifts the exact two-sided
        # test does not reject at 1 - coverage (checked between the order statistics).
        rng = np.random.default_rng(7)
        for n, m in [(5, 5), (6, 8), (8, 8)]:
            old = np.exp(rng.normal(0, 0.03, n))
            new = np.exp(rng.normal(0.05, 0.03, m))
            lo, hi, cov = stats.ratio_ci(old, new, 0.95)
            self.assertGreaterEqual(cov, 0.95)
            logs = np.sort(np.log((new[None, :] / old[:, None]).ravel()))
            mids = (logs[:-1] + logs[1:]) / 2
            level = 1 - cov
            for d in mids:
                p = sps.mannwhitneyu(np.log(old), np.log(new) - d, alternative="two-sided",
                                     method="exact").pvalue
                inside = math.log(lo) < d < math.log(hi)
                self.assertEqual(inside, p > level + 1e-12, (n, m, d, p, level))

    def test_unattainable_level_returns_the_widest_interval_and_its_coverage(self):
        lo, hi, cov = stats.ratio_ci([1.0, 1.1, 1.2], [2.0, 2.2, 2.4], 0.95)
        self.assertAlmostEqual(cov, 0.9)  # 1 - 2/C(6,3)
        self.assertAlmostEqual(lo, 2.0 / 1.2)
        self.assertAlmostEqual(hi, 2.4 / 1.0)

    def test_coverage_by_simulation(self):
        rng = np.random.default_rng(11)
        hits, trials = 0, 400
        for _ in range(trials):
            old = np.exp(rng.normal(0, 0.05, 6))
            new = 1.1 * np.exp(rng.normal(0, 0.05, 6))
            lo, hi, cov = stats.ratio_ci(old, new, 0.95)
            hits += lo <= 1.1 <= hi
        self.assertGreater(hits / trials, 0.92)


class BenjaminiHochberg(unittest.TestCase):
    def test_known_values(self):
        # R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "BH") -> 0.02 0.04 0.04 0.02
        self.assertEqual([round(x, 10) for x in stats.benjamini_hochberg([0.01, 0.04, 0.03, 0.005])],
                         [0.02, 0.04, 0.04, 0.02])

    def test_against_the_definition(self):
        rng = np.random.default_rng(5)
        p = rng.uniform(size=25) ** 2
        q = stats.benjamini_hochberg(list(p))
        m = len(p)
        order = np.argsort(p)
        for rank, i in enumerate(order, start=1):
            ref = min(min(p[order[j - 1]] * m / j for j in range(rank, m + 1)), 1.0)
            self.assertAlmostEqual(q[i], ref, places=12)

    def test_empty(self):
        self.assertEqual(stats.benjamini_hochberg([]), [])


class RepetitionsNeeded(unittest.TestCase):
    def test_floor_and_monotone(self):
        self.assertEqual(stats.repetitions_needed(0.0, 0.05), 4)
        a = stats.repetitions_needed(0.02, 0.05)
        b = stats.repetitions_needed(0.04, 0.05)
        c = stats.repetitions_needed(0.04, 0.10)
        self.assertLess(a, b)
        self.assertLess(c, b)

    def test_power_by_simulation(self):
        # At the n it asks for, the test finds the change in at least ~75% of trials.
        rng = np.random.default_rng(9)
        noise, change = 0.04, 0.05
        n = stats.repetitions_needed(noise, change, 0.05, 0.8)
        found = 0
        for _ in range(300):
            a = rng.normal(0, noise, n)
            b = rng.normal(math.log1p(change), noise, n)
            found += stats.mann_whitney(a, b)[0] < 0.05
        self.assertGreater(found / 300, 0.75, n)


class Noise(unittest.TestCase):
    def test_log_noise_matches_sigma(self):
        rng = np.random.default_rng(4)
        x = np.exp(rng.normal(0, 0.03, 4000))
        self.assertAlmostEqual(stats.log_noise(x), 0.03, delta=0.003)

    def test_geomean_ci_is_seeded(self):
        r = [1.01, 0.98, 1.05, 1.0, 0.97, 1.02]
        self.assertEqual(stats.geomean_ci(r), stats.geomean_ci(r))
        g, ci = stats.geomean_ci(r)
        self.assertAlmostEqual(g, math.exp(np.mean(np.log(r))))
        self.assertLess(ci[0], g)
        self.assertGreater(ci[1], g)
        self.assertIsNone(stats.geomean_ci([1.0, 1.1])[1])


if __name__ == "__main__":
    unittest.main()
