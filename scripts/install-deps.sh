#!/usr/bin/env bash
# Installs fp8lab's build and test dependencies from Debian packages, only those missing.
# Idempotent: a second run installs nothing and touches no package list.
set -euo pipefail

pkgs=(cmake make gcc g++ pkg-config libgsl-dev libpng-dev check libsubunit-dev libinih-dev
      libjansson-dev libplplot-dev plplot-driver-cairo fonts-dejavu-core libopenblas-dev
      python3-nbformat)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python is for cross-checks only (tools/reference): numpy and ml_dtypes from PyPI, into the
# python3 found on PATH (the one the tests run).
if command -v python3 >/dev/null 2>&1; then
  if ! python3 -c "import numpy, ml_dtypes" >/dev/null 2>&1; then
    echo "install-deps: pip installing numpy ml_dtypes" >&2
    python3 -m pip install --quiet --disable-pip-version-check numpy ml_dtypes >&2 ||
      echo "install-deps: warning: numpy/ml_dtypes not installed; the Python cross-checks will be skipped" >&2
  fi
fi
