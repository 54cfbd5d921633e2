"""scripts/soak.py's checks, against a stand-in for tbd_bench (a few lines of Python that write
the JSON and table lines tbd_bench would, with a fault chosen by FAKE_FAULT): a clean soak
passes; an error row, a sanitizer report, a non-zero exit, rows or planned peaks that differ
between runs and a peak resident set that grows from run to run each fail it, named. The real
soak (ASan, every model) takes about 40 minutes and is run by hand (docs/setup.md)."""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOAK = os.path.join(ROOT, "scripts", "soak.py")

# Run k (counted in a file beside it) writes two rows; FAKE_FAULT changes what it does.
FAKE = textwrap.dedent('''\
    #!{python}
    import json, os, sys
    here = os.path.dirname(os.path.abspath(__file__))
    count = os.path.join(here, "count")
    k = int(open(count).read()) + 1 if os.path.exists(count) else 1
    open(count, "w").write(str(k))
    fault = os.environ.get("FAKE_FAULT", "")
    out = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--benchmark_out=")][0]
    rows = [{{"name": "Gemm/square1024/fwd/batch:1", "run_type": "iteration",
              "real_time": 1.0, "peak_memory_bytes": 1024}},
            {{"name": "ResNet50/train/batch:1", "run_type": "iteration", "real_time": 200.0,
              "peak_memory_bytes": 4096 + (k if fault == "peak" else 0)}}]
    if fault == "error":
        rows[1].update(error_occurred=True, error_message="out of memory")
    if fault == "rows" and k == 2:
        rows.pop(0)
    ballast = b"x" * ((150 << 20) * (k - 1) if fault == "grow" else 0)
    for i, r in enumerate(rows):
        print(f"[{{i + 1}}/{{len(rows)}}] {{r['name']}}   1 ms", flush=True)
    if fault == "asan":
        print("==1==ERROR: LeakSanitizer: detected memory leaks", file=sys.stderr)
    json.dump({{"context": {{}}, "benchmarks": rows}}, open(out, "w"))
    sys.exit(3 if fault == "exit" else 0)
''')


class Soak(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tbd-soak-test-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.fake = os.path.join(self.dir, "tbd_bench")
        with open(self.fake, "w") as f:
            f.write(FAKE.format(python=sys.executable))
        os.chmod(self.fake, 0o755)

    def soak(self, fault="", runs=2):
        env = dict(os.environ, FAKE_FAULT=fault)
        r = subprocess.run([sys.executable, SOAK, "--runs", str(runs), "--no-dist",
                            "--asan-bench", self.fake, "--out", os.path.join(self.dir, "out")],
                           env=env, capture_output=True, text=True, timeout=300)
        return r.returncode, r.stdout + r.stderr

    def test_clean_runs_pass(self):
        rc, out = self.soak()
        self.assertEqual(rc, 0, out)
        self.assertIn("# Soak: every check holds", out)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "out", "summary.md")))
        self.assertTrue(os.path.exists(os.path.join(self.dir, "out", "rss-default-2.csv")))

    def test_each_fault_fails_named(self):
        for fault, message in (("error", "error row ResNet50/train/batch:1: out of memory"),
                               ("asan", "ERROR: LeakSanitizer"),
                               ("exit", "default run 1: exit 3"),
                               ("rows", "run 2 lists other rows than run 1"),
                               ("peak", "planned peak_memory_bytes differs from run 1"),
                               ("grow", "memory not flat: run 2's peak RSS")):
            with self.subTest(fault=fault):
                for f in ("count",):
                    p = os.path.join(self.dir, f)
                    if os.path.exists(p):
                        os.remove(p)
                rc, out = self.soak(fault)
                self.assertEqual(rc, 1, out)
                self.assertIn(message, out)

    def test_bad_usage_is_exit_2(self):
        r = subprocess.run([sys.executable, SOAK, "--runs", "0", "--no-dist"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--runs=0", r.stderr)


if __name__ == "__main__":
    unittest.main()
