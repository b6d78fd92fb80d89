#!/usr/bin/env bash
# Installs what AggNet needs: Debian packages (as root) and a .venv/ with the pinned
# Python packages plus AggNet itself (editable). Idempotent; fast when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(mininet bridge-utils iputils-ping iproute2 nftables tcpdump iperf3 ethtool procps psmisc gcc libc6-dev python3-venv
          openssh-client openssh-server tar  # ssh, sshd, tar: `aggnet run --servers` (docs/cluster.md)
          libnanomsg5)  # aggnet switch --nanolog (BMv2's event log, p4target/nanolog.py)
PY=${PYTHON:-python3}
STAMP=.venv/.aggnet-setup-stamp

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: missing Debian packages (${missing[*]}); run as root to install them" >&2
    exit 1
  fi
  echo "setup.sh: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# From Debian's mininet we need mnexec (namespaces for hosts); Open vSwitch is not used (no recommends).
command -v mnexec >/dev/null || { echo "setup.sh: mnexec not found after installing mininet" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "setup.sh: creating .venv"
  "$PY" -m venv .venv
fi
# Reinstall only when the requirements or the project metadata changed.
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  echo "setup.sh: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -r requirements.txt
  .venv/bin/python -m pip install -q --no-deps -e .
  echo "$want" > "$STAMP"
fi

# The native engine's libraries for AggNet's own programs, built once per change, so switches
# start without compiling (a 364-lane program takes the C compiler a while). The stamp hashes what
# produces their C: the front end, the lowering, the C printer (backends/, externs/) and the engine.
native_want=$(find p4src p4target/native p4target/frontend p4target/lowered p4target/backends p4target/externs p4target/extern_registry.py p4target/constants.py -type f \( -name '*.p4' -o -name '*.[ch]' -o -name '*.py' \) \
  -not -path '*/__pycache__/*' | sort | xargs cat | sha256sum | cut -d' ' -f1)
NATIVE_STAMP=.venv/.aggnet-native-stamp
if command -v gcc >/dev/null && { [ ! -f "$NATIVE_STAMP" ] || [ "$(cat "$NATIVE_STAMP")" != "$native_want" ]; }; then
  echo "setup.sh: building the native engine for p4src/ programs"
  programs=$(ls p4src/aggnet*.p4 | grep -v lanes)
  # shellcheck disable=SC2086
  .venv/bin/aggnet p4 build $programs >/dev/null && echo "$native_want" > "$NATIVE_STAMP"
fi
