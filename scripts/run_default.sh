#!/usr/bin/env bash
# scripts/run_default.sh: the quick default run (README, Quick start).
#
# Builds tbd_bench if needed (Release preset, CUDA when the toolkit is found), then runs the
# default set: every layer kind and optimizer at one small configuration and every registered
# model at its quick batch (--tbd_quick). Prints the readable table with a [k/n] progress
# counter and writes the full JSON to results/<short commit>-<UTC time>.json, never over an
# earlier file (tbd_bench writes <file>.<pid>.tmp and renames it when the run is complete,
# never over a file another run wrote meanwhile).
# Extra arguments go to tbd_bench, e.g. --tbd_backend=cpu or --benchmark_filter=Conv2d.
# Environment: TBD_BENCH=<binary> skips the build; TBD_MIN_TIME (default 0.2) seconds per row;
# TBD_OUT=<file.json> writes there instead (scripts/soak.py); it must not exist yet.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${TBD_BENCH:-}
if [[ -z "$bin" ]]; then
  bin="$root/build/release/tbd_bench"
  if [[ ! -f "$root/build/release/build.ninja" ]]; then
    cmake --preset release -S "$root" >/dev/null
  fi
  cmake --build "$root/build/release" --target tbd_bench
fi
[[ -x "$bin" ]] || { echo "run_default.sh: no tbd_bench at $bin" >&2; exit 1; }

mkdir -p "$root/results"
commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo nogit)
if [[ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  commit="$commit-dirty"
fi
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="$root/results/$commit-$stamp.json"
n=1
while [[ -e "$out" ]] || compgen -G "$out.*.tmp" >/dev/null; do
  out="$root/results/$commit-$stamp-$n.json"
  n=$((n + 1))
done
if [[ -n "${TBD_OUT:-}" ]]; then
  [[ ! -e "$TBD_OUT" ]] || { echo "run_default.sh: TBD_OUT=$TBD_OUT exists already" >&2; exit 2; }
  out=$TBD_OUT
fi

# Threads wait passively at OpenMP barriers unless the caller says otherwise: on a shared
# machine, spinning threads hold the cores their descheduled peers need and a 50 us layer can
# take 8 ms. On a quiet machine the cost is a few microseconds per parallel region. The
# policy in effect is recorded in the JSON context (omp_wait_policy).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

echo "tbd: quick default run -> $out" >&2
exec "$bin" --tbd_quick --benchmark_min_time="${TBD_MIN_TIME:-0.2}" --benchmark_out="$out" "$@"
