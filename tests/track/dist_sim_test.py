"""The data-parallel scaling model (tools/track/dist_sim.py): the all-reduce formulas, the fit,
tbd's bucketing, the event simulation's limits, and `tbd_track simulate` on a real run."""

import json
import math
import os
import subprocess
import sys
import unittest

import track_support  # noqa: F401  (puts tools/ on sys.path)
from track import dist_sim
from track.gbjson import InputError, load_run

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "data", "dist-np2.json")
TBD_TRACK = os.path.join(HERE, "..", "..", "tools", "tbd_track")
MIB = 1 << 20


def profile(grads, fwd=0.1, bwd=0.2, opt=0.02):
    return dist_sim.Profile("M/train/batch:1", "M", 1, 1, fwd + bwd + opt, fwd, bwd, opt, 0.0,
                            grads, 0.0, 0.0)


class AllReduceModel(unittest.TestCase):
    link = dist_sim.Link("test", alpha=1e-5, beta=1e-9, source="test")

    def test_ring_tree_hierarchical(self):
        n = 100e6
        self.assertAlmostEqual(dist_sim.t_allreduce(n, 4, self.link, "ring"),
                               6e-5 + 1.5 * n * 1e-9)
        self.assertAlmostEqual(dist_sim.t_allreduce(n, 8, self.link, "tree"),
                               6e-5 + 2 * n * 1e-9)
        inner = dist_sim.Link("in", 1e-6, 1e-11, "")
        t = dist_sim.t_allreduce(n, 16, self.link, "hierarchical", per_node=8, intra=inner)
        self.assertAlmostEqual(t, 14e-6 + 1.75 * n * 1e-11 + 2e-5 + n * 1e-9)
        self.assertEqual(dist_sim.t_allreduce(n, 1, self.link), 0.0)
        with self.assertRaises(InputError):
            dist_sim.t_allreduce(n, 2, self.link, "butterfly")

    def test_fit_recovers_alpha_and_beta(self):
        p, alpha, beta = 2, 3e-6, 4e-10
        rows = [(n, 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta)
                for n in (8, 16, 32, 1 << 20, 1 << 24, 1 << 26)]
        lk = dist_sim.fit_link(rows, p)
        self.assertAlmostEqual(lk.beta / beta, 1.0, places=9)
        # alpha from the smallest sizes, which carry a little of beta's term too
        self.assertAlmostEqual(lk.alpha / alpha, 1.0, places=2)
        with self.assertRaises(InputError):
            dist_sim.fit_link(rows[:4], p)  # one size >= 1 MiB: no slope


class Buckets(unittest.TestCase):
    def test_close_after_the_cap_first_bucket_smaller(self):
        grads = [(MIB // 2, 0.1), (MIB // 2, 0.2), (3 * MIB, 0.3), (MIB, 0.4), (MIB, 0.5)]
        self.assertEqual(dist_sim.buckets_of(grads, 2, 1),
                         [(MIB, 0.2), (3 * MIB, 0.3), (2 * MIB, 0.5)])
        self.assertEqual(dist_sim.buckets_of(grads, 0, 0), [(6 * MIB, 0.5)])


class Step(unittest.TestCase):
    def test_free_links_scale_perfectly(self):
        free = dist_sim.Link("free", 0.0, 0.0, "")
        pr = dist_sim.simulate(profile([(MIB, 0.15), (MIB, 0.3)]), 64, free)
        self.assertAlmostEqual(pr.step_s, 0.32)
        self.assertAlmostEqual(pr.efficiency, 1.0)

    def test_last_bucket_cannot_hide(self):
        # Every gradient ready at the end of backward: all communication is exposed.
        lk = dist_sim.Link("slow", 0.0, 1e-8, "")
        pr = dist_sim.simulate(profile([(10 * MIB, 0.3)]), 2, lk)
        comm = 10 * MIB * 1e-8
        self.assertAlmostEqual(pr.comm_s, comm)
        self.assertAlmostEqual(pr.step_s, 0.32 + comm)
        self.assertAlmostEqual(pr.overlap, 0.0)

    def test_early_buckets_hide_unless_cores_are_shared(self):
        lk = dist_sim.Link("slow", 0.0, 1e-8, "")
        grads = [(4 * MIB, 0.12), (MIB, 0.3)]
        comm0, comm1 = 4 * MIB * 1e-8, MIB * 1e-8
        alone = dist_sim.simulate(profile(grads), 2, lk, bucket_mib=1, first_mib=1)
        self.assertAlmostEqual(alone.step_s, 0.3 + comm1 + 0.02)  # bucket 0 hidden under compute
        shared = dist_sim.simulate(profile(grads), 2, lk, bucket_mib=1, first_mib=1, cpu_share=1)
        # Processor sharing: compute and the first all-reduce split the core; no work is lost.
        self.assertAlmostEqual(shared.step_s, 0.3 + comm0 + comm1 + 0.02)

    def test_ethernet_scales_poorly_infiniband_well(self):
        # TBD's finding for ResNet-50 (102 MB of gradients) at a 160 ms step.
        grads = [(int(102.2e6 / 160), 0.16 * (k + 1) / 160) for k in range(160)]
        pr = profile(grads, fwd=0.05, bwd=0.1, opt=0.01)
        eth = dist_sim.simulate(pr, 8, dist_sim.LINKS["1GbE"])
        ib = dist_sim.simulate(pr, 8, dist_sim.LINKS["100GbIB"])
        self.assertLess(eth.efficiency, 0.2)
        self.assertGreater(ib.efficiency, 0.9)


class OnARealRun(unittest.TestCase):
    def test_profiles_and_validation(self):
        run = load_run(RUN)
        profs = dist_sim.profiles([run])
        ones = [p for p in profs if p.ranks == 1]
        self.assertTrue(ones)
        for p in ones:
            self.assertGreater(sum(b for b, _ in p.grads), 0)
            ready = [r for _, r in p.grads]
            self.assertEqual(ready, sorted(ready), p.name)  # arena order = completion order
        val = dist_sim.validate([run], profs, "ring", 25.0, 1.0)
        self.assertTrue(val)
        for v in val:
            self.assertTrue(math.isfinite(v["error"]))

    def test_cli(self):
        out = subprocess.run([sys.executable, TBD_TRACK, "simulate", RUN, "--ranks", "2,64",
                              "--format", "json"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        doc = json.loads(out.stdout)
        names = {lk["name"] for lk in doc["links"]}
        self.assertIn("1 Gb/s Ethernet", names)
        self.assertTrue(any(n.startswith("measured here") for n in names))
        text = subprocess.run([sys.executable, TBD_TRACK, "simulate", RUN, "--link", "1GbE"],
                              capture_output=True, text=True)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("validation", text.stdout)
        bad = subprocess.run([sys.executable, TBD_TRACK, "simulate", RUN, "--link", "carrier"],
                             capture_output=True, text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("unknown link 'carrier'", bad.stderr)


if __name__ == "__main__":
    unittest.main()
