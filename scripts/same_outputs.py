#!/usr/bin/env python3
"""same_outputs.py: does a change of fp8lab's code leave every output byte for byte as it was?

  same_outputs.py collect FP8LAB_BIN DIR [--quick] [--exact-gemm]
                                          runs a fixed set of commands, keeps every file
  same_outputs.py compare DIR_A DIR_B     exit 0 when the two sets agree, 1 otherwise

Made for refactorings (the layout issue: "every output is byte-identical to today's"): collect
with the binary of the commit before the change and with the new one, then compare. The set:
  - `fp8lab synth llm` (200 steps) and four ranks of it (60 steps, seeds 1-4);
  - the shipped experiments quickstart, recipes, mixed (synth:llm), ranks (reduce_amax over
    groups of two ranks, GEMM errors) and fp4 (NVFP4, MXFP4 beside the FP8 recipes), each with
    --threads 1 and --threads 2, report included;
  - with --exact-gemm, every copied experiment that computes GEMM errors does so in the exact
    mode (`gemm_error = exact` in its [analysis] section): every entry of every GEMM, so that a
    change of the GEMM code's order of operations cannot hide behind the sampled estimate;
  - `fp8lab report` written again into a copy of the quickstart run;
  - the replay-vs-reference cases (tests/**/test_replay.py with FP8LAB_KEEP_TMP), unless
    --quick;
  - `fp8lab timeline` (the model: synth:llm, the flag form, TE's shape), `fp8lab inspect`;
  - with FP8LAB_GPU_MODULE set (the emulated module): quickstart on `--device gpu`.
Compared: every file, byte for byte, except run.json, whose keys that say when, where and how a
run was made (started_utc, wall_time_s, git_revision, fp8lab_version, threads, engine,
engine_details and the paths) are left out; the stdout of each command with durations masked.
Python's standard library only.
"""
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# run.json keys that differ between two runs of the same replay (the list, and the paths)
VOLATILE = {"started_utc", "wall_time_s", "git_revision", "fp8lab_version", "threads", "engine",
            "engine_details"}
# Every set is made in this folder and then moved, so that the paths the outputs quote
# (run.json, report.md, the notebooks) are the same in both sets.
# FP8LAB_SAME_WORK names another (two sessions at once): collect both sets with the same one.
WORK = os.environ.get("FP8LAB_SAME_WORK", "/tmp/fp8lab-same-outputs")


def sh(cmd, log, env=None, cwd=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                       cwd=cwd)
    with open(log, "a") as f:
        f.write("$ %s\n%s[exit %d]\n" % (" ".join(os.path.basename(c) if i == 0 else c
                                                   for i, c in enumerate(cmd)), p.stdout,
                                         p.returncode))
    if p.returncode != 0:
        sys.exit("same_outputs: %s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stdout))
    return p.stdout


EXPERIMENTS = ("quickstart", "recipes", "mixed", "ranks", "fp4")


def copy_experiment(name, dest, exact_gemm):
    """experiments/<name>.ini into dest; with exact_gemm, `gemm_error = exact` at the top of its
    [analysis] section (an existing gemm_error line is replaced)."""
    with open(os.path.join(ROOT, "experiments", name + ".ini")) as f:
        lines = f.read().split("\n")
    if exact_gemm and any(re.match(r"\s*gemm\s*=\s*true", ln) for ln in lines):
        lines = [ln for ln in lines if not re.match(r"\s*gemm_error\s*=", ln)]
        i = next(k for k, ln in enumerate(lines) if ln.strip() == "[analysis]")
        lines.insert(i + 1, "gemm_error = exact")
    with open(os.path.join(dest, name + ".ini"), "w") as f:
        f.write("\n".join(lines))


def replay_test():
    """tests/**/test_replay.py: wherever the tests' layout puts it."""
    import glob
    found = sorted(glob.glob(os.path.join(ROOT, "tests", "**", "test_replay.py"), recursive=True))
    if len(found) != 1:
        sys.exit("same_outputs: expected one tests/**/test_replay.py, found %d" % len(found))
    return found[0]


def collect(binary, dest, quick, exact_gemm=False):
    binary = os.path.abspath(binary)
    dest = os.path.abspath(dest)
    d = WORK
    for p in (d, dest):
        if os.path.exists(p):
            shutil.rmtree(p)
    os.makedirs(os.path.join(d, "exp"))
    os.makedirs(os.path.join(d, "out"))
    log = os.path.join(d, "stdout.log")
    env = dict(os.environ)
    env.pop("FP8LAB_GPU_MODULE", None)
    sh([binary, "synth", "llm", os.path.join(d, "out", "synth_llm"), "--steps", "200"], log, env)
    for r in range(4):
        sh([binary, "synth", "llm", os.path.join(d, "out", "ranks_trace", "rank_%d" % r),
            "--steps", "60", "--seed", str(r + 1)], log, env)
    for e in EXPERIMENTS:
        copy_experiment(e, os.path.join(d, "exp"), exact_gemm)
        for t in (1, 2):
            sh([binary, "run", os.path.join(d, "exp", e + ".ini"), "--out",
                os.path.join(d, "res", "%s_t%d" % (e, t)), "--threads", str(t), "--force",
                "--quiet"], log, env)
    again = os.path.join(d, "res", "quickstart_report_again")
    shutil.copytree(os.path.join(d, "res", "quickstart_t1"), again)
    sh([binary, "report", again], log, env)
    sh([binary, "inspect", os.path.join(d, "out", "synth_llm")], log, env)
    sh([binary, "inspect", os.path.join(d, "out", "ranks_trace")], log, env)
    tl = os.path.join(d, "timeline")
    sh([binary, "timeline", "synth:llm", "--device", "cpu", "--out", tl + "_synth"], log, env)
    sh([binary, "timeline", "--layers", "2", "--hidden", "64", "--ffn", "256", "--tokens", "128",
        "--device", "cpu", "--out", tl + "_flags"], log, env)
    sh([binary, "timeline", "--layers", "24", "--hidden", "4096", "--ffn", "16384", "--tokens",
        "15872", "--device", "cpu", "--out", tl + "_te"], log, env)
    sh([binary, "timeline", os.path.join(d, "out", "ranks_trace"), "--device", "cpu", "--out",
        tl + "_ranks"], log, env)
    module = os.environ.get("FP8LAB_GPU_MODULE")
    if module:
        genv = dict(env, FP8LAB_GPU_MODULE=os.path.abspath(module))
        sh([binary, "run", os.path.join(d, "exp", "quickstart.ini"), "--out",
            os.path.join(d, "res", "quickstart_gpu_emu"), "--device", "gpu", "--force", "--quiet"],
           log, genv)
    if not quick:
        renv = dict(env, FP8LAB_KEEP_TMP=os.path.join(d, "replay"))
        os.makedirs(renv["FP8LAB_KEEP_TMP"])
        sh([sys.executable, replay_test(), binary], log, renv)
    shutil.move(d, dest)


def normal_json(path):
    with open(path) as f:
        j = json.load(f)

    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k not in VOLATILE}
        if isinstance(o, list):
            return [strip(v) for v in o]
        if isinstance(o, str):  # a shipped experiment replayed from the checkout it is in
            return re.sub(r"^/\S*/(experiments/[\w.-]+\.ini)$", r"<TREE>/\1", o)
        return o
    return json.dumps(strip(j), indent=1, sort_keys=False)


def normal_log(path):
    with open(path) as f:
        s = f.read()
    s = re.sub(r"(test_replay\.py) \S+", r"\1 <FP8LAB>", s)       # which binary ran it
    s = re.sub(r"\S*/(test_replay\.py)", r"<TREE>/\1", s)  # from which checkout and folder
    s = re.sub(r"\b\d+(\.\d+)? ?(s|ms|us)\b", "<T>", s)          # durations
    s = re.sub(r"\bin \d+(\.\d+)?s\b", "in <T>", s)
    s = re.sub(r"\(\d+ threads?\)", "(N threads)", s)
    s = re.sub(r"[0-9.]+ [kMG]?B/s", "<RATE>", s)
    return s


def files(d):
    out = {}
    for r, _, fs in os.walk(d):
        for f in fs:
            p = os.path.join(r, f)
            out[os.path.relpath(p, d)] = p
    return out


def compare(a, b):
    a, b = os.path.abspath(a), os.path.abspath(b)
    fa, fb = files(a), files(b)
    bad = []
    for k in sorted(set(fa) | set(fb)):
        if k not in fa or k not in fb:
            bad.append("%s: only in %s" % (k, a if k in fa else b))
            continue
        if os.path.basename(k) == "run.json":
            same = normal_json(fa[k]) == normal_json(fb[k])
        elif k == "stdout.log":
            same = normal_log(fa[k]) == normal_log(fb[k])
        else:
            with open(fa[k], "rb") as x, open(fb[k], "rb") as y:
                same = x.read() == y.read()
        if not same:
            bad.append("%s: differs" % k)
    # within each set: --threads 1 and 2 wrote the same files (run.json aside: it names the folder)
    for d, fd in ((a, fa), (b, fb)):
        for k in sorted(fd):
            m = re.match(r"res/(\w+)_t1/(.*)$", k)
            if not m or os.path.basename(k) == "run.json":
                continue
            k2 = "res/%s_t2/%s" % m.groups()
            with open(fd[k], "rb") as x:
                same = k2 in fd and open(fd[k2], "rb").read() == x.read()
            if not same:
                bad.append("%s: --threads 1 and 2 differ in %s" % (k, d))
    for line in bad:
        print(line)
    print("same_outputs: %d files compared, %d differ or are missing" %
          (len(set(fa) | set(fb)), len(bad)))
    return 1 if bad else 0


def main():
    args = sys.argv[1:]
    if len(args) >= 3 and args[0] == "collect":
        collect(args[1], args[2], "--quick" in args[3:], "--exact-gemm" in args[3:])
        return 0
    if len(args) == 3 and args[0] == "compare":
        return compare(args[1], args[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
