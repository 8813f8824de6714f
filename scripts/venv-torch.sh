#!/usr/bin/env bash
# venv-torch.sh: prints the path of the python of fp8lab's one virtual environment with a recent
# PyTorch and transformers from PyPI (the MoE capture tests: torch >= 2.9 for the grouped path on
# the CPU, transformers 5.x for the MoE classes; later the closed loop). Debian's python3-torch
# (1.13) stays for the other capture tests. Cached: a folder that already imports the pinned
# versions is reused. torchao (the closed loop's comparison with torchao's emulated FP8,
# tests/tools/closedloop/test_closedloop_torchao.py) is added to a folder that lacks it, small;
# when that install fails the folder is still printed (that test then skips). Folder:
# $FP8LAB_VENV, default ~/.cache/fp8lab/venv-torch.
# Exit 1 with a message on stderr when it cannot be made (no network, no python3 -m venv).
set -euo pipefail
TORCH_VERSION=2.15.0
TRANSFORMERS_VERSION=5.25.0
TORCHAO_VERSION=0.18.0
dir="${FP8LAB_VENV:-$HOME/.cache/fp8lab/venv-torch}"
py="$dir/bin/python"
want="$TORCH_VERSION $TRANSFORMERS_VERSION"
have() {
  [ -x "$py" ] && [ "$("$py" -c 'import torch, transformers; print(torch.__version__.split("+")[0], transformers.__version__)' 2>/dev/null)" = "$want" ]
}
if ! have; then
  echo "venv-torch: making $dir (torch $TORCH_VERSION, transformers $TRANSFORMERS_VERSION; large, once)" >&2
  mkdir -p "$(dirname "$dir")"
  tmp="$dir.tmp.$$"
  rm -rf "$tmp"
  python3 -m venv "$tmp" >&2
  "$tmp/bin/python" -m pip install -q --disable-pip-version-check \
    "torch==$TORCH_VERSION" "transformers==$TRANSFORMERS_VERSION" numpy safetensors >&2
  # bin/python finds its site-packages from its own place: the folder may be renamed (only the
  # activate scripts and console entry points name the temporary folder; they are not used).
  rm -rf "$dir"
  mv "$tmp" "$dir"
  have || { echo "venv-torch: $dir does not import torch $TORCH_VERSION + transformers $TRANSFORMERS_VERSION" >&2; exit 1; }
fi
if [ "$("$py" -c 'import torchao; print(torchao.__version__)' 2>/dev/null)" != "$TORCHAO_VERSION" ]; then
  echo "venv-torch: adding torchao $TORCHAO_VERSION to $dir" >&2
  "$py" -m pip install -q --disable-pip-version-check "torchao==$TORCHAO_VERSION" >&2 ||
    echo "venv-torch: warning: torchao $TORCHAO_VERSION could not be installed" >&2
fi
echo "$py"
