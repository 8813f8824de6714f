/* test_trace_dir.c: trace folders (src/trace/trace.c): the steps of snapshots and amax.csv
 * together, their errors, and multi-rank folders (rank_<r>/). Every input is written byte by byte
 * here, so the reader is tested independently of the writer (which gets its own round-trip test).
 * Malformed inputs must give the right status and a message naming the file and the tensor, line
 * or byte offset; truncated files must fail cleanly at every length. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "trace.h"
#include "trace_helpers.h"
#include "util.h"

/* ------------------------------------------------------------------ trace directories */

START_TEST(trace_steps) {
  char *dir = tu_mkdtemp();
  buf_t f = good_file();
  const char *names[] = {"step_120.safetensors", "step_7.safetensors", "step_000012.safetensors"};
  for (int i = 0; i < 3; i++) write_in(dir, names[i], f.b, f.n);
  /* ignored */
  write_in(dir, "step_12abc.safetensors", "x", 1);
  write_in(dir, "step_.safetensors", "x", 1);
  write_in(dir, "step_3", "x", 1); /* a file, not an npy folder */
  write_in(dir, "notes.txt", "x", 1);
  write_in(dir, "step_5.safetensors.bak", "x", 1);
  char *sub = tu_path(dir, "other");
  mkdir(sub, 0700);
  char err[FP8_ERRLEN] = "";
  fp8_trace tr;
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_int_eq(tr.is_npy, 0);
  ck_assert_uint_eq(tr.nsteps, 3);
  ck_assert_int_eq(tr.steps[0], 7);
  ck_assert_int_eq(tr.steps[1], 12);
  ck_assert_int_eq(tr.steps[2], 120);
  char *p12 = tu_path(dir, "step_000012.safetensors");
  ck_assert_str_eq(tr.step_paths[1], p12);
  ck_assert_str_eq(tr.dir, dir);
  ck_assert_uint_eq(tr.namax, 0);
  fp8_step s;
  for (size_t i = 0; i < 3; i++) {
    ck_assert_int_eq(fp8_trace_load_step(&tr, i, &s, err, sizeof err), FP8_OK);
    ck_assert_int_eq(s.step, tr.steps[i]);
    check_good_step(&s);
    fp8_step_free(&s);
  }
  ck_assert_int_eq(fp8_trace_load_step(&tr, 3, &s, err, sizeof err), FP8_EINVAL);
  fp8_trace_close(&tr);

  /* a broken snapshot: the error names the file */
  write_in(dir, "step_7.safetensors", f.b, f.n - 1);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_trace_load_step(&tr, 0, &s, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "step_7.safetensors: tensor z.scalar: data_offsets end 44 "
                                    "beyond data size 43"));
  fp8_trace_close(&tr);

  /* a trailing slash in the directory name */
  char *slash = malloc(strlen(dir) + 2);
  sprintf(slash, "%s/", dir);
  ck_assert_int_eq(fp8_trace_open(slash, &tr, err, sizeof err), FP8_OK);
  ck_assert_str_eq(tr.step_paths[1], p12);
  fp8_trace_close(&tr);
  free(slash);
  free(p12);
  free(sub);
  free(f.b);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

START_TEST(trace_errors) {
  char *dir = tu_mkdtemp();
  char err[FP8_ERRLEN] = "";
  fp8_trace tr;
  /* empty directory */
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "not a trace"));
  /* missing directory */
  char *missing = tu_path(dir, "nope");
  ck_assert_int_eq(fp8_trace_open(missing, &tr, err, sizeof err), FP8_EIO);
  ck_assert_ptr_nonnull(strstr(err, missing));
  /* duplicate step numbers */
  write_in(dir, "step_5.safetensors", "{}", 2);
  write_in(dir, "step_005.safetensors", "{}", 2);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  ck_assert_msg(strstr(err, "step 5 given twice: step_005.safetensors and step_5.safetensors"),
                "%s", err);
  ck_assert_ptr_null(tr.steps);
  char *p = tu_path(dir, "step_005.safetensors");
  unlink(p);
  free(p);
  /* safetensors and npy mixed */
  char *sd = tu_path(dir, "step_9");
  mkdir(sd, 0700);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  ck_assert_msg(strstr(err, "mixes safetensors files (step_5.safetensors) and npy folders "
                            "(step_9/)"),
                "%s", err);
  /* a step number beyond int64 */
  rmdir(sd);
  write_in(dir, "step_99999999999999999999.safetensors", "{}", 2);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "step_99999999999999999999.safetensors: step number too large"));
  p = tu_path(dir, "step_99999999999999999999.safetensors");
  unlink(p);
  free(p);
  /* a bad amax.csv fails the open */
  write_in(dir, "amax.csv", "step,tensor,amax\n0,a,1\n0,a,x\n", 29);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "amax.csv:3: amax 'x' is not a number"));
  ck_assert_ptr_null(tr.dir);
  /* snapshots plus a good amax.csv */
  write_in(dir, "amax.csv", "step,tensor,amax\n0,a,1\n", 23);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(tr.nsteps, 1);
  ck_assert_uint_eq(tr.namax, 1);
  fp8_trace_close(&tr);
  fp8_trace_close(&tr); /* twice is harmless */
  free(sd);
  free(missing);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* ------------------------------------------------------------------ multi-rank traces */

static char *mkdir_in(const char *dir, const char *name) {
  char *p = tu_path(dir, name);
  ck_assert_int_eq(mkdir(p, 0700), 0);
  return p;
}

/* rank_0: snapshots at steps 3 and 7 (the good file), amax.csv with b.x at steps 1 and 3;
 * rank_1: a snapshot at step 5, amax.csv with a.y at step 1; rank_2: amax.csv only, with
 * b.x at step 2. */
START_TEST(trace_ranks) {
  char *dir = tu_mkdtemp();
  buf_t f = good_file();
  char *r0 = mkdir_in(dir, "rank_0"), *r1 = mkdir_in(dir, "rank_1"), *r2 = mkdir_in(dir, "rank_2");
  write_in(r0, "step_3.safetensors", f.b, f.n);
  write_in(r0, "step_7.safetensors", f.b, f.n);
  write_in(r0, "amax.csv", "step,tensor,amax\n3,b.x,2\n1,b.x,1.5\n", 34);
  write_in(r1, "step_5.safetensors", f.b, f.n);
  write_in(r1, "amax.csv", "step,tensor,amax\n1,a.y,4\n", 24);
  write_in(r2, "amax.csv", "step,tensor,amax\n2,b.x,8\n", 24);
  write_in(dir, "rank_9", "a file, not a rank", 18); /* not a folder: ignored */
  write_in(dir, "notes.txt", "x", 1);
  char err[FP8_ERRLEN] = "";
  fp8_trace tr;
  ck_assert_msg(fp8_trace_open(dir, &tr, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(tr.nranks, 3);
  ck_assert_str_eq(tr.ranks[1].dir, r1);
  ck_assert_ptr_null(tr.step_paths);
  ck_assert_int_eq(tr.is_npy, 0);
  /* the union of the ranks' snapshot steps */
  ck_assert_uint_eq(tr.nsteps, 3);
  ck_assert_int_eq(tr.steps[0], 3);
  ck_assert_int_eq(tr.steps[1], 5);
  ck_assert_int_eq(tr.steps[2], 7);
  /* amax.csv rows of every rank, renamed, sorted by step then name */
  ck_assert_uint_eq(tr.namax_names, 3);
  ck_assert_str_eq(tr.amax_names[0], "rank_0/b.x");
  ck_assert_str_eq(tr.amax_names[1], "rank_1/a.y");
  ck_assert_str_eq(tr.amax_names[2], "rank_2/b.x");
  ck_assert_uint_eq(tr.namax, 4);
  static const int64_t want_step[4] = {1, 1, 2, 3};
  static const int32_t want_tensor[4] = {0, 1, 2, 0};
  static const float want_amax[4] = {1.5f, 4.0f, 8.0f, 2.0f};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(tr.amax[i].step, want_step[i]);
    ck_assert_int_eq(tr.amax[i].tensor, want_tensor[i]);
    ck_assert(same_bits(tr.amax[i].amax, want_amax[i]));
  }
  /* the ranks' own amax rows moved into the union */
  ck_assert_uint_eq(tr.ranks[0].namax, 0);
  /* one rank at a time: names prefixed; a rank without a snapshot at that step has none */
  fp8_step s;
  ck_assert_int_eq(fp8_trace_load_step_rank(&tr, 0, 0, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.step, 3);
  ck_assert_uint_eq(s.ntensors, 5);
  ck_assert_str_eq(s.tensors[0].name, "rank_0/a.bf16");
  ck_assert_str_eq(s.tensors[4].name, "rank_0/z.scalar");
  ck_assert(same_bits(to_f32(s.tensors[1].dtype, s.tensors[1].data, 0), 1.5f));
  fp8_step_free(&s);
  ck_assert_int_eq(fp8_trace_load_step_rank(&tr, 0, 1, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.step, 3);
  ck_assert_uint_eq(s.ntensors, 0);
  fp8_step_free(&s);
  ck_assert_int_eq(fp8_trace_load_step_rank(&tr, 1, 1, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.step, 5);
  ck_assert_str_eq(s.tensors[2].name, "rank_1/c.f16");
  fp8_step_free(&s);
  ck_assert_int_eq(fp8_trace_load_step_rank(&tr, 0, 3, &s, err, sizeof err), FP8_EINVAL);
  ck_assert_int_eq(fp8_trace_load_step_rank(&tr, 3, 0, &s, err, sizeof err), FP8_EINVAL);
  fp8_trace_close(&tr);

  /* the whole step: every rank's tensors, sorted by name */
  write_in(r1, "step_3.safetensors", f.b, f.n);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_trace_load_step(&tr, 0, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.step, 3);
  ck_assert_uint_eq(s.ntensors, 10);
  ck_assert_str_eq(s.tensors[0].name, "rank_0/a.bf16");
  ck_assert_str_eq(s.tensors[4].name, "rank_0/z.scalar");
  ck_assert_str_eq(s.tensors[5].name, "rank_1/a.bf16");
  ck_assert_str_eq(s.tensors[9].name, "rank_1/z.scalar");
  ck_assert(same_bits(to_f32(s.tensors[6].dtype, s.tensors[6].data, 1), -2.25f));
  fp8_step_free(&s);
  /* a single-rank trace is rank 0 of itself */
  fp8_trace one;
  ck_assert_int_eq(fp8_trace_open(r0, &one, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(one.nranks, 0);
  ck_assert_int_eq(fp8_trace_load_step_rank(&one, 1, 0, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.step, 7);
  ck_assert_str_eq(s.tensors[0].name, "a.bf16");
  fp8_step_free(&s);
  ck_assert_int_eq(fp8_trace_load_step_rank(&one, 0, 1, &s, err, sizeof err), FP8_EINVAL);
  fp8_trace_close(&one);
  fp8_trace_close(&tr);

  /* rank_<r>/ prefixes */
  size_t rk = 99;
  ck_assert_str_eq(fp8_trace_split_rank("rank_12/a.b/c", &rk), "a.b/c");
  ck_assert_uint_eq(rk, 12);
  ck_assert_str_eq(fp8_trace_split_rank("rank_0/x", &rk), "x");
  ck_assert_uint_eq(rk, 0);
  ck_assert_ptr_null(fp8_trace_split_rank("rank_01/x", &rk));
  ck_assert_ptr_null(fp8_trace_split_rank("rank_/x", &rk));
  ck_assert_ptr_null(fp8_trace_split_rank("rank_1x/x", &rk));
  ck_assert_ptr_null(fp8_trace_split_rank("rank_1", &rk));
  ck_assert_ptr_null(fp8_trace_split_rank("m.input", &rk));
  ck_assert_ptr_null(fp8_trace_split_rank("rank_65536/x", &rk));
  free(r0);
  free(r1);
  free(r2);
  free(f.b);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* Folders of ranks that are not rank_0 .. rank_<R-1>, or that sit beside a single-rank trace:
 * exact messages naming the folder. */
START_TEST(trace_rank_errors) {
  char *dir = tu_mkdtemp();
  char err[FP8_ERRLEN] = "", want[1024];
  fp8_trace tr;
  static const char CSV[] = "step,tensor,amax\n0,a.input,1\n";
  /* rank_0 missing */
  char *r1 = mkdir_in(dir, "rank_1");
  write_in(r1, "amax.csv", CSV, strlen(CSV));
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: rank_0/ is missing (found 1 rank folders, up to rank_1/; "
           "expected rank_0/ .. rank_<R-1>/ without gaps)", dir);
  ck_assert_str_eq(err, want);
  ck_assert_ptr_null(tr.dir);
  /* a gap */
  char *r0 = mkdir_in(dir, "rank_0"), *r3 = mkdir_in(dir, "rank_3");
  write_in(r0, "amax.csv", CSV, strlen(CSV));
  write_in(r3, "amax.csv", CSV, strlen(CSV));
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: rank_2/ is missing (found 3 rank folders, up to rank_3/; "
           "expected rank_0/ .. rank_<R-1>/ without gaps)", dir);
  ck_assert_str_eq(err, want);
  tu_rmtree(r3);
  /* a rank folder that is not a trace */
  char *r2 = mkdir_in(dir, "rank_2");
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: not a trace: no step_<N>.safetensors files, step_<N>/ folders "
           "or amax.csv", r2);
  ck_assert_str_eq(err, want);
  /* a bad amax.csv in a rank names that rank's file */
  write_in(r2, "amax.csv", "step,tensor,amax\n0,a,x\n", 23);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s/amax.csv:2: amax 'x' is not a number", r2);
  ck_assert_str_eq(err, want);
  write_in(r2, "amax.csv", CSV, strlen(CSV));
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(tr.nranks, 3);
  fp8_trace_close(&tr);
  /* a leading zero */
  char *r01 = mkdir_in(dir, "rank_01");
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: rank_01/: a rank folder is named rank_<r> with r written "
           "without leading zeros", dir);
  ck_assert_str_eq(err, want);
  rmdir(r01);
  /* too many ranks */
  char *big = mkdir_in(dir, "rank_65536");
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: rank_65536/: rank number too large (rank folders go up to "
           "rank_65535/)", dir);
  ck_assert_str_eq(err, want);
  rmdir(big);
  /* beside a single-rank trace: a snapshot, an npy folder, amax.csv */
  write_in(dir, "step_4.safetensors", "x", 1);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: holds both a single-rank trace (step_4.safetensors) and rank "
           "folders (rank_0/); a trace is one or the other", dir);
  ck_assert_str_eq(err, want);
  char *p = tu_path(dir, "step_4.safetensors");
  unlink(p);
  free(p);
  char *npy = mkdir_in(dir, "step_2");
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: holds both a single-rank trace (step_2/) and rank folders "
           "(rank_0/); a trace is one or the other", dir);
  ck_assert_str_eq(err, want);
  rmdir(npy);
  write_in(dir, "amax.csv", CSV, strlen(CSV));
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: holds both a single-rank trace (amax.csv) and rank folders "
           "(rank_0/); a trace is one or the other", dir);
  ck_assert_str_eq(err, want);
  /* the rank folders of a rank are not looked at: rank_0/rank_0/ is just ignored there */
  p = tu_path(dir, "amax.csv");
  unlink(p);
  free(p);
  char *nested = mkdir_in(r0, "rank_0");
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(tr.ranks[0].nranks, 0);
  fp8_trace_close(&tr);
  /* an empty folder: the message mentions rank folders */
  char *empty = mkdir_in(dir, "empty");
  ck_assert_int_eq(fp8_trace_open(empty, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: not a trace: no step_<N>.safetensors files, step_<N>/ folders, "
           "amax.csv or rank_<r>/ folders", empty);
  ck_assert_str_eq(err, want);
  free(empty);
  free(nested);
  free(npy);
  free(big);
  free(r01);
  free(r0);
  free(r1);
  free(r2);
  free(r3);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

TU_MAIN("trace_dir", "dir", NULL, NULL, 0, trace_steps, trace_errors, trace_ranks,
        trace_rank_errors)
