/* test_sha256.c: the inputs' SHA-256 (src/io/sha256.c): the digest of known bytes (FIPS 180-2's
 * "abc" and the empty message, independent of OpenSSL), a file hashed as the run found it, and
 * a file replaced (another inode, as a re-import's folder swap leaves it) or rewritten (another
 * size or modification time) between the run's listing and the hash: refused, "changed while
 * the run used it" (issue 41: the hash must be of the bytes the run used). */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fp8.h"
#include "sha256.h"
#include "testutil.h"

#define ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define ABCD "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589"

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

START_TEST(test_known_digests) {
  char hex[FP8_SHA256_HEX], err[512];
  ck_assert_int_eq(fp8_sha256_mem("abc", 3, hex), FP8_OK);
  ck_assert_str_eq(hex, ABC);
  ck_assert_int_eq(fp8_sha256_mem("", 0, hex), FP8_OK);
  ck_assert_str_eq(hex, EMPTY);
  char dir[] = "/tmp/fp8lab-sha256-XXXXXX", path[256];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/a.csv", dir);
  put(path, "abc");
  fp8_file_id id;
  fp8_file_id_of(path, &id);
  ck_assert_int_eq(id.set, 1);
  ck_assert_int_eq(fp8_sha256_file(path, NULL, &id, hex, err, sizeof err), FP8_OK);
  ck_assert_str_eq(hex, ABC);
  ck_assert_int_eq(fp8_sha256_file(path, NULL, NULL, hex, err, sizeof err), FP8_OK);
  ck_assert_str_eq(hex, ABC);
  unlink(path);
  rmdir(dir);
}
END_TEST

START_TEST(test_changed_since_listing) {
  char hex[FP8_SHA256_HEX], err[512];
  char dir[] = "/tmp/fp8lab-sha256-XXXXXX", path[256], other[256];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/te_overflows.csv", dir);
  snprintf(other, sizeof other, "%s/new.csv", dir);
  /* replaced by another file of the same bytes (a new inode): refused though the bytes agree */
  put(path, "abc");
  fp8_file_id id;
  fp8_file_id_of(path, &id);
  put(other, "abc");
  ck_assert_int_eq(rename(other, path), 0);
  err[0] = '\0';
  ck_assert_int_eq(fp8_sha256_file(path, NULL, &id, hex, err, sizeof err), FP8_EIO);
  ck_assert_msg(strstr(err, "te_overflows.csv: changed while the run used it") != NULL, "%s", err);
  /* rewritten in place (the same inode, another size) */
  fp8_file_id_of(path, &id);
  put(path, "abcd");
  ck_assert_int_eq(fp8_sha256_file(path, NULL, &id, hex, err, sizeof err), FP8_EIO);
  ck_assert_msg(strstr(err, "changed while the run used it") != NULL, "%s", err);
  /* the same size, another modification time */
  fp8_file_id_of(path, &id);
  struct timespec ts[2] = {{0, UTIME_OMIT}, {(time_t)id.mtime_sec - 100, 0}};
  ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
  ck_assert_int_eq(fp8_sha256_file(path, NULL, &id, hex, err, sizeof err), FP8_EIO);
  /* as listed: hashed */
  fp8_file_id_of(path, &id);
  ck_assert_int_eq(fp8_sha256_file(path, NULL, &id, hex, err, sizeof err), FP8_OK);
  ck_assert_str_eq(hex, ABCD);
  unlink(path);
  rmdir(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sha256");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_known_digests);
  tcase_add_test(tc, test_changed_since_listing);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
