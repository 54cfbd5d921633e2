#!/usr/bin/env bash
# scripts/run_default.sh: the default benchmark run (placeholder until tbd_bench lands).
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./build/release/tbd_bench --tbd_quick "$@"
