#!/usr/bin/env python3
"""Deprecated (issue 43): now `python -m fp8lab.te_tb` (python/fp8lab/te_tb.py),
the same arguments and exit status. Running this file still works, with a FutureWarning."""
import os
import runpy
import warnings

warnings.warn("te_tb_to_amax.py is deprecated: use `python -m fp8lab.te_tb` "
              "(docs/capture.md)", FutureWarning, stacklevel=2)
runpy.run_path(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python",
                            "fp8lab", "te_tb.py"), run_name="__main__")
