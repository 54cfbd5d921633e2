"""compare: every metric, honest set handling, the statistics' verdicts, outputs, exit codes."""

import datetime
import json
import os
import subprocess
import unittest

import numpy as np

from track_support import (CONV_CL, GEMM_CONV, MODELS, TBD_TRACK, TempFiles, doc, error_row,
                           reps, row)
from track import compare as cmp
from track import render
from track.config import load_config
from track.gbjson import load_run

MEM = dict(mem_weights=1e8, mem_weight_grads=1e8, mem_optimizer_state=1e8,
           mem_feature_maps=6e8, mem_workspace=2.8e8, mem_dynamic=6.3e8)


def resnet(times, peak=1.826e9, util=0.55, **mem):
    m = dict(MEM)
    m.update(mem)
    return reps("ResNet50/train/batch:4", times, flop=9.9e10, flops=2.4e11,
                fp32_utilization=util, items_per_second=9.6, peak_memory_bytes=peak,
                cpu_utilization=0.98, **m)


def run(path_a, path_b, cfg=None, **kw):
    return cmp.compare([load_run(path_a)], [load_run(path_b)], cfg or load_config(None), **kw)


def metric(c, name, m):
    r = next(r for r in c.rows if r.name == name)
    return next(x for x in r.metrics if x.metric == m)


class TrackingNotesScenario(unittest.TestCase):
    """The tbd-shaped pair on which Google Benchmark's compare.py shows nothing useful."""

    @classmethod
    def setUpClass(cls):
        t = TempFiles()
        conv = "Conv2d/resnet50.layer1.0.conv2/fwd/batch:32"
        base = doc(resnet([414.3, 416.0, 412.9]) +
                   [row(conv, 19739.1, "us", flop=7.4e9, flops=3.7e11, peak_memory_bytes=5.2e7),
                    row("Gemm/square1024/fwd/batch:1", 7.0, flop=2.1e9, flops=3e11),
                    error_row("LSTM/deepspeech2.rnn.l0/fwd/batch:64")])
        new = doc(resnet([410.1, 411.7, 409.0], peak=1.826e9 * 1.4, util=0.275,
                         mem_feature_maps=6e8 + 0.4 * 1.826e9) +
                  [row(conv, 19740.0, "us", flop=7.4e9, flops=3.7e11 * 0.7,
                       peak_memory_bytes=5.2e7 * 3),
                   row("LSTM/deepspeech2.rnn.l0/fwd/batch:64", 88000, "us", flop=1e9),
                   row("Transformer/train/batch:8/len:32", 490.0, flop=1e10)],
                  context={"git_commit": "b" * 40})
        cls.c = run(t.write("base.json", base), t.write("new.json", new))

    def test_memory_growth_is_a_regression_naming_the_category(self):
        m = metric(self.c, "ResNet50/train/batch:4", "peak_memory_bytes")
        self.assertEqual(m.verdict, "regression")
        cat = metric(self.c, "ResNet50/train/batch:4", "mem_feature_maps")
        self.assertEqual(cat.verdict, "regression")
        self.assertEqual(metric(self.c, "ResNet50/train/batch:4", "mem_weights").verdict, "same")
        conv = metric(self.c, "Conv2d/resnet50.layer1.0.conv2/fwd/batch:32", "peak_memory_bytes")
        self.assertEqual(conv.verdict, "regression")

    def test_halved_utilization_and_lost_flops_are_seen(self):
        u = metric(self.c, "ResNet50/train/batch:4", "fp32_utilization")
        self.assertAlmostEqual(u.ratio, 0.5)
        # 3 vs 3 cannot reach alpha: the stated fallback (full separation + threshold) decides.
        self.assertIn("fallback", u.test)
        self.assertEqual(u.verdict, "regression")
        f = metric(self.c, "Conv2d/resnet50.layer1.0.conv2/fwd/batch:32", "flops")
        self.assertEqual(f.verdict, "regression")
        self.assertEqual(f.test, "n=1: threshold only")

    def test_sets_are_reported_not_dropped(self):
        st = {r.name: r.status for r in self.c.rows}
        self.assertEqual(st["Gemm/square1024/fwd/batch:1"], "removed")
        self.assertEqual(st["Transformer/train/batch:8/len:32"], "added")
        self.assertEqual(st["LSTM/deepspeech2.rnn.l0/fwd/batch:64"], "fixed")
        lstm = next(r for r in self.c.rows if r.name.startswith("LSTM"))
        self.assertEqual(lstm.metrics, [])  # no "+200%" for an out-of-memory baseline

    def test_exit_code_and_texts(self):
        self.assertEqual(self.c.exit_code, 1)
        t = render.text(self.c)
        for s in ("Memory regressions", "mem_feature_maps", "Fixed (error -> ok)",
                  "Removed (1)", "Added (1)", "verdict: REGRESSION (exit 1)"):
            self.assertIn(s, t)
        md = render.markdown(self.c)
        self.assertIn("| benchmark | metric |", md)
        js = json.loads(json.dumps(self.c.to_dict()))
        self.assertEqual(js["exit_code"], 1)


class Verdicts(unittest.TestCase):
    def setUp(self):
        self.t = TempFiles()
        self.rng = np.random.default_rng(42)

    def pair(self, a_vals, b_vals, name="Conv2d/x/fwd/batch:8", ctx_b=None, **counters):
        a = self.t.write("a.json", doc(reps(name, a_vals, "us", **counters)))
        b = self.t.write("b.json", doc(reps(name, b_vals, "us", **counters), context=ctx_b))
        return a, b

    def test_significant_and_beyond_threshold(self):
        a, b = self.pair(list(100 * np.exp(self.rng.normal(0, 0.01, 8))),
                         list(110 * np.exp(self.rng.normal(0, 0.01, 8))))
        m = metric(run(a, b), "Conv2d/x/fwd/batch:8", "real_time")
        self.assertEqual(m.verdict, "regression")
        self.assertLess(m.q, 0.05)
        self.assertTrue(m.test.startswith("Mann-Whitney U, exact"))
        self.assertLess(m.ci[0], 1.1)
        self.assertGreater(m.ci[1], 1.05)

    def test_significant_but_small_is_not_a_regression(self):
        a, b = self.pair(list(100 * np.exp(self.rng.normal(0, 0.001, 8))),
                         list(102 * np.exp(self.rng.normal(0, 0.001, 8))))
        m = metric(run(a, b), "Conv2d/x/fwd/batch:8", "real_time")
        self.assertLess(m.q, 0.05)
        self.assertEqual(m.verdict, "same")

    def test_big_but_noisy_is_noise(self):
        a, b = self.pair([100, 140, 90, 120, 80, 100], [115, 95, 150, 85, 130, 120])
        m = metric(run(a, b), "Conv2d/x/fwd/batch:8", "real_time")
        self.assertGreater(m.ratio, 1.05)
        self.assertEqual(m.verdict, "noise")

    def test_a_a_many_rows_no_false_regressions(self):
        rows_a, rows_b = [], []
        for k in range(40):
            rows_a += reps(f"Conv2d/l{k}/fwd/batch:8", list(100 * np.exp(self.rng.normal(0, 0.03, 6))), "us")
            rows_b += reps(f"Conv2d/l{k}/fwd/batch:8", list(100 * np.exp(self.rng.normal(0, 0.03, 6))), "us")
        c = run(self.t.write("a.json", doc(rows_a)), self.t.write("b.json", doc(rows_b)))
        self.assertEqual(c.exit_code, 0)
        self.assertFalse([r.name for r in c.rows if r.verdict == "regression"])

    def test_higher_is_better_direction(self):
        a = self.t.write("a.json", doc(reps("M/train/batch:1", [10, 10.1, 9.9, 10, 10.05], items_per_second=100)))
        b = self.t.write("b.json", doc(reps("M/train/batch:1", [10, 10.1, 9.9, 10, 10.05], items_per_second=80)))
        c = run(a, b)
        self.assertEqual(metric(c, "M/train/batch:1", "items_per_second").verdict, "regression")
        self.assertEqual(metric(c, "M/train/batch:1", "real_time").verdict, "same")

    def test_unit_converted_rows_are_compared(self):
        a = self.t.write("a.json", doc([row("Conv2d/x/fwd/batch:8", 19739.1, "us")]))
        b = self.t.write("b.json", doc([row("Conv2d/x/fwd/batch:8", 19.7391, "ms")]))
        c = run(a, b)
        r = c.rows[0]
        self.assertEqual(r.status, "compared")
        self.assertIn("us -> ms", r.unit_note)
        self.assertAlmostEqual(metric(c, r.name, "real_time").ratio, 1.0)

    def test_broken_row_is_a_regression(self):
        a = self.t.write("a.json", doc([row("Conv2d/x/fwd/batch:64", 10.0)]))
        b = self.t.write("b.json", doc([error_row("Conv2d/x/fwd/batch:64")]))
        c = run(a, b)
        self.assertEqual(c.rows[0].status, "broken")
        self.assertEqual(c.exit_code, 1)
        self.assertIn("out of memory", render.text(c))

    def test_changed_work_is_not_comparable(self):
        a = self.t.write("a.json", doc([row("Linear/x/fwd/batch:8", 10.0, flop=1e9)]))
        b = self.t.write("b.json", doc([row("Linear/x/fwd/batch:8", 5.0, flop=5e8)]))
        c = run(a, b)
        self.assertEqual(c.rows[0].status, "not-comparable")
        self.assertIn("flop", c.rows[0].reason)
        self.assertEqual(c.exit_code, 0)

    def test_memory_tolerance(self):
        a = self.t.write("a.json", doc([row("X/train/batch:1", 10.0, peak_memory_bytes=1000.0)]))
        b = self.t.write("b.json", doc([row("X/train/batch:1", 10.0, peak_memory_bytes=1010.0)]))
        self.assertEqual(run(a, b).exit_code, 1)
        cfg = load_config(None)
        cfg.memory_tolerance = 0.02
        self.assertEqual(run(a, b, cfg).exit_code, 0)

    def test_peak_change_ungates_utilization(self):
        a, b = self.pair([10, 10, 10], [10, 10, 10], fp32_utilization=0.5,
                         ctx_b={"peak_fp32_flops": "5.0e+11"})
        b2 = self.t.write("b2.json", doc(reps("Conv2d/x/fwd/batch:8", [10, 10, 10], "us",
                                              fp32_utilization=0.43),
                                         context={"peak_fp32_flops": "5.0e+11"}))
        m = metric(run(a, b2), "Conv2d/x/fwd/batch:8", "fp32_utilization")
        self.assertEqual(m.verdict, "info")
        self.assertIn("peak", m.note)


class Context(unittest.TestCase):
    def test_device_mismatch_refuses_with_exit_3(self):
        t = TempFiles()
        a = t.write("a.json", doc([row("X/train/batch:1", 10.0)]))
        b = t.write("b.json", doc([row("X/train/batch:1", 10.0)],
                                  context={"device": "NVIDIA H200", "backend": "cuda"}))
        c = run(a, b)
        self.assertEqual(c.exit_code, 3)
        self.assertIn("NOT COMPARABLE", render.text(c))
        c2 = run(a, b, allow_mismatch=True)
        self.assertEqual(c2.exit_code, 0)

    def test_header_lists_what_differs(self):
        t = TempFiles()
        a = t.write("a.json", doc([row("X/train/batch:1", 10.0)]))
        b = t.write("b.json", doc([row("X/train/batch:1", 10.0)],
                                  context={"onednn_version": "3.1", "git_dirty": "true"}))
        c = run(a, b)
        diff = {e["key"] for e in c.context if e["differs"]}
        self.assertEqual(diff, {"onednn_version", "git_dirty"})


class Acknowledged(unittest.TestCase):
    def test_acknowledged_until_it_expires(self):
        t = TempFiles()
        a = t.write("a.json", doc([row("X/train/batch:1", 10.0, peak_memory_bytes=1000.0)]))
        b = t.write("b.json", doc([row("X/train/batch:1", 10.0, peak_memory_bytes=2000.0)]))
        cfgp = t.write("c.toml", '[[acknowledged]]\nbenchmark = "^X/"\n'
                       'metric = "peak_memory_bytes"\nreason = "bigger scratch"\n'
                       'expires = 2027-01-31\n')
        cfg = load_config(cfgp)
        c = run(a, b, cfg, today=datetime.date(2027, 1, 1))
        self.assertEqual(c.exit_code, 0)
        self.assertIn("bigger scratch", render.text(c))
        c = run(a, b, cfg, today=datetime.date(2027, 2, 1))
        self.assertEqual(c.exit_code, 1)
        self.assertIn("expired", render.text(c))

    def test_the_example_config_loads(self):
        cfg = load_config(os.path.join(os.path.dirname(TBD_TRACK), "track", "example.toml"))
        self.assertEqual((len(cfg.rules), len(cfg.acks)), (2, 1))
        self.assertEqual(cfg.settings("Dropout/x/fwd/batch:8", "real_time").threshold, 0.10)
        self.assertEqual(cfg.settings("Conv2d/x/fwd/batch:8", "cpu_time").direction, "info")

    def test_rule_thresholds_and_directions(self):
        t = TempFiles()
        a = t.write("a.json", doc(reps("Gemm/g/fwd/batch:1", [10, 10.1, 10.2, 10.1, 10], "us")))
        b = t.write("b.json", doc(reps("Gemm/g/fwd/batch:1", [10.8, 10.9, 11.0, 10.9, 10.8], "us")))
        self.assertEqual(run(a, b).exit_code, 1)
        cfg = load_config(t.write("c.toml", '[[rule]]\nbenchmark = "^Gemm/"\nthreshold = 0.10\n'))
        self.assertEqual(run(a, b, cfg).exit_code, 0)
        cfg = load_config(t.write("d.toml", '[[rule]]\nmetric = "real_time|cpu_time"\n'
                                  'direction = "info"\n'))
        self.assertEqual(run(a, b, cfg).exit_code, 0)


class RealFiles(unittest.TestCase):
    def test_aggregate_only_file_matches_iteration_rows(self):
        # Google Benchmark's compare.py prints an empty table for this pair.
        c = run(GEMM_CONV, CONV_CL)
        compared = [r for r in c.rows if r.status == "compared"]
        self.assertEqual(len(compared), 8)
        self.assertTrue(all("aggregate-only" in r.source_note for r in compared))
        self.assertEqual(len(c.by_status("added")), 7)
        fam = {f.family: f for f in c.families}
        self.assertEqual(fam["layers"].compared, 8)

    def test_breakdown_diff_ranks_the_layer_that_moved(self):
        path = MODELS
        with open(path) as f:
            d = json.load(f)
        slow = json.loads(json.dumps(d))
        for b in slow["benchmarks"]:
            if b["name"] == "ResNet50/train/batch:4":
                b["real_time"] *= 1.06
        for r in slow["tbd_breakdown"]:
            if r["benchmark"] == "ResNet50/train/batch:4" and r["layer"] == "layer3.0.conv2":
                r["bwd_time_s"] += 0.02
        t = TempFiles()
        c = run(path, t.write("slow.json", slow))
        bd = next(b for b in c.breakdowns if b.benchmark == "ResNet50/train/batch:4")
        self.assertEqual(bd.layers[0].layer, "layer3.0.conv2")
        self.assertAlmostEqual(bd.layers[0].delta_bwd_s, 0.02)
        self.assertAlmostEqual(bd.layers[0].share_of_change, 1.0)
        self.assertIn("layer3.0.conv2", render.text(c))


class PlainGoogleBenchmark(unittest.TestCase):
    def test_plain_files_and_unknown_counters(self):
        t = TempFiles()
        a = t.write("a.json", doc(reps("BM_Sort/1024", [10, 10.2, 10.1, 9.9, 10.0], "ns",
                                       bytes_per_second=1e9, widgets=3.0), tbd=False))
        b = t.write("b.json", doc(reps("BM_Sort/1024", [12, 12.2, 12.1, 11.9, 12.0], "ns",
                                       bytes_per_second=0.8e9, widgets=5.0), tbd=False))
        c = run(a, b)
        self.assertEqual(c.exit_code, 1)
        self.assertEqual(metric(c, "BM_Sort/1024", "bytes_per_second").verdict, "regression")
        self.assertEqual(metric(c, "BM_Sort/1024", "widgets").verdict, "info")
        self.assertIn("not gated (no direction known): widgets", render.text(c))
        self.assertEqual(c.rows[0].family, "other")


class CommandLine(unittest.TestCase):
    def tbd_track(self, *args):
        return subprocess.run([TBD_TRACK, *args], capture_output=True, text=True)

    def test_exit_codes(self):
        t = TempFiles()
        a = t.write("a.json", doc([row("X/train/batch:1", 10.0)]))
        b = t.write("b.json", doc([row("X/train/batch:1", 20.0)]))
        self.assertEqual(self.tbd_track("compare", a, a).returncode, 0)
        self.assertEqual(self.tbd_track("compare", a, b).returncode, 1)
        r = self.tbd_track("compare", a, os.path.join(t.dir, "missing.json"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing.json", r.stderr)
        self.assertEqual(self.tbd_track("compare", a, t.write("x.json", "{not json")).returncode, 2)
        self.assertEqual(self.tbd_track("compare", a, t.write("y.json", '{"a": 1}')).returncode, 2)
        self.assertEqual(self.tbd_track("compare", a, b, "--bogus").returncode, 2)
        bad = t.write("bad.toml", "[defaults]\nalpha = 7\n")
        r = self.tbd_track("compare", a, b, "--config", bad)
        self.assertEqual(r.returncode, 2)
        self.assertIn("alpha", r.stderr)
        c = t.write("c.json", doc([row("X/train/batch:1", 10.0)], context={"math": "tf32"}))
        self.assertEqual(self.tbd_track("compare", a, c).returncode, 3)
        self.assertEqual(self.tbd_track("compare", a, c, "--allow-mismatch").returncode, 0)

    def test_formats_and_sets(self):
        t = TempFiles()
        files = [t.write(f"r{i}.json", doc(reps("X/train/batch:1", [10 + i * 0.01, 10.02]))) for i in range(8)]
        r = self.tbd_track("compare", "--base", *files[:4], "--new", *files[4:], "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        d = json.loads(r.stdout)
        self.assertIn("process medians (4 vs 4 files)", d["unit_of_analysis"])
        out = os.path.join(t.dir, "cmp.md")
        r = self.tbd_track("compare", files[0], files[1], "--format", "markdown", "-o", out)
        self.assertEqual(r.returncode, 0)
        with open(out) as f:
            self.assertTrue(f.read().startswith("### tbd_track"))


if __name__ == "__main__":
    unittest.main()
