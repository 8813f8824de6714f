#!/usr/bin/env bash
# device-bundle.sh: a full, CUDA-enabled `fp8lab` that runs on the GPU machine, built HERE.
#
# The GPU machine (src/gpu/README.md) has CUDA 13, CMake and python3, but none of the Debian -dev
# packages the CLI needs (GSL, jansson, inih, libpng, PLplot), so scripts/device-check.sh can
# build only FP8LAB_GPU_ONLY there: no `fp8lab`. Its parity step (`fp8lab run --device gpu`
# against `--device cpu`) takes the binary from this bundle instead. Run from the repository
# root, on the CPU machine, before the device call:
#
#   scripts/device-bundle.sh          # or: make device-bundle
#
# then call the device tool with carry [".device-bundle"] (see scripts/device-check.sh).
#
# What it does:
#   1. configures build-bundle/ (Release, CUDA from /usr/local/cuda: the GPU engine is built
#      when nvcc exists; FP8LAB_CBLAS=gslcblas; -static-libstdc++ -static-libgcc) and builds the
#      targets fp8lab and fp8lab_gpu_module only;
#   2. checks that the GPU module fp8lab-gpu.so has the engine (its one exported symbol is the
#      descriptor fp8lab_gpu_module, src/engine/gpu_module.h; a CUDA fatbinary) and how it gets the CUDA runtime (cudart_static: the driver's
#      libcuda.so.1 is loaded with dlopen at the first CUDA call; libcublasLt.so.13 is a NEEDED
#      library of the engine's GEMMs, src/gpu), and that bin/fp8lab itself links no CUDA
#      library (a CPU run never loads CUDA: the module is dlopen'ed, src/engine/engine_load.h);
#   3. writes .device-bundle/ (git-ignored):
#        bin/fp8lab   bin/fp8lab-gpu.so   lib/<soname>...   run.sh   MANIFEST
#      lib/ holds every shared library the two need (ldd, transitively) except glibc's own
#      (libc, libm, libpthread, libdl, librt, libresolv, ld-linux, and libgcc_s, which libc6
#      depends on) and the CUDA driver's and toolkit's (libcuda, libcudart, libcublas,
#      libcublasLt, libnccl: the device has them in the driver's folder, /usr/local/cuda/lib64,
#      python3's nvidia-* wheels); run.sh runs bin/fp8lab with LD_LIBRARY_PATH = lib, then the
#      caller's LD_LIBRARY_PATH, $FP8LAB_CUDA_LIBDIR and /usr/local/cuda/lib64;
#      MANIFEST: build flags, libraries, symbol-version maxima, and a hash of the
#      sources (src/, kernels/, CMakeLists.txt) that device-check.sh compares with the tree it
#      runs in, to say when the bundle is stale;
#   4. verifies it as far as this machine allows: `env -i LD_LIBRARY_PATH=lib ldd` resolves
#      everything from the bundle or glibc; the highest GLIBC_ / GLIBCXX_ / CXXABI_ / GCC_
#      versions any file of the bundle requires are <= Ubuntu 24.04's (GLIBC 2.39, GLIBCXX
#      3.4.33, CXXABI 1.3.15, GCC 14); `run.sh run --device cpu` replays a small synthetic
#      trace with nothing but the bundle on LD_LIBRARY_PATH; without a GPU here, `--device gpu`
#      must fail cleanly (one "no usable CUDA device" line, an exit status, no signal);
#      the bundle is under 40 MiB (the whole tree that travels is limited to 64 MiB).
# Exit status 0 when all of that holds, 1 otherwise (the failing check is named).
#
# Choices (and why):
# - Shared libraries copied, not static linking: Debian ships no libplplot.a, so PLplot (and
#   its freetype, qhull, shapelib, csiro, ltdl) must be shared anyway; copying them is uniform,
#   and they are small (about 7 MiB together). Debian 12's libraries need glibc <= 2.36, so
#   they load with Ubuntu 24.04's glibc 2.39 (step 4 checks the versions).
# - libstdc++ and libgcc linked statically into the binary (the CUDA objects pull them in): no
#   C++ runtime of ours can clash with the machine's, and none needs to travel.
# - gslcblas instead of OpenBLAS: OpenBLAS (35 MiB, plus libgfortran and libquadmath) would be
#   most of the bundle, and it only speeds up gemm.csv, which the parity runs switch off
#   ([analysis] gemm = false: GEMM errors run on the CPU with either engine, so they say
#   nothing about the GPU engine). GEMMs still work with the bundle, only slower.
# - No report support files: `fp8lab report` (and `run` without --no-report) needs PLplot's
#   drivers (dlopen'ed from /usr/lib/x86_64-linux-gnu/plplot*/drivers) and its font and map
#   files, which the bundle does not carry; the parity runs use --no-report. run, synth and
#   inspect work.
#
# Environment: JOBS (default 2), BUNDLE_BUILD (default build-bundle), BUNDLE_DIR (default
# .device-bundle), BUNDLE_MAX_MIB (default 40).
set -u

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$SRC" || exit 1
BUILD=${BUNDLE_BUILD:-build-bundle}
BUNDLE=${BUNDLE_DIR:-.device-bundle}
JOBS=${JOBS:-2}
MAX_MIB=${BUNDLE_MAX_MIB:-40}
case "$BUNDLE" in /*) ;; *) BUNDLE=$SRC/$BUNDLE ;; esac
# Ubuntu 24.04 (the device image: glibc 2.39, GCC 14's libstdc++); read as ${!lim_var} below
# shellcheck disable=SC2034
LIMIT_GLIBC=2.39 LIMIT_GLIBCXX=3.4.33 LIMIT_CXXABI=1.3.15 LIMIT_GCC=14.0.0

FAILED=0
fail() { echo "device-bundle: FAILED: $*" >&2; FAILED=1; }
die() { echo "device-bundle: $*" >&2; exit 1; }
say() { echo "device-bundle: $*"; }

# ------------------------------------------------------------------ 1. configure + build
case "$BUILD" in build-bundle*) ;; *) die "BUNDLE_BUILD must be named build-bundle* (got $BUILD)" ;; esac
T0=$(date +%s)
mkdir -p "$BUILD" || die "cannot create $BUILD"
say "configuring $BUILD (Release, CUDA, FP8LAB_CBLAS=gslcblas, static libstdc++/libgcc)"
# Without MPI: the device image has no Open MPI (libmpi and its plugins would not be found there)
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DFP8LAB_CUDA=ON -DFP8LAB_GPU_ONLY=OFF \
  -DFP8LAB_CBLAS=gslcblas -DFP8LAB_MPI=OFF \
  "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc" \
  "-DCMAKE_MODULE_LINKER_FLAGS=-static-libstdc++ -static-libgcc" >"$BUILD/bundle-configure.log" 2>&1 ||
  { tail -20 "$BUILD/bundle-configure.log"; die "configure failed ($BUILD/bundle-configure.log)"; }
grep -q 'CUDA found' "$BUILD/bundle-configure.log" ||
  die "CUDA was not found (no /usr/local/cuda/bin/nvcc?): the bundle would have no GPU engine"
grep -q '^FP8LAB_CBLAS_LIB:FILEPATH=.*gslcblas' "$BUILD/CMakeCache.txt" ||
  die "$BUILD/CMakeCache.txt: FP8LAB_CBLAS_LIB is not gslcblas (remove $BUILD and rerun)"
rm -f "$BUILD/bundle-configure.log"
say "building fp8lab and fp8lab-gpu.so with -j$JOBS (from scratch: about 60 s with -j2)"
cmake --build "$BUILD" --target fp8lab fp8lab_gpu_module -j "$JOBS" >"$BUILD/bundle-build.log" 2>&1 ||
  { grep -E 'error|Error' "$BUILD/bundle-build.log" | head -20; die "build failed ($BUILD/bundle-build.log)"; }
rm -f "$BUILD/bundle-build.log"
say "built in $(($(date +%s) - T0)) s"
EXE=$BUILD/fp8lab
MOD=$BUILD/fp8lab-gpu.so

# ------------------------------------------------------------------ 2. the GPU engine is in the module
[ -f "$MOD" ] || die "$MOD was not built"
EXPORTS=$(nm -D --defined-only "$MOD" 2>/dev/null | awk 'NF == 3 {print $3}' | sort -u | tr '\n' ' ')
[ "$EXPORTS" = "fp8lab_gpu_module " ] ||
  die "$MOD must export exactly fp8lab_gpu_module (src/engine/gpu_module.h), exports: ${EXPORTS:-nothing}"
readelf -S "$MOD" | grep -q '\.nv_fatbin' || die "$MOD has no .nv_fatbin section: no CUDA kernels"
if ldd "$EXE" | grep -qE 'libcuda|libcublas|libnccl'; then
  die "$EXE links a CUDA library: a CPU run would load CUDA"
fi
if ldd "$MOD" | grep -q 'libcudart'; then
  CUDART="shared (libcudart.so from the device's /usr/local/cuda/lib64)"
elif nm "$MOD" | grep -qE '\bcudaGetDeviceProperties(_v2)?\b'; then
  CUDART="static (cudart_static; libcuda.so.1 of the driver is dlopen'ed at the first CUDA call)"
else
  die "$MOD: neither libcudart.so nor a static CUDA runtime found"
fi
say "GPU engine in $(basename "$MOD"); CUDA runtime $CUDART; fp8lab links no CUDA"
SMS=$(strings -a "$MOD" | grep -oE '\bsm_[0-9]+a?\b' | sort -u | tr '\n' ' ')
say "CUDA targets named in the binary: ${SMS:-?}"
# libraries the binary needs but the device provides (CUDA) or that are glibc's. libgcc_s.so.1
# counts as glibc's: libc6 depends on libgcc-s1 on Debian and Ubuntu (glibc itself dlopens it),
# and here only libcublasLt, which comes from the device, needs it.
is_glibc() {
  case "$1" in
  linux-vdso.so.* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | \
    libresolv.so.* | libutil.so.* | ld-linux*.so.* | libmvec.so.* | libgcc_s.so.1) return 0 ;;
  esac
  return 1
}
is_cuda() {
  case "$1" in
  libcuda.so.* | libcudart.so.* | libcublas.so.* | libcublasLt.so.* | libnccl.so.*) return 0 ;;
  esac
  return 1
}

# ------------------------------------------------------------------ 3. the bundle
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" || die "cannot create $BUNDLE"
cp "$EXE" "$BUNDLE/bin/fp8lab"
cp "$MOD" "$BUNDLE/bin/fp8lab-gpu.so"
FROM_DEVICE=""
COPIED=""
while read -r name arrow path _; do
  [ -z "$name" ] && continue
  if is_glibc "$name"; then continue; fi
  case "$name" in /*) continue ;; esac # the interpreter line
  if is_cuda "$name"; then
    case " $FROM_DEVICE " in *" $name "*) ;; *) FROM_DEVICE="$FROM_DEVICE $name" ;; esac
    continue
  fi
  [ -f "$BUNDLE/lib/$name" ] && continue
  if [ "$arrow" != "=>" ] || [ ! -f "$path" ]; then
    fail "$EXE needs $name, which ldd cannot find here"
    continue
  fi
  cp -L "$path" "$BUNDLE/lib/$name" || fail "cannot copy $path"
  COPIED="$COPIED $name"
done < <(ldd "$EXE"; ldd "$MOD")
[ "$FAILED" = 0 ] || die "missing libraries"
say "bundled:$COPIED; from the device: libcuda.so.1 (dlopen)$FROM_DEVICE"

cat >"$BUNDLE/run.sh" <<'EOF'
#!/bin/sh
# run.sh: the bundled fp8lab (scripts/device-bundle.sh) with its own libraries first, then the
# caller's LD_LIBRARY_PATH (the driver's libcuda.so.1; FP8LAB_CUDA_LIBDIR, where the device's
# libcublasLt.so.13 is, when the loader does not find it), then the CUDA toolkit's lib64.
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -n "${FP8LAB_CUDA_LIBDIR:-}" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$FP8LAB_CUDA_LIBDIR"
[ -d /usr/local/cuda/lib64 ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64"
export LD_LIBRARY_PATH
# run.sh --ldd: how the loader resolves the binary's libraries with this path (device-parity.sh)
[ "${1:-}" = --ldd ] && exec ldd "$here/bin/fp8lab"
exec "$here/bin/fp8lab" "$@"
EOF
chmod +x "$BUNDLE/run.sh"

# ------------------------------------------------------------------ 4. checks
# 4a. with nothing but the bundle on the library path, everything resolves from it or glibc
UNRESOLVED=$(env -i LD_LIBRARY_PATH="$BUNDLE/lib" /usr/bin/ldd "$BUNDLE/bin/fp8lab" \
  "$BUNDLE/bin/fp8lab-gpu.so" 2>&1 | grep -v ':$' |
  while read -r name arrow path _; do
    case "$name" in /* | linux-vdso.so.*) continue ;; esac
    if [ "$arrow" != "=>" ] || [ "$path" = "not" ]; then
      echo "$name (not found)"
    elif is_glibc "$name" || is_cuda "$name"; then
      :
    else
      case "$path" in "$BUNDLE/lib/"*) ;; *) echo "$name => $path (outside the bundle)" ;; esac
    fi
  done)
[ -z "$UNRESOLVED" ] || fail "libraries not resolved from the bundle: $UNRESOLVED"
LIBS_NEEDED=$(env -i LD_LIBRARY_PATH="$BUNDLE/lib" /usr/bin/ldd "$BUNDLE/bin/fp8lab" \
  "$BUNDLE/bin/fp8lab-gpu.so" | grep -v ':$' | awk '{print $1}' | grep -v '^/' | sort -u | tr '\n' ' ')

# 4b. symbol versions: the highest of each kind over every file of the bundle
vmax() { # PREFIX: highest version of that prefix required (undefined, *UND*) by the bundle
  for f in "$BUNDLE"/bin/* "$BUNDLE"/lib/*; do objdump -T "$f" 2>/dev/null; done |
    grep -F '*UND*' | grep -oE "\\b$1_[0-9]+(\\.[0-9]+)*\\b" | sed "s/^$1_//" | sort -uV | tail -1
}
vle() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ]; }
MAXV=""
for kind in GLIBC GLIBCXX CXXABI GCC; do
  v=$(vmax "$kind")
  lim_var=LIMIT_$kind
  lim=${!lim_var}
  MAXV="$MAXV ${kind}_${v:-none}"
  if [ -n "$v" ] && ! vle "$v" "$lim"; then
    fail "the bundle requires ${kind}_$v, above Ubuntu 24.04's ${kind}_$lim"
  fi
done
WHO=$(for f in "$BUNDLE"/bin/* "$BUNDLE"/lib/*; do
  objdump -T "$f" 2>/dev/null | grep -F '*UND*' | grep -qE '\b(GLIBCXX|CXXABI)_' && basename "$f"
done | tr '\n' ' ')
say "highest symbol versions required:${MAXV} (limits GLIBC_$LIMIT_GLIBC GLIBCXX_$LIMIT_GLIBCXX" \
  "CXXABI_$LIMIT_CXXABI); files needing libstdc++ symbols: ${WHO:-none}"
if env -i LD_LIBRARY_PATH="$BUNDLE/lib" /usr/bin/ldd "$BUNDLE/bin/fp8lab" "$BUNDLE/bin/fp8lab-gpu.so" |
  grep -q 'libstdc++'; then
  fail "the bundle still needs libstdc++.so.6 (expected it linked statically)"
fi

# 4c. the bundle's binary replays a small synthetic trace on the CPU, from the bundle alone
TMP=$(mktemp -d "${TMPDIR:-/tmp}/fp8lab-bundle.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cat >"$TMP/exp.ini" <<'EOF'
[trace]
path = trace
[recipe.delayed]
kind = delayed
format = hybrid
history_len = 1, 16
margin = 0
amax_compute = max
[recipe.current]
kind = current
format = hybrid
[analysis]
gemm = false
[output]
dir = out
EOF
RUNENV=(env -i PATH=/usr/bin:/bin HOME="$TMP")
if "${RUNENV[@]}" "$BUNDLE/run.sh" synth llm "$TMP/trace" --steps 20 >"$TMP/synth.log" 2>&1 &&
  "${RUNENV[@]}" "$BUNDLE/run.sh" run "$TMP/exp.ini" --device cpu --no-report --quiet --threads 2 \
    >"$TMP/cpu.log" 2>&1 && [ -s "$TMP/out/steps.csv" ]; then
  say "run.sh run --device cpu: ok, $(($(wc -l <"$TMP/out/steps.csv") - 1)) rows of steps.csv," \
    "engine $(grep -o '"engine": *"[^"]*"' "$TMP/out/run.json" | cut -d'"' -f4)"
else
  cat "$TMP/synth.log" "$TMP/cpu.log" 2>/dev/null | tail -5
  fail "run.sh synth/run --device cpu failed"
fi
VERSION=$("${RUNENV[@]}" "$BUNDLE/run.sh" --version 2>&1)

# 4d. --device gpu without a usable GPU: one clean error line and an exit status, no signal
if timeout 20 nvidia-smi -L >/dev/null 2>&1; then
  say "a GPU is visible here: --device gpu not checked for its failure path"
else
  "${RUNENV[@]}" "$BUNDLE/run.sh" run "$TMP/exp.ini" --device gpu --no-report --quiet --force \
    >"$TMP/gpu.log" 2>&1
  rc=$?
  if [ "$rc" -ge 1 ] && [ "$rc" -lt 128 ] && grep -q 'no usable CUDA device' "$TMP/gpu.log"; then
    say "run.sh run --device gpu without a GPU: exit $rc, \"$(head -1 "$TMP/gpu.log")\""
  else
    fail "--device gpu without a GPU: exit $rc, output: $(head -3 "$TMP/gpu.log")"
  fi
fi

# 4e. size
KIB=$(du -sk "$BUNDLE" | cut -f1)
[ "$KIB" -le $((MAX_MIB * 1024)) ] || fail "the bundle is $((KIB / 1024)) MiB, above $MAX_MIB MiB"

# ------------------------------------------------------------------ MANIFEST
SRC_HASH=$(bash "$SRC/scripts/source-hash.sh" "$SRC")
{
  echo "fp8lab device bundle, made by scripts/device-bundle.sh on $(date -u +%FT%TZ)"
  echo "version: $VERSION"
  echo "source-hash: $SRC_HASH"
  # shellcheck disable=SC1091
  echo "build: $(uname -m), $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), $(ldd --version | head -1)"
  echo "compilers: $(gcc --version | head -1); $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1)"
  echo "cmake: -DCMAKE_BUILD_TYPE=Release -DFP8LAB_CBLAS=gslcblas" \
    "-DCMAKE_{EXE,MODULE}_LINKER_FLAGS='-static-libstdc++ -static-libgcc'"
  echo "cuda-runtime: $CUDART"
  echo "cuda-targets: $SMS"
  echo "needs: $LIBS_NEEDED"
  echo "bundled:$COPIED"
  echo "from-device: libcuda.so.1 (driver)$FROM_DEVICE"
  echo "symbol-versions:$MAXV"
  echo "size-kib: $KIB"
  echo "files:"
  (cd "$BUNDLE" && find . -type f | sort | while read -r f; do
    printf '  %8s %s\n' "$(du -k "$f" | cut -f1)K" "$f"
  done)
} >"$BUNDLE/MANIFEST"

say "bundle $BUNDLE: $((KIB / 1024)).$((KIB % 1024 * 10 / 1024)) MiB, bin/fp8lab + bin/fp8lab-gpu.so + lib/ ($(echo "$COPIED" | wc -w) libraries)"
if [ "$FAILED" != 0 ]; then
  say "checks FAILED (above): do not carry this bundle"
  exit 1
fi
say "ok. Device call: carry [\".device-bundle\"], command scripts/device-check.sh, timeout_s 480"
exit 0
