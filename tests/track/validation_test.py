"""What the tracker refuses: every class of bad input is exit 2 with a message naming the
file, the row and the field (or the flag), never a traceback and never a passing gate; and
what it must still read right (520 and 5000 repetitions a side). The crashes fuzz_readers.py
found are here by name (FuzzFound)."""

import contextlib
import io
import json
import os
import shutil
import subprocess
import unittest

import fake_repo
from track_support import TBD_TRACK, TempFiles, doc, reps, row
from track import names, stats
from track.cli import main
from track.gbjson import load_run

GEMM = "Gemm/square1024/fwd/batch:1"


def track(*args):
    """tbd_track in this process: (exit status, stderr, stdout)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as e:  # argparse's own exit 2
            rc = e.code
    return rc, err.getvalue(), out.getvalue()


class Base(unittest.TestCase):
    def setUp(self):
        self.t = TempFiles()
        self.addCleanup(shutil.rmtree, self.t.dir, True)
        self.a = self.t.write("a.json", doc(reps(GEMM, [10.0, 10.01, 10.02, 9.99, 10.0])))
        # 1.5x slower: a regression whatever the flags say
        self.slow = self.t.write("slow.json", doc(reps(GEMM, [15.0, 15.01, 15.02, 14.99, 15.0])))

    def refused(self, *args, says=()):
        """Runs tbd_track; asserts exit 2, one message line naming what it should, no
        traceback."""
        rc, err, _ = track(*args)
        self.assertEqual(rc, 2, err)
        self.assertNotIn("Traceback", err)
        for s in says:
            self.assertIn(s, err)
        return err

    def bad_file(self, document, *says, name="bad.json"):
        """A file that must be refused on either side of a compare, naming it."""
        p = self.t.write(name, document)
        self.refused("compare", self.a, p, says=(p,) + says)
        self.refused("compare", p, self.a, says=(p,) + says)
        return p


class NumericFlags(Base):
    def test_threshold_nan_no_longer_passes_a_slowdown(self):
        self.assertEqual(track("compare", self.a, self.slow)[0], 1)
        for v in ("nan", "NaN", "inf", "-inf", "-0.1", "x"):
            self.refused("compare", self.a, self.slow, "--threshold", v, says=("--threshold",))

    def test_every_numeric_flag_is_finite_and_in_range(self):
        for flag, v in (("--alpha", "nan"), ("--alpha", "0"), ("--alpha", "1"),
                        ("--alpha", "inf"), ("--top", "-1"), ("--top", "1.5")):
            self.refused("compare", self.a, self.slow, flag, v, says=(flag,))
        for args in (["run", "x", "y", "--rounds", "0"], ["run", "x", "y", "--min-time", "nan"],
                     ["run", "x", "y", "--detect", "0"], ["run", "x", "y", "--repetitions", "-3"],
                     ["bisect", "a", "b", "--bench-filter", "x", "--rounds", "nan"],
                     ["peer", "--timeout", "nan"], ["peer", "--threads", "0"],
                     ["simulate", self.a, "--cpu-share", "2"],
                     ["simulate", self.a, "--bucket-mb", "-inf"],
                     ["simulate", self.a, "--step-s", "0"]):
            flag = next(a for a in args if a.startswith("--"))
            self.refused(*args, says=(flag,))

    def test_config_numbers_are_finite_and_in_range(self):
        for body, field in (("[defaults]\nthreshold = nan\n", "field threshold"),
                            ("[defaults]\nalpha = inf\n", "field alpha"),
                            ("[defaults]\nmemory_tolerance = -1\n", "field memory_tolerance"),
                            ("[[rule]]\nthreshold = nan\n", "rule 1: field threshold"),
                            ("[[rule]]\ntolerance_bytes = inf\n", "rule 1: field tolerance_bytes")):
            cfg = self.t.write("c.toml", body)
            self.refused("compare", self.a, self.slow, "--config", cfg, says=(cfg, field))


class LargeSamples(Base):
    """The exact test's floor 2 / C(n+m, n) overflowed a float from 520 a side (a traceback,
    exit 1); the CI sorted all n*m ratios (seconds and 200 MB at 5000)."""

    def test_520_and_5000_repetitions_a_side(self):
        for n in (520, 5000):
            same = [10.0 + 0.001 * ((i * 7919) % 101) for i in range(n)]
            a = self.t.write(f"a{n}.json", doc(reps(GEMM, same)))
            b = self.t.write(f"b{n}.json", doc(reps(GEMM, same[::-1])))
            c = self.t.write(f"c{n}.json", doc(reps(GEMM, [x * 1.5 for x in same])))
            rc, err, out = track("compare", a, b)
            self.assertEqual(rc, 0, err + out)
            rc, err, out = track("compare", a, c, "--format", "json")
            self.assertEqual(rc, 1, err + out)
            m = json.loads(out)["rows"][0]["metrics"][0]
            self.assertEqual((m["metric"], m["verdict"], m["n_base"]),
                             ("real_time", "regression", n))
            self.assertEqual(m["test"], "Mann-Whitney U, normal approximation")

    def test_floor_and_interval_at_large_n(self):
        self.assertEqual(stats.min_achievable_p(520, 520), 2 / __import__("math").comb(1040, 520))
        self.assertEqual(stats.min_achievable_p(5000, 5000), 0.0)
        self.assertAlmostEqual(stats.min_achievable_p(4, 4), 2 / 70)
        old = [1.0 + 0.001 * i for i in range(1500)]
        new = [1.1 + 0.001 * i for i in range(1400)]
        lo, hi, cov = stats.ratio_ci(old, new)  # bisection: over a million pairs
        saved = stats.PAIRWISE_SORT_LIMIT
        stats.PAIRWISE_SORT_LIMIT = 10 ** 9
        try:
            self.assertEqual((lo, hi, cov), stats.ratio_ci(old, new))  # the sort agrees
        finally:
            stats.PAIRWISE_SORT_LIMIT = saved


class UnreadableFiles(Base):
    def test_binary_file(self):
        p = os.path.join(self.t.dir, "bin.json")
        with open(p, "wb") as f:
            f.write(b'{"context": {}, "benchmarks": [\x00\x01\x02\xff]}')
        self.refused("compare", self.a, p, says=(p, "binary"))

    def test_not_utf8(self):
        p = os.path.join(self.t.dir, "latin1.json")
        with open(p, "wb") as f:
            f.write(json.dumps(doc(reps(GEMM, [10.0]))).replace("Gemm", "G\u00e9mm")
                    .encode("latin-1"))
        self.refused("compare", self.a, p, says=(p, "not UTF-8", "0xe9"))

    def test_not_json_too_deep_too_many_digits(self):
        self.bad_file("{not json", "not JSON")
        self.bad_file('{"benchmarks": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply")
        self.bad_file('{"context": {}, "benchmarks": [{"name": "x", "real_time": 1'
                      + "0" * 5000 + "}]}", "digits")

    def test_config_binary_and_not_utf8(self):
        for data, says in ((b"[defaults]\n\x00", "binary"), (b"# \xff\n", "not UTF-8")):
            p = os.path.join(self.t.dir, "c.toml")
            with open(p, "wb") as f:
                f.write(data)
            self.refused("compare", self.a, self.a, "--config", p, says=(p, says))

    def test_bad_filter_regex(self):
        self.refused("compare", self.a, self.slow, "--filter", "(", says=("--filter", "regex"))
        self.refused("history", "detect", "--filter", "[", says=("--filter",))
        self.refused("simulate", self.a, "--model", "*", says=("--model",))

    def test_filter_matching_nothing_is_not_a_pass(self):
        self.refused("compare", self.a, self.slow, "--filter", "^Nothing$",
                     says=("--filter", "matches no benchmark"))

    def test_unwritable_output(self):
        self.refused("compare", self.a, self.slow, "-o", os.path.join(self.a, "out.md"),
                     says=("--output", "not a folder"))
        self.refused("compare", self.a, self.slow, "-o", self.t.dir, says=("is a folder",))
        self.refused("compare", self.a, self.slow, "--json", os.path.join(self.a, "x.json"),
                     says=("--json",))
        self.refused("report", "--runs", self.a, "-o", os.path.join(self.a, "r.html"),
                     says=("--output",))
        self.refused("history", "add", self.a, "--store", os.path.join(self.a, "store"),
                     says=("--store",))

    @unittest.skipUnless(os.path.isdir("/proc/self"), "needs Linux's /proc")
    def test_output_that_fails_only_when_written(self):
        # /proc passes the early check (a folder, writable for root) and refuses a new folder
        # when the file is written: still exit 2, naming the path.
        err = self.refused("compare", self.a, self.slow, "--format", "json", "-o",
                           "/proc/tbd-track-no-such-dir/out.json")
        self.assertIn("/proc/tbd-track-no-such-dir", err)

    def test_the_script_itself_exits_2_without_a_traceback(self):
        p = self.t.write("empty.json", '{"context": {}, "benchmarks": []}')
        r = subprocess.run([TBD_TRACK, "compare", self.a, p], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr, f"tbd_track: {p}: field benchmarks: no benchmarks (an empty "
                         "list): nothing to compare\n")


class BadContents(Base):
    def test_missing_and_malformed_context(self):
        d = doc(reps(GEMM, [10.0]))
        del d["context"]
        self.bad_file(d, "field context", "no 'context' object")
        for ctx, field in (([], "field context"),
                           ({"git_commit": "../../etc/passwd"}, "field context.git_commit"),
                           ({"git_commit": 12}, "field context.git_commit"),
                           ({"git_dirty": "maybe"}, "field context.git_dirty"),
                           ({"date": 20261203}, "field context.date"),
                           ({"num_cpus": "two"}, "field context.num_cpus"),
                           ({"device": {"x": 1}}, "field context.device"),
                           ({"caches": [{"type": 3}]}, "field context.caches[0]"),
                           ({"tbd_metrics": []}, "field context.tbd_metrics"),
                           ({"tbd_metrics": {"real_time": {"direction": "sideways"}}},
                            "field context.tbd_metrics.real_time.direction"),
                           ({"tbd_metrics": {"peak_memory_bytes": {"direction": "lower",
                                                                   "exact": "false"}}},
                            "field context.tbd_metrics.peak_memory_bytes.exact")):
            d = doc(reps(GEMM, [10.0]))
            d["context"] = ctx if not isinstance(ctx, dict) else dict(d["context"], **ctx)
            self.bad_file(d, field)

    def test_nan_negative_null_missing_times(self):
        for value, says in ((float("nan"), "expected a finite number, got nan"),
                            (float("inf"), "expected a finite number, got inf"),
                            (-3.0, "must be positive"), (0, "must be positive"),
                            (None, "got null"), ("10", "got '10'"), (True, "got True"),
                            (1e305, "out of range")):
            d = doc(reps(GEMM, [10.0, 10.1, 10.2]))
            d["benchmarks"][1]["real_time"] = value
            self.bad_file(d, f"row {GEMM} (benchmarks[1])", "field real_time", says)
        d = doc(reps(GEMM, [10.0]))
        del d["benchmarks"][0]["real_time"]
        self.bad_file(d, "field real_time", "got null")
        d = doc(reps(GEMM, [10.0]))
        d["benchmarks"][0]["cpu_time"] = -1
        self.bad_file(d, "field cpu_time", "must be >= 0")

    def test_nan_or_null_counters_in_measured_rows(self):
        for v in (float("nan"), None, "fast", [1]):
            d = doc(reps(GEMM, [10.0], items_per_second=5.0))
            d["benchmarks"][0]["items_per_second"] = v
            self.bad_file(d, "field items_per_second")

    def test_null_in_a_cv_row_and_zeros_in_an_error_row_are_read(self):
        cv = row(GEMM, 0.01, run_type="aggregate", aggregate_name="cv", peak_memory_bytes=None)
        cv["name"] = GEMM + "_cv"
        err = {"name": "X/train/batch:1", "run_type": "iteration", "real_time": 0,
               "cpu_time": 0, "time_unit": "ms", "error_occurred": True,
               "error_message": "out of memory"}
        p = self.t.write("ok.json", doc(reps(GEMM, [10.0]) + [cv, err]))
        self.assertFalse(load_run(p).benches["X/train/batch:1"].ok)
        self.assertEqual(track("compare", p, p)[0], 0)

    def test_empty_or_missing_benchmarks(self):
        self.bad_file({"context": {}, "benchmarks": []}, "field benchmarks", "no benchmarks")
        self.bad_file({"context": {}, "benchmarks": {}}, "field benchmarks", "expected a list")
        self.bad_file({"context": {}}, "no 'benchmarks' list")

    def test_rows_fields(self):
        for mutate, says in ((lambda r: r.update(name=""), "field name"),
                             (lambda r: r.update(name=7), "field name"),
                             (lambda r: r.pop("name"), "row benchmarks[0]: field name"),
                             (lambda r: r.update(name="A\nB"), "control character"),
                             (lambda r: r.update(run_name=["x"]), "field run_name"),
                             (lambda r: r.update(time_unit="min"), "field time_unit"),
                             (lambda r: r.update(time_unit=["ms"]), "field time_unit"),
                             (lambda r: r.update(run_type="x"), "field run_type"),
                             (lambda r: r.update(error_occurred="false"),
                              "field error_occurred"),
                             (lambda r: r.update(aggregate_name={}), "field aggregate_name")):
            d = doc(reps(GEMM, [10.0]))
            mutate(d["benchmarks"][0])
            self.bad_file(d, says)
        self.bad_file({"context": {}, "benchmarks": [3]}, "row benchmarks[0]",
                      "expected an object")

    def test_breakdown_and_dist_steps(self):
        d = doc(reps(GEMM, [10.0]), breakdown=[{"benchmark": GEMM, "layer": "fc",
                                               "fwd_time_s": "fast"}])
        self.bad_file(d, "field tbd_breakdown[0].fwd_time_s")
        d = doc(reps(GEMM, [10.0]), breakdown=[{"layer": "fc"}])
        self.bad_file(d, "field tbd_breakdown[0].benchmark", "missing")
        # backward_split is true or false, as tbd_bench writes it; anything else is refused.
        good = self.t.write("split.json", doc(reps(GEMM, [10.0]), breakdown=[
            {"benchmark": GEMM, "layer": "fc", "backward_split": True, "fwd_time_s": 1e-3}]))
        self.assertEqual(track("compare", self.a, good)[0], 0)
        d = doc(reps(GEMM, [10.0]), breakdown=[{"benchmark": GEMM, "layer": "fc",
                                               "backward_split": "yes"}])
        self.bad_file(d, "field tbd_breakdown[0].backward_split", "true or false")
        d = doc(reps(GEMM, [10.0]))
        d["tbd_dist_steps"] = [{"name": "X/train/batch:1/ranks:1", "step_s": 1.0,
                                "forward_s": 0.3, "backward_s": 0.5, "optimizer_s": -0.1}]
        self.bad_file(d, "field tbd_dist_steps[0].optimizer_s", "must be >= 0")

    def test_a_bad_run_in_a_folder_is_refused_not_skipped(self):
        folder = os.path.join(self.t.dir, "runs")
        os.makedirs(folder)
        shutil.copy(self.slow, folder)
        with open(os.path.join(folder, "comparison.json"), "w") as f:
            json.dump({"rows": [], "verdict": "OK"}, f)  # not a run: skipped, as before
        rc, err, _ = track("compare", self.a, folder)
        self.assertEqual(rc, 1, err)
        self.assertIn("skipped", err)
        d = doc(reps(GEMM, [10.0]))
        d["benchmarks"][0]["real_time"] = None
        bad = os.path.join(folder, "bad.json")
        with open(bad, "w") as f:
            json.dump(d, f)
        self.refused("compare", self.a, folder, says=(bad, "field real_time"))

    def test_lone_surrogate(self):
        p = self.t.write("s.json", '{"context": {}, "benchmarks": [{"name": "A\\ud800", '
                         '"real_time": 1, "cpu_time": 1}]}')
        self.refused("compare", self.a, p, says=(p, "benchmarks[0].name", "surrogate"))


class Config(Base):
    def test_config_shapes(self):
        for body, says in (("defaults = 1\n", "defaults"),
                           ("rule = [1]\n", "rule 1"),
                           ("acknowledged = 3\n", "acknowledged"),
                           ("[[rule]]\nbenchmark = \"(\"\n", "rule 1: field benchmark"),
                           ("[[rule]]\nmetric = 5\n", "rule 1: field metric"),
                           ("[[acknowledged]]\nreason = 5\n", "acknowledged 1: field reason"),
                           ("[[acknowledged]]\nreason = \"r\"\nexpires = 2027-01-31T00:00:00\n",
                            "acknowledged 1: field expires"),
                           ("[[acknowledged]]\nreason = \"r\"\nexpires = 07:32:00\n",
                            "field expires"),
                           ("x = " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
                           ("defaults = " + "9" * 5001 + "\n", "4300 digits"),
                           ("[defaults\n", "not TOML")):
            p = self.t.write("c.toml", body)
            self.refused("compare", self.a, self.a, "--config", p, says=(p, says))


class Names(unittest.TestCase):
    def test_digits_of_other_scripts_are_not_numbers(self):
        # str.isdigit() is true of '²' (int() refuses it: a ValueError from names.parse) and of
        # Arabic-Indic digits (int() reads them: a name fixtures/names.cpp refuses)
        for name in ("ResNet50/train/batch:²", "ResNet50/train/batch:\u0663",
                     "AllReduce/mpi/bytes:\u0661/ranks:2", "ResNet50\n/train/batch:1"):
            self.assertIsNone(names.parse(name), name)


class HistoryStore(Base):
    def test_commit_and_store_files(self):
        store = os.path.join(self.t.dir, "store")
        self.refused("history", "add", self.a, "--store", store, "--commit", "../../x",
                     says=("--commit", "hex"))
        self.assertEqual(track("history", "add", self.a, "--store", store)[0], 0)
        machine = os.listdir(store)[0]
        repo, shas = fake_repo.make_repo([1.0])
        stored = [f for f in os.listdir(os.path.join(store, machine)) if f != "machine.json"][0]
        override = os.path.join(store, machine, stored[:-5] + ".commit")
        with open(override, "w") as f:
            f.write("not a commit\n")
        self.refused("history", "detect", "--store", store, "--repo", repo,
                     says=(override, "hex"))
        os.unlink(override)
        mpath = os.path.join(store, machine, "machine.json")
        with open(mpath, "w") as f:
            f.write("[1, 2]")
        self.refused("history", "detect", "--store", store, "--repo", repo,
                     says=(mpath, "expected an object"))


class FuzzFound(Base):
    """Crashes fuzz_readers.py found, by cause (75 crash sites in 60 s with --seed 1 on the
    tree before these checks). Those of the classes above are tested there: non-UTF-8 files and
    configs (UnicodeDecodeError in gbjson.load_run, config.load_config, report), JSON nested too
    deeply and integers of 5000 digits (RecursionError, ValueError in json.loads), a name that
    is a number (AttributeError in names.parse), a dict or list as run_name, aggregate_name or
    time_unit (TypeError: unhashable, in load_run, _row_metrics, compare), a cache entry's type
    a number (TypeError in history.fingerprint), a lone surrogate (UnicodeEncodeError when the
    output is written), `defaults`/`rule`/`acknowledged` of the wrong TOML type (AttributeError,
    TypeError in load_config), TOML nested too deeply (RecursionError), a '²' in a name
    (ValueError in names._positive)."""

    def test_integer_beyond_a_float(self):
        # OverflowError (int too large to convert to float) in gbjson._number, in
        # dist_sim.t_allreduce (a gradient's bytes) and in report.format._finite
        d = doc(reps(GEMM, [10.0], widgets=10 ** 400))
        self.bad_file(d, "field widgets", "beyond a float's range")
        c = self.comparison()
        c["rows"][0]["metrics"][0]["base"] = 10 ** 400
        self.report_refuses(c, "field rows[0].metrics[0].base")

    def test_error_message_not_text(self):
        # TypeError (sequence item 0: expected str) in render._status_lines and
        # render.markdown, TypeError (len of a float) in frameworks.text
        d = doc(reps(GEMM, [10.0]))
        d["benchmarks"].append({"name": "X/train/batch:1", "real_time": 0, "cpu_time": 0,
                                "error_occurred": True, "error_message": 2.5})
        self.bad_file(d, "row X/train/batch:1 (benchmarks[1])", "field error_message")

    def test_context_framework_not_text(self):
        # TypeError (unhashable dict) in frameworks.group_sides
        d = doc(reps(GEMM, [10.0]), context={"framework": {"name": "PyTorch"}})
        self.bad_file(d, "field context.framework")

    def test_breakdown_entries_not_objects(self):
        # AttributeError ('str' object has no attribute 'get') in compare._breakdown_rows
        self.bad_file(doc(reps(GEMM, [10.0]), breakdown=["conv1"]), "field tbd_breakdown[0]",
                      "expected an object")

    def dist(self):
        with open(os.path.join(os.path.dirname(__file__), "data", "dist-np2.json")) as f:
            return json.load(f)

    def test_dist_steps_of_the_wrong_shape(self):
        # KeyError 'bytes', ValueError (float of a name), TypeError (int of a list, 'in' a
        # float), OverflowError (int of infinity) in dist_sim.profiles
        for mutate, field, says in (
                (lambda s: s["grads"][3].pop("bytes"), "tbd_dist_steps[0].grads[3].bytes",
                 "missing"),
                (lambda s: s["grads"].__setitem__(0, 1.5), "tbd_dist_steps[0].grads[0]",
                 "expected an object"),
                (lambda s: s["grads"][0].__setitem__("ready_s", "layer3.0.bn1.weight"),
                 "tbd_dist_steps[0].grads[0].ready_s", "expected a number"),
                (lambda s: s["grads"][0].__setitem__("bytes", [8]),
                 "tbd_dist_steps[0].grads[0].bytes", "expected a number"),
                (lambda s: s["grads"][0].__setitem__("bytes", float("inf")),
                 "tbd_dist_steps[0].grads[0].bytes", "finite"),
                (lambda s: s.__setitem__("forward_s", {"s": 1}),
                 "tbd_dist_steps[0].forward_s", "expected a number"),
                (lambda s: s.__setitem__("step_s", "data-parallel: ..."),
                 "tbd_dist_steps[0].step_s", "expected a number")):
            d = self.dist()
            mutate(d["tbd_dist_steps"][0])
            p = self.t.write("dist.json", d)
            self.refused("simulate", p, says=(p, "field " + field, says))

    def report_refuses(self, document, *says):
        p = self.t.write("doc.json", document)
        kind = ("--history" if "series" in document else
                "--frameworks" if "sides" in document else "--comparison")
        out = os.path.join(self.t.dir, "r.html")
        self.refused("report", kind, p, "-o", out, says=(p,) + says)
        self.assertFalse(os.path.exists(out))

    def comparison(self):
        rc, err, out = track("compare", self.a, self.slow, "--format", "json")
        self.assertEqual(rc, 1, err)
        return json.loads(out)

    def test_report_documents_not_text(self):
        # UnicodeDecodeError and RecursionError in report._read_json
        p = os.path.join(self.t.dir, "c.json")
        with open(p, "wb") as f:
            f.write(b'{"rows": [], "verdict": "\xff"}')
        self.refused("report", "--comparison", p, "-o", os.path.join(self.t.dir, "r.html"),
                     says=(p, "not UTF-8"))
        p = self.t.write("deep.json", "[" * 100000 + "]" * 100000)
        self.refused("report", "--history", p, "-o", os.path.join(self.t.dir, "r.html"),
                     says=(p, "nested too deeply"))

    def test_comparison_entries_of_the_wrong_type(self):
        # AttributeError ('str'/'float' object has no attribute 'get') in sections.py's
        # section_verdict, _counts, section_tables, section_context; TypeError ('bool' object is
        # not iterable) in section_verdict, section_layers
        for path, value in ((("context", 0), "device"), (("context",), True),
                            (("rows", 0), "x"), (("rows", 0, "metrics", 0), 1.5),
                            (("rows", 0, "metrics"), True), (("families",), {}),
                            (("families", 0), "layers"), (("breakdowns",), False),
                            (("base_files",), False),
                            (("rows", 0, "metrics", 0, "ratio"), "1.5")):
            c = self.comparison()
            holder = c
            for k in path[:-1]:
                holder = holder[k]
            holder[path[-1]] = value
            self.report_refuses(c, "field " + ".".join(
                f"[{k}]" if isinstance(k, int) else k for k in path).replace(".[", "["))

    def history_doc(self):
        with open(os.path.join(os.path.dirname(__file__), "data", "history-example.json")) as f:
            return json.load(f)

    def test_history_entries_of_the_wrong_type(self):
        # AttributeError in sections.section_history, _event_rank and charts.history_chart;
        # TypeError ('float' object is not iterable: a point's samples, the off-branch list;
        # '>' between text and an int: a point's index; unhashable: a commit's hash a list)
        for mutate, field in ((lambda h: h["commits"].__setitem__(0, 3.0), "commits[0]"),
                              (lambda h: h["commits"][0].__setitem__("commit", [1]),
                               "commits[0].commit"),
                              (lambda h: h.__setitem__("machine_info", 2.0), "machine_info"),
                              (lambda h: h.__setitem__("off_branch", 2.0), "off_branch"),
                              (lambda h: h["series"][0]["points"].__setitem__(0, "p"),
                               "series[0].points[0]"),
                              (lambda h: h["series"][0]["points"][0].__setitem__("samples", 1.0),
                               "series[0].points[0].samples"),
                              (lambda h: h["series"][0]["points"][0].__setitem__("index", "3"),
                               "series[0].points[0].index"),
                              (lambda h: h["series"][0]["events"].append(7),
                               "series[0].events[")):
            h = self.history_doc()
            mutate(h)
            self.report_refuses(h, "field " + field)

    def test_history_noise_beyond_exp(self):
        # OverflowError (math range error) in sections.section_history: expm1 of the noise
        h = self.history_doc()
        h["series"][0]["noise"] = 1e5
        p = self.t.write("h.json", h)
        out = os.path.join(self.t.dir, "h.html")
        rc, err, _ = track("report", "--history", p, "-o", out)
        self.assertEqual(rc, 0, err)
        self.assertTrue(os.path.exists(out))

    def frameworks_doc(self):
        base = os.path.join(os.path.dirname(__file__), "data")
        out = os.path.join(self.t.dir, "fw.json")
        rc, err, _ = track("compare", os.path.join(base, "tbd-a3c.json"),
                           os.path.join(base, "peer-eager-a3c.json"), "--format", "json",
                           "-o", out)
        self.assertEqual(rc, 0, err)
        with open(out) as f:
            return json.load(f)

    def test_frameworks_rows_of_the_wrong_shape(self):
        # KeyError in frameworks.table_rows (a side, 'rate') and sections.section_frameworks
        # ('benchmark', 'unit'); AttributeError, TypeError (unhashable, not subscriptable,
        # list / int in _fmt_mib) there
        s = self.frameworks_doc()
        side = s["sides"][1]
        del s["rows"][0]["sides"][side]
        self.report_refuses(s, "field rows[0].sides", side)
        for mutate, field in ((lambda s: s["rows"][0].pop("rate"), "rows[0].rate"),
                              (lambda s: s["rows"][0].pop("benchmark"), "rows[0].benchmark"),
                              (lambda s: s["rows"].__setitem__(0, 1), "rows[0]"),
                              (lambda s: s["rows"][0].__setitem__("unit", {}), "rows[0].unit"),
                              (lambda s: s["rows"][0]["sides"]["tbd"].__setitem__(
                                  "peak_memory_bytes", {"median": [1]}),
                               "rows[0].sides.tbd.peak_memory_bytes.median"),
                              (lambda s: s.__setitem__("contexts", []), "contexts")):
            s = self.frameworks_doc()
            mutate(s)
            self.report_refuses(s, "field " + field)

    def test_a_zero_rate_has_no_ratio(self):
        # ZeroDivisionError in frameworks.summarize: a peer's items_per_second of 0 (read, a
        # finite number), tbd's rate over it
        base = os.path.join(os.path.dirname(__file__), "data")
        with open(os.path.join(base, "peer-eager-a3c.json")) as f:
            d = json.load(f)
        for r in d["benchmarks"]:
            r["items_per_second"] = 0
        p = self.t.write("peer0.json", d)
        rc, err, out = track("compare", os.path.join(base, "tbd-a3c.json"), p)
        self.assertEqual(rc, 0, err)

    def test_values_too_far_apart_for_a_ratio(self):
        # ValueError (math domain error) in compare._decide: 1e-300 against 1e300 (both read)
        # underflows the ratio to 0, and log(0)
        a = self.t.write("tiny.json", doc(reps(GEMM, [10.0], widgets_per_second=1e-300)))
        b = self.t.write("huge.json", doc(reps(GEMM, [10.0], widgets_per_second=1e300)))
        rc, err, out = track("compare", a, b, "--all")
        self.assertEqual(rc, 0, err)
        self.assertIn("too far apart", out)

if __name__ == "__main__":
    unittest.main()
