#!/usr/bin/env bash
# bench/scale.sh: fp8lab at the size of real models (issue 27). A benchmark, not a test: the
# numbers depend on the machine and its load (printed with them).
#
#   bench/scale.sh                      everything (about 15 minutes and 10 GB of disk here)
#   REPS=1 STEPS70=500 bench/scale.sh   a quicker look
#
# Inputs (bench/gen_scale.py; generated once into OUT, removed at the end unless KEEP=1):
#   big   a 1-2B-parameter transformer's shapes: 8 layers x qkv [6144, 2048], proj [2048,
#         2048], fc1 [8192, 2048], fc2 [2048, 8192], each Linear's input, weight, grad_output
#         in BF16 at 4,096 tokens: 3 snapshots of 2.95 GB, amax.csv over 1,000 steps
#   a70   a Llama-2-70B-shaped amax stream: 1,680 tensors x 10,000 steps (16.8 M rows, 0.9 GB)
#         and one tiny snapshot at step 0
# Measured, in REPS interleaved rounds (each round runs every variant once, the order rotated
# by the round), medians, 1 thread, page cache warm (an untimed round first):
#   readpass  build/bench_readpass over the big trace's snapshots: one mapped pass, first
#             touch of every page (the memory-bound floor of a replay)
#   K=1       fp8lab run, 1 delayed configuration (TE's default), gemm off; K=1 gemm: on
#   K=25      24 delayed (history 1, 16, 128, 1024 x margin 0, 1, 2 x max, most_recent) +
#             current, gemm off; K=25 gemm: on ([analysis] defaults: sampled, 64 x 64)
# then once each (STEPS70 steps of a70, 24 delayed configurations):
#   inspect a70 (time, peak RSS); run (time, peak RSS, the stream's bytes per row and write
#   rate); report of that run (time, peak RSS).
# Opt-in, MOE=1 (after the rest) or MOE=only (alone): a DeepSeek-V3-shaped amax stream (issue
# 40; gen_scale.py amaxmoe: 90,729 tensors, 89,088 of them routed experts', x STEPSMOE steps,
# amax.csv 6.1 GB and tokens.csv 1.5 GB at 1,000 steps, one tiny snapshot), once each: the
# generator, inspect, then for each K of MOECONFIGS ("24 6 1": the 24 delayed configurations
# above; history 1024 x margin 0, 1, 2 x max, most_recent; TE's default) run with
# [output] stream = npy (time, peak RSS, the stream's bytes per row) and its report (time, peak
# RSS; no ulimit), each run folder removed after its report unless KEEP=1. Disk: the trace
# (7.6 GB) + the largest run folder (11.3 GB at K=24, 1,000 steps): about 19 GB; memory: the
# run about 8 GB at K=24 (the amax rows, 24 bytes each, and 24 histories per tensor).
# Environment: FP8LAB (default build/fp8lab), READPASS (build/bench_readpass), OUT (default a
# new temporary folder), REPS (3), STEPS70 (10000: every step; 500 takes a minute), KEEP (0),
# PYTHON (python3 with numpy), REPORT_MEM_KB (4000000: the report's ulimit -v), MOE (0; 1 or
# only), STEPSMOE (1000), MOECONFIGS ("24 6 1"). Progress on stderr; the table on stdout and in
# OUT/results.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
FP8LAB=${FP8LAB:-$root/build/fp8lab}
READPASS=${READPASS:-$root/build/bench_readpass}
REPS=${REPS:-3}
STEPS70=${STEPS70:-10000}
KEEP=${KEEP:-0}
PYTHON=${PYTHON:-python3}
REPORT_MEM_KB=${REPORT_MEM_KB:-4000000}
MOE=${MOE:-0}
STEPSMOE=${STEPSMOE:-1000}
MOECONFIGS=${MOECONFIGS:-24 6 1}
OUT=${OUT:-$(mktemp -d /tmp/fp8lab-scale.XXXXXX)}
say() { echo "scale.sh: $*" >&2; }
die() { say "$*"; exit 1; }
case $MOE in 0 | 1 | only) ;; *) die "MOE must be 0, 1 or only (not '$MOE')" ;; esac
bins=("$FP8LAB")
[ "$MOE" != only ] && bins+=("$READPASS")
for b in "${bins[@]}"; do
  [ -x "$b" ] || die "no $b (cmake --build build --target fp8lab bench_readpass)"
done
command -v /usr/bin/time >/dev/null || die "needs /usr/bin/time (Debian: time)"
mkdir -p "$OUT/ex" "$OUT/logs"
cd "$OUT"

# one timed command: "<seconds> <peak KB>" appended to OUT/times.csv as name,round,s,kb
timed() { # name round cmd...
  local name=$1 round=$2
  shift 2
  /usr/bin/time -f "%e %M" -o "$OUT/logs/t" "$@" > "$OUT/logs/$name.log" 2>&1 ||
    die "$name failed (exit $?): see $OUT/logs/$name.log"
  read -r s kb < "$OUT/logs/t"
  echo "$name,$round,$s,$kb" >> "$OUT/times.csv"
}
echo "name,round,s,kb" > times.csv
sweep='[recipe.delayed]
kind = delayed
format = hybrid
history_len = 1, 16, 128, 1024
margin = 0, 1, 2
amax_compute = max, most_recent'
te='[recipe.te]
kind = delayed
format = hybrid
history_len = 1024
margin = 0
amax_compute = max'

if [ "$MOE" != only ]; then
if [ ! -f big/amax.csv ]; then
  say "generating the big trace (9 GB) in $OUT/big"
  "$PYTHON" "$here/gen_scale.py" big big >&2
fi
if [ ! -f a70/amax.csv ]; then
  say "generating the 70B-shaped amax stream in $OUT/a70"
  "$PYTHON" "$here/gen_scale.py" amax70b a70 >&2
fi

for g in false true; do
  printf '[trace]\npath = ../big\n%s\n[analysis]\ngemm = %s\n' "$te" "$g" > "ex/k1_$g.ini"
  printf '[trace]\npath = ../big\n%s\n[recipe.current]\nkind = current\nformat = hybrid\n[analysis]\ngemm = %s\n' \
    "$sweep" "$g" > "ex/k25_$g.ini"
done
printf '[trace]\npath = ../a70\nsteps = 0-%d\n%s\n' "$((STEPS70 - 1))" "$sweep" > ex/a70.ini

run_variant() { # name round
  case $1 in
    readpass) timed readpass "$2" "$READPASS" big/step_*.safetensors ;;
    k1|k1_gemm|k25|k25_gemm)
      local k=${1%_gemm} g=false
      [ "$1" != "$k" ] && g=true
      timed "$1" "$2" "$FP8LAB" run "ex/${k}_$g.ini" --out "o_$1" --force --no-report --quiet \
        --threads 1 ;;
  esac
}

variants=(readpass k1 k1_gemm k25 k25_gemm)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
say "untimed round (warms the page cache)"
for v in "${variants[@]}"; do run_variant "$v" 0; done
for ((r = 1; r <= REPS; r++)); do
  say "round $r of $REPS"
  n=${#variants[@]}
  for ((i = 0; i < n; i++)); do run_variant "${variants[$(((i + r) % n))]}" "$r"; done
done

say "70B-shaped stream: inspect, run over $STEPS70 steps (24 configurations), report"
timed inspect70 1 "$FP8LAB" inspect a70
timed run70 1 "$FP8LAB" run ex/a70.ini --out o_a70 --force --no-report --quiet --threads 1
# the report under a virtual-memory limit (REPORT_MEM_KB, default 4 GB): past the issue's 2 GB
# goal it may not succeed (it holds the whole stream: 30 bytes a row), and it must say so
report_note=
if ! (ulimit -v "$REPORT_MEM_KB" && /usr/bin/time -f "%e %M" -o "$OUT/logs/t" "$FP8LAB" report \
      o_a70 --quiet > "$OUT/logs/report70.log" 2>&1); then
  report_note="failed under ulimit -v $REPORT_MEM_KB KB: $(tail -1 "$OUT/logs/report70.log")"
  say "report: $report_note"
fi
read -r s kb < <(tail -1 "$OUT/logs/t") || { s=nan; kb=0; } # (time -f's last line)
echo "report70,1,$s,$kb" >> "$OUT/times.csv"
load1=$(cut -d' ' -f1-3 /proc/loadavg)

stream_file=o_a70/stream.npy # the compact stream (auto, above 5 M rows), else stream.csv
[ -f "$stream_file" ] || stream_file=o_a70/stream.csv
stream_bytes=$(du -sb "$stream_file" | cut -f1)
stream_rows=$("$PYTHON" -c "import json; print(json.load(open('o_a70/run.json'))['stream_rows'])")

"$PYTHON" - "$OUT" "$stream_bytes" "$stream_rows" "$load0" "$load1" "$STEPS70" "$report_note" <<'EOF' | tee results.md
import csv, statistics, sys
out, sbytes, srows, load0, load1, steps70, report_note = sys.argv[1:]
t = {}
for r in csv.DictReader(open(out + "/times.csv")):
    if r["round"] != "0":
        t.setdefault(r["name"], []).append((float(r["s"]), int(r["kb"])))
med = {k: statistics.median(s for s, _ in v) for k, v in t.items()}
rss = {k: max(kb for _, kb in v) / 1024 for k, v in t.items()}
n = {k: len(v) for k, v in t.items()}
print("| measure | seconds (median of %d) | peak RSS (MB) | ratio |" % n["k1"])
print("|---|---|---|---|")
print("| one mapped read pass of the snapshots (bench_readpass) | %.2f | %.0f | 1 |"
      % (med["readpass"], rss["readpass"]))
for k, what, base in (("k1", "K=1, gemm off", "readpass"), ("k25", "K=25, gemm off", "k1"),
                      ("k1_gemm", "K=1, gemm on (sampled)", "k1"),
                      ("k25_gemm", "K=25, gemm on (sampled)", "k25")):
    print("| %s | %.2f | %.0f | %.2f x %s |" % (what, med[k], rss[k], med[k] / med[base],
                                                  base.replace("_", " ")))
sb, sr = int(sbytes), int(srows)
print("| 70B stream: `fp8lab inspect` (16.8 M amax rows) | %.2f | %.0f | |"
      % (med["inspect70"], rss["inspect70"]))
print("| 70B stream: `fp8lab run`, %s steps x 1,680 tensors x 24 configurations | %.2f | %.0f | "
      "stream %.1f bytes per row, %.0f MB/s of stream written |"
      % (steps70, med["run70"], rss["run70"], sb / max(sr, 1), sb / 1e6 / med["run70"]))
print("| 70B stream: `fp8lab report` of that run (%d stream rows) | %.2f | %.0f | %s |"
      % (sr, med["report70"], rss["report70"], report_note))
print()
print("Load average (1, 5, 15 min) before: %s; after: %s." % (load0, load1))
EOF
if [ "$KEEP" != 1 ]; then
  say "removing the generated inputs and outputs (KEEP=1 keeps them)"
  rm -rf big a70 o_*
fi
fi # MOE != only

if [ "$MOE" != 0 ]; then
  mload0=$(cut -d' ' -f1-3 /proc/loadavg)
  [ "$MOE" = only ] && : > results.md
  if [ ! -f moe/amax.csv ] || [ "$(cat moe.steps 2>/dev/null)" != "$STEPSMOE" ]; then
    rm -rf moe moe.steps
    say "generating the DeepSeek-V3-shaped amax stream ($STEPSMOE steps) in $OUT/moe"
    timed gen_moe 1 "$PYTHON" "$here/gen_scale.py" amaxmoe moe --steps "$STEPSMOE"
    echo "$STEPSMOE" > moe.steps
  fi
  trace_bytes=$(du -sb moe | cut -f1)
  say "MoE stream: inspect"
  timed inspect_moe 1 "$FP8LAB" inspect moe
  npy='[output]
stream = npy'
  hist1024=${sweep/1, 16, 128, 1024/1024}
  printf '[trace]\npath = ../moe\n%s\n%s\n' "$sweep" "$npy" > ex/moe24.ini
  printf '[trace]\npath = ../moe\n%s\n%s\n' "$hist1024" "$npy" > ex/moe6.ini
  printf '[trace]\npath = ../moe\n%s\n%s\n' "$te" "$npy" > ex/moe1.ini
  : > moe_streams.csv
  for k in $MOECONFIGS; do
    [ -f "ex/moe$k.ini" ] || die "MOECONFIGS: $k is not one of 24, 6, 1"
    say "MoE stream: run and report, $k configurations"
    timed "run_moe$k" 1 "$FP8LAB" run "ex/moe$k.ini" --out "o_moe$k" --force --no-report \
      --quiet --threads 1
    sb=$(du -sb "o_moe$k/stream.npy" | cut -f1)
    rows=$("$PYTHON" -c "import json; print(json.load(open('o_moe$k/run.json'))['stream_rows'])")
    timed "report_moe$k" 1 "$FP8LAB" report "o_moe$k" --quiet
    echo "$k,$sb,$rows,$(du -sb "o_moe$k" | cut -f1)" >> moe_streams.csv
    [ "$KEEP" = 1 ] || rm -rf "o_moe$k"
  done
  mload1=$(cut -d' ' -f1-3 /proc/loadavg)
  "$PYTHON" - "$OUT" "$STEPSMOE" "$trace_bytes" "$mload0" "$mload1" <<'EOF' | tee -a results.md
import csv, sys
out, steps, tbytes, load0, load1 = sys.argv[1:]
t = {r["name"]: (float(r["s"]), int(r["kb"]) / 1024)
     for r in csv.DictReader(open(out + "/times.csv"))}
print()
print("| DeepSeek-V3-shaped stream (90,729 tensors x %s steps) | seconds | peak RSS (MB) | |"
      % steps)
print("|---|---|---|---|")
if "gen_moe" in t:
    print("| gen_scale.py amaxmoe (trace %.2f GB) | %.1f | %.0f | |"
          % ((int(tbytes) / 1e9,) + t["gen_moe"]))
print("| `fp8lab inspect` | %.1f | %.0f | |" % t["inspect_moe"])
big = 0
for k, sb, rows, dirb in csv.reader(open(out + "/moe_streams.csv")):
    sb, rows, big = int(sb), int(rows), max(big, int(dirb))
    print("| `fp8lab run`, %s configurations | %.1f | %.0f | stream.npy %.2f GB, %.2f bytes a "
          "row (%d rows) |" % ((k,) + t["run_moe" + k] + (sb / 1e9, sb / max(rows, 1), rows)))
    print("| `fp8lab report` of that run | %.1f | %.0f | |" % t["report_moe" + k])
print()
print("Disk: the trace %.1f GB + the largest run folder %.1f GB. Load average (1, 5, 15 min) "
      "before: %s; after: %s." % (int(tbytes) / 1e9, big / 1e9, load0, load1))
EOF
  [ "$KEEP" = 1 ] || rm -rf moe moe.steps
fi
say "results: $OUT/results.md"
