#!/usr/bin/env python3
"""Builds tests/tools/tensorcore_data/certified_<FMT>.bin, the full certified tensor-core
outputs of issue 46 in a compact form, from the text files of north-numerical-computing/
MATLAB-tensor-core's model_validation/ (commit b12b5a700957655375a1b0c1d0c26e76065da015, BSD
2-Clause: LICENCE beside the data), and checks them against tools/reference/tensorcore.py.

Each source file is checked against the sha256 that tests/tools/tensorcore_data/README.md
lists before it is read. Layout of certified_<FMT>.bin: 5,000 records of 80 bytes, one inner
product each, in the files' line order:
    a[32] b[32]   the FP8 codes of the a and b words (uint8; H100's, H200's and B200's a and b
                  files are byte-identical)
    c             uint32 LE, B200's c (c_B200_fp32.txt); H100 and H200 were measured with c = 0
    d_h100 d_h200 d_b200   uint32 LE, the fp32 outputs the three GPUs gave (d_<GPU>_fp32.txt)

Usage: tc_certified.py GIT_DIR OUT_DIR   (GIT_DIR: a clone or mirror of the repository)
"""
import hashlib
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tensorcore as T  # noqa: E402

COMMIT = "b12b5a700957655375a1b0c1d0c26e76065da015"
README = os.path.join(HERE, "..", "..", "tests", "tools", "tensorcore_data", "README.md")


def source(git_dir, path, sums):
    data = subprocess.run(["git", "--git-dir", git_dir, "show", "%s:model_validation/%s"
                           % (COMMIT, path)], check=True, capture_output=True).stdout
    want = sums.get(path)
    got = hashlib.sha256(data).hexdigest()
    if want is None or want != got:
        sys.exit("%s: sha256 %s, README.md lists %s" % (path, got, want))
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), "tc_" + path.replace("/", "_"))
    with open(tmp, "wb") as f:
        f.write(data)
    return tmp


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    git_dir, out_dir = argv[1], argv[2]
    sums = {}
    for line in open(README):
        m = re.match(r"^([0-9a-f]{64})  (\S+)$", line.strip())
        if m:
            sums[m.group(2)] = m.group(1)
    for fmt in ("E4M3", "E5M2"):
        a = T.read_words(source(git_dir, "H100/%s/a_H100_%s.txt" % (fmt, fmt), sums), fmt.lower())
        b = T.read_words(source(git_dir, "H100/%s/b_H100_%s.txt" % (fmt, fmt), sums), fmt.lower())
        c = T.read_bit_strings(source(git_dir, "B200/%s/c_B200_fp32.txt" % fmt, sums))
        d = [T.read_bit_strings(source(git_dir, "%s/%s/d_%s_fp32.txt" % (g, fmt, g), sums))
             for g in ("H100", "H200", "B200")]
        zero = np.zeros_like(c)
        for gpu, cc, dd in (("h100", zero, d[0]), ("h200", zero, d[1]), ("b200", c, d[2])):
            miss = int((T.inner_product(a, b, cc, fmt.lower(), gpu) != dd).sum())
            print("%s %s: the reference misses %d of %d" % (fmt, gpu, miss, len(dd)))
            if miss:
                sys.exit(1)
        n = len(c)
        rec = np.zeros((n, 80), dtype=np.uint8)
        rec[:, 0:32] = a
        rec[:, 32:64] = b
        for j, w in enumerate([c] + d):
            rec[:, 64 + 4 * j:68 + 4 * j] = w.astype("<u4").view(np.uint8).reshape(n, 4)
        out = os.path.join(out_dir, "certified_%s.bin" % fmt)
        with open(out + ".tmp", "wb") as f:
            f.write(rec.tobytes())
        os.replace(out + ".tmp", out)
        print("%s: %d records" % (out, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
