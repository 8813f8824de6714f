#!/usr/bin/env python3
"""The one seam to the GPU module (src/engine/gpu_module.h): the module exports one versioned
descriptor, and src/engine/engine_load.c refuses a descriptor of another API version, size or
engine ABI with one line, before it uses any of its members.

The modules are the emulated GPU module (fp8lab-gpu-emu.so, what CPU CI runs the whole program
on) behind a copy of its descriptor with one member planted wrong (tests/gpu/planted_module.c,
built once per plant), and the unplanted copy as the control: the control must run on the
emulated GPU, so that a refusal is the plant's doing and nothing else's.

Cases, for `fp8lab run` and for `fp8lab timeline` (whose measuring run the descriptor also
carries):
  - the emulated module's dynamic symbol table defines one name, fp8lab_gpu_module;
  - control: `--device gpu` runs on the emulated GPU (run.json's engine "gpu: mock device");
    the timeline measures on it;
  - API version, descriptor size, engine ABI each planted wrong: `--device gpu` exits 1 with
    exactly one line naming the module, the planted member, its value and this build's, and
    writes no output folder; `--device auto` warns in that one line and runs on the CPU;
  - a shared library that is no fp8lab module (libm): one line, "no fp8lab_gpu_module".

Usage: test_gpu_module_seam.py FP8LAB_BIN EMU_MODULE PLANT_NONE PLANT_VERSION PLANT_SIZE PLANT_ABI
"""
import ctypes.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

INI = """[trace]
path = synth:llm
synth_steps = 2
[recipe.d]
kind = delayed
history_len = 1, 16
[recipe.c]
kind = current
"""

# this build's numbers, as src/engine/gpu_module.h and engine.h define them (read from the
# headers, so that the test follows a bump)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

FAILS = []


def check(cond, what, out=""):
    print(("ok    " if cond else "FAIL  ") + what)
    sys.stdout.flush()
    if not cond:
        FAILS.append(what)
        if out:
            print(out)


def define(header, name):
    with open(os.path.join(ROOT, "src", "engine", header)) as f:
        m = re.search(r"#define %s (\d+)" % name, f.read())
    return int(m.group(1))


def run(cmd, cwd, module):
    env = dict(os.environ)
    env.pop("FP8LAB_GPU_MODULE", None)
    if module:
        env["FP8LAB_GPU_MODULE"] = module
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    return p.returncode, p.stdout, p.stderr


def lines_of(s):
    return [l for l in s.splitlines() if l.strip()]


def main():
    if len(sys.argv) != 7:
        print(__doc__)
        return 2
    fp8lab, emu, none, version, size, abi = [os.path.abspath(a) for a in sys.argv[1:]]
    api = define("gpu_module.h", "FP8_GPU_MODULE_API_VERSION")
    eabi = define("engine.h", "FP8_ENGINE_ABI")
    tmp = tempfile.mkdtemp(prefix="fp8lab-seam-")
    try:
        # one name to look up: the module's dynamic symbol table defines the descriptor alone
        p = subprocess.run(["nm", "-D", "--defined-only", emu], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        names = sorted({l.split()[2] for l in p.stdout.splitlines() if len(l.split()) == 3})
        check(p.returncode == 0 and names == ["fp8lab_gpu_module"],
              "the emulated module exports one symbol, fp8lab_gpu_module: %s" % names, p.stderr)

        with open(os.path.join(tmp, "exp.ini"), "w") as f:
            f.write(INI)
        run_gpu = [fp8lab, "run", "exp.ini", "--device", "gpu", "--no-report", "--quiet",
                   "--out"]
        run_auto = [fp8lab, "run", "exp.ini", "--no-report", "--quiet", "--out"]
        tl_gpu = [fp8lab, "timeline", "--layers", "1", "--hidden", "64", "--ffn", "128",
                  "--tokens", "64", "--steps", "1", "--warmup", "0", "--bench-tensors", "0",
                  "--device", "gpu", "--out"]

        # the control: the same wrapper, nothing planted, is the emulated GPU
        rc, out, err = run(run_gpu + ["control"], tmp, none)
        engine = ""
        if rc == 0:
            with open(os.path.join(tmp, "control", "run.json")) as f:
                engine = json.load(f)["engine"]
        check(rc == 0 and engine.startswith("gpu: mock device"),
              "control (nothing planted): --device gpu runs on the emulated GPU: %r" % engine,
              out + err)
        rc, out, err = run(tl_gpu + ["tl_control"], tmp, none)
        check(rc == 0 and "mock device" in out,
              "control: fp8lab timeline measures through the descriptor's timeline_run",
              out + err)

        planted = [
            ("API version", version,
             "%s: GPU module API version %d, this fp8lab reads version %d" % (version, api + 1, api)),
            ("descriptor size", size, "%s: GPU module descriptor of " % size),
            ("engine ABI", abi,
             "%s: GPU module built for engine ABI %d, this fp8lab has %d" % (abi, eabi - 1, eabi)),
        ]
        for what, mod, want in planted:
            tag = what.replace(" ", "_")
            rc, out, err = run(run_gpu + ["gpu_" + tag], tmp, mod)
            ls = lines_of(err)
            check(rc == 1 and len(ls) == 1 and ls[0].startswith("fp8lab: --device gpu: ") and
                  want in ls[0] and out == "" and
                  not os.path.exists(os.path.join(tmp, "gpu_" + tag)),
                  "%s planted: --device gpu exits 1 with one line, nothing written: %r" %
                  (what, ls[0] if ls else ""), out + err)
            if mod == size:  # the wrapper's descriptor is one pointer short: both sizes named
                m = re.search(r"descriptor of (\d+) bytes, this fp8lab's has (\d+)", err)
                check(m is not None and int(m.group(2)) - int(m.group(1)) == 8,
                      "descriptor size planted: the line gives both sizes, 8 bytes apart")
            rc, out, err = run(run_auto + ["auto_" + tag], tmp, mod)
            ls = lines_of(err)
            engine = ""
            if rc == 0:
                with open(os.path.join(tmp, "auto_" + tag, "run.json")) as f:
                    engine = json.load(f)["engine"]
            check(rc == 0 and len(ls) == 1 and want in ls[0] and
                  ls[0].endswith("running on the CPU") and engine == "cpu",
                  "%s planted: --device auto warns in one line and runs on the CPU: %r" %
                  (what, ls[0] if ls else ""), out + err)
            rc, out, err = run(tl_gpu + ["tl_" + tag], tmp, mod)
            ls = lines_of(err)
            check(rc == 1 and len(ls) == 1 and want in ls[0],
                  "%s planted: fp8lab timeline --device gpu exits 1 with one line: %r" %
                  (what, ls[0] if ls else ""), out + err)
        # a shared library that is not an fp8lab module
        libm = ctypes.util.find_library("m")
        for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64"):
            if libm and os.path.exists(os.path.join(d, libm)):
                libm = os.path.join(d, libm)
                break
        rc, out, err = run(run_gpu + ["libm"], tmp, libm)
        ls = lines_of(err)
        check(rc == 1 and len(ls) == 1 and "is not an fp8lab GPU module (no fp8lab_gpu_module)"
              in ls[0], "a library without the descriptor: exit 1, one line: %r" %
              (ls[0] if ls else ""), out + err)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failures" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
