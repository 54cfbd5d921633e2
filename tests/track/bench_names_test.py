"""Every name tbd_bench lists parses with the Python grammar (tools/track/names.py) and prints
back as itself: the C++ names (fixtures/names.cpp) and the Python parser agree."""

import os
import subprocess
import unittest

import track_support  # noqa: F401 (puts tools/ on the path)
from track.names import parse

BENCH = os.environ.get("TBD_BENCH")


@unittest.skipUnless(BENCH, "TBD_BENCH is not set (ctest sets it to tbd_bench_tests)")
class ListedNames(unittest.TestCase):
    def test_every_listed_name_parses_and_round_trips(self):
        names = []
        for extra in ([], ["--tbd_seq_len=32", "--tbd_model_args=frames:100,actors:1"]):
            r = subprocess.run([BENCH, "--benchmark_list_tests"] + extra, capture_output=True,
                               text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            names += [n for n in r.stdout.split() if n]
        self.assertGreater(len(names), 100)
        families = set()
        for name in names:
            n = parse(name)
            self.assertIsNotNone(n, name)
            families.add(n.family)
            self.assertEqual(n.str() + "".join("/" + s for s in n.suffixes), name)
        self.assertLessEqual({"layer", "model", "optimizer"}, families)


if __name__ == "__main__":
    unittest.main()
