#!/usr/bin/env bash
# device-check.sh: the whole GPU check of fp8lab in one command, for the GPU machine (CUDA,
# CMake and PyTorch there, but none of the Debian -dev packages the CPU build needs and no
# network). From the repository root:
#
#   scripts/device-check.sh            # logs in $OUT when set (the device tool), else ./device-check-out
#
# THE DEVICE CALL (one call; the machine's start takes 1-2 of the session's 15 minutes):
#   first, here on the CPU machine:   scripts/device-bundle.sh     (or make device-bundle; about
#                                     8 MiB in .device-bundle/, git-ignored; rebuild it after
#                                     any change under src/ or kernels/)
#   then the device tool's run with   carry [".device-bundle"]
#                                     command "scripts/device-check.sh"
#                                     timeout_s 480
#   Without .device-bundle the call still works; the parity step says "not run".
#
# Steps, each under `timeout`, the whole run within DEVICE_CHECK_BUDGET (380 s):
#   1. environment: nvidia-smi, nvcc, cmake, NCCL location                       -> env.log
#   2. configure + build with CUDA, Release, FP8LAB_GPU_ONLY=ON (simulator, kernels/, src/gpu,
#      gpu tests; no GSL, Check, ...) in a fresh build directory                 -> build.log
#   3. ctest -L gpu --output-on-failure, the tests in parallel (one GPU is plenty; the wall time
#      is the longest test's), then every test's full output                   -> ctest.log
#      Among them test_engine_conformance: every op of the GPU engine against the simulator
#      (engine_check.h's full suite), end_phase's all-reduce through NCCL (a world of one), and
#      test_gpu_tensorcore: cuBLASLt's FP8 GEMM against the tensor-core model of
#      src/sim/tensorcore.h (its "tensorcore:" lines go to the summary).
#   4. parity (scripts/device-parity.sh, only with .device-bundle/): the bundled full fp8lab runs
#      the same experiments with --device gpu and --device cpu (same --threads, --no-report) on
#      gen_trace.py corner-case traces and synthetic traces; scripts/compare_runs.py compares
#      steps.csv, summary.csv, histograms.csv and stream.csv by column name (exact, clipped,
#      overshoot, warmup and scale_inv_* included, but mse/snr_db/snr_db_min to 1e-6 relative and
#      cos_sim/cos_sim_min to 1e-6 times their condition number); the largest case's replay times are the GPU-vs-CPU-engine benchmark. At most
#      120 s, leaving at least 40 s to the benchmarks                          -> parity.log
#   5. build/kernels/bench_gpu: fused quantize pass GB/s vs device copy          -> bench_gpu.log
#   6. bench_gemm (cuBLASLt FP8 GEMM, 8192^3), then bench/scaled_mm.py (torch._scaled_mm, same
#      problem) appended after a "==================== bench/scaled_mm.py" line -> bench_gemm.log
#   7. timeline (only with .device-bundle/): `fp8lab timeline --layers 24 --hidden 4096 --ffn
#      16384 --tokens 15872 --device gpu` (TE's published shape; docs/overlap.md), every mode's
#      ops timed with CUDA events, its stdout and the timeline's four files packed
#                                                                               -> timeline.tgz
#   7b. closed loop: the tiny GPT 5 steps under fp8lab.closedloop.Emulator on cuda and on the CPU
#      (scripts/closedloop_device.py; needs torch with CUDA): both loss series, agree or not
#      within relative 1e-3                                    -> closedloop.log in timeline.tgz
#   8. a one-screen summary                                                     -> summary.txt
# Eight files under the output folder (the device tool returns at most 8).
# Not here: the MPI replay's NCCL amax exchange (src/gpu/engine_gpu_comm.c, bootstrapped over
# MPI). The device image has no Open MPI and the bundle is built without it; the path runs in
# CI on the CUDA emulator (tests/run/test_mpi.py: a world of one, and the fallback to MPI).
#
# The summary's lines:
#   rev: / gpu:     the source revision (unknown without .git) and the GPU, driver, memory, clock
#   tests:          ctest's "N% tests passed, M tests failed out of K", then one line per test
#                   (Passed / Failed / Not Run (skipped: no usable device) and its seconds), then
#                   the first FAIL lines of the harness
#   tensorcore:     test_gpu_tensorcore's "tensorcore:" lines (prefix dropped, indented under one
#                   heading): per K in {32, 64, 128, 4096} and fast accumulation on/off, the
#                   entries of a 64 x 64 E4M3 GEMM bit-equal to the model of the device's
#                   compute capability (h100 for 9.x, b200 for 10.x) and to exact accumulation,
#                   out of 4096, with the largest relative differences; K = 32 (one MMA) is
#                   asserted bit for bit, larger K only reported. "no result (...)" with the
#                   test's ctest status when it printed none (another GPU: skipped, which
#                   fails the check)
#   selfcheck:      what `fp8lab run` with the default --device auto picked (the GPU engine, after
#                   its self-check: values compared and seconds), from parity.log
#   parity:         PASS|FAIL, the cases (name:ok | MISMATCH | B-failed | run-failed | timed-out), the rows
#                   compared over the four CSVs of every case, "exact columns identical: yes|no"
#                   (every column but the five derived ones, as text), the largest relative
#                   difference of mse and of snr_db/snr_db_min (and in dB) and the largest
#                   absolute one of cos_sim/cos_sim_min seen, the tolerance;
#                   "(timed out ...)" when the step ran out of time; a WARNING when the bundle
#                   was built from other sources than this tree (scripts/source-hash.sh). "not
#                   run: no .device-bundle ..." without the bundle.
#   replay:         seconds per replayed step (run.json's wall_time_s / steps_replayed: trace
#                   reading, engine work, CSV writing; not the process start or CUDA context) of
#                   the GPU engine against the CPU engine on the largest synthetic case, the
#                   ratio ("GPU 3.1x faster" or "SLOWER"), steps x tensors x configurations,
#                   threads, and both processes' wall times.
#   GB/s:           the fused quantize pass (1 configuration) against the device-to-device copy
#                   (goal >= 85%)
#   TFLOP/s:        cuBLASLt FP8 (bench_gemm) against torch._scaled_mm on 8192^3 (goal >= 0.95),
#                   then bench_gemm's per-GEMM lines
#   closedloop:     AGREE|DIFFER, the largest relative loss difference of the tiny GPT's 5
#                   emulated steps on cuda vs cpu, and both loss series (or why not run)
#   timeline:       per mode the measured step time, exposed bookkeeping and its share, and the
#                   model's step (from the timeline's stdout), or why it did not run
#   logs:           the output folder and its files
# Exit status: 0 when the build succeeded, every gpu test passed (none failed, none skipped)
# and, when .device-bundle/ is there, the parity check passed and the timeline measured; 1
# otherwise.
#
# Environment: BUILD_DIR (default /tmp/fp8lab-device-build, removed first), JOBS (default nproc),
# FP8LAB_NCCL_ROOT (NCCL's folder when the CUDA toolkit has none; default: the nvidia-nccl wheel
# of python3, if any), DEVICE_CHECK_BUDGET (seconds, default 380), PARITY_TARGET_S (seconds the
# slower engine should replay the benchmark case for, default 12), PARITY_DEVICE_B (default gpu;
# cpu for a dry run of the parity step anywhere).
set -u

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUTDIR=${OUT:-$PWD/device-check-out}
BUILD=${BUILD_DIR:-/tmp/fp8lab-device-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
BUDGET=${DEVICE_CHECK_BUDGET:-380}
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
    "($(cd "$SRC" && GIT_OPTIONAL_LOCKS=0 git status --short 2>/dev/null | wc -l) changed files)"
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
      timeout "$(step_timeout 150 100)" ctest -L gpu --output-on-failure --timeout 140 -j 4
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

# ------------------------------------------------------------------ 4. parity (the bundle)
# The full fp8lab cannot be built here (no -dev packages): it comes from scripts/device-bundle.sh.
PARITY_RC=-1
BUNDLE_DIR=$SRC/.device-bundle
if [ -d "$BUNDLE_DIR" ]; then
  pt=$(step_timeout 120 40)
  PARITY_TIME=$((pt > 20 ? pt - 5 : 15)) PARITY_TARGET_S=${PARITY_TARGET_S:-12} \
    PARITY_BUNDLE=$BUNDLE_DIR timeout -k 5 "$pt" bash "$SRC/scripts/device-parity.sh" \
    >"$OUTDIR/parity.log" 2>&1
  PARITY_RC=$?
  [ "$PARITY_RC" = 124 ] || [ "$PARITY_RC" = 137 ] &&
    echo "device-check: parity step killed after $pt s (exit $PARITY_RC)" >>"$OUTDIR/parity.log"
else
  echo "not run: no .device-bundle (run scripts/device-bundle.sh and carry .device-bundle)" \
    >"$OUTDIR/parity.log"
fi

# ------------------------------------------------------------------ 5.-6. benchmarks
SCALED_MM_MARK="==================== bench/scaled_mm.py"
run_bench() { # log max reserve command...: appends the output and the exit status to log
  local log=$1 max=$2 reserve=$3
  shift 3
  if [ ! -x "$1" ] && [ "$1" != python3 ]; then
    echo "not run: $1 was not built" >>"$log"
    return
  fi
  timeout "$(step_timeout "$max" "$reserve")" "$@" >>"$log" 2>&1
  echo "exit status $?" >>"$log"
}
: >"$OUTDIR/bench_gpu.log"
run_bench "$OUTDIR/bench_gpu.log" 45 60 "$BUILD/kernels/bench_gpu"
: >"$OUTDIR/bench_gemm.log"
run_bench "$OUTDIR/bench_gemm.log" 40 25 "$BUILD/bench_gemm"
echo "$SCALED_MM_MARK" >>"$OUTDIR/bench_gemm.log"
PYTHONUNBUFFERED=1 run_bench "$OUTDIR/bench_gemm.log" 50 35 python3 "$SRC/bench/scaled_mm.py"

# ------------------------------------------------------------------ 7. timeline (the bundle)
# NCCL for the all-reduces: the toolkit's, else python3's nvidia-nccl wheel (FP8LAB_NCCL_LIB).
TL_DIR=/tmp/fp8lab-timeline
rm -rf "$TL_DIR" && mkdir -p "$TL_DIR"
if [ -x "$BUNDLE_DIR/run.sh" ]; then
  if [ -z "${FP8LAB_NCCL_LIB:-}" ]; then
    FP8LAB_NCCL_LIB=$(ls /usr/local/cuda/lib*/libnccl.so.2 2>/dev/null | head -1)
    [ -n "$FP8LAB_NCCL_LIB" ] || FP8LAB_NCCL_LIB=$(timeout 30 python3 -c \
      'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' \
      2>/dev/null)
    export FP8LAB_NCCL_LIB
  fi
  timeout "$(step_timeout 90 5)" "$BUNDLE_DIR/run.sh" timeline --layers 24 --hidden 4096 \
    --ffn 16384 --tokens 15872 --device gpu --out "$TL_DIR/out" >"$TL_DIR/timeline.log" 2>&1
  echo "exit status $? (FP8LAB_NCCL_LIB=${FP8LAB_NCCL_LIB:-})" >>"$TL_DIR/timeline.log"
else
  echo "not run: no .device-bundle" >"$TL_DIR/timeline.log"
fi

# ------------------------------------------------------------------ 7b. closed loop (issue 44)
# The tiny GPT 5 steps under fp8lab.closedloop.Emulator on cuda and on the CPU (same seed):
# both loss series and whether they agree (scripts/closedloop_device.py); needs torch with CUDA
# and libfp8lab_emu.so (built here if the GPU-only build configured it). Its log goes into
# timeline.tgz (the device tool returns 8 files), its SUMMARY line into summary.txt.
CL_LOG=$TL_DIR/closedloop.log
if [ "$BUILD_OK" = 1 ] && timeout 30 python3 -c 'import torch, numpy; assert torch.cuda.is_available()' \
  >/dev/null 2>&1; then
  { timeout "$(step_timeout 60 10)" cmake --build "$BUILD" -j "$JOBS" --target fp8lab_emu 2>&1 | tail -3 &&
      FP8LAB_EMU_LIB=$BUILD/src/emu/libfp8lab_emu.so OMP_NUM_THREADS=1 \
        timeout "$(step_timeout 60 5)" python3 "$SRC/scripts/closedloop_device.py" --steps 5
    echo "exit status $?"; } >"$CL_LOG" 2>&1
else
  echo "not run: no torch with CUDA (or the build failed)" >"$CL_LOG"
fi
tar -C "$TL_DIR" -czf "$OUTDIR/timeline.tgz" . 2>/dev/null

# ------------------------------------------------------------------ 6. summary
note() { # why a log has no result: its skip / error line, else its last line (read once: $1
  local text line # may be a pipe)
  text=$(cat "$1" 2>/dev/null)
  line=$(echo "$text" | grep -m1 -E 'skipped|rror|not run|usage')
  echo "${line:-$(echo "$text" | tail -1)}" | cut -c1-100
}
gemm_part() { awk -v m="$SCALED_MM_MARK" '$0 == m { exit } { print }' "$OUTDIR/bench_gemm.log" 2>/dev/null; }
scaled_mm_part() { awk -v m="$SCALED_MM_MARK" 'f { print } $0 == m { f = 1 }' "$OUTDIR/bench_gemm.log" 2>/dev/null; }
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
    # cuBLASLt against the tensor-core model (tests/gpu/test_gpu_tensorcore.c); a failed test's
    # output is in ctest.log twice (--output-on-failure and LastTest.log): each line once
    if grep -qE '^tensorcore: [a-z0-9]+ K=' "$OUTDIR/ctest.log"; then
      echo "tensorcore: cuBLASLt 64x64 E4M3 GEMM, entries bit-equal to the model / exact (of 4096);" \
        "K = 32 asserted, larger K reported (K order, split-K, promotion unpublished)"
      grep -E '^tensorcore: [a-z0-9]+ K=' "$OUTDIR/ctest.log" | awk '!seen[$0]++' | head -8 |
        sed 's/^tensorcore: /  /' | cut -c1-160
    else
      line=$(grep -m1 -E 'Test +#[0-9]+: test_gpu_tensorcore ' "$OUTDIR/ctest.log" |
        sed -E 's/.*test_gpu_tensorcore \.* *//; s/  +/ /g')
      echo "tensorcore: no result (test_gpu_tensorcore: ${line:-not run})"
    fi
  fi
  if grep -q '^SUMMARY parity: ' "$OUTDIR/parity.log" 2>/dev/null; then
    sed -n 's/^SUMMARY \(selfcheck\|parity\|replay\): /\1: /p' "$OUTDIR/parity.log"
  elif [ ! -d "$BUNDLE_DIR" ]; then
    echo "parity: not run: no .device-bundle (run scripts/device-bundle.sh and carry .device-bundle)"
    echo "replay: not run (no bundle)"
  else
    echo "parity: FAIL: no result (exit $PARITY_RC$([ "$PARITY_RC" = 124 ] && echo ', timed out');" \
      "parity.log: $(tail -1 "$OUTDIR/parity.log" | cut -c1-120))"
    echo "replay: n/a"
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
  ours=$(gemm_part | grep -oE 'RESULT fprop_tflops=[0-9.]+' | cut -d= -f2)
  theirs=$(scaled_mm_part | grep -oE 'RESULT fprop_tflops=[0-9.]+' | cut -d= -f2)
  if [ -n "$ours" ] && [ -n "$theirs" ]; then
    echo "TFLOP/s (FP8 8192^3, e4m3 -> bf16, fast accum): cuBLASLt $ours, torch._scaled_mm" \
      "$theirs: ratio $(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.3f", a / b }')" \
      "(goal >= 0.95)"
  else
    echo "TFLOP/s: cuBLASLt ${ours:-n/a}, torch._scaled_mm ${theirs:-n/a}" \
      "(bench_gemm: $(note <(gemm_part)); scaled_mm: $(note <(scaled_mm_part)))"
  fi
  gemm_part | grep -E '^  (fprop|dgrad|wgrad) ' | cut -c1-100
  if grep -q '^measured on ' "$TL_DIR/timeline.log" 2>/dev/null; then
    echo "timeline: $(grep -m1 '^measured on ' "$TL_DIR/timeline.log" | cut -c1-150)"
    grep -E '^(delayed-|current)' "$TL_DIR/timeline.log" | sed 's/^/  /'
  else
    echo "timeline: not measured ($(head -1 "$TL_DIR/timeline.log" | cut -c1-140))"
  fi
  if grep -q '^SUMMARY closedloop: ' "$CL_LOG" 2>/dev/null; then
    sed -n 's/^SUMMARY closedloop: /closedloop: /p' "$CL_LOG"
    grep -E '^closedloop (cpu|cuda) ' "$CL_LOG" | sed 's/^/  /'
  else
    echo "closedloop: not run ($(note "$CL_LOG"))"
  fi
  echo "logs: $OUTDIR ($(cd "$OUTDIR" && ls | tr '\n' ' '))"
}
summary | tee "$OUTDIR/summary.txt"

# A skipped gpu test on the GPU machine means the device was not usable: that fails the check.
# The parity check counts when the bundle was carried.
[ "$BUILD_OK" = 1 ] && [ "$CTEST_RC" = 0 ] && ! grep -qE 'Test +#[0-9]+:.*Skipped' "$OUTDIR/ctest.log" &&
  { [ ! -d "$BUNDLE_DIR" ] || { [ "$PARITY_RC" = 0 ] && grep -q '^measured on ' "$TL_DIR/timeline.log"; }; } &&
  exit 0
exit 1
