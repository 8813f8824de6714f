#!/usr/bin/env bash
# device-check.sh: the whole GPU check of fp8lab in one command, for the GPU machine (CUDA,
# CMake and PyTorch there, but none of the Debian -dev packages the CPU build needs and no
# network). From the repository root:
#
#   scripts/device-check.sh            # logs in $OUT when set (the device tool), else ./device-check-out
#
# Steps, each under `timeout`, the whole run within 6 minutes:
#   1. environment: nvidia-smi, nvcc, cmake, NCCL location                       -> env.log
#   2. configure + build with CUDA, Release, FP8LAB_GPU_ONLY=ON (simulator, kernels/, src/gpu,
#      gpu tests; no GSL, Check, ...) in a fresh build directory                 -> build.log
#   3. ctest -L gpu --output-on-failure, the tests in parallel (one GPU is plenty; the wall time
#      is the longest test's), then every test's full output                   -> ctest.log
#   4. build/kernels/bench_gpu: fused quantize pass GB/s vs device copy          -> bench_gpu.log
#   5. bench_gemm (cuBLASLt FP8 GEMM, 8192^3) and bench/scaled_mm.py (torch._scaled_mm, same
#      problem)                                                      -> bench_gemm.log, scaled_mm.log
#   6. a one-screen summary: tests passed/failed/skipped, GB/s ratio, TFLOP/s ratio -> summary.txt
# At most 7 files under the output folder (the device tool returns 8). Exit status: 0 when the
# build succeeded and every gpu test passed (none failed, none skipped), 1 otherwise.
#
# Environment: BUILD_DIR (default /tmp/fp8lab-device-build, removed first), JOBS (default nproc),
# FP8LAB_NCCL_ROOT (NCCL's folder when the CUDA toolkit has none; default: the nvidia-nccl wheel
# of python3, if any), DEVICE_CHECK_BUDGET (seconds, default 350).
set -u

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUTDIR=${OUT:-$PWD/device-check-out}
BUILD=${BUILD_DIR:-/tmp/fp8lab-device-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
BUDGET=${DEVICE_CHECK_BUDGET:-350}
mkdir -p "$OUTDIR"
T0=$(date +%s)

# step_timeout MAX RESERVE: seconds for a step that may take MAX, leaving RESERVE seconds of the
# budget to the steps after it (at least 5).
step_timeout() {
  local left=$((BUDGET - ($(date +%s) - T0) - $2))
  [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"
}
elapsed() { echo $(($(date +%s) - T0)); }

# ------------------------------------------------------------------ 1. environment
{
  echo "== device-check $(date -u +%FT%TZ), source $SRC, build $BUILD, jobs $JOBS"
  echo "rev: $(cd "$SRC" && git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" \
    "($(cd "$SRC" && git status --short 2>/dev/null | wc -l) changed files)"
  echo "gpu: $(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
    --format=csv,noheader 2>&1 | head -1)"
  timeout 20 nvidia-smi 2>&1 | head -25
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  nvcc --version 2>&1 | tail -2
  cmake --version 2>&1 | head -1
  timeout 30 python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1
} >"$OUTDIR/env.log" 2>&1
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH

NCCL_ARGS=()
if [ -n "${FP8LAB_NCCL_ROOT:-}" ]; then
  NCCL_ARGS=(-DFP8LAB_NCCL_ROOT="$FP8LAB_NCCL_ROOT")
elif [ ! -e /usr/local/cuda/include/nccl.h ]; then
  # PyTorch's images carry NCCL as the nvidia-nccl-cu13 wheel: include/nccl.h, lib/libnccl.so.2
  root=$(timeout 20 python3 -c 'import nvidia.nccl as m, os; print(list(m.__path__)[0])' 2>/dev/null)
  [ -n "$root" ] && NCCL_ARGS=(-DFP8LAB_NCCL_ROOT="$root")
fi
echo "NCCL hint: ${NCCL_ARGS[*]:-(CUDA toolkit)}" >>"$OUTDIR/env.log"

# ------------------------------------------------------------------ 2. configure + build
BUILD_OK=0
rm -rf "$BUILD"
{
  echo "== configure ($(elapsed) s)"
  timeout "$(step_timeout 60 260)" cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DFP8LAB_GPU_ONLY=ON "${NCCL_ARGS[@]}" &&
    echo "== build ($(elapsed) s)" &&
    timeout "$(step_timeout 150 170)" cmake --build "$BUILD" -j "$JOBS" &&
    echo "== built ($(elapsed) s)"
} >"$OUTDIR/build.log" 2>&1 && BUILD_OK=1

# ------------------------------------------------------------------ 3. tests
CTEST_RC=-1
if [ "$BUILD_OK" = 1 ]; then
  (
    cd "$BUILD" &&
      timeout "$(step_timeout 150 80)" ctest -L gpu --output-on-failure --timeout 140 -j 4
  ) >"$OUTDIR/ctest.log" 2>&1
  CTEST_RC=$?
  {
    echo
    echo "==================== full output of every test (Testing/Temporary/LastTest.log)"
    cat "$BUILD/Testing/Temporary/LastTest.log" 2>/dev/null
  } >>"$OUTDIR/ctest.log"
else
  echo "not run: the build failed (build.log)" >"$OUTDIR/ctest.log"
fi

# ------------------------------------------------------------------ 4.-5. benchmarks
run_bench() { # name log max reserve command...
  local log=$2 max=$3 reserve=$4
  shift 4
  if [ ! -x "$1" ] && [ "$1" != python3 ]; then
    echo "not run: $1 was not built" >"$log"
    return
  fi
  timeout "$(step_timeout "$max" "$reserve")" "$@" >"$log" 2>&1
  echo "exit status $?" >>"$log"
}
run_bench bench_gpu "$OUTDIR/bench_gpu.log" 45 60 "$BUILD/kernels/bench_gpu"
run_bench bench_gemm "$OUTDIR/bench_gemm.log" 40 25 "$BUILD/bench_gemm"
PYTHONUNBUFFERED=1 run_bench scaled_mm "$OUTDIR/scaled_mm.log" 50 5 python3 "$SRC/bench/scaled_mm.py"

# ------------------------------------------------------------------ 6. summary
note() { # why a log has no result: its skip / error line, else its last line
  grep -m1 -hE 'skipped|rror|not run|usage' "$1" 2>/dev/null | cut -c1-100 || tail -1 "$1"
}
summary() {
  echo "==================== fp8lab device check ($(elapsed) s)"
  grep -m1 '^rev: ' "$OUTDIR/env.log"
  grep -m1 '^gpu: ' "$OUTDIR/env.log" | cut -c1-120
  if [ "$BUILD_OK" != 1 ]; then
    echo "BUILD FAILED (build.log), last lines:"
    grep -E 'error|Error|timed out' "$OUTDIR/build.log" | head -12
  else
    local line
    line=$(grep -E 'tests passed|No tests were found' "$OUTDIR/ctest.log" | head -1)
    echo "tests: ${line:-no ctest summary (timed out? ctest exit $CTEST_RC)}"
    grep -E 'Test +#[0-9]+:' "$OUTDIR/ctest.log" | sed -E 's/^ *[0-9]+\/[0-9]+ //; s/ \.{3,}/ /; s/  +/ /g' |
      sed 's/^/  /' | head -12
    grep -hE '^FAIL ' "$OUTDIR/ctest.log" | sort -u | head -8 | cut -c1-220 | sed 's/^/  /'
  fi
  # GB/s: the fused pass with one configuration against the device-to-device copy.
  local gline copy
  gline=$(grep -m1 -E 'fused pass, 1 config +[0-9]' "$OUTDIR/bench_gpu.log" 2>/dev/null)
  copy=$(grep -m1 'cudaMemcpy device to device' "$OUTDIR/bench_gpu.log" 2>/dev/null |
    grep -oE '[0-9.]+ GB/s')
  if [ -n "$gline" ]; then
    echo "GB/s: fused quantize pass $(echo "$gline" | grep -oE '[0-9.]+ GB/s') vs copy $copy:" \
      "$(echo "$gline" | grep -oE '[0-9.]+% of copy') (goal >= 85%)"
  else
    echo "GB/s: n/a ($(note "$OUTDIR/bench_gpu.log"))"
  fi
  local ours theirs
  ours=$(grep -oE 'RESULT fprop_tflops=[0-9.]+' "$OUTDIR/bench_gemm.log" 2>/dev/null | cut -d= -f2)
  theirs=$(grep -oE 'RESULT fprop_tflops=[0-9.]+' "$OUTDIR/scaled_mm.log" 2>/dev/null | cut -d= -f2)
  if [ -n "$ours" ] && [ -n "$theirs" ]; then
    echo "TFLOP/s (FP8 8192^3, e4m3 -> bf16, fast accum): cuBLASLt $ours, torch._scaled_mm" \
      "$theirs: ratio $(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.3f", a / b }')" \
      "(goal >= 0.95)"
  else
    echo "TFLOP/s: cuBLASLt ${ours:-n/a}, torch._scaled_mm ${theirs:-n/a}" \
      "(bench_gemm: $(note "$OUTDIR/bench_gemm.log"); scaled_mm: $(note "$OUTDIR/scaled_mm.log"))"
  fi
  grep -E '^  (fprop|dgrad|wgrad) ' "$OUTDIR/bench_gemm.log" 2>/dev/null | cut -c1-100
  echo "logs: $OUTDIR ($(cd "$OUTDIR" && ls | tr '\n' ' '))"
}
summary | tee "$OUTDIR/summary.txt"

# A skipped gpu test on the GPU machine means the device was not usable: that fails the check.
[ "$BUILD_OK" = 1 ] && [ "$CTEST_RC" = 0 ] && ! grep -qE 'Test +#[0-9]+:.*Skipped' "$OUTDIR/ctest.log" &&
  exit 0
exit 1
