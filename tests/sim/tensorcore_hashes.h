/* tensorcore_hashes.h: the FNV-1a 64 hashes of the expected outputs of tc_vectors.py's random
 * inner products (tools/reference/tc_vectors.py: the generator, the hash; test_tensorcore.c
 * rebuilds the vectors), from tools/reference/tensorcore.py (`tc_vectors.py ref FMT SEED N
 * GPU`) and, where they agree, the MATLAB models under GNU Octave
 * (tests/tools/tensorcore_data/octave.md). Not the vectors: a seed and a hash. */
typedef struct {
  fp8_format fmt;
  uint64_t seed;
  int n;
  fp8_tc_model model;
  uint64_t hash;
} tc_hash;

static const tc_hash TC_HASHES[] = {
    /* tensorcore.py "h100" and "b200" */
    {FP8_E4M3, 0x46E4, 20000, FP8_TC_H100, 0x709fb7c4ee155851ull},
    {FP8_E4M3, 0x46E4, 20000, FP8_TC_B200, 0xa2ded399cae443f4ull},
    {FP8_E5M2, 0x46E5, 20000, FP8_TC_H100, 0x84450a09a890e1fdull},
    {FP8_E5M2, 0x46E5, 20000, FP8_TC_B200, 0x44785b2c3784859full},
    /* a million each: h100 also the published H100TC.m's outputs under GNU Octave (octave.md);
     * b200 is fp8lab's variant, not the repository's B200TC.m (docs/tensor_cores.md) */
    {FP8_E4M3, 0x46E4, 1000000, FP8_TC_H100, 0xc83b61e67c16695eull},
    {FP8_E5M2, 0x46E5, 1000000, FP8_TC_H100, 0x419725b600949c89ull},
    {FP8_E4M3, 0x46E4, 1000000, FP8_TC_B200, 0x5dd7ca029201f1c6ull},
    {FP8_E5M2, 0x46E5, 1000000, FP8_TC_B200, 0xdb76486fde8216d4ull},
};
