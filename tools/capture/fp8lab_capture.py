"""Deprecated (issue 43): the capture tool is now the package module `fp8lab.capture`.

    pip install .[capture]        # in the checkout (or a wheel)
    import fp8lab.capture         # then fp8lab.capture.Recorder(...), as before

This file keeps `sys.path.insert(0, "tools/capture"); import fp8lab_capture` working for a
while: it loads the checkout's python/fp8lab/capture.py and stands for it (the same module
object: every name, private ones included), with a FutureWarning.
"""
import os
import sys
import warnings

warnings.warn("fp8lab_capture (tools/capture) is deprecated: pip install the fp8lab package "
              "and `import fp8lab.capture` (docs/capture.md)", FutureWarning, stacklevel=2)
_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                   "python")
if _PY not in sys.path:
    sys.path.insert(0, _PY)
import fp8lab.capture  # noqa: E402

sys.modules[__name__] = fp8lab.capture
