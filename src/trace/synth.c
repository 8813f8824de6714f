/* synth.c: synthetic training traces (fp8_synth_write), so that the demo and the tests need no
 * downloads. It writes the same layout a capture hook writes (trace.h): step_<N>.safetensors
 * snapshots plus amax.csv, for a small transformer-like stack, with the behaviours that make
 * FP8 scaling recipes differ.
 *
 * This file writes the files; the data model and the presets, which decide what is in them,
 * are in synth_model.c (synth_internal.h).
 *
 * Layout. Snapshots at every step that is a multiple of fp8_synth_snapshot_interval(steps) =
 * max(1, round(steps / 20)) (about 20 snapshots; every 10 steps for 200 steps), step 0
 * included. amax.csv (`step,tensor,amax`, amax as "%.9g") has one row for every step
 * 0..steps-1 and every tensor, in name order; a module that did not run at a step has amax 0
 * there and is left out of that step's snapshot.
 */
#include "synth_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "trace.h"
#include "outfile.h" /* fp8_write_errno_status */
#include "util.h"    /* fp8_errorf */
#include "synth.h"

#define SYN_MAX_STEPS 1000000

/* ------------------------------------------------------------------ files */

/* mkdir -p. */
static int make_dirs(const char *dir, char *err, size_t errlen) {
  int rc = FP8_OK;
  char *p = strdup(dir);
  if (!p) return FP8_ENOMEM;
  size_t len = strlen(p);
  while (len > 1 && p[len - 1] == '/') p[--len] = '\0';
  for (char *s = p + 1; ; s++) {
    int last = *s == '\0';
    if (*s == '/' || last) {
      char c = *s;
      *s = '\0';
      if (mkdir(p, 0777) != 0 && errno != EEXIST) {
        rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot create directory: %s", p,
                        strerror(errno));
        goto done;
      }
      *s = c;
      if (last) break;
    }
  }
  struct stat sb;
  if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    rc = fp8_errorf(FP8_EIO, err, errlen, "%s: not a directory", p);
    goto done;
  }
done:
  free(p);
  return rc;
}

/* The trace files of dir (step_<N>.safetensors files, step_<N>/ folders, amax.csv,
 * tokens.csv): counted into *nsnaps and *csv (bit 1: amax.csv, bit 2: tokens.csv), and with
 * remove removed (FP8_EIO naming one that would not go). A missing dir has none. */
static int scan_trace(const char *dir, int remove, size_t *nsnaps, int *csv, char *err,
                      size_t errlen) {
  *nsnaps = 0;
  *csv = 0;
  DIR *d = opendir(dir);
  if (!d) return FP8_OK;
  int rc = FP8_OK;
  char path[4096 + 256];
  struct stat sb;
  for (struct dirent *e; rc == FP8_OK && (e = readdir(d)) != NULL;) {
    int kind = fp8_trace_snapshot_name(e->d_name),
        is_csv = strcmp(e->d_name, "amax.csv") == 0 ? 1 : strcmp(e->d_name, "tokens.csv") == 0 ? 2 : 0;
    if (!kind && !is_csv) continue;
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
        lstat(path, &sb) != 0)
      continue;
    if (is_csv ? S_ISDIR(sb.st_mode) : kind == 1 ? !S_ISREG(sb.st_mode) : !S_ISDIR(sb.st_mode))
      continue; /* a name of the trace's, but not what the trace reader would take */
    if (is_csv) *csv |= is_csv;
    else (*nsnaps)++;
    if (!remove) continue;
    if (S_ISDIR(sb.st_mode)) fp8_rmtree(path);
    else unlink(path);
    if (lstat(path, &sb) == 0)
      rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot remove the old trace's file", path);
  }
  closedir(d);
  return rc;
}

int fp8_synth_remove_trace(const char *dir, char *err, size_t errlen) {
  size_t n;
  int csv;
  return scan_trace(dir, 1, &n, &csv, err, errlen);
}

static int write_snapshot(syn_state *st, const char *dir, int64_t step, const char *preset,
                          uint64_t seed, char *err, size_t errlen) {
  fp8_tensor_out out[SYN_NTENSORS];
  size_t n = 0;
  for (int k = 0; k < SYN_NTENSORS; k++) {
    syn_tensor *t = st->order[k];
    if (t->present)
      fp8_synth_tensor_out(&out[n++], t->name, t->dtype, t->rows, t->cols, t->val, t->packed);
  }
  return fp8_synth_snapshot_write(dir, step, st->steps, preset, seed, out, n, err, errlen);
}

int fp8_synth_write(const char *preset, const char *dir, int64_t steps, uint64_t seed,
                    char *err, size_t errlen) {
  int rc = FP8_OK;
  syn_state *st = NULL;
  FILE *csv = NULL;
  char *csv_path = NULL, *tmp_path = NULL;
  if (err && errlen) err[0] = '\0';

  if (!preset || !dir || !*dir)
    return fp8_errorf(FP8_EINVAL, err, errlen, "synth: NULL or empty preset or directory");
  syn_preset pr = PRESET_LLM;
  int moe = strcmp(preset, "moe") == 0;
  if (moe) {
  } else if (strcmp(preset, "llm") == 0) pr = PRESET_LLM;
  else if (strcmp(preset, "spiky") == 0) pr = PRESET_SPIKY;
  else if (strcmp(preset, "underflow") == 0) pr = PRESET_UNDERFLOW;
  else
    return fp8_errorf(FP8_EINVAL, err, errlen,
                      "unknown synth preset '%s' (llm, spiky, underflow, moe)", preset);
  if (steps < 1 || steps > SYN_MAX_STEPS)
    return fp8_errorf(FP8_EINVAL, err, errlen, "synth steps %lld out of range (1 to %d)",
                      (long long)steps, SYN_MAX_STEPS);

  size_t nsnaps;
  int csv_there;
  if ((rc = scan_trace(dir, 0, &nsnaps, &csv_there, err, errlen)) != FP8_OK) goto done;
  if (nsnaps || csv_there) {
    /* "3 snapshots", "amax.csv", "tokens.csv": the ones there, joined by ", " and " and " */
    char parts[3][48], what[160] = "";
    int np = 0;
    if (nsnaps) snprintf(parts[np++], sizeof parts[0], "%zu snapshot%s", nsnaps, nsnaps == 1 ? "" : "s");
    if (csv_there & 1) snprintf(parts[np++], sizeof parts[0], "amax.csv");
    if (csv_there & 2) snprintf(parts[np++], sizeof parts[0], "tokens.csv");
    for (int k = 0; k < np; k++) {
      size_t at = strlen(what);
      snprintf(what + at, sizeof what - at, "%s%s", k == 0 ? "" : k == np - 1 ? " and " : ", ",
               parts[k]);
    }
    return fp8_errorf(FP8_EINVAL, err, errlen,
                      "%s: already holds a trace (%s): a new one would mix with it (use --force to "
                      "replace its files)",
                      dir, what);
  }
  rc = make_dirs(dir, err, errlen);
  if (rc != FP8_OK) goto done;
  if (moe) return fp8_synth_moe_write(dir, steps, seed, err, errlen);

  size_t pl = strlen(dir) + 32;
  csv_path = malloc(pl);
  tmp_path = malloc(pl);
  st = malloc(sizeof *st);
  if (!csv_path || !tmp_path || !st) {
    rc = FP8_ENOMEM;
    goto done;
  }
  snprintf(csv_path, pl, "%s/amax.csv", dir);
  snprintf(tmp_path, pl, "%s/amax.csv.tmp.%ld", dir, (long)getpid());
  rc = fp8_synth_state_init(st, pr, steps, seed);
  if (rc != FP8_OK) {
    fp8_errorf(rc, err, errlen, "synth: out of memory");
    goto done;
  }

  csv = fopen(tmp_path, "w");
  if (!csv) {
    rc = fp8_errorf(fp8_write_errno_status(errno), err, errlen, "%s: cannot create: %s", tmp_path,
                    strerror(errno));
    goto done;
  }
  if (fputs("step,tensor,amax\n", csv) == EOF) goto write_error;

  int64_t every = fp8_synth_snapshot_interval(steps);
  for (int64_t s = 0; s < steps; s++) {
    fp8_synth_gen_step(st, s);
    for (int k = 0; k < SYN_NTENSORS; k++) {
      const syn_tensor *t = st->order[k];
      if (fprintf(csv, "%lld,%s,%.9g\n", (long long)s, t->name, (double)t->amax) < 0)
        goto write_error;
    }
    if (s % every == 0) {
      rc = write_snapshot(st, dir, s, preset, seed, err, errlen);
      if (rc != FP8_OK) goto done;
    }
  }
  int close_rc = fclose(csv);
  csv = NULL;
  if (close_rc != 0) goto write_error;
  if (rename(tmp_path, csv_path) != 0) {
    rc = fp8_errorf(fp8_write_errno_status(errno), err, errlen, "%s: cannot rename to %s: %s",
                    tmp_path, csv_path, strerror(errno));
    goto done;
  }
  goto done;

write_error:
  rc = fp8_errorf(FP8_EWRITE, err, errlen, "%s: write failed: %s", tmp_path, strerror(errno));
done:
  if (csv) fclose(csv);
  if (rc != FP8_OK && tmp_path) unlink(tmp_path); /* ENOENT when never created: harmless */
  if (st) {
    fp8_synth_state_free(st);
    free(st);
  }
  free(csv_path);
  free(tmp_path);
  return rc;
}
