"""The readers under fuzz_readers.py's seeded mutation loop for a bounded time: every input is
read or refused with InputError (exit 2), nothing else is raised.

20 seconds by default (ctest's track label; the test as a whole stays under 30 s);
TBD_FUZZ_SECONDS lengthens it, TBD_FUZZ_SEED changes the inputs (default 1: the same inputs
on every run, up to how many the machine gets through):

    TBD_FUZZ_SECONDS=600 TBD_FUZZ_SEED=7 python3 -m unittest -v fuzz_test   # in tests/track
    tests/track/fuzz_readers.py --seconds 600 --seed 7 --crash-dir /tmp/crashes
"""

import os
import unittest

import fuzz_readers

SECONDS = float(os.environ.get("TBD_FUZZ_SECONDS", "20"))
SEED = int(os.environ.get("TBD_FUZZ_SEED", "1"))


class FuzzReaders(unittest.TestCase):
    def test_every_input_is_read_or_refused(self):
        res = fuzz_readers.run(SECONDS, SEED)
        print("\n" + res.summary())
        self.assertFalse(res.crashes, f"{len(res.crashes)} crash classes (reproduce: "
                         f"tests/track/fuzz_readers.py --seconds {SECONDS:g} --seed {SEED} "
                         "--crash-dir DIR); see above")
        # The loop ran every target, and some mutants got through the checks (else the
        # fuzzer would only be testing the first refusal).
        for target, _ in fuzz_readers.SHARE:
            self.assertGreater(res.runs.get(target, 0), 0, target)
            self.assertGreater(res.read.get(target, 0), 0, target)


if __name__ == "__main__":
    unittest.main()
