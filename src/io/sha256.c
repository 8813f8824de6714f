/* sha256.c: SHA-256 of files and buffers (sha256.h) with OpenSSL libcrypto's EVP API: a
 * well-kept implementation that uses the CPU's SHA instructions where there are some (about
 * 1.5 GB/s a core on the AMD EPYC of bench/README.md), not a hand-written one. */
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "fp8.h"
#include "outfile.h" /* fp8_open_regular */
#include "util.h" /* fp8_errorf */

#define READ_BYTES (1u << 20)

static void to_hex(const unsigned char *md, unsigned len, char hex[FP8_SHA256_HEX]) {
  static const char digits[] = "0123456789abcdef";
  for (unsigned i = 0; i < len && i < 32; i++) {
    hex[2 * i] = digits[md[i] >> 4];
    hex[2 * i + 1] = digits[md[i] & 15];
  }
  hex[64] = '\0';
}

int fp8_sha256_mem(const void *data, size_t n, char hex[FP8_SHA256_HEX]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
           EVP_DigestUpdate(ctx, data, n) == 1 && EVP_DigestFinal_ex(ctx, md, &len) == 1 &&
           len == 32;
  EVP_MD_CTX_free(ctx);
  if (!ok) return FP8_ENOMEM;
  to_hex(md, len, hex);
  return FP8_OK;
}

void fp8_file_id_of(const char *path, fp8_file_id *id) {
  struct stat sb;
  memset(id, 0, sizeof *id);
  if (stat(path, &sb) != 0) return;
  *id = (fp8_file_id){(unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino,
                      (long long)sb.st_size, (long long)sb.st_mtim.tv_sec,
                      (long long)sb.st_mtim.tv_nsec, 1};
}

/* 1 when the open file fd is the one want describes (or there is nothing to compare). */
static int same_file(int fd, const fp8_file_id *want) {
  struct stat sb;
  if (!want || !want->set) return 1;
  return fstat(fd, &sb) == 0 && (unsigned long long)sb.st_dev == want->dev &&
         (unsigned long long)sb.st_ino == want->ino && (long long)sb.st_size == want->size &&
         (long long)sb.st_mtim.tv_sec == want->mtime_sec &&
         (long long)sb.st_mtim.tv_nsec == want->mtime_nsec;
}

#define CHANGED "%s: changed while the run used it (replaced or rewritten since the run opened " \
                "its trace): its hash would not be of the bytes the run used; run again once " \
                "nothing writes the trace"

int fp8_sha256_file(const char *path, const atomic_int *stop, const fp8_file_id *want,
                    char hex[FP8_SHA256_HEX], char *err, size_t errlen) {
  int rc = FP8_OK;
  unsigned char *buf = NULL;
  EVP_MD_CTX *ctx = NULL;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  int fd = fp8_open_regular(path, err, errlen); /* a FIFO must not hang the hash */
  if (fd < 0) {
    rc = errno == EINVAL ? FP8_EFORMAT : FP8_EIO; /* err: fp8_open_regular's line */
    goto done;
  }
  if (!same_file(fd, want)) {
    rc = fp8_errorf(FP8_EIO, err, errlen, CHANGED, path);
    goto done;
  }
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  buf = malloc(READ_BYTES);
  ctx = EVP_MD_CTX_new();
  if (!buf || !ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", path);
    goto done;
  }
  for (;;) {
    if (stop && atomic_load_explicit(stop, memory_order_relaxed)) {
      rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: stopped", path);
      goto done;
    }
    ssize_t got = read(fd, buf, READ_BYTES);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot read: %s", path, strerror(errno));
      goto done;
    }
    if (got == 0) break;
    if (EVP_DigestUpdate(ctx, buf, (size_t)got) != 1) {
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", path);
      goto done;
    }
  }
  if (EVP_DigestFinal_ex(ctx, md, &len) != 1 || len != 32) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", path);
    goto done;
  }
  if (!same_file(fd, want)) { /* rewritten while it was read */
    rc = fp8_errorf(FP8_EIO, err, errlen, CHANGED, path);
    goto done;
  }
  to_hex(md, len, hex);
done:
  EVP_MD_CTX_free(ctx);
  free(buf);
  if (fd >= 0) close(fd);
  return rc;
}
