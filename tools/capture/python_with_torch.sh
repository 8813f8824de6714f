#!/bin/sh
# python_with_torch.sh: prints the path of a Python interpreter that can import torch, for
# `make tiny-gpt` and the capture tests. Debian's python3-torch is built for /usr/bin/python3,
# which may not be the `python3` first on PATH (a pyenv or venv python without torch), so
# /usr/bin/python3 is preferred when it imports torch, then `python3` on PATH. When neither
# does and --install is given, installs Debian's python3-torch (apt-get, with sudo when not
# root) and prints /usr/bin/python3. Exit 1 (message on stderr) when none is found.
set -eu
for py in /usr/bin/python3 python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import torch' >/dev/null 2>&1; then
    command -v "$py"
    exit 0
  fi
done
if [ "${1:-}" = "--install" ]; then
  echo "python_with_torch: installing Debian's python3-torch (large)" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >&2
  $sudo apt-get install -y -qq python3-torch >&2
  if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
    echo /usr/bin/python3
    exit 0
  fi
fi
echo "python_with_torch: no python3 can import torch (run with --install, or install torch)" >&2
exit 1
