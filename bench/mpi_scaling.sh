#!/usr/bin/env bash
# bench/mpi_scaling.sh: the MPI replay (issue 26) against threads, on one multi-rank trace.
# A benchmark, not a test: the numbers depend on the machine and its load.
#
#   bench/mpi_scaling.sh            (REPS=3; BIN=build/fp8lab; OUT=out/bench_mpi)
#
# The trace: 4 ranks of `fp8lab synth llm --steps 100` (seeds 1..4: the ranks' amaxes differ),
# replayed with reduce_amax over groups of 2 and 24 delayed configurations plus current scaling
# (the quickstart's sweep), no GEMM, no report. For N = 1, 2, 4 processes it times
#   mpirun -np N fp8lab run EXP --threads 1   against   fp8lab run EXP --threads N
# interleaved (A then B in every round), REPS rounds, medians; N = 4 is oversubscribed on a
# machine of fewer cores ("(over)" in the table). The outputs of the two are compared byte for byte
# (the CSVs) before anything is timed. It prints, per N, the medians, their ratio, the bytes each
# process reads (run.json's process_snapshot_bytes: the snapshot bytes of the ranks it owns) and the
# bytes the processes exchange per snapshot step (the all-reduce of two floats per tensor: the
# amax and the snapshot flag; and the rows sent to process 0). Then the same for a single-rank
# trace (rank_0 alone, no reduction), whose layers are spread over the processes: N = 2, 4.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/fp8lab}
OUT=${OUT:-out/bench_mpi}
REPS=${REPS:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v mpirun >/dev/null || { echo "mpi_scaling: no mpirun (scripts/install-deps.sh)"; exit 1; }
mkdir -p "$OUT"
if [ ! -d "$OUT/trace/rank_3" ]; then
  for r in 0 1 2 3; do "$BIN" synth llm "$OUT/trace/rank_$r" --steps 100 --seed $((r + 1)) >/dev/null; done
fi
cat > "$OUT/exp.ini" <<EOF
[trace]
path = trace
reduce_amax = true
reduce_group = 2
[recipe.delayed]
kind = delayed
history_len = 1, 16, 128, 1024
margin = 0, 1, 2
amax_compute = max, most_recent
[recipe.current]
kind = current
[analysis]
gemm = false
EOF
cores=$(nproc)
run_mpi() { mpirun --oversubscribe -np "$1" "$BIN" run "$OUT/exp.ini" --quiet --no-report --force --threads 1 --out "$OUT/mpi$1" >/dev/null 2>&1; }
run_thr() { "$BIN" run "$OUT/exp.ini" --quiet --no-report --force --threads "$1" --out "$OUT/thr$1" >/dev/null 2>&1; }
secs() { local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# the check: every CSV of the MPI run equals the threaded run's
for n in 1 2 4; do
  run_mpi "$n"; run_thr "$n"
  for f in steps.csv summary.csv histograms.csv stream.csv; do
    cmp -s "$OUT/mpi$n/$f" "$OUT/thr$n/$f" || { echo "mpi_scaling: -np $n: $f differs"; exit 1; }
  done
done
echo "machine: $cores cores; trace: 4 ranks x $(ls "$OUT"/trace/rank_0/step_*.safetensors | wc -l) snapshots; REPS=$REPS, interleaved, medians"
printf '%-10s %-14s %-16s %-8s %-28s %s\n' N "mpirun -np N" "1 proc x N thr" ratio "read per process (MB)" "exchanged per snapshot step (kB)"
for n in 1 2 4; do
  a=(); b=()
  for ((k = 0; k < REPS; k++)); do a+=("$(secs run_mpi "$n")"); b+=("$(secs run_thr "$n")"); done
  ma=$(median "${a[@]}"); mb=$(median "${b[@]}")
  # bytes each process reads: its share of the snapshot data (run.json's process_snapshot_bytes;
  # one process: all of it), and per snapshot step the bytes exchanged: 8 bytes per tensor in
  # the all-reduce (amax, snapshot flag) and the steps.csv and histograms.csv rows of the
  # tensors process 0 does not own, sent to it
  read -r reads ex < <(python3 - "$OUT/mpi$n" "$n" "$(ls "$OUT"/trace/rank_0/step_*.safetensors | wc -l)" <<'PY'
import json, sys
d, n, nsnap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open("%s/run.json" % d) as f:
    pb = json.load(f).get("process_snapshot_bytes")
if not pb:  # one process reads it all: the ranks' snapshot files
    import glob, os
    pb = [sum(os.path.getsize(p) for p in glob.glob("%s/../trace/rank_*/step_*.safetensors" % d))]
# which process owns each rank: the same rule as fp8_mpi_assign, from the ranks' file sizes
import glob, os
sizes = []
for r in range(4):
    sizes.append(sum(os.path.getsize(p) for p in glob.glob("%s/../trace/rank_%d/step_*.safetensors" % (d, r))))
load, owner = [0] * n, {}
for r in sorted(range(4), key=lambda r: (-sizes[r], r)):
    p = min(range(n), key=lambda p: (load[p], p))
    owner[r] = p
    load[p] += sizes[r]
tensors, sent = set(), 0
for f in ("steps.csv", "histograms.csv"):
    with open("%s/%s" % (d, f), "rb") as fp:
        next(fp)
        for line in fp:
            name = line.split(b",", 1)[0]
            tensors.add(name)
            r = int(name.split(b"/", 1)[0][5:])
            if n > 1 and owner[r] != 0:
                sent += len(line)
print(",".join("%.0f" % (b / 1e6) for b in pb), "%.1f" % ((8 * len(tensors) + sent / nsnap) / 1000 if n > 1 else 0.0))
PY
)
  over=""; [ "$n" -gt "$cores" ] && over=" (over)"
  printf '%-10s %-14s %-16s %-8s %-28s %s\n' "$n$over" "$(printf '%.2f s' "$ma")" "$(printf '%.2f s' "$mb")" \
    "$(echo "$ma / $mb" | bc -l | xargs printf '%.2f')" "${reads# }" "$ex"
done

# A single-rank trace (rank_0 alone): its layers are spread over the processes. The same
# experiment without the reduction; outputs compared first, then timed the same way.
sed -e 's|^path = trace$|path = trace/rank_0|' -e '/^reduce_/d' "$OUT/exp.ini" >"$OUT/exp1.ini"
run_mpi1() { mpirun --oversubscribe -np "$1" "$BIN" run "$OUT/exp1.ini" --quiet --no-report --force --threads 1 --out "$OUT/one_mpi$1" >/dev/null 2>&1; }
run_thr1() { "$BIN" run "$OUT/exp1.ini" --quiet --no-report --force --threads "$1" --out "$OUT/one_thr$1" >/dev/null 2>&1; }
for n in 2 4; do
  run_mpi1 "$n"; run_thr1 "$n"
  for f in steps.csv summary.csv histograms.csv stream.csv; do
    cmp -s "$OUT/one_mpi$n/$f" "$OUT/one_thr$n/$f" || { echo "mpi_scaling: single rank, -np $n: $f differs"; exit 1; }
  done
done
echo
echo "single-rank trace (rank_0: its layers over the processes)"
printf '%-10s %-14s %-16s %-8s %s\n' N "mpirun -np N" "1 proc x N thr" ratio "read per process (MB)"
for n in 2 4; do
  a=(); b=()
  for ((k = 0; k < REPS; k++)); do a+=("$(secs run_mpi1 "$n")"); b+=("$(secs run_thr1 "$n")"); done
  ma=$(median "${a[@]}"); mb=$(median "${b[@]}")
  reads=$(python3 -c 'import json, sys; print(",".join("%.0f" % (b / 1e6) for b in json.load(open(sys.argv[1]))["process_snapshot_bytes"]))' "$OUT/one_mpi$n/run.json")
  over=""; [ "$n" -gt "$cores" ] && over=" (over)"
  printf '%-10s %-14s %-16s %-8s %s\n' "$n$over" "$(printf '%.2f s' "$ma")" "$(printf '%.2f s' "$mb")" \
    "$(echo "$ma / $mb" | bc -l | xargs printf '%.2f')" "$reads"
done
