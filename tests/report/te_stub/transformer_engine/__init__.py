"""A stand-in for TransformerEngine: module trees, names and recipe signatures (README.md)."""
import os

VERSION = tuple(int(x) for x in os.environ.get("FP8LAB_TE_STUB_VERSION", "2.18").split("."))
__version__ = ".".join(map(str, VERSION))
