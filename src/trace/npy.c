/* npy.c: reading npy snapshot folders (step_<N>/<tensor>.npy), the alternative to safetensors.
 *
 * Each file is mapped read-only and its header (format versions 1.0, 2.0 and 3.0: magic
 * "\x93NUMPY", version, u16 or u32 little-endian header length, then a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }) is parsed by a small strict
 * parser. Supported: float32 and float16, little-endian ('<', '=' native = little-endian on
 * every platform fp8lab builds for, '|' read as native as numpy's np.dtype does), C order.
 */
#include "trace_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

/* Parser state over the NUL-terminated copy of the header. */
typedef struct {
  const char *s, *p;
  size_t base; /* file offset of s[0], for messages */
} hp;

static void skip_ws(hp *h) {
  while (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r') h->p++;
}

static size_t at(const hp *h) { return h->base + (size_t)(h->p - h->s); }

/* Parses a quoted string into buf; 0 on success. */
static int parse_str(hp *h, char *buf, size_t cap) {
  char q = *h->p;
  if (q != '\'' && q != '"') return -1;
  h->p++;
  size_t n = 0;
  while (*h->p && *h->p != q) {
    if (*h->p == '\\' || n + 1 >= cap) return -1;
    buf[n++] = *h->p++;
  }
  if (*h->p != q) return -1;
  h->p++;
  buf[n] = '\0';
  return 0;
}

static int parse_npy_header(const char *path, hp *h, fp8_tensor_view *v, char *err,
                            size_t errlen) {
  char key[32], descr[32];
  int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0;
  skip_ws(h);
  if (*h->p != '{')
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: npy header: expected '{' at byte %zu",
                         path, at(h));
  h->p++;
  for (;;) {
    skip_ws(h);
    if (*h->p == '}') break;
    size_t kat = at(h);
    if (parse_str(h, key, sizeof key) != 0)
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                           "%s: npy header: expected a quoted key at byte %zu", path, kat);
    skip_ws(h);
    if (*h->p != ':')
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: npy header: expected ':' at byte %zu",
                           path, at(h));
    h->p++;
    skip_ws(h);
    size_t vat = at(h);
    if (strcmp(key, "descr") == 0 && !have_descr) {
      if (parse_str(h, descr, sizeof descr) != 0)
        return fp8_errorf(FP8_EFORMAT, err, errlen,
                             "%s: npy header: descr at byte %zu is not a simple dtype string",
                             path, vat);
      have_descr = 1;
    } else if (strcmp(key, "fortran_order") == 0 && !have_fortran) {
      if (strncmp(h->p, "True", 4) == 0) fortran = 1, h->p += 4;
      else if (strncmp(h->p, "False", 5) == 0) fortran = 0, h->p += 5;
      else
        return fp8_errorf(FP8_EFORMAT, err, errlen,
                             "%s: npy header: fortran_order at byte %zu is not True or False",
                             path, vat);
      have_fortran = 1;
    } else if (strcmp(key, "shape") == 0 && !have_shape) {
      if (*h->p != '(')
        return fp8_errorf(FP8_EFORMAT, err, errlen,
                             "%s: npy header: shape at byte %zu is not a tuple", path, vat);
      h->p++;
      v->ndim = 0;
      for (;;) {
        skip_ws(h);
        if (*h->p == ')') break;
        if (*h->p < '0' || *h->p > '9')
          return fp8_errorf(FP8_EFORMAT, err, errlen,
                               "%s: npy header: expected a non-negative integer in shape at "
                               "byte %zu",
                               path, at(h));
        if (v->ndim == FP8_MAX_DIMS)
          return fp8_errorf(FP8_EFORMAT, err, errlen,
                               "%s: npy header: shape has more than %d dimensions", path,
                               FP8_MAX_DIMS);
        int64_t d = 0;
        for (; *h->p >= '0' && *h->p <= '9'; h->p++) {
          int dig = *h->p - '0';
          if (d > (INT64_MAX - dig) / 10)
            return fp8_errorf(FP8_EFORMAT, err, errlen,
                                 "%s: npy header: shape dimension at byte %zu too large", path,
                                 vat);
          d = d * 10 + dig;
        }
        if (*h->p == 'L') h->p++; /* Python 2 long literal */
        v->shape[v->ndim++] = d;
        skip_ws(h);
        if (*h->p == ',') h->p++;
        else if (*h->p != ')')
          return fp8_errorf(FP8_EFORMAT, err, errlen,
                               "%s: npy header: expected ',' or ')' in shape at byte %zu", path,
                               at(h));
      }
      h->p++;
      have_shape = 1;
    } else {
      char shown[FP8_ESC_LEN];
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                           "%s: npy header: unexpected or repeated key '%s' at byte %zu", path,
                           fp8_esc(key, shown, sizeof shown), kat);
    }
    skip_ws(h);
    if (*h->p == ',') h->p++;
    else if (*h->p != '}')
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                           "%s: npy header: expected ',' or '}' at byte %zu", path, at(h));
  }
  h->p++;
  skip_ws(h);
  if (*h->p)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                         "%s: npy header: unexpected text after the dict at byte %zu", path,
                         at(h));
  if (!have_descr || !have_fortran || !have_shape)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: npy header: missing key '%s'", path,
                         !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
  if (fortran)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                         "%s: fortran_order True not supported (C order only)", path);
  const char *t = descr;
  char shown[FP8_ESC_LEN];
  fp8_esc(descr, shown, sizeof shown);
  if (t[0] == '<' || t[0] == '=' || t[0] == '|') t++;
  else if (t[0] == '>')
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                         "%s: dtype '%s' is big-endian, not supported (<f4, <f2)", path, shown);
  if (strcmp(t, "f4") == 0) v->dtype = FP8_DTYPE_F32;
  else if (strcmp(t, "f2") == 0) v->dtype = FP8_DTYPE_F16;
  else
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: dtype '%s' not supported (<f4, <f2)",
                         path, shown);
  return FP8_OK;
}

/* Maps and validates one .npy file; on success the mapping is added to s and v is filled
 * (all but name). */
static int open_npy_file(const char *path, fp8_step *s, fp8_tensor_view *v, char *err,
                         size_t errlen) {
  int rc = FP8_OK;
  fp8_map m = {NULL, 0};
  char *hcopy = NULL;
  rc = fp8_map_file(path, &m, err, errlen);
  if (rc != FP8_OK) goto done;
  const unsigned char *b = m.addr;
  if (m.len < 10 || memcmp(b, "\x93NUMPY", 6) != 0) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                       "%s: not an npy file (no \\x93NUMPY magic and version in %zu bytes)", path,
                       m.len);
    goto done;
  }
  unsigned major = b[6], minor = b[7];
  if (major < 1 || major > 3 || minor != 0) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                       "%s: npy format version %u.%u not supported (1.0, 2.0, 3.0)", path, major,
                       minor);
    goto done;
  }
  size_t pre = major == 1 ? 10 : 12;
  if (m.len < pre) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                       "%s: file size %zu too short for the npy %u.0 prefix of %zu bytes", path,
                       m.len, major, pre);
    goto done;
  }
  uint64_t hlen = major == 1 ? (uint64_t)(b[8] | (b[9] << 8))
                             : (uint64_t)b[8] | ((uint64_t)b[9] << 8) |
                                   ((uint64_t)b[10] << 16) | ((uint64_t)b[11] << 24);
  if (hlen > m.len - pre) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                       "%s: header length %llu at byte 8 exceeds file size %zu", path,
                       (unsigned long long)hlen, m.len);
    goto done;
  }
  hcopy = malloc((size_t)hlen + 1);
  if (!hcopy) {
    rc = FP8_ENOMEM;
    goto done;
  }
  memcpy(hcopy, b + pre, (size_t)hlen);
  hcopy[hlen] = '\0';
  if (strlen(hcopy) != hlen) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: npy header: NUL byte at byte %zu", path,
                       pre + strlen(hcopy));
    goto done;
  }
  hp h = {hcopy, hcopy, pre};
  rc = parse_npy_header(path, &h, v, err, errlen);
  if (rc != FP8_OK) goto done;
  size_t esize = fp8_dtype_size(v->dtype);
  int64_t numel = 1;
  for (int k = 0; k < v->ndim; k++)
    if (v->shape[k] == 0) numel = 0;
  for (int k = 0; k < v->ndim && numel; k++) {
    if (numel > INT64_MAX / (int64_t)esize / v->shape[k]) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: shape's element count overflows", path);
      goto done;
    }
    numel *= v->shape[k];
  }
  v->numel = numel;
  uint64_t off = pre + hlen, have = m.len - off, need = (uint64_t)numel * esize;
  if (have != need) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                       "%s: data at byte %llu holds %llu bytes, expected %llu (%lld elements "
                       "of %s)",
                       path, (unsigned long long)off, (unsigned long long)have,
                       (unsigned long long)need, (long long)numel, fp8_dtype_name(v->dtype));
    goto done;
  }
  v->data = b + off;
  rc = fp8_step_add_map(s, &m);
  if (rc != FP8_OK) goto done;
  m.addr = NULL; /* owned by s now */
done:
  free(hcopy);
  fp8_map_release(&m);
  return rc;
}

int fp8_npy_open_step(const char *dir, fp8_step *out, char *err, size_t errlen) {
  int rc = FP8_OK;
  DIR *d = NULL;
  char *path = NULL;
  size_t cap = 0;
  memset(out, 0, sizeof *out);
  out->step = -1;
  if (err && errlen) err[0] = '\0';
  d = opendir(dir);
  if (!d) {
    rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open directory: %s", dir,
                       strerror(errno));
    goto done;
  }
  for (;;) {
    errno = 0;
    struct dirent *e = readdir(d);
    if (!e) {
      if (errno)
        rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot read directory: %s", dir,
                           strerror(errno));
      break;
    }
    size_t nl = strlen(e->d_name);
    if (e->d_name[0] == '.' || nl <= 4 || strcmp(e->d_name + nl - 4, ".npy") != 0) continue;
    /* the name rules before anything else: every later message quotes the file's path */
    char why[FP8_ESC_LEN + 64], shown[FP8_ESC_LEN];
    if (fp8_tensor_name_check(e->d_name, nl - 4, FP8_NAME_MAX, why, sizeof why) != 0) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: tensor %s: %s", dir,
                      fp8_escape(e->d_name, nl - 4, shown, sizeof shown), why);
      goto done;
    }
    free(path);
    size_t dl = strlen(dir);
    path = malloc(dl + nl + 2);
    if (!path) {
      rc = FP8_ENOMEM;
      goto done;
    }
    snprintf(path, dl + nl + 2, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) != 0) {
      rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot stat: %s", path, strerror(errno));
      goto done;
    }
    if (S_ISDIR(st.st_mode)) continue;
    fp8_tensor_view *nt = fp8_grow(out->tensors, out->ntensors, &cap, sizeof *nt, 16);
    if (!nt) {
      rc = FP8_ENOMEM;
      goto done;
    }
    out->tensors = nt;
    fp8_tensor_view *v = &out->tensors[out->ntensors];
    memset(v, 0, sizeof *v);
    rc = open_npy_file(path, out, v, err, errlen);
    if (rc != FP8_OK) goto done;
    v->name = strndup(e->d_name, nl - 4);
    if (!v->name) {
      rc = FP8_ENOMEM;
      goto done;
    }
    out->ntensors++;
  }
  fp8_step_sort(out); /* file names in one folder are unique */
done:
  if (rc == FP8_ENOMEM && err && errlen && !err[0])
    fp8_errorf(rc, err, errlen, "%s: out of memory", dir);
  if (d) closedir(d);
  free(path);
  if (rc != FP8_OK) fp8_step_free(out);
  return rc;
}
