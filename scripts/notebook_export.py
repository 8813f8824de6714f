#!/usr/bin/env python3
"""The shipped copy of a run's report and notebook (`make notebooks`), rebuilt from scratch.

Usage: notebook_export.py RUN_DIR EXPORT_DIR

RUN_DIR is an `fp8lab run` output folder (run.json names the experiment E); EXPORT_DIR is
notebooks_export/. Writes, after removing EXPORT_DIR/E/ entirely:

  EXPORT_DIR/E.ipynb        the run's notebooks_export/E.ipynb as is (its plots are embedded
                            as cell attachments; its first cell finds E/data/ on its own)
  EXPORT_DIR/E/report.md    the run's report.md
  EXPORT_DIR/E/advice.ini   the report's advice as an experiment, when it wrote one
  EXPORT_DIR/E/te_recipe.py the same advice as TransformerEngine code
  EXPORT_DIR/E/megatron_args.txt, megatron_precision.yaml, torchao_config.py: the same advice
                            for Megatron-LM and torchao, when the report wrote them
  EXPORT_DIR/E/bf16_plan.csv, bf16_plan.ini, megatron_bf16_plan_*.txt/.yaml,
                            torchao_bf16_plan.py, te_bf16_plan.py: the BF16 demotion plans, when
                            written
  EXPORT_DIR/E/plots/       only the PNGs report.md references (a missing one is an error)
  EXPORT_DIR/E/data/        the reduced data the notebook's cells run on, a few hundred kB:
                            run.json; summary, analysis, recommendations, gemm and histograms
                            complete (gzipped: pandas reads name.csv.gz as it reads name.csv);
                            stream.csv thinned to one tensor per role (the one whose largest
                            element overshot the most after warm-up), every step and delayed
                            configuration; REDUCED.txt says so. steps.csv is not shipped.

Deterministic for the same run folder (gzip without a time stamp or file name). Standard
library only.
"""
import csv
import gzip
import io
import json
import os
import re
import shutil
import sys

AGGREGATES = ["summary", "analysis", "recommendations", "gemm", "histograms"]


def gz_write(path, text):
    with open(path, "wb") as f:
        # mtime 0 and no file name in the header: the same bytes for the same text
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as g:
            g.write(text.encode("utf-8"))


def thin_stream(path):
    """stream.csv's header and the rows of one tensor per role: the largest overshoot (warm-up
    rows left out) of that role. Returns (text, tensors kept)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    col = {c: i for i, c in enumerate(head)}
    best = {}  # role -> (overshoot, tensor)
    for r in body:
        if r[col["warmup"]] != "0" or not r[col["overshoot"]]:
            continue
        try:
            v = float(r[col["overshoot"]])
        except ValueError:
            continue
        role = r[col["role"]]
        if v == v and (role not in best or v > best[role][0]):
            best[role] = (v, r[col["tensor"]])
    keep = sorted({t for _, t in best.values()})
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(head)
    w.writerows(r for r in body if r[col["tensor"]] in keep)
    return out.getvalue(), keep


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    run, export = argv[1], argv[2]
    with open(os.path.join(run, "run.json")) as f:
        name = json.load(f)["experiment"]["name"]
    nb = os.path.join(run, "notebooks_export", name + ".ipynb")
    dest = os.path.join(export, name)
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(os.path.join(dest, "plots"))
    os.makedirs(os.path.join(dest, "data"))
    shutil.copyfile(nb, os.path.join(export, name + ".ipynb"))
    with open(os.path.join(run, "report.md")) as f:
        md = f.read()
    shutil.copyfile(os.path.join(run, "report.md"), os.path.join(dest, "report.md"))
    # the report's advice as an experiment, which report.md names (when the report wrote one)
    for f in ("advice.ini", "te_recipe.py", "advice_fp4.ini", "megatron_args.txt",
              "megatron_precision.yaml", "torchao_config.py",  # the same advice as code
              "bf16_plan.csv", "bf16_plan.ini", "megatron_bf16_plan_fp8.txt",  # the BF16 plans
              "megatron_bf16_plan_fp8.yaml", "megatron_bf16_plan_fp4.txt",
              "megatron_bf16_plan_fp4.yaml", "torchao_bf16_plan.py", "te_bf16_plan.py"):
        if os.path.exists(os.path.join(run, f)):
            shutil.copyfile(os.path.join(run, f), os.path.join(dest, f))
    # ![alt](plots/x.png) or ![alt](<plots/x y.png>)
    pngs = sorted(set(re.findall(r"\]\(<?(plots/[^)<>]+\.png)>?\)", md)))
    for p in pngs:
        shutil.copyfile(os.path.join(run, p), os.path.join(dest, p))
    data = os.path.join(dest, "data")
    shutil.copyfile(os.path.join(run, "run.json"), os.path.join(data, "run.json"))
    for a in AGGREGATES:
        src = os.path.join(run, a + ".csv")
        if os.path.exists(src):
            with open(src) as f:
                gz_write(os.path.join(data, a + ".csv.gz"), f.read())
    note = ["Reduced data of the run of experiments/%s.ini for notebooks_export/%s.ipynb, "
            "written by scripts/notebook_export.py (make notebooks)." % (name, name), "",
            "Complete: run.json, " + ", ".join(a + ".csv" for a in AGGREGATES
                                                if os.path.exists(os.path.join(run, a + ".csv")))
            + " (gzipped).", "Not shipped: steps.csv (rerun the experiment for it)."]
    src = os.path.join(run, "stream.csv")
    if os.path.exists(src):
        text, keep = thin_stream(src)
        gz_write(os.path.join(data, "stream.csv.gz"), text)
        note.append("stream.csv: only the tensors %s (per role, the one whose largest element "
                    "overshot the most after warm-up), every step and delayed configuration."
                    % ", ".join(keep))
    with open(os.path.join(data, "REDUCED.txt"), "w") as f:
        f.write("\n".join(note) + "\n")
    size = sum(os.path.getsize(os.path.join(data, x)) for x in os.listdir(data))
    print("%s/%s.ipynb, %s/report.md, %d plots, data/ %d kB"
          % (export, name, dest, len(pngs), (size + 512) // 1024))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
