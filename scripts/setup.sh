#!/usr/bin/env bash
# One-shot set-up of a fresh Debian host: system packages, Python packages, and
# this project built and installed. Idempotent; safe to run before every command.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

# GoogleTest (C++ tests), UCX (transport between hosts; ucx_perftest for its ceiling), Open MPI (peer
# benchmarks), iproute2 (the tests that make two real hosts from network namespaces).
APT_PKGS="build-essential pkg-config libgtest-dev googletest libucx-dev ucx-utils openmpi-bin libopenmpi-dev iproute2"
missing=""
for p in $APT_PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: apt-get install$missing"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi

echo "setup: pip install -r requirements-dev.txt"
"$PY" -m pip install -q -r requirements-dev.txt
"$PY" -m pip show torch >/dev/null  # fail here, not later, if torch did not install

echo "setup: building and installing hyper_parallel"
"$PY" -m pip install -q --no-build-isolation -e .
"$PY" -c "import hyper_parallel._hpshmem" || { echo "setup: the extension did not install" >&2; exit 1; }
echo "setup: done"
