#!/usr/bin/env python3
"""Executes the report's notebooks with a real Jupyter kernel (nbclient + ipykernel), top to
bottom, from both of the folders a user starts one in, and fails on any error.

  - generated: `fp8lab run` of experiments/{quickstart,recipes}.ini into a temporary folder;
    each <out>/notebooks_export/<e>.ipynb executed with the kernel started in <out> and in
    <out>/notebooks_export/;
  - exported: scripts/notebook_export.py (what `make notebooks` runs) of those runs into a
    temporary notebooks_export/, each copy executed from there (its reduced data/);
  - shipped: the repository's notebooks_export/<e>.ipynb executed in place, the kernel started
    in notebooks_export/ and in notebooks_export/<e>/ (nothing is written there: nbclient
    executes in memory).

Each execution must:
  - raise no error in any cell, and give every code cell an output;
  - find its data where it should (the first cell prints "data: <folder>": the run folder, or
    <e>/data/ for an exported or shipped copy);
  - display no table that is empty, entirely NaN/<NA>, or has an entirely NaN/<NA> column
    (checked in the kernel itself after the last cell, on every DataFrame and Series in Out);
  - load history_len and margin as pandas' nullable Int64 in every DataFrame that has them;
  - read the run with the checkout's fp8lab.load (python/fp8lab): a fresh run's notebook finds
    the package on PYTHONPATH, a shipped one (under the checkout) by its own fallback;
  - keep every embedded plot: the Markdown cells' image attachments are the same after the run,
    and the executed notebook still validates (nbformat).
The shipped copies' code cells must also be those of a fresh run (else: run `make notebooks`),
and their plots/ folder must hold exactly the PNGs their report.md references.

Usage: test_notebooks.py FP8LAB_BIN
Exit 77 = skipped (pandas, nbformat, nbclient or ipykernel missing; exit 1 instead when
FP8LAB_REQUIRE_PYDEPS=1, as .ci/run sets: scripts/install-deps.sh installs them).
"""
import concurrent.futures
import copy
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXPERIMENTS = ["quickstart", "recipes"]

try:
    import pandas  # noqa: F401  (the notebooks' own dependency, in the kernel's Python)
    import nbformat
    import nbclient
    import jupyter_client  # nbclient's own dependency: the kernel manager, for IPC transport
    import ipykernel  # noqa: F401  (the kernel nbclient starts: this same Python)
except ImportError as e:
    if os.environ.get("FP8LAB_REQUIRE_PYDEPS", "") not in ("", "0"):
        print("FAILED: %s, and FP8LAB_REQUIRE_PYDEPS is set (scripts/install-deps.sh installs "
              "pandas, nbformat, nbclient and ipykernel)" % e)
        sys.exit(1)
    print("skipped: %s (scripts/install-deps.sh installs pandas, nbformat, nbclient, ipykernel)"
          % e)
    sys.exit(77)

# Run in the kernel after the notebook's cells: every displayed table, and the loaded frames'
# column types. Prints one JSON line prefixed with a marker.
CHECK = r'''
import json as _json
import pandas as _pd
_problems = []
for _k, _v in sorted(Out.items()):
    if isinstance(_v, _pd.Series):
        _v = _v.to_frame()
    if not isinstance(_v, _pd.DataFrame):
        continue
    if _v.size == 0:
        _problems.append("Out[%d]: an empty table" % _k)
    elif _v.isna().all(axis=None):
        _problems.append("Out[%d]: a table entirely NaN (%d x %d)" % ((_k,) + _v.shape))
    else:
        _nan = [str(_c) for _c in _v.columns if _v[_c].isna().all()]
        if _nan:
            _problems.append("Out[%d]: %d entirely NaN column(s): %s" % (_k, len(_nan),
                                                                          ", ".join(_nan[:5])))
for _n, _v in list(globals().items()):
    if isinstance(_v, _pd.DataFrame) and not _n.startswith("_"):
        for _c in ("history_len", "margin"):
            if _c in _v.columns and str(_v[_c].dtype) != "Int64":
                _problems.append("%s.%s is %s, not Int64" % (_n, _c, _v[_c].dtype))
import fp8lab as _f
if type(globals().get("R")).__name__ != "Run" or not _f.__file__.startswith(@PYDIR@):
    _problems.append("the cells did not read the run with the checkout's fp8lab.load (%s, %s)"
                     % (type(globals().get("R")), _f.__file__))
print("@fp8lab-check@" + _json.dumps(_problems))
'''.replace("@PYDIR@", repr(os.path.join(ROOT, "python", "fp8lab") + os.sep))


def attachments(nb):
    return [(i, name, json.dumps(a, sort_keys=True)) for i, c in enumerate(nb.cells)
            if c.cell_type == "markdown" for name, a in sorted(c.get("attachments", {}).items())]


def text_of(output):
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return output.get("data", {}).get("text/plain", "")


def execute(job):
    """Runs one notebook (path) with the kernel in cwd; returns a list of problems."""
    path, cwd, want_data = job
    where = "%s (kernel in %s)" % (path, cwd)
    nb = nbformat.read(path, as_version=4)
    before = attachments(nb)
    ncode = sum(1 for c in nb.cells if c.cell_type == "code")
    run = copy.deepcopy(nb)
    run.cells.append(nbformat.v4.new_code_cell(CHECK))
    problems = []
    # The kernel talks over IPC sockets in a private folder, not TCP: jupyter_client picks free
    # TCP ports, closes them and lets the kernel bind them later, so two kernels started at once
    # (the pool below, other tests under ctest -j) can pick the same port and one dies ("Address
    # already in use", seen in CI). The folder also keeps the socket files out of cwd.
    sockets = tempfile.mkdtemp(prefix="fp8lab_kernel_")
    km = jupyter_client.KernelManager(kernel_name="python3", transport="ipc",
                                      ip=os.path.join(sockets, "kernel"))
    # the cells import the fp8lab package: a fresh run's notebook (in a temporary folder) finds
    # it on PYTHONPATH, as a checkout's user sets it; a shipped one (under the checkout) without,
    # by its own fallback (the checkout's python/ above the kernel's folder)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if os.path.commonpath([os.path.abspath(path), ROOT]) != ROOT:
        env["PYTHONPATH"] = os.path.join(ROOT, "python")
    try:
        nbclient.NotebookClient(run, km=km, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": cwd}}).execute(env=env)
    except nbclient.exceptions.CellExecutionError as e:
        bad = next((i for i, c in enumerate(run.cells) if c.cell_type == "code" and
                    any(o.output_type == "error" for o in c.get("outputs", []))), None)
        src = run.cells[bad].source.splitlines()[:3] if bad is not None else []
        return ["%s: cell %s failed: %s: %s (cell begins %s)" % (where, bad, e.ename, e.evalue,
                                                                 src)]
    except Exception as e:  # kernel did not start, timeout, ...
        return ["%s: %s: %s" % (where, type(e).__name__, e)]
    finally:
        if km.has_kernel:  # a kernel manager passed in is the caller's to shut down
            km.shutdown_kernel(now=True)
        shutil.rmtree(sockets, ignore_errors=True)
    cells = run.cells[:-1]
    check = "".join(text_of(o) for o in run.cells[-1].outputs)
    m = re.search(r"@fp8lab-check@(.*)", check)
    if not m:
        problems.append("check cell printed nothing: %r" % check[-500:])
    else:
        problems += json.loads(m.group(1))
    code = [c for c in cells if c.cell_type == "code"]
    if len(code) != ncode or ncode == 0:
        problems.append("%d code cells, expected %d" % (len(code), ncode))
    for i, c in enumerate(code):
        if not c.outputs:
            problems.append("code cell %d has no output: %s" % (i, c.source.splitlines()[:2]))
        for o in c.outputs:
            if o.output_type == "error":
                problems.append("code cell %d: %s: %s" % (i, o.ename, o.evalue))
    first = "".join(text_of(o) for o in code[0].outputs) if code else ""
    m = re.search(r"^data: (.*)$", first, re.M)
    got = m.group(1).strip() if m else None
    if got is None or os.path.realpath(got) != os.path.realpath(want_data):
        problems.append("data found in %s, expected %s" % (got, want_data))
    run.cells = cells
    if attachments(run) != before or not before:
        problems.append("embedded plots changed by the run (%d attachments before, %d after)"
                        % (len(before), len(attachments(run))))
    try:
        nbformat.validate(run)
    except nbformat.ValidationError as e:
        problems.append("executed notebook does not validate: %s" % str(e)[:300])
    return ["%s: %s" % (where, p) for p in problems]


def self_check(tmp):
    """The checks themselves: a notebook showing an all-NaN pivot, an empty table, a float
    history_len, a cell without output and a plot must fail on each of those."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in [
        'print("data: %s")' % tmp,
        "import pandas as pd\nd = pd.DataFrame({'history_len': [1.0, None], 'v': [1, 2]})\n"
        "d.assign(v=pd.NA)[['v']].astype('Int64')",
        "d.iloc[0:0]", "d[['v']].assign(w=float('nan'))", "x = 1"]]
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("![p](attachment:p.png)",
                                                   attachments={"p.png": {"image/png": "iVBO"}}))
    path = os.path.join(tmp, "self_check.ipynb")
    nbformat.write(nb, path)
    got = "\n".join(execute((path, tmp, tmp)))
    want = ["entirely NaN (", "an empty table", "entirely NaN column(s): w", "d.history_len is",
            "has no output"]
    missing = [w for w in want if w not in got]
    return ["the checks missed %s in a notebook made to fail them; they said:\n%s"
            % (missing, got)] if missing else []


def code_cells(path):
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    fp8lab = os.path.abspath(sys.argv[1])
    os.environ.pop("FP8LAB_OUT", None)  # the kernels inherit it: each must find its data itself
    tmp = tempfile.mkdtemp(prefix="fp8lab_nb_")
    failures = []
    jobs = []
    try:
        export = os.path.join(tmp, "notebooks_export")
        os.makedirs(export)
        for e in EXPERIMENTS:
            out = os.path.join(tmp, e)
            p = subprocess.run([fp8lab, "run", os.path.join(ROOT, "experiments", e + ".ini"),
                                "--out", out, "--force", "--quiet"], capture_output=True,
                               text=True)
            if p.returncode != 0:
                failures.append("fp8lab run %s: exit %d: %s" % (e, p.returncode, p.stderr))
                continue
            nb = os.path.join(out, "notebooks_export", e + ".ipynb")
            jobs += [(nb, out, out), (nb, os.path.join(out, "notebooks_export"), out)]
            p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "notebook_export.py"),
                                out, export], capture_output=True, text=True)
            if p.returncode != 0:
                failures.append("notebook_export.py %s: exit %d: %s" % (e, p.returncode,
                                                                        p.stderr))
                continue
            jobs.append((os.path.join(export, e + ".ipynb"), export,
                         os.path.join(export, e, "data")))
            shipped_dir = os.path.join(ROOT, "notebooks_export")
            shipped = os.path.join(shipped_dir, e + ".ipynb")
            if not os.path.exists(shipped):
                failures.append("%s is missing (make notebooks)" % shipped)
                continue
            if code_cells(shipped) != code_cells(nb):
                failures.append("%s: its code cells are not those of a fresh run: run "
                                "`make notebooks`" % shipped)
            with open(os.path.join(shipped_dir, e, "report.md")) as f:
                refs = set(re.findall(r"\]\(<?plots/([^)<>]+\.png)>?\)", f.read()))
            have = set(os.listdir(os.path.join(shipped_dir, e, "plots")))
            if refs != have:
                failures.append("notebooks_export/%s/plots: %s not referenced, %s missing "
                                "(make notebooks)" % (e, sorted(have - refs), sorted(refs - have)))
            data = os.path.join(shipped_dir, e, "data")
            jobs += [(shipped, shipped_dir, data), (shipped, os.path.join(shipped_dir, e), data)]
        failures += self_check(tmp)
        # spawn, not fork: self_check above ran kernels from this process, and a forked child
        # inherits its zmq context, which is not fork-safe (a kernel that never answers)
        with concurrent.futures.ProcessPoolExecutor(
                max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
            for job, problems in zip(jobs, pool.map(execute, jobs)):
                print("%s %s (kernel in %s)" % ("FAIL" if problems else "ok  ", job[0], job[1]))
                failures += problems
    finally:
        if not os.environ.get("FP8LAB_KEEP_TMP"):
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept", tmp)
    if failures:
        print("\n".join(["FAILED:"] + failures))
        return 1
    print("%d notebook executions passed" % len(jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
