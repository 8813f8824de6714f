/* report_notebook.c: the notebook's "Explore the data" cells (notebook only: the Markdown
 * report has none). They run on a full run folder and on the reduced copy that `make notebooks`
 * ships next to notebooks_export/<experiment>.ipynb (scripts/notebook_export.py: the aggregates
 * and a thinned stream.csv, gzipped; no steps.csv), from whatever folder the kernel starts in:
 * the first cell finds the data (OUT) by the experiment's run.json and reads it with the Python
 * package's fp8lab.load (python/fp8lab/results.py: typed columns, nullable Int64 integers, the
 * npy stream as stream.csv's rows), every cell ends on a table that answers one question, and tests/report/test_notebooks.py executes them with a real kernel. */
#include "report_internal.h"

#include <stdio.h>
#include <string.h>

/* The cells' Python; in the first, @EXPERIMENT@ and @CSV_PREFIX@ (inside string literals)
 * become the experiment's name and the run folder as seen from the notebook's folder. */
/* The end of the cell of distinct configurations: sig (a hash per configuration) grouped. */
#define DISTINCT_TAIL                                                                          \
  "groups = sig.groupby(sig, sort=False).apply(lambda s: list(s.index))\n"                    \
  "distinct = pd.DataFrame({\"configurations\": [\", \".join(g) for g in groups],\n"            \
  "                         \"count\": [len(g) for g in groups]})\n"                         \
  "# one configuration per group stands for it in the cells below\n"                          \
  "DISTINCT = [g[0] for g in groups]\n"                                                      \
  "print(\"%d distinct configurations of %d\" % (len(distinct), len(sig)))\n"                \
  "distinct"

static const char *const CELLS[] = {
    "# The fp8lab Python package (pip install fp8lab's checkout: `pip install .`) reads the run:\n"
    "# fp8lab.load gives its tables as pandas DataFrames. Not installed: a checkout's python/ folder\n"
    "# above the kernel's folder is used (the notebooks shipped in notebooks_export/).\n"
    "# Where the data is. OUT is the run folder (fp8lab run --out ...): set it here, or in the\n"
    "# environment variable FP8LAB_OUT, to skip the search. Otherwise the first folder holding this\n"
    "# experiment's run.json among: the current folder, its parent (the kernel started in the run's\n"
    "# notebooks_export/), the run folder as seen from this notebook's own folder, and the reduced\n"
    "# copy shipped next to the notebook (notebooks_export/<experiment>/data/: the aggregates and a\n"
    "# thinned stream.csv, gzipped). The same cells run on either.\n"
    "import json\n"
    "import os\n"
    "import sys\n"
    "from pathlib import Path\n"
    "\n"
    "import pandas as pd\n"
    "\n"
    "try:\n"
    "    import fp8lab\n"
    "except ImportError:\n"
    "    _up = [p / \"python\" for p in [Path.cwd(), *Path.cwd().parents]]\n"
    "    _py = next((p for p in _up if (p / \"fp8lab\" / \"results.py\").is_file()), None)\n"
    "    if _py is None:\n"
    "        raise ImportError(\"the fp8lab Python package is not installed: pip install . in fp8lab's \"\n"
    "                          \"checkout, or PYTHONPATH=<checkout>/python\") from None\n"
    "    sys.path.insert(0, str(_py))\n"
    "    import fp8lab\n"
    "\n"
    "EXPERIMENT = \"@EXPERIMENT@\"\n"
    "OUT = os.environ.get(\"FP8LAB_OUT\") or None\n"
    "\n"
    "\n"
    "def _candidates():\n"
    "    bases = [Path.cwd()]\n"
    "    own = globals().get(\"__vsc_ipynb_file__\") or os.environ.get(\"JPY_SESSION_NAME\")\n"
    "    if own and Path(own).is_file():  # the notebook's own path, where the front end tells it\n"
    "        bases.insert(0, Path(own).resolve().parent)\n"
    "    for b in bases:\n"
    "        yield from (b, b / \"@CSV_PREFIX@\", b.parent, b / \"data\", b / EXPERIMENT / \"data\",\n"
    "                    b / \"notebooks_export\" / EXPERIMENT / \"data\", b / \"out\" / EXPERIMENT)\n"
    "\n"
    "\n"
    "def _is_run(d):\n"
    "    try:\n"
    "        return json.loads((d / \"run.json\").read_text())[\"experiment\"][\"name\"] == EXPERIMENT\n"
    "    except (OSError, ValueError, KeyError, TypeError):\n"
    "        return False\n"
    "\n"
    "\n"
    "if OUT is None:\n"
    "    OUT = next((d for d in _candidates() if _is_run(d)), None)\n"
    "if OUT is None:\n"
    "    raise FileNotFoundError(\"no run.json of experiment %r near %s: set OUT to the run folder\"\n"
    "                            % (EXPERIMENT, Path.cwd()))\n"
    "R = fp8lab.load(OUT)  # the run: R.info is run.json, R.steps, R.summary, ... its tables\n"
    "OUT, RUN = Path(R.path), R.info\n"
    "BUDGET = {\"value\": RUN[\"experiment\"].get(\"overflow_budget\", 1e-5),\n"
    "          \"step\": RUN[\"experiment\"].get(\"step_budget\", 0.01),\n"
    "          \"flush\": RUN[\"experiment\"].get(\"flush_budget\")}  # None: off\n"
    "print(\"data:\", OUT)\n"
    "if (OUT / \"REDUCED.txt\").exists():  # the shipped copy: what was left out\n"
    "    print((OUT / \"REDUCED.txt\").read_text())",

    "# The run's tables (fp8lab.load: the columns of fp8lab's docs/outputs.md; integers that may be\n"
    "# empty, such as current scaling's history_len, as pandas' nullable Int64, names as categories;\n"
    "# stream.npy read as stream.csv's rows), each with a column \"config\" that labels a\n"
    "# configuration the way the report does. None: the run has no such file.\n"
    "from fp8lab.results import config_label\n"
    "\n"
    "\n"
    "def labelled(df):\n"
    "    if df is None or \"recipe\" not in df:\n"
    "        return df\n"
    "    return df.assign(config=config_label(df).astype(\"category\"))\n"
    "\n"
    "\n"
    "FILES = [\"summary\", \"analysis\", \"recommendations\", \"gemm\", \"histograms\", \"stream\", \"steps\"]\n"
    "data = {n: labelled(getattr(R, n)) for n in FILES}\n"
    "summary, analysis, recommendations, gemm, histograms, stream, steps = (data[n] for n in FILES)\n"
    "pd.DataFrame({\"rows\": [len(df) if df is not None else pd.NA for df in data.values()],\n"
    "              \"columns\": [len(df.columns) if df is not None else pd.NA for df in data.values()]},\n"
    "             index=pd.Index(FILES, name=\"file\")).astype(\"Int64\")",

    "# The distinct configurations: some are provably the same (most_recent ignores history_len; at\n"
    "# history 1, max is most_recent) and give identical numbers for every tensor. Configurations\n"
    "# whose summary.csv rows agree on every tensor are listed together.\n"
    "vals = [c for c in [\"overflow\", \"underflow\", \"clipped\", \"mse\", \"snr_db\", \"scale_inv_min\",\n"
    "                    \"scale_inv_max\"] if c in summary]\n"
    "sig = (summary.sort_values([\"tensor\", \"format\"])\n"
    "       .groupby(\"config\", observed=True, sort=False)[vals]\n"
    "       .apply(lambda g: hash(g.to_numpy(dtype=\"float64\", na_value=float(\"nan\")).tobytes())))\n"
    DISTINCT_TAIL,

    "# The recommendations (recommendations.csv): per role, then how many tensors each setting is\n"
    "# the best for (scope \"tensor\"; current scaling where no delayed configuration fits).\n"
    "show = [\"scope\", \"name\", \"config\", \"clipped_rate\", \"clip_step_rate\", \"snr_p5\", \"covers\", \"of\",\n"
    "        \"decided_by\"]\n"
    "roles = recommendations[recommendations.scope != \"tensor\"]\n"
    "if len(roles):\n"
    "    print(roles[show].to_string(index=False))\n"
    "(recommendations[recommendations.scope == \"tensor\"]\n"
    " .groupby(\"config\", observed=True).name.count().sort_values(ascending=False)\n"
    " .rename(\"tensors\").to_frame())",

    "# Budget sensitivity: for the run's budgets and 10x tighter or looser ones (analysis.csv, delayed\n"
    "# configurations, warm-up left out), the one delayed setting that fits the most tensors (then the\n"
    "# best median p5 SNR), and how many tensors no delayed setting fits.\n"
    "a = analysis[analysis.kind == \"delayed\"].copy()\n"
    "a[\"step_rate\"] = a[\"clip_step_rate\"].fillna(a[\"steps_with_clipped\"] / a[\"steps\"])\n"
    "rows = []\n"
    "for f in (0.1, 1, 10):\n"
    "    vb, sb = BUDGET[\"value\"] * f, BUDGET[\"step\"] * f\n"
    "    a[\"fits\"] = (a.clipped_rate <= vb) & (a.step_rate <= sb)\n"
    "    if BUDGET[\"flush\"] is not None:  # the flush budget does not scale\n"
    "        a[\"fits\"] &= a.underflow_rate <= BUDGET[\"flush\"]\n"
    "    per = a.groupby(\"config\", observed=True).agg(fits=(\"fits\", \"sum\"), snr=(\"snr_p5\", \"median\"))\n"
    "    best = per.sort_values([\"fits\", \"snr\"], ascending=False).index[0]\n"
    "    none = (~a.groupby(\"tensor\", observed=True).fits.any()).sum()\n"
    "    rows.append({\"budget factor\": f, \"value budget\": vb, \"step budget\": sb, \"best setting\": best,\n"
    "                 \"tensors it fits\": int(per.loc[best, \"fits\"]),\n"
    "                 \"tensors\": a.tensor.nunique(), \"no delayed setting fits\": int(none)})\n"
    "pd.DataFrame(rows)",

    "# The GEMM errors (gemm.csv): median relative error of fprop, dgrad and wgrad per configuration\n"
    "# over layers and snapshot steps, lowest mean first (one configuration per distinct group).\n"
    "if gemm is None:\n"
    "    print(\"no gemm.csv: the trace has no (input, weight, grad_output) layer triplets\")\n"
    "    g = None\n"
    "else:\n"
    "    g = (gemm[gemm.config.isin(DISTINCT)].groupby([\"config\", \"gemm\"], observed=True)\n"
    "         .rel_error.median().unstack(\"gemm\"))\n"
    "    g = g.assign(mean=g.mean(axis=1)).sort_values(\"mean\")\n"
    "g",

    "# One tensor over every step of the replay (stream.csv, delayed configurations): the tensor\n"
    "# whose largest element overshot the most; its amax and the scale each configuration used,\n"
    "# around the step of the largest overshoot (overshoot = log2(amax * scale / fp8 max) > 0: it\n"
    "# saturated). One configuration per distinct group.\n"
    "s = stream[(stream.warmup == 0) & stream.config.isin(DISTINCT)]\n"
    "peak = s.loc[s.overshoot.idxmax()]\n"
    "t = peak.tensor\n"
    "one = s[s.tensor == t]\n"
    "print(\"tensor %s: largest overshoot %.2f at step %d (%s)\" % (t, peak.overshoot, peak.step,\n"
    "                                                               peak.config))\n"
    "amax = one.groupby(\"step\").amax.first()\n"
    "scales = one.pivot_table(index=\"step\", columns=\"config\", values=\"scale\", observed=True)\n"
    "view = pd.concat([amax, scales.add_prefix(\"scale: \")], axis=1)\n"
    "view.loc[peak.step - 3:peak.step + 3]",

    "# Where the delayed configurations saturate (stream.csv): per tensor and configuration (one per\n"
    "# distinct group), the steps whose largest element overshot, and by how much at most.\n"
    "(s[s.overshoot > 0].groupby([\"tensor\", \"config\"], observed=True).overshoot\n"
    " .agg([\"count\", \"max\"]).sort_values(\"count\", ascending=False).head(20))",

    "# The distribution of that tensor's values (histograms.csv: counts per power of two at each\n"
    "# snapshot step): the snapshot step nearest the peak against the second one (the first\n"
    "# snapshot step is warm-up).\n"
    "if histograms is None:\n"
    "    h = None\n"
    "else:\n"
    "    hs = histograms[histograms.tensor == t]\n"
    "    snaps = sorted(hs.step.unique())\n"
    "    near = min(snaps, key=lambda x: abs(x - peak.step))\n"
    "    h = (hs[hs.step.isin([snaps[min(1, len(snaps) - 1)], near])]\n"
    "         .pivot_table(index=\"log2_bin\", columns=\"step\", values=\"count\", aggfunc=\"sum\", fill_value=0))\n"
    "h",

    "# Per snapshot step (steps.csv, in a full run folder only: it is not in the reduced copy): the\n"
    "# worst clipped fraction of values over tensors, per configuration.\n"
    "if steps is None:\n"
    "    print(\"steps.csv is not in\", OUT, \"(the reduced copy ships the aggregates and stream.csv)\")\n"
    "    w = None\n"
    "else:\n"
    "    st = steps[steps.warmup == 0].assign(clip_frac=lambda x: x.clipped / x.n)\n"
    "    w = st[st.config.isin(DISTINCT)].pivot_table(index=\"step\", columns=\"config\",\n"
    "                                                  values=\"clip_frac\", aggfunc=\"max\", observed=True)\n"
    "    w = w.loc[:, w.max() > 0]\n"
    "w",
};

/* A run without snapshots (issue 28): summary.csv, histograms.csv and steps.csv have no rows,
 * so the distinct configurations come from stream.csv's scales instead of summary.csv's
 * statistics (cell 2), and the cells of the budgets' values (4), the histograms (8) and the
 * snapshot steps (9) are left out. */
static const char STREAM_DISTINCT[] =
    "# The distinct configurations: some are provably the same (most_recent ignores history_len; at\n"
    "# history 1, max is most_recent). This run has no snapshots: configurations whose stream.csv\n"
    "# scales agree at every step of every tensor are listed together.\n"
    "sig = (stream.sort_values([\"tensor\", \"step\", \"micro\"])\n"
    "       .groupby(\"config\", observed=True, sort=False)[\"scale\"]\n"
    "       .apply(lambda g: hash(g.to_numpy(dtype=\"float64\").tobytes())))\n"
    DISTINCT_TAIL;

/* src with every @EXPERIMENT@ and @CSV_PREFIX@ replaced by name and prefix, escaped for a
 * Python "..." literal (backslash, quote, control bytes: at most 4 bytes each), into out[n];
 * 0 when it does not fit. */
static int fill(char *out, size_t n, const char *src, const char *name, const char *prefix) {
  static const char *const tok[] = {"@EXPERIMENT@", "@CSV_PREFIX@"};
  const char *val[] = {name, prefix};
  size_t o = 0;
  for (const char *s = src; *s;) {
    if (o + 5 > n) return 0;
    int k = -1;
    for (int i = 0; i < 2 && k < 0; i++)
      if (strncmp(s, tok[i], strlen(tok[i])) == 0) k = i;
    if (k < 0) {
      out[o++] = *s++;
      continue;
    }
    for (const unsigned char *v = (const unsigned char *)val[k]; *v; v++) {
      if (o + 5 > n) return 0;
      if (*v == '\\' || *v == '"') o += (size_t)snprintf(out + o, n - o, "\\%c", *v);
      else if (*v < 0x20 || *v == 0x7F) o += (size_t)snprintf(out + o, n - o, "\\x%02x", *v);
      else out[o++] = (char)*v;
    }
    s += strlen(tok[k]);
  }
  out[o] = 0;
  return 1;
}

void rep_add_notebook(const rep_t *r, fp8_doc *d, const char *csv_prefix) {
  fp8_doc_set_target(d, FP8_DOC_NOTEBOOK);
  fp8_doc_heading(d, 2, "Explore the data");
  fp8_doc_markdown(d, "The cells below load the run's tables with the fp8lab Python package "
                      "(`fp8lab.load`, pandas DataFrames; `pip install .` in fp8lab's checkout) and "
                      "answer a few questions: "
                      "the distinct configurations, the recommendations, how the answer moves with the "
                      "budgets, the GEMM errors, one tensor's amax and scales over every step, where the "
                      "delayed configurations saturate, and that tensor's distribution of values. The "
                      "first cell finds the data: the run folder (from the run's `notebooks_export/` or "
                      "from the run folder itself), or the reduced copy shipped next to this notebook in "
                      "fp8lab's `notebooks_export/`; set `OUT` there to point it elsewhere. The plots above "
                      "are embedded in their cells and stay when the notebook is run.");
  /* the longest cell and its two names escaped (the experiment's name is at most 255 bytes,
   * the prefix a few) fit: no allocation, so nothing to fail here but the appends */
  char code[16384];
  for (size_t i = 0; i < sizeof CELLS / sizeof *CELLS; i++) {
    const char *cell = CELLS[i];
    if (r->stream_only && (i == 4 || i == 8 || i == 9)) continue; /* values, histograms, steps */
    if (r->stream_only && i == 2) cell = STREAM_DISTINCT;
    if (fill(code, sizeof code, cell, r->run.name, csv_prefix)) fp8_doc_code(d, code);
  }
  fp8_doc_set_target(d, FP8_DOC_BOTH);
}
