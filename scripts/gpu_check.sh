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
#   3. a quick tbd_bench set on --tbd_backend=cuda in both math modes with the counters,
#      Google Benchmark JSON per mode (bench_<mode>.json, bench_<mode>_ds2.json):
#      - at batches 1, 16 and 32 (BENCH_FILTER, BENCH_BATCHES): a 1024^3 GEMM; from the
#        Transformer its FFN Linear and self-attention; from ResNet-50 a 3x3 Conv2d and a
#        BatchNorm2d; from Seq2Seq the encoder LSTM, the decoder's layer-0 LSTMCell and its
#        MlpAttention; from DeepSpeech2 (1000 frames) GRU layers 0 and 1 and the CtcLoss
#        (cuDNN); from Inception-v3 a 1x7 Conv2d (Mixed_6e); from Faster R-CNN the RoIPool
#        (forward and its scatter backward) and the Proposal (decode, sort, NMS kernels);
#        every phase (fwd, bwd, fwdbwd);
#        and the ResNet50, InceptionV3, Transformer and Seq2Seq training steps
#      - in a second run at batches 2 and 8 (DS2_FILTER, DS2_BATCHES): the DeepSpeech2
#        training step at 1000 frames (about 0.7 TFLOP per utterance and 3 GB of weights,
#        gradients and momentum: the larger batches would cost more time than they tell)
#      - in a third run at batch 16 (GAN_FILTER, GAN_BATCHES): the WGAN-GP iteration (one
#        generator step and 5 critic steps with the double-backward penalty, about 0.24 TFLOP
#        per image)
#      - in a fourth run (A3C_FILTER, A3C_BATCHES, A3C_ARGS): A3C at t_max 5 with one
#        actor-learner (the CUDA backend runs no concurrent workers), 8 updates per iteration
#      - in a fifth run at batch 1 (FRCNN_FILTER, FRCNN_BATCHES): the Faster R-CNN training
#        step (one 600x1000 image, about 200 GMACs forward)
#      - in a sixth run at batches 4 and 8 (GPT2_FILTER, GPT2_BATCHES): GPT-2 124M at T 1024
#        (llm.c's configuration, the fused causal attention kind), and in bf16 at batches 4, 8
#        and 16 (GPT2_BF16_BATCHES), its tokens/s and MFU printed (lm_mfu.txt) per math mode
#      - in bf16 at batch 4 (LLAMA_FILTER, LLAMA_BATCHES): the Llama-3-style decoder at Llama
#        3.2 1B's shape, T 1024 (about 24 GiB of weights, gradients and AdamW state), its
#        tokens/s and MFU printed beside GPT-2's
#      - in fp32, the data-parallel step over NCCL at one rank (DIST_FILTER, DIST_BATCHES,
#        --tbd_dist=nccl: the box has one GPU, so one rank; bench_fp32_nccl.json), beside the
#        NCCL test (tests/cuda/nccl_cuda_test: that step equals the default step bit for bit),
#        and the scaling model (tools/track/dist_sim.py) on its profile (simulate_nccl.txt)
#   4. scripts/torch_side_by_side.py: PyTorch timings of the same layers and of the
#      Inception-v3, Seq2Seq, DeepSpeech2, WGAN-GP, A3C and Faster R-CNN training steps (the
#      models of tools/peers (the CPU side-by-side's peers); CUDA
#      events, warm-up) in fp32-strict and tf32, joined with the tbd JSON; its table of times
#      and ratios is printed LAST
# Everything goes under $OUT if set, else results/gpu/<UTC date-time>/ (logs, JSON, XML,
# summary.txt). Each step has a time limit (below), and every limit is cut to what is left of
# TOTAL_BUDGET_S (keeping TORCH_RESERVE_S for the last step), so the whole check stays under 8
# minutes; a step cut short or skipped for time fails the check.
#
# Usage, on the GPU machine, from the repository root:
#   scripts/gpu_check.sh                    # bundle in build/gpu_bundle (BUNDLE=... to change)
# On a machine without a GPU it checks what it can (bundle present and complete, the Python
# scripts compile, the binaries' non-CUDA libraries resolve, every tbd_bench row that
# torch_side_by_side.py pairs with a PyTorch case exists under the filters and batches below),
# says so, and exits 0 (dry run).
# Exit status: 0 all ran and passed (or dry run), 1 a test or step failed, 2 nothing to run.
set -uo pipefail

# ---- configuration (tbd_bench names: Conv2d/resnet50.layer2.0.conv2/fwd/batch:32, Gemm/...,
# <Model>/train/batch:<N>; list them with `tbd_bench --benchmark_list_tests`; adjust when the
# fixtures change, together with TBD_ROWS in scripts/torch_side_by_side.py, which step 0 checks
# against these filters and batches) ----
BENCH_FILTER=${BENCH_FILTER:-'^Gemm/square1024/|^Linear/transformer\.encoder\.0\.ffn\.fc1/|^Conv2d/resnet50\.layer2\.0\.conv2/|^MultiHeadAttention/transformer\.encoder\.0\.self_attn/|^BatchNorm2d/resnet50\.layer1\.0\.bn3/|^LSTM/seq2seq\.encoder\.rnn/|^LSTMCell/seq2seq\.decoder\.step0\.l0/|^MlpAttention/seq2seq\.decoder\.step0\.attention/|^GRU/deepspeech2\.rnn\.l[01]/|^CtcLoss/deepspeech2\.ctc/|^Conv2d/inceptionv3\.Mixed_6e\.branch7x7_2\.conv/|^RoIPool/fasterrcnn\.roi_pool/|^Proposal/fasterrcnn\.proposal/|^(ResNet50|InceptionV3|Transformer|Seq2Seq)/train/'}
# Batches of the benchmarks above (the PyTorch side uses 32, 16 for attention, 1 for the GEMM).
BENCH_BATCHES=${BENCH_BATCHES:-1,16,32}
# DeepSpeech2's training step, in a run of its own at its own batches (PyTorch's side: 8).
DS2_FILTER=${DS2_FILTER:-'^DeepSpeech2/train/'}
DS2_BATCHES=${DS2_BATCHES:-2,8}
# WGAN-GP's iteration, in a run of its own (PyTorch's side: 16, the issue's batch).
GAN_FILTER=${GAN_FILTER:-'^WGAN/train/'}
GAN_BATCHES=${GAN_BATCHES:-16}
# A3C with one worker (its PyTorch peer is one actor-learner too), in a run of its own.
A3C_FILTER=${A3C_FILTER:-'^A3C/train/'}
A3C_BATCHES=${A3C_BATCHES:-5}
A3C_ARGS=${A3C_ARGS:-"--tbd_model_args=actors:1"}
# Faster R-CNN at one image (TBD's batch; PyTorch's side: 1), in a run of its own.
FRCNN_FILTER=${FRCNN_FILTER:-'^FasterRCNN/train/'}
FRCNN_BATCHES=${FRCNN_BATCHES:-1}
# GPT-2 124M at T 1024 (llm.c's configuration), in a run of its own; no PyTorch side yet.
GPT2_FILTER=${GPT2_FILTER:-'^GPT2/train/'}
GPT2_BATCHES=${GPT2_BATCHES:-4,8}
GPT2_BF16_BATCHES=${GPT2_BF16_BATCHES:-4,8,16}
LLAMA_FILTER=${LLAMA_FILTER:-'^Llama/train/'}
LLAMA_BATCHES=${LLAMA_BATCHES:-4}
# The data-parallel ResNet-50 step over NCCL at one rank (fp32 only).
DIST_FILTER=${DIST_FILTER:-'^ResNet50/train/batch:32/ranks:1'}
DIST_BATCHES=${DIST_BATCHES:-32}
BENCH_MATHS=${BENCH_MATHS:-"fp32 tf32"}
# bf16 mixed precision (cuDNN and cuBLAS with bf16 tensors, f32 accumulation): the products of
# the set above and the convolutional models' steps, in a run of its own (PyTorch's side stays
# fp32 and tf32). The models with a kind that has no CUDA bf16 path yet are refused by name
# (the bf16 test does that), so they are not here.
BF16_FILTER=${BF16_FILTER:-'^Gemm/square1024/|^Linear/transformer\.encoder\.0\.ffn\.fc1/|^Conv2d/resnet50\.layer2\.0\.conv2/|^Conv2d/inceptionv3\.Mixed_6e\.branch7x7_2\.conv/|^(ResNet50|InceptionV3)/train/'}
BF16_BATCHES=${BF16_BATCHES:-16,32}
BENCH_ARGS=${BENCH_ARGS:-"--benchmark_min_time=0.05"}  # plus the flags below
BENCH_COUNTER_ARGS=${BENCH_COUNTER_ARGS:-""}           # e.g. "--tbd_counters=all" if the fixtures want one
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-150}    # per test binary
BENCH_TIMEOUT_S=${BENCH_TIMEOUT_S:-120}  # per math mode, the BENCH_FILTER run
DS2_TIMEOUT_S=${DS2_TIMEOUT_S:-60}       # per math mode, the DS2_FILTER run
GAN_TIMEOUT_S=${GAN_TIMEOUT_S:-40}       # per math mode, the GAN_FILTER run
A3C_TIMEOUT_S=${A3C_TIMEOUT_S:-20}       # per math mode, the A3C_FILTER run
FRCNN_TIMEOUT_S=${FRCNN_TIMEOUT_S:-30}   # per math mode, the FRCNN_FILTER run
BF16_TIMEOUT_S=${BF16_TIMEOUT_S:-45}     # the BF16_FILTER run
GPT2_TIMEOUT_S=${GPT2_TIMEOUT_S:-30}     # per math mode, the GPT2_FILTER run
LLAMA_TIMEOUT_S=${LLAMA_TIMEOUT_S:-40}   # the LLAMA_FILTER run (bf16)
DIST_TIMEOUT_S=${DIST_TIMEOUT_S:-30}     # the DIST_FILTER run (fp32)
TORCH_TIMEOUT_S=${TORCH_TIMEOUT_S:-120}
TOTAL_BUDGET_S=${TOTAL_BUDGET_S:-470}    # the whole check; every limit above is cut to what is left
TORCH_RESERVE_S=${TORCH_RESERVE_S:-75}   # of it, keeping this much for the PyTorch step (its table)

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUNDLE=${BUNDLE:-$ROOT/build/gpu_bundle}
# What is carried to the GPU machine is the compressed bundle (pack_gpu_bundle.sh): unpack it.
if [[ ! -d "$BUNDLE" && -f "$BUNDLE.tar.xz" ]]; then
  mkdir -p "$(dirname "$BUNDLE")" && tar -xJf "$BUNDLE.tar.xz" -C "$(dirname "$BUNDLE")"
fi
OUT=${OUT:-$ROOT/results/gpu/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
START=$(date +%s)
status=0

say() { echo "gpu_check: $*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - START)); }
# limit_s WANT [RESERVE]: a step's time limit, WANT cut to what is left of TOTAL_BUDGET_S less
# RESERVE (0 when nothing is).
limit_s() {
  local want=$1 left=$((START + TOTAL_BUDGET_S - ${2:-0} - $(date +%s)))
  ((left < want)) && want=$left
  echo $((want > 0 ? want : 0))
}

# ---- 0. what can be checked anywhere ----
say "output in $OUT"
# torch_side_by_side.py imports the peers (tools/peers) for its model cases.
for py in scripts/torch_side_by_side.py tools/peers/*.py; do
  if python3 -m py_compile "$ROOT/$py"; then
    say "$py compiles"
  else
    say "FAIL: $py does not compile"
    status=1
  fi
done
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

# Every tbd_bench row that torch_side_by_side.py pairs with a PyTorch case must be among those
# step 3 runs (names from the bundle's tbd_bench, listed on the CPU backend: no device needed).
if ((have_bundle)) && [[ -x "$BUNDLE/bin/tbd_bench" ]]; then
  names=$OUT/bench_names.txt
  {
    run_tbd timeout 60 "$BUNDLE/bin/tbd_bench" --tbd_backend=cpu --benchmark_list_tests \
      --tbd_batches="$BENCH_BATCHES" --benchmark_filter="$BENCH_FILTER"
    run_tbd timeout 60 "$BUNDLE/bin/tbd_bench" --tbd_backend=cpu --benchmark_list_tests \
      --tbd_batches="$DS2_BATCHES" --benchmark_filter="$DS2_FILTER"
    run_tbd timeout 60 "$BUNDLE/bin/tbd_bench" --tbd_backend=cpu --benchmark_list_tests \
      --tbd_batches="$GAN_BATCHES" --benchmark_filter="$GAN_FILTER"
    # shellcheck disable=SC2086
    run_tbd timeout 60 "$BUNDLE/bin/tbd_bench" --tbd_backend=cpu --benchmark_list_tests \
      --tbd_batches="$A3C_BATCHES" --benchmark_filter="$A3C_FILTER" $A3C_ARGS
    run_tbd timeout 60 "$BUNDLE/bin/tbd_bench" --tbd_backend=cpu --benchmark_list_tests \
      --tbd_batches="$FRCNN_BATCHES" --benchmark_filter="$FRCNN_FILTER"
  } > "$names" 2> "$OUT/bench_names.log"
  if python3 "$ROOT/scripts/torch_side_by_side.py" --check-names "$names" > "$OUT/check_names.txt" 2>&1; then
    say "$(tail -1 "$OUT/check_names.txt")"
  else
    status=1
    say "FAIL: TBD_ROWS of torch_side_by_side.py and the filters here disagree (see bench_names.txt):"
    tee -a "$SUMMARY" < "$OUT/check_names.txt"
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
  [[ "$name" == *cuda* ]] || filter='*cuda_fp32*:*cuda_tf32*:*OnCuda*:CudaBf16.*'
  limit=$(limit_s "$TEST_TIMEOUT_S" "$TORCH_RESERVE_S")
  if ((limit < TEST_TIMEOUT_S && limit < 5)); then
    status=1
    say "test $name: SKIPPED: the check's ${TOTAL_BUDGET_S} s are spent"
    continue
  fi
  run_tbd timeout "$limit" "$t" --gtest_filter="$filter" \
    --gtest_output="xml:$OUT/tests/$name.xml" > "$OUT/tests/$name.log" 2>&1
  rc=$?
  line=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]' "$OUT/tests/$name.log" | head -3 | tr '\n' ' ')
  if ((rc == 0)); then
    say "test $name: ok ($line)"
  else
    status=1
    say "test $name: FAILED rc=$rc (124 = over ${limit} s) ($line); see tests/$name.log"
    grep -E '^\[  FAILED  \]' "$OUT/tests/$name.log" | sort -u | head -20 | tee -a "$SUMMARY"
  fi
  grep -h "CUPTI TF32 calibration" "$OUT/tests/$name.log" | tee -a "$SUMMARY"
done
say "tests done after $(elapsed) s"

# ---- 3. quick benchmark set with counters ----
tbd_json_args=()
# run_bench MODE TAG FILTER BATCHES TIMEOUT_S [ARGS]: one tbd_bench run into
# bench_<MODE><TAG>.json (ARGS: more tbd_bench flags).
run_bench() {
  local m=$1 tag=$2 filter=$3 batches=$4 extra=${6:-} limit rc
  local json=$OUT/bench_$m$tag.json log=$OUT/bench_$m$tag.log
  limit=$(limit_s "$5" "$TORCH_RESERVE_S")
  if ((limit < $5 && limit < 10)); then
    status=1
    say "tbd_bench $m$tag: SKIPPED: the check's ${TOTAL_BUDGET_S} s are spent"
    return
  fi
  # shellcheck disable=SC2086
  run_tbd timeout "$limit" "$BUNDLE/bin/tbd_bench" --tbd_backend=cuda --tbd_math="$m" --tbd_batches="$batches" \
    --benchmark_filter="$filter" --benchmark_out="$json" \
    --benchmark_out_format=json $BENCH_ARGS $BENCH_COUNTER_ARGS $extra > "$log" 2>&1
  rc=$?
  if ((rc == 0)); then
    say "tbd_bench $m$tag: ok ($(grep -c '"name"' "$json" 2>/dev/null || echo 0) rows) after $(elapsed) s"
  else
    status=1
    say "tbd_bench $m$tag: FAILED rc=$rc (124 = over ${limit} s); see bench_$m$tag.log"
    tail -5 "$log" | tee -a "$SUMMARY"
  fi
  # PyTorch's side has fp32 and tf32 cases only.
  [[ -s "$json" && "$m" != bf16 ]] && tbd_json_args+=(--tbd-json "$m=$json")
}
if [[ -x "$BUNDLE/bin/tbd_bench" ]]; then
  for m in $BENCH_MATHS; do
    run_bench "$m" "" "$BENCH_FILTER" "$BENCH_BATCHES" "$BENCH_TIMEOUT_S"
    run_bench "$m" _ds2 "$DS2_FILTER" "$DS2_BATCHES" "$DS2_TIMEOUT_S"
    run_bench "$m" _gan "$GAN_FILTER" "$GAN_BATCHES" "$GAN_TIMEOUT_S"
    run_bench "$m" _a3c "$A3C_FILTER" "$A3C_BATCHES" "$A3C_TIMEOUT_S" "$A3C_ARGS"
    run_bench "$m" _frcnn "$FRCNN_FILTER" "$FRCNN_BATCHES" "$FRCNN_TIMEOUT_S"
    run_bench "$m" _gpt2 "$GPT2_FILTER" "$GPT2_BATCHES" "$GPT2_TIMEOUT_S"
  done
  run_bench bf16 _gpt2 "$GPT2_FILTER" "$GPT2_BF16_BATCHES" "$GPT2_TIMEOUT_S"
  run_bench bf16 _llama "$LLAMA_FILTER" "$LLAMA_BATCHES" "$LLAMA_TIMEOUT_S"
  # The language models: tokens/s and MFU (model FLOPs per token: 6N + 6LCT for GPT-2, its
  # grouped-query form for Llama).
  runs=()
  for m in $BENCH_MATHS; do runs+=("${m}_gpt2"); done
  for run in "${runs[@]}" bf16_gpt2 bf16_llama; do
    [[ -s "$OUT/bench_$run.json" ]] || continue
    python3 - "$OUT/bench_$run.json" "${run%%_*}" "${run#*_}" <<'PY' | tee -a "$SUMMARY" "$OUT/lm_mfu.txt"
import json, sys
d = json.load(open(sys.argv[1]))
model = {"gpt2": "GPT-2", "llama": "Llama"}[sys.argv[3]]
print("%s %s: time per step, tokens/s, mfu (of the %s peak)" % (model, sys.argv[2], sys.argv[2]))
for b in d.get("benchmarks", []):
    if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
        continue
    t = "%.4g %s" % (b.get("real_time", 0), b.get("time_unit", "ns"))
    tok, mfu = b.get("tokens_per_second"), b.get("mfu")
    print("  %-40s %14s  %12s  %s" % (b["name"], b.get("error_message", t),
                                      "-" if tok is None else "%.0f" % tok,
                                      "-" if mfu is None else "%.1f%%" % (100 * mfu)))
PY
  done
  run_bench bf16 "" "$BF16_FILTER" "$BF16_BATCHES" "$BF16_TIMEOUT_S"
  if [[ -s "$OUT/bench_bf16.json" ]]; then  # the bf16 rows against the bf16 tensor-core roof
    python3 - "$OUT/bench_bf16.json" <<'PY' | tee -a "$SUMMARY"
import json, sys
d = json.load(open(sys.argv[1]))
print("bf16 rows: time per iteration, bf16_utilization (of %s)" % d.get("context", {}).get("peak_bf16_method", "the bf16 peak"))
for b in d.get("benchmarks", []):
    if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
        continue
    u = b.get("bf16_utilization")
    t = "%.4g %s" % (b.get("real_time", 0), b.get("time_unit", "ns"))
    print("  %-60s %14s  %s" % (b["name"], b.get("error_message", t),
                                "-" if u is None else "%.1f%%" % (100 * u)))
PY
  fi
  run_bench fp32 _nccl "$DIST_FILTER" "$DIST_BATCHES" "$DIST_TIMEOUT_S" "--tbd_dist=nccl"
  # The scaling model on the GPU's one-rank profile (its ready times are CUDA events): what
  # NVLink and InfiniBand would give at 2..512 GPUs. dist_sim needs no scipy (the box has none
  # from Debian), so it runs without the tbd_track front end.
  if [[ -s "$OUT/bench_fp32_nccl.json" ]]; then
    if PYTHONPATH="$ROOT/tools" python3 - "$OUT/bench_fp32_nccl.json" > "$OUT/simulate_nccl.txt" \
        2>&1 <<'PY'
import argparse, sys
from track import dist_sim
p = argparse.ArgumentParser()
dist_sim.add_parser(p.add_subparsers())
a = p.parse_args(["simulate", sys.argv[1], "--link", "NVLink,100GbIB", "--ranks", "2,8,64,512"])
sys.exit(a.func(a))
PY
    then
      say "scaling model on the GPU profile: ok (simulate_nccl.txt)"
    else
      say "scaling model on the GPU profile: FAILED; see simulate_nccl.txt"
    fi
  fi
  # Two NCCL ranks on the one GPU (each its own NCCL_HOSTID, so NCCL takes them for two nodes
  # over loopback sockets: a third party's recipe, unverified here): the AllReduce sweep's
  # correctness check and its loopback times, not a GPU link's.
  limit=$(limit_s "$DIST_TIMEOUT_S" "$TORCH_RESERVE_S")
  if ((limit >= 10)); then
    for r in 1 0; do
      LD_LIBRARY_PATH="$TBD_LD_PATH" TBD_RANK=$r TBD_WORLD_SIZE=2 NCCL_COMM_ID=127.0.0.1:29533 \
        NCCL_HOSTID=tbd$r NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket \
        timeout "$limit" "$BUNDLE/bin/tbd_bench" --tbd_backend=cuda --tbd_dist=nccl \
        --benchmark_filter='^AllReduce/' --tbd_allreduce_sizes=8,1048576,67108864 \
        --benchmark_min_time=0.05 --benchmark_out="$OUT/bench_nccl2.json" \
        > "$OUT/bench_nccl2_rank$r.log" 2>&1 &
    done
    wait
    if [[ -s "$OUT/bench_nccl2.json" ]]; then
      say "tbd_bench nccl 2 ranks on one GPU: ok ($(grep -c '"name"' "$OUT/bench_nccl2.json") rows)"
    else
      say "tbd_bench nccl 2 ranks on one GPU: no result (unverified recipe); see bench_nccl2_rank*.log"
    fi
  fi
fi
say "benchmarks done after $(elapsed) s"

# ---- 4. PyTorch side by side (its table is the last thing printed) ----
limit=$(limit_s "$TORCH_TIMEOUT_S")
if ((limit < TORCH_TIMEOUT_S && limit < 10)); then
  status=1
  say "PyTorch side by side: SKIPPED: the check's ${TOTAL_BUDGET_S} s are spent"
else
  say "PyTorch side by side (time limit ${limit} s); total so far $(elapsed) s"
  timeout "$limit" python3 "$ROOT/scripts/torch_side_by_side.py" "${tbd_json_args[@]}" \
    --out "$OUT/torch.json" 2> "$OUT/torch.log" | tee "$OUT/table.txt"
  rc=${PIPESTATUS[0]}
  if ((rc != 0)); then
    status=1
    say "torch_side_by_side: FAILED rc=$rc (124 = over ${limit} s, 1 = a case failed: its error is in the table); see torch.log"
    tail -5 "$OUT/torch.log"
  fi
fi
echo "gpu_check: finished in $(elapsed) s, status $status; results in $OUT" >> "$SUMMARY"
exit $status
