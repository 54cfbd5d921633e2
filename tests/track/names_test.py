"""The benchmark name grammar in Python (tools/track/names.py) accepts and refuses what the C++
parser (fixtures/names.cpp, tests/bench/bench_test.cpp) does; bench_names_test.py parses every
name tbd_bench lists."""

import unittest

import track_support  # noqa: F401 (puts tools/ on the path)
from track.names import parse, strip_gbench


class NamesTest(unittest.TestCase):
    def test_models_with_parameters(self):
        n = parse("Transformer/train/batch:8/len:32")
        self.assertEqual((n.family, n.kind, n.batch, n.params), ("model", "Transformer", 8,
                                                                 [("len", 32)]))
        self.assertEqual(n.str(), "Transformer/train/batch:8/len:32")
        n = parse("FasterRCNN/train/batch:1/height:600/width:800/gt:5")
        self.assertEqual(n.param("width"), 800)
        self.assertIsNone(n.param("len"))
        n = parse("ResNet50/train/batch:32/ranks:2")
        self.assertEqual(n.param("ranks"), 2)

    def test_layers_optimizers_collectives(self):
        n = parse("Conv2d/resnet50.layer2.0.conv2/fwd/batch:32")
        self.assertEqual((n.family, n.kind, n.model, n.layer, n.phase, n.batch),
                         ("layer", "Conv2d", "resnet50", "layer2.0.conv2", "fwd", 32))
        n = parse("Gemm/square1024/fwdbwd/batch:1")
        self.assertEqual((n.model, n.layer), ("", "square1024"))
        for phase in ("dgrad", "wgrad"):
            n = parse(f"Linear/transformer.output_proj/{phase}/batch:8/len:32")
            self.assertEqual((n.family, n.phase, n.batch, n.param("len")),
                             ("layer", phase, 8, 32))
        self.assertIsNone(parse("Linear/transformer.output_proj/grad/batch:8"))
        n = parse("SGD/resnet50/step")
        self.assertEqual((n.family, n.subject, n.batch), ("optimizer", "resnet50", None))
        n = parse("AllReduce/mpi/bytes:1048576/ranks:2")
        self.assertEqual((n.family, n.params), ("collective", [("bytes", 1048576), ("ranks", 2)]))

    def test_google_benchmark_suffixes_and_aggregates(self):
        n = parse("ResNet50/train/batch:4/manual_time/repeats:3_median")
        self.assertEqual((n.suffixes, n.aggregate), (["manual_time", "repeats:3"], "median"))
        self.assertEqual(n.str(), "ResNet50/train/batch:4")
        self.assertEqual(strip_gbench("Conv2d/x.y/bwd/batch:2/real_time_cv"),
                         "Conv2d/x.y/bwd/batch:2")
        self.assertEqual(strip_gbench("BM_custom/16/real_time"), "BM_custom/16")

    def test_math_mode_last(self):
        n = parse("ResNet50/train/batch:32/math:bf16")
        self.assertEqual((n.family, n.batch, n.params, n.math), ("model", 32, [], "bf16"))
        self.assertEqual(n.str(), "ResNet50/train/batch:32/math:bf16")
        n = parse("Transformer/train/batch:8/len:32/math:fp32/repeats:3_median")
        self.assertEqual((n.param("len"), n.math, n.aggregate), (32, "fp32", "median"))
        self.assertEqual(n.str(), "Transformer/train/batch:8/len:32/math:fp32")
        n = parse("Conv2d/resnet50.conv1/wgrad/batch:2/math:bf16")
        self.assertEqual((n.family, n.phase, n.math), ("layer", "wgrad", "bf16"))
        self.assertEqual(parse("ResNet50/train/batch:32").math, "")
        for bad in ("ResNet50/train/batch:32/math:fp16", "ResNet50/train/math:bf16",
                    "ResNet50/train/batch:32/math:bf16/len:4", "SGD/resnet50/step/math:bf16",
                    "AllReduce/mpi/bytes:8/ranks:2/math:bf16"):
            self.assertIsNone(parse(bad), bad)

    def test_refused(self):
        for bad in ("ResNet50/train/batch:0", "ResNet50/train/batch:x", "ResNet50/train",
                    "ResNet50/train/batch:4/len", "ResNet50/train/batch:4/len:0",
                    "ResNet50/train/batch:4/batch:8", "Conv2d/.x/fwd/batch:1",
                    "Conv2d/x./fwd/batch:1", "Conv2d/a b/fwd/batch:1", "AllReduce/mpi/bytes:8",
                    "AllReduce/mpi/ranks:2/bytes:8", "SGD/resnet50/step/extra", "BM_custom/16",
                    "", "Res?Net/train/batch:1"):
            self.assertIsNone(parse(bad), bad)


if __name__ == "__main__":
    unittest.main()
