#!/usr/bin/env bash
# source-hash.sh [ROOT]: one sha256 over the sources a build of fp8lab compiles (C, C++, CUDA,
# headers and CMakeLists.txt under src/ and kernels/, and the top-level CMakeLists.txt), by
# relative path and content. scripts/device-bundle.sh writes it into .device-bundle/MANIFEST;
# scripts/device-check.sh compares it with the tree it runs in: a different hash means the
# bundled fp8lab was built from other sources (rebuild the bundle). Needs only coreutils.
set -u
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" || exit 1
{
  echo CMakeLists.txt
  find src kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
    -o -name '*.cpp' -o -name '*.hpp' -o -name CMakeLists.txt \) 2>/dev/null
} | LC_ALL=C sort | while read -r f; do
  printf '%s %s\n' "$f" "$(sha256sum <"$f" | cut -d' ' -f1)"
done | sha256sum | cut -c1-16
