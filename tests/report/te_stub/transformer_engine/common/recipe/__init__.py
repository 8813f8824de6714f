"""TE's recipes as constructors with TE's arguments (docs/frameworks/te.md, section 2):
keyword arguments TE does not take raise TypeError, as TE's dataclasses do."""
import enum

from transformer_engine import VERSION


class Format(enum.Enum):  # transformer_engine/common/recipe/__init__.py, Format
    E4M3 = "E4M3"
    E5M2 = "E5M2"
    HYBRID = "HYBRID"
    E2M1 = "E2M1"  # 2.8 and later


class _Recipe:
    ARGS = {}

    def __init__(self, **kw):
        args = dict(self.ARGS)
        if VERSION >= (2, 15):
            args["backward_override"] = None
        bad = sorted(set(kw) - set(args))
        if bad:
            raise TypeError("%s() got unexpected keyword argument(s) %s (TE %s)"
                            % (type(self).__name__, ", ".join(bad), ".".join(map(str, VERSION))))
        args.update(kw)
        if args.get("fp8_format") == Format.E5M2:
            raise AssertionError("Pure E5M2 training is not supported.")
        self.__dict__.update(args)

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in
                                                           sorted(self.__dict__.items())))


class DelayedScaling(_Recipe):  # v2.2-v2.18: lines 164-171 (v2.2), 199-206 (v2.9), 253-261 (v2.18)
    ARGS = dict(margin=0, fp8_format=Format.HYBRID, amax_history_len=1024, amax_compute_algo="max",
                scaling_factor_compute_algo=None, reduce_amax=True, fp8_dpa=False, fp8_mha=False)


class Float8CurrentScaling(_Recipe):  # v2.9: 235-244; v2.18: 302-312
    ARGS = dict(use_power_2_scales=False, fp8_format=Format.HYBRID, fp8_gemm_fprop=None,
                fp8_gemm_dgrad=None, fp8_gemm_wgrad=None, fp8_dpa=False, fp8_mha=False)


class MXFP8BlockScaling(_Recipe):  # v2.9: 289-292; v2.18: 366-370
    ARGS = dict(margin=0, fp8_format=Format.E4M3, fp8_dpa=False, fp8_mha=False)


class Float8BlockScaling(_Recipe):  # v2.9: 332-345; v2.18: 425-439
    ARGS = dict(use_f32_scales=False, fp8_format=Format.E4M3, x_block_scaling_dim=1,
                w_block_scaling_dim=2, grad_block_scaling_dim=1, fp8_gemm_fprop=None,
                fp8_gemm_dgrad=None, fp8_gemm_wgrad=None, fp8_dpa=False, fp8_mha=False)


class NVFP4BlockScaling(_Recipe):  # v2.9: 434-445; v2.18: 554-570 (the 2.16-2.17 additions kept)
    ARGS = dict(disable_rht=False, disable_stochastic_rounding=False,
                disable_2d_quantization=False, fp4_format=Format.E2M1, fp8_format=Format.E4M3,
                fp8_dpa=False, fp8_mha=False)


if VERSION >= (2, 9):
    class CustomRecipe(_Recipe):  # v2.9: 484-520; v2.16: 590-660; v2.18: 626-700
        """qfactory(role): role strings before 2.16, a QuantizerRole (or None) from 2.16."""
        ARGS = dict(qfactory=None, fp8_format=Format.HYBRID, fp8_dpa=False, fp8_mha=False)

        def __init__(self, **kw):
            if kw.get("qfactory") is None:
                raise TypeError("CustomRecipe() missing required argument: 'qfactory'")
            super().__init__(**kw)
