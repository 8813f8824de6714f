#!/usr/bin/env python3
"""Deprecated (issue 43): now `python -m fp8lab.te_dumps` (python/fp8lab/te_dumps.py), the same
arguments. Running or importing this file still works, with a FutureWarning."""
import os
import sys
import warnings

warnings.warn("convert_te_dumps.py is deprecated: use `python -m fp8lab.te_dumps` "
              "(docs/capture.md)", FutureWarning, stacklevel=2)
_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                   "python")
if _PY not in sys.path:
    sys.path.insert(0, _PY)
import fp8lab.te_dumps  # noqa: E402

if __name__ == "__main__":
    sys.exit(fp8lab.te_dumps.main())
sys.modules[__name__] = fp8lab.te_dumps
