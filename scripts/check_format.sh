#!/usr/bin/env bash
# scripts/check_format.sh [--fix]: every tracked C++ and CUDA file is formatted as .clang-format
# says (Google style, 100 columns; clang-format 14, Debian 12's). Without --fix it changes
# nothing, names each file that would change and exits 1; with --fix it formats them in place.
# Exits 77 (a ctest skip) when clang-format is not installed.
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$fmt" ]; then
  echo "check_format: clang-format is not installed (apt-get install clang-format): skipped"
  exit 77
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  "$fmt" -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! "$fmt" --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "check_format: $f is not formatted (scripts/check_format.sh --fix)"
    bad=1
  fi
done
((bad == 0)) && echo "check_format: ${#files[@]} files formatted as .clang-format says"
exit $bad
