/* run_folder.c: see run_folder.h. */
#include "run_folder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp8.h"
#include "outfile.h"
#include "outputs.h"
#include "run_json.h" /* fp8_run_json_read_name */
#include "trace.h" /* fp8_trace_snapshot_name */
#include "util.h"

/* ------------------------------------------------------------------ the lock */

int fp8_rundir_lock(const char *dir, int *fd, char *err, size_t errlen) {
  *fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (*fd < 0)
    return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open the output directory: %s", dir,
                      strerror(errno));
  if (flock(*fd, LOCK_EX | LOCK_NB) == 0) return FP8_OK;
  int e = errno;
  if (e != EWOULDBLOCK) { /* no locks on this file system: the pids have to tell */
    close(*fd);
    *fd = -1;
    return FP8_OK;
  }
  close(*fd);
  *fd = -1;
  fp8_run_marker m;
  if (fp8_rundir_marker_read(dir, &m) && m.pid > 0)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: another fp8lab process (pid %ld) is writing it",
                      dir, m.pid);
  return fp8_errorf(FP8_EINVAL, err, errlen, "%s: another fp8lab process is writing it", dir);
}

void fp8_rundir_unlock(int fd) {
  if (fd >= 0) close(fd); /* closing the last descriptor releases the flock */
}

/* ------------------------------------------------------------------ the marker */

/* src into dst[len], cut to fit. */
static void copy_cut(char *dst, size_t len, const char *src) {
  size_t n = strlen(src);
  if (n >= len) n = len - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

int fp8_rundir_marker_read(const char *dir, fp8_run_marker *m) {
  char path[4096 + 64], line[4200];
  memset(m, 0, sizeof *m);
  snprintf(path, sizeof path, "%s/%s", dir, FP8_RUN_MARKER);
  FILE *fp = fopen(path, "rb");
  if (!fp) return 0;
  while (fgets(line, sizeof line, fp)) {
    line[strcspn(line, "\n")] = '\0';
    if (strncmp(line, "pid ", 4) == 0) m->pid = strtol(line + 4, NULL, 10);
    else if (strncmp(line, "phase ", 6) == 0) copy_cut(m->phase, sizeof m->phase, line + 6);
    else if (strncmp(line, "experiment ", 11) == 0)
      copy_cut(m->experiment, sizeof m->experiment, line + 11);
  }
  fclose(fp);
  return 1;
}

int fp8_rundir_marker_write(const char *dir, const char *phase, const char *experiment, char *err,
                            size_t errlen) {
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, dir, FP8_RUN_MARKER, err, errlen);
  if (rc) return rc;
  /* the experiment's path on one line: a newline in it would end the field early (harmless:
   * the marker's presence is what counts, the path only helps the message) */
  fprintf(of.fp, "fp8lab run in progress: this folder may mix two runs until it is gone\n"
                 "pid %ld\nphase %s\nexperiment ", (long)getpid(), phase);
  for (const char *s = experiment; *s; s++) fputc(*s == '\n' || *s == '\r' ? '?' : *s, of.fp);
  fputc('\n', of.fp);
  return fp8_outfile_commit(&of, err, errlen);
}

void fp8_rundir_marker_remove(const char *dir) {
  char path[4096 + 64];
  snprintf(path, sizeof path, "%s/%s", dir, FP8_RUN_MARKER);
  unlink(path);
}

int fp8_rundir_interrupted_error(const char *dir, const fp8_run_marker *m, char *err,
                                 size_t errlen) {
  const char *exp = *m->experiment ? m->experiment : "EXP.ini";
  char shown[200];
  size_t k = 0; /* the path as given, printable bytes only: the message stays one line */
  for (const char *s = exp; *s && k + 1 < sizeof shown; s++)
    shown[k++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
  shown[k] = '\0';
  return fp8_errorf(FP8_EINVAL, err, errlen,
                    "%s: an fp8lab run of %s was interrupted here (during its %s): its files may "
                    "mix two runs; continue it with `fp8lab run %s --resume` or start over with "
                    "--force", dir, shown, strcmp(m->phase, "report") == 0 ? "report" : "replay",
                    shown);
}

/* ------------------------------------------------------------------ temporaries */

/* The pid of `<prefix><inner><suffix><digits>`: > 0 when name has that shape, inner copied out
 * (the part between the first '.' and the last ".tmp." / ".old."). */
static long temp_pid(const char *name, const char *tag, char *inner, size_t len) {
  if (name[0] != '.') return 0;
  const char *t = NULL;
  for (const char *p = strstr(name + 1, tag); p; p = strstr(p + 1, tag)) t = p;
  if (!t || t == name + 1) return 0;
  const char *d = t + strlen(tag);
  if (!*d || strspn(d, "0123456789") != strlen(d) || strlen(d) > 9 || *d == '0') return 0;
  size_t n = (size_t)(t - (name + 1));
  if (n >= len) return 0;
  memcpy(inner, name + 1, n);
  inner[n] = '\0';
  return strtol(d, NULL, 10);
}

/* A zombie (a killed report's plot worker that no init process has reaped yet, as in a
 * container whose pid 1 does not reap) answers kill(pid, 0) but writes nothing more: dead. */
static int pid_zombie(long pid) {
#ifdef __linux__
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *rp = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
  return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
#else
  (void)pid;
  return 0;
#endif
}

static int pid_alive(long pid) {
  if (pid == (long)getpid()) return 1; /* never this process's own */
  return (kill((pid_t)pid, 0) == 0 || errno == EPERM) && !pid_zombie(pid);
}

/* Is `inner` a name whose temporary fp8lab writes in the folder `where` ("": the run folder)? */
static int temp_of_fp8lab(const char *where, const char *inner, int is_dir) {
  char full[600];
  if (is_dir) /* the synth trace's swap folders (and those of earlier versions, "trace") */
    return *where == '\0' && (strcmp(inner, FP8_SYNTH_TRACE_DIR) == 0 || strcmp(inner, "trace") == 0);
  if (strcmp(where, FP8_RUN_CHECKPOINT_DIR) == 0) return strcmp(inner, "state") == 0;
  if (*where == '\0' && strcmp(inner, FP8_RUN_MARKER) == 0) return 1;
  if (snprintf(full, sizeof full, "%s%s%s", where, *where ? "/" : "", inner) >= (int)sizeof full)
    return 0;
  return fp8_output_name_ok(full);
}


/* 1 when n is prefix followed by a pid (digits only): a synth temporary */
static int synth_tmp(const char *n, const char *prefix) {
  size_t k = strlen(prefix);
  return strncmp(n, prefix, k) == 0 && n[k] && strspn(n + k, "0123456789") == strlen(n + k);
}

static size_t remove_temps_in(const char *dir, const char *where) {
  char path[4096 + 600], inner[512];
  snprintf(path, sizeof path, "%s%s%s", dir, *where ? "/" : "", where);
  DIR *d = opendir(path);
  if (!d) return 0;
  size_t removed = 0;
  struct stat sb;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    long pid = temp_pid(e->d_name, ".tmp.", inner, sizeof inner);
    int old = 0;
    if (pid <= 0 && *where == '\0') { /* .synth_trace.old.<pid>/: the trace a run replaces */
      pid = temp_pid(e->d_name, ".old.", inner, sizeof inner);
      old = 1;
    }
    if (pid <= 0) continue;
    if (snprintf(path, sizeof path, "%s%s%s/%s", dir, *where ? "/" : "", where, e->d_name) >=
            (int)sizeof path ||
        lstat(path, &sb) != 0)
      continue;
    int is_dir = S_ISDIR(sb.st_mode);
    if ((old && !is_dir) || !temp_of_fp8lab(where, inner, is_dir) || pid_alive(pid)) continue;
    if (is_dir) fp8_rmtree(path);
    else if (unlink(path) != 0) continue;
    removed++;
  }
  closedir(d);
  return removed;
}

size_t fp8_rundir_remove_debris(const char *dir) {
  static const char *const where[] = {"", "plots", "notebooks_export", FP8_RUN_CHECKPOINT_DIR};
  size_t n = 0;
  char path[4096 + 64];
  for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
    size_t k = remove_temps_in(dir, where[i]);
    n += k;
    /* plots/ or notebooks_export/ that held only a killed report's temporaries goes too
     * (rmdir: only when nothing else is in it) */
    if (k && (i == 1 || i == 2)) {
      snprintf(path, sizeof path, "%s/%s", dir, where[i]);
      rmdir(path);
    }
  }
  return n;
}

/* ------------------------------------------------------------------ the synth trace */

int fp8_rundir_synth_owned(const char *path, char *err, size_t errlen) {
  DIR *d = opendir(path);
  if (!d) {
    struct stat sb;
    if (lstat(path, &sb) == 0) /* a file or a link where the folder goes: not fp8lab's */
      return fp8_errorf(FP8_EINVAL, err, errlen, "%s: is not a folder fp8lab wrote: move it away, "
                        "or choose another output directory", path);
    return FP8_OK;
  }
  int rc = FP8_OK;
  char sub[4096 + 300];
  struct stat sb;
  for (struct dirent *e; rc == FP8_OK && (e = readdir(d)) != NULL;) {
    const char *n = e->d_name;
    if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0) continue;
    snprintf(sub, sizeof sub, "%s/%s", path, n);
    int file = lstat(sub, &sb) == 0 && S_ISREG(sb.st_mode);
    /* what fp8_synth_write writes: step_<N>.safetensors files, amax.csv, tokens.csv (the
     * "moe" preset) and their temporaries */
    int ours = file && (fp8_trace_snapshot_name(n) == 1 || strcmp(n, "amax.csv") == 0 ||
                        strcmp(n, "tokens.csv") == 0 || synth_tmp(n, "amax.csv.tmp.") ||
                        synth_tmp(n, "tokens.csv.tmp."));
    if (!ours) {
      char shown[120];
      size_t k = 0;
      for (const char *s = n; *s && k + 1 < sizeof shown; s++)
        shown[k++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
      shown[k] = '\0';
      rc = fp8_errorf(FP8_EINVAL, err, errlen,
                      "%s: holds %s, which fp8lab did not write: it replaces only a synth trace "
                      "of its own there (move your files away)", path, shown);
    }
  }
  closedir(d);
  return rc;
}

int fp8_rundir_nonempty(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int found = 0;
  for (struct dirent *e; !found && (e = readdir(d)) != NULL;)
    found = strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            strcmp(e->d_name, FP8_RUN_CHECKPOINT_DIR);
  closedir(d);
  return found;
}

int fp8_rundir_has_results(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  char path[4096 + 300];
  int found = 0;
  for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
    const char *n = e->d_name;
    if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, FP8_RUN_MARKER) == 0 ||
        strcmp(n, FP8_RUN_CHECKPOINT_DIR) == 0)
      continue;
    if (strcmp(n, FP8_SYNTH_TRACE_DIR) == 0) {
      snprintf(path, sizeof path, "%s/%s", dir, n);
      if (fp8_rundir_synth_owned(path, NULL, 0) == FP8_OK) continue;
    }
    found = 1;
  }
  closedir(d);
  return found;
}

void fp8_rundir_remove_interrupted(const char *dir, int synth) {
  char path[4096 + 64];
  snprintf(path, sizeof path, "%s/%s", dir, FP8_RUN_CHECKPOINT_DIR);
  fp8_rmtree(path);
  snprintf(path, sizeof path, "%s/%s", dir, FP8_SYNTH_TRACE_DIR);
  if (synth && fp8_rundir_synth_owned(path, NULL, 0) == FP8_OK) fp8_rmtree(path);
  fp8_rundir_marker_remove(dir); /* last: until it is gone the folder says it is unfinished */
}

/* ------------------------------------------------------------------ the folder held */

int fp8_run_folder_open_report(const char *dir, fp8_run_folder *f, char *err, size_t errlen) {
  snprintf(f->dir, sizeof f->dir, "%s", dir);
  f->lock_fd = -1;
  f->run_pending = 0;
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return FP8_OK; /* the report says what */
  int rc = fp8_rundir_lock(dir, &f->lock_fd, err, errlen);
  if (rc == FP8_EIO) { /* a folder it cannot open for the lock: the report's reads will tell */
    f->lock_fd = -1;
    return FP8_OK;
  }
  if (rc) return rc;
  fp8_run_marker m;
  if (fp8_rundir_marker_read(dir, &m)) {
    fp8_rundir_unlock(f->lock_fd);
    f->lock_fd = -1;
    return fp8_rundir_interrupted_error(dir, &m, err, errlen);
  }
  fp8_rundir_remove_debris(dir); /* the temporaries of a report that was killed */
  return FP8_OK;
}

void fp8_run_folder_close(fp8_run_folder *f, int complete) {
  if (complete && f->run_pending) {
    char ck[sizeof f->dir + 64];
    snprintf(ck, sizeof ck, "%s/%s", f->dir, FP8_RUN_CHECKPOINT_DIR);
    fp8_rmtree(ck);
    fp8_rundir_marker_remove(f->dir); /* last: until it goes the folder is unfinished */
  }
  fp8_rundir_unlock(f->lock_fd);
  f->lock_fd = -1;
  f->run_pending = 0;
}

/* ------------------------------------------------------------------ an interrupted report */

/* 1 when the file at path begins with prefix (its first bytes read: a plot's tEXt chunks come
 * right after its IHDR, advice.ini's header is its first line). */
static int file_has(const char *path, const void *sig, size_t n, size_t within) {
  unsigned char head[256];
  FILE *fp = fopen(path, "rb");
  if (!fp) return 0;
  size_t got = fread(head, 1, within < sizeof head ? within : sizeof head, fp);
  fclose(fp);
  for (size_t i = 0; i + n <= got; i++)
    if (memcmp(head + i, sig, n) == 0) return 1;
  return 0;
}

int fp8_rundir_add_report_leftovers(const char *dir, fp8_outputs *o) {
  char path[4096 + 600], name[600];
  int rc = FP8_OK;
  /* plots/ PNGs that fp8lab drew: PNG, IHDR, then the tEXt chunk "fp8lab-version" (png_io.c) */
  static const char png_sig[] = "tEXtfp8lab-version";
  snprintf(path, sizeof path, "%s/plots", dir);
  DIR *d = opendir(path);
  for (struct dirent *e; d && rc == FP8_OK && (e = readdir(d)) != NULL;) {
    if (snprintf(name, sizeof name, "plots/%s", e->d_name) >= (int)sizeof name ||
        !fp8_output_name_ok(name))
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (file_has(path, png_sig, sizeof png_sig - 1, 64)) rc = fp8_outputs_add(o, name);
  }
  if (d) closedir(d);
  /* advice.ini as the report writes it (report_answer.c's first line) */
  static const char advice_sig[] = "; advice.ini: the report's answer as one experiment";
  snprintf(path, sizeof path, "%s/advice.ini", dir);
  if (!rc && file_has(path, advice_sig, sizeof advice_sig - 1, sizeof advice_sig - 1))
    rc = fp8_outputs_add(o, "advice.ini");
  /* te_recipe.py as the report writes it (report_te_code.c's first line) */
  static const char te_sig[] = "# te_recipe.py: the advice of fp8lab's report";
  snprintf(path, sizeof path, "%s/te_recipe.py", dir);
  if (!rc && file_has(path, te_sig, sizeof te_sig - 1, sizeof te_sig - 1))
    rc = fp8_outputs_add(o, "te_recipe.py");
  /* the framework files as the report writes them (report_frameworks.c's first lines) */
  static const char *const fw[3][2] = {
      {"megatron_args.txt", "# megatron_args.txt: the advice of fp8lab's report"},
      {"megatron_precision.yaml", "# megatron_precision.yaml: the modules of fp8lab's advice"},
      {"torchao_config.py", "# torchao_config.py: the advice of fp8lab's report"}};
  for (int i = 0; i < 3 && !rc; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, fw[i][0]);
    if (file_has(path, fw[i][1], strlen(fw[i][1]), strlen(fw[i][1])))
      rc = fp8_outputs_add(o, fw[i][0]);
  }
  /* advice_fp4.ini as the report writes it (report_fp4.c's first line) */
  static const char fp4_sig[] = "; advice_fp4.ini: the report's FP4 answer as one experiment";
  snprintf(path, sizeof path, "%s/advice_fp4.ini", dir);
  if (!rc && file_has(path, fp4_sig, sizeof fp4_sig - 1, sizeof fp4_sig - 1))
    rc = fp8_outputs_add(o, "advice_fp4.ini");
  /* the BF16 demotion plans' files as the report writes them (their first bytes) */
  for (size_t i = 0; i < FP8_PLAN_OUTPUTS && !rc; i++) {
    const fp8_plan_output *po = &fp8_plan_outputs[i];
    snprintf(path, sizeof path, "%s/%s", dir, po->name);
    if (file_has(path, po->sig, strlen(po->sig), strlen(po->sig)))
      rc = fp8_outputs_add(o, po->name);
  }
  /* the notebook of the run's experiment (run.json, written at the run's commit) */
  char exp[4096];
  if (!rc && fp8_run_json_read_name(dir, exp, sizeof exp) &&
      snprintf(name, sizeof name, "notebooks_export/%s.ipynb", exp) < (int)sizeof name &&
      fp8_output_name_ok(name))
    rc = fp8_outputs_add(o, name);
  return rc;
}
