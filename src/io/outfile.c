/* outfile.c: see outfile.h. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "outfile.h"

#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp8.h"
#include "util.h"

/* 10^k in long double: exact up to 10^27 (and 1 / 10^27 as one division); beyond, powl. */
static long double times_pow10(long double a, int k) {
  static const long double exact[28] = {1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,
                                        1e7L,  1e8L,  1e9L,  1e10L, 1e11L, 1e12L, 1e13L,
                                        1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L, 1e20L,
                                        1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
  if (k >= 0 && k < 28) return a * exact[k];
  if (k < 0 && k > -28) return a / exact[-k];
  return a * powl(10.0L, (long double)k);
}

/* "%.9g" of a finite nonzero double without printf: the nine significant digits are the
 * integer nearest to t = |v| 10^(8 - e), 10^8 <= t < 10^9, computed in x87 extended precision
 * (64-bit significand: one or two roundings, t within 2^-32 of its exact value, as t < 2^30).
 * When t's fraction is within 2^-24 of one half the rounding could go either way (an exact tie
 * goes to even in printf): those, and every value where long double is not the 80-bit format,
 * are left to snprintf. Then %g's layout: exponential when e < -4 or e >= 9, trailing zeros
 * and a bare point removed, the exponent with a sign and at least two digits. */
static int put_g9(double v, char *out) {
#if LDBL_MANT_DIG >= 64
  char *p = out;
  long double a = v < 0 ? -(long double)v : (long double)v;
  if (v < 0) *p++ = '-';
  /* the decimal exponent from the binary one: floor(log10 |v|) is floor(b log10 2) or one more
   * (b = ilogb |v|, |b| <= 1074); the loop below corrects it (no log10l: x87's fyl2x is slow) */
  int e = (int)floor(ilogb(v) * 0.30102999566398120);
  long double t = 0.0L;
  for (int tries = 0;; tries++) {
    if (tries == 3) goto slow;
    t = times_pow10(a, 8 - e);
    if (t < 1e8L) e--;
    else if (t >= 1e9L) e++;
    else break;
  }
  long double r = (long double)(uint32_t)t, fr = t - r; /* 1e8 <= t < 1e9: truncation is floor */
  if (fabsl(fr - 0.5L) < 0x1p-24L) goto slow;
  uint32_t d = (uint32_t)r + (fr > 0.5L);
  if (d == 1000000000u) { /* 999999999.5 and up: 1.00000000 times the next power */
    d = 100000000u;
    e++;
  }
  char dig[9];
  for (int i = 8; i >= 0; i--) {
    dig[i] = (char)('0' + d % 10);
    d /= 10;
  }
  int nd = 9; /* significant digits kept: trailing zeros dropped */
  while (nd > 1 && dig[nd - 1] == '0') nd--;
  if (e < -4 || e >= 9) {
    *p++ = dig[0];
    if (nd > 1) {
      *p++ = '.';
      memcpy(p, dig + 1, (size_t)(nd - 1));
      p += nd - 1;
    }
    *p++ = 'e';
    *p++ = e < 0 ? '-' : '+';
    int x = e < 0 ? -e : e;
    if (x >= 100) *p++ = (char)('0' + x / 100);
    *p++ = (char)('0' + x / 10 % 10);
    *p++ = (char)('0' + x % 10);
  } else if (e >= 0) { /* dig[0..e] before the point, the rest after it */
    memcpy(p, dig, (size_t)(e + 1));
    p += e + 1;
    if (nd > e + 1) {
      *p++ = '.';
      memcpy(p, dig + e + 1, (size_t)(nd - e - 1));
      p += nd - e - 1;
    }
  } else { /* 0.000ddd */
    *p++ = '0';
    *p++ = '.';
    for (int i = 0; i < -e - 1; i++) *p++ = '0';
    memcpy(p, dig, (size_t)nd);
    p += nd;
  }
  *p = '\0';
  return (int)(p - out);
slow:
#endif
  return snprintf(out, FP8_NUM_TEXT_MAX, "%.9g", v);
}

int fp8_num_text(double v, char out[FP8_NUM_TEXT_MAX]) {
  const char *s = isnan(v) ? "nan" : isinf(v) ? (v > 0 ? "inf" : "-inf")
                : v == 0.0 ? (signbit(v) ? "-0" : "0") : NULL;
  if (!s) return put_g9(v, out);
  size_t k = strlen(s);
  memcpy(out, s, k + 1);
  return (int)k;
}

void fp8_csv_put_num(FILE *fp, double v) {
  char b[FP8_NUM_TEXT_MAX];
  fwrite(b, 1, (size_t)fp8_num_text(v, b), fp);
}

int fp8_open_regular(const char *path, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open: %s", path, strerror(e));
    errno = e;
    return -1;
  }
  struct stat st;
  int fl = 0, e = 0;
  if (fstat(fd, &st) != 0) e = errno;
  else if (!S_ISREG(st.st_mode)) e = -1;
  else if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) e = errno;
  if (e) {
    close(fd);
    if (e < 0) {
      fp8_errorf(FP8_EIO, err, errlen, "%s: not a regular file", path);
      e = EINVAL;
    } else {
      fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open: %s", path, strerror(e));
    }
    errno = e;
    return -1;
  }
  return fd;
}

FILE *fp8_fopen_regular(const char *path, char *err, size_t errlen) {
  int fd = fp8_open_regular(path, err, errlen);
  if (fd < 0) return NULL;
  FILE *fp = fdopen(fd, "rb");
  if (!fp) {
    int e = errno;
    close(fd);
    fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open: %s", path, strerror(e));
    errno = e;
  }
  return fp;
}

int fp8_read_stream(FILE *f, char **buf, size_t *len) {
  char *b = NULL;
  size_t n = 0, cap = 0;
  *buf = NULL;
  *len = 0;
  for (;;) {
    /* room for at least one more byte and the NUL: doubling from 64 KiB */
    char *nb = fp8_grow(b, n + 1, &cap, 1, 65536);
    if (!nb) {
      free(b);
      return FP8_ENOMEM;
    }
    b = nb;
    size_t r = fread(b + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
  }
  if (ferror(f)) {
    int e = errno;
    free(b);
    errno = e;
    return FP8_EIO;
  }
  b[n] = '\0';
  *buf = b;
  *len = n;
  return FP8_OK;
}

int fp8_outfile_open(fp8_outfile *of, const char *dir, const char *name, char *err, size_t errlen) {
  memset(of, 0, sizeof *of);
  size_t len = strlen(dir) + strlen(name) + 64;
  of->tmp = malloc(len);
  of->final = malloc(len);
  if (!of->tmp || !of->final) {
    fp8_outfile_abort(of);
    snprintf(err, errlen, "out of memory");
    return FP8_ENOMEM;
  }
  snprintf(of->final, len, "%s/%s", dir, name);
  snprintf(of->tmp, len, "%s/.%s.tmp.%ld", dir, name, (long)getpid());
  of->fp = fopen(of->tmp, "wb");
  if (!of->fp) {
    int e = errno;
    snprintf(err, errlen, "%s: cannot write: %s", of->final, strerror(e));
    free(of->tmp);
    free(of->final);
    memset(of, 0, sizeof *of);
    return fp8_write_errno_status(e);
  }
  setvbuf(of->fp, NULL, _IOFBF, 1 << 16);
  return FP8_OK;
}

int fp8_write_errno_status(int e) {
  return e == ENOSPC || e == EDQUOT || e == EIO || e == EFBIG ? FP8_EWRITE : FP8_EIO;
}

static int commit(fp8_outfile *of, int unlink_first, char *err, size_t errlen) {
  if (!of->fp) return FP8_EIO;
  /* a write or close of an open file fails only for the disk or the device: the run's
   * failure, whatever errno says; a rename by its errno (e.g. a directory in the way) */
  int rc = ferror(of->fp) ? FP8_EWRITE : FP8_OK;
  int saved = errno;
  if (fclose(of->fp) != 0) {
    rc = FP8_EWRITE;
    saved = errno;
  }
  of->fp = NULL;
  if (!rc && unlink_first && unlink(of->final) != 0 && errno != ENOENT) {
    saved = errno;
    rc = fp8_write_errno_status(saved);
  }
  if (!rc && rename(of->tmp, of->final) != 0) {
    saved = errno;
    rc = fp8_write_errno_status(saved);
  }
  if (rc) {
    snprintf(err, errlen, "%s: write failed: %s", of->final, strerror(saved));
    unlink(of->tmp);
  }
  free(of->tmp);
  free(of->final);
  of->tmp = of->final = NULL;
  return rc;
}

int fp8_outfile_commit(fp8_outfile *of, char *err, size_t errlen) {
  return commit(of, 0, err, errlen);
}

int fp8_outfile_write_text(const char *dir, const char *name, const char *text, char *err,
                           size_t errlen) {
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, dir, name, err, errlen);
  if (rc) return rc;
  fputs(text, of.fp);
  fputc('\n', of.fp);
  return fp8_outfile_commit(&of, err, errlen);
}

int fp8_outfile_commit_over(fp8_outfile *of, char *err, size_t errlen) {
  return commit(of, 1, err, errlen);
}

void fp8_outfile_abort(fp8_outfile *of) {
  if (of->fp) {
    fclose(of->fp);
    of->fp = NULL;
    if (of->tmp) unlink(of->tmp);
  }
  free(of->tmp);
  free(of->final);
  of->tmp = of->final = NULL;
}

int fp8_outfile_open_path(fp8_outfile *of, const char *tmp, const char *final, long long keep,
                          char *err, size_t errlen) {
  memset(of, 0, sizeof *of);
  of->tmp = strdup(tmp);
  of->final = strdup(final);
  if (!of->tmp || !of->final) {
    fp8_outfile_abort(of);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  int rc = FP8_OK;
  if (keep < 0) {
    if (!(of->fp = fopen(tmp, "wb"))) {
      int e = errno;
      rc = fp8_errorf(fp8_write_errno_status(e), err, errlen, "%s: cannot write: %s", tmp,
                      strerror(e));
    }
  } else {
    struct stat sb;
    int fd = open(tmp, O_RDWR);
    if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size < keep) {
      rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: %s than the checkpoint records (%lld bytes)",
                      tmp, fd < 0 ? "missing: not as long" : "shorter", keep);
    } else if (ftruncate(fd, (off_t)keep) != 0 || !(of->fp = fdopen(fd, "r+b")) ||
               fseeko(of->fp, 0, SEEK_END) != 0) {
      int e = errno;
      rc = fp8_errorf(fp8_write_errno_status(e), err, errlen, "%s: cannot write: %s", tmp,
                      strerror(e));
    }
    if (!of->fp && fd >= 0) close(fd);
  }
  if (rc) {
    fp8_outfile_close_keep(of);
    return rc;
  }
  setvbuf(of->fp, NULL, _IOFBF, 1 << 16);
  return FP8_OK;
}

void fp8_outfile_close_keep(fp8_outfile *of) {
  if (of->fp) fclose(of->fp);
  of->fp = NULL;
  free(of->tmp);
  free(of->final);
  of->tmp = of->final = NULL;
}

int fp8_mkdir_p(const char *dir, char *err, size_t errlen) {
  char *p = strdup(dir);
  if (!p) return FP8_ENOMEM;
  int rc = FP8_OK;
  for (char *s = p + 1;; s++) {
    char c = *s;
    if (c == '/' || c == 0) {
      *s = 0;
      if (mkdir(p, 0777) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "%s: cannot create directory: %s", p, strerror(errno));
        rc = FP8_EIO;
        break;
      }
      *s = c;
      if (c == 0) break;
    }
  }
  if (rc == FP8_OK) {
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      snprintf(err, errlen, "%s: not a directory", dir);
      rc = FP8_EIO;
    } else if (access(dir, W_OK) != 0) {
      snprintf(err, errlen, "%s: output directory is not writable: %s", dir, strerror(errno));
      rc = FP8_EIO;
    }
  }
  free(p);
  return rc;
}

char *fp8_first_missing_dir(const char *dir) {
  char *p = strdup(dir);
  if (!p) return NULL;
  size_t n = strlen(p);
  while (n > 1 && p[n - 1] == '/') p[--n] = '\0'; /* "out/" is "out" */
  struct stat sb;
  /* the prefixes of the path in order, as fp8_mkdir_p creates them: the first missing one */
  for (char *s = p + 1;; s++)
    if (*s == '/' || *s == '\0') {
      char c = *s;
      *s = '\0';
      if (stat(p, &sb) != 0) return p;
      if (c == '\0') break;
      *s = c;
    }
  free(p);
  return NULL;
}

void fp8_rmdir_up(const char *dir, const char *top) {
  char *p = strdup(dir);
  if (!p || !top) {
    free(p);
    return;
  }
  size_t n = strlen(p), nt = strlen(top);
  while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
  /* dir, then each parent while it is still top or below it */
  while (n >= nt && rmdir(p) == 0 && n > nt) {
    while (n > 0 && p[n - 1] != '/') n--;
    while (n > 1 && p[n - 1] == '/') n--;
    p[n] = '\0';
  }
  free(p);
}

int fp8_dir_nonempty(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *e;
  int found = 0;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
      found = 1;
      break;
    }
  closedir(d);
  return found;
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb;
  (void)type;
  (void)ftw;
  remove(path);
  return 0;
}

void fp8_rmtree(const char *path) {
  if (!path || !*path) return;
  nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
