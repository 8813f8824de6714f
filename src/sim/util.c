/* util.c: see util.h. */
#include "util.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fp8_errorf(int status, char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return status;
}

void *fp8_grow(void *arr, size_t n, size_t *cap, size_t elem, size_t first) {
  if (n < *cap) return arr;
  size_t nc = *cap ? 2 * *cap : first;
  if (nc > SIZE_MAX / elem) return NULL;
  void *na = realloc(arr, nc * elem);
  if (na) *cap = nc;
  return na;
}

/* ------------------------------------------------------------------ UTF-8 and escaping */

size_t fp8_utf8_decode(const unsigned char *s, size_t len, unsigned *cp) {
  if (len == 0) return 0;
  unsigned c = s[0];
  if (c < 0x80) return *cp = c, 1;
  size_t n;
  unsigned min;
  if (c >= 0xC2 && c <= 0xDF) n = 2, min = 0x80, c &= 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, min = 0x800, c &= 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, min = 0x10000, c &= 0x07;
  else return 0; /* a continuation byte, C0/C1 (overlong 2-byte), F5..FF */
  if (len < n) return 0;
  for (size_t k = 1; k < n; k++) {
    if ((s[k] & 0xC0) != 0x80) return 0;
    c = (c << 6) | (s[k] & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  *cp = c;
  return n;
}

int fp8_is_control(unsigned cp) { return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F); }

/* The one escaper (fp8_escape, fp8_escape_line): keep_backslash for the printing safety net,
 * cut: end with "..." when the text does not fit (else it is only cut at a unit boundary). */
static const char *escape(const char *s, size_t len, char *out, size_t outlen,
                          int keep_backslash, int cut) {
  if (!out || outlen == 0) return out;
  const unsigned char *p = (const unsigned char *)s;
  size_t o = 0, room = outlen - 1, i = 0, safe = 0;
  while (i < len) {
    char unit[16];
    size_t un = 0;
    unsigned cp;
    size_t n = fp8_utf8_decode(p + i, len - i, &cp);
    if (n && !fp8_is_control(cp) && !(cp == '\\' && !keep_backslash)) {
      memcpy(unit, p + i, n);
      un = n;
    } else if (n == 1 && (cp == '\\' || cp == '\n' || cp == '\r' || cp == '\t')) {
      unit[0] = '\\';
      unit[1] = cp == '\\' ? '\\' : cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't';
      un = 2;
    } else {
      if (n == 0) n = 1; /* a stray byte: shown alone, decoding resumes after it */
      for (size_t k = 0; k < n; k++)
        un += (size_t)snprintf(unit + un, sizeof unit - un, "\\x%02x", p[i + k]);
    }
    if (o + un > room) { /* does not fit: cut back to where "..." fits after a unit */
      if (cut && room >= 3) {
        o = safe;
        memcpy(out + o, "...", 3);
        o += 3;
      }
      break;
    }
    memcpy(out + o, unit, un);
    o += un;
    i += n;
    if (o + 3 <= room) safe = o;
  }
  out[o] = '\0';
  return out;
}

const char *fp8_escape(const char *s, size_t len, char *out, size_t outlen) {
  return escape(s, len, out, outlen, 0, 1);
}

const char *fp8_esc(const char *s, char *out, size_t outlen) {
  if (!s) s = "(null)";
  return escape(s, strlen(s), out, outlen, 0, 1);
}

const char *fp8_escape_line(const char *s, char *out, size_t outlen) {
  return escape(s, s ? strlen(s) : 0, out, outlen, 1, 0);
}

int fp8_natural_cmp(const char *a, const char *b) {
  const char *a0 = a, *b0 = b;
  while (*a && *b) {
    if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
      while (*a == '0') a++;
      while (*b == '0') b++;
      size_t na = 0, nb = 0;
      while (isdigit((unsigned char)a[na])) na++;
      while (isdigit((unsigned char)b[nb])) nb++;
      if (na != nb) return na < nb ? -1 : 1;
      int c = strncmp(a, b, na);
      if (c) return c;
      a += na, b += nb;
      continue;
    }
    if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
    a++, b++;
  }
  if (*a || *b) return *a ? 1 : -1;
  return strcmp(a0, b0); /* equal by value: leading zeros decide */
}

/* ------------------------------------------------------------------ a set of strings */

static uint64_t strset_hash(const char *k, size_t len) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)k[i]) * 0x100000001b3ULL;
  return h;
}

/* The slot of key in s (its own, or the empty one where it would go). cap is a power of 2. */
static size_t strset_slot(const fp8_strset *s, const char *key, size_t len) {
  size_t m = s->cap - 1, i = (size_t)strset_hash(key, len) & m;
  while (s->key[i] && !(s->len[i] == len && memcmp(s->key[i], key, len) == 0)) i = (i + 1) & m;
  return i;
}

size_t fp8_strset_get(const fp8_strset *s, const char *key, size_t len) {
  if (!s->cap) return SIZE_MAX;
  size_t i = strset_slot(s, key, len);
  return s->key[i] ? s->idx[i] : SIZE_MAX;
}

size_t fp8_strset_put(fp8_strset *s, const char *key, size_t len, int *added) {
  *added = 0;
  if (2 * (s->n + 1) > s->cap) { /* at most half full: rehash into twice the room */
    size_t nc = s->cap ? 2 * s->cap : 64;
    fp8_strset t = {calloc(nc, sizeof *t.key), malloc(nc * sizeof *t.len),
                    malloc(nc * sizeof *t.idx), nc, s->n};
    if (!t.key || !t.len || !t.idx) {
      fp8_strset_free(&t);
      return SIZE_MAX;
    }
    for (size_t i = 0; i < s->cap; i++)
      if (s->key[i]) {
        size_t j = strset_slot(&t, s->key[i], s->len[i]);
        t.key[j] = s->key[i];
        t.len[j] = s->len[i];
        t.idx[j] = s->idx[i];
      }
    fp8_strset_free(s);
    *s = t;
  }
  size_t i = strset_slot(s, key, len);
  if (s->key[i]) return s->idx[i];
  s->key[i] = key;
  s->len[i] = len;
  s->idx[i] = s->n++;
  *added = 1;
  return s->idx[i];
}

void fp8_strset_free(fp8_strset *s) {
  free(s->key);
  free(s->len);
  free(s->idx);
  memset(s, 0, sizeof *s);
}
