/* te_log_dir.c: the trace folder that `fp8lab import-te` owns (te_log_internal.h, te_dir_*;
 * docs/capture.md, "What --force may replace"). The import is written into a fresh folder
 * beside the target, <parent>/.<base>.fp8lab-import.<pid>, and moved in at the end: rename()
 * onto a target that is absent or empty, an atomic swap (renameat2 RENAME_EXCHANGE) with an
 * earlier import's folder, which --force alone may replace and which is then removed. A
 * failure, or a kill, at any point leaves the target as it was or wholly the new import; what
 * a killed import leaves beside it (its two folder names, a pid that is gone) the next import
 * removes. src/run/run_folder.c's fp8_rundir_synth_owned is the model of the ownership walk
 * (src/trace may not use src/run: this is the trace's own). */
#define _GNU_SOURCE /* renameat2 and RENAME_EXCHANGE (glibc >= 2.28) */
#include "te_log_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <jansson.h>

#include "fp8.h"
#include "outfile.h"
#include "util.h"

#define TMP_IMPORT ".fp8lab-import."
#define TMP_OLD ".fp8lab-old."
#define TE_SOURCE_PREFIX "TransformerEngine debug statistics"

/* ------------------------------------------------------------------ what an import owns */

/* What the folder's te_log.json says the import wrote: its "written" list, or (an import older
 * than that list) the number of its rank logs, whose files follow from it. */
typedef struct {
  const json_t *written; /* array of strings, or NULL: the older rule */
  size_t ranks;          /* the older rule: the length of "files" */
  int nothing;           /* owns no file (1) or nothing at all (2): to name a first entry */
} te_owned;

/* r when name is rank_<r> (r in canonical decimal, below limit), else -1. */
static long rank_folder(const char *name, size_t len, size_t limit) {
  if (len < 6 || strncmp(name, "rank_", 5) != 0) return -1;
  if (name[5] == '0' && len > 6) return -1; /* rank_01: not a name an import writes */
  unsigned long r = 0;
  for (size_t i = 5; i < len; i++) {
    if (name[i] < '0' || name[i] > '9' || r > 100000000UL) return -1;
    r = r * 10 + (unsigned long)(name[i] - '0');
  }
  return r < limit ? (long)r : -1;
}

/* 1 when rel (a path below the folder, '/'-separated) is an entry the import wrote: a listed
 * file, or the rank_<r> folder of a listed rank_<r>/... file. */
static int owned_entry(const te_owned *o, const char *rel, int is_dir) {
  if (o->nothing) return o->nothing == 1 && is_dir;
  if (o->written) {
    size_t n = strlen(rel);
    for (size_t k = 0; k < json_array_size(o->written); k++) {
      const char *w = json_string_value(json_array_get(o->written, k));
      if (!w) continue;
      if (!is_dir && strcmp(w, rel) == 0) return 1;
      if (is_dir && strncmp(w, rel, n) == 0 && w[n] == '/' && rank_folder(rel, n, SIZE_MAX) >= 0)
        return 1;
    }
    return 0;
  }
  /* an older import: amax.csv, te_overflows.csv, te_log.json, rank_<r>/amax.csv (r < ranks) */
  const char *slash = strchr(rel, '/');
  if (is_dir) return !slash && rank_folder(rel, strlen(rel), o->ranks) >= 0;
  if (!slash)
    return strcmp(rel, "amax.csv") == 0 || strcmp(rel, "te_overflows.csv") == 0 ||
           strcmp(rel, FP8_TE_LOG_FILE) == 0;
  return rank_folder(rel, (size_t)(slash - rel), o->ranks) >= 0 && strcmp(slash + 1, "amax.csv") == 0;
}

/* The first entry below path (rel: its name below the target, "" at the top), in name order,
 * depth first, that o does not own (lstat: a link, FIFO or other non-file, non-folder is never
 * owned), into bad; 1 when one was found. */
static int find_foreign(const char *path, const char *rel, const te_owned *o, char *bad,
                        size_t badlen) {
  struct dirent **ents = NULL;
  int n = scandir(path, &ents, NULL, alphasort);
  if (n < 0) { /* a folder it cannot read: call that foreign, naming the folder */
    snprintf(bad, badlen, "%s", *rel ? rel : ".");
    return 1;
  }
  int found = 0;
  for (int i = 0; i < n; i++) {
    const char *name = ents[i]->d_name;
    if (found || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    size_t lp = strlen(path) + strlen(name) + 2, lr = strlen(rel) + strlen(name) + 2;
    char *sub = malloc(lp), *srel = malloc(lr);
    struct stat sb;
    if (!sub || !srel) {
      snprintf(bad, badlen, "%s", name);
      found = 1;
    } else {
      snprintf(sub, lp, "%s/%s", path, name);
      snprintf(srel, lr, "%s%s%s", rel, *rel ? "/" : "", name);
      int dir = lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode);
      int file = !dir && lstat(sub, &sb) == 0 && S_ISREG(sb.st_mode);
      if ((!dir && !file) || !owned_entry(o, srel, dir)) {
        snprintf(bad, badlen, "%s", srel);
        found = 1;
      } else if (dir) {
        found = find_foreign(sub, srel, o, bad, badlen);
      }
    }
    free(sub);
    free(srel);
  }
  for (int i = 0; i < n; i++) free(ents[i]);
  free(ents);
  return found;
}

/* FP8_OK when the non-empty folder dir (shown as `shown`) is an earlier import's, every entry
 * in it owned; else FP8_EFORMAT naming one entry that is not. */
static int check_owned(const char *dir, const char *shown, char *err, size_t errlen) {
  static const char tail[] = "--force replaces only a folder an earlier import wrote (te_log.json "
                             "lists its files); move it away or import into another folder";
  size_t n = strlen(dir) + sizeof FP8_TE_LOG_FILE + 2;
  char *path = malloc(n), bad[PATH_MAX], b[FP8_ESC_LEN], s[FP8_ESC_LEN];
  if (!path) return FP8_ENOMEM;
  snprintf(path, n, "%s/%s", dir, FP8_TE_LOG_FILE);
  struct stat sb;
  int have = lstat(path, &sb) == 0;
  json_t *root = have && S_ISREG(sb.st_mode) ? json_load_file(path, 0, NULL) : NULL;
  free(path);
  fp8_esc(shown, s, sizeof s);
  if (!have) { /* no record: name an entry that no import writes, if there is one */
    te_owned any = {NULL, SIZE_MAX, 0};
    if (find_foreign(dir, "", &any, bad, sizeof bad))
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: holds %s, which import-te did not write: %s",
                        s, fp8_esc(bad, b, sizeof b), tail);
    te_owned files = {NULL, 0, 1}, none = {NULL, 0, 2}; /* its first file, else first entry */
    if (!find_foreign(dir, "", &files, bad, sizeof bad)) find_foreign(dir, "", &none, bad, sizeof bad);
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: holds %s but no te_log.json: not a folder an import wrote: %s", s,
                      fp8_esc(bad, b, sizeof b), tail);
  }
  const json_t *src = json_object_get(root, "source"), *wr = json_object_get(root, "written"),
               *files = json_object_get(root, "files");
  const char *why = NULL;
  if (!S_ISREG(sb.st_mode)) why = "not a regular file";
  else if (!json_is_object(root)) why = "not a JSON object";
  else if (!json_is_string(src) ||
           strncmp(json_string_value(src), TE_SOURCE_PREFIX, sizeof TE_SOURCE_PREFIX - 1) != 0)
    why = "its \"source\" is not TransformerEngine's statistics logs";
  else if (wr && !json_is_array(wr)) why = "its \"written\" is not a list";
  if (why) {
    json_decref(root);
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: holds te_log.json, which import-te did not write (%s): %s", s, why, tail);
  }
  te_owned o = {wr, json_is_array(files) ? json_array_size(files) : 0, 0};
  int found = find_foreign(dir, "", &o, bad, sizeof bad);
  json_decref(root);
  if (found)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: holds %s, which import-te did not write: %s",
                      s, fp8_esc(bad, b, sizeof b), tail);
  return FP8_OK;
}

/* ------------------------------------------------------------------ a killed import's folders */

/* pid when name is .<base><kind><pid> (pid all digits), else 0. */
static pid_t leftover_pid(const char *name, const char *base, const char *kind) {
  size_t nb = strlen(base), nk = strlen(kind);
  if (name[0] != '.' || strncmp(name + 1, base, nb) != 0 || strncmp(name + 1 + nb, kind, nk) != 0)
    return 0;
  const char *p = name + 1 + nb + nk;
  long long v = 0;
  if (!*p) return 0;
  for (; *p; p++) {
    if (*p < '0' || *p > '9' || v > INT_MAX / 10) return 0;
    v = v * 10 + (*p - '0');
  }
  return (pid_t)v;
}

/* Removes the folders that killed imports left beside the target (their pid gone, or this
 * process's own: a pid reused). A killed swap's fallback can leave the previous import only
 * under .<base>.fp8lab-old.<pid> with no target: that one is moved back, not removed. */
static void remove_leftovers(const char *parent, const char *base, const char *target) {
  DIR *d = opendir(parent);
  if (!d) return;
  size_t n = strlen(parent) + 300;
  char *p = malloc(n);
  for (struct dirent *e; p && (e = readdir(d)) != NULL;) {
    pid_t pid = leftover_pid(e->d_name, base, TMP_IMPORT);
    int old = 0;
    if (!pid) old = (pid = leftover_pid(e->d_name, base, TMP_OLD)) != 0;
    if (!pid || (pid != getpid() && (kill(pid, 0) == 0 || errno != ESRCH))) continue;
    snprintf(p, n, "%s/%s", parent, e->d_name);
    struct stat sb;
    if (lstat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue; /* not a folder an import made */
    if (old && lstat(target, &sb) != 0 && errno == ENOENT && rename(p, target) == 0) continue;
    fp8_rmtree(p);
  }
  free(p);
  closedir(d);
}

/* ------------------------------------------------------------------ open, commit, close */

/* The target's name without trailing slashes; ".", ".." and "/"-ended forms of them resolved
 * (realpath), since a folder is renamed by the name its parent gives it. New string or NULL
 * (*rc says why). */
static char *target_name(const char *dir, int *rc, char *err, size_t errlen) {
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  char *t = strndup(dir, n);
  if (!t) {
    *rc = FP8_ENOMEM;
    return NULL;
  }
  const char *base = strrchr(t, '/');
  base = base ? base + 1 : t;
  if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
    char *r = realpath(t, NULL);
    free(t);
    if (!r) {
      *rc = fp8_errorf(FP8_EIO, err, errlen, "%s: %s", dir, strerror(errno));
      return NULL;
    }
    t = r;
  }
  if (!*t || strcmp(t, "/") == 0) {
    *rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: not a folder import-te can write (it writes "
                     "a folder of its own and moves it there)", dir);
    free(t);
    return NULL;
  }
  return t;
}

int te_dir_open(te_dir *d, const char *tracedir, int force, char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
  d->shown = tracedir;
  int rc = FP8_OK;
  if (!(d->target = target_name(tracedir, &rc, err, errlen))) return rc;
  const char *slash = strrchr(d->target, '/');
  const char *base = slash ? slash + 1 : d->target;
  d->parent = slash ? strndup(d->target, slash == d->target ? 1 : (size_t)(slash - d->target))
                    : strdup(".");
  size_t n = strlen(d->target) + sizeof TMP_IMPORT + 32;
  d->tmp = malloc(n);
  d->old = malloc(n);
  if (!d->parent || !d->tmp || !d->old) {
    te_dir_close(d);
    return FP8_ENOMEM;
  }
  int np = (int)(base - d->target);
  snprintf(d->tmp, n, "%.*s.%s%s%ld", np, d->target, base, TMP_IMPORT, (long)getpid());
  snprintf(d->old, n, "%.*s.%s%s%ld", np, d->target, base, TMP_OLD, (long)getpid());
  remove_leftovers(d->parent, base, d->target);
  struct stat sb;
  if (lstat(d->target, &sb) != 0) {
    if (errno != ENOENT) {
      rc = fp8_errorf(FP8_EIO, err, errlen, "%s: %s", tracedir, strerror(errno));
    } else { /* a new folder: its parents first, as mkdir -p (undone when the import fails) */
      d->made_top = fp8_first_missing_dir(d->parent);
      rc = fp8_mkdir_p(d->parent, err, errlen);
    }
  } else if (S_ISLNK(sb.st_mode)) {
    rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: is a symbolic link: import-te writes a folder of "
                    "its own there; give the folder itself or another path", tracedir);
  } else if (!S_ISDIR(sb.st_mode)) {
    rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: exists and is not a folder: move it away or "
                    "import into another folder", tracedir);
  } else {
    d->mode = sb.st_mode & 07777;
    if (fp8_dir_nonempty(d->target)) {
      if (!force)
        rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: not empty (--force replaces a folder an "
                        "earlier import wrote, and nothing else)", tracedir);
      else
        rc = check_owned(d->target, tracedir, err, errlen);
      d->swap = 1;
    }
  }
  if (rc == FP8_OK && access(d->parent, W_OK) != 0)
    rc = fp8_errorf(FP8_EIO, err, errlen, "%s: the folder holding it is not writable: %s",
                    tracedir, strerror(errno));
  if (rc == FP8_OK) {
    if (mkdir(d->tmp, 0777) != 0)
      rc = fp8_errorf(fp8_write_errno_status(errno), err, errlen, "%s: cannot create directory: %s",
                      d->tmp, strerror(errno));
    else
      d->made_tmp = 1;
  }
  if (rc) te_dir_close(d);
  return rc;
}

static int commit(te_dir *d, char *err, size_t errlen) {
  if (!d->swap) { /* absent or empty: rename() creates it, or replaces the empty folder */
    if (rename(d->tmp, d->target) != 0)
      return fp8_errorf(fp8_write_errno_status(errno), err, errlen,
                        "%s: cannot move the import into place: %s", d->shown, strerror(errno));
    d->made_tmp = 0;
    return FP8_OK;
  }

  /* the ownership again, now: what was written into the target since te_dir_open is not the
   * import's to remove (the walk is repeated on the folder swapped out, before its removal) */
  int rc = check_owned(d->target, d->shown, err, errlen);
  if (rc) return rc;
#ifdef RENAME_EXCHANGE
  /* the two folders swapped in one step: the target is the old import or the new, never
   * neither; the old one, now under the temporary name, is removed */
  if (renameat2(AT_FDCWD, d->tmp, AT_FDCWD, d->target, RENAME_EXCHANGE) == 0) {
    if ((rc = check_owned(d->tmp, d->shown, err, errlen)) != FP8_OK) {
      /* written in the instant between: swapped back, nothing replaced; if even that fails,
       * the earlier folder stays whole under the temporary name, which the message names */
      if (renameat2(AT_FDCWD, d->tmp, AT_FDCWD, d->target, RENAME_EXCHANGE) != 0) {
        d->made_tmp = 0;
        size_t n = strlen(err);
        snprintf(err + n, errlen > n ? errlen - n : 0, " (the earlier folder is kept whole as %s)",
                 d->tmp);
      }
      return rc;
    }
    fp8_rmtree(d->tmp);
    d->made_tmp = 0;
    return FP8_OK;
  }
  if (errno != EINVAL && errno != ENOSYS)
    return fp8_errorf(fp8_write_errno_status(errno), err, errlen,
                      "%s: cannot swap the import into place: %s", d->shown, strerror(errno));
#endif
  /* no exchange here (a file system without it): the old import aside, the new one in; a kill
   * between the two leaves it under .<base>.fp8lab-old.<pid>, which the next import moves back */
  if (rename(d->target, d->old) != 0)
    return fp8_errorf(fp8_write_errno_status(errno), err, errlen,
                      "%s: cannot move the earlier import aside: %s", d->shown, strerror(errno));
  if ((rc = check_owned(d->old, d->shown, err, errlen)) != FP8_OK) {
    rename(d->old, d->target); /* written in the instant between: back, nothing replaced */
    return rc;
  }
  if (rename(d->tmp, d->target) != 0) {
    int e = errno;
    rename(d->old, d->target);
    return fp8_errorf(fp8_write_errno_status(e), err, errlen,
                      "%s: cannot move the import into place: %s", d->shown, strerror(e));
  }
  d->made_tmp = 0;
  fp8_rmtree(d->old);
  return FP8_OK;
}

int te_dir_commit(te_dir *d, char *err, size_t errlen) {
  if (d->mode) chmod(d->tmp, d->mode); /* the replaced folder's permissions */
  int rc = commit(d, err, errlen);
  if (rc == FP8_OK) { /* the parents made for it hold it now: nothing to undo */
    free(d->made_top);
    d->made_top = NULL;
  }
  return rc;
}

void te_dir_close(te_dir *d) {
  if (d->made_tmp) fp8_rmtree(d->tmp);
  d->made_tmp = 0;
  if (d->made_top && d->parent) fp8_rmdir_up(d->parent, d->made_top); /* only while empty */
  free(d->made_top);
  free(d->target);
  free(d->parent);
  free(d->tmp);
  free(d->old);
  memset(d, 0, sizeof *d);
}
