/* test_gpu_comm.c: the NCCL amax all-reduce (src/gpu/comm_nccl.h), label gpu. On one GPU the
 * group is a world of 1 and the MAX all-reduce must leave every value as it is, bit for bit
 * (zeros, subnormals, FP8 maxima, FLT_MAX, inf); with several visible GPUs every device gets
 * rank-dependent values and each entry must become the exact maximum over the ranks. Both ways
 * of making a group are run: ncclCommInitAll (fp8_comm_init_local) and a unique id with
 * ncclCommInitRank (fp8_comm_init_rank, nranks 1). Exit 77 without a device. */
#include <cuda_runtime_api.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_nccl.h"
#include "device.h"
#include "fp8.h"
#include "gpu_harness.h"

static char err[1024];

/* Value j of rank r: special values at the front, then a spread of magnitudes. */
static float value(size_t j, int r) {
  static const float special[] = {0.0f, 1e-45f /* smallest subnormal */, FLT_MIN, 448.0f,
                                  57344.0f, FLT_MAX, INFINITY, 1.0f};
  const size_t ns = sizeof special / sizeof special[0];
  if (j < ns) return r == 0 ? special[j] : special[j] * 0.5f; /* rank 0 holds the max */
  /* varying which rank holds the max */
  return ldexpf(1.0f + (float)((j * 2654435761u + (size_t)r * 40503u) % 1000) / 1000.0f,
                (int)(j % 60) - 30);
}

static void run_group(fp8_comm *c, const int *devices, size_t count, const char *how) {
  const int nl = fp8_comm_nlocal(c);
  float **dev = calloc((size_t)nl, sizeof *dev);
  float *host = malloc(count * sizeof *host + 4), *expect = malloc(count * sizeof *expect + 4);
  for (int r = 0; r < nl; r++) {
    cudaSetDevice(devices[r]);
    for (size_t j = 0; j < count; j++) host[j] = value(j, r);
    GH_CHECK(cudaMalloc((void **)&dev[r], count * sizeof(float) + 4) == cudaSuccess &&
                 cudaMemcpy(dev[r], host, count * sizeof(float), cudaMemcpyHostToDevice) ==
                     cudaSuccess,
             "upload to device %d failed", devices[r]);
  }
  for (size_t j = 0; j < count; j++) {
    expect[j] = value(j, 0);
    for (int r = 1; r < nl; r++) expect[j] = fmaxf(expect[j], value(j, r));
  }
  int rc = fp8_comm_allreduce_max(c, dev, count, err, sizeof err);
  GH_CHECK(rc == FP8_OK, "%s: fp8_comm_allreduce_max of %zu floats over %d local ranks: %s", how,
           count, nl, err);
  for (int r = 0; r < nl && rc == FP8_OK; r++) {
    cudaSetDevice(devices[r]);
    GH_CHECK(cudaMemcpy(host, dev[r], count * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess,
             "download failed");
    size_t bad = count;
    for (size_t j = 0; j < count && bad == count; j++)
      if (memcmp(&host[j], &expect[j], 4) != 0) bad = j;
    GH_CHECK(bad == count, "%s: rank %d entry %zu of %zu is %.9g, the max over ranks is %.9g", how,
             r, bad, count, bad < count ? host[bad] : 0.0, bad < count ? expect[bad] : 0.0);
  }
  for (int r = 0; r < nl; r++) {
    cudaSetDevice(devices[r]);
    cudaFree(dev[r]);
  }
  free(dev);
  free(host);
  free(expect);
}

static void test_local_group(void) {
  fp8_gpu_info info;
  GH_REQUIRE(fp8_gpu_probe(0, &info, err, sizeof err) == FP8_OK, "%s", err);
  int n = info.count > 8 ? 8 : info.count;
  int devices[8];
  for (int i = 0; i < n; i++) devices[i] = i;
  fp8_comm *c = NULL;
  int rc = fp8_comm_init_local(&c, n, devices, err, sizeof err);
  GH_REQUIRE(rc == FP8_OK, "fp8_comm_init_local(%d devices): %s", n, err);
  printf("  NCCL %s, local group of %d GPU(s)\n", fp8_comm_nccl_version(), n);
  GH_CHECK(fp8_comm_nranks(c) == n && fp8_comm_nlocal(c) == n, "ranks %d, local %d, expected %d",
           fp8_comm_nranks(c), fp8_comm_nlocal(c), n);
  const size_t counts[] = {1, 8, 7 + 8, 4096, (size_t)1 << 20};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
    run_group(c, devices, counts[i], "init_local");
  /* count 0: nothing to do, no error */
  float *none[8] = {0};
  GH_CHECK(fp8_comm_allreduce_max(c, none, 0, err, sizeof err) == FP8_OK, "count 0: %s", err);
  fp8_comm_free(c);
}

static void test_unique_id_world_of_one(void) {
  fp8_comm_id id;
  int rc = fp8_comm_unique_id(&id, err, sizeof err);
  GH_REQUIRE(rc == FP8_OK, "fp8_comm_unique_id: %s", err);
  fp8_comm *c = NULL;
  rc = fp8_comm_init_rank(&c, &id, 1, 0, 0, err, sizeof err);
  GH_REQUIRE(rc == FP8_OK, "fp8_comm_init_rank(nranks 1, rank 0): %s", err);
  GH_CHECK(fp8_comm_nranks(c) == 1 && fp8_comm_nlocal(c) == 1, "ranks %d, local %d",
           fp8_comm_nranks(c), fp8_comm_nlocal(c));
  const int dev0 = 0;
  run_group(c, &dev0, 1000, "init_rank");
  fp8_comm_free(c);
}

static void test_bad_arguments(void) {
  fp8_comm *c = NULL;
  GH_CHECK(fp8_comm_init_local(&c, 0, NULL, err, sizeof err) == FP8_EINVAL && c == NULL,
           "0 devices accepted");
  GH_CHECK(fp8_comm_init_local(&c, 1, (const int[]){999}, err, sizeof err) == FP8_EDEVICE &&
               strstr(err, "999"), "device 999: \"%s\"", err);
  fp8_comm_id id;
  memset(&id, 0, sizeof id);
  GH_CHECK(fp8_comm_init_rank(&c, &id, 2, 2, 0, err, sizeof err) == FP8_EINVAL,
           "rank 2 of 2 accepted");
}

int main(void) {
  gh_skip_without_device();
  GH_RUN(test_local_group);
  GH_RUN(test_unique_id_world_of_one);
  GH_RUN(test_bad_arguments);
  return gh_summary();
}
