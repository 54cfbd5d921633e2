#!/usr/bin/env bash
# scripts/setup.sh: installs what tbd needs from Debian packages (as root; idempotent) and
# configures + builds the release preset. Nothing is vendored or downloaded at configure time.
# The CUDA backend is built when the toolkit is at /usr/local/cuda (it is on this machine kind).
set -euo pipefail
cd "$(dirname "$0")/.."

# ocl-icd-opencl-dev: Debian's oneDNN CMake config (dnnl-config.cmake) calls find_package(OpenCL)
# although libdnnl-dev only *recommends* the package; without it configure fails.
pkgs=(cmake ninja-build g++ git libbenchmark-dev libgtest-dev nlohmann-json3-dev libdnnl-dev
  ocl-icd-opencl-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages and not root: run as root or install: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
preset=${TBD_PRESET:-release}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
