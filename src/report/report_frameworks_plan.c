/* report_frameworks_plan.c: the BF16 demotion plans (report_bf16_plan.c) in the frameworks'
 * forms (issue 45), beside megatron_args.txt and torchao_config.py (report_frameworks.c):
 * - megatron_bf16_plan_fp8.txt (+ .yaml): the answer's delayed-scaling flags and the plan's
 *   layers in BF16 through a per-module file, since Megatron-LM refuses its first/last-layer
 *   flags with delayed scaling;
 * - megatron_bf16_plan_fp4.txt (+ .yaml): NVFP4 (--fp4-format e2m1 --fp4-recipe nvfp4) with
 *   the plan's layers in BF16: --first-last-layers-bf16 and its counts when they are whole
 *   transformer blocks at the model's ends, else the per-module file;
 * - torchao_bf16_plan.py: each plan's layers in order and apply(model, plan, steps), torchao's
 *   conversion with a filter that leaves the first `steps` layers out.
 * Names as docs/frameworks/megatron.md and torchao.md cite them; each file says what it cannot
 * express. tests/report/test_bf16_plan.py checks them against the plans. */
#include <stdlib.h>
#include <string.h>

#include "outfile.h"
#include "report_internal.h"
#include "util.h"

/* The plan's steps, in order, as comment lines. */
static void put_steps(FILE *fp, const rep_t *r, const rep_plan *p) {
  fputs("# The plan (bf16_plan.csv), a layer per step:\n", fp);
  for (size_t k = 0; k < p->nsteps; k++) {
    const rep_plan_step *s = &p->steps[k];
    fprintf(fp, "#   %zu. %.*s", k + 1, (int)s->len, s->name);
    if (r->run.has_model_shape) fprintf(fp, " (GEMM FLOPs in BF16 then: %.3g%%)", 100.0 * s->share);
    fputc('\n', fp);
  }
}

/* The per-module file of plan p (REP_PF_MEGATRON_*_YAML): one matcher per step, in order. */
static int write_yaml(rep_t *r, const rep_plan *p, int file, const char *args, char *err,
                      size_t errlen) {
  fp8_outfile of;
  int rc = rep_plan_file_open(r, file, &of, err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  fputs(" (bf16_plan.csv) as Megatron-LM's\n# per-module precision file", fp);
  rep_put_megatron_yaml_head(fp, args);
  fputs("# One matcher per step of the plan, in its order: to stop at step k, set enabled: false\n"
        "# on the matchers after step_<k>.\n"
        "matchers:\n", fp);
  for (size_t k = 0; k < p->nsteps; k++) {
    char key[32];
    snprintf(key, sizeof key, "step_%zu", k + 1);
    rep_put_yaml_matcher(fp, key, "bf16", p->steps[k].name, p->steps[k].len);
  }
  return rep_plan_file_commit(r, file, &of, err, errlen);
}

static int megatron_fp8(rep_t *r, const rep_plan *p, char *err, size_t errlen) {
  if (strcmp(rep_te_format(r, p->x), "E5M2") == 0) return FP8_OK; /* no Megatron format */
  fp8_outfile of;
  int rc = rep_plan_file_open(r, REP_PF_MEGATRON_FP8, &of, err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  fputs(" for FP8 as Megatron-LM\n"
        "# arguments (fp8lab report wrote it beside report.md): the answer's whole-model\n"
        "# delayed-scaling setting, with the plan's layers kept in BF16 by the per-module file\n"
        "# megatron_bf16_plan_fp8.yaml. Add the lines below to the training command.\n", fp);
  put_steps(fp, r, p);
  rep_put_megatron_recipe(fp, r, p->x);
  fputs("# the plan's layers in BF16 (core_v0.16.0 and later; PyYAML). Not verified here: a\n"
        "# per-module file under --fp8-recipe delayed (Megatron's tests pair it with other global\n"
        "# recipes); check the modules' recipes in the first steps' log.\n"
        "--te-precision-config-file megatron_bf16_plan_fp8.yaml\n"
        "# Cannot express: --first-last-layers-bf16 with delayed scaling (Megatron-LM refuses it:\n"
        "# \"Delayed scaling does not support first / last layer in BF16.\").\n", fp);
  for (size_t k = 0; k < p->nsteps; k++)
    if (p->steps[k].mg_start >= 0)
      fprintf(fp, "# Step %zu's layers are the first %d and the last %d transformer layers: with a\n"
              "# non-delayed --fp8-recipe (tensorwise, blockwise, mxfp8) that step is\n"
              "# --first-last-layers-bf16 --num-layers-at-start-in-bf16 %d --num-layers-at-end-in-bf16 %d\n",
              k + 1, p->steps[k].mg_start, p->steps[k].mg_end, p->steps[k].mg_start,
              p->steps[k].mg_end);
  rc = rep_plan_file_commit(r, REP_PF_MEGATRON_FP8, &of, err, errlen);
  return rc ? rc : write_yaml(r, p, REP_PF_MEGATRON_FP8_YAML, "megatron_bf16_plan_fp8.txt", err,
                              errlen);
}

/* 1 when the configuration's settings are TE's NVFP4BlockScaling defaults, which is what
 * Megatron-LM's --fp4-recipe nvfp4 builds (docs/frameworks/megatron.md 3). */
static int te_default_nvfp4(const char *lines) {
  static const char *const keys[][2] = {{"block", "auto"}, {"rht", "true"}, {"rounding", "auto"},
                                        {"block_scale", "max6"}};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    char line[64];
    int n = snprintf(line, sizeof line, "%s = ", keys[i][0]);
    const char *at = lines;
    while (at && (at = strstr(at, line)) != NULL && at != lines && at[-1] != '\n') at++;
    if (at && strncmp(at + n, keys[i][1], strlen(keys[i][1])) != 0) return 0;
  }
  return 1;
}

static int megatron_fp4(rep_t *r, const rep_plan *p, char *err, size_t errlen) {
  const rep_plan_step *last = &p->steps[p->nsteps - 1];
  const int ends = last->mg_start >= 0;
  fp8_outfile of;
  int rc = rep_plan_file_open(r, REP_PF_MEGATRON_FP4, &of, err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  fprintf(fp, " for FP4 as Megatron-LM\n"
          "# arguments (fp8lab report wrote it beside report.md): NVFP4 for the model (%s in\n"
          "# the replay), with the plan's layers kept in BF16 %s. Add the lines below to the\n"
          "# training command. Names as Megatron-LM spells them (docs/frameworks/megatron.md:\n"
          "# --fp4-format and --fp4-recipe from core_v0.15.0, TransformerEngine 2.7 or later).\n",
          r->cfgs[p->cfg].dlabel,
          ends ? "by Megatron-LM's first/last-layer flags (they are whole transformer\n"
                 "# layers at the model's ends, counted on the trace's numbered blocks)"
               : "by the per-module file megatron_bf16_plan_fp4.yaml");
  put_steps(fp, r, p);
  const char *set = rep_settings_of(r, p->cfg);
  if (set && !te_default_nvfp4(set))
    fputs("# Cannot express: the replayed configuration's block, rht, rounding or block_scale\n"
          "# setting: --fp4-recipe nvfp4 builds TransformerEngine's NVFP4BlockScaling() with its\n"
          "# defaults (block auto, rht true, rounding auto, block_scale max6).\n", fp);
  fputs("--fp4-format e2m1\n--fp4-recipe nvfp4\n", fp);
  if (ends)
    fprintf(fp, "--first-last-layers-bf16\n--num-layers-at-start-in-bf16 %d\n"
            "--num-layers-at-end-in-bf16 %d\n", last->mg_start, last->mg_end);
  else
    fputs("# the plan's layers in BF16 (core_v0.16.0 and later; PyYAML)\n"
          "--te-precision-config-file megatron_bf16_plan_fp4.yaml\n", fp);
  rc = rep_plan_file_commit(r, REP_PF_MEGATRON_FP4, &of, err, errlen);
  if (rc || ends) return rc;
  return write_yaml(r, p, REP_PF_MEGATRON_FP4_YAML, "megatron_bf16_plan_fp4.txt", err, errlen);
}

static const char TORCHAO_APPLY[] =
    "def apply(model, plan, steps=None):\n"
    "    \"\"\"The model converted by torchao, the first `steps` layers of PLANS[plan] (default:\n"
    "    all) left as they are. plan \"fp8\": float8 training with the tensorwise recipe, \"fp4\":\n"
    "    NVFP4 training.\"\"\"\n"
    "    if plan not in PLANS:\n"
    "        raise KeyError(\"torchao_bf16_plan: this run has no %r plan (it has %s)\"\n"
    "                       % (plan, \", \".join(sorted(PLANS))))\n"
    "    layers = PLANS[plan]\n"
    "    steps = len(layers) if steps is None else steps\n"
    "    if not 0 <= steps <= len(layers):\n"
    "        raise ValueError(\"torchao_bf16_plan: steps %r: the %s plan has 0 to %d\"\n"
    "                         % (steps, plan, len(layers)))\n"
    "    keep = frozenset(layers[:steps])\n"
    "    missing = sorted(keep - {name for name, _ in model.named_modules()})\n"
    "    if missing:\n"
    "        raise KeyError(\"torchao_bf16_plan: not modules of this model: \" + \", \".join(missing))\n"
    "\n"
    "    def kept(fqn):  # the layer itself, or a Linear inside it (an experts module's experts)\n"
    "        return any(fqn == k or fqn.startswith(k + \".\") for k in keep)\n"
    "\n"
    "    if plan == \"fp8\":\n"
    "        from torchao.float8 import Float8LinearConfig, convert_to_float8_training\n"
    "\n"
    "        def module_filter_fn(module, fqn):\n"
    "            # torchao's docs: its float8 GEMMs need both dimensions divisible by 16\n"
    "            return not kept(fqn) and module.in_features % 16 == 0 and \\\n"
    "                module.out_features % 16 == 0\n"
    "\n"
    "        return convert_to_float8_training(\n"
    "            model, module_filter_fn=module_filter_fn,\n"
    "            config=Float8LinearConfig.from_recipe_name(\"tensorwise\"))\n"
    "    import torch\n"
    "    from torchao.prototype.moe_training.nvfp4_training.nvfp4_training import NVFP4TrainingConfig\n"
    "    from torchao.quantization import quantize_\n"
    "\n"
    "    def filter_fn(module, fqn):  # quantize_'s default filter is replaced: the Linear test too\n"
    "        return isinstance(module, torch.nn.Linear) and not kept(fqn)\n"
    "\n"
    "    quantize_(model, NVFP4TrainingConfig(), filter_fn=filter_fn)\n"
    "    return model\n";

/* A plan's layers as the lines of a Python list, in step order. */
static void put_layers(FILE *fp, const rep_plan *p) {
  for (size_t k = 0; k < p->nsteps; k++) {
    fputs("        ", fp);
    rep_put_pystr(fp, p->steps[k].name, p->steps[k].len);
    fprintf(fp, ",  # step %zu\n", k + 1);
  }
}

static int torchao(rep_t *r, const rep_plan *p8, const rep_plan *p4, char *err, size_t errlen) {
  fp8_outfile of;
  int rc = rep_plan_file_open(r, REP_PF_TORCHAO, &of, err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  fputs(" (bf16_plan.csv) as torchao training\n"
        "# (fp8lab report wrote it beside report.md): each plan's layers in its order, and\n"
        "# apply(), which converts the model leaving the plan's first `steps` layers out:\n"
        "#     import torchao_bf16_plan\n"
        "#     model = torchao_bf16_plan.apply(model, \"fp8\")  # or \"fp4\"; steps=k for step k\n"
        "# The names are the trace's module names (their paths in model.named_modules() for\n"
        "# fp8lab's capture tool); apply() refuses a name the model lacks.\n", fp);
  if (p8)
    fprintf(fp, "# fp8: torchao's float8 training (torchao 0.10.0 or later), recipe \"tensorwise\":\n"
            "# current scaling per tensor. Cannot express: the delayed-scaling setting the plan was\n"
            "# made under (%s; torchao has no delayed scaling since 0.10.0). Under\n"
            "# current scaling no largest element clips, so these are the layers the replay found\n"
            "# missing the budgets under that setting, kept out of FP8 here as they would be there.\n",
            r->cfgs[p8->cfg].dlabel);
  if (p4)
    fprintf(fp, "# fp4: torchao's NVFP4 training (NVFP4TrainingConfig through quantize_; torchao\n"
            "# 0.18.0, a prototype). Cannot express: the replayed configuration (%s): torchao's\n"
            "# NVFP4 training has its own kernels and defaults, which fp8lab did not replay.\n",
            r->cfgs[p4->cfg].dlabel);
  fputs("\nPLANS = {\n", fp);
  const rep_plan *ps[2] = {p8, p4};
  static const char *const names[2] = {"fp8", "fp4"};
  for (int w = 0; w < 2; w++) {
    if (!ps[w]) continue;
    fprintf(fp, "    \"%s\": [\n", names[w]);
    put_layers(fp, ps[w]);
    fputs("    ],\n", fp);
  }
  fputs("}\n\n\n", fp);
  fputs(TORCHAO_APPLY, fp);
  return rep_plan_file_commit(r, REP_PF_TORCHAO, &of, err, errlen);
}

static const char TE_APPLY[] =
    "\n"
    "\n"
    "def apply_plan(model, plan, steps=None):\n"
    "    \"\"\"Applies step `steps` of PLANS[plan] (default: its last) to model, once, before\n"
    "    training: the plan's recipe for the model (model_region()), its first `steps` layers kept\n"
    "    out of FP8 (their forwards in a region of their own, FP8 off). apply()'s rules find the\n"
    "    layers and warn of what the plan does not reach; returns apply()'s dict.\"\"\"\n"
    "    global MODEL_RECIPE\n"
    "    if plan not in PLANS:\n"
    "        raise KeyError(\"te_bf16_plan: this run has no %r plan (it has %s)\"\n"
    "                       % (plan, \", \".join(sorted(PLANS))))\n"
    "    make, layers = PLANS[plan]\n"
    "    steps = len(layers) if steps is None else steps\n"
    "    if not 0 <= steps <= len(layers):\n"
    "        raise ValueError(\"te_bf16_plan: steps %r: the %s plan has 0 to %d\"\n"
    "                         % (steps, plan, len(layers)))\n"
    "    MODEL_RECIPE = make()\n"
    "    MODULES.clear()\n"
    "    MODULES.update({name: None for name in layers[:steps]})\n"
    "    return apply(model, form=\"module\")\n";

/* te_bf16_plan.py: the plans as TransformerEngine code, te_recipe.py's name resolver and
 * regions (rep_put_te_footer) driven by apply_plan(): the plan's recipe, its first k layers in
 * BF16. */
static int te_plan(rep_t *r, const rep_plan *p8, const rep_plan *p4, char *err, size_t errlen) {
  fp8_outfile of;
  int rc = rep_plan_file_open(r, REP_PF_TE, &of, err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  fputs(" (bf16_plan.csv) as TransformerEngine\n"
        "# code (fp8lab report wrote it beside report.md): each plan's recipe for the model and its\n"
        "# layers in order; apply_plan() keeps the plan's first `steps` layers out of FP8:\n"
        "#     import te_bf16_plan\n"
        "#     te_bf16_plan.apply_plan(model, \"fp8\")  # or \"fp4\"; steps=k for step k (default: all)\n"
        "#     with te_bf16_plan.model_region():\n"
        "#         loss = model(batch)\n"
        "#     loss.backward()\n"
        "# The names are the trace's, found as te_recipe.py finds them (a module's TE name or its\n"
        "# path; docs/frameworks/te.md); apply_plan() refuses a name the model lacks and warns of\n"
        "# advised modules that are not TE modules and of TE modules the replay did not cover.\n"
        "# bf16_plan.ini replays each step (label <plan>_plan_<k>).\n", fp);
  if (p8)
    fprintf(fp, "# fp8: the answer's whole-model setting (%s), as DelayedScaling.\n",
            r->cfgs[p8->cfg].dlabel);
  const char *set = p4 ? rep_settings_of(r, p4->cfg) : NULL;
  if (p4)
    fprintf(fp, "# fp4: %s as NVFP4BlockScaling() (TransformerEngine 2.8 or later)%s\n",
            r->cfgs[p4->cfg].dlabel,
            set && !te_default_nvfp4(set)
                ? ". Cannot express: the\n# replayed configuration's block, rht, rounding or "
                  "block_scale setting differs from TE's\n# defaults (block auto, rht true, "
                  "rounding auto, block_scale max6), which this recipe takes."
                : ": TE's defaults, the replayed\n# configuration's.");
  fputs("import contextlib\n"
        "import types\n"
        "import warnings\n"
        "\n"
        "import transformer_engine.pytorch as te\n"
        "from transformer_engine.common.recipe import DelayedScaling, Format\n\n", fp);
  if (p8) {
    const fp8_recommendation *x = p8->x;
    fprintf(fp, "\ndef _fp8_recipe():\n    return DelayedScaling(fp8_format=Format.%s, "
            "amax_history_len=%d, margin=%d,\n                          amax_compute_algo=\"%s\")\n",
            rep_te_format(r, x), (int)x->key.history_len, (int)x->key.margin,
            fp8_amax_compute_name(x->key.amax_compute));
  }
  if (p4)
    fputs("\ndef _fp4_recipe():  # imported here: TE before 2.8 has no NVFP4\n"
          "    from transformer_engine.common.recipe import NVFP4BlockScaling\n"
          "    return NVFP4BlockScaling()\n", fp);
  fputs("\n\nPLANS = {  # plan -> (its recipe, its layers in order: step k keeps the first k in BF16)\n", fp);
  const rep_plan *ps[2] = {p8, p4};
  static const char *const names[2] = {"fp8", "fp4"};
  for (int w = 0; w < 2; w++) {
    if (!ps[w]) continue;
    fprintf(fp, "    \"%s\": (_%s_recipe, [\n", names[w], names[w]);
    put_layers(fp, ps[w]);
    fputs("    ]),\n", fp);
  }
  fputs("}\n\nMODEL_RECIPE = None  # apply_plan() sets it: the plan's recipe\n"
        "MODULES = {}  # apply_plan() sets it: the plan's first `steps` layers, None (BF16)\n"
        "TENSORS = {}  # no per-tensor settings: a plan has one recipe for the rest\n", fp);
  if (rep_put_te_covered(fp, r)) {
    fp8_outfile_abort(&of);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  rep_put_te_footer(fp);
  fputs(TE_APPLY, fp);
  return rep_plan_file_commit(r, REP_PF_TE, &of, err, errlen);
}

int rep_write_bf16_plan_frameworks(rep_t *r, char *err, size_t errlen) {
  const rep_plan *p8 = rep_bf16_plan(r, REP_PLAN_FP8), *p4 = rep_bf16_plan(r, REP_PLAN_FP4);
  if (p8 && !p8->nsteps) p8 = NULL; /* nothing to keep in BF16 */
  if (p4 && !p4->nsteps) p4 = NULL;
  int rc = FP8_OK;
  if (p8) rc = megatron_fp8(r, p8, err, errlen);
  if (!rc && p4) rc = megatron_fp4(r, p4, err, errlen);
  if (!rc && (p8 || p4)) rc = torchao(r, p8, p4, err, errlen);
  if (!rc && (p8 || p4)) rc = te_plan(r, p8, p4, err, errlen);
  return rc;
}
