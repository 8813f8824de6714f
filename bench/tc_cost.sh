#!/usr/bin/env bash
# bench/tc_cost.sh: what `[analysis] tensor_core` costs the sampled GEMM error (issue 46). A
# benchmark, not a test: the numbers depend on the machine and its load (printed with them).
#
#   bench/tc_cost.sh [TRACE]
#
# TRACE: a trace folder with long reductions; default: one written once into OUT by
# `bench/gen_scale.py big OUT/trace --layers 2 --hidden 4096 --ffn 8192 --tokens 2048
# --snapshots 2 --steps 20` (8 Linears: K = 4096 or 8192 for fprop and dgrad, 2048 for wgrad;
# 1.9 GB). The same experiment (delayed history 16 and 1024, current scaling; hybrid; the
# default gemm_sample 64) runs with `gemm = false`, `tensor_core = exact`, `h100` and `b200`,
# REPS (3) interleaved rounds after an untimed one (page cache), --threads THREADS (1),
# --no-report. The GEMM error's cost is each run's time less the run without GEMMs; the ratio
# of the model's to exact's is the figure (target <= 3). Medians on stdout and in
# OUT/results.md. Environment: FP8LAB (default build/fp8lab), OUT (a new temporary folder),
# REPS, THREADS, PYTHON (python3 with numpy and ml_dtypes, for the default trace).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
FP8LAB=${FP8LAB:-$root/build/fp8lab}
REPS=${REPS:-3}
THREADS=${THREADS:-1}
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$(mktemp -d /tmp/fp8lab-tc.XXXXXX)}
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time" >&2; exit 1; }
mkdir -p "$OUT"
if [ $# -ge 1 ]; then
  TRACE=$(cd "$1" && pwd)
else
  TRACE=$OUT/trace
  [ -f "$TRACE/amax.csv" ] || "$PYTHON" "$here/gen_scale.py" big "$TRACE" --layers 2 \
    --hidden 4096 --ffn 8192 --tokens 2048 --snapshots 2 --steps 20 >&2
fi
cd "$OUT"
variants="off exact h100 b200"
for v in $variants; do
  case $v in
    off) an="gemm = false" ;;
    *) an="tensor_core = $v" ;;
  esac
  cat > "$v.ini" <<EOF
[trace]
path = $TRACE
[recipe.delayed]
kind = delayed
format = hybrid
history_len = 16, 1024
[recipe.current]
kind = current
format = hybrid
[analysis]
$an
[output]
dir = out_$v
EOF
done
: > times.csv
for round in $(seq 0 "$REPS"); do
  set -- $variants
  for _ in $(seq 1 $((round % 4))); do set -- "${@:2}" "$1"; done # rotate the order
  for v in "$@"; do
    /usr/bin/time -f "%e" -o "time_$v.txt" "$FP8LAB" run "$v.ini" --force --no-report \
      --threads "$THREADS" >/dev/null 2>"run_$v.err"
    t=$(tail -1 "time_$v.txt")
    [ "$round" -gt 0 ] && echo "$v,$t" >> times.csv
  done
done
"$PYTHON" - "$OUT" <<'EOF'
import csv, statistics, sys, os
out = sys.argv[1]
t = {}
for v, s in csv.reader(open(os.path.join(out, "times.csv"))):
    t.setdefault(v, []).append(float(s))
m = {v: statistics.median(x) for v, x in t.items()}
g = {v: m[v] - m["off"] for v in m if v != "off"}
lines = ["| variant | run (s, median of %d) | GEMM error (s) | / exact |" % len(t["off"]),
         "|---|---:|---:|---:|",
         "| gemm = false | %.2f | | |" % m["off"]]
for v in ("exact", "h100", "b200"):
    lines.append("| tensor_core = %s | %.2f | %.2f | %.2fx |" % (v, m[v], g[v], g[v] / g["exact"]))
text = "\n".join(lines)
print(text)
open(os.path.join(out, "results.md"), "w").write(text + "\n")
EOF
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); folder: $OUT" >&2
