"""The common part of the Python reference's self-test (tests/tools/reference/test_ref_*.py):
the modules it needs (numpy and ml_dtypes: without them exit 77, skipped, or exit 1 when
FP8LAB_REQUIRE_PYDEPS=1 is set, as .ci/run does), the registry of tests (@test), helpers used
by several of the test files, and main(), which runs the tests the importing file registered.
"""


import os
import sys
import traceback

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # small GEMMs: threads only cost
try:
    import numpy as np
    import ml_dtypes  # noqa: F401
except ImportError as e:
    # CI sets FP8LAB_REQUIRE_PYDEPS=1 (.ci/run): there a missing module is a failure, so that
    # the cross-check against the reference cannot be skipped silently. Elsewhere: a skip.
    if os.environ.get("FP8LAB_REQUIRE_PYDEPS", "") not in ("", "0"):
        print("FAILED: %s, and FP8LAB_REQUIRE_PYDEPS is set (scripts/install-deps.sh installs "
              "numpy and ml_dtypes)" % e)
        sys.exit(1)
    print("skipped: %s (scripts/install-deps.sh installs numpy and ml_dtypes)" % e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools", "reference"))

import fp8ref as R  # noqa: E402
import gen_trace as G  # noqa: E402

F32 = np.float32
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def bits(v):
    return R.f32_bits(v)


def eq32(a, b):
    return bits(a) == bits(b)


# --------------------------------------------------------------------------------------------
# trace, experiment, replay, compare
# --------------------------------------------------------------------------------------------


def write_st(path, tensors, pad):
    class FixedRng:      # drives write_safetensors' choices: no shuffle, given padding
        def shuffle(self, x):
            pass

        def random(self):
            return 0.9

        def integers(self, a, b):
            return pad
    G.write_safetensors(path, tensors, FixedRng())


def main():
    passed = failed = 0
    for fn in TESTS:
        try:
            fn()
            passed += 1
        except Exception:
            failed += 1
            print("FAIL %s" % fn.__name__)
            traceback.print_exc()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0
