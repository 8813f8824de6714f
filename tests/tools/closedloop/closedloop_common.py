"""The common part of the closed-loop emulator's tests (tests/tools/closedloop/test_*.py,
python/fp8lab/closedloop.py): torch (as tests/tools/capture does: the running interpreter, else
/usr/bin/python3, Debian's python3-torch; exit 77 "skipped: torch not importable" when neither
has it, 1 under FP8LAB_REQUIRE_PYDEPS), fp8lab's package from the checkout and its C library
(libfp8lab_emu.so beside the fp8lab binary given as the argument), an independent FP8 cast
written from RECIPES.md (not from the C sources), small experiment files, and main(), which runs
the tests the importing file registered (@test), each in a temporary folder.
"""
import math
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
from pycommon import require, test, run_tests, with_system_python  # noqa: E402,F401

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


try:
    import numpy as np
    import torch
except ImportError:
    with_system_python("torch, numpy",
                       "torch and numpy not importable (make tiny-gpt installs Debian's python3-torch)")

sys.path.insert(0, os.path.join(ROOT, "python"))   # the package fp8lab, from the checkout
sys.path.insert(0, os.path.join(ROOT, "experiments"))  # tiny_gpt

BIN = None


def setup_library(bin_path):
    """Points fp8lab.emu at the build's libfp8lab_emu.so (beside the fp8lab binary)."""
    global BIN
    BIN = os.path.abspath(bin_path)
    d = os.path.dirname(BIN)
    for cand in (os.path.join(d, "src", "emu", "libfp8lab_emu.so"),
                 os.path.join(d, "libfp8lab_emu.so")):
        if os.path.exists(cand):
            os.environ.setdefault("FP8LAB_EMU_LIB", cand)
            break


# ------------------------------------------------------------------ an independent FP8 cast
FMT = {  # mantissa bits, exponent bias, largest finite code (positive)
    "e4m3": (3, 7, 0x7E),
    "e5m2": (2, 15, 0x7B),
}
FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}


def _values(fmt):
    m, bias, top = FMT[fmt]
    out = []
    for c in range(top + 1):
        e, f = c >> m, c & ((1 << m) - 1)
        out.append(f * 2.0 ** (1 - bias - m) if e == 0 else (1 + f / 2.0 ** m) * 2.0 ** (e - bias))
    return np.array(out, dtype=np.float64)


def f32(v):
    return struct.unpack("<f", struct.pack("<f", float(v)))[0]


def ref_encode(y, fmt):
    """The FP8 value (as float64) of float32 y: round to nearest, ties to the even code,
    saturating beyond the largest finite value (satfinite); by search over the format's codes."""
    vals = _values(fmt)
    a = np.abs(y.astype(np.float64))
    i = np.clip(np.searchsorted(vals, a), 1, len(vals) - 1)
    lo, hi = vals[i - 1], vals[i]
    pick_hi = (hi - a < a - lo) | ((hi - a == a - lo) & (i % 2 == 0))
    q = np.where(pick_hi, hi, lo)
    q = np.where(a >= vals[-1], vals[-1], q)
    return np.copysign(q, y)


def ref_qdq(x, scale, fmt):
    """RECIPES.md's cast: y = RN32(x s), q = encode(y), xhat = RN32(decode(q) RN32(1/s))."""
    x = np.asarray(x, dtype=np.float32)
    s = np.float32(scale)
    y = (x * s).astype(np.float32)
    inv = np.float32(1) / s
    return (ref_encode(y, fmt).astype(np.float32) * inv).astype(np.float32)


def current_scale(amax, fmt, margin=0):
    """RN32(RN32(fp8_max 2^-m) / amax); 1 for amax 0 or non-finite."""
    if not (amax > 0) or math.isinf(amax):
        return 1.0
    return f32(np.float32(f32(FP8_MAX[fmt] * 2.0 ** -margin)) / np.float32(amax))


def amax(t):
    return float(t.detach().abs().max())


def write_ini(path, body, trace="trace"):
    with open(path, "w") as f:
        f.write("[trace]\npath = %s\n\n%s\n[output]\ndir = out\n" % (trace, body))
    return path


def read_counts(path):
    import csv
    with open(path) as f:
        return list(csv.DictReader(f))


def main():
    if len(sys.argv) != 2:
        print("usage: %s FP8LAB_BIN" % os.path.basename(sys.argv[0]), file=sys.stderr)
        return 2
    setup_library(sys.argv[1])
    torch.set_num_threads(1)
    return run_tests("fp8lab_closedloop_")
