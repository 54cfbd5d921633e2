#!/usr/bin/env bash
# scripts/test.sh: runs every test (after scripts/setup.sh built the release preset; the
# data-parallel ones under mpiexec), then the core, layer, model and data-parallel tests again
# under ASan+UBSan (preset `asan`), then the concurrent ones (A3C's actor-learner threads, the
# tracking allocator, the communication thread) under ThreadSanitizer (preset `tsan`, which
# builds only those three test binaries). Exits non-zero when any test fails. CUDA tests (ctest
# label `cuda`) skip with their reason where no GPU is usable.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

# Only the tests need these: Chromium renders the tracker's HTML report (headless, no network),
# libbenchmark-tools is Google Benchmark's own compare.py, which must keep reading our JSON,
# clang-format checks the formatting (test `format`), clang with its libFuzzer runtime builds the
# coverage-guided fuzz run of the command-line readers (test `fuzz.flags_libfuzzer`).
. scripts/packages.sh
ensure_packages test chromium libbenchmark-tools clang-format clang-14 libclang-rt-14-dev

echo "== release tests"
ctest --preset release -j "$jobs"

echo "== ASan + UBSan build and tests (core, layers, models)"
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan -j "$jobs"

echo "== ThreadSanitizer build and tests (A3C workers, tracking allocator, comm thread)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan
ctest --preset tsan -j "$jobs"
