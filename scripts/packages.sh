# scripts/packages.sh: sourced by setup.sh and test.sh. ensure_packages WHO PKG...: installs the
# Debian packages that are missing (as root; apt-get, no recommends), or, without root, names
# them and fails.
ensure_packages() {
  local who=$1 p
  shift
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "$who: missing Debian packages and not root: run as root, or have them installed:" \
      "apt-get install ${missing[*]}" >&2
    return 1
  fi
  echo "$who: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
