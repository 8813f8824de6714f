/* timeline_inputs.c: what `fp8lab timeline` reads besides its flags (timeline_inputs.h): a
 * model's Linears from a trace, the device-model file, and the GPU module's timeline entry. */
#include "timeline_inputs.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_load.h"
#include "outfile.h"
#include "synth.h"
#include "trace.h"
#include "util.h"

/* ------------------------------------------------------------------ shapes from a trace */

/* A synth:<preset> trace of one step in a temporary folder (removed by the caller). */
static int synth_trace(const char *preset, char *dir, size_t dirlen, char *err, size_t errlen) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, dirlen, "%s/fp8lab-timeline-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir))
    return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot create a temporary folder: %s", dir,
                      strerror(errno));
  int rc = fp8_synth_write(preset, dir, 1, 1, err, errlen);
  if (rc) fp8_rmtree(dir);
  return rc;
}

int fp8_tl_shape_trace(const char *trace, fp8_tl_shape *s, char *err, size_t errlen) {
  char tmp[4096] = "", shown[FP8_ESC_LEN];
  fp8_trace tr;
  fp8_step st;
  const int synth = strncmp(trace, "synth:", 6) == 0;
  int rc, opened = 0, loaded = 0;
  memset(s, 0, sizeof *s);
  memset(&st, 0, sizeof st);
  if (synth && (rc = synth_trace(trace + 6, tmp, sizeof tmp, err, errlen))) return rc;
  if ((rc = fp8_trace_open(synth ? tmp : trace, &tr, err, errlen))) goto done;
  opened = 1;
  const fp8_trace *t0 = tr.nranks ? &tr.ranks[0] : &tr;
  if (t0->nsteps == 0) {
    rc = fp8_errorf(FP8_EINVAL, err, errlen,
                    "%s: no snapshot step%s, so no tensor shapes (amax.csv has none)",
                    fp8_esc(trace, shown, sizeof shown), tr.nranks ? " in rank_0" : "");
    goto done;
  }
  if ((rc = fp8_trace_load_step(t0, 0, &st, err, errlen))) goto done;
  loaded = 1;
  if ((rc = fp8_tl_shape_views(st.tensors, st.ntensors, s, err, errlen))) goto done;
  if (s->nlinears == 0) {
    rc = fp8_errorf(FP8_EINVAL, err, errlen,
                    "%s: step %lld has no Linear layer (a <name>.weight [out, in] with "
                    "<name>.input [tokens, in] or <name>.grad_output [tokens, out])",
                    fp8_esc(trace, shown, sizeof shown), (long long)st.step);
    goto done;
  }
  s->world = tr.nranks ? (int64_t)tr.nranks : 1;
  snprintf(s->source, sizeof s->source, "trace %s, step %lld%s", trace, (long long)st.step,
           tr.nranks ? " of rank_0" : "");
done:
  if (rc) fp8_tl_shape_free(s);
  if (loaded) fp8_step_free(&st);
  if (opened) fp8_trace_close(&tr);
  if (synth && *tmp) fp8_rmtree(tmp);
  return rc;
}

/* ------------------------------------------------------------------ the device-model file */

typedef struct {
  FILE *fp;
  const char *path;
  int lineno, failed;
  char *err;
  size_t errlen;
  int in_device, seen[8];
  fp8_tl_device d;
  char name[64];
  int have_name;
} dev_ctx;

static const char *const DEV_KEYS[8] = {"name",         "base",          "hbm_gbps",
                                        "fp8_tflops",   "kernel_us",     "allreduce_us",
                                        "allreduce_hop_us", "allreduce_gbps"};

static void dev_fail(dev_ctx *c, const char *fmt, const char *arg) {
  if (c->failed) return;
  char shown[FP8_ESC_LEN], msg[256];
  snprintf(msg, sizeof msg, fmt, fp8_esc(arg, shown, sizeof shown));
  fp8_errorf(FP8_EINVAL, c->err, c->errlen, "%s:%d: %s", c->path, c->lineno, msg);
  c->failed = 1;
}

/* One line per call, handed to inih without its comment, its leading blanks (inih would take an
 * indented line for the continuation of the value before it) and a UTF-8 BOM; sections are
 * handled here (the one section, [device]). */
static char *dev_reader(char *str, int num, void *stream) {
  dev_ctx *c = stream;
  if (!fgets(str, num, c->fp)) return NULL;
  c->lineno++;
  size_t n = strlen(str);
  if (n == (size_t)num - 1 && str[n - 1] != '\n' && !feof(c->fp)) dev_fail(c, "line too long%s", "");
  for (char *p = str; *p; p++) {
    if (*p == ';' || *p == '#' || *p == '\n' || *p == '\r') {
      *p = '\0';
      break;
    }
    if ((unsigned char)*p < 0x20 && *p != '\t') {
      dev_fail(c, "control character in line%s", "");
      *p = '\0';
      break;
    }
  }
  char *s = str;
  if (c->lineno == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
      (unsigned char)s[2] == 0xBF)
    s += 3;
  while (isspace((unsigned char)*s)) s++;
  if (*s == '[') {
    char *e = strchr(s, ']');
    const char *rest = e ? e + 1 : "";
    while (isspace((unsigned char)*rest)) rest++;
    if (!e || *rest) dev_fail(c, "expected [device] alone on its line, got %s", s);
    else if (*e = '\0', strcmp(s + 1, "device") != 0)
      dev_fail(c, "unknown section [%s] (expected [device])", s + 1);
    c->in_device = 1;
    s += strlen(s); /* nothing for inih */
  }
  memmove(str, s, strlen(s) + 1);
  return str;
}

static int dev_handler(void *user, const char *section, const char *key, const char *value) {
  (void)section;
  dev_ctx *c = user;
  int k = 0;
  while (k < 8 && strcmp(key, DEV_KEYS[k]) != 0) k++;
  if (!c->in_device) return dev_fail(c, "key %s outside [device]", key), 1;
  if (k == 8) return dev_fail(c, "unknown key %s (see fp8lab timeline --help)", key), 1;
  if (c->seen[k]++) return dev_fail(c, "key %s given twice", key), 1;
  if (k == 0) {
    snprintf(c->name, sizeof c->name, "%s", value);
    c->have_name = 1;
    return 1;
  }
  if (k == 1) {
    if (c->seen[2] + c->seen[3] + c->seen[4] + c->seen[5] + c->seen[6] + c->seen[7])
      return dev_fail(c, "base must come before the numbers it is the default of%s", ""), 1;
    if (fp8_tl_device_builtin(value, &c->d)) dev_fail(c, "base %s: expected h100 or h200", value);
    return 1;
  }
  char *end;
  errno = 0;
  double v = strtod(value, &end);
  if (errno || end == value || *end || !isfinite(v) || v < 0 || (v == 0 && k != 6))
    return dev_fail(c, "expected a positive number, got '%s'", value), 1;
  double *f[8] = {NULL, NULL, &c->d.hbm_gbps, &c->d.fp8_tflops, &c->d.kernel_us,
                  &c->d.allreduce_us, &c->d.allreduce_hop_us, &c->d.allreduce_gbps};
  *f[k] = v;
  return 1;
}

int fp8_tl_device_load(const char *spec, fp8_tl_device *d, char *err, size_t errlen) {
  if (fp8_tl_device_builtin(spec, d) == FP8_OK) return FP8_OK;
  dev_ctx c = {.path = spec, .err = err, .errlen = errlen};
  fp8_tl_device_builtin("h200", &c.d);
  if (!(c.fp = fopen(spec, "r")))
    return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open: %s (a device model is h100, h200 "
                      "or a file)", spec, strerror(errno));
  int rc = ini_parse_stream(dev_reader, &c, dev_handler, &c);
  int bad = ferror(c.fp);
  fclose(c.fp);
  if (bad) return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot read", spec);
  if (rc > 0 && !c.failed) {
    c.lineno = rc;
    dev_fail(&c, "syntax error: expected key = value, [device] or a comment%s", "");
  }
  if (rc == -2) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (c.failed) return FP8_EINVAL;
  if (!c.in_device) return fp8_errorf(FP8_EINVAL, err, errlen, "%s:1: no [device] section", spec);
  if (c.have_name) snprintf(c.d.name, sizeof c.d.name, "%s", c.name);
  else snprintf(c.d.name, sizeof c.d.name, "%s", "file");
  *d = c.d;
  return FP8_OK;
}

/* ------------------------------------------------------------------ the GPU module */

int fp8_tl_gpu_load(fp8_tl_gpu_fn *fn, int *quiet, char *err, size_t errlen) {
  const fp8_gpu_module *m = NULL;
  int rc = fp8_gpu_module_open(&m, quiet, err, errlen);
  if (rc) return rc;
  *fn = m->timeline_run;
  if (!*fn)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "the GPU module has no timeline (its "
                      "descriptor's timeline_run, fp8_timeline_gpu_run, is not set)");
  return FP8_OK;
}
