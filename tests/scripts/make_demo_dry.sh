#!/bin/sh
# `make demo` builds the fp8lab target alone (issue 25): every `cmake --build` line of its dry
# run names `--target fp8lab`, and it replays experiments/quickstart.ini with that binary.
# usage: make_demo_dry.sh SOURCE_DIR SCRATCH_BUILD_DIR
out=$(make -n -C "$1" demo BUILD="$2") || { echo "make -n demo failed"; exit 1; }
builds=$(printf '%s\n' "$out" | grep -e 'cmake --build')
if [ -z "$builds" ]; then echo "make demo has no cmake --build line:"; echo "$out"; exit 1; fi
if printf '%s\n' "$builds" | grep -v -e '--target fp8lab$' >/dev/null; then
  echo "make demo builds more than fp8lab:"; echo "$builds"; exit 1
fi
printf '%s\n' "$out" | grep -e "$2/fp8lab run experiments/quickstart.ini" >/dev/null ||
  { echo "make demo does not run the quickstart:"; echo "$out"; exit 1; }
echo "ok: make demo builds only fp8lab: $builds"
