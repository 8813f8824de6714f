/* fuzz_common.h: what the libFuzzer targets of tests/fuzz share (docs/fuzzing.md).
 *
 * fp8lab's parsers read paths (they map or stream files), so a target writes each input into
 * a scratch folder of its own process and hands the parser that path; the folder is made once
 * (mkdtemp under $FP8LAB_FUZZ_TMP, else $TMPDIR, else /dev/shm or /tmp), the files in it are
 * removed after every input and the folder at exit. run_fuzz.sh points FP8LAB_FUZZ_TMP at a
 * folder it removes afterwards, so that even a crash (no atexit) leaves nothing behind.
 *
 * The invariants every target checks beyond the sanitizers' (a violation aborts, which
 * libFuzzer reports as a crash and saves the input): a parser's status is FP8_OK or one of the
 * bad-input statuses (exit 2: never FP8_EWRITE or FP8_EDEVICE, and never FP8_ENOMEM for inputs
 * this small), and a failure always comes with a message, one line of printable text (no
 * byte below 0x20, no 0x7f): the escaping of input bytes in messages (issue 16);
 * FP8LAB_FUZZ_ONE_LINE=0 in the environment turns that last check off. FP8LAB_FUZZ_VERBOSE=1 prints
 * every status and message (to see what a corpus input does: `fuzz_<name> FILE...`).
 */
#ifndef FP8LAB_TESTS_FUZZ_COMMON_H
#define FP8LAB_TESTS_FUZZ_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp8.h" /* fp8_status */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Room for a parser's message (trace.h's FP8_ERRLEN). */
#define FZ_ERRLEN 512

static char fz_dir[1024];
static char fz_subdir[1200]; /* the one folder fz_mkdir made in it, removed at exit too */

static inline void fz_rmdir(void) {
  if (fz_subdir[0]) rmdir(fz_subdir);
  if (fz_dir[0]) rmdir(fz_dir);
}

/* The scratch folder of this process (made on first use). */
static inline const char *fz_scratch(void) {
  if (fz_dir[0]) return fz_dir;
  const char *base = getenv("FP8LAB_FUZZ_TMP");
  if (!base || !*base) base = getenv("TMPDIR");
  if (!base || !*base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(fz_dir, sizeof fz_dir, "%s/fp8lab-fuzz-XXXXXX", base);
  if (!mkdtemp(fz_dir)) {
    fprintf(stderr, "fuzz: cannot make a scratch folder under %s: %s\n", base, strerror(errno));
    abort();
  }
  atexit(fz_rmdir);
  return fz_dir;
}

/* <scratch>/<name> in buf (name may hold one folder level: "step_0/t.npy"). */
static inline const char *fz_path(const char *name, char *buf, size_t n) {
  snprintf(buf, n, "%s/%s", fz_scratch(), name);
  return buf;
}

/* Writes data[0..size) to <scratch>/<name>; aborts when it cannot (not the parser's fault). */
static inline void fz_put(const char *name, const uint8_t *data, size_t size) {
  char path[1200];
  fz_path(name, path, sizeof path);
  FILE *fp = fopen(path, "wb");
  if (!fp || (size && fwrite(data, 1, size, fp) != size) || fclose(fp) != 0) {
    fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
    abort();
  }
}

static inline void fz_del(const char *name) {
  char path[1200];
  if (unlink(fz_path(name, path, sizeof path)) != 0 && errno != ENOENT) {
    fprintf(stderr, "fuzz: cannot remove %s: %s\n", path, strerror(errno));
    abort();
  }
}

/* Makes the folder <scratch>/<name> once (one per process; removed at exit, after the files
 * in it that fz_del removed). */
static inline void fz_mkdir(const char *name) {
  if (fz_subdir[0]) return;
  fz_path(name, fz_subdir, sizeof fz_subdir);
  if (mkdir(fz_subdir, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "fuzz: cannot make %s: %s\n", fz_subdir, strerror(errno));
    abort();
  }
}

/* The checks of a parser's status and message (see the top of the file). */
static inline void fz_check_status(const char *what, int rc, const char *err) {
  static int verbose = -1; /* FP8LAB_FUZZ_VERBOSE=1: every status and message on stderr */
  if (verbose < 0) {
    const char *e = getenv("FP8LAB_FUZZ_VERBOSE");
    verbose = e && *e && strcmp(e, "0") != 0;
  }
  if (verbose) fprintf(stderr, "fuzz: %s: status %d%s%s\n", what, rc, rc ? ": " : "", rc ? err : "");
  if (rc != FP8_OK && rc != FP8_EINVAL && rc != FP8_EFORMAT && rc != FP8_ERANGE) {
    fprintf(stderr, "fuzz: %s returned status %d (%s), not a bad-input status\n", what, rc,
            err);
    abort();
  }
  if (rc == FP8_OK) return;
  if (!err[0]) {
    fprintf(stderr, "fuzz: %s failed (status %d) with no message\n", what, rc);
    abort();
  }
  static int one_line = -1;
  if (one_line < 0) {
    const char *e = getenv("FP8LAB_FUZZ_ONE_LINE");
    one_line = !(e && strcmp(e, "0") == 0);
  }
  if (!one_line) return;
  for (const unsigned char *p = (const unsigned char *)err; *p; p++)
    if (*p < 0x20 || *p == 0x7f) {
      fprintf(stderr, "fuzz: %s: message byte %zu is 0x%02x: ", what,
              (size_t)(p - (const unsigned char *)err), *p);
      for (const unsigned char *q = (const unsigned char *)err; *q; q++)
        fprintf(stderr, *q < 0x20 || *q >= 0x7f ? "\\x%02x" : "%c", *q);
      fputc('\n', stderr);
      abort();
    }
}

/* Reads every byte of [p, p + n): ASan reports any that lies outside what the parser mapped. */
static inline unsigned fz_touch(const void *p, size_t n) {
  const volatile unsigned char *b = p;
  unsigned acc = 0;
  for (size_t i = 0; i < n; i++) acc += b[i];
  return acc;
}

#endif /* FP8LAB_TESTS_FUZZ_COMMON_H */
