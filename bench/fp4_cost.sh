#!/usr/bin/env bash
# bench/fp4_cost.sh: wall time of `fp8lab run experiments/fp4.ini` against
# `fp8lab run experiments/recipes.ini` (issue 29's goal: FP4 within 2x of the FP8 recipes), both
# on the synthetic llm trace with their GEMM errors, run as the user runs them (--no-report:
# the replay; REPORT=1 adds the report). A benchmark, not a test.
#
#   bench/fp4_cost.sh            REPS=5 rounds, A and B interleaved (the order alternating)
#   REPS=1 bench/fp4_cost.sh     smoke test
#
# Prints each run's seconds, the medians and the ratio fp4 / recipes; exit 0 whatever it is.
# Environment: FP8LAB (default: build/fp8lab of this checkout), REPS, THREADS (default: all),
# OUT (default: a temporary folder, removed).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${FP8LAB:-$here/build/fp8lab}
reps=${REPS:-5}
out=${OUT:-$(mktemp -d)}
[ -n "${OUT:-}" ] || trap 'rm -rf "$out"' EXIT
[ -x "$bin" ] || { echo "fp4_cost.sh: no fp8lab at $bin (build first)" >&2; exit 2; }
args=(--quiet --force)
[ "${REPORT:-0}" = 1 ] || args+=(--no-report)
[ -n "${THREADS:-}" ] && args+=(--threads "$THREADS")
declare -a ta tb
run() { # $1 experiment name: prints the seconds
  local s e
  s=$(date +%s.%N)
  "$bin" run "$here/experiments/$1.ini" --out "$out/$1" "${args[@]}" >/dev/null 2>&1
  e=$(date +%s.%N)
  echo "$e - $s" | bc -l
}
run recipes >/dev/null # untimed: the page cache, the synthetic generator's first call
for ((i = 0; i < reps; i++)); do
  if ((i % 2 == 0)); then
    a=$(run recipes); b=$(run fp4)
  else
    b=$(run fp4); a=$(run recipes)
  fi
  ta+=("$a"); tb+=("$b")
  printf 'round %d: recipes.ini %.2f s, fp4.ini %.2f s\n' "$i" "$a" "$b"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ma=$(median "${ta[@]}"); mb=$(median "${tb[@]}")
printf 'median: recipes.ini %.2f s, fp4.ini %.2f s; fp4 / recipes = %.2f (goal <= 2)\n' \
  "$ma" "$mb" "$(echo "$mb / $ma" | bc -l)"
