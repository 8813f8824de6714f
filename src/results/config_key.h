/* config_key.h: the one key of a configuration, as every result file spells it (recipe, kind,
 * format, history_len, margin, amax_compute): compared, grouped, printed and parsed here only.
 * The runner's fp8_config (experiment.h) is what ran; this is how a result file names it.
 * history_len, margin and amax_compute are delayed scaling's (0, 0 and FP8_AMAX_MAX for every
 * other kind, the CSV columns empty). */
#ifndef FP8LAB_RESULTS_CONFIG_KEY_H
#define FP8LAB_RESULTS_CONFIG_KEY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fp8.h"
#include "recipe.h" /* fp8_recipe_kind */

typedef struct {
  const char *recipe;            /**< the section's label */
  fp8_recipe_kind kind;
  fp8_format format;
  int32_t history_len, margin;   /**< delayed only; 0 otherwise */
  fp8_amax_compute amax_compute; /**< delayed only; FP8_AMAX_MAX otherwise */
} fp8_config_key;

/** The fields a comparison leaves out (or-ed; 0: all of them compared). */
enum {
  FP8_KEY_IGNORE_RECIPE = 1,
  FP8_KEY_IGNORE_KIND = 2,
  FP8_KEY_IGNORE_FORMAT = 4,
  FP8_KEY_IGNORE_HISTORY = 8,
  FP8_KEY_IGNORE_MARGIN = 16,
  FP8_KEY_IGNORE_AMAX_COMPUTE = 32,
};

/** Orders keys by recipe (strcmp), kind, format, history_len, amax_compute (max first), then
 *  margin (so that the margins of one (recipe, format, history_len, amax_compute) line sit
 *  together, ascending), skipping the fields in ignore. */
int fp8_config_key_cmp(const fp8_config_key *a, const fp8_config_key *b, unsigned ignore);
/** 1 when a and b agree on every field not in ignore. */
static inline int fp8_config_key_equal(const fp8_config_key *a, const fp8_config_key *b,
                                       unsigned ignore) {
  return fp8_config_key_cmp(a, b, ignore) == 0;
}

/** The three delayed-scaling columns and their commas: "<history_len>,<margin>,<amax_compute>,"
 *  for delayed scaling, ",,," for every other kind (or when delayed is 0). */
void fp8_config_key_put_delayed_csv(FILE *fp, const fp8_config_key *k, int delayed);

/** Parses a configuration's columns as the result files hold them (format NULL: a file
 *  without the column, gemm.csv): recipe a label of 1..63 of [A-Za-z0-9_.-]; kind a
 *  fp8_recipe_kind_name (gemm.csv: also "mixed", FP8_KIND_MIXED); format e4m3 or e5m2; history_len 1..FP8_HISTORY_LIMIT, margin
 *  -FP8_MARGIN_LIMIT..FP8_MARGIN_LIMIT and amax_compute max or most_recent for delayed
 *  scaling, all three empty otherwise. k->recipe points to the recipe field. Returns -1 when
 *  they parse, else the index of the first bad one (0 recipe, 1 kind, 2 format, 3
 *  history_len, 4 margin, 5 amax_compute) with *what set to what was expected. */
int fp8_config_key_parse(const char *recipe, const char *kind, const char *format,
                         const char *history_len, const char *margin, const char *amax_compute,
                         fp8_config_key *k, const char **what);

/** The ways a key is written in words. */
typedef enum {
  FP8_KEY_LABEL_TEXT,  /**< "d e4m3 history_len 16 margin 0 max" ("c e4m3" for current) */
  FP8_KEY_LABEL_WORDS, /**< "delayed scaling (recipe d; e4m3; history_len 16; margin 0; max)",
                            "current scaling (recipe c; e4m3)" */
  FP8_KEY_LABEL_SHORT, /**< without the format: "d L=16 m=0 max" ("recent" for most_recent),
                            "current scaling" (the label current), "c (current scaling)",
                            "b (block)" for other kinds */
} fp8_config_key_style;
/** The key in style written into buf (len bytes, truncated); returns buf. */
const char *fp8_config_key_label(const fp8_config_key *k, fp8_config_key_style style, char *buf,
                                 size_t len);

#endif
