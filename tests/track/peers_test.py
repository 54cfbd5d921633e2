"""The PyTorch peers (tools/peers) and the frameworks side by side (tbd_track peer, compare of a
tbd file against a peer's).

Without torch: the registry, the peers' row names (tbd's grammar), the tbd_bench flags a row
maps to, peers.run's listing and its refusals, and the side-by-side table from committed
files of a real run (tests/track/data: A3C in tbd, PyTorch 2.15 eager and compile), read by
tbd_track and by Google Benchmark's compare.py. With torch (TBD_PEER_PYTHON, else the peer's
default virtual environment under ~/.cache/tbd-peers, else a python3 that imports torch): every
peer's full and tiny configurations have tbd's parameter counts (as tbd_model_params prints them
from tbd's own graphs: ctest passes it as TBD_MODEL_PARAMS), and a peer run writes rows tbd_track
reads. Those skip, saying so, where no torch is found (CI's clean root has none).
"""

import ast
import glob
import json
import os
import subprocess
import unittest

import track_support as ts
from track import frameworks as fw
from track import peer
from track.gbjson import load_run
from track.names import parse

PEERS = os.path.join(ts.TOOLS, "peers")
DATA = os.path.join(ts.ROOT, "tests", "track", "data")
TBD_A3C = os.path.join(DATA, "tbd-a3c.json")
EAGER_A3C = os.path.join(DATA, "peer-eager-a3c.json")
COMPILE_A3C = os.path.join(DATA, "peer-compile-a3c.json")
COMPARE_PY = "/usr/share/benchmark/compare.py"
# tbd's parameter counts as the C++ model tests assert them (tests/models/*_test.cpp).
MODEL_PARAMS = os.environ.get("TBD_MODEL_PARAMS", "")
TBD_PARAMS = {"ResNet50": 25_557_032, "InceptionV3": 27_161_264, "Transformer": 60_524_544,
              "Seq2Seq": 27_726_366, "DeepSpeech2": 255_357_853,
              "WGAN": 8_540_483 + 7_491_841, "A3C": 1_005_109, "FasterRCNN": 47_454_565,
              "GPT2": 124_475_904, "Llama": 1_498_482_688}


def module_constants(path):
    """The module's top-level NAME = literal assignments, read without importing it (no torch)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                if isinstance(node.value, ast.BinOp) or isinstance(node.value, ast.Name):
                    out[node.targets[0].id] = node.value
    return out


def peer_python():
    cands = [os.environ.get("TBD_PEER_PYTHON"),
             os.path.join(peer.cache_root(), f"torch-{peer.DEFAULT_TORCH}", "bin", "python"),
             "/usr/bin/python3"]
    for c in cands:
        if c and os.access(c, os.X_OK):
            r = subprocess.run([c, "-c", "import torch, torchvision"], capture_output=True)
            if r.returncode == 0:
                return c
    return None


def tbd_model_params():
    """{model: {"full": n, "tiny": n}} from tbd's own graphs (tests/models/model_params_main.cpp),
    or None where the binary is not given."""
    if not (MODEL_PARAMS and os.access(MODEL_PARAMS, os.X_OK)):
        return None
    r = subprocess.run([MODEL_PARAMS], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError(f"{MODEL_PARAMS} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def peers_run(*args, python="/usr/bin/python3"):
    return subprocess.run([python, "-m", "peers.run", *args], cwd=ts.TOOLS,
                          capture_output=True, text=True, timeout=600)


class Registry(unittest.TestCase):
    def test_every_model_has_a_module_with_its_model_and_count(self):
        from peers import MODULES
        self.assertEqual(set(MODULES), set(TBD_PARAMS))
        for model, mod in MODULES.items():
            path = os.path.join(PEERS, mod + ".py")
            self.assertTrue(os.path.exists(path), path)
            consts = module_constants(path)
            self.assertEqual(consts.get("MODEL"), model, path)
            with open(path, encoding="utf-8") as f:
                src = f.read()
            self.assertIn("def setup(", src, path)
            self.assertIn("Deviations from tbd", src.split('"""')[1], path)  # the header says
            if isinstance(consts.get("PARAMS"), int):
                self.assertEqual(consts["PARAMS"], TBD_PARAMS[model], path)

    def test_default_rows_are_tbd_names_of_known_models(self):
        from peers import MODULES
        from peers.run import DEFAULT_ROWS
        self.assertEqual({parse(r).kind for r in DEFAULT_ROWS}, set(MODULES))
        for r in DEFAULT_ROWS:
            n = parse(r)
            self.assertIsNotNone(n, r)
            self.assertEqual((n.family, n.str()), ("model", r))

    def test_a_row_maps_to_the_tbd_bench_flags_that_make_it(self):
        self.assertEqual(peer.tbd_row_args("Transformer/train/batch:8/len:32"),
                         [r"--benchmark_filter=^Transformer/train/batch:8/len:32$",
                          "--tbd_seq_len=32"])
        self.assertEqual(peer.tbd_row_args("DeepSpeech2/train/batch:2/frames:100"),
                         [r"--benchmark_filter=^DeepSpeech2/train/batch:2/frames:100$",
                          "--tbd_model_args=frames:100"])
        self.assertEqual(peer.tbd_row_args("FasterRCNN/train/batch:1/height:600/width:800")[1],
                         "--tbd_model_args=height:600,width:800")

    def test_schedule_alternates_and_rotates(self):
        plan = peer.schedule(["A", "B"], ["tbd", "eager", "compile"], 3)
        self.assertEqual(len(plan), 18)
        self.assertEqual([s for r, row, s in plan if r == 1 and row == "A"],
                         ["tbd", "eager", "compile"])
        self.assertEqual([s for r, row, s in plan if r == 2 and row == "A"],
                         ["eager", "compile", "tbd"])

    def test_peer_command_refuses_bad_input(self):
        for args, says in ((["--rows", "Nope/train/batch:1"], "no PyTorch peer for 'Nope'"),
                           (["--rows", "Conv2d/x.y/fwd/batch:1"], "not a model row"),
                           (["--benchmark_filter", "("], "is not a regex"),
                           (["--benchmark_filter", "^Nothing"], "no row selected"),
                           (["--modes", "jit"], "--modes=jit"),
                           (["--torch", "2.x"], "--torch=2.x"),
                           (["--torch", "2.1.0"], "is not pinned"),
                           (["--tbd", "/nonexistent/tbd_bench"], "is not an executable"),
                           (["--breakdown"], "exactly one row"),
                           (["--breakdown", "--no-tbd", "--rows", "A3C/train/batch:5/actors:1"],
                            "drop --no-tbd")):
            r = subprocess.run([ts.TBD_TRACK, "peer", *args], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(says, r.stderr, args)

    def test_dry_run_lists_the_processes(self):
        r = subprocess.run([ts.TBD_TRACK, "peer", "--no-tbd", "--rounds", "2", "--dry-run",
                            "--benchmark_filter", "^(A3C|ResNet50)/"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 2 * 2 * 2, lines)  # rounds x rows x (eager, compile)
        self.assertIn("round 1: eager: ResNet50/train/batch:4", lines)


@unittest.skipUnless(MODEL_PARAMS and os.access(MODEL_PARAMS, os.X_OK),
                     "TBD_MODEL_PARAMS (the tbd_model_params binary) is not given; ctest gives it")
class TbdCounts(unittest.TestCase):
    """tbd's own graphs, counted by tbd_model_params: the counts the peers are held to."""

    def test_every_model_full_and_tiny(self):
        counts = tbd_model_params()
        self.assertEqual(set(counts), set(TBD_PARAMS))
        for model, c in counts.items():
            self.assertEqual(c["full"], TBD_PARAMS[model], model)
            self.assertIsInstance(c["tiny"], int, model)
            self.assertGreater(c["tiny"], 0, model)
            self.assertLess(c["tiny"], c["full"] // 10, model)  # tiny: small enough for a test


class RunnerWithoutTorch(unittest.TestCase):
    def test_lists_rows_by_filter(self):
        r = peers_run("--benchmark_list_tests", "--benchmark_filter=^(Seq2Seq|A3C)/")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["Seq2Seq/train/batch:16/len:30",
                                            "A3C/train/batch:5/actors:1"])

    def test_refuses_bad_arguments_by_name(self):
        for args, says in ((["--benchmark_filter=("], "is not a regex"),
                           (["--benchmark_filter=^Nope"], "no row selected"),
                           (["--benchmark_repetitions=0"], "--benchmark_repetitions=0"),
                           (["--threads=0"], "--threads=0"),
                           (["--mode=jit"], "invalid choice")):
            r = peers_run("--benchmark_list_tests", *args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(says, r.stderr, args)


class SideBySide(unittest.TestCase):
    """A real run's files (A3C, one round): tbd, PyTorch 2.15 eager and compile."""

    def test_files_name_the_framework_and_carry_tbds_names_and_counters(self):
        for path, mode in ((EAGER_A3C, "eager"), (COMPILE_A3C, "compile")):
            run = load_run(path)
            self.assertEqual(fw.framework_of(run), f"PyTorch 2.15.0 {mode}")
            for key in ("framework_version", "threads", "blas", "onednn_version", "torch_config",
                        "denormals", "float32_matmul_precision", "peak_memory_method"):
                self.assertIn(key, run.context, (path, key))
            b = run.benches["A3C/train/batch:5/actors:1"]
            self.assertTrue(b.ok)
            for m in ("items_per_second", "frames_per_second", "peak_memory_bytes", "params"):
                self.assertIn(m, b.samples, m)
            self.assertEqual(b.samples["params"][0], TBD_PARAMS["A3C"])
        self.assertEqual(fw.framework_of(load_run(TBD_A3C)), "tbd")

    def test_compare_against_a_peer_is_the_table_not_a_gate(self):
        r = subprocess.run([ts.TBD_TRACK, "compare", TBD_A3C, EAGER_A3C], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Frameworks side by side", r.stdout)
        self.assertIn("tbd/eager", r.stdout)
        r = subprocess.run([ts.TBD_TRACK, "compare", "--base", TBD_A3C, "--new", EAGER_A3C,
                            COMPILE_A3C, "--format", "json"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        d = json.loads(r.stdout)
        self.assertEqual(d["sides"], ["tbd", "PyTorch 2.15.0 eager", "PyTorch 2.15.0 compile"])
        row = d["rows"][0]
        tbd = row["sides"]["tbd"]["items_per_second"]["median"]
        eager = row["sides"]["PyTorch 2.15.0 eager"]["items_per_second"]["median"]
        ratio = row["ratios"]["PyTorch 2.15.0 eager"]["items_per_second"]
        self.assertAlmostEqual(ratio["ratio"], tbd / eager)
        lo, hi = ratio["ci"]
        self.assertLessEqual(lo, ratio["ratio"])
        self.assertGreaterEqual(hi, ratio["ratio"])
        self.assertIn("peak_memory_bytes", row["ratios"]["PyTorch 2.15.0 compile"])

    def test_an_error_row_shows_as_error_with_its_reason(self):
        t = ts.TempFiles()
        with open(COMPILE_A3C, encoding="utf-8") as f:
            d = json.load(f)
        name = d["benchmarks"][0]["name"]
        d["benchmarks"] = [ts.error_row(name, "compile: BackendCompilerFailed: no double "
                                        "backward")]
        bad = t.write("compile.json", d)
        r = subprocess.run([ts.TBD_TRACK, "compare", TBD_A3C, bad], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("error", r.stdout)
        self.assertIn("no double backward", r.stdout)

    def test_two_tbd_files_still_gate(self):
        r = subprocess.run([ts.TBD_TRACK, "compare", TBD_A3C, TBD_A3C], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("Frameworks side by side", r.stdout)

    def test_the_report_has_a_frameworks_section_and_keeps_peers_out_of_tbds(self):
        t = ts.TempFiles()
        out = os.path.join(t.dir, "report.html")
        r = subprocess.run([ts.TBD_TRACK, "report", "--runs", TBD_A3C, EAGER_A3C, COMPILE_A3C,
                            "-o", out], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, encoding="utf-8") as f:
            html = f.read()
        sec = html[html.index('<section id="frameworks"'):]
        sec = sec[:sec.index("</section>")]
        self.assertIn('data-present="1"', sec)
        self.assertIn("tbd / eager = ", sec)
        self.assertIn("tbd / compile = ", sec)
        self.assertIn('class="whisker"', sec)
        # the throughput section plots tbd's run alone: one series, not three
        thr = html[html.index('<section id="throughput"'):]
        thr = thr[:thr.index("</section>")]
        self.assertNotIn("PyTorch", thr)
        # the same section from tbd_track peer's summary, and from --compare tbd peer
        summary = t.write("frameworks.json", json.loads(subprocess.run(
            [ts.TBD_TRACK, "compare", "--base", TBD_A3C, "--new", EAGER_A3C, COMPILE_A3C,
             "--format", "json"], capture_output=True, text=True, check=True).stdout))
        for args in (["--frameworks", summary], ["--compare", TBD_A3C, EAGER_A3C]):
            r = subprocess.run([ts.TBD_TRACK, "report", *args, "-o", out], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
            with open(out, encoding="utf-8") as f:
                self.assertIn("tbd / eager = ", f.read(), args)
        r = subprocess.run([ts.TBD_TRACK, "report", "--frameworks", TBD_A3C, "-o", out],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a frameworks summary", r.stderr)

    def test_google_benchmarks_compare_py_reads_a_peer_file(self):
        if not os.path.exists(COMPARE_PY):
            self.skipTest("Debian's libbenchmark-tools is absent (scripts/test.sh installs it)")
        r = subprocess.run(["/usr/bin/python3", COMPARE_PY, "--no-color", "benchmarks",
                            TBD_A3C, EAGER_A3C], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("A3C/train/batch:5/actors:1", r.stdout)


class Breakdown(unittest.TestCase):
    """tbd's --tbd_breakdown rows against a peer's profile, aligned (no torch needed)."""

    TBD = [{"layer": "conv1", "kind": "Conv2d", "fwd_time_s": 0.010, "bwd_time_s": 0.020},
           {"layer": "conv1.relu", "kind": "Activation", "fwd_time_s": 0.001, "bwd_time_s": 0.001},
           {"layer": "block.add", "kind": "Add", "fwd_time_s": 0.002, "bwd_time_s": 0.002},
           {"layer": "block.relu", "kind": "Activation", "fwd_time_s": 0.001, "bwd_time_s": 0.001},
           {"layer": "(optimizer)", "kind": "-", "fwd_time_s": 0.0, "bwd_time_s": 0.004}]
    PEER = {"benchmark": "Net/train/batch:1", "step_s": 0.05, "profiled_step_s": 0.06,
            "rows": [{"layer": "conv1", "kind": "Conv2d", "fwd_time_s": 0.012,
                      "bwd_time_s": 0.030},
                     {"layer": "relu", "kind": "Activation", "fwd_time_s": 0.001,
                      "bwd_time_s": 0.001},
                     {"layer": "block.(add_)", "kind": "Add", "fwd_time_s": 0.001,
                      "bwd_time_s": 0.0},
                     {"layer": "relu#2", "kind": "Activation", "fwd_time_s": 0.002,
                      "bwd_time_s": 0.001},
                     {"layer": "(accumulate_grad)", "kind": "-", "fwd_time_s": 0.0,
                      "bwd_time_s": 0.003},
                     {"layer": "(optimizer)", "kind": "-", "fwd_time_s": 0.0,
                      "bwd_time_s": 0.008}]}

    def test_pairs_by_name_then_by_order_within_kind(self):
        pairs = fw.align_layers(self.TBD, self.PEER["rows"])
        got = {(t and t["layer"], p and p["layer"]): how for t, p, how in pairs}
        self.assertEqual(got[("conv1", "conv1")], "name")
        self.assertEqual(got[("(optimizer)", "(optimizer)")], "name")
        self.assertEqual(got[("conv1.relu", "relu")], "order")
        self.assertEqual(got[("block.relu", "relu#2")], "order")
        self.assertEqual(got[("block.add", "block.(add_)")], "order")
        self.assertEqual(got[(None, "(accumulate_grad)")], "unpaired")
        self.assertEqual(len(pairs), 6)

    def test_kinds_sum_each_side_and_the_text_names_where_the_peer_wins(self):
        b = fw.breakdown_summary(self.TBD, 0.045, self.PEER)
        kinds = {k["kind"]: k for k in b["kinds"]}
        self.assertAlmostEqual(kinds["Activation"]["tbd_fwd_time_s"], 0.002)
        self.assertAlmostEqual(kinds["Activation"]["peer_fwd_time_s"], 0.003)
        self.assertEqual(kinds["Activation"]["peer_layers"], 2)
        self.assertNotIn("tbd_layers", kinds["(accumulate_grad)"])
        self.assertAlmostEqual(b["tbd_sum_s"], 0.042)
        text = fw.breakdown_text(b)
        wins = text[text.index("where the peer is faster"):text.index("heaviest")]
        self.assertIn("block.add", wins)       # 4 ms in tbd, 1 ms in the peer
        self.assertNotIn("conv1 ", wins)       # 30 ms in tbd, 42 ms in the peer
        self.assertIn("2 by name", text)
        self.assertIn("1.40x", text)           # conv1: 42 / 30


class WithTorch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.py = peer_python()
        if not cls.py:
            raise unittest.SkipTest("no PyTorch here (no TBD_PEER_PYTHON, no virtual "
                                    "environment from 'tbd_track peer', no Debian python3-torch)")

    def json_of(self, code):
        """What `code`, run by the peer's python in tools/, prints as JSON on its last line."""
        r = subprocess.run([self.py, "-c", code], cwd=ts.TOOLS, capture_output=True, text=True,
                           timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        return json.loads(r.stdout.strip().splitlines()[-1])

    def test_full_and_tiny_configurations_have_tbds_parameter_counts(self):
        code = ("import json, peers\nout = {}\n"
                "for m in peers.MODULES:\n"
                "    mod = peers.module(m)\n"
                "    kw = {'params': {'height': 160, 'width': 224}} if m == 'FasterRCNN' else {}\n"
                "    out[m] = {'full': mod.setup(2, **kw)['params'], 'declared': mod.PARAMS,\n"
                "              'tiny': mod.setup(2, tiny=True)['params']}\n"
                "print(json.dumps(out))\n")
        counts = self.json_of(code)
        self.assertEqual(set(counts), set(TBD_PARAMS))
        tbd = tbd_model_params()
        for model, c in counts.items():
            self.assertEqual(c["full"], TBD_PARAMS[model], model)
            self.assertEqual(c["declared"], TBD_PARAMS[model], model)
            if tbd is not None:
                self.assertEqual(c["full"], tbd[model]["full"], model)
                self.assertEqual(c["tiny"], tbd[model]["tiny"], f"{model}, tiny")
        if tbd is None:
            self.skipTest("full counts checked; the tiny ones need TBD_MODEL_PARAMS (ctest "
                          "gives it)")

    def test_the_written_out_networks_have_torchvisions_counts(self):
        """The tiny ResNet-50 and Inception-v3 are narrowed written-out networks: at full width
        they must be torchvision's."""
        code = ("import json\nfrom peers import resnet50, inception_v3\n"
                "from peers.common import count_params\n"
                "import torchvision\n"
                "print(json.dumps([count_params([resnet50.written_resnet()]),\n"
                "    count_params([inception_v3.InceptionV3(1000, True, 1)]),\n"
                "    count_params([torchvision.models.inception_v3(weights=None, init_weights=False)])]))\n")
        resnet, inception, tv_inception = self.json_of(code)
        self.assertEqual(resnet, TBD_PARAMS["ResNet50"])
        self.assertEqual(inception, tv_inception)
        self.assertEqual(inception, TBD_PARAMS["InceptionV3"])

    def test_a_profile_puts_every_layer_forward_and_backward(self):
        t = ts.TempFiles()
        out = os.path.join(t.dir, "profile.json")
        r = peers_run("--rows", "Seq2Seq/train/batch:2/len:6", "--tiny", "--threads=1",
                      "--warmup=1", "--benchmark_repetitions=2", f"--profile={out}",
                      python=self.py)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        with open(out, encoding="utf-8") as f:
            d = json.load(f)
        rows = {x["layer"]: x for x in d["rows"]}
        for layer, kind in (("enc0", "LSTM"), ("dec0", "LSTMCell"), ("cls", "Linear"),
                            ("src_emb", "Embedding")):
            self.assertEqual(rows[layer]["kind"], kind, layer)
            self.assertGreater(rows[layer]["fwd_time_s"], 0, layer)
        for layer in ("enc0", "dec0", "cls"):
            self.assertGreater(rows[layer]["bwd_time_s"], 0, layer)
        self.assertGreater(rows["(optimizer)"]["bwd_time_s"], 0)
        total = sum(x["fwd_time_s"] + x["bwd_time_s"] for x in d["rows"])
        self.assertLess(total, d["profiled_step_s"] * 1.02)
        # The layers' share of a 7 ms step: most of it alone, 0.49 measured under ctest -j2
        # (the Python between the layers takes the rest).
        self.assertGreater(total, d["profiled_step_s"] * 0.4)
        r = peers_run("--rows", "Seq2Seq/train/batch:2/len:6", "--mode", "compile",
                      f"--profile={out}", python=self.py)
        self.assertEqual(r.returncode, 2)
        self.assertIn("eager mode", r.stderr)

    def test_a_run_writes_rows_tbd_track_reads(self):
        t = ts.TempFiles()
        out = os.path.join(t.dir, "peer.json")
        r = peers_run("--rows", "A3C/train/batch:5/actors:1", "Seq2Seq/train/batch:2/len:6",
                      "Nope/train/batch:1", "--tiny", "--benchmark_repetitions=2",
                      "--benchmark_min_time=0", "--warmup=1", "--threads=1",
                      f"--benchmark_out={out}", python=self.py)
        self.assertEqual(r.returncode, 1, r.stderr)  # the unknown model is an error row
        run = load_run(out)
        self.assertEqual(list(run.benches), ["A3C/train/batch:5/actors:1",
                                             "Seq2Seq/train/batch:2/len:6", "Nope/train/batch:1"])
        s2s = run.benches["Seq2Seq/train/batch:2/len:6"]
        self.assertEqual(s2s.n(), 2)
        self.assertIn("tokens_per_second", s2s.samples)
        self.assertIn("no PyTorch peer for the model 'Nope'", run.benches["Nope/train/batch:1"]
                      .errors[0])
        self.assertFalse(glob.glob(os.path.join(t.dir, "*.tmp")))


if __name__ == "__main__":
    unittest.main()
