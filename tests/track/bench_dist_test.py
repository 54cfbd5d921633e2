"""tbd_bench --tbd_dist=mpi end to end, under mpiexec at two ranks (ctest passes the tests'
binary as TBD_BENCH; skipped without Open MPI's mpiexec).

What a user of the data-parallel rows reads, checked on the tiny test model:
- `<Model>/train/batch:B/ranks:2` and its `ranks:1` baseline, with the counters the README
  lists; global samples/s; AllReduce rows for the sizes asked, with nccl-tests' algbw and busbw
  and no wrong element;
- only rank 0 writes: one JSON, one trace, nothing else in the folder;
- the context's dist keys, the step profiles (`tbd_dist_steps`) with each gradient's ready time
  inside backward, and a Chrome trace with both ranks;
- a launch under mpiexec without --tbd_dist is refused with a message naming the flag;
- ranks started with different flags or filters stop before the first row, naming the
  difference, and --benchmark_list_tests lists once.
"""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

BENCH = os.environ.get("TBD_BENCH", "")
MPIEXEC = shutil.which("mpiexec")
SIZES = (8, 4096, 1 << 20)
COUNTERS = ("ranks", "buckets", "grad_bytes", "wire_bytes_per_rank", "forward_compute_s",
            "backward_compute_s", "backward_comm_s", "backward_compute_comm_overlap_s",
            "comm_s", "comm_exposed_s", "comm_hidden_s", "overlap_fraction",
            "weak_scaling_efficiency", "shared_cores")


def mpiexec(args, cwd, timeout=300):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1")
    if os.geteuid() == 0:  # Open MPI refuses root without both
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run([MPIEXEC, "-n", "2", "--oversubscribe", BENCH, "--tbd_backend=cpu",
                           "--tbd_test_models", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


@unittest.skipUnless(BENCH and os.access(BENCH, os.X_OK), "TBD_BENCH (the tbd_bench binary) "
                     "is not given: ctest sets it")
@unittest.skipUnless(MPIEXEC, "no mpiexec (Debian: openmpi-bin; scripts/setup.sh installs it)")
class TwoRanks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tbd_dist_bench.")
        r = mpiexec(["--tbd_dist=mpi", "--tbd_batches=2",
                     "--benchmark_filter=^TestConvNet/|^AllReduce/",
                     "--tbd_allreduce_sizes=" + ",".join(map(str, SIZES)),
                     "--benchmark_min_time=0.01", "--benchmark_out=run.json",
                     "--tbd_dist_trace=trace.json"], cls.dir)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        cls.stdout = r.stdout
        with open(os.path.join(cls.dir, "run.json")) as f:
            cls.doc = json.load(f)
        with open(os.path.join(cls.dir, "trace.json")) as f:
            cls.trace = json.load(f)
        cls.rows = {b["name"]: b for b in cls.doc["benchmarks"]}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_only_rank_zero_writes(self):
        self.assertEqual(sorted(os.listdir(self.dir)), ["run.json", "trace.json"])
        self.assertEqual(self.stdout.count("TestConvNet/train/batch:2/ranks:2"), 1)

    def test_model_rows_and_their_counters(self):
        one = self.rows["TestConvNet/train/batch:2/ranks:1/manual_time"]
        two = self.rows["TestConvNet/train/batch:2/ranks:2/manual_time"]
        for row, p in ((one, 1), (two, 2)):
            self.assertNotIn("error_occurred", row)
            self.assertEqual(row["ranks"], p)
            # Global samples/s: P ranks x batch 2 per step of real_time (ms).
            self.assertAlmostEqual(row["items_per_second"] * row["real_time"] / 1e3, 2 * p,
                                   delta=0.01 * 2 * p)
        for c in COUNTERS:
            self.assertIn(c, two, c)
        self.assertGreater(two["grad_bytes"], 0)
        self.assertEqual(two["wire_bytes_per_rank"], two["grad_bytes"])  # 2 (P-1)/P = 1
        # Hidden = comm - exposed, 0 where the step waited longer than the all-reduces ran
        # (their thread waiting to be scheduled on a busy machine).
        self.assertAlmostEqual(two["comm_hidden_s"], max(0.0, two["comm_s"] - two["comm_exposed_s"]),
                               delta=1e-9 + 1e-6 * two["comm_s"])
        self.assertGreaterEqual(two["overlap_fraction"], 0)
        self.assertLessEqual(two["overlap_fraction"], 1)
        self.assertAlmostEqual(two["weak_scaling_efficiency"],
                               one["real_time"] / two["real_time"], delta=1e-6)

    def test_allreduce_rows(self):
        for n in SIZES:
            row = self.rows[f"AllReduce/mpi/bytes:{n}/ranks:2/manual_time"]
            self.assertNotIn("error_occurred", row)
            self.assertEqual(row["wrong"], 0)
            seconds = row["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3}[row["time_unit"]]
            self.assertAlmostEqual(row["algbw"] * seconds / n, 1, delta=1e-3)
            self.assertAlmostEqual(row["busbw"], row["algbw"], delta=1e-6 * row["algbw"])

    def test_context_says_how_it_ran(self):
        ctx = self.doc["context"]
        self.assertEqual(ctx["dist_backend"], "mpi")
        self.assertEqual(ctx["dist_ranks"], "2")
        self.assertIn("--tbd_dist=mpi", ctx["dist_launch"])
        self.assertIn("buckets (MiB, launch order)", ctx["dist_plan_ResNet50"])
        self.assertIn("BatchNorm buffers", ctx["dist_plan_ResNet50"])

    def test_step_profiles_have_ready_times_inside_backward(self):
        steps = {s["name"]: s for s in self.doc["tbd_dist_steps"]}
        self.assertEqual(sorted(steps), ["TestConvNet/train/batch:2/ranks:1",
                                         "TestConvNet/train/batch:2/ranks:2"])
        for s in steps.values():
            self.assertTrue(s["grads"])
            end = s["forward_s"] + s["backward_s"] + 1e-6
            for g in s["grads"]:
                self.assertGreater(g["ready_s"], s["forward_s"] - 1e-6, g)
                self.assertLessEqual(g["ready_s"], end, g)

    def test_trace_has_both_ranks(self):
        self.assertEqual({e["pid"] for e in self.trace["traceEvents"]}, {0, 1})


@unittest.skipUnless(BENCH and os.access(BENCH, os.X_OK), "TBD_BENCH is not given")
@unittest.skipUnless(MPIEXEC, "no mpiexec")
class WithoutTheFlag(unittest.TestCase):
    def test_mpiexec_without_tbd_dist_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            r = mpiexec(["--benchmark_filter=^TestConvNet/", "--benchmark_out=run.json"], d)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("--tbd_dist", r.stderr)
            self.assertEqual(os.listdir(d), [])


def mpiexec_each(rank_args, cwd, timeout=120):
    """One process per entry of rank_args (mpiexec's colon syntax), each with its own flags."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [MPIEXEC, "--oversubscribe"]
    for i, args in enumerate(rank_args):
        if i:
            cmd.append(":")
        cmd += ["-n", "1", BENCH, "--tbd_backend=cpu", "--tbd_test_models", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout)


@unittest.skipUnless(BENCH and os.access(BENCH, os.X_OK), "TBD_BENCH is not given")
@unittest.skipUnless(MPIEXEC, "no mpiexec")
class RanksMustAgree(unittest.TestCase):
    """A rank started with other flags, or selecting other rows, stops every rank before the
    first row (exit 2, the difference named) instead of mislabelling rows or hanging."""
    BASE = ["--tbd_dist=mpi", "--benchmark_filter=^TestConvNet/", "--benchmark_min_time=0.01"]

    def test_a_flag_on_one_rank(self):
        with tempfile.TemporaryDirectory() as d:
            r = mpiexec_each([self.BASE + ["--benchmark_out=run.json"],
                              self.BASE + ["--tbd_batches=2"]], d)
            self.assertEqual(r.returncode, 2, r.stderr[-2000:])
            self.assertIn("rank 1 of 2", r.stderr)
            self.assertIn("--tbd_batches=2", r.stderr)
            self.assertIn("nothing ran", r.stderr)
            self.assertEqual(os.listdir(d), [])  # no file, no temporary

    def test_another_filter_on_one_rank_does_not_hang(self):
        with tempfile.TemporaryDirectory() as d:
            other = [a for a in self.BASE if not a.startswith("--benchmark_filter")]
            r = mpiexec_each([self.BASE, other + ["--benchmark_filter=^TestConvNet/.*ranks:2"]],
                             d, timeout=120)
            self.assertEqual(r.returncode, 2, r.stderr[-2000:])
            self.assertIn("--benchmark_filter", r.stderr)

    def test_the_list_of_rows_is_printed_once(self):
        with tempfile.TemporaryDirectory() as d:
            r = mpiexec_each([self.BASE + ["--benchmark_list_tests"]] * 2, d)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            names = [l for l in r.stdout.splitlines() if l.startswith("TestConvNet/")]
            self.assertTrue(names, r.stdout)
            self.assertEqual(len(names), len(set(names)), r.stdout)


if __name__ == "__main__":
    unittest.main()
