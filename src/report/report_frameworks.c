/* report_frameworks.c: the report's answer for the frameworks that train in FP8 besides plain
 * TransformerEngine (issue 45): megatron_args.txt (Megatron-LM's arguments for the whole-model
 * recipe), megatron_precision.yaml (its per-module precision file, for the modules that need
 * current scaling or BF16) and torchao_config.py (torchao's float8 training, which has no
 * delayed scaling: current scaling per tensor, the modules kept in BF16 filtered out). Every
 * name in them is Megatron-LM's or torchao's as their sources spell it (docs/frameworks/
 * megatron.md and torchao.md cite the lines); each file says what it cannot express.
 * The modules are te_recipe.py's (rep_te_modules): the same fold of tensors into modules.
 * tests/report/test_frameworks.py checks every argument and key against those sources'
 * names, transcribed. */
#include "report_internal.h"

#include <stdlib.h>
#include <string.h>

#include "outfile.h"
#include "util.h"

void rep_put_glob(FILE *fp, const char *s, size_t n) {
  fputc('"', fp);
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '*' || s[i] == '?' || s[i] == '[') fprintf(fp, "[%c]", s[i]);
    else {
      if (s[i] == '\\' || s[i] == '"') fputc('\\', fp);
      fputc(s[i], fp);
    }
  }
  fputc('"', fp);
}

const char *rep_megatron_format(const rep_t *r, const fp8_recommendation *x) {
  return strcmp(rep_te_format(r, x), "E4M3") == 0 ? "e4m3" : "hybrid";
}

void rep_put_megatron_recipe(FILE *fp, const rep_t *r, const fp8_recommendation *x) {
  const int delayed = x->key.kind == FP8_KIND_DELAYED;
  fputs("# Names as Megatron-LM spells them (megatron/core/transformer/transformer_config.py,\n"
        "# from which core_v0.16.0 and later generate the flags; the same flags by hand in\n"
        "# megatron/training/arguments.py up to core_v0.15; docs/frameworks/megatron.md).\n", fp);
  if (delayed)
    fputs("# Megatron-LM's own delayed-scaling defaults are history 1, most_recent (TE's\n"
          "# DelayedScaling: 1024, max): every flag is given, not only those that differ.\n", fp);
  fprintf(fp, "--fp8-format %s\n--fp8-recipe %s\n", rep_megatron_format(r, x),
          delayed ? "delayed" : "tensorwise");
  if (delayed)
    fprintf(fp, "--fp8-amax-history-len %d\n--fp8-amax-compute-algo %s\n--fp8-margin %d\n",
            (int)x->key.history_len, fp8_amax_compute_name(x->key.amax_compute),
            (int)x->key.margin);
}

void rep_put_yaml_matcher(FILE *fp, const char *key, const char *config, const char *module,
                          size_t len) {
  fprintf(fp, "  %s:\n    config: \"%s\"\n    type: \"glob\"\n    pattern: ", key, config);
  rep_put_glob(fp, module, len);
  fputs("\n    enabled: true\n", fp);
}

void rep_put_megatron_yaml_head(FILE *fp, const char *args) {
  fprintf(fp, " (--te-precision-config-file, from\n"
          "# core_v0.16.0: megatron/core/quantization/quant_config.py reads it, the TE backend's\n"
          "# TEQuantizationParams in megatron/core/extensions/transformer_engine.py takes the\n"
          "# recipes; docs/frameworks/megatron.md). The first enabled matcher whose glob matches a\n"
          "# module's path wins; a module no matcher matches keeps the global recipe\n"
          "# (%s). The patterns are the trace's module names: Megatron's paths are\n"
          "# like decoder.layers.<i>.self_attention.linear_qkv and decoder.layers.<i>.mlp.linear_fc1,\n"
          "# <i> the layer's index within its pipeline stage, from 0. A trace captured from another\n"
          "# model names its own modules, and names model.<...> from nvdlfw_inspect's\n"
          "# infer_and_assign_layer_names number the layers by Megatron's layer_number (from 1, over\n"
          "# the whole model): edit the patterns to the paths. fp8lab has not run Megatron-LM.\n"
          "configs:\n"
          "  bf16:  # kept out of FP8\n"
          "    transformer_engine_config_type: \"TEQuantizationParams\"\n"
          "    training_recipe: {}\n", args);
}

static int write_megatron(rep_t *r, const fp8_recommendation *x, const rep_te_mod *m, size_t nm,
                          char *err, size_t errlen) {
  const int delayed = x->key.kind == FP8_KIND_DELAYED;
  const char *fmt = rep_megatron_format(r, x);
  size_t nfix = 0, nmargin = 0;
  for (size_t j = 0; j < nm; j++) {
    if (m[j].rem == REP_REMEDY_BF16 || m[j].rem == REP_REMEDY_CURRENT) nfix++;
    else nmargin++;
  }
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, r->outdir, "megatron_args.txt", err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  fputs("# megatron_args.txt: the advice of fp8lab's report as Megatron-LM arguments (fp8lab\n"
        "# report wrote it beside report.md). Add the lines below to the training command.\n", fp);
  rep_put_megatron_recipe(fp, r, x);
  if (nfix)
    fputs("# the modules that need current scaling or BF16 (core_v0.16.0 and later; PyYAML). Not\n"
          "# verified here: a per-module file under --fp8-recipe delayed (Megatron's tests pair it\n"
          "# with other global recipes); check the modules' recipes in the first steps' log.\n"
          "--te-precision-config-file megatron_precision.yaml\n", fp);
  if (nmargin) {
    fputs("# Cannot express: a per-module margin under delayed scaling (Megatron's per-module file\n"
          "# refuses delayed recipes). These modules need a larger margin than --fp8-margin:\n", fp);
    for (size_t j = 0; j < nm; j++)
      if (m[j].rem >= 0)
        fprintf(fp, "#   %.*s: margin %d (raise --fp8-margin to it, or give the module current\n"
                    "#   scaling, fp8_quantization_recipe tensorwise, in a --te-precision-config-file)\n",
                (int)m[j].len, m[j].name, (int)m[j].rem);
  }
  if (delayed)
    fputs("# Not this way: --first-last-layers-bf16 (Megatron refuses it with delayed scaling).\n",
          fp);
  rc = fp8_outfile_commit(&of, err, errlen);
  if (rc) return rc;
  r->wrote_frameworks |= 1;
  if (!nfix) return FP8_OK;

  rc = fp8_outfile_open(&of, r->outdir, "megatron_precision.yaml", err, errlen);
  if (rc) return rc;
  fp = of.fp;
  fputs("# megatron_precision.yaml: the modules of fp8lab's advice that need current scaling or\n"
        "# BF16, as Megatron-LM's per-module precision file", fp);
  rep_put_megatron_yaml_head(fp, "megatron_args.txt");
  fputs("  current:  # current scaling (Float8CurrentScaling)\n"
        "    transformer_engine_config_type: \"TEQuantizationParams\"\n"
        "    training_recipe:\n"
        "      fp8_quantization_recipe: \"tensorwise\"\n", fp);
  fprintf(fp, "      fp8_format: \"%s\"\nmatchers:\n", fmt);
  for (size_t j = 0, k = 0; j < nm; j++) {
    if (m[j].rem >= 0) continue;
    char key[32];
    snprintf(key, sizeof key, "module_%zu", k++);
    rep_put_yaml_matcher(fp, key, m[j].rem == REP_REMEDY_BF16 ? "bf16" : "current", m[j].name,
                         m[j].len);
  }
  rc = fp8_outfile_commit(&of, err, errlen);
  if (!rc) r->wrote_frameworks |= 2;
  return rc;
}

static int write_torchao(rep_t *r, const fp8_recommendation *x, const rep_te_mod *m, size_t nm,
                         char *err, size_t errlen) {
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, r->outdir, "torchao_config.py", err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  const int hybrid = strcmp(rep_te_format(r, x), "E4M3") != 0;
  const int in_run = r->cur >= 0;
  fputs("# torchao_config.py: the advice of fp8lab's report as torchao float8 training (fp8lab\n"
        "# report wrote it beside report.md). torchao 0.10.0 or later (convert_to_float8_training,\n"
        "# Float8LinearConfig.from_recipe_name; docs/frameworks/torchao.md cites torchao 0.18.0).\n"
        "# torchao has no delayed scaling (removed in 0.10.0): its \"tensorwise\" recipe is current\n"
        "# scaling per tensor, E4M3 forward and E5M2 gradients, what fp8lab's replay calls current\n"
        "# scaling with format hybrid. Use it after building the model, before torch.compile:\n"
        "#     import torchao_config\n"
        "#     model = torchao_config.apply(model)\n"
        "# Cannot express: the advised delayed-scaling setting (history length, margin, amax\n"
        "# compute) and its per-module margins: under current scaling no largest element clips.\n", fp);
  if (!hybrid)
    fputs("# Cannot express: format e4m3 for the gradients too (tensorwise keeps E5M2 for them).\n",
          fp);
  fputs(in_run ? "# This run replayed current scaling: the report's rows of its configuration are what\n"
                 "# this file does (up to torchao's arithmetic).\n"
               : "# This run did not replay current scaling: add a [recipe.*] section with kind =\n"
                 "# current to the experiment and run it again before relying on this file.\n", fp);
  fputs("from torchao.float8 import Float8LinearConfig, convert_to_float8_training\n\n"
        "RECIPE = \"tensorwise\"\n\n"
        "# modules the advice keeps out of FP8: their paths in model.named_modules(), with every\n"
        "# nn.Linear inside them (torchao calls the filter with each nn.Linear's own path)\n"
        "KEEP_BF16 = frozenset([\n", fp);
  for (size_t j = 0; j < nm; j++) {
    if (m[j].rem != REP_REMEDY_BF16) continue;
    fputs("    ", fp);
    rep_put_pystr(fp, m[j].name, m[j].len);
    fputs(m[j].router ? ",  # Mixture-of-Experts router\n" : ",\n", fp);
  }
  fputs("])\n\n\n"
        "def module_filter_fn(module, fqn):\n"
        "    \"\"\"torchao's filter (module, fqn) -> bool: True converts that nn.Linear to float8.\"\"\"\n"
        "    if any(fqn == k or fqn.startswith(k + \".\") for k in KEEP_BF16):\n"
        "        return False\n"
        "    # torchao's docs: its float8 GEMMs need both dimensions divisible by 16\n"
        "    return module.in_features % 16 == 0 and module.out_features % 16 == 0\n\n\n"
        "def apply(model):\n"
        "    \"\"\"The model with its nn.Linear layers converted (KEEP_BF16 left as they are).\"\"\"\n"
        "    names = {name for name, _ in model.named_modules()}\n"
        "    missing = sorted(KEEP_BF16 - names)\n"
        "    if missing:\n"
        "        raise KeyError(\"torchao_config: not modules of this model: \" + \", \".join(missing))\n"
        "    return convert_to_float8_training(model, module_filter_fn=module_filter_fn,\n"
        "                                      config=Float8LinearConfig.from_recipe_name(RECIPE))\n",
        fp);
  rc = fp8_outfile_commit(&of, err, errlen);
  if (!rc) r->wrote_frameworks |= 4;
  return rc;
}

int rep_write_frameworks(rep_t *r, char *err, size_t errlen) {
  const fp8_recommendation *x = rep_model_rec(r);
  if (!x || !x->in_run || (x->key.kind != FP8_KIND_DELAYED && x->key.kind != FP8_KIND_CURRENT) ||
      strcmp(rep_te_format(r, x), "E5M2") == 0) /* neither framework trains all in E5M2 */
    return FP8_OK;
  size_t nm = 0;
  rep_te_mod *m = NULL;
  if (x->key.kind == FP8_KIND_DELAYED && x->meets_budget) {
    m = rep_te_modules(r, x, &nm);
    if (!m) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  int rc = write_megatron(r, x, m, nm, err, errlen);
  if (!rc) rc = write_torchao(r, x, m, nm, err, errlen);
  free(m);
  return rc;
}
