#!/usr/bin/env bash
# scripts/pack_gpu_bundle.sh: packs the binaries built here for a GPU machine without a toolchain
# for our dependencies (see scripts/gpu_check.sh, which runs them there).
#
# Usage (here, after `cmake --preset release && cmake --build build/release`):
#   scripts/pack_gpu_bundle.sh [BUILD_DIR] [BUNDLE_DIR]      # defaults: build/release build/gpu_bundle
#
# The GPU machine has CUDA 13, PyTorch and its pip NVIDIA libraries, but no Google Benchmark, no
# oneDNN, no apt and no network. So the bundle carries:
#   bin/    tbd_bench (if built), the CUDA test binaries (tests/*cuda*_test) and the layer suites
#           (the tests/layers/*_test.cpp that run their cases on every target, CUDA included,
#           against float64, and bf16_test with its CUDA cases); ALL_TESTS=1 packs every test binary, which may not fit. The
#           copies here and of libtbd_*.so are stripped (strip --strip-unneeded) where binutils is
#   lib/    libtbd_*.so and every library they load that is neither glibc nor a CUDA library:
#           libbenchmark.so.1debian, libdnnl.so.2, libgomp.so.1, libOpenCL.so.1, libstdc++.so.6,
#           libgcc_s.so.1, ... (found with ldd here)
#   MANIFEST  what was packed, sizes, the build's git commit and the CUDA libraries expected
#             from the GPU machine (torch's site-packages/nvidia/*/lib).
# CUDA libraries (cudart, cuBLAS(Lt), cuDNN, CUPTI, nvperf) are NOT packed: they come from the
# machine, where they match its driver. patchelf may not exist here, so there is no $ORIGIN
# rpath; gpu_check.sh puts lib/ first on LD_LIBRARY_PATH instead. The whole bundle must stay
# under 64 MiB compressed (what a session can carry to the GPU machine: build/gpu_bundle.tar.xz); the script fails above that.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${1:-$ROOT/build/release}
BUNDLE_DIR=${2:-$ROOT/build/gpu_bundle}
LIMIT_BYTES=$((64 * 1024 * 1024))

die() { echo "pack_gpu_bundle: $*" >&2; exit 1; }

# The engine's libraries, one per layer of the tree (core, backends, layers, models).
engine_libs=("$BUILD_DIR"/libtbd_*.so)
[[ -f "${engine_libs[0]}" ]] || die "no $BUILD_DIR/libtbd_*.so: build first (cmake --preset release && cmake --build build/release)"
grep -q "TBD_CUDA:BOOL=ON" "$BUILD_DIR/CMakeCache.txt" 2>/dev/null ||
  die "$BUILD_DIR was configured without CUDA (TBD_CUDA=OFF): nothing to run on a GPU"

rm -rf "$BUNDLE_DIR"
mkdir -p "$BUNDLE_DIR/bin" "$BUNDLE_DIR/lib"

binaries=()
[[ -x "$BUILD_DIR/tbd_bench" ]] && binaries+=("$BUILD_DIR/tbd_bench")
test_glob='*cuda*_test'
[[ "${ALL_TESTS:-0}" == 1 ]] && test_glob='*_test'
for t in "$BUILD_DIR"/tests/$test_glob; do [[ -x "$t" ]] && binaries+=("$t"); done
if [[ "${ALL_TESTS:-0}" != 1 ]]; then
  # The suites that run on the targets (tests/support/check.h); bytes_test and the like do not.
  for src in $(grep -l 'on_all_targets\|TargetTest\|TBD_CUDA_BF16_BACKEND' "$ROOT"/tests/layers/*_test.cpp); do
    t="$BUILD_DIR/tests/$(basename "$src" .cpp)"
    [[ -x "$t" ]] && binaries+=("$t")
  done
fi
((${#binaries[@]})) || die "no binaries in $BUILD_DIR"
[[ -x "$BUILD_DIR/tbd_bench" ]] || echo "pack_gpu_bundle: note: no tbd_bench in $BUILD_DIR (tests only)" >&2

for b in "${binaries[@]}"; do cp -p "$b" "$BUNDLE_DIR/bin/"; done
cp -p "${engine_libs[@]}" "$BUNDLE_DIR/lib/"
# The copies lose their static symbol tables (about 30 % of a test binary; the dynamic symbols
# that loading needs stay), so that the bundle fits the carry limit as suites are added.
if command -v strip >/dev/null 2>&1; then
  strip --strip-unneeded "$BUNDLE_DIR"/bin/* "$BUNDLE_DIR"/lib/libtbd_*.so
fi

# Libraries the GPU machine provides itself (glibc and the dynamic loader) or through PyTorch's
# pip wheels (CUDA): never packed.
skip_re='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libutil\.so|libresolv\.so|libcudart|libcublas|libcublasLt|libcudnn|libcupti|libnvperf|libcuda\.so|libnvrtc|libnvJitLink|libnccl|libtbd_)'
declare -A packed=()
for b in "${binaries[@]}" "${engine_libs[@]}"; do
  while read -r name _ path _; do
    [[ -n "${path:-}" && -f "$path" ]] || continue
    [[ "$name" =~ $skip_re ]] && continue
    [[ -n "${packed[$name]:-}" ]] && continue
    cp -L "$path" "$BUNDLE_DIR/lib/$name"
    packed[$name]=$path
  done < <(ldd "$b" | awk '$2 == "=>" {print $1, $2, $3, $4}')
done

commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  echo "tbd GPU bundle, packed $(date -u +%Y-%m-%dT%H:%M:%SZ) from commit $commit ($BUILD_DIR)"
  echo "built against: $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1)"
  grep -h "define CUDNN_M[AI][JN]OR\|define CUDNN_PATCHLEVEL" /usr/local/cuda/include/cudnn_version.h 2>/dev/null |
    awk '{printf "%s=%s ", $2, $3} END {print ""}'
  echo "needs from the GPU machine: libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcupti.so.13"
  echo "  libnvperf_host.so (loaded by CUPTI for FLOP counters) libcudnn.so.9 (>= the version above)"
  echo "  libnccl.so.2 (--tbd_dist=nccl; PyTorch's nvidia-nccl wheel)"
  echo "  and glibc >= 2.34"
  echo "files:"
  (cd "$BUNDLE_DIR" && find bin lib -type f -printf '  %p %s\n' | sort)
} > "$BUNDLE_DIR/MANIFEST"

total=$(du -sb "$BUNDLE_DIR" | cut -f1)
# What travels is the bundle compressed (oneDNN alone is 40 MiB unpacked): $BUNDLE_DIR.tar.xz,
# which gpu_check.sh unpacks where the folder is absent. Carry the archive, not the folder.
tar -cf - -C "$(dirname "$BUNDLE_DIR")" "$(basename "$BUNDLE_DIR")" | xz -T0 -6 > "$BUNDLE_DIR.tar.xz"
packed_bytes=$(stat -c %s "$BUNDLE_DIR.tar.xz")
echo "pack_gpu_bundle: $BUNDLE_DIR: ${#binaries[@]} binaries, ${#packed[@]} libraries, $((total / 1024 / 1024)) MiB; $BUNDLE_DIR.tar.xz $((packed_bytes / 1024 / 1024)) MiB (carry this)"
((packed_bytes <= LIMIT_BYTES)) || die "the archive is $((packed_bytes / 1024 / 1024)) MiB, over the 64 MiB carry limit"
