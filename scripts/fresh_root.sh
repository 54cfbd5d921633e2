#!/usr/bin/env bash
# scripts/fresh_root.sh: runs the README's Quick start lines in a clean Debian 12 root, the way a
# new user's machine would run them. A package that is only on this machine because somebody
# installed it by hand, and that scripts/setup.sh does not install, fails here.
#
#   scripts/fresh_root.sh            # Quick start line 2 (set-up + all tests): what CI runs
#   scripts/fresh_root.sh 1 2        # line 1 (set-up + default run), then line 2, same root
#   scripts/fresh_root.sh --line 2   # print Quick start line 2 and exit
#   scripts/fresh_root.sh --check    # say whether a clean root can be made here, make nothing
#
# The root holds only what a fresh machine of this kind has: compilers, CMake 3.25, Ninja, Git,
# Python, Google Benchmark, GoogleTest (the package list below), plus the CUDA toolkit mounted
# read-only at its usual prefix when this machine has one. The project is cloned from the
# committed HEAD: uncommitted changes are not seen.
#
# Environment:
#   TBD_FRESH_STOCK_CMAKE=1  use Debian's unpatched CMake modules in the root. This machine image
#                            patches FindCUDAToolkit.cmake; by default the root gets the same
#                            patch, as a fresh machine of this kind has it.
#   TBD_FRESH_CACHE=<dir>    where the root image, downloaded .debs and logs are kept
#                            (default ~/.cache/tbd-fresh-root). The image is rebuilt when the
#                            package list changes or it is older than 30 days.
#   TBD_FRESH_MIRROR=<url>   the Debian mirror (default http://deb.debian.org/debian).
#   TBD_FRESH_CMD=<command>  run this instead of Quick start lines.
#
# Exit status: that of the first failing command, 0 when all passed, 2 for bad usage, and
# 100 when no clean root can be made here (not root, no mount permission, no mirror, no
# mmdebstrap); the reason is printed in one line starting "fresh-root: cannot".
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
suite=bookworm
mirror=${TBD_FRESH_MIRROR:-http://deb.debian.org/debian}
cache=${TBD_FRESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tbd-fresh-root}
# What a fresh machine of this kind has before set-up (the toolchain, not the project's
# libraries): keep in step with the machine description, not with scripts/setup.sh.
base_pkgs=g++,gcc,make,cmake,ninja-build,git,python3,python3-dev,pkg-config,libbenchmark-dev
base_pkgs=$base_pkgs,libgtest-dev,libgmock-dev,libomp-dev,libblas-dev,liblapack-dev
base_pkgs=$base_pkgs,ca-certificates

say() { echo "fresh-root: $*"; }
cannot() { echo "fresh-root: cannot make a clean root here: $*" >&2; exit 100; }

quick_start_line() {  # the n-th command of the README's first code block under "## Quick start"
  awk '/^## Quick start/{q=1} q&&/^```/{n++; next} q&&n==1&&NF{print}' "$repo/README.md" |
    sed -n "${1}p"
}

check_only=0
case "${1:-}" in
  --line)
    [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "usage: $0 --line N" >&2; exit 2; }
    c=$(quick_start_line "$2")
    [ -n "$c" ] || { echo "fresh-root: README has no Quick start line $2" >&2; exit 2; }
    echo "$c"
    exit 0 ;;
  --check) check_only=1; shift ;;
  -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac

cmds=()
if ((check_only == 0)); then
  if [ -n "${TBD_FRESH_CMD:-}" ]; then
    cmds+=("$TBD_FRESH_CMD")
  else
    for l in "${@:-2}"; do
      [[ "$l" =~ ^[0-9]+$ ]] || { echo "fresh-root: not a Quick start line number: '$l'" >&2; exit 2; }
      c=$(quick_start_line "$l")
      [ -n "$c" ] || { echo "fresh-root: README has no Quick start line $l" >&2; exit 2; }
      cmds+=("$c")
    done
  fi
fi

# ---- can a clean root be made here? ----
[ "$(id -u)" -eq 0 ] || cannot "not root (chroot and mounts need root)"
command -v chroot >/dev/null || cannot "no chroot command"
mkdir -p "$cache" 2>/dev/null || cannot "cannot create the cache folder $cache"
probe=$(mktemp -d "$cache/probe.XXXXXX")
if ! mount -t tmpfs -o size=1m tbd-probe "$probe" 2>/dev/null; then
  rmdir "$probe"
  cannot "no permission to mount (a container without CAP_SYS_ADMIN?)"
fi
umount "$probe"
rmdir "$probe"
if ! command -v mmdebstrap >/dev/null; then
  command -v apt-get >/dev/null || cannot "no mmdebstrap and no apt-get to install it"
  say "installing mmdebstrap"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends mmdebstrap; } >"$cache/mmdebstrap-install.log" 2>&1 ||
    cannot "mmdebstrap is missing and apt-get could not install it (no mirror?): see $cache/mmdebstrap-install.log"
fi

key=$(printf '%s\n' "$suite" "$mirror" "$base_pkgs" | sha256sum | cut -c1-12)
image=$cache/$suite-$key.tar
if [ -s "$image" ] && [ -n "$(find "$image" -mtime +30)" ]; then
  say "the root image is older than 30 days: rebuilding it"
  rm -f "$image"
fi
if [ ! -s "$image" ]; then
  ((check_only)) && { say "a clean root can be made here (the image will be built first)"; exit 0; }
  say "building the clean Debian 12 root image once (about a minute, 1 GB) -> $image"
  rm -f "$cache"/"$suite"-*.tar  # older package lists
  if ! mmdebstrap --variant=apt --format=tar --include="$base_pkgs" "$suite" "$image.part" \
      "$mirror" >"$cache/image.log" 2>&1; then
    rm -f "$image.part"
    tail -3 "$cache/image.log" | sed 's/^/  | /' >&2
    cannot "mmdebstrap failed (no mirror at $mirror?): see $cache/image.log"
  fi
  mv "$image.part" "$image"
fi
((check_only)) && { say "a clean root can be made here (image $image)"; exit 0; }

# ---- the root: image + bind mounts; everything is undone on exit ----
root=$(mktemp -d "$cache/root.XXXXXX")
mounts=()  # mount points under $root, innermost last
bind() {  # bind SRC DST [ro]
  mkdir -p "$root$2"
  mount --bind "$1" "$root$2"
  mounts+=("$root$2")
  if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$root$2"; fi
}
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
  # Never delete through a mount that is still there (a bind mount of the apt cache or the
  # CUDA toolkit is on the same file system, so rm --one-file-system would not stop at it).
  if awk -v r="$root/" 'index($2 "/", r) == 1 {found = 1} END {exit !found}' /proc/self/mounts; then
    echo "fresh-root: mounts remain under $root; not deleting it" >&2
  else
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tar -xf "$image" -C "$root"
cp /etc/resolv.conf "$root/etc/resolv.conf"
if [ -z "${TBD_FRESH_STOCK_CMAKE:-}" ]; then
  # The machine image's patched FindCUDAToolkit (CMake 3.26's check that CUDA::nvToolsExt exists)
  m=$(dpkg -L cmake-data 2>/dev/null | grep '/FindCUDAToolkit.cmake$' | head -1 || true)
  if [ -n "$m" ] && [ -f "$m" ] && [ -f "$root$m" ] && ! cmp -s "$m" "$root$m"; then
    cp "$m" "$root$m"
    say "CMake modules: this machine's (FindCUDAToolkit patched); TBD_FRESH_STOCK_CMAKE=1 for Debian's"
  fi
else
  say "CMake modules: Debian's stock ones (TBD_FRESH_STOCK_CMAKE=1)"
fi
for d in proc sys dev; do bind "/$d" "/$d"; done
for d in /dev/pts /dev/shm; do if mountpoint -q "$d"; then bind "$d" "$d"; fi; done
# Downloaded .debs are kept between runs (apt checks each against the signed index); the
# build is not.
mkdir -p "$cache/apt-archives/partial"
bind "$cache/apt-archives" /var/cache/apt/archives
cuda=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /none/bin/nvcc)")")}
if [ -d "$cuda" ]; then  # as on this machine: the prefix may be a link to a versioned folder
  real=$(readlink -f "$cuda")
  bind "$real" "$real" ro
  [ "$real" = "$cuda" ] || { mkdir -p "$root$(dirname "$cuda")"; ln -sfn "$real" "$root$cuda"; }
  say "CUDA toolkit: $real mounted read-only at $cuda"
else
  cuda=
  say "CUDA toolkit: none on this machine (the build is CPU only)"
fi
git clone -q "$repo" "$root/opt/tbd"
head=$(git -C "$root/opt/tbd" rev-parse --short=12 HEAD)
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  say "note: the checkout has uncommitted changes; the root sees the committed HEAD $head only"
fi

log=$cache/last.log
: >"$log"
rc=0
for c in "${cmds[@]}"; do
  say "running in a clean Debian 12 root (HEAD $head): $c" | tee -a "$log"
  start=$(date +%s)
  # Only the machine's CUDA variables go in; nothing else of this shell's environment.
  set +e
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 CI="${CI:-true}" \
    PATH=${cuda:+$cuda/bin:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    ${cuda:+CUDA_HOME=$cuda} ${LIBRARY_PATH:+LIBRARY_PATH=$LIBRARY_PATH} \
    bash -c "cd /opt/tbd && $c" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  set -e
  secs=$(($(date +%s) - start))
  if ((rc == 0)); then
    say "passed in $secs s ($((secs / 60)) min $((secs % 60)) s): $c" | tee -a "$log"
  else
    ((rc == 100)) && rc=1  # 100 means "no clean root", not "the command failed"
    say "FAILED (exit $rc) after $secs s: $c (log: $log)" | tee -a "$log"
    break
  fi
done
exit $rc
