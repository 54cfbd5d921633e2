"""Tests of `tbd_track report` (tools/track/report/): one offline, deterministic HTML file.

Run from the repository root (Debian's python3, which has scipy):
    /usr/bin/python3 -m unittest discover -s tests/track -p 'report_test.py'

Unit tests check the HTML as text: same bytes for the same input, no network reference, the
CSP first in <head>, escaping of hostile names, sections present or absent with their inputs,
charts with marks, plain Google Benchmark JSON. The Chromium test renders the report headless
with networking off (a fresh network namespace) and reads back what the page's own script wrote
into <body data-*>: script errors, CSP violations, charts drawn, tables sorted correctly; it
keeps a screenshot in $TBD_TEST_OUTPUT_DIR (default: <temp dir>/tbd_track-report-test, printed).

Inputs: the committed results/*.json, a hand-made history document
(tests/track/data/history-example.json, the format `tbd_track history detect --format json`
writes) and a synthetic pair of tbd-shaped runs with 5 repetitions (written here, seeded).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import html.parser
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from track import report  # noqa: E402
from track.compare import compare  # noqa: E402
from track.config import load_config  # noqa: E402
from track.gbjson import InputError, load_runs  # noqa: E402

RESULTS = os.path.join(ROOT, "results")
HISTORY = os.path.join(ROOT, "tests", "track", "data", "history-example.json")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from track_support import CONV_CL as CHANNELS_LAST, GEMM_CONV, MODELS  # noqa: E402

# A 2-rank --tbd_dist run (ResNet-50's ranks:1 and ranks:2 rows, AllReduce rows).
DIST_RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "dist-np2.json")
# tbd_track peer's files of one row (tbd, PyTorch eager and compile): the frameworks section.
PEER_RUNS = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", f)
             for f in ("tbd-a3c.json", "peer-eager-a3c.json", "peer-compile-a3c.json")]

# ---------------------------------------------------------------------------------------------
# Synthetic tbd-shaped runs: model sweeps with 5 repetitions, layer rows, errors, a breakdown.

MEM = ("mem_weights", "mem_weight_grads", "mem_optimizer_state", "mem_feature_maps",
       "mem_workspace", "mem_dynamic")
CTX = {"backend": "cpu", "backend_flag": "cpu", "device": "AMD EPYC", "math": "fp32",
       "threads": "2", "peak_fp32_flops": "4.4e+11", "onednn_version": "2.6.3",
       "onednn_isa": "avx512_core_bf16", "build_type": "Release", "num_cpus": 2,
       "host_name": "vm", "timing": "host steady clock per iteration"}


def _rows(name, unit, times, counters, reps=5):
    out = []
    for i, t in enumerate(times[:reps]):
        row = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": reps,
               "repetition_index": i, "threads": 1, "iterations": 10, "real_time": t,
               "cpu_time": t * 0.98, "time_unit": unit}
        row.update(counters(t))
        out.append(row)
    return out


def synthetic_run(path: str, new: bool, seed: int, extra_names=()) -> str:
    """Writes a tbd_bench-like JSON file; `new` makes ResNet50 at 16/32 12% slower (and its
    workspace 4 MiB bigger at 32), the Transformer at 8 10% faster, breaks a Dropout row,
    fixes an LSTM row, removes the Gemm row and adds an Embedding row."""
    rng = random.Random(seed)
    bench = []
    noise = lambda: 1 + rng.gauss(0, 0.006)  # noqa: E731
    models = (("ResNet50/train/batch:{}", (1, 2, 4, 8, 16, 32), 60.0, 8.2e9, 102e6, 45e6),
              ("Transformer/train/batch:{}/len:32", (1, 2, 4, 8), 70.0, 11.8e9, 242e6, 28e6))
    for fmt_, batches, t1, flop1, w, act in models:
        for n in batches:
            factor = 1.0
            if new and fmt_.startswith("ResNet50") and n >= 16:
                factor = 1.12
            if new and fmt_.startswith("Transformer") and n == 8:
                factor = 0.90
            t_ms = t1 * (n ** 0.82) * factor
            flop = flop1 * n
            ws = 30e6 + (4 * 2 ** 20 if new and n == 32 and "ResNet" in fmt_ else 0)
            mem = {"mem_weights": w, "mem_weight_grads": w,
                   "mem_optimizer_state": w if "ResNet" in fmt_ else 2 * w,
                   "mem_feature_maps": act * n, "mem_workspace": ws, "mem_dynamic": 0.6 * act * n}

            def counters(t, n=n, flop=flop, mem=mem):
                d = {"items_per_second": n / (t * 1e-3), "flop": flop,
                     "flops": flop / (t * 1e-3), "fp32_utilization": flop / (t * 1e-3) / 4.4e11,
                     "cpu_utilization": 0.97, "peak_memory_bytes": sum(mem.values())}
                d.update(mem)
                return d
            bench += _rows(fmt_.format(n), "ms", [t_ms * noise() for _ in range(5)], counters)
    for n in (1, 8, 32):
        t_us = 900.0 * n ** 0.9
        flop = 231e6 * n
        bench += _rows(f"Conv2d/resnet50.layer1.0.conv2/fwd/batch:{n}", "us",
                       [t_us * noise() for _ in range(5)],
                       lambda t, n=n, flop=flop: {
                           "items_per_second": n / (t * 1e-6), "flop": flop,
                           "flops": flop / (t * 1e-6), "peak_memory_bytes": 1.6e6 * n,
                           **{m: (1.6e6 * n if m == "mem_feature_maps" else 0.0) for m in MEM}})
    ok = lambda t: {"items_per_second": 8 / (t * 1e-6), "peak_memory_bytes": 1e6,  # noqa: E731
                    **{m: (1e6 if m == "mem_feature_maps" else 0.0) for m in MEM}}
    err = {"error_occurred": True, "error_message": "out of memory: needs 2.31 GiB (...), "
           "have 2.00 GiB"}
    if new:
        bench += [dict(r, **err) for r in _rows("Dropout/transformer.dropout/fwd/batch:8", "us",
                                               [0.0] * 5, lambda t: {})]
        bench += _rows("LSTM/deepspeech2.rnn.l0/fwd/batch:64", "us",
                       [88000 * noise() for _ in range(5)], ok)
        bench += _rows("Embedding/transformer.embed/fwd/batch:8", "us",
                       [40 * noise() for _ in range(5)], ok)
    else:
        bench += _rows("Dropout/transformer.dropout/fwd/batch:8", "us",
                       [50 * noise() for _ in range(5)], ok)
        bench += [dict(r, **err) for r in _rows("LSTM/deepspeech2.rnn.l0/fwd/batch:64", "us",
                                               [0.0] * 5, lambda t: {})]
        bench += _rows("Gemm/square1024/fwd/batch:1", "us",
                       [10100 * noise() for _ in range(5)], ok)
    for name in extra_names:
        bench += _rows(name, "ms", [10 * noise() for _ in range(5)],
                       lambda t: {"items_per_second": 4 / (t * 1e-3)})
    bd = []
    step = 60.0 * 32 ** 0.82 * 1e-3 * (1.12 if new else 1.0)
    layers = [("conv1", "Conv2d")] + [(f"layer{i // 6 + 1}.{i % 6}.conv{i % 3 + 1}", "Conv2d")
                                      for i in range(18)] + \
             [(f"layer{i // 3 + 1}.{i % 3}.bn{i % 3 + 1}", "BatchNorm2d") for i in range(8)] + \
             [("relu", "Activation"), ("fc", "Linear"), ("loss", "SoftmaxCrossEntropy")]
    for i, (layer, kind) in enumerate(layers):
        share = 0.9 / len(layers) * (1.6 if kind == "Conv2d" else 0.3)
        if new and layer == "layer3.0.conv1":
            share *= 2.0
        t = share * step
        fl = 4.0e9 if kind == "Conv2d" else 5e7
        r = {"benchmark": "ResNet50/train/batch:32", "layer": layer, "kind": kind,
             "problem": f"x (32, {64 * (1 + i % 4)}, 56, 56)", "fwd_time_s": t * 0.35,
             "bwd_time_s": t * 0.65, "flop_fprop": fl, "flop_dgrad": fl,
             "flop_wgrad": fl, "share_of_step": share, "memory_bytes": 3e6 + i * 1e5,
             "flops": 3 * fl / t, "timer": "host"}
        if new:     # the newer breakdown: bytes and the roofline fields
            by = 3 * (2e7 if kind == "Conv2d" else 4e7)
            ai = 3 * fl / by
            roof = min(4.4e11, ai * 2.0e10)
            r.update(bytes=by, arithmetic_intensity=ai, roofline_utilization=r["flops"] / roof,
                     bound="mem" if ai * 2.0e10 < 4.4e11 else "comp")
        bd.append(r)
    ctx = dict(CTX, git_commit=("b" if new else "a") * 40, git_dirty="false",
               date="2026-12-02T10:00:00+00:00")
    if new:
        ctx["peak_bandwidth_bytes_per_s"] = "2e+10"
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"context": ctx, "benchmarks": bench, "tbd_breakdown": bd}, f)
    return path


def plain_gbench(path: str, scale: float) -> str:
    """A Google Benchmark file as any project writes it: no tbd context, counters, breakdown."""
    rows = []
    for n in (8, 64, 512, 4096):
        for i in range(3):
            t = (20 + n * 0.05) * scale * (1 + 0.003 * i)
            rows.append({"name": f"BM_memcpy/{n}", "run_name": f"BM_memcpy/{n}",
                         "run_type": "iteration", "repetitions": 3, "repetition_index": i,
                         "threads": 1, "iterations": 1000000, "real_time": t, "cpu_time": t,
                         "time_unit": "ns", "bytes_per_second": n / (t * 1e-9)})
    rows.append({"name": "BM_StringCopy", "run_name": "BM_StringCopy", "run_type": "iteration",
                 "repetitions": 1, "repetition_index": 0, "threads": 1, "iterations": 3000,
                 "real_time": 5.2 * scale, "cpu_time": 5.2 * scale, "time_unit": "ns"})
    ctx = {"date": "2026-12-01T09:00:00+00:00", "host_name": "ci", "executable": "./bench",
           "num_cpus": 8, "mhz_per_cpu": 3000, "cpu_scaling_enabled": False,
           "caches": [{"type": "Data", "level": 1, "size": 32768, "num_sharing": 1}],
           "load_avg": [0.5, 0.4, 0.3], "library_build_type": "release"}
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"context": ctx, "benchmarks": rows}, f)
    return path


def load_history() -> dict:
    with open(HISTORY, encoding="utf-8") as f:
        return json.load(f)


def compare_files(base: str, new: str) -> dict:
    return compare(load_runs([base]), load_runs([new]), load_config(None)).to_dict()


# ---------------------------------------------------------------------------------------------
# HTML helpers

VOID = {"meta", "input", "br", "img", "link", "hr", "wbr", "col", "source"}


class _Balance(html.parser.HTMLParser):
    """Checks that every non-void element closes in order (SVG's <x/> are start-end tags)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'} "
                               f"at {self.getpos()}")
            if tag in self.stack:
                while self.stack.pop() != tag:
                    pass
        else:
            self.stack.pop()


def parse(doc: str) -> _Balance:
    p = _Balance()
    p.feed(doc)
    p.close()
    return p


def sections(doc: str) -> dict[str, bool]:
    return {m.group(1): m.group(2) == "1" for m in
            re.finditer(r'<section id="[^"]+" data-section="([^"]+)" data-present="([01])"', doc)}


def section_html(doc: str, sid: str) -> str:
    m = re.search(rf'<section id="{sid}".*?</section>', doc, re.S)
    return m.group(0) if m else ""


def charts(doc: str) -> list[tuple[str, str]]:
    """(data-chart kind, svg text) of every chart."""
    return [(m.group(1), m.group(0)) for m in
            re.finditer(r'<svg class="chart" data-chart="([^"]+)".*?</svg>', doc, re.S)]


def network_references(doc: str) -> list[str]:
    """Everything in the page that could make a request."""
    bad = []
    p = parse(doc)
    for tag, attrs in p.tags:
        for k, v in attrs.items():
            v = (v or "").strip()
            if k in ("src", "href", "xlink:href", "action", "formaction", "poster", "data",
                     "srcset", "background", "ping", "manifest", "codebase"):
                if not (v.startswith("#") or v.startswith("data:")):
                    bad.append(f"<{tag} {k}={v!r}>")
            if re.match(r"^\s*(https?:|//|ftp:|ws:|wss:|file:)", v, re.I):
                bad.append(f"<{tag} {k}={v!r}>")
        if tag in ("link", "iframe", "object", "embed", "base", "frame", "audio", "video"):
            bad.append(f"<{tag}>")
    for m in re.finditer(r"url\(\s*['\"]?([^)'\"]*)", doc, re.I):
        if not (m.group(1).startswith("#") or m.group(1).startswith("data:")):
            bad.append(f"url({m.group(1)})")
    for pat in (r"@import", r"https?://", r"(src|href)\s*=\s*['\"]?\s*//", r"\bimport\s*\(",
                r"fetch\s*\(", r"XMLHttpRequest", r"WebSocket", r"EventSource", r"sendBeacon",
                r"\.src\s*="):
        for m in re.finditer(pat, doc, re.I):
            bad.append(doc[max(0, m.start() - 30):m.end() + 30])
    return bad


# ---------------------------------------------------------------------------------------------

class ReportTestBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tbd-report-unit-")
        cls.base = synthetic_run(os.path.join(cls.tmp, "base.json"), False, 1)
        cls.new = synthetic_run(os.path.join(cls.tmp, "new.json"), True, 2)
        cls.synth_cmp = compare_files(cls.base, cls.new)
        cls.real_cmp = compare_files(GEMM_CONV, CHANNELS_LAST)
        cls.history = load_history()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def full(self) -> str:
        runs = load_runs([self.new, MODELS, DIST_RUN] + PEER_RUNS)
        return report.build_html(self.synth_cmp, self.history, runs, "tbd nightly")


class FormattingTest(unittest.TestCase):
    def test_values(self):
        self.assertEqual(report.fmt(0.0123, "s"), "12.3 ms")
        self.assertEqual(report.fmt(4.2e-7, "s"), "420 ns")
        self.assertEqual(report.fmt(1.5, "s"), "1.5 s")
        self.assertEqual(report.fmt(3 * 2 ** 20, "bytes"), "3 MiB")
        self.assertEqual(report.fmt(1826206124.0, "bytes"), "1.701 GiB")
        self.assertEqual(report.fmt(0.5476, "fraction"), "54.8%")
        self.assertEqual(report.fmt(0.0012, "fraction"), "0.12%")
        self.assertEqual(report.fmt(374837535790.561, "FLOP/s"), "374.8 GFLOP/s")
        self.assertEqual(report.fmt(1621.19, "samples/s"), "1621/s")
        self.assertEqual(report.fmt(None, "s"), "-")
        self.assertEqual(report.fmt(float("nan"), "s"), "-")
        self.assertEqual(report.fmt_pct(1.18), "+18.0%")
        self.assertEqual(report.fmt_pct(0.874), "-12.6%")

    def test_axis_ticks_are_nice(self):
        ax = report.Axis(0.0195, 0.0257, "s", n=4)
        self.assertEqual([ax.label(t) for t in ax.ticks], ["18 ms", "20 ms", "22 ms", "24 ms",
                                                           "26 ms"])
        ax = report.Axis(0, 1.826e9, "bytes", zero=True)
        self.assertEqual(ax.label(ax.ticks[0]), "0")
        self.assertEqual(ax.label(ax.ticks[1]), "0.5 GiB")
        self.assertTrue(all(ax.lo <= t <= ax.hi for t in ax.ticks))
        ax = report.Axis(0.3, 0.3, "fraction")     # one value: a non-empty range around it
        self.assertLess(ax.lo, 0.3)
        self.assertGreater(ax.hi, 0.3)

    def test_names(self):
        self.assertEqual(report.parse_model("ResNet50/train/batch:32"), ("ResNet50", 32))
        self.assertEqual(report.parse_model("Transformer/train/batch:8/len:32"),
                         ("Transformer len:32", 8))
        self.assertEqual(report.parse_model("ResNet50/train/batch:8/manual_time/repeats:5"),
                         ("ResNet50", 8))
        self.assertIsNone(report.parse_model("Conv2d/resnet50.conv1/fwd/batch:8"))
        self.assertEqual(report.parse_layer("Conv2d/resnet50.layer2.0.conv2/bwd/batch:32"),
                         ("Conv2d/resnet50.layer2.0.conv2/bwd", 32))
        self.assertEqual(report.parse_layer("Conv2d/resnet50.layer2.0.conv2/wgrad/batch:4_median"),
                         ("Conv2d/resnet50.layer2.0.conv2/wgrad", 4))
        self.assertEqual(report.parse_layer("MultiHeadAttention/transformer.enc0.attn/fwd/batch:8"
                                            "/len:32"),
                         ("MultiHeadAttention/transformer.enc0.attn/fwd len:32", 8))
        self.assertIsNone(report.parse_layer("AllReduce/mpi/bytes:8/ranks:2"))


class ReportHtmlTest(ReportTestBase):
    def test_deterministic_bytes(self):
        a = self.full()
        b = self.full()
        self.assertEqual(a.encode("utf-8"), b.encode("utf-8"))
        # The same through the command line, twice, and through a comparison read back
        # from JSON (what `tbd_track compare --format json` writes).
        out = []
        for i in range(2):
            path = os.path.join(self.tmp, f"cli{i}.html")
            self.assertEqual(run_cli(["--compare", self.base, self.new, "--history", HISTORY,
                                      "-o", path]), 0)
            with open(path, "rb") as f:
                out.append(f.read())
        self.assertEqual(out[0], out[1])
        cpath = os.path.join(self.tmp, "cmp.json")
        from track.cli import to_json  # noqa: PLC0415
        with open(cpath, "w", encoding="utf-8") as f:
            f.write(to_json(compare_files(self.base, self.new)))
        path = os.path.join(self.tmp, "from-json.html")
        self.assertEqual(run_cli(["--comparison", cpath, "--runs", self.new, "--history",
                                  HISTORY, "-o", path]), 0)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), out[0])

    def test_no_network_references(self):
        doc = self.full()
        self.assertEqual(network_references(doc), [])
        # The checker itself finds what it must.
        for bad in ('<img src="http://x/y.png">', '<a href="//cdn.example/x">',
                    "<style>@import 'x.css'</style>", '<div style="background:url(x.png)">',
                    '<link rel="stylesheet" href="s.css">', '<script src="a.js"></script>'):
            self.assertTrue(network_references(doc.replace("<main>", "<main>" + bad)), bad)

    def test_csp_first_in_head(self):
        doc = self.full()
        m = re.search(r"<head>\s*(<[^>]+>)", doc)
        self.assertIsNotNone(m)
        self.assertEqual(m.group(1), f'<meta http-equiv="Content-Security-Policy" '
                         f'content="{report.CSP}">')
        self.assertEqual(report.CSP, "default-src 'none'; script-src 'unsafe-inline'; "
                         "style-src 'unsafe-inline'; img-src data:")
        self.assertTrue(doc.startswith("<!DOCTYPE html>"))

    def test_well_formed(self):
        doc = self.full()
        p = parse(doc)
        self.assertEqual(p.errors, [])
        self.assertEqual(p.stack, [])
        self.assertNotRegex(doc, r"&amp;(#\d+|amp|lt|gt|quot);")   # nothing escaped twice
        ids = re.findall(r'\sid="([^"]+)"', doc)
        self.assertEqual(len(ids), len(set(ids)))                   # anchors are unique
        for ref in re.findall(r'href="#([^"]+)"', doc):
            self.assertIn(ref, ids)

    def test_escaping_hostile_names(self):
        evil = '<script>alert("x")</script>'
        evil2 = 'Conv2d/"><img src=x onerror=alert(1)>/fwd/batch:1'
        base = synthetic_run(os.path.join(self.tmp, "eb.json"), False, 3,
                             extra_names=(f"{evil}/train/batch:4", evil2))
        new = synthetic_run(os.path.join(self.tmp, "en.json"), True, 4,
                            extra_names=(f"{evil}/train/batch:4", evil2))
        c = compare_files(base, new)
        runs = load_runs([new])
        runs[0].breakdown.append({"benchmark": f"{evil}/train/batch:4", "layer": evil,
                                  "kind": evil2, "problem": evil, "fwd_time_s": 0.001,
                                  "bwd_time_s": 0.002, "share_of_step": 0.3, "flops": 1e9})
        runs[0].context["device"] = evil
        h = copy.deepcopy(self.history)
        h["series"][0]["benchmark"] = evil
        h["commits"][3]["subject"] = evil2
        h["machine"] = evil
        doc = report.build_html(c, h, runs, evil)
        self.assertNotIn("<script>alert", doc)
        self.assertNotIn("<img src=x", doc)
        self.assertIn("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;", doc)
        self.assertEqual(doc.count("<script>"), 2)        # the report's own two
        self.assertEqual(network_references(doc), [])
        self.assertEqual(parse(doc).errors, [])

    def test_sections_follow_inputs(self):
        names = [s for s, _ in report.SECTIONS]
        runs = load_runs([MODELS])
        cases = {
            "comparison only": (self.real_cmp, None, [],
                                {"verdict", "tables", "ab", "context"}),
            "history only": (None, self.history, [], {"history"}),
            "runs only": (None, None, runs, {"throughput", "memory", "layers", "context"}),
            "everything": (self.synth_cmp, self.history,
                           load_runs([MODELS, DIST_RUN] + PEER_RUNS),
                           set(names)),
        }
        for what, (c, h, r, present) in cases.items():
            with self.subTest(what):
                doc = report.build_html(c, h, r, what)
                got = sections(doc)
                self.assertEqual(list(got), names)           # every section, in order
                self.assertEqual({k for k, v in got.items() if v}, present)
                for sid, on in got.items():
                    if not on:                               # an absent one says why
                        self.assertRegex(section_html(doc, sid), r'class="absent">No ')

    def test_each_section_draws_its_charts(self):
        doc = self.full()
        expect = {"ab": {"ab-strip"}, "history": {"history"},
                  "throughput": {"throughput", "utilization", "layer-throughput"},
                  "memory": {"memory"}, "layers": {"layer-share", "kind-share", "roofline"},
                  "scaling": {"scaling"}, "frameworks": {"frameworks"}}
        for sid, kinds in expect.items():
            with self.subTest(sid):
                found = charts(section_html(doc, sid))
                self.assertEqual({k for k, _ in found}, kinds)
                for kind, svg in found:
                    self.assertRegex(svg, r'class="mark[ "]', kind)
        # History: one chart per series, change points and recovered spans drawn.
        hist = section_html(doc, "history")
        self.assertEqual(len(charts(hist)), len(self.history["series"]))
        self.assertIn('class="recovered"', hist)
        self.assertIn('class="mark outlier"', hist)
        self.assertIn("step x1.18 fixed", hist)
        self.assertIn("drift x1.17 open", hist)
        self.assertIn("1 open regressions, 1 acknowledged", hist)
        self.assertIn("open, acknowledged", hist)
        self.assertIn("1 unmeasured commit before (bisect)", hist)
        self.assertIn("off the branch</b> 1 stored commits", hist)
        # The A/B plots of the synthetic pair have 5 dots a side.
        strips = charts(section_html(doc, "ab"))
        self.assertTrue(strips)
        self.assertEqual(strips[0][1].count('class="mark"'), 10)
        # Memory: 6 batches of the synthetic ResNet50, 6 categories each, a peak mark per bar.
        mem = [s for _, s in charts(section_html(doc, "memory")) if "ResNet50 (new.json)" in s]
        self.assertEqual(len(mem), 1)
        self.assertEqual(mem[0].count('<rect class="mark"'), 36)
        self.assertEqual(mem[0].count('<line class="peak"'), 6)
        # Layers: the newer breakdown's roofline columns, and the roof itself.
        lay = section_html(doc, "layers")
        for col in ("<th>bound</th>", '<th class="num">roofline util</th>', 'class="roof"'):
            self.assertIn(col, lay)
        self.assertIn("mem-bound", lay)

    def test_comparison_of_real_files(self):
        doc = report.build_html(self.real_cmp, None, [], "real")
        v = section_html(doc, "verdict")
        self.assertIn("REGRESSION", v)
        self.assertIn("exit code 1", v)
        tiles = dict((lab, int(n)) for n, lab in re.findall(
            r'<div class="n">(\d+)</div><div class="l">([^<]+)</div>', v))
        self.assertEqual(tiles["regressed"], 3)
        self.assertEqual(tiles["improved"], 1)
        self.assertEqual(tiles["added"], 7)
        self.assertIn("Unit of analysis", v)
        t = section_html(doc, "tables")
        first = re.search(r'<table class="sortable metrics" id="t-metrics">.*?<tbody><tr '
                          r'class="([^"]+)"', t, re.S)
        self.assertEqual(first.group(1), "v-regression")      # regressions first
        self.assertEqual(t.count("b-added"), 7)
        self.assertIn("Conv2d/resnet50.layer1.0.conv2/bwd/batch:32", t)
        # The context diff shows the differing peak and commit.
        ctx = section_html(doc, "context")
        self.assertIn("peak_fp32_flops", ctx)
        self.assertRegex(ctx, r'<tr class="differs"><td><code>git_commit</code>')

    def test_synthetic_pair_statuses(self):
        doc = report.build_html(self.synth_cmp, None, [], "synthetic")
        t = section_html(doc, "tables")
        for status in ("broken", "fixed", "added", "removed"):
            self.assertIn(f"b-{status}", t, status)
        self.assertIn("out of memory", t)
        ab = section_html(doc, "ab")
        self.assertIn("ResNet50/train/batch:32", ab)
        self.assertIn("tbd_bench --benchmark_filter='^ResNet50/train/batch:16$' "
                      "--benchmark_repetitions=10", ab)           # under each regression
        lay = section_html(doc, "layers")                   # base -> new layer deltas
        self.assertIn("where the step changed", lay)
        self.assertIn("layer3.0.conv1", lay)

    def test_plain_google_benchmark(self):
        a = plain_gbench(os.path.join(self.tmp, "gb-a.json"), 1.0)
        b = plain_gbench(os.path.join(self.tmp, "gb-b.json"), 1.3)
        c = compare_files(a, b)
        doc = report.build_html(c, None, load_runs([b]), "plain")
        self.assertEqual(parse(doc).errors, [])
        self.assertEqual(network_references(doc), [])
        got = sections(doc)
        self.assertTrue(got["verdict"] and got["tables"] and got["context"])
        self.assertIn("BM_memcpy/512", section_html(doc, "tables"))
        self.assertIn("bytes_per_second", section_html(doc, "tables"))
        self.assertIn("No model rows", section_html(doc, "throughput"))
        self.assertIn("No per-layer breakdown", section_html(doc, "layers"))
        self.assertTrue(charts(section_html(doc, "ab")))    # 3 vs 3 repetitions
        self.assertIn("library_build_type", section_html(doc, "context"))

    def test_not_comparable(self):
        base, new = load_runs([GEMM_CONV]), load_runs([GEMM_CONV])
        new[0].context = dict(new[0].context, device="NVIDIA H100", backend="cuda")
        c = compare(base, new, load_config(None)).to_dict()
        self.assertEqual(c["exit_code"], 3)
        doc = report.build_html(c, None, new, "not comparable")
        v = section_html(doc, "verdict")
        self.assertIn("NOT COMPARABLE", v)
        self.assertIn("exit code 3", v)
        self.assertIn("Not comparable:</b> device differs", v)
        self.assertIn("b-refuse", section_html(doc, "context"))

    def test_tolerates_sparse_inputs(self):
        """Missing fields, nulls, unknown commits, junk rows: a page, never a traceback."""
        h = copy.deepcopy(self.history)
        s0 = h["series"][0]
        s0["events"].append({"kind": "step", "verdict": "regression", "commit": "deadbeef",
                             "index": 500, "ratio": None, "from": None, "to": None,
                             "fixed_by": "not-a-commit", "open": True})
        s0["points"][3]["value"] = None
        s0["points"][4].pop("samples")
        h["series"] += [{"benchmark": "x", "metric": "m", "points": [{"index": 3}]},
                        {"benchmark": "y"}]
        runs = load_runs([MODELS])
        runs[0].breakdown = [{"benchmark": "ResNet50/train/batch:4", "layer": "a"},
                             {"benchmark": "ResNet50/train/batch:4", "layer": "b",
                              "fwd_time_s": None, "kind": None}, {"no": "benchmark"}, "junk"]
        c = {"verdict": "OK", "rows": [{"name": "a", "status": "compared",
                                        "metrics": [{"metric": "real_time"}]}]}
        doc = report.build_html(c, h, runs, "sparse")
        self.assertEqual(parse(doc).errors, [])
        self.assertEqual(sum(sections(doc).values()), 8)
        # A model row with a peak but no mem_* categories: no bars (a chart without marks
        # would fail the browser check), the peak in the table.
        p = os.path.join(self.tmp, "peak-only.json")
        with open(p, "w", encoding="utf-8") as f:
            json.dump({"context": CTX, "benchmarks": _rows(
                "Fake/train/batch:1", "ms", [10.0, 10.1, 10.2],
                lambda t: {"items_per_second": 100 / t, "peak_memory_bytes": 1000.0}, 3)}, f)
        mem = section_html(report.build_html(None, None, load_runs([p]), "peak"), "memory")
        self.assertEqual(charts(mem), [])
        self.assertIn("No mem_* categories", mem)
        self.assertIn("1000 B", mem)
        # 120 commits: one chart per row, labels thinned, the line broken at missing commits.
        h = copy.deepcopy(self.history)
        commits = [dict(h["commits"][i % 14], commit=f"{i:040x}", short=f"{i:012x}")
                   for i in range(120)]
        h["commits"] = commits
        h["series"] = [dict(h["series"][0], events=[], segments=[],
                            points=[{"commit": commits[i]["commit"], "index": i,
                                     "value": 0.4 + 0.01 * (i % 3), "samples": [0.4]}
                                    for i in range(120) if i % 13])]
        doc = report.build_html(None, h, [], "long")
        svg = charts(doc)[0][1]
        self.assertIn('class="grid g1"', doc)
        self.assertLess(svg.count('class="cx"'), 60)
        self.assertEqual(len(re.findall(r"M[\d.]+ [\d.]+", svg.split('class="line" d="')[1]
                                        .split('"')[0])), 10)   # 9 gaps -> 10 pieces

    def test_empty_data_no_chart(self):
        h = copy.deepcopy(self.history)
        h["series"] = [dict(h["series"][0], points=[], segments=[], events=[])]
        doc = report.build_html(None, h, [], "empty series")
        self.assertEqual(charts(doc), [])
        self.assertIn("No points on the commits", doc)
        h["series"] = []
        doc = report.build_html(None, h, [], "no series")
        self.assertIn("no series", section_html(doc, "history"))


def _have_history_module() -> bool:
    try:
        from track import history  # noqa: F401,PLC0415
        import fake_repo  # noqa: F401,PLC0415
    except ImportError:
        return False
    return True


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # fake_repo, when merged


@unittest.skipUnless(_have_history_module(),
                     "track.history or tests/track/fake_repo.py not on this branch")
class HistoryDocumentTest(unittest.TestCase):
    """The report reads what `tbd_track history detect --format json` writes (the real thing,
    over a fake repository), not only the hand-made example."""

    def test_report_of_a_real_history_document(self):
        import fake_repo  # noqa: PLC0415
        from track import history  # noqa: PLC0415
        from track.cli import to_json  # noqa: PLC0415
        speeds = [1.0, 1.0, 1.0, 1.2, 1.2, 1.2, 1.0, 1.0, 1.1, 1.1]
        repo, shas = fake_repo.make_repo(speeds)
        tmp = tempfile.mkdtemp(prefix="tbd-report-history-")
        try:
            rng = random.Random(5)
            paths = []
            for i, (sha, sp) in enumerate(zip(shas, speeds)):
                rows = _rows("Fake/train/batch:1", "ms",
                             [10 * sp * (1 + rng.gauss(0, 0.005)) for _ in range(3)],
                             lambda t, i=i: {"items_per_second": 1000 / t,
                                             "peak_memory_bytes": 1000.0 + 512 * (i >= 8)},
                             reps=3)
                p = os.path.join(tmp, f"run-{i}.json")
                with open(p, "w", encoding="utf-8") as f:
                    json.dump({"context": dict(CTX, git_commit=sha, git_dirty="false",
                                               date=f"2026-12-03T10:{i:02d}:00+00:00"),
                               "benchmarks": rows}, f)
                paths.append(p)
            store = os.path.join(tmp, "store")
            history.add(store, paths, quiet=True)
            doc = json.loads(to_json(history.build_document(
                store, repo, metrics=["real_time", "peak_memory_bytes"])))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(repo, ignore_errors=True)
        html_ = report.build_html(None, doc, [], "history")
        self.assertEqual(parse(html_).errors, [])
        hist = section_html(html_, "history")
        self.assertEqual(len(charts(hist)), len(doc["series"]))
        nev = sum(len(s["events"]) for s in doc["series"])
        self.assertGreater(nev, 0)
        self.assertEqual(hist.count("<tr class=\"v-"), nev)
        self.assertIn("fixed in", hist)
        self.assertEqual(html_, report.build_html(None, doc, [], "history"))


def run_cli(argv: list[str]) -> int:
    """`tbd_track report ...` through the subcommand's own parser (the lead's cli registers
    the same add_parser; abrun/bisect/history are not needed for this)."""
    p = argparse.ArgumentParser(prog="tbd_track")
    sub = p.add_subparsers(dest="cmd")
    report.add_parser(sub)
    with contextlib.redirect_stderr(io.StringIO()):      # keep the test's output readable
        args = p.parse_args(["report"] + argv)
        try:
            return args.func(args)
        except InputError as e:
            print(f"tbd_track: {e}", file=sys.stderr)
            return 2


class CommandLineTest(ReportTestBase):
    def test_writes_file_and_rejects_bad_input(self):
        out = os.path.join(self.tmp, "r.html")
        folder = os.path.join(self.tmp, "runs")     # a folder of runs (results/ also holds
        os.makedirs(folder, exist_ok=True)          # the PyTorch peer's file, not a run)
        shutil.copy(MODELS, folder)
        shutil.copy(self.new, folder)
        self.assertEqual(run_cli(["--runs", folder, "-o", out]), 0)
        with open(out, encoding="utf-8") as f:
            doc = f.read()
        self.assertIn(os.path.basename(MODELS), doc)
        self.assertEqual(os.stat(out).st_mode & 0o444, 0o444)         # readable, not 0600
        self.assertFalse([f for f in os.listdir(self.tmp) if f.endswith(".tmp")])
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        self.assertEqual(run_cli(["--history", bad, "-o", out]), 2)
        self.assertEqual(run_cli(["--comparison", MODELS, "-o", out]), 2)  # runs, not a comparison
        self.assertEqual(run_cli(["--history", MODELS, "-o", out]), 2)
        self.assertEqual(run_cli(["-o", out]), 2)                           # no input
        with self.assertRaises(SystemExit):                                 # both comparisons
            run_cli(["--compare", self.base, self.new, "--comparison", bad, "-o", out])


# ---------------------------------------------------------------------------------------------
# Chromium

def chromium_binary() -> str | None:
    for c in (os.environ.get("TBD_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium",
              shutil.which("chromium-browser")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def output_dir() -> str:
    d = os.environ.get("TBD_TEST_OUTPUT_DIR")
    if d:
        os.makedirs(d, exist_ok=True)
        return d
    d = os.path.join(tempfile.gettempdir(), "tbd_track-report-test")   # overwritten each run
    os.makedirs(d, exist_ok=True)
    return d


def no_network_prefix() -> tuple[list[str], str]:
    """`unshare --net` (a fresh network namespace: only a down loopback) when permitted."""
    u = shutil.which("unshare")
    if u:
        try:
            r = subprocess.run([u, "--net", "true"], capture_output=True, timeout=10)
            if r.returncode == 0:
                return [u, "--net"], "unshare --net (no network interface)"
        except (OSError, subprocess.TimeoutExpired):
            pass
    return [], ("unshare --net not permitted here: networking off by chromium's flags only "
                "(proxy to a closed port, host resolver maps everything to nothing)")


# Skipped without Chromium when run by hand; under ctest (TBD_REQUIRE_BROWSER=1, and
# scripts/test.sh installs it) a missing Chromium is a failure, not a skip.
@unittest.skipIf(chromium_binary() is None and os.environ.get("TBD_REQUIRE_BROWSER") != "1",
                 "chromium is not installed (Debian: apt-get install -y "
                 "--no-install-recommends chromium)")
class ChromiumRenderTest(ReportTestBase):
    def test_renders_offline_without_errors(self):
        self.assertIsNotNone(chromium_binary(), "chromium is not installed (scripts/test.sh "
                             "installs it: apt-get install chromium)")
        out = output_dir()
        path = os.path.join(out, "report.html")
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.full())
        shot = os.path.join(out, "report.png")
        if os.path.exists(shot):
            os.unlink(shot)
        prefix, how = no_network_prefix()
        profile = tempfile.mkdtemp(prefix="tbd-chromium-profile-")
        cmd = prefix + [
            chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-default-apps", "--disable-extensions",
            "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
            "--hide-scrollbars", "--window-size=1400,5000", f"--screenshot={shot}",
            "--dump-dom", "file://" + path + "#tbd-selftest"]
        print(f"\nreport test output: {out} (networking: {how})", file=sys.stderr)
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=45, cwd=out)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        with open(os.path.join(out, "chromium.log"), "w", encoding="utf-8") as f:
            f.write(r.stderr)
        with open(os.path.join(out, "dom.html"), "w", encoding="utf-8") as f:
            f.write(r.stdout)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        body = re.search(r"<body([^>]*)>", r.stdout)
        self.assertIsNotNone(body, "no <body> in the dumped DOM")
        attrs = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', body.group(1)))
        print(f"chromium {time.monotonic() - t0:.1f}s: {attrs}", file=sys.stderr)
        # Console output from the page itself (chrome:// pages of the browser log their own).
        console = [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln and "file://" in ln]
        self.assertEqual(console, [], "console messages from the report")
        self.assertEqual(attrs.get("data-errors"), "0")
        self.assertEqual(attrs.get("data-csp-violations"), "0")
        nsvg = len(charts(self.full()))
        self.assertGreater(nsvg, 10)
        self.assertEqual(attrs.get("data-charts"), str(nsvg))
        self.assertEqual(attrs.get("data-charts-drawn"), str(nsvg))
        self.assertGreater(int(attrs.get("data-sort-checked", "0")), 10)
        self.assertEqual(attrs.get("data-sort-failed"), "0")
        # The self-test put the rows back: regressions first, as written.
        first = re.search(r'id="t-metrics">.*?<tbody><tr class="([^"]+)"', r.stdout, re.S)
        self.assertEqual(first.group(1), "v-regression")
        with open(shot, "rb") as f:
            png = f.read()
        self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"))
        self.assertGreater(len(png), 50_000)             # not a blank page
        print(f"screenshot: {shot}", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
