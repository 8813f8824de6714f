#!/usr/bin/env python3
"""Random FP8 MMA inner products for checking tensor-core models (issue 46), their outputs'
hashes, and the comparison of the published MATLAB models run under GNU Octave
(tools/reference/octave/) with tools/reference/tensorcore.py.

The generator (a C test regenerates the same vectors; keep it exactly as written here):
  splitmix64 with state = seed: next(): state += 0x9E3779B97F4A7C15 (mod 2^64); z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB (mod 2^64);
  return z ^ (z >> 31).
  E4M3: mbits 3, fmax_field 15; E5M2: mbits 2, fmax_field 30.  For each inner product:
  1. mode = next() % 3: 0: lo = 0, hi = fmax_field; 1: center = next() % (fmax_field + 1),
     lo = max(0, center - 2), hi = min(fmax_field, center + 2);
     2: lo = hi = next() % (fmax_field + 1).
  2. 64 codes, a[0..31] then b[0..31], one r = next() each: field = lo + r % (hi - lo + 1);
     mant = (r >> 8) % 2^mbits; sign = (r >> 16) & 1; E4M3 field 15 mant 7 -> mant 6 (no NaN);
     code = sign << 7 | field << mbits | mant; if (r >> 20) % 8 == 0: code = sign << 7.
  3. cmode = next() % 4: 0: c = 0; 1: c = next() & 0xFFFFFFFF, exponent field 255 -> 254;
     2, 3: R = 24 (E4M3) or 36 (E5M2); E = next() % (2R + 1) - R; mant = next() & 0x7FFFFF;
     sign = next() & 1; c = sign << 31 | (127 + E) << 23 | mant.
  Seeds used: E4M3 0x46E4, E5M2 0x46E5.
Hash: FNV-1a 64 (offset 0xcbf29ce484222325, prime 0x100000001b3) over the outputs (float32 bits)
as little-endian uint32 bytes, inner product 0 first.

Usage:
  tc_vectors.py gen FMT SEED N OUT.bin        vectors for tools/reference/octave/run_models.m
  tc_vectors.py ref FMT SEED N GPU [OUT.u32]  tensorcore.inner_product's outputs: hashes
  tc_vectors.py hash OUTS.u32                 hashes of an output file (uint32 LE, one a vector)
  tc_vectors.py compare FMT SEED OUTS.u32 GPU the Octave outputs against tensorcore.py
FMT e4m3 or e5m2; SEED decimal or 0x hex; GPU one of tensorcore.GPUS. Hashes are printed for the
first 1000, 20000 and all N outputs.

OUT.bin (little-endian): "TCV1", uint32 N, uint32 mbits, 256 float64 (the value of each FP8
code), N*32 uint8 a codes (vector-major), N*32 uint8 b codes, N uint32 c (float32 bits).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
FORMATS = {"e4m3": dict(mbits=3, fmax=15, R=24), "e5m2": dict(mbits=2, fmax=30, R=36)}
SEEDS = {"e4m3": 0x46E4, "e5m2": 0x46E5}
MAX_CALLS = 70          # next() calls of one inner product at most: 1 + 1 + 64 + 1 + 3
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
PREFIXES = (1000, 20000)


def _mix(z):
    """splitmix64's output function on a uint64 array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _stream(seed, start, count):
    """next() results number start .. start+count-1 (0-based) of splitmix64(seed): the i-th
    call sees state seed + (i + 1) * GAMMA."""
    i = np.arange(start + 1, start + 1 + count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return _mix(np.uint64(seed) + i * np.uint64(GAMMA))


def generate(fmt, seed, n, chunk=50000):
    """(a codes uint8 (n, 32), b codes uint8 (n, 32), c bits uint32 (n,))."""
    p = FORMATS[fmt]
    mbits, fmax, R = p["mbits"], p["fmax"], p["R"]
    a_all = np.empty((n, 32), dtype=np.uint8)
    b_all = np.empty((n, 32), dtype=np.uint8)
    c_all = np.empty(n, dtype=np.uint32)
    pos = 0                                   # next() calls made so far
    for v0 in range(0, n, chunk):
        m = min(chunk, n - v0)
        s = _stream(seed, pos, m * MAX_CALLS)
        mod3 = (s % np.uint64(3)).tolist()
        modf = (s % np.uint64(fmax + 1)).tolist()
        mod4 = (s % np.uint64(4)).tolist()
        lo = np.empty(m, dtype=np.int64)
        hi = np.empty(m, dtype=np.int64)
        opos = np.empty(m, dtype=np.int64)
        cmode = np.empty(m, dtype=np.int64)
        cpos = np.empty(m, dtype=np.int64)
        q = 0                                 # index into s
        for j in range(m):
            mode = mod3[q]
            q += 1
            if mode == 0:
                lo[j], hi[j] = 0, fmax
            elif mode == 1:
                center = modf[q]
                q += 1
                lo[j], hi[j] = max(0, center - 2), min(fmax, center + 2)
            else:
                lo[j] = hi[j] = modf[q]
                q += 1
            opos[j] = q
            q += 64
            cm = mod4[q]
            q += 1
            cmode[j], cpos[j] = cm, q
            q += 0 if cm == 0 else (1 if cm == 1 else 3)
        pos += q
        r = s[opos[:, None] + np.arange(64)]                         # (m, 64) uint64
        span = (hi - lo + 1).astype(np.uint64)[:, None]
        field = lo[:, None] + (r % span).astype(np.int64)
        mant = ((r >> np.uint64(8)) % np.uint64(1 << mbits)).astype(np.int64)
        sign = ((r >> np.uint64(16)) & np.uint64(1)).astype(np.int64)
        if fmt == "e4m3":
            mant = np.where((field == 15) & (mant == 7), 6, mant)
        code = (sign << 7) | (field << mbits) | mant
        zero = ((r >> np.uint64(20)) % np.uint64(8)) == 0
        code = np.where(zero, sign << 7, code).astype(np.uint8)
        a_all[v0:v0 + m] = code[:, :32]
        b_all[v0:v0 + m] = code[:, 32:]
        c = np.zeros(m, dtype=np.uint64)
        s1 = s[cpos]
        c1 = s1 & np.uint64(0xFFFFFFFF)
        c1 = np.where(((c1 >> np.uint64(23)) & np.uint64(0xFF)) == 255,
                      c1 - np.uint64(1 << 23), c1)
        c = np.where(cmode == 1, c1, c)
        cpos2 = np.minimum(cpos, len(s) - 3)       # only read where cmode >= 2 (always valid)
        E = (s[cpos2] % np.uint64(2 * R + 1)).astype(np.int64) - R
        cm_ = s[cpos2 + 1] & np.uint64(0x7FFFFF)
        cs = s[cpos2 + 2] & np.uint64(1)
        c23 = (cs << np.uint64(31)) | ((127 + E).astype(np.uint64) << np.uint64(23)) | cm_
        c = np.where(cmode >= 2, c23, c)
        c_all[v0:v0 + m] = c.astype(np.uint32)
    return a_all, b_all, c_all


def generate_slow(fmt, seed, n):
    """the generator word for word in plain Python (to check generate())."""
    p = FORMATS[fmt]
    mbits, fmax, R = p["mbits"], p["fmax"], p["R"]
    state = [seed & M64]

    def nxt():
        state[0] = (state[0] + GAMMA) & M64
        z = state[0]
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    A, B, C = [], [], []
    for _ in range(n):
        mode = nxt() % 3
        if mode == 0:
            lo, hi = 0, fmax
        elif mode == 1:
            center = nxt() % (fmax + 1)
            lo, hi = max(0, center - 2), min(fmax, center + 2)
        else:
            lo = hi = nxt() % (fmax + 1)
        codes = []
        for _ in range(64):
            r = nxt()
            field = lo + r % (hi - lo + 1)
            mant = (r >> 8) % (1 << mbits)
            sign = (r >> 16) & 1
            if fmt == "e4m3" and field == 15 and mant == 7:
                mant = 6
            code = (sign << 7) | (field << mbits) | mant
            if ((r >> 20) % 8) == 0:
                code = sign << 7
            codes.append(code)
        cmode = nxt() % 4
        if cmode == 0:
            c = 0
        elif cmode == 1:
            c = nxt() & 0xFFFFFFFF
            if (c >> 23) & 0xFF == 255:
                c = (c & ~(0xFF << 23)) | (254 << 23)
        else:
            E = (nxt() % (2 * R + 1)) - R
            mant = nxt() & 0x7FFFFF
            sign = nxt() & 1
            c = (sign << 31) | ((127 + E) << 23) | mant
        A.append(codes[:32])
        B.append(codes[32:])
        C.append(c)
    return (np.array(A, dtype=np.uint8), np.array(B, dtype=np.uint8),
            np.array(C, dtype=np.uint32))


def fnv1a64(outputs):
    """FNV-1a 64 over uint32 outputs as little-endian bytes."""
    h = FNV_OFFSET
    for byte in np.asarray(outputs, dtype="<u4").tobytes():
        h = ((h ^ byte) * FNV_PRIME) & M64
    return h


def hashes(outputs):
    """[(count, hash)] for the prefixes 1000, 20000 (where available) and all outputs."""
    out = np.asarray(outputs, dtype=np.uint32)
    rows = []
    h = FNV_OFFSET
    done = 0
    marks = sorted({k for k in PREFIXES if k < len(out)} | {len(out)})
    for k in marks:
        for byte in out[done:k].astype("<u4").tobytes():
            h = ((h ^ byte) * FNV_PRIME) & M64
        done = k
        rows.append((k, h))
    return rows


def print_hashes(label, outputs):
    for k, h in hashes(outputs):
        print("%s N=%d fnv1a64=%016x" % (label, k, h))


def fp8_table(fmt):
    """value of each of the 256 codes (float64; NaN/Inf where the format has them)."""
    import fp8ref
    with np.errstate(invalid="ignore"):
        return fp8ref.decode(np.arange(256, dtype=np.uint8), fmt).astype(np.float64)


def write_bin(path, fmt, a, b, c):
    with open(path, "wb") as f:
        f.write(b"TCV1")
        f.write(np.array([len(c), FORMATS[fmt]["mbits"]], dtype="<u4").tobytes())
        f.write(fp8_table(fmt).astype("<f8").tobytes())
        f.write(np.ascontiguousarray(a).tobytes())
        f.write(np.ascontiguousarray(b).tobytes())
        f.write(np.asarray(c, dtype="<u4").tobytes())


def reference(fmt, a, b, c, gpu, chunk=100000):
    import tensorcore
    out = np.empty(len(c), dtype=np.uint32)
    for i in range(0, len(c), chunk):
        out[i:i + chunk] = tensorcore.inner_product(a[i:i + chunk], b[i:i + chunk],
                                                    c[i:i + chunk], fmt, gpu)
    return out


def _fmt(s):
    s = s.lower()
    if s not in FORMATS:
        raise SystemExit("FMT must be e4m3 or e5m2, not %r" % s)
    return s


def main(argv):
    if len(argv) < 2:
        print(__doc__.split("Usage:")[1], file=sys.stderr)
        return 2
    cmd = argv[1]
    if cmd == "gen" and len(argv) == 6:
        fmt, seed, n = _fmt(argv[2]), int(argv[3], 0), int(argv[4])
        a, b, c = generate(fmt, seed, n)
        write_bin(argv[5], fmt, a, b, c)
        return 0
    if cmd == "ref" and len(argv) in (6, 7):
        fmt, seed, n, gpu = _fmt(argv[2]), int(argv[3], 0), int(argv[4]), argv[5]
        a, b, c = generate(fmt, seed, n)
        out = reference(fmt, a, b, c, gpu)
        if len(argv) == 7:
            out.astype("<u4").tofile(argv[6])
        print_hashes("%s %s" % (fmt, gpu), out)
        return 0
    if cmd == "hash" and len(argv) == 3:
        print_hashes(argv[2], np.fromfile(argv[2], dtype="<u4"))
        return 0
    if cmd == "compare" and len(argv) == 6:
        fmt, seed, path, gpu = _fmt(argv[2]), int(argv[3], 0), argv[4], argv[5]
        got = np.fromfile(path, dtype="<u4")
        n = len(got)
        a, b, c = generate(fmt, seed, n)
        ref = reference(fmt, a, b, c, gpu)
        bad = np.nonzero(got != ref)[0]
        print("%s %s: %d of %d differ (Octave %s vs tensorcore.py %s)"
              % (fmt, gpu, len(bad), n, os.path.basename(path), gpu))
        for i in bad[:5]:
            print("  n=%d a=%s b=%s c=%08x octave=%08x ref=%08x"
                  % (i, bytes(a[i]).hex(), bytes(b[i]).hex(), c[i], got[i], ref[i]))
        print_hashes("%s octave" % fmt, got)
        return 0 if len(bad) == 0 else 1
    print(__doc__.split("Usage:")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
