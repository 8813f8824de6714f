"""transformer_engine_torch (TE's C++ extension) as far as te_recipe.py uses it: DType."""
import enum


class DType(enum.Enum):  # transformer_engine/common/include/transformer_engine/transformer_engine.h
    kFloat8E4M3 = 7
    kFloat8E5M2 = 8
