#!/usr/bin/env bash
# bench/hash_cost.sh: what hashing a run's inputs (run.json inputs[].sha256, issue 41) costs a
# run over a large trace. A benchmark, not a test: the numbers depend on the machine and its
# load (printed with them).
#
#   BASE=/path/to/fp8lab-before bench/hash_cost.sh TRACE
#
# TRACE: a trace folder (e.g. `bench/gen_scale.py big TRACE --snapshots 2`: 2 snapshots of
# 2.95 GB and amax.csv). BASE is fp8lab built without the hashing (the parent commit), NEW
# (default build/fp8lab) with it. In REPS (3) interleaved rounds (each round runs every variant
# once, the order rotated, after an untimed round that warms the page cache): K=1 (TE's
# default recipe) and K=25 (24 delayed + current), gemm off, --threads THREADS (1), --no-report;
# then `openssl dgst -sha256` over the same inputs once (the same library on one core: the
# time of hashing them in a pass of their own; coreutils' sha256sum is 5x slower here, without
# the CPU's SHA instructions). Medians on stdout and in OUT/results.md. Environment: NEW, BASE, OUT (a new
# temporary folder), REPS, THREADS.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
TRACE=${1:?usage: BASE=fp8lab-before bench/hash_cost.sh TRACE}
TRACE=$(cd "$TRACE" && pwd)
NEW=${NEW:-$root/build/fp8lab}
BASE=${BASE:?BASE: fp8lab built without the hashing (the parent commit)}
REPS=${REPS:-3}
THREADS=${THREADS:-1}
OUT=${OUT:-$(mktemp -d /tmp/fp8lab-hash.XXXXXX)}
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time" >&2; exit 1; }
mkdir -p "$OUT"
cd "$OUT"
cat > k1.ini <<EOF
[trace]
path = $TRACE
[recipe.te]
kind = delayed
format = hybrid
history_len = 1024
margin = 0
amax_compute = max
EOF
cat > k25.ini <<EOF
[trace]
path = $TRACE
[recipe.delayed]
kind = delayed
format = hybrid
history_len = 1, 16, 128, 1024
margin = 0, 1, 2
amax_compute = max, most_recent
[recipe.current]
kind = current
format = hybrid
EOF
echo "name,round,s" > times.csv
variants=("k1 base" "k1 new" "k25 base" "k25 new")
one() { # exp bin round
  local exp=$1 which=$2 round=$3 bin
  bin=$([ "$which" = new ] && echo "$NEW" || echo "$BASE")
  /usr/bin/time -f "%e" -o t "$bin" run "$exp.ini" --out "o_${exp}_${which}" --force --no-report \
    --quiet --threads "$THREADS" > log 2>&1 || { cat log >&2; exit 1; }
  [ "$round" = warm ] || echo "$exp $which,$round,$(cat t)" >> times.csv
}
echo "hash_cost.sh: load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
one k1 new warm
for r in $(seq 1 "$REPS"); do
  n=${#variants[@]}
  for i in $(seq 0 $((n - 1))); do
    v=${variants[$(((i + r) % n))]}
    one ${v% *} ${v#* } "$r"
  done
done
grep -q sha256 "o_k1_new/run.json" || { echo "NEW wrote no sha256: not the hashing build" >&2; exit 1; }
bytes=$(python3 -c "import json; print(sum(e['bytes'] for e in json.load(open('o_k1_new/run.json'))['inputs']))")
python3 - "$bytes" > files.txt <<'EOF'
import json, sys
for e in json.load(open("o_k1_new/run.json"))["inputs"]:
    print(e["path"])
EOF
/usr/bin/time -f "%e" -o t xargs -a files.txt -d '\n' openssl dgst -sha256 > /dev/null
sha=$(cat t)
echo "hash_cost.sh: load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$bytes" "$sha" "$REPS" <<'EOF' | tee results.md
import csv, statistics, sys
bytes_, sha, reps = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
t = {}
for row in csv.DictReader(open("times.csv")):
    t.setdefault(row["name"], []).append(float(row["s"]))
print("inputs: %.2f GB; their SHA-256 alone (openssl dgst, one core): %.2f s (%.2f GB/s)"
      % (bytes_ / 1e9, sha, bytes_ / 1e9 / sha))
print()
print("| run | without hashing (s) | with hashing (s) | cost |")
print("|---|---|---|---|")
for k in ("k1", "k25"):
    b, n = statistics.median(t[k + " base"]), statistics.median(t[k + " new"])
    print("| %s | %.2f (%s) | %.2f (%s) | %+.1f%% |" % (
        k.upper(), b, ", ".join("%.2f" % x for x in t[k + " base"]), n,
        ", ".join("%.2f" % x for x in t[k + " new"]), 100 * (n - b) / b))
EOF
