#!/bin/sh
# Runs tools/reference/octave/run_models.m under GNU Octave with the MATLAB tensor-core models.
# Usage: run.sh BINFILE MODEL OUTFILE [FIRST COUNT]
# Environment:
#   TC_MODELS  a checkout of github.com/north-numerical-computing/MATLAB-tensor-core (a folder
#              holding models/ and models/tools/); default: an export of commit b12b5a7 made
#              from the mirror /work/.mirror/north-numerical-computing+MATLAB-tensor-core/repo
#              into $TMPDIR/matlab-tensor-core-b12b5a7 (TC_MIRROR names another git dir)
#   CPFLOAT_MEX  the folder holding CPFloat's MEX file cpfloat.mex (built with
#              `mkoctfile --mex -O3 -I../src cpfloat.c -o cpfloat.mex` in cpfloat's mex/);
#              unset: the models run without CPFloat (GEMM.m then assumes the inputs are
#              already rounded, which they are: FP8 codes and float32 c)
#   TC_SHIM=1  puts shim/ (a faster ismember for the models' char-in-cellstr tests, the same
#              answers) first on the path: about twice as fast
#   OCTAVE     the octave binary (default octave-cli), run under nice -n 19, one BLAS thread
set -e
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 3 ] || { echo "usage: $0 BINFILE MODEL OUTFILE [FIRST COUNT]" >&2; exit 2; }
if [ -z "$TC_MODELS" ]; then
    mirror=${TC_MIRROR:-/work/.mirror/north-numerical-computing+MATLAB-tensor-core/repo}
    TC_MODELS=${TMPDIR:-/tmp}/matlab-tensor-core-b12b5a7
    if [ ! -f "$TC_MODELS/models/tools/GEMM.m" ]; then
        mkdir -p "$TC_MODELS"
        git -C "$mirror" archive b12b5a7 models | tar -x -C "$TC_MODELS"
    fi
fi
[ -f "$TC_MODELS/models/tools/GEMM.m" ] || { echo "$0: no models/ in $TC_MODELS" >&2; exit 1; }
paths="addpath('$TC_MODELS/models'); addpath('$TC_MODELS/models/tools'); addpath('$here');"
if [ -n "$CPFLOAT_MEX" ]; then
    paths="$paths addpath('$CPFLOAT_MEX');"
fi
if [ "$TC_SHIM" = 1 ]; then
    paths="$paths addpath('$here/shim');"
fi
args="'$1', '$2', '$3'"
[ $# -ge 5 ] && args="$args, $4, $5"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
exec nice -n 19 ${OCTAVE:-octave-cli} --no-gui --norc --quiet \
    --eval "$paths if ~exist('cpfloat', 'file'), fprintf(stderr, 'run.sh: no CPFloat\n'); end;
            run_models($args);" \
    > /dev/null
