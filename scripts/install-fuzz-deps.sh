#!/usr/bin/env bash
# Installs what the fuzz build needs (docs/fuzzing.md): Debian's clang and its compiler-rt
# (libclang-rt-14-dev: libFuzzer and the sanitizer runtimes), only when clang cannot link a
# libFuzzer target yet. Idempotent: when it can, nothing is installed or updated.
set -euo pipefail
probe() {
  command -v clang >/dev/null 2>&1 || return 1
  local d
  d=$(mktemp -d) || return 1
  printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
    >"$d/probe.c"
  clang -fsanitize=fuzzer,address,undefined "$d/probe.c" -o "$d/probe" >/dev/null 2>&1
  local rc=$?
  rm -rf "$d"
  return $rc
}
if probe; then exit 0; fi
echo "install-fuzz-deps: installing clang libclang-rt-14-dev" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev >/dev/null
probe || { echo "install-fuzz-deps: clang still cannot link a libFuzzer target" >&2; exit 1; }
