"""The tracker on real tbd_bench output (ctest passes the binary as TBD_BENCH).

- Google Benchmark's own tools/compare.py (Debian libbenchmark-tools) still reads tbd_bench's
  JSON, whose context carries a `tbd_metrics` object and whose top level a `tbd_breakdown`.
- tbd_track compares real files, breakdown included.
- An A/A run of one binary against itself reports no change. (ctest runs this file alone:
  RUN_SERIAL, so no other test shares the cores with one side of the A/A run.)
"""

import json
import os
import subprocess
import tempfile
import unittest

from track_support import TBD_TRACK

BENCH = os.environ.get("TBD_BENCH", "")
COMPARE_PY = "/usr/share/benchmark/compare.py"
FAST = ["--tbd_backend=cpu", "--tbd_test_models", "--tbd_batches=2",
        "--benchmark_filter=^TestConvNet/|^Conv2d/resnet50.layer1.0.conv1/fwd/"]


def bench(out, *extra):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    r = subprocess.run([BENCH, *FAST, f"--benchmark_out={out}", *extra], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0, r.stderr
    return out


@unittest.skipUnless(BENCH and os.access(BENCH, os.X_OK), "TBD_BENCH (the tbd_bench binary) "
                     "is not given: ctest sets it")
class RealOutput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        d = tempfile.mkdtemp(prefix="tbd_track_bench.")
        cls.a = bench(os.path.join(d, "a.json"), "--benchmark_repetitions=3",
                      "--benchmark_min_time=0.01", "--tbd_breakdown")
        cls.b = bench(os.path.join(d, "b.json"), "--benchmark_repetitions=3",
                      "--benchmark_min_time=0.01", "--tbd_breakdown")
        cls.agg = bench(os.path.join(d, "agg.json"), "--benchmark_repetitions=3",
                        "--benchmark_min_time=0.01", "--benchmark_report_aggregates_only=true")

    def test_google_benchmarks_compare_py_reads_it(self):
        self.assertTrue(os.path.exists(COMPARE_PY), "Debian's libbenchmark-tools is needed "
                        "(scripts/test.sh installs it)")
        with open(self.a) as f:
            d = json.load(f)
        self.assertIn("tbd_breakdown", d)
        for other in (self.b, self.agg):
            r = subprocess.run(["/usr/bin/python3", COMPARE_PY, "--no-color", "benchmarks",
                                self.a, other], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("Traceback", r.stderr)
            self.assertIn("Comparing", r.stdout)
        r = subprocess.run(["/usr/bin/python3", COMPARE_PY, "--no-color", "benchmarks", self.a,
                            self.b], capture_output=True, text=True)
        self.assertIn("TestConvNet/train/batch:2", r.stdout)
        self.assertIn("Conv2d/resnet50.layer1.0.conv1/fwd/batch:2", r.stdout)

    def test_tbd_track_compares_real_files(self):
        r = subprocess.run([TBD_TRACK, "compare", self.a, self.b, "--format", "json"],
                           capture_output=True, text=True)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        d = json.loads(r.stdout)
        names = {row["name"]: row for row in d["rows"]}
        self.assertEqual(names["TestConvNet/train/batch:2"]["status"], "compared")
        metrics = {m["metric"]: m for m in names["TestConvNet/train/batch:2"]["metrics"]}
        for m in ("real_time", "items_per_second", "flop", "peak_memory_bytes", "mem_weights"):
            self.assertIn(m, metrics)
        self.assertEqual(metrics["flop"]["verdict"], "same")
        # Memory is deterministic: two processes of the same binary agree to the byte.
        for m, v in metrics.items():
            if v["exact"]:
                self.assertEqual(v["verdict"], "same", m)
        self.assertTrue(d["breakdowns"])
        self.assertEqual(d["breakdowns"][0]["benchmark"], "TestConvNet/train/batch:2")
        r = subprocess.run([TBD_TRACK, "compare", self.a, self.agg], capture_output=True,
                           text=True)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        self.assertIn("aggregate-only input", r.stdout)

    def test_a_a_run_reports_no_change(self):
        # Threshold 10 %: this shared 2-core machine drifts by up to 8 % over minutes; the
        # default 5 % is what docs/tracking.md's A/A example shows on a quiet machine.
        r = subprocess.run([TBD_TRACK, "run", BENCH, BENCH, "--rounds", "4", "--repetitions",
                            "2", "--order", "abba", "--threshold", "0.10",
                            "--work", tempfile.mkdtemp(prefix="tbd_track_aa."), "--",
                            *FAST, "--benchmark_min_time=0.02"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("verdict: OK", r.stdout)
        self.assertIn("process medians (4 vs 4 files)", r.stdout)


if __name__ == "__main__":
    unittest.main()
