#!/usr/bin/env bash
# tests/fuzz/libfuzzer.sh SOURCE_ROOT OUT_DIR SECONDS LIBRARY...: the coverage-guided run of the
# command-line fuzz target (tests/fuzz/flags_target.cpp). Builds it with clang's libFuzzer, ASan
# and UBSan (`clang++ -fsanitize=fuzzer,address,undefined`), linked to the build's tbd libraries
# (LIBRARY...: the model registry and the data-parallel flag reader it consults), then fuzzes
# for SECONDS (TBD_FUZZ_SECONDS overrides) from the committed corpus (tests/fuzz/corpus/flags)
# with the dictionary tests/fuzz/flags.dict. Only the target and the readers it calls
# (fixtures/options.cpp, fixtures/names.cpp) are instrumented: they are what it fuzzes.
#
# New inputs go to OUT_DIR/inputs (never into the committed corpus). A crash, a hang (over 5 s
# on one input), a leak or undefined behaviour fails the test and leaves the input in
# OUT_DIR/crash-*: fix the cause, then copy the input to tests/fuzz/corpus/flags as a regression
# case (tests/fuzz/flags_fuzz_test.cpp runs every corpus file in every build).
# Exits 77 (a ctest skip, with the reason) where no clang with libFuzzer is installed
# (Debian: apt-get install clang-14 libclang-rt-14-dev; scripts/test.sh installs them).
set -euo pipefail
src=$1 out=$2 seconds=${TBD_FUZZ_SECONDS:-$3}
shift 3

clangxx=$(command -v clang++-14 || command -v clang++ || true)
if [[ -z "$clangxx" ]]; then
  echo "libfuzzer: no clang++ (apt-get install clang-14 libclang-rt-14-dev): skipped"
  exit 77
fi
rm -rf "$out" && mkdir -p "$out/inputs"
probe='extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }'
if ! echo "$probe" | "$clangxx" -x c++ -fsanitize=fuzzer - -o "$out/probe" 2>"$out/probe.log"; then
  echo "libfuzzer: $clangxx has no libFuzzer runtime (apt-get install libclang-rt-14-dev):" \
    "skipped; $(head -c 300 "$out/probe.log")"
  exit 77
fi

libdirs=()
for lib in "$@"; do libdirs+=("-Wl,-rpath,$(dirname "$lib")"); done
echo "libfuzzer: building $out/flags_fuzzer with $clangxx"
"$clangxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -fno-omit-frame-pointer -I"$src" "$src/tests/fuzz/flags_target.cpp" "$src/fixtures/options.cpp" \
  "$src/fixtures/names.cpp" -o "$out/flags_fuzzer" -Wl,--no-as-needed "$@" "${libdirs[@]}"

echo "libfuzzer: fuzzing for $seconds s from $src/tests/fuzz/corpus/flags"
rc=0
"$out/flags_fuzzer" -max_total_time="$seconds" -max_len=8192 -timeout=5 -error_exitcode=1 \
  -timeout_exitcode=1 -print_final_stats=1 -dict="$src/tests/fuzz/flags.dict" \
  -artifact_prefix="$out/" "$out/inputs" "$src/tests/fuzz/corpus/flags" >"$out/log" 2>&1 || rc=$?
tail -n 25 "$out/log"
if ((rc != 0)); then
  echo "libfuzzer: FAILED (exit $rc); the input: $(ls "$out"/crash-* "$out"/timeout-* \
    "$out"/leak-* 2>/dev/null | head -n 1); whole log: $out/log"
  exit 1
fi
echo "libfuzzer: no crash, hang, leak or undefined behaviour in $seconds s" \
  "($(grep -o 'Done [0-9]* runs' "$out/log" | tail -n 1 | cut -d' ' -f2) inputs)"
