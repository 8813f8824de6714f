/* report_gemm_mix.c: the GEMMs of a mixed recipe whose two operands come from sections that
 * TransformerEngine has no GEMM for (issue 45; docs/frameworks/te_gemm_mix.md, which cites the
 * sources). fp8lab computes the error of any combination from the dequantized operands
 * (gemm.h); the GEMM error section says, per recipe label, which GEMMs TE could not run and
 * what TE does instead. Found when the run is loaded, from gemm.csv's rows of the mixed
 * recipes and steps.csv's groups of their operand tensors (each tensor's section). */
#include "report_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h" /* fp8_gemm_operand_role, fp8_gemm_lt_has_formats */

/* One (configuration, GEMM, the two operands' kinds and formats) TE has no GEMM for, over
 * nlayers layers. */
struct rep_gemm_mix {
  size_t c;
  int g;
  fp8_recipe_kind ka, kb;
  fp8_format fa, fb;
  size_t nlayers;
  const char *layer; /* while loading: the row's layer (gemm.csv's text) */
};

/* TE's scaling modes (NVTEScalingMode), as its quantizers set them: delayed and current
 * scaling share the per-tensor one; MXFP4 and row-wise scaling have no TE GEMM; BF16 is not
 * quantized. */
typedef enum { TM_TENSOR, TM_MXFP8, TM_BLOCK, TM_NVFP4, TM_NO_TE, TM_HIGH } te_mode;

static te_mode mode_of(fp8_recipe_kind k) {
  switch (k) {
  case FP8_KIND_DELAYED:
  case FP8_KIND_CURRENT: return TM_TENSOR;
  case FP8_KIND_MXFP8: return TM_MXFP8;
  case FP8_KIND_BLOCK: return TM_BLOCK;
  case FP8_KIND_NVFP4: return TM_NVFP4;
  case FP8_KIND_BF16: return TM_HIGH;
  default: return TM_NO_TE;
  }
}

/* 1 when TE has a GEMM for operands of kinds and formats (ka, fa) and (kb, fb); 0 when it has
 * none: nvte_cublas_gemm requires one scaling mode of both operands (1-D and 2-D FP8 blocks
 * may mix), cuBLASLt has no E5M2 x E5M2 FP8 GEMM, TE has no MXFP4 or row-wise GEMM; -1 where
 * the sources read do not settle it (a BF16 operand by a per-tensor FP8 one: both pass the
 * scaling-mode check). */
static int te_has_gemm(fp8_recipe_kind ka, fp8_format fa, fp8_recipe_kind kb, fp8_format fb) {
  te_mode ma = mode_of(ka), mb = mode_of(kb);
  if (ma == TM_NO_TE || mb == TM_NO_TE) return 0;
  if ((ma == TM_HIGH) != (mb == TM_HIGH)) return ma == TM_TENSOR || mb == TM_TENSOR ? -1 : 0;
  if (ma != mb) return 0;
  return ma != TM_TENSOR || fp8_gemm_lt_has_formats(fa, fb);
}

static int cmp_mix(const void *x, const void *y) {
  const struct rep_gemm_mix *a = x, *b = y;
  if (a->c != b->c) return a->c < b->c ? -1 : 1;
  if (a->g != b->g) return a->g < b->g ? -1 : 1;
  if (a->ka != b->ka) return a->ka < b->ka ? -1 : 1;
  if (a->fa != b->fa) return a->fa < b->fa ? -1 : 1;
  if (a->kb != b->kb) return a->kb < b->kb ? -1 : 1;
  if (a->fb != b->fb) return a->fb < b->fb ? -1 : 1;
  return strcmp(a->layer, b->layer);
}

static int same_combo(const struct rep_gemm_mix *a, const struct rep_gemm_mix *b) {
  return a->c == b->c && a->g == b->g && a->ka == b->ka && a->fa == b->fa && a->kb == b->kb &&
         a->fb == b->fb;
}

/* A mixed configuration's groups by tensor name (bsearch). */
typedef struct {
  const char *tensor;
  size_t g;
} tgroup;

static int cmp_tgroup(const void *x, const void *y) {
  return strcmp(((const tgroup *)x)->tensor, ((const tgroup *)y)->tensor);
}

static const fp8_steps_group *group_named(const rep_t *r, const tgroup *idx, size_t n,
                                          const char *layer, int g, int o) {
  char name[1200];
  snprintf(name, sizeof name, "%s.%s", layer, fp8_gemm_operand_role((fp8_gemm_kind)g, o));
  tgroup key = {name, 0};
  const tgroup *at = bsearch(&key, idx, n, sizeof *idx, cmp_tgroup);
  return at ? &r->tab.groups[at->g] : NULL;
}

int rep_gemm_mix_load(rep_t *r, const fp8_gemm_table *t) {
  struct rep_gemm_mix *v = malloc((t->n + 1) * sizeof *v);
  tgroup *idx = malloc((r->tab.ngroups + 1) * sizeof *idx);
  size_t n = 0;
  if (!v || !idx) {
    free(v);
    free(idx);
    return FP8_ENOMEM;
  }
  for (size_t c = 0; c < r->ncfg; c++) {
    if (!r->cfgs[c].mixed) continue;
    size_t ni = 0;
    for (size_t g = 0; g < r->tab.ngroups; g++)
      if (r->gcfg[g] == c) idx[ni++] = (tgroup){r->tab.groups[g].tensor, g};
    if (ni > 1) qsort(idx, ni, sizeof *idx, cmp_tgroup);
    for (size_t i = 0; i < t->n; i++) {
      const fp8_gemm_row *row = &t->rows[i];
      if (!rep_cfg_matches(&r->cfgs[c], &row->key)) continue;
      int g = (int)row->gemm;
      const fp8_steps_group *a = group_named(r, idx, ni, row->layer, g, 0);
      const fp8_steps_group *b = group_named(r, idx, ni, row->layer, g, 1);
      /* operands of one setting come from one section (or alike ones): nothing to say */
      if (!a || !b || fp8_config_key_equal(&a->key, &b->key, FP8_KEY_IGNORE_RECIPE) ||
          te_has_gemm(a->key.kind, a->key.format, b->key.kind, b->key.format) != 0)
        continue;
      v[n++] = (struct rep_gemm_mix){c, g, a->key.kind, b->key.kind, a->key.format,
                                     b->key.format, 0, row->layer};
    }
  }
  free(idx);
  if (n > 1) qsort(v, n, sizeof *v, cmp_mix);
  size_t m = 0; /* one entry per combination, its distinct layers counted */
  for (size_t i = 0; i < n; i++) {
    if (m == 0 || !same_combo(&v[m - 1], &v[i])) {
      v[m++] = v[i];
      v[m - 1].nlayers = 1;
    } else if (strcmp(v[m - 1].layer, v[i].layer) != 0) {
      v[m - 1].nlayers++;
      v[m - 1].layer = v[i].layer;
    }
  }
  for (size_t i = 0; i < m; i++) v[i].layer = NULL; /* gemm.csv's text is freed after loading */
  r->gmix = v;
  r->ngmix = m;
  return FP8_OK;
}

void rep_gemm_mix_free(rep_t *r) {
  free(r->gmix);
  r->gmix = NULL;
  r->ngmix = 0;
}

/* "nvfp4", "mxfp8 e4m3", "delayed e5m2": an operand's kind and element format. */
static void operand_name(fp8_recipe_kind k, fp8_format f, char *buf, size_t len) {
  if (fp8_recipe_kind_is_fp4(k) || k == FP8_KIND_BF16) snprintf(buf, len, "%s", fp8_recipe_kind_name(k));
  else snprintf(buf, len, "%s %s", fp8_recipe_kind_name(k), fp8_format_name(f));
}

static int is_pair(const struct rep_gemm_mix *x, fp8_recipe_kind p, fp8_recipe_kind q) {
  return (x->ka == p && x->kb == q) || (x->ka == q && x->kb == p);
}

void rep_gemm_mix_text(const rep_t *r, fp8_doc *d) {
  for (size_t i = 0; i < r->ngmix;) {
    const size_t c = r->gmix[i].c;
    char list[2048] = "";
    size_t used = 0;
    int nvmx = 0, e5 = 0, modes = 0, no_te = 0;
    for (; i < r->ngmix && r->gmix[i].c == c; i++) {
      const struct rep_gemm_mix *x = &r->gmix[i];
      char a[64], b[64];
      operand_name(x->ka, x->fa, a, sizeof a);
      operand_name(x->kb, x->fb, b, sizeof b);
      int k = snprintf(list + used, sizeof list - used, "%s%s multiplies %s (%s) by %s (%s) in %zu "
                       "layer%s", used ? "; " : "", fp8_gemm_name((fp8_gemm_kind)x->g),
                       fp8_gemm_operand_role((fp8_gemm_kind)x->g, 0), a,
                       fp8_gemm_operand_role((fp8_gemm_kind)x->g, 1), b, x->nlayers,
                       x->nlayers == 1 ? "" : "s");
      if (k > 0 && (size_t)k < sizeof list - used) used += (size_t)k;
      te_mode ma = mode_of(x->ka), mb = mode_of(x->kb);
      nvmx |= is_pair(x, FP8_KIND_NVFP4, FP8_KIND_MXFP8);
      no_te |= ma == TM_NO_TE || mb == TM_NO_TE;
      modes |= ma != mb && ma != TM_NO_TE && mb != TM_NO_TE;
      e5 |= ma == TM_TENSOR && mb == TM_TENSOR;
    }
    fp8_doc_markdownf(
        d,
        "**%s** multiplies operands that TransformerEngine has no GEMM for: %s.%s%s%s fp8lab "
        "computes their error from the dequantized operands all the same, so these rows are a "
        "what-if. %s See docs/frameworks/te_gemm_mix.md.",
        r->cfgs[c].dlabel, list,
        modes ? " TE's GEMM takes both operands in one scaling mode (`CanonicalizeGemmInput`, "
                "common/gemm/cublaslt_gemm.cu, from v2.9 to main: per-tensor FP8, MXFP8, "
                "NVFP4 and FP8 blocks do not mix)."
              : "",
        e5 ? " cuBLASLt has no E5M2 x E5M2 FP8 GEMM." : "",
        no_te ? " TE has no MXFP4 GEMM and no row-wise FP8 recipe (torchao's)." : "",
        nvmx ? "TE's own MXFP8-forward, NVFP4-backward recipe (main: `mxfp8_fwd_nvfp4_bwd_factory`, "
               "custom_recipes/quantizer_factory_zoo.py) gives the input and the weight a "
               "HybridQuantizer whose column-wise copy is NVFP4 (the weight's quantized again from "
               "its dequantized MXFP8 values), so that its dgrad and wgrad are NVFP4 x NVFP4; "
               "fp8lab gives a tensor one section for both directions and cannot replay that."
        : e5 ? "TE's recipes pair E5M2 gradients with E4M3 operands (format hybrid)."
             : "A TE recipe that mixes them gives a tensor a second quantizer for the direction "
               "the other operand needs (main's HybridQuantizer), so that both operands of each "
               "GEMM share one scaling mode.");
  }
}
