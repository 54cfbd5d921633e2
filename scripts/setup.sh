#!/usr/bin/env bash
# scripts/setup.sh: installs what tbd needs from Debian packages (as root; idempotent) and
# configures + builds the release preset. Nothing is vendored or downloaded at configure time.
# The CUDA backend is built when the toolkit is at /usr/local/cuda (it is on this machine kind).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/packages.sh
# Build: compilers, CMake, Ninja, Google Benchmark, GoogleTest, nlohmann/json, oneDNN.
# ocl-icd-opencl-dev: Debian's oneDNN CMake config (dnnl-config.cmake) calls find_package(OpenCL)
# although libdnnl-dev only *recommends* the package; without it configure fails.
# python3-scipy (with numpy): tools/tbd_track, the per-commit tracker, and its tests.
# libopenmpi-dev, openmpi-bin: data-parallel training over MPI (--tbd_dist=mpi, mpirun).
ensure_packages setup cmake ninja-build g++ git libbenchmark-dev libgtest-dev nlohmann-json3-dev \
  libdnnl-dev ocl-icd-opencl-dev python3 python3-scipy python3-numpy libopenmpi-dev openmpi-bin

if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
preset=${TBD_PRESET:-release}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
