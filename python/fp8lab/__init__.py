"""fp8lab: FP8 scaling recipes replayed on captured traces of your own training run.

The Python side of fp8lab (issue 43). `pip install .` (a checkout) or a wheel gives:

- the command line `fp8lab` (the C program, shipped inside this package: `fp8lab.executable()`;
  the GPU module `fp8lab-gpu.so` beside it when the wheel was built with CUDA);
- `fp8lab.load(run_dir)`: a run folder's tables (steps, stream, summary, gemm, analysis,
  recommendations, ...) as pandas DataFrames with the columns of docs/outputs.md, run.json as a
  dict, the npy stream memory-mapped (fp8lab.results);
- `fp8lab.capture`: the Recorder that writes a trace from a PyTorch training run (needs torch:
  `pip install .[capture]`);
- `fp8lab.te_tb`: TransformerEngine's debug statistics from TensorBoard event files, as a
  trace (`python -m fp8lab.te_tb`; needs `.[tensorboard]`);
- `fp8lab.te_dumps`: TransformerEngine DumpTensors dumps as a trace (`python -m fp8lab.te_dumps`);
- `fp8lab.emu`: fp8lab's recipe arithmetic in-process (libfp8lab_emu.so through ctypes): one
  recipe label's casts, statistics and delayed-scaling updates, for a closed-loop emulated run.

`import fp8lab` imports neither torch nor pandas: the submodules load when first used
(`fp8lab.capture.Recorder` works after a plain `import fp8lab`).
"""
import importlib
import os

__version__ = "0.1.0"  # CMakeLists.txt's project(VERSION); pyproject.toml reads it from there

_SUBMODULES = ("capture", "results", "te_tb", "te_dumps", "emu", "closedloop")
__all__ = ["load", "executable", "__version__"] + list(_SUBMODULES)


def executable():
    """The path of the fp8lab program: the one this package ships (fp8lab/bin/fp8lab inside
    it), else, for the checkout's python/ folder on sys.path, $FP8LAB_BUILD/fp8lab or the
    checkout's build/fp8lab (`make`): the places fp8lab.emu looks for its library, in that order.

    FileNotFoundError when there is none (build the program with `make`, or `pip install .`)."""
    # every folder of the package: an editable install (pip install -e .) keeps the Python
    # files in the checkout and what CMake installed in site-packages/fp8lab/
    paths = [os.path.join(os.path.abspath(d), "bin", "fp8lab") for d in list(__path__)]
    if os.environ.get("FP8LAB_BUILD"):
        paths.append(os.path.join(os.environ["FP8LAB_BUILD"], "fp8lab"))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isfile(os.path.join(root, "CMakeLists.txt")):
        paths.append(os.path.join(root, "build", "fp8lab"))
    for path in paths:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError("fp8lab: no program in %s: build it (make) or install this package "
                            "with pip (pip install . in a checkout)" % " or ".join(paths))


def load(run_dir):
    """A run folder as a `fp8lab.results.Run`: its tables as DataFrames (see fp8lab.results)."""
    from . import results
    return results.load(run_dir)


def __getattr__(name):  # PEP 562: the submodules on first use, so that import fp8lab stays light
    if name in _SUBMODULES:
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'fp8lab' has no attribute %r" % name)
