#!/usr/bin/env bash
# Installs fp8lab's build and test dependencies from Debian packages, only those missing.
# Open MPI (libopenmpi-dev, openmpi-bin): the MPI replay and its test (optional for the build).
# Idempotent: a second run installs nothing and touches no package list.
set -euo pipefail

pkgs=(cmake make gcc g++ pkg-config libgsl-dev libpng-dev check libsubunit-dev libinih-dev
      libjansson-dev libplplot-dev plplot-driver-cairo libcairo2-dev fonts-dejavu-core libopenblas-dev libopenblas-pthread-dev
      libssl-dev python3-nbformat libopenmpi-dev openmpi-bin)

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
# python3 found on PATH (the one the tests run). Without them the Python cross-checks skip
# (exit 77), which is fine on a developer's machine without network; in CI they must run:
# FP8LAB_REQUIRE_PYDEPS=1 (.ci/run sets it) makes a missing python3 or a refused pip install
# (no network, no pip, PEP 668 "externally-managed-environment") an error here, and makes the
# tests fail instead of skipping (tests/run/test_replay.py, tests/tools/reference/test_ref_*.py).
require_py=0
case "${FP8LAB_REQUIRE_PYDEPS:-}" in "" | 0) ;; *) require_py=1 ;; esac
pydeps_missing() { # message
  if [ "$require_py" = 1 ]; then
    echo "install-deps: error: $1, and FP8LAB_REQUIRE_PYDEPS is set (the Python checks must run)" >&2
    exit 1
  fi
  echo "install-deps: warning: $1; the Python checks will be skipped" >&2
}
# The notebook test (tests/report/test_notebooks.py) executes the report's notebooks with a real
# kernel: pandas, nbformat, nbclient and ipykernel, from PyPI as well: Debian's python3-pandas,
# python3-nbclient and python3-ipykernel would go to /usr/bin/python3, which need not be the
# python3 on PATH that CTest runs the test with (here a pyenv one).
if command -v python3 >/dev/null 2>&1; then
  # ml_dtypes >= 0.5: float4_e2m1fn, the FP4 tests' reference (tests/sim/test_fp4.py)
  mlcheck="import numpy, ml_dtypes; ml_dtypes.float4_e2m1fn"
  if ! python3 -c "$mlcheck" >/dev/null 2>&1; then
    echo "install-deps: pip installing numpy ml_dtypes>=0.5" >&2
    if ! python3 -m pip install --quiet --disable-pip-version-check numpy "ml_dtypes>=0.5" >&2; then
      pydeps_missing "pip install numpy ml_dtypes failed for $(command -v python3)"
    elif ! python3 -c "$mlcheck" >/dev/null 2>&1; then
      pydeps_missing "numpy/ml_dtypes still not importable by $(command -v python3) after pip install"
    fi
  fi
  # pyyaml: tests/report/test_frameworks.py reads megatron_precision.yaml as Megatron-LM does
  # (yaml.SafeLoader), the library Megatron itself uses for it
  nbmods="import pandas, nbformat, nbclient, ipykernel, yaml"
  if ! python3 -c "$nbmods" >/dev/null 2>&1; then
    echo "install-deps: pip installing pandas nbformat nbclient ipykernel pyyaml" >&2
    if ! python3 -m pip install --quiet --disable-pip-version-check pandas nbformat nbclient \
        ipykernel pyyaml >&2; then
      pydeps_missing "pip install pandas nbformat nbclient ipykernel pyyaml failed for $(command -v python3)"
    elif ! python3 -c "$nbmods" >/dev/null 2>&1; then
      pydeps_missing "pandas/nbformat/nbclient/ipykernel/yaml still not importable by $(command -v python3) after pip install"
    fi
  fi
  # fp8lab.te_tb (python/fp8lab/te_tb.py) reads TensorBoard event files with the tensorboard package's reader
  # (tests/tools/test_te_tb.py; issue 28)
  if ! python3 -c "import tensorboard" >/dev/null 2>&1; then
    echo "install-deps: pip installing tensorboard" >&2
    if ! python3 -m pip install --quiet --disable-pip-version-check tensorboard >&2; then
      pydeps_missing "pip install tensorboard failed for $(command -v python3)"
    elif ! python3 -c "import tensorboard" >/dev/null 2>&1; then
      pydeps_missing "tensorboard still not importable by $(command -v python3) after pip install"
    fi
  fi
else
  pydeps_missing "no python3 on PATH"
fi
