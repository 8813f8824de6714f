#!/usr/bin/env bash
# run_fuzz.sh: runs one libFuzzer target over its corpus and fails on any finding.
#
#   run_fuzz.sh BINARY CORPUS DICT SECONDS [WORKDIR] [-- LIBFUZZER_ARGS...]
#
# CORPUS (tests/fuzz/corpus/<name>) is only read: every input in it runs first (the seeds and
# the regression inputs of earlier findings), then the fuzzer mutates for SECONDS seconds.
# Without WORKDIR (ctest -L fuzz), the inputs it finds go to a temporary folder removed at the
# end; with WORKDIR (make fuzz), they are kept in WORKDIR/corpus/<name> for the next run. A
# finding (crash, sanitizer report, leak, timeout, out-of-memory: any non-zero exit of the
# fuzzer, or a sanitizer's report in its output) fails the run; its input is copied to
# ${FUZZ_ARTIFACTS:-WORKDIR or the current folder}/fuzz-artifacts/<name>/ and printed in hex.
# The targets' scratch files go to a temporary folder (FP8LAB_FUZZ_TMP) removed at the end, also
# after a crash.
set -uo pipefail
if [ $# -lt 4 ]; then
  echo "usage: run_fuzz.sh BINARY CORPUS DICT SECONDS [WORKDIR] [-- LIBFUZZER_ARGS...]" >&2
  exit 2
fi
bin=$1 corpus=$2 dict=$3 seconds=$4
shift 4
workdir=
if [ $# -gt 0 ] && [ "$1" != "--" ]; then workdir=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
name=$(basename "$bin")
name=${name#fuzz_}
for f in "$bin" "$corpus" "$dict"; do
  [ -e "$f" ] || { echo "run_fuzz.sh: $f: not found" >&2; exit 2; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fp8lab-fuzz-$name.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/scratch" "$tmp/artifacts"
if [ -n "$workdir" ]; then
  work="$workdir/corpus/$name"
  mkdir -p "$work" || exit 1
else
  work="$tmp/corpus"
  mkdir -p "$work"
fi

# -timeout: one input running 10 s is a hang; -rss_limit_mb / -malloc_limit_mb: a parser that
# allocates what a size field says before checking it is an out-of-memory finding;
# ASAN_OPTIONS: leaks are findings (LeakSanitizer), and so is any report at exit.
log="$tmp/log"
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=0}" \
UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
FP8LAB_FUZZ_TMP="$tmp/scratch" \
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
  -dict="$dict" -artifact_prefix="$tmp/artifacts/" -print_final_stats=1 "$@" \
  "$work" "$corpus" >"$log" 2>&1
rc=$?

# the fuzzer's summary: corpus loaded, the final line of progress, the stats
grep -E '^INFO: (seed corpus|Loaded)|^#[0-9]+ +(INITED|DONE)|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb|new_units_added)|^Done ' "$log" || true
bad=0
if [ $rc -ne 0 ]; then bad=1; fi
if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY: (Address|Undefined|Leak)Sanitizer' "$log"; then
  bad=1
fi
if [ $bad -eq 0 ]; then
  n=$(find "$work" -type f | wc -l)
  echo "fuzz_$name: OK (${seconds} s, exit $rc; corpus $(find "$corpus" -type f | wc -l) seeds + $n in $work)"
  exit 0
fi
echo "fuzz_$name: FAILED (fuzzer exit $rc); its output:" >&2
tail -n 80 "$log" >&2
dest="${FUZZ_ARTIFACTS:-${workdir:-$PWD}}/fuzz-artifacts/$name"
mkdir -p "$dest"
for a in "$tmp"/artifacts/*; do
  [ -f "$a" ] || continue
  cp "$a" "$dest/"
  echo "fuzz_$name: the input is $dest/$(basename "$a") ($(stat -c %s "$a") bytes):" >&2
  od -A d -t x1 -v "$a" | head -n 64 >&2
done
echo "fuzz_$name: reduce it (fuzz_$name -minimize_crash=1 -runs=10000 FILE), add it to" \
     "tests/fuzz/corpus/$name/ as regress-<what>, fix the parser (docs/fuzzing.md)" >&2
exit 1
