#!/usr/bin/env bash
# bench/sweep.sh: wall time of whole `fp8lab run` processes sweeping delayed scaling over the
# quickstart-like trace, against a plain numpy + ml_dtypes peer (bench/peer_sweep.py). A
# benchmark, not a test: the numbers depend on the machine and its load.
#
#   bench/sweep.sh                 full run (REPS=3; about 15 minutes on a shared 2-core machine)
#   QUICK=1 bench/sweep.sh         smoke test (steps 0-19 of the trace: 2 snapshots, REPS=1)
#
# The trace: `fp8lab synth llm TRACE --steps 200`, generated once into OUT/trace (20 snapshots
# of 1.6 M elements, BF16 activations and gradients, F32 weights, amax.csv for every step).
# The variants, every combination of
#   K        1, 24 or 64 delayed configurations, format = hybrid (section [recipe.delayed]):
#            K=1  history_len 1024 x margin 0 x max (TE's default);
#            K=24 history_len 1, 16, 128, 1024 x margin 0, 1, 2 x max, most_recent (quickstart);
#            K=64 history_len 1, 2, 4, ..., 32768 (16 powers of two) x margin 0, 1 x max,
#                 most_recent. The trace has 200 steps, so every history_len >= 256 acts like
#                 an unbounded history; fp8lab still keeps (and a TE run would keep) rings of
#                 that length.
#   tensors  mixed: all 64 tensors; bf16: `tensors = *.input, *.output, *.grad_output`, the
#            trace's BF16 roles (the weights, F32, are left out; so with gemm = true there is no
#            layer triplet and no GEMM: those rows measure gemm = true's overhead alone)
#   gemm     [analysis] gemm = false / true (gemm_error = exact, the peer's; gemm_max_tokens =
#            1024, the default)
#   threads  `--threads T` for T in THREADS
# each timed as `fp8lab run EXP.ini --no-report --quiet --force --out DIR --threads T`
# (plus `--device DEVICE` when DEVICE is set), under /usr/bin/time -v for the peak RSS.
# The peer replays K=24, all tensors, with gemm off and on (one process per run, single
# threaded: compare with --threads 1).
#
# Order of work:
#   0. an untimed round: every fp8lab variant once (it also warms the page cache); then the
#      CHECK: the peer replays every (K, tensors) with gemm off (CHECK=all, the default) or
#      only its own two variants (CHECK=timed), and its totals per tensor and configuration
#      (rows, n, nonfinite, zeros, overflow, underflow, subnormal exactly; the squared-error
#      sum to 1e-6) must equal the summary.csv of every fp8lab variant of that (K, tensors),
#      whatever its threads and gemm; the peer's GEMM errors must equal the gemm.csv of
#      K=24 / mixed / gemm on (1e-3 relative). (With CHECK=timed the variants the peer does
#      not replay must have byte-identical summary.csv across threads and gemm.) Any
#      difference stops the script (exit 1) before anything is timed.
#   1. REPS timed rounds, round-robin: each round runs every variant once (fp8lab's and the
#      peer's, the peer for the first PEER_REPS rounds only; before them one untimed run of
#      the first variant, which would otherwise pay for following the peer; rounds after the
#      first in a shuffled order, seeded by the round), so the variants of every
#      comparison alternate. Every timed fp8lab run's summary.csv must equal round 0's byte for
#      byte or pass the peer's check again; every timed peer run's totals must equal its own.
#   2. the table (median, min and max seconds, peak RSS per variant) and the ratios, on stdout
#      and in OUT/results.md; raw times in OUT/times.csv.
#
# Environment:
#   FP8LAB     the binary (default: build/fp8lab of this checkout)
#   REPS       timed rounds (default 3; QUICK: 1); PEER_REPS: the peer's (default REPS)
#   THREADS    list of --threads values (default "1 2")
#   KS         list of K values, a subset of "1 24 64" (default all three)
#   OUT        work and result folder (default: a new mktemp -d folder; kept)
#   STEPS      [trace] steps selection on the 200-step trace (default all; QUICK: 0-19)
#   CHECK      all | timed (see 0. above)
#   DEVICE     passed as --device when set (default: fp8lab's own default, auto)
#   PYTHON     interpreter with numpy and ml_dtypes for the peer (default python3)
# Progress goes to stderr, results to stdout.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then d_reps=1 d_steps=0-19; else d_reps=3 d_steps=; fi
FP8LAB=${FP8LAB:-$root/build/fp8lab}
REPS=${REPS:-$d_reps}
PEER_REPS=${PEER_REPS:-$REPS}
THREADS=${THREADS:-1 2}
KS=${KS:-1 24 64}
STEPS=${STEPS-$d_steps}
CHECK=${CHECK:-all}
DEVICE=${DEVICE:-}
PYTHON=${PYTHON:-python3}
PEER=$here/peer_sweep.py

die() { echo "sweep.sh: $*" >&2; exit 1; }
say() { echo "sweep.sh: $*" >&2; }

case "$FP8LAB" in /*) ;; *) FP8LAB=$PWD/$FP8LAB ;; esac
[ -x "$FP8LAB" ] || die "no fp8lab binary at $FP8LAB (build it: cmake --build build --target fp8lab, or set FP8LAB)"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "REPS must be >= 1, not '$REPS'"
[[ "$PEER_REPS" =~ ^[0-9]+$ ]] || die "PEER_REPS must be >= 0, not '$PEER_REPS'"
case "$CHECK" in all | timed) ;; *) die "CHECK must be all or timed, not '$CHECK'" ;; esac
for k in $KS; do case "$k" in 1 | 24 | 64) ;; *) die "KS: $k is not one of 1 24 64" ;; esac; done
for t in $THREADS; do [[ "$t" =~ ^[1-9][0-9]*$ ]] || die "THREADS: bad value '$t'"; done
"$PYTHON" -c "import numpy, ml_dtypes" 2>/dev/null ||
  die "$PYTHON lacks numpy or ml_dtypes (the peer needs them: scripts/install-deps.sh)"
have_time=0
[ -x /usr/bin/time ] && have_time=1 || say "no /usr/bin/time: peak RSS will be n/a"

if [ -z "${OUT:-}" ]; then OUT=$(mktemp -d "${TMPDIR:-/tmp}/fp8lab-sweep.XXXXXX"); fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
trace=$OUT/trace
exp=$OUT/exp
runs=$OUT/runs
chk=$OUT/check
logs=$OUT/logs
mkdir -p "$exp" "$runs" "$chk" "$logs"
t_start=$(date +%s)

# ------------------------------------------------------------------ trace and experiments
say "generating the trace: fp8lab synth llm $trace --steps 200"
rm -rf "$trace"
"$FP8LAB" synth llm "$trace" --steps 200 >"$logs/synth.log" 2>&1 || { cat "$logs/synth.log" >&2; die "fp8lab synth failed"; }

write_ini() { # file K tensors(mixed|bf16) gemm(0|1)
  local f=$1 k=$2 sel=$3 g=$4
  {
    echo "# bench/sweep.sh: K=$k, tensors $sel, gemm $g"
    echo "[trace]"
    echo "path = $trace"
    [ -n "$STEPS" ] && echo "steps = $STEPS"
    [ "$sel" = bf16 ] && echo "tensors = *.input, *.output, *.grad_output"
    echo
    echo "[recipe.delayed]"
    echo "kind = delayed"
    echo "format = hybrid"
    case "$k" in
      1) echo "history_len = 1024"; echo "margin = 0"; echo "amax_compute = max" ;;
      24) echo "history_len = 1, 16, 128, 1024"; echo "margin = 0, 1, 2"
          echo "amax_compute = max, most_recent" ;;
      64) echo "history_len = 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768"
          echo "margin = 0, 1"; echo "amax_compute = max, most_recent" ;;
    esac
    echo
    echo "[analysis]"
    echo "gemm = $([ "$g" = 1 ] && echo true || echo false)"
    echo "gemm_max_tokens = 1024"
    # the exact GEMM errors: what the peer computes and checks row for row (the default is
    # the sampled estimate since issue 27; bench/scale.sh measures that one)
    echo "gemm_error = exact"
  } >"$f"
}

# fp8lab variants: id K sel gemm threads; the experiment of id is exp/K-sel-gG.ini
variants=()
for k in $KS; do
  for sel in mixed bf16; do
    for g in 0 1; do
      write_ini "$exp/k$k-$sel-g$g.ini" "$k" "$sel" "$g"
      for t in $THREADS; do variants+=("k$k-$sel-g$g-t$t"); done
    done
  done
done
peers=()
case " $KS " in *" 24 "*) peers=(k24-mixed-g0 k24-mixed-g1) ;; *) say "K=24 not in KS: no peer timing" ;; esac
first_t=${THREADS%% *}

ini_of() { local v=$1; echo "$exp/${v%-t*}.ini"; }
threads_of() { echo "${1##*-t}"; }

TIMES=$OUT/times.csv
echo "round,who,variant,seconds,max_rss_kb" >"$TIMES"

# timed LOG CMD...: runs CMD, sets SECS (wall, from date) and RSS_KB (from /usr/bin/time -v)
timed() {
  local log=$1; shift
  local tv=$log.time t0 t1 rc=0
  t0=$(date +%s%N)
  if [ "$have_time" = 1 ]; then
    /usr/bin/time -v -o "$tv" "$@" >"$log" 2>&1 || rc=$?
  else
    "$@" >"$log" 2>&1 || rc=$?
  fi
  t1=$(date +%s%N)
  SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  RSS_KB=n/a
  if [ "$have_time" = 1 ]; then
    RSS_KB=$(awk -F: '/Maximum resident set size/ { gsub(/ /, "", $2); print $2 }' "$tv")
  fi
  if [ "$rc" != 0 ]; then
    tail -20 "$log" >&2
    die "command failed (exit $rc): $* (log: $log)"
  fi
}

run_fp8lab() { # round variant
  local r=$1 v=$2 dev=()
  [ -n "$DEVICE" ] && dev=(--device "$DEVICE")
  timed "$logs/$v.r$r.log" "$FP8LAB" run "$(ini_of "$v")" --no-report --quiet --force \
    --out "$runs/$v" --threads "$(threads_of "$v")" "${dev[@]}"
}

run_peer() { # round id [gemm out]
  local r=$1 id=$2 extra=()
  [ "${id##*-g}" = 1 ] && extra=(--gemm "$chk/peer-$id.r$r.gemm.csv")
  timed "$logs/peer-$id.r$r.log" "$PYTHON" "$PEER" run "$exp/$id.ini" \
    --totals "$chk/peer-$id.r$r.totals.csv" "${extra[@]}"
}

progress() { # who variant round
  say "$(printf '[round %s/%s] %-6s %-18s %8.2f s  RSS %s kB' "$3" "$REPS" "$1" "$2" "$SECS" "$RSS_KB")"
}

# ------------------------------------------------------------------ 0. untimed round + check
say "round 0 (untimed, for the check): ${#variants[@]} fp8lab variants; output in $OUT"
est=0
for v in "${variants[@]}"; do
  rm -rf "${runs:?}/$v"
  run_fp8lab 0 "$v"
  progress fp8lab "$v" 0
  cp "$runs/$v/summary.csv" "$chk/$v.summary.csv"
  [ -f "$runs/$v/gemm.csv" ] && cp "$runs/$v/gemm.csv" "$chk/$v.gemm.csv"
  est=$(awk -v a="$est" -v b="$SECS" 'BEGIN { print a + b }')
done
# the peer's runs for the check: its own variants, and with CHECK=all one per (K, tensors)
checks=("${peers[@]}")
if [ "$CHECK" = all ]; then
  for k in $KS; do
    for sel in mixed bf16; do
      case " ${checks[*]} " in *" k$k-$sel-g0 "*) ;; *) checks+=("k$k-$sel-g0") ;; esac
    done
  done
fi
pest=0
for id in "${checks[@]}"; do
  run_peer 0 "$id"
  progress peer "$id" 0
  case " ${peers[*]} " in *" $id "*) pest=$(awk -v a="$pest" -v b="$SECS" 'BEGIN { print a + b }') ;; esac
done

# peer_of VARIANT: the peer run whose totals judge VARIANT (same K and tensors; same gemm
# setting if there is one), or nothing
peer_of() {
  local base=${1%-t*} kt=${1%-g*}
  for id in "$base" "$kt-g0" "$kt-g1"; do
    [ -f "$chk/peer-$id.r0.totals.csv" ] && { echo "$id"; return; }
  done
}
# check_variant VARIANT DIR REPORT: the peer's totals (and GEMM errors, when the peer ran that
# very experiment with gemm on) against DIR's summary.csv (gemm.csv); 2 = no peer run to judge
check_variant() {
  local v=$1 id gem=()
  id=$(peer_of "$v")
  [ -n "$id" ] || return 2
  [ "$id" = "${v%-t*}" ] && [ -f "$chk/peer-$id.r0.gemm.csv" ] && gem=(--gemm "$chk/peer-$id.r0.gemm.csv")
  "$PYTHON" "$PEER" check "$chk/peer-$id.r0.totals.csv" "$2" "${gem[@]}" >"$3" 2>&1
}
for v in "${variants[@]}"; do
  rc=0
  check_variant "$v" "$runs/$v" "$chk/check-$v.txt" || rc=$?
  if [ "$rc" = 0 ]; then
    say "check $v: $(tail -1 "$chk/check-$v.txt")"
  elif [ "$rc" = 2 ]; then
    # CHECK=timed: no peer run for this (K, tensors); its summary.csv must at least not
    # depend on threads or gemm (byte for byte)
    ref=$chk/${v%%-g*}-g0-t$first_t.summary.csv
    cmp -s "$ref" "$chk/$v.summary.csv" ||
      die "summary.csv of $v differs from ${v%%-g*}-g0-t$first_t's (no peer run to judge: CHECK=all)"
    say "check $v: no peer run (CHECK=timed); summary.csv equal to ${v%%-g*}-g0-t$first_t's"
  else
    cat "$chk/check-$v.txt" >&2
    die "the peer's totals differ from fp8lab's for $v: nothing timed (report: $chk/check-$v.txt)"
  fi
done
eta=$(awk -v r="$REPS" -v a="$est" -v pr="$PEER_REPS" -v p="$pest" 'BEGIN { printf "%.0f", r * a + pr * p }')
say "check passed; timing $REPS round(s), about $eta s"

# ------------------------------------------------------------------ 1. timed rounds
for r in $(seq 1 "$REPS"); do
  # Round 1 in the listed order, later rounds in a shuffled one (seeded by the round: the same
  # orders every time the script runs): a run is slowed by what ran just before it (a K=64
  # GEMM run leaves colder caches than a K=1 one), and with one fixed order every variant
  # would always follow the same neighbour. The median over rounds then mixes neighbours.
  order=("${variants[@]}")
  if [ "$r" -gt 1 ]; then
    mapfile -t order < <(printf '%s\n' "${variants[@]}" |
      shuf --random-source=<(openssl enc -aes-128-ctr -pass "pass:sweep$r" -nosalt </dev/zero 2>/dev/null || yes "$r"))
  fi
  # one untimed run first: the round's first variant otherwise follows the check's or the last
  # round's peer processes and pays for it (k1-mixed-g0-t1, the first: 0.25-0.38 s against
  # 0.17 s alone, when this settling run did not exist)
  run_fp8lab "$r" "${order[0]}"
  for v in "${order[@]}"; do
    run_fp8lab "$r" "$v"
    progress fp8lab "$v" "$r"
    echo "$r,fp8lab,$v,$SECS,$RSS_KB" >>"$TIMES"
    # the same results as the checked round 0: byte for byte, else judged by the peer again
    if ! cmp -s "$runs/$v/summary.csv" "$chk/$v.summary.csv" &&
        ! check_variant "$v" "$runs/$v" "$chk/check-$v.r$r.txt"; then
      die "$v round $r: summary.csv differs from round 0's (and the peer's totals; $chk/check-$v.r$r.txt)"
    fi
  done
  if [ "$r" -le "$PEER_REPS" ]; then
    for id in "${peers[@]}"; do
      run_peer "$r" "$id"
      progress peer "$id" "$r"
      echo "$r,peer,$id-t1,$SECS,$RSS_KB" >>"$TIMES"
      cmp -s "$chk/peer-$id.r$r.totals.csv" "$chk/peer-$id.r0.totals.csv" ||
        die "peer $id round $r: totals differ from round 0's"
    done
  fi
done

# ------------------------------------------------------------------ 2. results
step_files=("$trace"/step_*.safetensors)
step_file=${step_files[0]}
step_bytes=$(stat -c %s "$step_file")
rev=$("$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("git_revision", "?"), d.get("fp8lab_version", "?"), d.get("engine", "?"))' "$runs/${variants[0]}/run.json")
here_rev=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
[ -n "$(git -C "$root" status --porcelain -- src kernels CMakeLists.txt 2>/dev/null)" ] && here_rev="$here_rev (src/ or kernels/ modified)"
here_rev="$here_rev, sources $(bash "$root/scripts/source-hash.sh" "$root" 2>/dev/null || echo unknown)"
elapsed=$(($(date +%s) - t_start))
"$PYTHON" - "$TIMES" "$OUT/results.md" "$step_file" "$step_bytes" "$rev" "$elapsed" "$REPS" "$PEER_REPS" \
  "$STEPS" "$THREADS" "$FP8LAB" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$here_rev" <<'EOF'
import csv, datetime, json, statistics, struct, sys
(times, md, step_file, step_bytes, rev, elapsed, reps, peer_reps, steps, threads, binary, ncpu,
 load, here_rev) = sys.argv[1:]
git_rev, version, engine = rev.split(" ")
with open(step_file, "rb") as f:
    hlen = struct.unpack("<Q", f.read(8))[0]
    hdr = json.loads(f.read(hlen))
elems = 0
for k, v in hdr.items():
    if k != "__metadata__":
        n = 1
        for d in v["shape"]:
            n *= d
        elems += n
rows = {}
for r in csv.DictReader(open(times)):
    rows.setdefault((r["who"], r["variant"]), []).append(r)
med = {k: statistics.median(float(r["seconds"]) for r in v) for k, v in rows.items()}

def parse(v):
    k, sel, g, t = v.split("-")
    return int(k[1:]), sel, g == "g1", int(t[1:])

out = []
p = out.append
p("# bench/sweep.sh results")
p("")
p("- date: %s; fp8lab %s, git revision %s (from run.json), engine %s; binary %s"
  % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), version, git_rev, engine, binary))
p("- this checkout (bench/sweep.sh's): git %s (scripts/source-hash.sh; run.json's revision is "
  "the one CMake saw when it configured the binary's build)" % here_rev)
p("- machine: %s CPUs (load average at the end %s); timed rounds: %s (peer: %s); whole "
  "sweep %d s" % (ncpu, load, reps, peer_reps, int(elapsed)))
p("- trace: fp8lab synth llm --steps 200%s: one snapshot %.2f M elements, %d bytes "
  "(%s, the most one step maps)" % (", [trace] steps = " + steps if steps else "",
                                    elems / 1e6, int(step_bytes), step_file.rsplit("/", 1)[-1]))
p("- seconds: wall time of the whole process (`fp8lab run EXP --no-report --quiet --force "
  "--out DIR --threads T`; the peer: `python3 bench/peer_sweep.py run EXP --totals F`), "
  "median of the timed rounds [min-max]; RSS: the largest 'Maximum resident set size' of "
  "/usr/bin/time -v over them")
p("- bf16: `tensors = *.input, *.output, *.grad_output` (no weights, so gemm = true finds no "
  "layer triplet: no GEMM work)")
p("")
p("| who | K | tensors | gemm | threads | median s | min-max s | peak RSS MB |")
p("|---|---:|---|---|---:|---:|---|---:|")
def keyf(k):
    kk, sel, g, t = parse(k[1])
    return (k[0] != "fp8lab", kk, sel != "mixed", g, t)
for k in sorted(rows, key=keyf):
    kk, sel, g, t = parse(k[1])
    s = [float(r["seconds"]) for r in rows[k]]
    rss = [r["max_rss_kb"] for r in rows[k] if r["max_rss_kb"] not in ("", "n/a")]
    p("| %s | %d | %s | %s | %d | %.2f | %.2f-%.2f | %s |"
      % (k[0], kk, sel, "on" if g else "off", t, med[k], min(s), max(s),
         "%.1f" % (max(int(x) for x in rss) / 1024) if rss else "n/a"))
p("")
p("One step's mapped bytes (one step_N.safetensors): %.1f MB." % (int(step_bytes) / 2**20))
p("")
p("| ratio | threads | value |")
p("|---|---:|---:|")
def f(v):
    return med.get(("fp8lab", v))
def ratio(name, a, b, t, who_a="fp8lab"):
    x, y = med.get((who_a, a)), f(b)
    p("| %s | %s | %s |" % (name, t, "%.2f" % (x / y) if x is not None and y else "n/a"))
for t in threads.split():
    ratio("time(K=24) / time(K=1), bf16, gemm off", "k24-bf16-g0-t" + t, "k1-bf16-g0-t" + t, t)
    ratio("time(K=24) / time(K=1), mixed, gemm off", "k24-mixed-g0-t" + t, "k1-mixed-g0-t" + t, t)
    ratio("time(K=64) / time(K=24), bf16, gemm off", "k64-bf16-g0-t" + t, "k24-bf16-g0-t" + t, t)
ratio("peer / fp8lab, K=24, mixed, gemm off", "k24-mixed-g0-t1", "k24-mixed-g0-t1", 1, "peer")
ratio("peer / fp8lab, K=24, mixed, gemm on", "k24-mixed-g1-t1", "k24-mixed-g1-t1", 1, "peer")
ts = threads.split()
if "1" in ts and len(ts) > 1:
    for t in ts[1:]:
        for v in ("k24-mixed-g0", "k24-mixed-g1", "k64-mixed-g0"):
            x, y = f(v + "-t1"), f(v + "-t" + t)
            kk, sel, g, _t = parse(v + "-t1")
            p("| time(threads 1) / time(threads %s), K=%d, %s, gemm %s | %s | %s |"
              % (t, kk, sel, "on" if g else "off", t, "%.2f" % (x / y) if x and y else "n/a"))
text = "\n".join(out) + "\n"
open(md, "w").write(text)
sys.stdout.write(text)
EOF
say "done in ${elapsed} s; results in $OUT/results.md, raw times in $TIMES"
