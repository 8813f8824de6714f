/* outfile.c: see outfile.h. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "outfile.h"

#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp8.h"

void fp8_csv_put_num(FILE *fp, double v) {
  if (isnan(v)) fputs("nan", fp);
  else if (isinf(v)) fputs(v > 0 ? "inf" : "-inf", fp);
  else fprintf(fp, "%.9g", v);
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
    snprintf(err, errlen, "%s: cannot write: %s", of->final, strerror(errno));
    free(of->tmp);
    free(of->final);
    memset(of, 0, sizeof *of);
    return FP8_EIO;
  }
  setvbuf(of->fp, NULL, _IOFBF, 1 << 16);
  return FP8_OK;
}

int fp8_outfile_commit(fp8_outfile *of, char *err, size_t errlen) {
  if (!of->fp) return FP8_EIO;
  int bad = ferror(of->fp) != 0;
  int saved = errno;
  if (fclose(of->fp) != 0) {
    bad = 1;
    saved = errno;
  }
  of->fp = NULL;
  if (!bad && rename(of->tmp, of->final) != 0) {
    bad = 1;
    saved = errno;
  }
  if (bad) {
    snprintf(err, errlen, "%s: write failed: %s", of->final, strerror(saved));
    unlink(of->tmp);
  }
  free(of->tmp);
  free(of->final);
  of->tmp = of->final = NULL;
  return bad ? FP8_EIO : FP8_OK;
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
