/* experiment.c: loads an experiment file (INI, via libinih) into an fp8_experiment
 * (experiment.h): reads it line by line, collects each section's keys and hands the section,
 * once it ends, to its checker: [trace], [output] and [analysis] in experiment_sections.c,
 * [recipe.*] (and the sweep expansion) in experiment_recipe.c; value parsing and the error
 * record are in experiment_values.c, the runner's selection queries in experiment_select.c.
 *
 * libinih splits "key = value" lines; everything around it is done here, in the reader that
 * feeds it one line at a time:
 *   - line numbers: Debian's libinih has no line number in the handler, so the reader counts
 *     lines and the handler, called while inih processes that line, reads the count;
 *   - comments: ';' anywhere, and '#' at the start of a line or after whitespace, start a
 *     comment. inih alone would need whitespace before an inline ';', but the documented
 *     example writes "amax_compute = max, most_recent; default max", so values cannot contain
 *     ';' (they can contain '#': "traces/run#1"). Leading whitespace is removed, so inih never
 *     sees an indented line as a multi-line continuation of the previous value;
 *   - section headers are parsed here, not by inih, which truncates section names to 49
 *     characters: a header ends the previous section, which is validated then (a recipe's
 *     keys can come before its `kind`);
 *   - lines inih would reject are reported here with a precise message (inih's own return
 *     value remains a backstop, "syntax error"); lines longer than inih's 200-byte buffer are
 *     passed to it as "key=x" and the handler takes the value from the full line.
 * Errors are kept by position: the reported one is the first in the file, and "missing"
 * errors (no kind, no path, no section) only count when nothing else went wrong.
 */
#include "experiment_internal.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* ---------------------------------------------------------------- sections and lines */

static void exp_section_end(exp_ctx *c) {
  if (!c->nomem) {
    switch (c->sec) {
    case SEC_TRACE: fp8_exp_trace_end(c); break;
    case SEC_OUTPUT: fp8_exp_output_end(c); break;
    case SEC_ANALYSIS: fp8_exp_analysis_end(c); break;
    case SEC_RECIPE: fp8_exp_recipe_end(c); break;
    default: break;
    }
  }
  for (size_t i = 0; i < c->nents; i++) {
    free(c->ents[i].key);
    free(c->ents[i].value);
  }
  c->nents = 0;
  c->sec = SEC_NONE;
}

/* s: "[...]" with comments and surrounding whitespace removed. */
static void exp_section_begin(exp_ctx *c, char *s) {
  int line = c->lineno;
  exp_section_end(c);
  c->sec = SEC_IGNORED;
  c->sec_line = line;
  c->sec_nfail = c->nfail;
  char *end = strchr(s, ']');
  if (!end) {
    char shown[FP8_ESC_LEN];
    fp8_exp_fail(c, line, "syntax error: section header %s has no closing ]",
                 fp8_esc(s, shown, sizeof shown));
    return;
  }
  *end = '\0';
  const char *name = s + 1;
  const char *rest = end + 1;
  while (isspace((unsigned char)*rest)) rest++;
  if (*rest) {
    char sn[FP8_ESC_LEN], sr[FP8_ESC_LEN];
    fp8_exp_fail(c, line, "syntax error: unexpected text after [%s]: %s",
                 fp8_esc(name, sn, sizeof sn), fp8_esc(rest, sr, sizeof sr));
    return;
  }
  snprintf(c->secname, sizeof c->secname, "%s", name);
  if (strcmp(name, "trace") == 0 || strcmp(name, "output") == 0 || strcmp(name, "analysis") == 0) {
    int *seen = name[0] == 't' ? &c->trace_line : name[0] == 'o' ? &c->output_line : &c->analysis_line;
    if (*seen) {
      fp8_exp_fail(c, line, "section [%s] given twice (first at line %d)", name, *seen);
      return;
    }
    *seen = line;
    c->sec = name[0] == 't' ? SEC_TRACE : name[0] == 'o' ? SEC_OUTPUT : SEC_ANALYSIS;
  } else if (strncmp(name, "recipe.", 7) == 0) {
    const char *label = name + 7;
    size_t n = strlen(label);
    if (n == 0) {
      fp8_exp_fail(c, line, "empty recipe label in [%s] (expected [recipe.<label>])", name);
      return;
    }
    char sl[FP8_ESC_LEN];
    if (n > EXP_LABEL_MAX) {
      fp8_exp_fail(c, line, "recipe label %s too long (%zu characters, at most %d)",
                   fp8_esc(label, sl, sizeof sl), n, EXP_LABEL_MAX);
      return;
    }
    for (const char *p = label; *p; p++)
      if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.' && *p != '-') {
        char sc[16];
        fp8_exp_fail(c, line, "bad character '%s' in recipe label %s (allowed: A-Z a-z 0-9 _ . -)",
                     fp8_escape(p, 1, sc, sizeof sc), fp8_esc(label, sl, sizeof sl));
        return;
      }
    for (size_t i = 0; i < c->nlabels; i++)
      if (strcmp(c->labels[i].label, label) == 0) {
        fp8_exp_fail(c, line, "section [%s] given twice (first at line %d)", name,
                     c->labels[i].line);
        return;
      }
    exp_label *l = fp8_grow(c->labels, c->nlabels, &c->caplabels, sizeof *l, 8);
    if (!l) {
      c->nomem = 1;
      return;
    }
    c->labels = l;
    snprintf(c->labels[c->nlabels].label, sizeof c->labels[c->nlabels].label, "%s", label);
    c->labels[c->nlabels++].line = line;
    c->sec = SEC_RECIPE;
  } else {
    char shown[FP8_ESC_LEN];
    fp8_exp_fail(c, line,
                 "unknown section [%s] (expected [trace], [recipe.<label>], [analysis] or "
                 "[output])",
                 fp8_esc(name, shown, sizeof shown));
  }
}

/* A line is text: well-formed UTF-8 without control characters but tab, ending in "\n",
 * "\r\n" or (the last line) nothing. A NUL would silently end the value for inih and the
 * string functions here (`history_len = 1\0, 4` read as 1), a CR, escape or other control
 * byte would reach messages and run.json: each is an error at its line and column (bytes,
 * from 1), and the line is not parsed. Comments too: the file is text. */
static int exp_line_is_text(exp_ctx *c, const char *line, size_t n) {
  const unsigned char *p = (const unsigned char *)line;
  if (n && p[n - 1] == '\n') n--;
  if (n && p[n - 1] == '\r') n--;
  for (size_t i = 0; i < n;) {
    unsigned cp;
    size_t k = fp8_utf8_decode(p + i, n - i, &cp);
    char shown[16];
    if (!k) {
      fp8_exp_fail(c, c->lineno, "byte %s at column %zu is not UTF-8",
                   fp8_escape(line + i, 1, shown, sizeof shown), i + 1);
      return 0;
    }
    if (cp == 0) {
      fp8_exp_fail(c, c->lineno, "NUL byte at column %zu (a text file has none)", i + 1);
      return 0;
    }
    if (fp8_is_control(cp) && cp != '\t') {
      fp8_exp_fail(c, c->lineno, "control character %s at column %zu (only tab is allowed)",
                   fp8_escape(line + i, k, shown, sizeof shown), i + 1);
      return 0;
    }
    i += k;
  }
  return 1;
}

/* The ini_reader: one physical line per call, cleaned (see the top of the file). */
static char *exp_reader(char *str, int num, void *stream) {
  exp_ctx *c = stream;
  c->long_value = NULL;
  if (c->nomem || num < 8) return NULL;
  errno = 0;
  ssize_t got = getline(&c->buf, &c->cap, c->fp);
  if (got < 0) {
    if (ferror(c->fp)) c->read_errno = errno ? errno : EIO;
    return NULL;
  }
  c->lineno++;
  str[0] = '\0';
  if (!exp_line_is_text(c, c->buf, (size_t)got)) return str; /* not handed to inih */
  char *s = c->buf;
  if (c->lineno == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
      (unsigned char)s[2] == 0xBF)
    s += 3; /* UTF-8 BOM */
  for (char *p = s; *p; p++)
    if (*p == ';' || (*p == '#' && (p == s || isspace((unsigned char)p[-1])))) {
      *p = '\0';
      break;
    }
  s = fp8_exp_trim(s);
  if (*s == '\0') return str;
  if (*s == '[') {
    exp_section_begin(c, s);
    return str;
  }
  char *split = strpbrk(s, "=:");
  if (!split) {
    char shown[FP8_ESC_LEN];
    fp8_exp_fail(c, c->lineno,
                 "syntax error: expected key = value, [section] or a comment, found %s",
                 fp8_esc(s, shown, sizeof shown));
    return str;
  }
  size_t n = strlen(s);
  if (n < (size_t)num) {
    memcpy(str, s, n + 1);
    return str;
  }
  /* Too long for inih's buffer: hand it the key only, keep the value here. */
  size_t nk = (size_t)(split - s);
  if (nk + 3 > (size_t)num) {
    fp8_exp_fail(c, c->lineno, "key name longer than %d characters", num - 3);
    return str;
  }
  memcpy(str, s, nk);
  memcpy(str + nk, "=x", 3);
  char *v = split + 1;
  while (isspace((unsigned char)*v)) v++;
  c->long_value = v;
  return str;
}

/* The ini_handler: records the key in the current section (validated at section end). */
static int exp_handler(void *user, const char *section, const char *name, const char *value) {
  (void)section; /* ours, from the reader: inih truncates long section names */
  exp_ctx *c = user;
  int line = c->lineno;
  if (c->long_value) value = c->long_value;
  if (c->nomem || c->sec == SEC_IGNORED) return 1;
  /* a key or section name may hold a tab or a backslash (the line check lets them through):
   * escaped, as every input byte in a message is */
  char key[FP8_ESC_LEN], sec[FP8_ESC_LEN];
  fp8_esc(name, key, sizeof key);
  if (c->sec == SEC_NONE) {
    fp8_exp_fail(c, line,
                 "key %s outside any section (expected [trace], [recipe.<label>] or [output] "
                 "first)",
                 key);
    return 1;
  }
  fp8_esc(c->secname, sec, sizeof sec);
  for (size_t i = 0; i < c->nents; i++)
    if (strcmp(c->ents[i].key, name) == 0) {
      fp8_exp_fail(c, line, "key %s given twice in [%s] (first at line %d)", key, sec,
                   c->ents[i].line);
      return 1;
    }
  if (!*value) {
    fp8_exp_fail(c, line, "empty value for %s in [%s]", key, sec);
    return 1;
  }
  exp_entry *ents = fp8_grow(c->ents, c->nents, &c->capents, sizeof *ents, 8);
  if (!ents) {
    c->nomem = 1;
    return 1;
  }
  c->ents = ents;
  exp_entry *e = &c->ents[c->nents];
  e->key = strdup(name);
  e->value = strdup(value);
  e->line = line;
  if (!e->key || !e->value) {
    free(e->key);
    free(e->value);
    c->nomem = 1;
    return 1;
  }
  c->nents++;
  return 1;
}

/* ---------------------------------------------------------------- public */

/* base_dir and name from the file path as given. */
static int exp_names(fp8_experiment *ex) {
  const char *path = ex->file;
  const char *slash = strrchr(path, '/');
  if (!slash) {
    ex->base_dir = strdup(".");
  } else {
    size_t n = (size_t)(slash - path);
    while (n > 1 && path[n - 1] == '/') n--; /* "a//q.ini" -> "a" */
    if (n == 0) n = 1;                        /* "/q.ini" -> "/" */
    ex->base_dir = strndup(path, n);
  }
  const char *base = slash ? slash + 1 : path;
  size_t nb = strlen(base);
  if (nb > 4 && strcmp(base + nb - 4, ".ini") == 0) nb -= 4;
  ex->name = strndup(base, nb);
  return ex->base_dir && ex->name ? FP8_OK : FP8_ENOMEM;
}

int fp8_experiment_load(const char *path, fp8_experiment *ex, char *err, size_t errlen) {
  exp_ctx c;
  int status = FP8_OK;
  memset(&c, 0, sizeof c);
  if (err && errlen) err[0] = '\0';
  if (!ex) return FP8_EINVAL;
  memset(ex, 0, sizeof *ex);
  if (!path || !*path) return fp8_errorf(FP8_EINVAL, err, errlen, "experiment file path is empty");
  c.ex = ex;
  ex->synth_steps = 200;
  ex->synth_seed = 1;
  ex->overflow_budget = 1e-5;
  ex->step_budget = 0.01;
  ex->flush_budget = NAN;
  ex->fp4_gemm_ratio = 4.0;
  ex->warmup_steps = -1;
  ex->gemm = 1;
  ex->gemm_max_tokens = 1024;
  ex->gemm_sampled = 1;
  ex->gemm_sample = 64;
  ex->step_stride = 1;
  ex->warm_history = 1;
  ex->file = strdup(path);
  if (!ex->file || exp_names(ex) != FP8_OK) {
    status = FP8_ENOMEM;
    goto done;
  }
  c.fp = fopen(path, "r");
  if (!c.fp) {
    status = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open: %s", path, strerror(errno));
    goto done;
  }
  int rc = ini_parse_stream(exp_reader, &c, exp_handler, &c);
  if (c.nomem || rc == -2) {
    status = FP8_ENOMEM;
    goto done;
  }
  if (c.read_errno) {
    status = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot read: %s", path,
                        strerror(c.read_errno));
    goto done;
  }
  exp_section_end(&c);
  if (!c.nomem) fp8_exp_labels_end(&c);
  if (c.nomem) {
    status = FP8_ENOMEM;
    goto done;
  }
  /* The reader reports every line inih rejects; its count is a backstop. */
  if (rc > 0 && (!c.has_err || rc < c.err_line)) {
    c.has_err = 1;
    c.err_line = rc;
    snprintf(c.err_msg, sizeof c.err_msg, "syntax error");
  }
  if (!c.has_err && !c.trace_line) fp8_exp_fail(&c, 0, "no [trace] section");
  if (!c.has_err && c.nlabels == 0) fp8_exp_fail(&c, 0, "no [recipe.<label>] section");
  /* line 0: a whole-file error (a missing section), reported without a line no line has */
  if (c.has_err && c.err_line)
    status = fp8_errorf(FP8_EINVAL, err, errlen, "%s:%d: %s", path, c.err_line, c.err_msg);
  else if (c.has_err)
    status = fp8_errorf(FP8_EINVAL, err, errlen, "%s: %s", path, c.err_msg);
done:
  if (status == FP8_ENOMEM) fp8_errorf(status, err, errlen, "%s: out of memory", path);
  if (c.fp) fclose(c.fp);
  for (size_t i = 0; i < c.nents; i++) {
    free(c.ents[i].key);
    free(c.ents[i].value);
  }
  free(c.ents);
  free(c.labels);
  free(c.buf);
  if (status != FP8_OK) fp8_experiment_free(ex);
  return status;
}

void fp8_experiment_free(fp8_experiment *ex) {
  if (!ex) return;
  free(ex->file);
  free(ex->base_dir);
  free(ex->name);
  free(ex->trace_path);
  free(ex->synth_preset);
  if (ex->tensor_globs)
    for (size_t i = 0; i < ex->ntensor_globs; i++) free(ex->tensor_globs[i]);
  free(ex->tensor_globs);
  free(ex->out_dir);
  free(ex->configs);
  free(ex->format_lines);
  for (size_t i = 0; i < ex->nsections; i++) {
    for (size_t j = 0; j < ex->sections[i].nglobs; j++) free(ex->sections[i].globs[j]);
    free(ex->sections[i].globs);
  }
  free(ex->sections);
  free(ex->config_section);
  memset(ex, 0, sizeof *ex);
}
