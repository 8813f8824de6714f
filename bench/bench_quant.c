/* bench_quant.c: single-thread throughput of the simulator's hot loops on this machine.
 *
 * Measures, in one run and on the same 64 MiB float32 tensor: memcpy bandwidth (the ceiling a
 * streaming loop can reach), amax, encode only, and quantize+statistics for each format, then
 * quantize+statistics the way the runner sweeps (one 16 KiB chunk read once, 24 configurations
 * applied while it sits in L1). Prints elements/s and the ratio to the memcpy ceiling.
 * Then the BF16 path a replay takes for 16-bit tensors: the exact value histogram
 * (fp8_valhist_build) of the same values rounded to BF16, against reading their 2-byte
 * elements once (one pass that sums them: the cost of streaming the bytes through the core),
 * for values in random order and for runs of 8 equal values (activations have such runs).
 * Usage: bench_quant [n_elements]   (not a test: timings vary with the machine)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fp8.h"
#include "valhist.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile float sink;

int main(int argc, char **argv) {
  size_t n = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : (size_t)16 << 20;
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  uint8_t *q = malloc(n);
  if (!x || !y || !q) return 1;
  uint64_t s = 88172645463325252ull;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    double u = (double)(s >> 11) / 9007199254740992.0;
    x[i] = (float)((s & 1 ? -1 : 1) * exp(-12.0 + 16.0 * u));
  }
  /* FP8LAB_ISA=generic|avx2|avx512: the loop variant to time (default: the best the CPU has) */
  const char *isa = getenv("FP8LAB_ISA");
  for (int k = FP8_ISA_GENERIC; isa && k <= FP8_ISA_AVX512; k++)
    if (strcmp(isa, fp8_isa_name((fp8_isa)k)) == 0 && fp8_isa_set((fp8_isa)k) != FP8_OK) {
      fprintf(stderr, "bench_quant: %s is not available on this CPU\n", isa);
      return 2;
    }
  printf("quantize loops: %s\n", fp8_isa_name(fp8_isa_current()));
  memcpy(y, x, n * sizeof *x); /* fault the pages in */
  memset(q, 0, n);
  int reps = 5;
  double best;

  best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t = now();
    memcpy(y, x, n * sizeof *x);
    t = now() - t;
    best = t < best ? t : best;
  }
  double ceiling = (double)n / best; /* elements/s when reading (and writing) one float each */
  printf("memcpy            %8.1f Melem/s  %6.2f GB/s read   (ceiling)\n", ceiling / 1e6,
         (double)n * 4 / best / 1e9);

  best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t = now();
    sink = fp8_amax_f32(x, n);
    t = now() - t;
    best = t < best ? t : best;
  }
  printf("amax              %8.1f Melem/s  %5.2fx of memcpy\n", n / best / 1e6, n / best / ceiling);

  best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t = now();
    fp8_encode_array(x, n, FP8_E4M3, q);
    t = now() - t;
    best = t < best ? t : best;
  }
  printf("encode e4m3       %8.1f Melem/s  %5.2fx of memcpy\n", n / best / 1e6, n / best / ceiling);

  for (int f = 0; f < 2; f++) {
    best = 1e30;
    fp8_stats st;
    for (int r = 0; r < reps; r++) {
      fp8_stats_init(&st);
      double t = now();
      fp8_quantize_f32(x, n, 37.5f, (fp8_format)f, NULL, NULL, &st);
      t = now() - t;
      best = t < best ? t : best;
    }
    printf("quant+stats %s  %8.1f Melem/s  %5.2fx of memcpy  (overflow %lld, underflow %lld)\n",
           fp8_format_name((fp8_format)f), n / best / 1e6, n / best / ceiling,
           (long long)st.overflow, (long long)st.underflow);
  }

  /* Sweep pattern: 24 configurations on each 4096-element chunk while it is hot in cache. */
  enum { CHUNK = 4096, CONFIGS = 24 };
  best = 1e30;
  for (int r = 0; r < 2; r++) {
    fp8_stats st[CONFIGS];
    for (int c = 0; c < CONFIGS; c++) fp8_stats_init(&st[c]);
    double t = now();
    for (size_t off = 0; off < n; off += CHUNK) {
      size_t m = n - off < CHUNK ? n - off : CHUNK;
      for (int c = 0; c < CONFIGS; c++)
        fp8_quantize_f32(x + off, m, 1.0f + (float)c, c & 1 ? FP8_E5M2 : FP8_E4M3, NULL, NULL, &st[c]);
    }
    t = now() - t;
    best = t < best ? t : best;
  }
  printf("sweep 24 configs  %8.1f Melem-configs/s (%.1f Melem/s of tensor data)\n",
         (double)n * CONFIGS / best / 1e6, (double)n / best / 1e6);

  /* BF16: the exact value histogram against one read of the same bytes */
  uint16_t *hb = malloc(n * sizeof *hb), *hr = malloc(n * sizeof *hr);
  if (!hb || !hr) return 1;
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &x[i], sizeof u);
    hb[i] = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16); /* RNE to BF16 (finite) */
    hr[i] = hb[i & ~(size_t)7];                                  /* runs of 8 equal values */
  }
  best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t = now();
    uint64_t acc = 0;
    const uint64_t *w = (const uint64_t *)(const void *)hb;
    for (size_t i = 0; i < n / 4; i++) acc += w[i];
    sink = (float)acc;
    t = now() - t;
    best = t < best ? t : best;
  }
  double read16 = (double)n / best;
  printf("bf16 read pass    %8.1f Melem/s  %6.2f GB/s read   (ceiling of the rows below)\n",
         read16 / 1e6, (double)n * 2 / best / 1e9);
  fp8_valhist h;
  memset(&h, 0, sizeof h);
  for (int v = 0; v < 2; v++) {
    best = 1e30;
    for (int r = 0; r < reps; r++) {
      double t = now();
      if (fp8_valhist_build(&h, FP8_DTYPE_BF16, v ? hr : hb, n) != FP8_OK) return 1;
      t = now() - t;
      best = t < best ? t : best;
    }
    printf("valhist bf16 %s %8.1f Melem/s  %5.2fx of the read pass  (%zu magnitudes)\n",
           v ? "runs" : "rand", n / best / 1e6, n / best / read16, h.m);
  }
  fp8_valhist_free(&h);
  free(hb);
  free(hr);
  free(x);
  free(y);
  free(q);
  return 0;
}
