#!/usr/bin/env bash
# scripts/gpu_check.sh: the GPU check of the CUDA backend, in under 8 minutes.
#
# For a machine with an NVIDIA GPU, the NVIDIA driver, CUDA 13, PyTorch (with its pip NVIDIA
# libraries), cmake, ninja and nvcc, but no Google Benchmark, oneDNN, apt or network. It runs
# binaries carried from a build machine (scripts/pack_gpu_bundle.sh makes the bundle there):
#   1. environment: nvidia-smi, the CUDA libraries PyTorch ships (site-packages/nvidia/*/lib,
#      put on LD_LIBRARY_PATH after the bundle's lib/), cuDNN >= the build's, ldd of every binary
#   2. the CUDA tests (every bin/*cuda*_test, i.e. what `ctest -L cuda` runs) and the CUDA targets
#      of the layer suites (the other bin/*_test, filtered to their cuda_fp32 and cuda_tf32
#      instances: every layer case against float64), with XML results
#   3. a quick tbd_bench set on --tbd_backend=cuda in both math modes with the counters
#      (BENCH_FILTER below), Google Benchmark JSON per mode
#   4. scripts/torch_side_by_side.py: PyTorch timings of the same layers (CUDA events, warm-up)
#      in fp32-strict and tf32, joined with the tbd JSON; its table of times and ratios is
#      printed LAST
# Everything goes under $OUT if set, else results/gpu/<UTC date-time>/ (logs, JSON, XML,
# summary.txt). Each step has a time limit (below) so the whole check stays under 8 minutes.
#
# Usage, on the GPU machine, from the repository root:
#   scripts/gpu_check.sh                    # bundle in build/gpu_bundle (BUNDLE=... to change)
# On a machine without a GPU it checks what it can (bundle present and complete, the Python
# script compiles, the binaries' non-CUDA libraries resolve), says so, and exits 0 (dry run).
# Exit status: 0 all ran and passed (or dry run), 1 a test or step failed, 2 nothing to run.
set -uo pipefail

# ---- configuration (tbd_bench names: Conv2d/resnet50.layer2.0.conv2/fwd/batch:32, Gemm/...,
# <Model>/train/batch:<N>; adjust when the fixtures change) ----
BENCH_FILTER=${BENCH_FILTER:-'^Gemm/square1024/|^Linear/transformer\.encoder\.0\.ffn\.fc1/|^Conv2d/resnet50\.layer2\.0\.conv2/|^LSTM/seq2seq\.encoder\.l1/|^MultiHeadAttention/transformer\.encoder\.0\.self_attn/|^BatchNorm2d/resnet50\.layer1\.0\.bn3/|^(ResNet50|Transformer)/train/'}
# Batches of the benchmarks above (the PyTorch side uses 32, and 16 for attention).
BENCH_BATCHES=${BENCH_BATCHES:-1,16,32}
BENCH_MATHS=${BENCH_MATHS:-"fp32 tf32"}
BENCH_ARGS=${BENCH_ARGS:-"--benchmark_min_time=0.05"}  # plus the flags below
BENCH_COUNTER_ARGS=${BENCH_COUNTER_ARGS:-""}           # e.g. "--tbd_counters=all" if the fixtures want one
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-150}   # per test binary
BENCH_TIMEOUT_S=${BENCH_TIMEOUT_S:-90}  # per math mode
TORCH_TIMEOUT_S=${TORCH_TIMEOUT_S:-120}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUNDLE=${BUNDLE:-$ROOT/build/gpu_bundle}
OUT=${OUT:-$ROOT/results/gpu/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
START=$(date +%s)
status=0

say() { echo "gpu_check: $*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - START)); }

# ---- 0. what can be checked anywhere ----
say "output in $OUT"
if python3 -m py_compile "$ROOT/scripts/torch_side_by_side.py"; then
  say "scripts/torch_side_by_side.py compiles"
else
  say "FAIL: scripts/torch_side_by_side.py does not compile"
  status=1
fi
have_bundle=0
if [[ -f "$BUNDLE/MANIFEST" && -f "$BUNDLE/lib/libtbd_core.so" ]]; then
  have_bundle=1
  say "bundle $BUNDLE: $(head -1 "$BUNDLE/MANIFEST")"
  ls "$BUNDLE"/bin/*cuda*_test >/dev/null 2>&1 || say "note: the bundle has no CUDA test binaries"
  [[ -x "$BUNDLE/bin/tbd_bench" ]] || say "note: the bundle has no tbd_bench (benchmarks skipped)"
else
  say "no bundle at $BUNDLE: run scripts/pack_gpu_bundle.sh on the build machine and carry build/gpu_bundle"
fi

# PyTorch's CUDA libraries: site-packages/nvidia/<pkg>/lib (cu13/lib holds cudart, cuBLAS, CUPTI).
TORCH_NVIDIA_LIBS=$(python3 - <<'EOF' 2>/dev/null
import glob, os, site, sys
dirs = []
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    dirs += sorted(glob.glob(os.path.join(sp, "nvidia", "*", "lib")))
print(":".join(dirs))
EOF
)
export TBD_LD_PATH="$BUNDLE/lib${TORCH_NVIDIA_LIBS:+:$TORCH_NVIDIA_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
run_tbd() { LD_LIBRARY_PATH="$TBD_LD_PATH" "$@"; }

if ((have_bundle)); then
  missing=""
  for b in "$BUNDLE"/bin/*; do
    m=$(run_tbd ldd "$b" 2>/dev/null | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
    [[ -n "$m" ]] && missing+="$(basename "$b"): $m; "
  done
  if [[ -n "$missing" ]]; then
    say "unresolved libraries (CUDA ones come from PyTorch's pip wheels on the GPU machine): $missing"
  else
    say "every library of the bundled binaries resolves"
  fi
  if [[ -n "$TORCH_NVIDIA_LIBS" ]]; then
    nvperf=0
    IFS=: read -ra lib_dirs <<< "$TORCH_NVIDIA_LIBS"
    for d in "${lib_dirs[@]}"; do [[ -e "$d/libnvperf_host.so" ]] && nvperf=1; done
    ((nvperf)) || say "note: no libnvperf_host.so beside PyTorch's CUPTI: FLOP counters will be absent"
  fi
fi

# ---- is there a GPU? ----
gpu=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
fi
if [[ -z "$gpu" ]]; then
  say "DRY RUN: no NVIDIA GPU here (nvidia-smi absent or sees no device); checked only the above"
  exit $status
fi
say "GPU: $gpu"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
if ((!have_bundle)); then
  say "nothing to run without the bundle"
  exit 2
fi
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" \
  2>&1 | tee -a "$SUMMARY"
build_cudnn=$(grep -o 'CUDNN_MAJOR=[0-9]* CUDNN_MINOR=[0-9]*' "$BUNDLE/MANIFEST" | tr -dc '0-9 ' | awk '{print $1*10000+$2*100}')
run_cudnn=$(python3 -c "import torch; print(torch.backends.cudnn.version() or 0)" 2>/dev/null || echo 0)
if [[ -n "$build_cudnn" && "$run_cudnn" -lt "$build_cudnn" ]]; then
  say "WARNING: PyTorch's cuDNN $run_cudnn is older than the build's $build_cudnn: cuDNN layers may fail"
fi

# ---- 2. CUDA tests ----
mkdir -p "$OUT/tests"
for t in "$BUNDLE"/bin/*_test; do
  [[ -x "$t" ]] || continue
  name=$(basename "$t")
  # A layer suite runs each case on every target; its CPU instances run in CI.
  filter='*'
  [[ "$name" == *cuda* ]] || filter='*cuda_fp32*:*cuda_tf32*'
  run_tbd timeout "$TEST_TIMEOUT_S" "$t" --gtest_filter="$filter" \
    --gtest_output="xml:$OUT/tests/$name.xml" > "$OUT/tests/$name.log" 2>&1
  rc=$?
  line=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]' "$OUT/tests/$name.log" | head -3 | tr '\n' ' ')
  if ((rc == 0)); then
    say "test $name: ok ($line)"
  else
    status=1
    say "test $name: FAILED rc=$rc ($line); see tests/$name.log"
    grep -E '^\[  FAILED  \]' "$OUT/tests/$name.log" | sort -u | head -20 | tee -a "$SUMMARY"
  fi
  grep -h "CUPTI TF32 calibration" "$OUT/tests/$name.log" | tee -a "$SUMMARY"
done
say "tests done after $(elapsed) s"

# ---- 3. quick benchmark set with counters ----
tbd_json_args=()
if [[ -x "$BUNDLE/bin/tbd_bench" ]]; then
  for m in $BENCH_MATHS; do
    # shellcheck disable=SC2086
    run_tbd timeout "$BENCH_TIMEOUT_S" "$BUNDLE/bin/tbd_bench" --tbd_backend=cuda --tbd_math="$m" --tbd_batches="$BENCH_BATCHES" \
      --benchmark_filter="$BENCH_FILTER" --benchmark_out="$OUT/bench_$m.json" \
      --benchmark_out_format=json $BENCH_ARGS $BENCH_COUNTER_ARGS > "$OUT/bench_$m.log" 2>&1
    rc=$?
    if ((rc == 0)); then
      say "tbd_bench $m: ok ($(grep -c '"name"' "$OUT/bench_$m.json" 2>/dev/null || echo 0) rows)"
    else
      status=1
      say "tbd_bench $m: FAILED rc=$rc (124 = over ${BENCH_TIMEOUT_S} s); see bench_$m.log"
      tail -5 "$OUT/bench_$m.log" | tee -a "$SUMMARY"
    fi
    [[ -s "$OUT/bench_$m.json" ]] && tbd_json_args+=(--tbd-json "$m=$OUT/bench_$m.json")
  done
fi
say "benchmarks done after $(elapsed) s"

# ---- 4. PyTorch side by side (its table is the last thing printed) ----
say "PyTorch side by side (time limit ${TORCH_TIMEOUT_S} s); total so far $(elapsed) s"
timeout "$TORCH_TIMEOUT_S" python3 "$ROOT/scripts/torch_side_by_side.py" "${tbd_json_args[@]}" \
  --out "$OUT/torch.json" 2> "$OUT/torch.log" | tee "$OUT/table.txt"
rc=${PIPESTATUS[0]}
if ((rc != 0)); then
  status=1
  say "torch_side_by_side: FAILED rc=$rc; see torch.log"
  tail -5 "$OUT/torch.log"
fi
echo "gpu_check: finished in $(elapsed) s, status $status; results in $OUT" >> "$SUMMARY"
exit $status
