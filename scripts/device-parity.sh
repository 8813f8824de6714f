#!/usr/bin/env bash
# device-parity.sh: does the whole program give the same answers on the GPU engine as on the
# CPU engine, and how long does a replayed step take on each? Step 4 of scripts/device-check.sh
# (which writes this script's output to parity.log); runnable alone. It needs the bundled full
# fp8lab of scripts/device-bundle.sh (.device-bundle/, carried to the GPU machine) and python3.
#
#   scripts/device-parity.sh                       # on the GPU machine: B = --device gpu
#   PARITY_DEVICE_B=cpu scripts/device-parity.sh   # dry run anywhere: cpu against cpu
#
# Cases, each `fp8lab run --device cpu` (A) against `--device $PARITY_DEVICE_B` (B) with the same
# experiment, trace and --threads, --no-report, compared by scripts/compare_runs.py (steps.csv,
# summary.csv, histograms.csv, stream.csv, by column name, the columns steps.csv and summary.csv
# gained with the saturation statistics included: every cell exact (clipped, overshoot, warmup,
# scale_inv_*, stream.csv's scales too) but mse / snr_db / snr_db_min, which come from the double
# sums, to 1e-6 relative, and cos_sim / cos_sim_min to 1e-6 times their condition number, which
# compare_runs.py takes from the row's snr_db):
#   edge-st, edge-npy  tools/reference/gen_trace.py traces (safetensors; npy), the corner cases:
#                      empty and one-element tensors, inf/NaN, subnormals, FP8 rounding ties,
#                      F32/BF16/F16, odd shapes, steps with amax.csv rows only, modules that
#                      skip steps. Experiment edge.ini: delayed hybrid sweep (history 1, 2, 5,
#                      1024 x margin -1, 0, 2 x max, most_recent), delayed e4m3 and e5m2,
#                      current (plain, pow2, epsilon + margin, e5m2) and the block recipes
#                      (mxfp8, block auto, rowwise: on the CPU in both runs; here they check
#                      that the engine path merges them with its own configurations). Needs
#                      numpy and ml_dtypes (skipped without them).
#   gemm               `fp8lab synth llm --steps 6`, gemm = true: gemm.csv rel_error from
#                      cuBLASLt (B) against the CPU GEMMs (A), compare_runs.py GEMM tolerances
#   synth20            `fp8lab synth llm --steps 20` (every step a snapshot: 64 tensors, 1.6M
#                      elements a step) with bench.ini: 99 per-tensor configurations (delayed
#                      hybrid 8 history lengths x 3 margins x 2, delayed e4m3 and e5m2 4 x 3 x 2
#                      each, 3 current), more than one launch of the fused kernel (64 a launch).
#                      Also the calibration: its two replay times size the next case.
#   synthN             N steps: synth pieces of 20 steps (presets llm, spiky, underflow in turn,
#                      seeds 1, 2, ...) renumbered into one trace, N chosen so that the slower
#                      engine replays it in about PARITY_TARGET_S seconds (at most
#                      PARITY_MAX_STEPS), within what is left of PARITY_TIME. Its times are the
#                      benchmark: seconds per replayed step = run.json's wall_time_s (the
#                      replay: trace reading, both engines' work, writing the CSVs; not the
#                      process start nor the CUDA context) / steps_replayed.
# B runs first in each case, so that a failing GPU engine stops the script early.
#
# Before the cases: `fp8lab run` with the default --device auto on a 2-step synth trace must
# pick the GPU engine after its self-check (B = gpu only; the line says what happened).
#
# Output: the log on stdout, ending with three lines that device-check.sh copies to summary.txt:
#   SUMMARY selfcheck: what --device auto picked, the self-check's line (values, seconds)
#   SUMMARY parity: PASS|FAIL, <cases>, <rows> rows compared, exact columns identical: yes|no,
#                   max rel diff mse <x>, snr <x> (<x> dB), cos_sim max abs diff <x> ...
#   SUMMARY replay: GPU engine <x> s/step vs CPU engine <y> s/step (<ratio>) ...
# Exit status: 0 every case ran and matched; 1 a mismatch, a failed run or no case completed;
# 3 not run (no bundle). A run cut off by the time limit ends the script with the cases it has
# (status 1 when none completed; the summary says "timed out").
#
# Environment: PARITY_BUNDLE (default .device-bundle), PARITY_DEVICE_B (gpu), PARITY_WORK
# (/tmp/fp8lab-parity, emptied first), PARITY_TIME (seconds for everything, default 150),
# PARITY_TARGET_S (15), PARITY_MAX_STEPS (400), PARITY_THREADS (the CPUs, at most 64),
# PARITY_RTOL (1e-6).
set -u

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUNDLE=${PARITY_BUNDLE:-$SRC/.device-bundle}
DEV_B=${PARITY_DEVICE_B:-gpu}
WORK=${PARITY_WORK:-/tmp/fp8lab-parity}
TIME=${PARITY_TIME:-150}
TARGET=${PARITY_TARGET_S:-15}
MAX_STEPS=${PARITY_MAX_STEPS:-400}
RTOL=${PARITY_RTOL:-1e-6}
NCPU=$(nproc 2>/dev/null || echo 4)
THREADS=${PARITY_THREADS:-$((NCPU > 64 ? 64 : NCPU))}
T0=$(date +%s)
DEADLINE=$((T0 + TIME - 3)) # a few seconds for the summary
PY=${PYTHON:-python3}

now() { date +%s.%N; }
left() { echo $((DEADLINE - $(date +%s))); }
log() { echo "[$(($(date +%s) - T0)) s] $*"; }
fmt() { awk -v x="$1" 'BEGIN { printf "%.4g", x }'; }

SELFCHECK="not run"
summary_and_exit() { # STATUS PARITY-LINE REPLAY-LINE
  echo "SUMMARY selfcheck: $SELFCHECK"
  echo "SUMMARY parity: $2"
  echo "SUMMARY replay: $3"
  exit "$1"
}

# (a copy may lose the executable bits: set them again)
chmod +x "$BUNDLE/run.sh" "$BUNDLE/bin/fp8lab" 2>/dev/null
if [ ! -x "$BUNDLE/run.sh" ] || [ ! -x "$BUNDLE/bin/fp8lab" ]; then
  echo "not run: no .device-bundle (run scripts/device-bundle.sh and carry .device-bundle)"
  summary_and_exit 3 "not run: no .device-bundle (run scripts/device-bundle.sh and carry .device-bundle)" \
    "not run (no bundle)"
fi
RUN=$BUNDLE/run.sh
[ "$DEV_B" = gpu ] || DRY=" (DRY RUN: B = --device $DEV_B)"
DRY=${DRY:-}
log "parity$DRY: A = --device cpu, B = --device $DEV_B, --threads $THREADS, rtol $RTOL," \
  "budget $TIME s, work dir $WORK"

# ------------------------------------------------------------------ the bundle here
STALE=""
want=$(sed -n 's/^source-hash: //p' "$BUNDLE/MANIFEST" 2>/dev/null)
have=$(bash "$SRC/scripts/source-hash.sh" "$SRC" 2>/dev/null)
if [ -n "$want" ] && [ "$want" != "$have" ]; then
  STALE="; WARNING: the bundle was built from other sources (hash $want, this tree $have): rerun scripts/device-bundle.sh"
  log "WARNING: bundle source hash $want, this tree $have: the bundled fp8lab is not this tree's"
fi
grep -E '^(version|source-hash|build|cuda-runtime|cuda-targets|from-device|symbol-versions):' \
  "$BUNDLE/MANIFEST" 2>/dev/null | sed 's/^/  bundle /'
# libcublasLt.so.13 (the engine's GEMMs) must resolve on this machine: /usr/local/cuda/lib64 is
# on run.sh's path; otherwise look where CUDA toolkits and python3's nvidia wheels keep it.
if "$RUN" --ldd 2>/dev/null | grep -q 'libcublasLt.*not found'; then
  dirs=$(ls -d /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib 2>/dev/null)
  dirs="$dirs $(timeout 20 "$PY" -c 'import nvidia, sys; print(" ".join(nvidia.__path__))' 2>/dev/null)"
  # shellcheck disable=SC2086 # a list of folders
  lib=$(find $dirs -maxdepth 4 -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
  [ -n "$lib" ] && export FP8LAB_CUDA_LIBDIR=${lib%/*} && log "libcublasLt from $FP8LAB_CUDA_LIBDIR"
fi
missing=$("$RUN" --ldd 2>&1 | grep 'not found')
if [ -n "$missing" ]; then
  log "the bundled fp8lab cannot load here:"
  echo "$missing"
  summary_and_exit 1 "FAIL: the bundled fp8lab cannot load: $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')" \
    "not run"
fi
log "$("$RUN" --version 2>&1)"

rm -rf "$WORK"
mkdir -p "$WORK" || summary_and_exit 1 "FAIL: cannot create $WORK" "not run"

# ------------------------------------------------------------------ --device auto, the self-check
# The default device: the module must load, pass its self-check (src/engine/engine_check.h) and be
# picked; run.json records the engine and the self-check.
AUTO_FAIL=""
"$RUN" synth llm "$WORK/auto.trace" --steps 2 --seed 5 >"$WORK/auto.log" 2>&1
printf '[trace]\npath = %s\n[recipe.d]\nkind = delayed\nhistory_len = 1, 16\n[recipe.c]\nkind = current\n[analysis]\ngemm = true\ngemm_error = exact\ngemm_max_tokens = 64\n' \
  "$WORK/auto.trace" >"$WORK/auto.ini"
timeout -k 5 90 "$RUN" run "$WORK/auto.ini" --no-report --force --out "$WORK/auto.out" >>"$WORK/auto.log" 2>&1
auto_rc=$?
auto_eng=$(sed -n 's/^  "engine": *"\([^"]*\)".*/\1/p' "$WORK/auto.out/run.json" 2>/dev/null | head -1)
auto_sc=$(grep -m1 -E 'self-check|warning' "$WORK/auto.log" | sed 's/^fp8lab: //' | cut -c1-200)
auto_note=$(sed -n 's/^ *"note": *"\(.*\)",*$/\1/p' "$WORK/auto.out/run.json" 2>/dev/null | head -1 | cut -c1-160)
SELFCHECK="--device auto (exit $auto_rc) picked '${auto_eng:-?}'; ${auto_sc:-${auto_note:-no self-check}}"
log "selfcheck: $SELFCHECK"
if [ "$DEV_B" = gpu ] && { [ "$auto_rc" != 0 ] || ! echo "$auto_eng" | grep -q '^gpu'; }; then
  AUTO_FAIL="; --device auto did not pick the GPU engine"
  SELFCHECK="FAIL: $SELFCHECK"
fi

# ------------------------------------------------------------------ runs and comparisons
CASES="" ROWS=0 EXACT=yes MAXMSE=0 MAXSNR=0 MAXDB=0 MAXCOS=0 STATUS=0 NCASES=0 TIMED_OUT="" ERRMSG="" GEMMDIFF=""
REPLAY="" CMP_TIME=0

# fp8run NAME DEVICE INI OUT [extra run options]: one run under the time left; sets RUN_WALL
# (process wall seconds), RUN_REPLAY (run.json wall_time_s), RUN_STEPS, RUN_RC.
fp8run() {
  local name=$1 dev=$2 ini=$3 out=$4 t lim
  shift 4
  lim=$(left)
  if [ "$lim" -lt 3 ]; then
    RUN_RC=124
    TIMED_OUT=" (timed out before $name --device $dev)"
    log "$name --device $dev: no time left"
    return
  fi
  t=$(now)
  timeout -k 5 "$lim" "$RUN" run "$ini" --device "$dev" --threads "$THREADS" --no-report --force \
    --quiet --out "$out" "$@" >"$out.log" 2>&1
  RUN_RC=$?
  RUN_WALL=$(awk -v a="$t" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
  RUN_REPLAY=$(sed -n 's/.*"wall_time_s": *\([0-9.eE+-]*\).*/\1/p' "$out/run.json" 2>/dev/null)
  RUN_STEPS=$(sed -n 's/.*"steps_replayed": *\([0-9]*\).*/\1/p' "$out/run.json" 2>/dev/null)
  RUN_SHAPE="$(sed -n 's/^ *"tensors": *\([0-9][0-9]*\).*/\1/p' "$out/run.json" 2>/dev/null) tensors x"
  RUN_SHAPE="$RUN_SHAPE $(sed -n 's/^ *"configurations": *\([0-9][0-9]*\),*$/\1/p' "$out/run.json" 2>/dev/null) configurations"
  if [ "$RUN_RC" = 124 ] || [ "$RUN_RC" = 137 ]; then
    TIMED_OUT=" (timed out in $name --device $dev)"
    log "$name --device $dev: TIMED OUT after $RUN_WALL s"
  elif [ "$RUN_RC" != 0 ]; then
    log "$name --device $dev: FAILED, exit $RUN_RC:"
    sed 's/^/    /' "$out.log" | tail -5
    ERRMSG="; $name --device $dev failed (exit $RUN_RC): $(grep -v '^ *$' "$out.log" | tail -1 | cut -c1-160)"
  else
    log "$name --device $dev: ${RUN_STEPS:-?} steps, replay ${RUN_REPLAY:-?} s, process $RUN_WALL s," \
      "engine $(sed -n 's/.*"engine": *"\([^"]*\)".*/\1/p' "$out/run.json")"
  fi
}

# case_run NAME INI: B, then A, then the comparison. Returns 0 when compared (pass or fail),
# 1 when a run failed or timed out. Sets B_REPLAY A_REPLAY B_WALL A_WALL STEPS.
case_run() {
  local name=$1 ini=$2 res t rc
  fp8run "$name" "$DEV_B" "$ini" "$WORK/$name.B"
  if [ "$RUN_RC" != 0 ] && [ -z "$TIMED_OUT" ]; then # the B engine does not work: stop here
    STATUS=1
    CASES="$CASES $name:B-failed"
    finish
  fi
  [ "$RUN_RC" = 0 ] || return 1
  if [ "$DEV_B" = gpu ] && ! grep -q '"engine": *"gpu' "$WORK/$name.B/run.json"; then
    STATUS=1
    ERRMSG="; $name --device gpu did not run on the GPU engine (run.json: $(grep -o '"engine": *"[^"]*"' "$WORK/$name.B/run.json"))"
    CASES="$CASES $name:B-not-gpu"
    finish
  fi
  B_REPLAY=$RUN_REPLAY B_WALL=$RUN_WALL STEPS=$RUN_STEPS SHAPE=$RUN_SHAPE
  fp8run "$name" cpu "$ini" "$WORK/$name.A"
  [ "$RUN_RC" = 0 ] || return 1
  A_REPLAY=$RUN_REPLAY A_WALL=$RUN_WALL
  t=$(now)
  timeout -k 5 "$(($(left) > 5 ? $(left) : 5))" \
    "$PY" "$SRC/scripts/compare_runs.py" "$WORK/$name.A" "$WORK/$name.B" --rtol "$RTOL" --show 8 \
    >"$WORK/$name.cmp" 2>&1
  rc=$?
  CMP_TIME=$(awk -v a="$t" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
  log "$name: compared in $CMP_TIME s"
  sed 's/^/    /' "$WORK/$name.cmp"
  res=$(grep '^RESULT ' "$WORK/$name.cmp" | tail -1)
  val() { echo "$res" | grep -oE "\\b$1=[^ ]+" | cut -d= -f2; }
  if [ -z "$res" ]; then
    log "$name: compare_runs.py gave no result (exit $rc)"
    STATUS=1
    CASES="$CASES $name:compare-failed"
    [ "$rc" = 124 ] && TIMED_OUT=" (timed out comparing $name)"
    return 0
  fi
  NCASES=$((NCASES + 1))
  ROWS=$((ROWS + $(val rows)))
  [ "$(val exact_identical)" = yes ] || EXACT=no
  MAXMSE=$(awk -v a="$MAXMSE" -v b="$(val max_rel_mse)" 'BEGIN { print (b > a ? b : a) }')
  MAXSNR=$(awk -v a="$MAXSNR" -v b="$(val max_rel_snr)" 'BEGIN { print (b > a ? b : a) }')
  MAXDB=$(awk -v a="$MAXDB" -v b="$(val max_abs_snr_db)" 'BEGIN { print (b > a ? b : a) }')
  MAXCOS=$(awk -v a="$MAXCOS" -v b="$(val max_abs_cos)" 'BEGIN { print (b + 0 > a ? b + 0 : a) }')
  [ "$(val gemm_max_rel)" != none ] && GEMMDIFF="$GEMMDIFF $name:$(val gemm_max_rel)"
  if [ "$(val status)" = PASS ] && [ "$rc" = 0 ]; then
    CASES="$CASES $name:ok"
    log "$name: PASS"
  else
    CASES="$CASES $name:MISMATCH"
    STATUS=1
    log "$name: MISMATCH (above)"
  fi
  return 0
}

failed_label() { [ -n "$TIMED_OUT" ] && echo timed-out || echo run-failed; }

finish() {
  local verdict parity replay
  if [ "$NCASES" = 0 ]; then
    STATUS=1
  fi
  verdict=$([ "$STATUS" = 0 ] && echo PASS || echo FAIL)
  local diffs
  diffs="max rel diff mse $(fmt "$MAXMSE"), snr $(fmt "$MAXSNR") ($(fmt "$MAXDB") dB), cos_sim max abs diff $(fmt "$MAXCOS")"
  [ "$NCASES" = 0 ] && EXACT=n/a && diffs="max rel diff n/a"
  [ -n "$GEMMDIFF" ] && diffs="$diffs; gemm.csv rel_error max rel diff$GEMMDIFF"
  [ -n "$AUTO_FAIL" ] && STATUS=1 && verdict=FAIL
  parity="$verdict$DRY,$CASES, $ROWS rows compared, exact columns identical: $EXACT, $diffs; rtol $RTOL$TIMED_OUT$ERRMSG$AUTO_FAIL$STALE"
  replay=${REPLAY:-n/a (no synth case completed)$TIMED_OUT}
  log "done in $(($(date +%s) - T0)) s"
  [ "${PARITY_KEEP:-0}" = 1 ] || rm -rf "$WORK"
  summary_and_exit "$STATUS" "$parity" "$replay"
}

# replay_line NAME: the benchmark line from the last case's times
replay_line() {
  local b_ps a_ps ratio what
  b_ps=$(awk -v t="$B_REPLAY" -v n="$STEPS" 'BEGIN { printf "%.4g", t / n }')
  a_ps=$(awk -v t="$A_REPLAY" -v n="$STEPS" 'BEGIN { printf "%.4g", t / n }')
  ratio=$(awk -v a="$A_REPLAY" -v b="$B_REPLAY" 'BEGIN {
    if (b <= 0) print "n/a"; else if (a >= b) printf "%.2fx faster", a / b; else printf "%.2fx SLOWER", b / a }')
  what="$1: $STEPS steps x $SHAPE, --threads $THREADS"
  if [ "$DEV_B" = gpu ]; then
    REPLAY="GPU engine $b_ps s/step vs CPU engine $a_ps s/step (GPU $ratio; $what; process wall $B_WALL s vs $A_WALL s)"
  else
    REPLAY="DRY RUN (B = --device $DEV_B): B $b_ps s/step vs CPU engine $a_ps s/step ($ratio; $what; process wall $B_WALL s vs $A_WALL s)"
  fi
}

# ------------------------------------------------------------------ experiments
write_edge_ini() { # INI TRACE
  cat >"$1" <<EOF
; device-parity.sh: corner-case trace, every per-tensor kind, block kinds (CPU in both runs),
; the FP4 kinds (their casts on the GPU: kernels/fp4.cu)
[trace]
path = $2
[recipe.sweep]
kind = delayed
format = hybrid
history_len = 1, 2, 5, 1024
margin = -1, 0, 2
amax_compute = max, most_recent
[recipe.e4m3]
kind = delayed
format = e4m3
history_len = 3
margin = 1
amax_compute = most_recent
[recipe.e5m2]
kind = delayed
format = e5m2
history_len = 3
margin = 0
amax_compute = max
[recipe.cur]
kind = current
format = hybrid
[recipe.cur_pow2]
kind = current
format = hybrid
pow2 = true
[recipe.cur_eps]
kind = current
format = hybrid
amax_epsilon = 1e-3
margin = 1
[recipe.cur_e5m2]
kind = current
format = e5m2
[recipe.mx]
kind = mxfp8
[recipe.blk]
kind = block
block = auto
[recipe.rows]
kind = rowwise
[recipe.nv46]
kind = nvfp4
block_scale = 4over6_mae
[recipe.nvsr]
kind = nvfp4
block = 1x16
rounding = stochastic
sr_seed = 9
[recipe.mx4]
kind = mxfp4
scale_rounding = floor
[analysis]
gemm = false
EOF
}

write_bench_ini() { # INI TRACE [STEPS]
  cat >"$1" <<EOF
; device-parity.sh: 99 per-tensor configurations (more than one 64-configuration launch)
[trace]
path = $2
${3:+steps = $3}
[recipe.hybrid]
kind = delayed
format = hybrid
history_len = 1, 2, 4, 16, 64, 128, 512, 1024
margin = 0, 1, 2
amax_compute = max, most_recent
[recipe.e4m3]
kind = delayed
format = e4m3
history_len = 1, 16, 128, 1024
margin = 0, 1, 2
amax_compute = max, most_recent
[recipe.e5m2]
kind = delayed
format = e5m2
history_len = 1, 16, 128, 1024
margin = 0, 1, 2
amax_compute = max, most_recent
[recipe.cur]
kind = current
format = hybrid
[recipe.cur_pow2]
kind = current
format = e4m3
pow2 = true
[recipe.cur_e5m2]
kind = current
format = e5m2
margin = 1
amax_epsilon = 1e-30
[analysis]
gemm = false
EOF
}

# ------------------------------------------------------------------ 1. corner cases
if timeout 30 "$PY" -c 'import numpy, ml_dtypes' 2>/dev/null; then
  for c in "edge-st 11" "edge-npy 12 --npy"; do
    # shellcheck disable=SC2086 # name, seed and options
    set -- $c
    name=$1 seed=$2
    shift 2
    if ! timeout 60 "$PY" "$SRC/tools/reference/gen_trace.py" "$WORK/$name.trace" --seed "$seed" "$@" \
      >"$WORK/$name.gen.log" 2>&1; then
      log "$name: gen_trace.py failed: $(tail -1 "$WORK/$name.gen.log")"
      STATUS=1
      CASES="$CASES $name:gen-failed"
      continue
    fi
    log "$name: $(head -1 "$WORK/$name.gen.log")"
    write_edge_ini "$WORK/$name.ini" "$WORK/$name.trace"
    if ! case_run "$name" "$WORK/$name.ini"; then
      STATUS=1
      CASES="$CASES $name:$(failed_label)"
      [ -n "$TIMED_OUT" ] && finish
    fi
  done
else
  log "edge cases skipped: python3 has no numpy + ml_dtypes (tools/reference/gen_trace.py needs them)"
  CASES="$CASES edge:skipped"
fi

# ------------------------------------------------------------------ 1b. GEMM errors
# cuBLASLt's FP8 GEMMs (GPU) against the CPU's FP32 GEMM of the dequantized operands: gemm.csv
# rel_error within compare_runs.py's GEMM tolerances (1e-3 relative for dgrad/wgrad, 0.1 for
# fprop with fast accumulation); the per-GEMM largest differences go to the summary.
write_gemm_ini() { # INI TRACE
  cat >"$1" <<EOF
; device-parity.sh: GEMM errors on the engine (cuBLASLt) and on the CPU
[trace]
path = $2
[recipe.d]
kind = delayed
format = hybrid
history_len = 1, 16
[recipe.e4m3]
kind = delayed
format = e4m3
history_len = 16
[recipe.e5m2]
kind = delayed
format = e5m2
history_len = 16
[recipe.cur]
kind = current
format = hybrid
[recipe.cur_e4m3]
kind = current
format = e4m3
[recipe.mx]
kind = mxfp8
[analysis]
gemm = true
; exact: the GEMMs on cuBLASLt (the sampled estimate, the default, runs on the CPU engine)
gemm_error = exact
gemm_max_tokens = 64
EOF
}
if "$RUN" synth llm "$WORK/gemm.trace" --steps 4 --seed 7 >"$WORK/gemm.gen.log" 2>&1; then
  write_gemm_ini "$WORK/gemm.ini" "$WORK/gemm.trace"
  if ! case_run gemm "$WORK/gemm.ini"; then
    STATUS=1
    CASES="$CASES gemm:$(failed_label)"
    [ -n "$TIMED_OUT" ] && finish
  fi
else
  log "gemm: synth failed: $(tail -1 "$WORK/gemm.gen.log")"
  STATUS=1
  CASES="$CASES gemm:gen-failed"
fi

# ------------------------------------------------------------------ 2. synth, 20 steps: calibration
PRESETS=(llm spiky underflow)
gen_piece() { # K: piece K (steps 20K .. 20K+19) into $WORK/synth/
  local k=$1 d="$WORK/piece$1" f n
  "$RUN" synth "${PRESETS[$((k % 3))]}" "$d" --steps 20 --seed $((k + 1)) >/dev/null 2>"$d.err" || return 1
  for f in "$d"/step_*.safetensors; do
    n=${f##*/step_}
    n=${n%.safetensors}
    mv "$f" "$WORK/synth/step_$((n + 20 * k)).safetensors" || return 1
  done
  awk -F, -v off=$((20 * k)) 'NR > 1 { print $1 + off "," $2 "," $3 }' "$d/amax.csv" >"$WORK/amax.$k.csv" &&
    rm -rf "$d" "$d.err"
}
merge_amax() { # K0 K1: the amax.csv of pieces K0..K1-1 appended in step order
  local k
  for ((k = $1; k < $2; k++)); do cat "$WORK/amax.$k.csv"; done >>"$WORK/synth/amax.csv"
}
mkdir -p "$WORK/synth"
echo "step,tensor,amax" >"$WORK/synth/amax.csv"
t=$(now)
if ! gen_piece 0; then
  log "synth failed: $(cat "$WORK/piece0.err" 2>/dev/null)"
  STATUS=1
  CASES="$CASES synth:gen-failed"
  finish
fi
merge_amax 0 1
GEN_TIME=$(awk -v a="$t" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
log "synth piece 0 (llm, 20 steps) in $GEN_TIME s"
write_bench_ini "$WORK/synth20.ini" "$WORK/synth" "0-19"
if ! case_run synth20 "$WORK/synth20.ini"; then
  CASES="$CASES synth20:$(failed_label)"
  STATUS=1
  finish
fi
replay_line synth20

# ------------------------------------------------------------------ 3. synth, N steps: the benchmark
# seconds per step of the slower engine; N so that it takes about TARGET s, and the two runs
# plus generation and comparison fit in what is left
# per step: the slower engine's replay (p), and everything of a step (q: both runs' process
# times, the comparison, the generation spread over the cores); n so that the slower replay
# takes TARGET s and all of it fits in what is left, with 25% to spare
per=$(awk -v a="$A_REPLAY" -v b="$B_REPLAY" 'BEGIN { m = a > b ? a : b; printf "%.6f", m / 20 }')
all=$(awk -v a="$A_WALL" -v b="$B_WALL" -v c="$CMP_TIME" -v g="$GEN_TIME" -v k="$NCPU" \
  'BEGIN { printf "%.6f", (a + b + c + g / (k < 4 ? k : 4)) / 20 }')
budget=$(($(left) - 5))
n=$(awk -v p="$per" -v q="$all" -v t="$TARGET" -v b="$budget" -v max="$MAX_STEPS" 'BEGIN {
  if (p <= 0) p = 1e-3
  n = t / p; if (1.25 * n * q > b) n = b / (1.25 * q)
  if (n > max) n = max
  n = int(n / 20) * 20; print n }')
if [ "$n" -le 20 ]; then
  log "synthN not run: at $(fmt "$all") s a step in all, ${budget} s left allow no more than 20 steps"
  finish
fi
log "synth$n: $n steps (the slower engine replays a step in $(fmt "$per") s, $(fmt "$all") s a step in all)"
K=$((n / 20))
t=$(now)
fails=0
pids=()
for ((k = 1; k < K; k++)); do
  gen_piece "$k" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "$NCPU" ]; then
    for p in "${pids[@]}"; do wait "$p" || fails=1; done
    pids=()
  fi
done
for p in "${pids[@]}"; do wait "$p" || fails=1; done
if [ "$fails" != 0 ] || [ "$(find "$WORK/synth" -name 'step_*.safetensors' | wc -l)" != "$n" ]; then
  log "synth pieces failed: $(cat "$WORK"/piece*.err 2>/dev/null | head -3)"
  CASES="$CASES synth$n:gen-failed"
  STATUS=1
  finish
fi
merge_amax 1 "$K"
log "synth pieces 1..$((K - 1)) ($K x 20 steps, llm/spiky/underflow) in" \
  "$(awk -v a="$t" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s, $(du -sh "$WORK/synth" | cut -f1)"
write_bench_ini "$WORK/synth$n.ini" "$WORK/synth"
if case_run "synth$n" "$WORK/synth$n.ini"; then
  replay_line "synth$n"
else
  CASES="$CASES synth$n:$(failed_label)"
  [ -n "$TIMED_OUT" ] || STATUS=1
  REPLAY="$REPLAY; synth$n did not complete$TIMED_OUT"
fi
finish
