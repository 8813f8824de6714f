/* bench_readpass.c: the memory-bound floor of a replay (bench/scale.sh, issue 27): one pass
 * over the mapped bytes of each file given, as fp8lab maps a snapshot (mmap PROT_READ,
 * MAP_PRIVATE, no MAP_POPULATE: the first touch of every page is in the timed pass), taking
 * the largest |x| of the BF16 values (the file read as 16-bit words: the headers are a few
 * words among billions). One thread. Prints the seconds, the bytes and GB/s; the amax so the
 * compiler keeps the loop.
 *
 *   bench_readpass FILE...
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_readpass FILE...\n");
    return 2;
  }
  double t0 = now();
  uint64_t bytes = 0;
  uint16_t best = 0;
  for (int i = 1; i < argc; i++) {
    int fd = open(argv[i], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
      perror(argv[i]);
      return 1;
    }
    size_t n = (size_t)st.st_size;
    const uint16_t *p = n ? mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (n && p == MAP_FAILED) {
      perror(argv[i]);
      return 1;
    }
    uint16_t m[16] = {0};
    size_t w = n / 2, j = 0;
    for (; j + 16 <= w; j += 16)
      for (int k = 0; k < 16; k++) {
        uint16_t v = p[j + k] & 0x7fff;
        m[k] = v > m[k] ? v : m[k];
      }
    for (; j < w; j++) m[0] = (p[j] & 0x7fff) > m[0] ? (p[j] & 0x7fff) : m[0];
    for (int k = 0; k < 16; k++) best = m[k] > best ? m[k] : best;
    if (n) munmap((void *)p, n);
    bytes += n;
  }
  double s = now() - t0;
  uint32_t bits = (uint32_t)best << 16;
  float amax;
  memcpy(&amax, &bits, sizeof amax);
  printf("readpass: %.3f s, %llu bytes, %.2f GB/s, amax %g\n", s, (unsigned long long)bytes,
         (double)bytes / s / 1e9, (double)amax);
  return 0;
}
