"""fp8lab.capture: record a PyTorch training run as an fp8lab trace.

(tools/capture/fp8lab_capture.py until issue 43: that import still works, with a FutureWarning.)

A trace (docs/reference.md, "Traces") is a directory of `step_<N>.safetensors` snapshots plus an
`amax.csv` (`step,tensor,amax[,micro][,te_scale]`) with every step's amaxes; tensors are named
`<GEMM name>.<role>`. The Recorder sees every linear GEMM of the model and writes both:

    import fp8lab.capture
    with fp8lab.capture.Recorder(model, "traces/run1", every=50) as rec:
        for step, batch in enumerate(loader):
            ...forward/backward/optimizer...
            rec.step(step)

What is seen (docs/capture.md has the table):
- every call of torch.nn.functional.linear whose weight is a parameter of the model: nn.Linear,
  and the GEMMs torch runs inside nn.MultiheadAttention (the packed q/k/v projection
  `<mha>.in_proj`, or `<mha>.q_proj`/`k_proj`/`v_proj` when kdim/vdim differ, and
  `<mha>.out_proj`), so nn.TransformerEncoderLayer and Hugging Face models built from nn.Linear;
  the Recorder replaces torch.nn.functional.linear for its lifetime (restored at close);
- matmul / mm / addmm calls made from Python with a parameter W as second operand, x @ W (Hugging
  Face's Conv1D, W stored (in, out): the weight is recorded transposed, as (out, in)) or
  x @ W.t() (torch.matmul/mm/addmm and Tensor.matmul/mm/addmm/__matmul__ are wrapped for the
  Recorder's lifetime, not a TorchFunctionMode, whose Python call on every torch op cost
  +40.7% of the tiny GPT's step against +14.4%; matmul=False leaves them alone);
- TransformerEngine modules (te.Linear, te.LayerNormLinear, te.LayerNormMLP, and
  te.TransformerLayer through them) by module hooks, with the GEMM operands recomputed where TE
  fuses them: LayerNormLinear's input is the normalized input; LayerNormMLP is two GEMMs,
  `<path>.fc1` (input: the normalized input; output: fc1's pre-activation z) and `<path>.fc2`
  (input: act(z); grad_output: the module's), with fc1's grad_output (g @ fc2_weight) * act'(z).
  TE's own scale of each operand (module.fp8_meta["scaling_fwd"/"scaling_bwd"].scale, read as
  the call begins and as its gradient arrives) goes into amax.csv's te_scale column.
  te.GroupedLinear(inp, m_splits): expert i is the GEMM `<path>.experts.<i>` over its rows of
  inp (m_splits[i] of them), weight<i>, te_scale from fp8_meta slots 3i (input), 3i + 1
  (weight), 2i (grad_output) (TE's num_gemms x 3 forward and x 2 backward slots);
- Mixture-of-Experts with fused 3-D expert weights (E, out, in) or transposed (E, in, out),
  as Hugging Face stores them (docs/capture.md, "Mixture-of-Experts"): expert e of parameter
  `<path>.<param>` is the GEMM `<path>.<e>.<param>` (`model.layers.0.mlp.experts.3.gate_up_proj`;
  `<path>.experts.<e>.<param>` when the module is not called `experts`), its weight recorded as
  (out, in), seen through torch._grouped_mm / F.grouped_mm (x (S, in) against W (E, in, out)
  with per-expert row offsets `offs`) and transformers' `transformers::grouped_mm_fallback`
  op, torch.bmm (Llama 4's dense bmm over all experts: rows of zeros, the tokens not routed to
  the expert, are left out of its input, its gradients and its token count; transformers'
  "batched_mm", with the routing ids the experts module was called with), and the eager loop's
  F.linear(x, W[e]) / x @ W[e] (a select of the 3-D parameter). Per-expert amaxes come from
  one scatter over the rows' maxima (no loop over rows, no synchronisation outside snapshot
  steps); every expert's weight is recorded at the first call of any of them in each
  micro-batch (TE quantizes every expert's weight every step); an expert that got no tokens
  has input and gradient amax 0 ("did not run"). These wrappers are installed only for a
  model with a 3-D parameter: a dense model keeps torch's bmm and grouped_mm (the wrapper's
  cost, not a TorchFunctionMode's, which would run Python on every op). The router
  (`mlp.gate`, `router` beside an `experts`) is an ordinary GEMM, registered up front.
GEMM names: the owning module's path (`blocks.0.attn.qkv`), `.<param>` minus `_weight` for a
parameter not called `weight` (`in_proj`); an nn.Sequential's index reads `<index>_<class>`
(`2_linear`); the root is `root`. `modules` globs select GEMM names. A parameter shared by
several modules (GPT-2's LM head tied to the token embedding) is named by the module whose GEMM
uses it (`lm_head`, a Linear before any other module), and each snapshot's metadata names its
owner: `tied.lm_head.weight = transformer.wte.weight` (its name in model.named_parameters()).

Roles, per GEMM call: `input` (the activation operand), `weight` (at the GEMM's first call of each
micro-batch: the weight before the optimizer updates it), `grad_output` (the gradient w.r.t.
this call's output, by a tensor hook): the three FP8 operands, DEFAULT_ROLES; `output` and
`grad_input` (w.r.t. this call's input alone, through an identity autograd function) only when
asked for in `roles` (ALL_ROLES: all five).

dtype: "operand" (default) records the dtype the GEMM consumed: under torch autocast the autocast
dtype (the amax is that of the cast value, computed without casting the tensor: rounding is
monotonic), else the tensor's own; "bf16", "f16", "f32" convert (snapshots and amaxes alike).

Amax rules (those of fp8lab): amax = max |x| over the non-NaN elements, inf counts, 0 for an
all-NaN or empty tensor. Computed on the tensor's device as the call runs (torch.aminmax, no |x|
temporary; on accelerators NaN is replaced chunk by chunk, so no full-size temporary either) and
fetched with one device-to-host transfer per step and device (at `rec.step`).
- A GEMM that did not run in a micro-batch gets amax 0 there (fp8lab: "did not run", delayed
  scaling keeps its state). One expected to run (nn.Linear, MultiheadAttention, TE modules, your
  `types`) that never ran in the whole capture gives one warning line on stderr naming it at
  close (and is listed in rec.never_ran).
- Evaluation forwards (issue 44): a GEMM call made while the Recorder's model (the module given
  to it, not the calling submodule) is in eval() mode, or under torch.inference_mode(), is not
  a training call. eval="skip" (default): not recorded at all (amax.csv, snapshots, micro-batch
  count, rec.never_ran's "ran"); eval="apart": its forward roles go to <trace>/eval/amax.csv
  (same format and tensors, created at the first step with one; rows only at steps preceded by
  an evaluation forward, each attributed, like a training forward, to the rec.step that follows
  it; grad_output 0; no snapshots, no tokens); eval="record": the rule before issue 44, recorded
  as training. The root's flag, not each module's: model.eval() is how evaluation is entered,
  and a submodule kept in eval() during training (a frozen backbone) still runs in the
  training step. A torch.no_grad() forward in training mode IS recorded (grad_output amax 0).
- Activation recomputation (torch.utils.checkpoint, use_reentrant True or False): a forward run
  inside backward (torch >= 2.0: autograd's current graph task; torch 1.13: inside
  torch.utils.checkpoint's recomputation) is not a call: nothing of it is recorded except, for
  a call whose first forward ran under no_grad (reentrant checkpointing), its gradients, at
  that call's index (the matching call found by its input at snapshot steps). So a
  checkpointed model's trace equals the plain model's. Experts' grouped/batched GEMMs and TE
  GroupedLinear are not recorded in a recomputation (their gradients under reentrant
  checkpointing are missed).
- GEMM calls recorded after the last rec.step (none follows them) are dropped: one warning line
  on stderr at close gives their count, and rec.unstepped.
- Several calls of a GEMM in a step (weight sharing, micro-batches): the snapshot
  holds the calls concatenated along the first dimension in call order, each reshaped to
  (-1, last dim) (one call keeps its shape); each call's grad_output is stored at its call's
  index, so input and grad_output rows pair call by call whatever order backward runs in. When
  some calls had no backward (a forward under no_grad that no recomputation repeats), the
  gradient is left out of that step's snapshot with a warning (its amax is recorded).

Micro-batches (micro="auto", the default): a micro-batch ends when a forward call follows a
backward within a step, or at rec.micro_step(); amax.csv then has one row per (step, micro,
tensor) in its `micro` column, and fp8lab runs the delayed recurrence once per micro-batch, as TE
does with gradient accumulation. micro=False: one row per step over all calls (no column).

Snapshots: at steps that are multiples of `every` (step 0 included), tensors are copied to the
CPU as the calls run (a synchronisation, at snapshot steps only) and written as
step_<N>.safetensors: BF16, F16 and F32 as they are, other dtypes as F32. The Recorder decides
whether to copy before it knows the step number, so it predicts the next step as the previous one
+ 1 (the first as `start_step`); `rec.step(n)` with another n still records amaxes, but an
unpredicted snapshot step is skipped with a warning. Steps must increase. rows=N keeps N rows
(tokens) of each activation and gradient, the same for a GEMM's roles, with the whole's row
count in the metadata (`fp8lab.rows.<tensor>`; docs/capture.md, "Sizing a capture").

Tokens: a model with experts also gets `tokens.csv` (`step,gemm,tokens`: one row per step and
expert GEMM, the token rows routed to it over the step's micro-batches, 0 when none), written
as tokens.csv.partial and renamed at close. A parameter of 3 or more dimensions that gets a
gradient while none of its calls was recorded (an op not wrapped: einsum, a convolution, a
kernel of its own) gives one warning line naming it (at the step it is first seen, or at
close) and is listed in rec.uncaptured; experts expected to run that never got a token are in
rec.never_ran.

Files: every file is written to a temporary name and renamed. amax.csv is appended (flushed each
step) as `amax.csv.partial` and renamed when the Recorder closes, also when the `with` block ends
by an exception. safetensors.torch.save_file is used when importable, else a built-in writer.
Distributed: under torch.distributed each rank writes `<path>/rank_<r>/`.

Not seen: GEMMs inside torch.compile'd or scripted code, F.linear bound before the Recorder
started (`from torch.nn.functional import linear`), weights that are not parameters (FSDP's flat
views), matmuls inside other torch functions than F.linear, expert weights used through ops
not listed above (warned). Tested with torch 1.13 and 2.15 (the MoE classes of transformers
5.25: Mixtral, Qwen3-MoE, GPT-OSS, Llama 4).
"""
import contextlib
import ctypes
import fnmatch
import json
import os
import struct
import sys
import warnings
import zlib

try:
    import torch
except ImportError as _e:  # the optional dependency: say how to get it
    raise ImportError("fp8lab.capture needs PyTorch (torch >= 1.13): pip install "
                      "\"fp8lab[capture]\" (or torch) into this environment (%s)" % _e) from _e

__all__ = ["Recorder", "write_safetensors", "amax_of", "DEFAULT_ROLES", "ALL_ROLES", "DTYPES",
           "EVAL_MODES"]

ALL_ROLES = ("input", "weight", "output", "grad_output", "grad_input")
_ROW_ROLES = ("input", "output", "grad_output", "grad_input")  # a row per token: rows=N cuts
DEFAULT_ROLES = ("input", "weight", "grad_output")
DTYPES = ("operand", "bf16", "f16", "f32")
EVAL_MODES = ("skip", "apart", "record")  # Recorder(eval=...): what an evaluation forward does
_DTYPE_OF = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}

# dtypes written as they are; everything else is converted to float32
_ST_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}


def amax_of(x):
    """amax of a tensor with fp8lab's rules, as a 0-d float32 tensor on x's device: max |x|
    over non-NaN elements, inf counts, 0 for an empty or all-NaN tensor."""
    a = _amax_value(x)
    if isinstance(a, float):
        return torch.tensor(a, dtype=torch.float32, device=x.device)
    return a


def _amax_value(x):
    """amax_of's value: a Python float for a CPU tensor, else a 0-d float32 tensor on x's
    device (no synchronisation; Recorder.step fetches all of a step's at once).

    amax = max(-min, max), no |x| temporary. On the CPU min and max are two reductions (amax and
    amin: 25% faster than torch.aminmax's one pass there, measured on the tiny GPT's tensors);
    on accelerators torch.aminmax. Both propagate NaN: on the CPU the result is checked (there
    is no device to wait for) and recomputed with NaN replaced by 0 only when it is NaN (one
    pass otherwise); on accelerators NaN is replaced first, in chunks of _CHUNK elements (the
    temporary is one chunk), so that nothing waits for the device inside forward/backward.
    The first lines are the Recorder's hot path (every recorded tensor of every call): the
    common case, a non-empty F32/BF16 CPU tensor without NaN, returns there."""
    x = x.detach()
    if x.is_cpu and x.dtype in _FAST_CPU and x.numel():
        m = max(-float(x.amin()), float(x.amax()))
        if m == m:
            return m + 0.0  # -0 -> +0
    if x.numel() == 0:
        return 0.0 if x.device.type == "cpu" else \
            torch.zeros((), dtype=torch.float32, device=x.device)
    if x.dtype not in _ST_DTYPES:
        x = x.float()  # recorded as F32, like the snapshot (rounding is monotonic)
    inf = float("inf")
    if x.device.type == "cpu":
        mn, mx = _cpu_extrema(x)
        m = max(-mn, mx)
        if m == m:  # not NaN
            return m + 0.0  # -0 -> +0
        mn, mx = _aminmax(torch.nan_to_num(x, nan=0.0, posinf=inf, neginf=-inf))
        return max(-float(mn), float(mx)) + 0.0
    # accelerators: NaN replaced chunk by chunk, so that the temporary is one chunk, never a
    # full-size copy (no synchronisation either: the chunks' results combine on the device)
    if x.dim() == 0 or x.is_contiguous():
        parts, step = x.reshape(-1), _CHUNK  # a view: no copy
    else:  # slices along the first dimension (views), about _CHUNK elements each
        parts, step = x, max(1, _CHUNK // max(1, x[0].numel()))
    out = None
    for i in range(0, parts.shape[0], step):
        mn, mx = _aminmax(torch.nan_to_num(parts[i:i + step], nan=0.0, posinf=inf,
                                           neginf=-inf))
        m = torch.maximum(-mn, mx).abs().float()
        out = m if out is None else torch.maximum(out, m)
    return out


_CHUNK = 1 << 22  # elements per NaN-replacement chunk on accelerators (16 MiB of F32)


def _cpu_extrema(x):
    """(min, max) of a non-empty CPU tensor as Python floats."""
    try:
        return float(x.amin()), float(x.amax())
    except RuntimeError:  # a dtype without amin/amax on the CPU (float16 in torch 1.13)
        mn, mx = _aminmax(x)
        return float(mn), float(mx)


_FAST_CPU = (torch.float32, torch.bfloat16)  # with amin/amax on the CPU in torch 1.13 and 2.x
_NO_AMINMAX = set()  # (device type, dtype) where torch.aminmax is not implemented


def _aminmax(x):
    key = (x.device.type, x.dtype)
    if key not in _NO_AMINMAX:
        try:
            return torch.aminmax(x)
        except RuntimeError:  # e.g. float16 on the CPU in torch 1.13
            _NO_AMINMAX.add(key)
    return x.min(), x.max()


def _tensor_bytes(t):
    """The raw bytes of a contiguous CPU tensor (native byte order, which is little-endian)."""
    n = t.numel() * t.element_size()
    if n == 0:
        return b""
    return ctypes.string_at(t.data_ptr(), n)


def _prepare(t):
    t = t.detach()
    if t.dtype not in _ST_DTYPES:
        t = t.float()
    return t.to("cpu").contiguous()


def write_safetensors(path, tensors, metadata=None, use_package=None):
    """Writes {name: tensor} to `path` as safetensors, via a temporary file and a rename.

    BF16/F16/F32 stay as they are, other dtypes become F32. use_package: None = use
    safetensors.torch.save_file when importable, False = always the built-in writer."""
    tensors = {k: _prepare(v) for k, v in tensors.items()}
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        st = None
        if use_package is not False:
            try:
                import safetensors.torch as st  # noqa: F811
            except ImportError:
                st = None
        if st is not None:
            st.save_file(tensors, tmp, metadata=meta or None)
        else:
            if sys.byteorder != "little":
                raise RuntimeError("the built-in safetensors writer needs a little-endian host")
            header, off = {}, 0
            names = sorted(tensors)
            for k in names:
                t = tensors[k]
                nb = t.numel() * t.element_size()
                header[k] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape),
                             "data_offsets": [off, off + nb]}
                off += nb
            if meta:
                header["__metadata__"] = meta
            hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
            hb += b" " * ((8 - (8 + len(hb)) % 8) % 8)
            with open(tmp, "wb") as f:
                f.write(struct.pack("<Q", len(hb)))
                f.write(hb)
                for k in names:
                    f.write(_tensor_bytes(tensors[k]))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _first_tensor(x):
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (tuple, list)) and x and isinstance(x[0], torch.Tensor):
        return x[0]
    return None


def _concat_calls(ts):
    """One tensor for several calls of a GEMM in a step (see the module docstring)."""
    if len(ts) == 1:
        return ts[0]
    dtype = ts[0].dtype
    if any(t.dtype != dtype for t in ts):
        ts = [t.float() for t in ts]
    if all(t.dim() >= 1 for t in ts) and len({t.shape[-1] for t in ts}) == 1:
        return torch.cat([t.reshape(-1, t.shape[-1]) for t in ts], 0)
    return torch.cat([t.reshape(-1) for t in ts], 0)


def _autocast_dtype_new(x):
    """The dtype autocast gives a linear op's floating operand x, or None outside autocast."""
    if not x.is_floating_point() or x.dtype == torch.float64:
        return None
    dev = x.device.type
    return torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else None


def _autocast_dtype_old(x):  # torch 1.13 .. 2.3
    if not x.is_floating_point() or x.dtype == torch.float64:
        return None
    dev = x.device.type
    if dev == "cuda" and torch.is_autocast_enabled():
        return torch.get_autocast_gpu_dtype()
    if dev == "cpu" and torch.is_autocast_cpu_enabled():
        return torch.get_autocast_cpu_dtype()
    return None


try:  # torch >= 2.4 takes the device type
    torch.is_autocast_enabled("cpu")
    _autocast_dtype = _autocast_dtype_new if hasattr(torch, "get_autocast_dtype") else \
        _autocast_dtype_old
except TypeError:
    _autocast_dtype = _autocast_dtype_old


class _Tap(torch.autograd.Function):
    """Identity in forward; in backward hands the gradient that flows through it (that of this
    GEMM's input alone, not the sum over the tensor's other consumers) to a callback."""

    @staticmethod
    def forward(ctx, x, cb):
        ctx.cb = cb
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        ctx.cb(g)
        return g, None


# TransformerEngine modules, by class name (any class of that name defined in a module of the
# transformer_engine package, or a stand-in declaring itself so); TE's index of each GEMM
# operand in fp8_meta["scaling_fwd"/"scaling_bwd"] (FP8FwdTensors: GEMM1_INPUT 0, GEMM1_WEIGHT 1,
# GEMM2_INPUT 3, GEMM2_WEIGHT 4; FP8BwdTensors: GRAD_OUTPUT1 0, GRAD_OUTPUT2 2: the fc1 grad of
# LayerNormMLP, its dgelu, is GRAD_OUTPUT2, fc2's is GRAD_OUTPUT1; read from TE's source).
_TE_KINDS = {"Linear": "te_linear", "LayerNormLinear": "te_lnlinear",
             "LayerNormMLP": "te_lnmlp", "GroupedLinear": "te_grouped"}
# TE's GroupedLinear: expert i's slots are input 3i, weight 3i + 1 (scaling_fwd: num_gemms x 3)
# and grad_output 2i (scaling_bwd: num_gemms x 2): its _offsets {"input": 0, "weight": 1,
# "output": 2, "grad_output": 0} plus i x _num_fp8_tensors_per_gemm {"fwd": 3, "bwd": 2}.
_TE_BWD = {"te_linear": {"gemm1": 0}, "te_lnlinear": {"gemm1": 0},
           "te_lnmlp": {"gemm1": 2, "gemm2": 0}}


def _te_kind(mod):
    for c in type(mod).__mro__:
        if c.__name__ in _TE_KINDS and c.__module__.split(".")[0] == "transformer_engine":
            return _TE_KINDS[c.__name__]
    return None


def _te_num_gemms(mod):
    """The number of GEMMs (experts) of a TE GroupedLinear: num_gemms, else its weight<i>."""
    n = getattr(mod, "num_gemms", None)
    if isinstance(n, int):
        return n
    n = 0
    while isinstance(getattr(mod, "weight%d" % n, None), torch.Tensor):
        n += 1
    return n


def _te_scale(mod, table, idx):
    """TE's scale for operand idx of `table` (scaling_fwd/scaling_bwd), a copy (TE updates
    it in place), or None when the module has no FP8 metadata (not yet run under fp8)."""
    meta = getattr(mod, "fp8_meta", None)
    if not isinstance(meta, dict) or meta.get(table) is None:
        return None
    tm = meta[table]
    scale = getattr(tm, "scale", None)
    if scale is None and isinstance(tm, dict):
        scale = tm.get("scale")
    if not isinstance(scale, torch.Tensor) or scale.numel() <= idx:
        return None
    s = scale.detach().reshape(-1)[idx].float().clone()
    return float(s) if s.device.type == "cpu" else s


def _te_norm(mod, x):
    """The LayerNorm / RMSNorm of a TE LayerNormLinear / LayerNormMLP input: the GEMM operand."""
    w = mod.layer_norm_weight
    b = getattr(mod, "layer_norm_bias", None)
    if getattr(mod, "zero_centered_gamma", False):
        w = w + 1
    eps = float(getattr(mod, "eps", 1e-5))
    if getattr(mod, "normalization", "LayerNorm") == "RMSNorm":
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()
        return y.to(x.dtype)
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def _gelu_tanh(z):
    return torch.nn.functional.gelu(z, approximate="tanh")


def _glu(act):
    def f(z):
        a, b = z.chunk(2, -1)
        return act(a) * b
    return f


# TE's activations (LayerNormMLP(activation=...)); gated ones act on the first half
_TE_ACT = {"gelu": _gelu_tanh, "relu": torch.relu, "silu": torch.nn.functional.silu,
           "qgelu": lambda z: z * torch.sigmoid(1.702 * z),
           "srelu": lambda z: torch.relu(z) ** 2,
           "geglu": _glu(_gelu_tanh), "reglu": _glu(torch.relu),
           "swiglu": _glu(torch.nn.functional.silu),
           "qgeglu": _glu(lambda z: z * torch.sigmoid(1.702 * z)),
           "sreglu": _glu(lambda z: torch.relu(z) ** 2)}


def _param_2d(mod, names):
    for n in names:
        p = getattr(mod, n, None)
        if isinstance(p, torch.Tensor) and p.dim() == 2:
            return p
    return None


def _readable(model, path):
    """A module path with each index into an nn.Sequential written `<index>_<class>`
    (`2` -> `2_linear`), so that a Sequential's layers read as more than a number."""
    if not path:
        return "root"
    parts, mod, out = path.split("."), model, []
    for p in parts:
        child = mod._modules.get(p) if mod is not None else None
        if isinstance(mod, torch.nn.Sequential) and p.isdigit() and child is not None:
            out.append("%s_%s" % (p, type(child).__name__.lower()))
        else:
            out.append(p)
        mod = child
    return ".".join(out)



def linear_gemms(model, modules="*", owned=()):
    """The GEMMs seen through F.linear / matmul calls, named as the Recorder names them: a list
    of (parameter, GEMM name, owner, expected) for every 2-D parameter of `model` whose name
    matches one of the `modules` globs (a comma-separated string or a list), in the Recorder's
    order (nn.Linear and nn.MultiheadAttention modules first). The name is the owning module's
    path (_readable), `.<param>` minus `_weight` for a parameter not called `weight`; a tied
    parameter is named by the first module that holds it in that order and `owner` is its name
    in model.named_parameters() (else None); `expected`: a Linear's, an attention's or a MoE
    router's (expected to run). `owned`: ids of parameters left out (those of modules recorded
    by hooks). Shared with fp8lab.closedloop, whose tensor names must equal the Recorder's."""
    if isinstance(modules, str):
        modules = [m.strip() for m in modules.split(",") if m.strip()]
    globs = list(modules)
    canon = {}
    for pn, p in model.named_parameters():
        canon.setdefault(id(p), pn)
    gemm_types = (torch.nn.Linear, torch.nn.MultiheadAttention)
    mods = list(model.named_modules())
    mods = [m for m in mods if isinstance(m[1], gemm_types)] + \
        [m for m in mods if not isinstance(m[1], gemm_types)]
    claimed = set()  # parameters named already, or of a GEMM `modules` leaves out
    children = {path: set(mod._modules) for path, mod in mods}
    out = []
    for path, mod in mods:
        name = _readable(model, path)
        expected_mod = isinstance(mod, gemm_types)
        parent, _, last = path.rpartition(".")
        if last in ("gate", "router") and "experts" in children.get(parent, ()):
            expected_mod = True  # a MoE router: an ordinary GEMM, rows from the first step
        for pname, p in mod.named_parameters(recurse=False):
            if p.dim() != 2 or id(p) in owned or id(p) in claimed:
                continue
            claimed.add(id(p))
            if pname == "weight":
                g = name
            elif pname.endswith("_weight"):
                g = "%s.%s" % (name, pname[:-len("_weight")])
            else:
                g = "%s.%s" % (name, pname)
            if not any(fnmatch.fnmatchcase(g, m) for m in globs):
                continue
            here = "%s.%s" % (path, pname) if path else pname
            owner = canon[id(p)] if canon.get(id(p), here) != here else None
            out.append((p, g, owner, expected_mod))
    return out


# ------------------------------------------------------------------ Mixture-of-Experts helpers
def _row_amax(x):
    """fp8lab's amax of each row of a 2-D tensor (max |x| over the non-NaN elements, inf
    counts, 0 for an empty or all-NaN row) as a float32 vector on x's device. On the CPU one
    amin/amax pass, redone with NaN replaced only when a row is NaN; on accelerators NaN is
    replaced chunk by chunk (the temporary is one chunk, no synchronisation)."""
    x = x.detach()
    rows = x.shape[0]
    if rows == 0 or x.shape[1] == 0:
        return torch.zeros(rows, dtype=torch.float32, device=x.device)
    if x.dtype not in _FAST_CPU and (x.is_cpu or x.dtype not in _ST_DTYPES):
        x = x.float()  # float16 on the CPU lacks amin/amax in torch 1.13; others as F32
    inf = float("inf")
    if x.is_cpu:
        r = torch.maximum(-x.amin(1), x.amax(1))
        if bool(torch.isnan(r).any()):
            y = torch.nan_to_num(x, nan=0.0, posinf=inf, neginf=-inf)
            r = torch.maximum(-y.amin(1), y.amax(1))
        return r.float()
    step = max(1, _CHUNK // max(1, x.shape[1]))
    parts = []
    for i in range(0, rows, step):
        y = torch.nan_to_num(x[i:i + step], nan=0.0, posinf=inf, neginf=-inf)
        parts.append(torch.maximum(-y.amin(1), y.amax(1)).float())
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _seg_amax(rowmax, ids, n):
    """The max of rowmax over the rows of each expert: ids[i] in [0, n] is row i's expert, n
    for a row of no expert (dropped). A vector of n float32 values, 0 for an expert without
    rows; one scatter, no Python loop over rows."""
    out = torch.zeros(n + 1, dtype=torch.float32, device=rowmax.device)
    out.scatter_reduce_(0, ids, rowmax, "amax")
    return out[:n]


def _offs_ids(offs, rows, n):
    """Each row's expert from grouped_mm's offsets (offs[e] = the end of expert e's rows);
    rows at or beyond offs[-1] get n (not computed by the GEMM)."""
    offs = offs.detach().reshape(-1)
    r = torch.arange(rows, device=offs.device, dtype=offs.dtype)
    return torch.searchsorted(offs.contiguous(), r, right=True).to(torch.int64).clamp_(max=n)


_graph_task_id = getattr(torch._C, "_current_graph_task_id", None)


def _in_backward():
    """True inside autograd's backward pass (a function called from a backward formula written
    in Python, as transformers' grouped_mm fallback, is not a forward GEMM call)."""
    return _graph_task_id is not None and _graph_task_id() != -1


def _recompute_codes():
    """torch 1.13 (no _current_graph_task_id): the code objects inside which
    torch.utils.checkpoint recomputes a forward in backward: CheckpointFunction.backward
    (use_reentrant=True) and the saved-tensor unpack hook of _checkpoint_without_reentrant
    (use_reentrant=False)."""
    codes = set()
    try:
        import torch.utils.checkpoint as ckpt
    except ImportError:
        return codes
    fn = getattr(getattr(ckpt, "CheckpointFunction", None), "backward", None)
    if fn is not None and hasattr(fn, "__code__"):
        codes.add(fn.__code__)
    nr = getattr(ckpt, "_checkpoint_without_reentrant", None)
    if nr is not None and hasattr(nr, "__code__"):
        codes.update(c for c in nr.__code__.co_consts
                     if hasattr(c, "co_name") and c.co_name == "unpack")
    return codes


_RECOMPUTE_CODES = _recompute_codes() if _graph_task_id is None else set()


def _recomputing():
    """True when the forward call now running is an activation recomputation: a forward run
    inside autograd's backward (torch.utils.checkpoint, reentrant or not, and any other
    recomputation inside backward; torch >= 2.0), or on torch 1.13 inside
    torch.utils.checkpoint's recomputation (found on the Python stack)."""
    if _graph_task_id is not None:
        return _graph_task_id() != -1
    f = sys._getframe(2)
    while f is not None:
        if f.f_code in _RECOMPUTE_CODES:
            return True
        f = f.f_back
    return False


_inference_mode = getattr(torch, "is_inference_mode_enabled", lambda: False)


class _Experts:
    """A 3-D parameter (E, a, b) holding E experts' weights, and its E expert GEMMs."""
    __slots__ = ("param", "pname", "gemms", "sites", "transposed", "seen", "module")

    def __init__(self, param, pname, module):
        self.param, self.pname, self.module = param, pname, module
        self.gemms = []           # GEMM name of each expert (set when registered)
        self.sites = []           # _Site of each expert, None where `modules` leaves it out
        self.transposed = None    # stored (E, in, out) (True) or (E, out, in); known at a call
        self.seen = False         # a call of it was recorded


def _is_experts_module(path, mod):
    last = path.rsplit(".", 1)[-1]
    return last == "experts" or type(mod).__name__.endswith("Experts")


class _Site:
    """One GEMM the Recorder records: its tensor-name prefix and what it saw."""
    __slots__ = ("name", "expected", "ran", "te")

    def __init__(self, name, expected, te=False):
        self.name, self.expected, self.ran, self.te = name, expected, False, te


def _matmul_targets():
    """The matmul-like functions the Recorder wraps (matmul=True): (owner, attribute, index of
    the activation operand, index of the weight operand)."""
    T = torch.Tensor
    return [(torch, "matmul", 0, 1), (torch, "mm", 0, 1), (torch, "addmm", 1, 2),
            (T, "matmul", 0, 1), (T, "mm", 0, 1), (T, "__matmul__", 0, 1), (T, "addmm", 1, 2)]


class Recorder:
    """Records every linear GEMM of `model` (see the module docstring) into the trace `path`.

    model: an nn.Module. path: the trace directory (created; `rank_<r>/` added under
    torch.distributed). modules: fnmatch globs on GEMM names (the part before `.input`), a
    comma-separated string or a list (default "*"). every: snapshot steps are the multiples of
    `every` (None or 0: amax.csv only). roles: which of ALL_ROLES to record. dtype: the dtype of
    the recorded tensors, one of DTYPES (default "operand": what the GEMM consumed, the autocast
    dtype under autocast). micro: "auto" (default: a micro-batch ends where a forward follows a
    backward within a step, or at rec.micro_step()), "manual" (at rec.micro_step() only) or
    False (one amax per step over all its calls, no `micro` column). matmul: also look at
    matmul/mm/addmm calls whose weight is a parameter (wrapped for the Recorder's lifetime;
    default True).
    types: extra module classes recorded with module hooks as `<module path>` (first positional
    argument = input, module.weight = weight); nn.Linear needs none. start_step: the first step
    number expected. overwrite: remove an existing trace's files instead of refusing.
    rows: None (default: whole tensors) or N: each snapshot keeps N rows (tokens) of a GEMM's
    input, output, grad_output and grad_input, the same rows for all of them (drawn without
    replacement, in order, seeded by rows_seed, the GEMM's name and the step), with the whole's
    row count in the snapshot's metadata (`fp8lab.rows.<tensor>`); weights stay whole and
    amax.csv is the whole tensors' (docs/capture.md, "Sizing a capture").
    eval: what a forward in evaluation (the model in eval() mode, or under
    torch.inference_mode()) does, one of EVAL_MODES: "skip" (default: not recorded), "apart"
    (into <path>/eval/amax.csv, same format; rec.eval_steps counts its steps) or "record"
    (into amax.csv as a training call, the rule before issue 44)."""

    def __init__(self, model, path, modules="*", every=100, roles=DEFAULT_ROLES, types=(),
                 start_step=0, overwrite=False, dtype="operand", micro="auto", matmul=True,
                 rows=None, rows_seed=0, eval="skip"):
        if eval not in EVAL_MODES:
            raise ValueError("eval %r: expected one of %s" % (eval, ", ".join(EVAL_MODES)))
        self.eval_forwards = eval
        self._root = model
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
            raise ValueError("rows %r: expected None (whole tensors) or an integer >= 1" % (rows,))
        self.rows = rows
        self.rows_seed = int(rows_seed)
        if isinstance(modules, str):
            modules = [m.strip() for m in modules.split(",") if m.strip()]
        self._globs = list(modules)
        roles = tuple(roles)
        bad = [r for r in roles if r not in ALL_ROLES]
        if bad:
            raise ValueError("unknown role(s) %s (known: %s)" % (bad, ", ".join(ALL_ROLES)))
        if dtype not in DTYPES:
            raise ValueError("dtype %r: expected one of %s" % (dtype, ", ".join(DTYPES)))
        if micro not in ("auto", "manual", False, None):
            raise ValueError("micro %r: expected 'auto', 'manual' or False" % (micro,))
        self.every = int(every) if every else 0
        self.roles = roles
        self.dtype = dtype
        self._dtype_is_operand = dtype == "operand"
        self.micro = micro or False
        rank = None
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            rank = torch.distributed.get_rank()
            path = os.path.join(path, "rank_%d" % rank)
        self.path = path
        self.rank = rank

        self.names = []           # tensor names in amax.csv order (grows as GEMMs appear)
        self._known = set()
        self._sites = {}          # GEMM name -> _Site
        self._op_params = {}      # id(parameter) -> GEMM name, for F.linear / matmul calls
        self.tied = {}            # "<GEMM>.weight" -> its owner's parameter name, when tied
        self._mod_sites = []      # (module path, module, kind)
        self._experts = {}        # id(3-D parameter) -> _Experts
        self._expert_names = []   # expert GEMMs in tokens.csv order
        self._grad3d = {}         # id(parameter of >= 3 dims) -> its name, once it got a gradient
        self.uncaptured = []      # such parameters that got a gradient with no call recorded
        self._inner = 0           # inside a recorded grouped/batched call: nested GEMMs are its own
        self._ctx = None          # (experts module, its routing indices) during its forward
        self._handles = []
        self._find_sites(model, tuple(t for t in types if t is not torch.nn.Linear))
        self._find_experts(model)
        if not self._sites and not self._op_params and not self._experts:
            raise ValueError("no GEMM of the model matches %s" % ",".join(self._globs))
        self._has_te = any(s.te for s in self._sites.values())

        os.makedirs(path, exist_ok=True)
        ours = [f for f in os.listdir(path) if (f.startswith("step_") and
                f.endswith(".safetensors")) or f in ("amax.csv", "amax.csv.partial", "tokens.csv",
                                                     "tokens.csv.partial")]
        if ours and not overwrite:
            raise FileExistsError("%s already holds a trace (%s, ...); pass overwrite=True" %
                                  (path, sorted(ours)[0]))
        ev = os.path.join(path, "eval")
        ev_ours = [f for f in (os.listdir(ev) if os.path.isdir(ev) else [])
                   if f in ("amax.csv", "amax.csv.partial")]
        if ev_ours and not ours and not overwrite:
            raise FileExistsError("%s already holds a trace (eval/%s); pass overwrite=True" %
                                  (path, ev_ours[0]))
        for f in ours:
            os.remove(os.path.join(path, f))
        for f in ev_ours:
            os.remove(os.path.join(ev, f))
        self._eval_partial = os.path.join(ev, "amax.csv.partial")
        self._eval_csv = None     # eval/amax.csv.partial, opened at the first evaluation rows
        self.eval_steps = 0       # steps with evaluation rows in eval/amax.csv (eval="apart")
        self.unstepped = 0        # GEMM calls recorded after the last rec.step (set by close)
        self._in_eval = 0         # inside an evaluation forward recorded apart
        self._recomp = 0          # inside an activation recomputation's call
        self._eval_st = None      # the evaluation forwards' per-step state (eval="apart")
        self._csv_partial = os.path.join(path, "amax.csv.partial")
        self._csv = open(self._csv_partial, "w")
        self._csv.write(self._header())
        self._csv.flush()
        self._tok_partial = None
        self._tok_csv = None
        if self._experts or self._expert_names:
            self._tok_partial = os.path.join(path, "tokens.csv.partial")
            self._tok_csv = open(self._tok_partial, "w")
            self._tok_csv.write("step,gemm,tokens\n")
            self._tok_csv.flush()

        self._next = int(start_step)
        self._cap = False
        self._last = None
        self._paused = 0
        self._saved = {}          # (module id, call) -> tensors a TE backward recomputation needs
        self.snapshots = []       # steps written as snapshots
        self.steps = 0
        self.never_ran = []       # GEMMs expected to run that never did (set by close)
        self._reset_step()
        if self.eval_forwards == "apart":
            self._eval_st = self._fresh_state()
        self._set_capturing()
        self._closed = False
        self._orig_linear = None
        self._patched = []        # (owner, attribute, original) replaced by _install
        try:
            self._install(model, matmul)
        except Exception:
            self.close()
            raise

    # ---------------------------------------------------------------- what is recorded
    def _wanted(self, name):
        return any(fnmatch.fnmatchcase(name, g) for g in self._globs)

    def _add_site(self, name, expected, te=False, weight=True):
        if name in self._sites:
            return self._sites[name]
        site = _Site(name, expected, te)
        self._sites[name] = site
        for r in self.roles:
            if r == "weight" and not weight:
                continue
            n = "%s.%s" % (name, r)
            if n not in self._known:
                self._known.add(n)
                self.names.append(n)
        return site

    def _find_sites(self, model, types):
        """GEMMs known before the first step: TE modules and `types` (module hooks); every
        nn.Linear, nn.MultiheadAttention and any other 2-D parameter (F.linear / matmul
        calls). Those of nn.Linear, MultiheadAttention and module hooks are expected to run."""
        owned = set()
        for path, mod in model.named_modules():
            kind = _te_kind(mod) or ("plain" if types and isinstance(mod, types) else None)
            if kind is None:
                continue
            for p in mod.parameters():
                owned.add(id(p))
            if any(path == q or path.startswith(q + ".") for q, _, _, _ in self._mod_sites):
                continue  # inside a module recorded whole (a TE module's own parts)
            name = _readable(model, path)
            gemms = ("fc1", "fc2") if kind == "te_lnmlp" else ("",)
            if kind == "te_grouped":
                gemms = tuple("experts.%d" % i for i in range(_te_num_gemms(mod)))
            sites = []
            for g in gemms:
                n = "%s.%s" % (name, g) if g else name
                if self._wanted(n):
                    sites.append(self._add_site(n, True, te=kind != "plain"))
                    if kind == "te_grouped":
                        self._expert_names.append(n)
                else:
                    sites.append(None)
            if any(sites):
                self._mod_sites.append((path, mod, kind, sites))
        # A parameter used by several modules (GPT-2's LM head tied to the token embedding) is
        # named by the module whose GEMM uses it: the Linears and attentions first, then the
        # others; the owner (the parameter's name in model.named_parameters(), where it was
        # registered first) goes into the snapshots' metadata as tied.<GEMM>.weight.
        for p, g, owner, expected_mod in linear_gemms(model, self._globs, owned):
            self._op_params[id(p)] = g
            if owner is not None:
                self.tied[g + ".weight"] = owner
            if expected_mod:  # registered now: rows from the first step on
                self._add_site(g, True)

    def _find_experts(self, model):
        """3-D parameters (E, a, b): the fused weights of E experts. Those of a module named
        `experts` (or of a class named `*Experts`, as Hugging Face's) have their E GEMMs
        registered now, expected to run (rows from the first step); another 3-D parameter gets
        them when a call of it is first seen. Each parameter of 3 or more dimensions that
        requires a gradient gets a tensor hook noting that it got one, so that one whose GEMMs
        were never seen is named (_check_uncaptured)."""
        owned = set()
        for _, mod, _, _ in self._mod_sites:
            owned.update(id(p) for p in mod.parameters())
        done = set()
        for path, mod in model.named_modules():
            for pname, p in mod.named_parameters(recurse=False):
                if id(p) in done or p.dim() < 3:
                    continue
                done.add(id(p))
                if id(p) in owned:
                    continue
                if p.dim() == 3:
                    ep = _Experts(p, pname, mod)
                    name = _readable(model, path)
                    ep.gemms = ["%s.%d.%s" % (name, e, pname) if name.endswith("experts") or
                                name == "experts" else "%s.experts.%d.%s" % (name, e, pname)
                                for e in range(p.shape[0])]
                    self._experts[id(p)] = ep
                    if _is_experts_module(path, mod):
                        self._register_experts(ep, True)
                if p.requires_grad:
                    full = "%s.%s" % (path, pname) if path else pname
                    self._handles.append(p.register_hook(self._grad3d_hook(id(p), full)))

    def _grad3d_hook(self, pid, name):
        def hook(g):
            self._grad3d.setdefault(pid, name)
            return None
        return hook

    def _register_experts(self, ep, expected):
        """The expert GEMMs of ep as sites (those `modules` selects), in tokens.csv's order."""
        if ep.sites:
            return
        for n in ep.gemms:
            site = self._add_site(n, expected) if self._wanted(n) else None
            ep.sites.append(site)
            if site is not None:
                self._expert_names.append(n)

    def _check_uncaptured(self):
        """One warning line for each parameter of >= 3 dimensions that got a gradient while
        none of its GEMM calls was recorded (first seen at a step or at close; never again)."""
        for pid, name in list(self._grad3d.items()):
            ep = self._experts.get(pid)
            if (ep is not None and ep.seen) or name in self.uncaptured:
                continue
            self.uncaptured.append(name)
            sys.stderr.write("fp8lab_capture: warning: parameter %s has 3 or more dimensions and "
                             "got a gradient, but no GEMM of it was recorded (an op the Recorder "
                             "does not wrap: docs/capture.md, Mixture-of-Experts)\n" % name)

    # ---------------------------------------------------------------- experts: the calls
    def _expert_select(self, w, linear):
        """(GEMM name, weight as (out, in), _Experts) when w is expert e's slice W[e] of a 3-D
        parameter: F.linear(x, W[e]) (W stored (E, out, in)) or x @ W[e] (W stored (E, in,
        out), GPT-OSS)."""
        base = w._base
        ep = self._experts.get(id(base)) if base is not None else None
        if ep is None or w.dim() != 2 or self._inner or _in_backward():
            return None
        if tuple(w.shape) != tuple(base.shape[1:]) or w.stride() != base.stride()[1:]:
            return None
        e, r = divmod(w.storage_offset() - base.storage_offset(), base.stride(0))
        if r or not 0 <= e < base.shape[0]:
            return None
        ep.seen = True
        ep.transposed = not linear
        self._register_experts(ep, False)
        site = ep.sites[e]
        if site is None:
            return None
        return site.name, (w if linear else w.t()), ep

    def _expert_3d(self, b):
        """(_Experts, stored transposed) when b, the (E, in, out) operand of a grouped or
        batched GEMM, is a 3-D expert parameter (stored (E, in, out)) or its transpose(-2, -1)
        (stored (E, out, in))."""
        ep = self._experts.get(id(b))
        if ep is not None:
            return ep, True
        base = b._base
        ep = self._experts.get(id(base)) if base is not None else None
        if ep is not None and base.dim() == 3 and b.storage_offset() == base.storage_offset() \
                and tuple(b.shape) == (base.shape[0], base.shape[2], base.shape[1]) \
                and b.stride() == (base.stride(0), base.stride(2), base.stride(1)):
            return ep, False
        return None

    def _grouped_wrapper(self, orig):
        """torch._grouped_mm / F.grouped_mm / transformers::grouped_mm_fallback(x (S, in),
        W (E, in, out), offs): expert e's rows are offs[e-1]:offs[e]."""
        rec = self

        def wrapper(*args, **kwargs):
            if not rec._paused and not rec._inner and len(args) >= 2:
                a, b = args[0], args[1]
                offs = kwargs.get("offs", args[2] if len(args) > 2 else None)
                if isinstance(b, torch.Tensor) and b.dim() == 3 and isinstance(a, torch.Tensor) \
                        and a.dim() == 2 and isinstance(offs, torch.Tensor):
                    hit = rec._expert_3d(b)
                    if hit is not None and not _in_backward():
                        ids = _offs_ids(offs, a.shape[0], b.shape[0])
                        return rec._expert_call(hit[0], hit[1], orig, args, kwargs, 0, a, ids,
                                                False, None)
            return orig(*args, **kwargs)
        return self._named(wrapper, orig)

    def _bmm_wrapper(self, orig):
        """torch.bmm / Tensor.bmm: Llama 4's bmm(x (E, T, in), W (E, in, out)) over all experts
        (rows of tokens not routed to an expert are zeros: not counted), and transformers'
        "batched_mm" bmm(W[ids] (S, out, in), x (S, in, 1)) or bmm(x (S, 1, in), W[ids] (S, in,
        out)) with the routing ids its experts module was called with."""
        rec = self

        def wrapper(*args, **kwargs):
            if not rec._paused and not rec._inner and len(args) >= 2:
                a, b = args[0], args[1]
                if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and \
                        a.dim() == 3 and b.dim() == 3 and not _in_backward():
                    hit = rec._expert_3d(b)
                    if hit is not None and a.shape[0] == b.shape[0]:
                        n, t = a.shape[0], a.shape[1]
                        ids = torch.arange(n, device=a.device).repeat_interleave(t)
                        return rec._expert_call(hit[0], hit[1], orig, args, kwargs, 0,
                                                a.reshape(n * t, a.shape[2]), ids, True,
                                                _autocast_dtype(a))
                    got = rec._batched_site(a, b)
                    if got is not None:
                        ep, tr, xi, ids = got
                        x = args[xi]
                        return rec._expert_call(ep, tr, orig, args, kwargs, xi,
                                                x.reshape(x.shape[0], -1), ids, False,
                                                _autocast_dtype(x))
            return orig(*args, **kwargs)
        return self._named(wrapper, orig)

    def _batched_site(self, a, b):
        """(_Experts, transposed, index of the activation operand, routing ids) for a bmm of
        transformers' batched_mm inside an experts module's forward (self._ctx)."""
        if self._ctx is None:
            return None
        mod, ids = self._ctx
        s = ids.numel()
        if a.shape[0] != s or b.shape[0] != s:
            return None
        for ep in self._experts.values():
            if ep.module is not mod:
                continue
            shape = tuple(ep.param.shape[1:])
            n = ep.param.shape[0]
            rows = ids.reshape(-1).to(torch.int64)
            rows = torch.where((rows >= 0) & (rows < n), rows, torch.full_like(rows, n))
            if tuple(a.shape[1:]) == shape and b.shape[2] == 1 and a.shape[2] == b.shape[1]:
                return ep, False, 1, rows
            if tuple(b.shape[1:]) == shape and a.shape[1] == 1 and a.shape[2] == b.shape[1]:
                return ep, True, 0, rows
        return None

    def _ctx_hooks(self, mod):
        """An experts module's routing indices (its second positional argument, an integer
        tensor: Hugging Face's top_k_index) held while its forward runs (batched_mm)."""
        rec = self

        def pre(m, args):
            ids = args[1] if len(args) > 1 else None
            rec._ctx = (m, ids) if isinstance(ids, torch.Tensor) and \
                not ids.is_floating_point() else None
            return None

        def post(m, args, out):
            rec._ctx = None
            return None
        self._handles.append(mod.register_forward_pre_hook(pre))
        self._handles.append(mod.register_forward_hook(post))

    @staticmethod
    def _named(wrapper, orig):
        wrapper.__name__ = getattr(orig, "__name__", "op")
        wrapper.__doc__ = getattr(orig, "__doc__", None)
        wrapper._fp8lab_wraps = orig
        return wrapper

    def _expert_call(self, ep, transposed, orig, args, kwargs, xi, x2d, ids, drop_zero, auto):
        """_expert_rec as _mode() says (a recomputation, in backward, is not recorded)."""
        mode = self._mode()
        if mode == "train":
            return self._expert_rec(ep, transposed, orig, args, kwargs, xi, x2d, ids, drop_zero,
                                    auto)
        if mode is None or mode == "recomp":
            return orig(*args, **kwargs)
        return self._special(mode, self._expert_rec, ep, transposed, orig, args, kwargs, xi, x2d,
                             ids, drop_zero, auto)

    def _expert_rec(self, ep, transposed, orig, args, kwargs, xi, x2d, ids, drop_zero, auto):
        """Runs one grouped or batched GEMM over several experts and records it as each
        expert's own GEMM: x2d's row i belongs to expert ids[i] (E: to none). Per-expert
        amaxes by one scatter over the rows' maxima; tokens per expert by a bincount (no
        synchronisation outside snapshot steps)."""
        n = ep.param.shape[0]
        self._forward_begins()
        ep.seen = True
        ep.transposed = transposed
        self._register_experts(ep, False)
        rowmax = _row_amax(x2d)
        if drop_zero:  # Llama 4: a row of zeros is a token not routed to this expert
            ids = torch.where(rowmax > 0, ids, torch.full_like(ids, n))
        self._expert_weights(ep, auto)
        self._put_vec(ep, ".input", _seg_amax(rowmax, ids, n), self._target(x2d, auto))
        self._add_tokens(ep, torch.bincount(ids, minlength=n + 1)[:n])
        idx = ks = None
        if self._cap:
            idx, ks = {}, {}
            ids_c = ids.cpu()
            for e, site in enumerate(ep.sites):
                rows = (ids_c == e).nonzero().reshape(-1)
                if site is None or rows.numel() == 0:
                    continue
                idx[e] = rows.to(x2d.device)
                ks[e] = k = self._calls.get(site.name, 0)
                self._calls[site.name] = k + 1
                self._snap_put(site.name + ".input", x2d[idx[e]], self._target(x2d, auto))
        args = list(args)
        x = args[xi]
        grad = not self._in_eval and torch.is_grad_enabled()
        if "grad_input" in self.roles and x.requires_grad and grad:
            args[xi] = _Tap.apply(x, self._seg_hook(ep, ".grad_input", ids, idx, ks))
        self._inner += 1
        try:
            out = orig(*args, **kwargs)
        finally:
            self._inner -= 1
        if "output" in self.roles:
            o2 = out.detach().reshape(ids.shape[0], -1)
            self._put_vec(ep, ".output", _seg_amax(_row_amax(o2), ids, n), None)
            for e, rows in (idx or {}).items():
                self._snap_put(ep.sites[e].name + ".output", o2[rows], None)
        if "grad_output" in self.roles and isinstance(out, torch.Tensor) and out.requires_grad \
                and grad:
            out.register_hook(self._seg_hook(ep, ".grad_output", ids, idx, ks))
        return out

    def _seg_hook(self, ep, suffix, ids, idx, ks):
        n = ep.param.shape[0]

        def hook(g):
            if self._paused:
                return None
            self._bwd_seen = True
            g2 = g.detach().reshape(ids.shape[0], -1)
            self._put_vec(ep, suffix, _seg_amax(_row_amax(g2), ids, n), None)
            for e, rows in (idx or {}).items():
                name = ep.sites[e].name + suffix
                if name in self._known:
                    self._gsnap.setdefault(name, {})[ks[e]] = g2[rows].to("cpu", copy=True)
            return None
        return hook

    def _expert_weights(self, ep, auto):
        """Every expert's weight, at the first call of any of them in a micro-batch (TE
        quantizes every expert's weight every step, whether it gets tokens or not)."""
        key = (self._m, id(ep.param))
        if key in self._ew_seen:
            return
        self._ew_seen.add(key)
        w = ep.param.detach()
        tgt = self._target(w, auto)
        self._put_vec(ep, ".weight", _row_amax(w.reshape(w.shape[0], -1)), tgt)
        if self._cap and id(ep.param) not in self._ew_snap:
            self._ew_snap.add(id(ep.param))
            for e, site in enumerate(ep.sites):
                if site is not None:
                    self._snap_put(site.name + ".weight", w[e].t() if ep.transposed else w[e],
                                   tgt)

    def _put_vec(self, ep, suffix, vec, target):
        """Merges a vector of per-expert amaxes into the micro-batch's amaxes."""
        if target is not None:
            vec = vec.to(target).float()
        vals = vec.tolist() if vec.is_cpu else None
        for e, site in enumerate(ep.sites):
            if site is not None:
                self._merge(site.name + suffix, vals[e] if vals is not None else vec[e])

    def _snap_put(self, name, x, target):
        if name in self._known:
            c = x.detach()
            c = c.to(target) if target is not None else c
            self._snap.setdefault(name, []).append(c.to("cpu", copy=True))

    def _add_tokens(self, ep, counts):
        vals = counts.tolist() if counts.is_cpu else None
        for e, site in enumerate(ep.sites):
            if site is not None:
                self._add_token(site.name, vals[e] if vals is not None else counts[e])

    def _add_token(self, name, count):
        if self._recomp:
            return
        self._tok[name] = self._tok.get(name, 0) + count

    def _install(self, model, matmul):
        """Replaces F.linear (and with matmul, the matmul-like functions) by recording
        wrappers; hooks the modules recorded whole. Wrapping just these functions, rather
        than a TorchFunctionMode, keeps the cost off every other op: a mode runs Python for
        each torch call (+40.7% step time on the tiny GPT against +14.4%, measured; docs/design.md)."""
        F = torch.nn.functional
        if self._op_params or self._experts:
            self._orig_linear = F.linear
            self._patched.append((F, "linear", F.linear))
            F.linear = self._linear
            if matmul:
                for owner, attr, xi, wi in _matmul_targets():
                    orig = getattr(owner, attr)
                    self._patched.append((owner, attr, orig))
                    setattr(owner, attr, self._mm_wrapper(orig, xi, wi))
        for path, mod, kind, sites in self._mod_sites:
            self._hook_module(mod, kind, sites)
        if self._experts:
            self._install_experts()

    def _install_experts(self):
        """Fused experts (a 3-D parameter): torch._grouped_mm, F.grouped_mm and transformers'
        grouped_mm_fallback op, torch.bmm and Tensor.bmm wrapped while the Recorder is open (only
        for a model with such parameters: a dense model's ops are left as they are); the
        experts modules' forward hooked for batched_mm's routing."""
        targets = [(torch, "_grouped_mm", self._grouped_wrapper),
                   (torch.nn.functional, "grouped_mm", self._grouped_wrapper),
                   (torch, "bmm", self._bmm_wrapper), (torch.Tensor, "bmm", self._bmm_wrapper)]
        try:
            ns = torch.ops.transformers
            if hasattr(ns, "grouped_mm_fallback"):  # registered when transformers' moe loads
                targets.append((ns, "grouped_mm_fallback", self._grouped_wrapper))
        except (AttributeError, RuntimeError):
            pass
        for owner, attr, make in targets:
            orig = getattr(owner, attr, None)
            if orig is None:
                continue
            self._patched.append((owner, attr, orig))
            setattr(owner, attr, make(orig))
        mods = []
        for ep in self._experts.values():
            if ep.sites and all(ep.module is not m for m in mods):
                mods.append(ep.module)
                self._ctx_hooks(ep.module)

    def _mm_wrapper(self, orig, xi, wi):
        rec = self

        def wrapper(*args, **kwargs):
            if len(args) > wi and not rec._paused:
                got = rec._matmul_site(args[wi])
                if got is not None and isinstance(args[xi], torch.Tensor):
                    return rec._op_call(got[0], orig, args, xi, wi, got[1], kwargs, got[2])
            return orig(*args, **kwargs)
        wrapper.__name__ = getattr(orig, "__name__", "matmul")
        wrapper.__doc__ = getattr(orig, "__doc__", None)
        wrapper._fp8lab_wraps = orig
        return wrapper

    # ---------------------------------------------------------------- per step state
    def _reset_step(self):
        self._amax = {}           # (micro, tensor name) -> float or 0-d device tensor
        self._te_scales = {}      # (micro, tensor name) -> TE's scale (float or 0-d tensor)
        self._snap = {}           # tensor name -> list of CPU tensors in call order
        self._gsnap = {}          # tensor name -> {call index: CPU tensor} (gradients)
        self._weight_seen = set()  # (micro, GEMM) whose weight amax is in
        self._weight_snap = set()
        self._calls = {}          # GEMM name -> calls this step
        self._m = 0               # the current micro-batch
        self._bwd_seen = False    # a backward hook fired in the current micro-batch
        self._micro_end = False   # rec.micro_step() was called
        self._any = False
        self._ew_seen = set()     # (micro, id(3-D parameter)) whose experts' weights are in
        self._ew_snap = set()
        self._tok = {}            # expert GEMM -> tokens routed this step (int or 0-d tensor)
        self._ncalls = 0          # GEMM calls recorded this step (rec.unstepped at close)
        self._pending = {}        # GEMM -> its calls this step whose output got no grad hook

    # the per-step state, swapped as a whole around an evaluation forward recorded apart
    _STATE = ("_amax", "_te_scales", "_snap", "_gsnap", "_weight_seen", "_weight_snap", "_calls",
              "_m", "_bwd_seen", "_micro_end", "_any", "_ew_seen", "_ew_snap", "_tok",
              "_ncalls", "_cap", "_pending")

    def _swap_state(self, new):
        """Puts the per-step state `new` (a dict of _STATE; None: a fresh one, without
        snapshots) in place and returns the one it replaces."""
        old = {k: getattr(self, k) for k in self._STATE}
        if new is None:
            self._reset_step()
            self._cap = False
        else:
            for k, v in new.items():
                setattr(self, k, v)
        return old

    def _fresh_state(self):
        """A fresh per-step state (no snapshots), the current one left in place."""
        return self._swap_state(self._swap_state(None))

    def _mode(self):
        """How the GEMM call now beginning is taken: "train" (recorded into amax.csv), "eval"
        (an evaluation forward recorded apart, eval="apart"), "recomp" (an activation
        recomputation run in backward: not a call of its own) or None (not recorded: paused, or
        an evaluation forward with eval="skip"). An evaluation forward is one run while the
        Recorder's model (the module given to it) is in eval() mode, or under
        torch.inference_mode(); a torch.no_grad() forward in training mode is a training one."""
        if self._paused:
            return None
        if not self._root.training or _inference_mode():
            ev = self.eval_forwards
            return None if ev == "skip" else ("eval" if ev == "apart" else "train")
        if _recomputing():
            return "recomp"
        return "train"

    def _special(self, mode, fn, *args):
        """Runs fn(*args) as a call of `mode` "eval" (in the evaluation state) or "recomp"."""
        if mode == "recomp":
            self._recomp += 1
            try:
                return fn(*args)
            finally:
                self._recomp -= 1
        if self._in_eval:  # nested inside an evaluation call already in the evaluation state
            return fn(*args)
        train = self._swap_state(self._eval_st)
        self._in_eval += 1
        try:
            return fn(*args)
        finally:
            self._in_eval -= 1
            self._eval_st = self._swap_state(train)

    def _match_recompute(self, name, x, auto):
        """The index of the call of GEMM `name` that a recomputation repeats: one of this step's
        calls whose output got no gradient hook (run under no_grad: reentrant checkpointing's
        first forward), taken once. At snapshot steps the one whose recorded input equals x
        (a recomputation with the forward's RNG state repeats it bit for bit), else the first
        left; None when there is none (the forward had its hooks: use_reentrant=False)."""
        pend = self._pending.get(name)
        if not pend:
            return None
        k = pend[0]
        calls = self._snap.get(name + ".input") if self._cap else None
        if calls is not None and len(calls) == self._calls.get(name, 0):
            tgt = self._target(x, auto)
            c = x.detach()
            c = (c.to(tgt) if tgt is not None else c).to("cpu")
            for j in pend:
                if calls[j].shape == c.shape and torch.equal(calls[j], c):
                    k = j
                    break
        pend.remove(k)
        return k

    def _capturing(self):
        return self.every > 0 and self._next % self.every == 0

    def _set_capturing(self):
        self._cap = self._capturing()

    def _forward_begins(self):
        self._ncalls += 1
        if self.micro and ((self.micro == "auto" and self._bwd_seen) or self._micro_end) \
                and self._any:
            self._m += 1
        self._bwd_seen = self._micro_end = False
        self._any = True

    def _target(self, x, auto):
        """The dtype a tensor is recorded in (None: as it is)."""
        if auto is None and self._dtype_is_operand:
            return None
        t = auto if self._dtype_is_operand else _DTYPE_OF[self.dtype]
        return None if t is None or t == x.dtype or not x.is_floating_point() else t

    def _put(self, name, x, call=None, target=None, grad=False, snap=True):
        """Adds x (the tensor of `name` at call `call`) to the micro-batch's amax and, at
        snapshot steps, to the snapshot."""
        if name not in self._known or self._recomp:
            return
        a = _amax_value(x)
        if target is not None:  # the amax of x cast to target: rounding is monotonic
            a = (torch.tensor(a, dtype=torch.float32).to(target).float().item()
                 if isinstance(a, float) else a.to(target).float())
        self._merge(name, a)
        if snap and self._cap:
            c = x.detach()
            c = c.to(target) if target is not None else c
            c = c.to("cpu", copy=True)
            if grad:
                self._gsnap.setdefault(name, {})[call] = c
            else:
                self._snap.setdefault(name, []).append(c)

    def _merge(self, name, a):
        """Merges amax a (float or 0-d tensor) of `name` into the micro-batch's amax."""
        if name not in self._known:
            return
        key = (self._m, name)
        prev = self._amax.get(key)
        if prev is not None:
            if isinstance(a, float) and isinstance(prev, float):
                a = max(prev, a)
            else:
                dev = (a if isinstance(a, torch.Tensor) else prev).device
                a = torch.maximum(torch.as_tensor(prev, dtype=torch.float32, device=dev),
                                  torch.as_tensor(a, dtype=torch.float32, device=dev))
        self._amax[key] = a

    def _te(self, name, value):
        if value is not None and name in self._known and not self._recomp:
            self._te_scales.setdefault((self._m, name), value)

    def _fwd(self, site, x, w, out, auto, w_oriented=None):
        """A forward call of a GEMM: its input x, weight w, output out. Returns the call index
        (in a recomputation: that of the call it repeats, None when none; nothing recorded)."""
        if self._recomp:
            return self._match_recompute(site.name, x, auto)
        self._forward_begins()
        if not self._in_eval:
            site.ran = True
        k = self._calls.get(site.name, 0)
        self._calls[site.name] = k + 1
        n = site.name
        if x is not None:
            self._put(n + ".input", x, k, self._target(x, auto))
        if w is not None:
            self._put_weight(site, w, auto, w_oriented)
        if out is not None:
            self._put(n + ".output", out, k, self._target(out, None))
        return k

    def _put_weight(self, site, w, auto, w_oriented=None):
        """A GEMM's weight, at its first call of each micro-batch (snapshot: once a step)."""
        n = site.name
        if w is None or (self._m, n) in self._weight_seen:
            return
        self._weight_seen.add((self._m, n))
        first = n not in self._weight_snap
        self._weight_snap.add(n)
        wt = w_oriented if w_oriented is not None else w
        self._put(n + ".weight", wt, 0, self._target(w, auto), snap=first)

    def _grad_hook(self, name, k, te_fn=None):
        def hook(g):
            if self._paused:
                return None
            self._bwd_seen = True
            self._put(name, g, k, self._target(g, None), grad=True)
            if te_fn is not None:
                self._te(name, te_fn())
            return None
        return hook

    # ---------------------------------------------------------------- F.linear and matmul
    def _linear(self, input, weight, bias=None):
        g = self._op_params.get(id(weight))
        if g is None or self._paused or not isinstance(input, torch.Tensor):
            if g is None and self._experts and not self._paused and \
                    isinstance(input, torch.Tensor) and isinstance(weight, torch.Tensor):
                hit = self._expert_select(weight, True)  # eager experts: F.linear(x, W[e])
                if hit is not None:
                    return self._op_call(hit[0], None, (input, weight, bias), 0, 1, weight,
                                         ep=hit[2])
            return self._orig_linear(input, weight, bias)
        return self._op_call(g, None, (input, weight, bias), 0, 1, weight)

    def _matmul_site(self, w):
        """(GEMM name, weight as (out, in)) when w is a recorded parameter used as x @ W
        (W stored (in, out), HF's Conv1D) or its transpose (x @ W.t())."""
        g = self._op_params.get(id(w))
        if g is not None:
            return g, w.t(), None
        base = getattr(w, "_base", None)
        if base is None:
            return None
        g = self._op_params.get(id(base))
        if g is not None and w.dim() == 2 and w.shape == base.shape[::-1] and \
                w.stride() == base.stride()[::-1]:
            return g, base, None
        if g is None and self._experts and isinstance(w, torch.Tensor):
            return self._expert_select(w, False)  # GPT-OSS's eager experts: x @ W[e]
        return None

    def _op_call(self, g, func, args, xi, wi, w_oriented, kwargs=None, ep=None):
        """Runs one F.linear (func None) or matmul-like call and records it (ep: the call of
        one expert of fused experts, W[e]: every expert's weight recorded, tokens counted), as
        _mode() says: into the training state, the evaluation state, as a recomputation, or
        not at all."""
        mode = self._mode()
        if mode == "train":
            return self._op_record(g, func, args, xi, wi, w_oriented, kwargs, ep)
        if mode is None:
            return self._orig_linear(*args) if func is None else func(*args, **(kwargs or {}))
        return self._special(mode, self._op_record, g, func, args, xi, wi, w_oriented, kwargs,
                             ep)

    def _op_record(self, g, func, args, xi, wi, w_oriented, kwargs, ep):
        site = self._sites.get(g) or self._add_site(g, False)
        x, w = args[xi], args[wi]
        auto = _autocast_dtype(x)
        args = list(args)
        grad = not self._in_eval and torch.is_grad_enabled()  # evaluation: forward roles only
        if self._recomp:  # a recomputation: only the gradients of the call it repeats
            k = self._match_recompute(g, x, auto)
            if k is not None and "grad_input" in self.roles and x.requires_grad and grad:
                args[xi] = _Tap.apply(x, self._grad_hook(g + ".grad_input", k))
            out = self._orig_linear(*args) if func is None else func(*args, **(kwargs or {}))
        else:
            if "grad_input" in self.roles and x.requires_grad and grad:
                k_next = self._calls.get(g, 0)
                args[xi] = _Tap.apply(x, self._grad_hook(g + ".grad_input", k_next))
            out = self._orig_linear(*args) if func is None else func(*args, **(kwargs or {}))
            k = self._fwd(site, x, w if ep is None else None,
                          out if "output" in self.roles else None, auto,
                          w_oriented if func is not None else None)
            if ep is not None:
                self._expert_weights(ep, auto)
                self._add_token(g, x.numel() // x.shape[-1] if x.dim() and x.shape[-1] else 0)
        if k is None or not isinstance(out, torch.Tensor):
            return out
        if out.requires_grad and grad:
            if "grad_output" in self.roles:
                out.register_hook(self._grad_hook(g + ".grad_output", k))
        elif not self._in_eval and not self._recomp:
            # no gradient will reach this call's output (no_grad: reentrant checkpointing's
            # first forward); a recomputation in backward may repeat it (_match_recompute)
            self._pending.setdefault(g, []).append(k)
        return out

    # ---------------------------------------------------------------- module hooks
    def _hook_module(self, mod, kind, sites):
        rec = self

        def pre(m, args):
            mode = rec._mode()
            if mode == "train":
                return pre_rec(m, args)
            m._fp8lab_call = None
            if mode is None:
                return None
            return rec._special(mode, pre_rec, m, args)

        def post(m, args, out):
            mode = rec._mode()
            if mode == "train":
                return post_rec(m, args, out)
            if mode is None:
                return None
            return rec._special(mode, post_rec, m, args, out)

        def pre_rec(m, args):
            x = _first_tensor(args)
            if x is None:
                return None
            auto = _autocast_dtype(x)
            grad = not rec._in_eval and torch.is_grad_enabled()
            if kind == "te_grouped":
                if rec._recomp:  # a recomputation: not recorded (nor its gradients)
                    return None
                return rec._te_grouped_fwd(m, x, args, sites, auto)
            if kind == "plain" or kind == "te_linear":
                w = _param_2d(m, ("weight", "weight0"))
                s = sites[0]
                k = rec._fwd(s, x, w, None, auto)
                if kind == "te_linear":
                    rec._te(s.name + ".input", _te_scale(m, "scaling_fwd", 0))
                    rec._te(s.name + ".weight", _te_scale(m, "scaling_fwd", 1))
                m._fp8lab_call = k
                if "grad_input" in rec.roles and x.requires_grad and grad and k is not None:
                    x2 = _Tap.apply(x, rec._grad_hook(s.name + ".grad_input", k))
                    return (x2,) + tuple(args[1:])
                return None
            with torch.no_grad():
                ln = _te_norm(m, x)
            if kind == "te_lnlinear":
                s = sites[0]
                m._fp8lab_call = rec._fwd(s, ln, _param_2d(m, ("weight", "weight0")), None,
                                          auto)
                rec._te(s.name + ".input", _te_scale(m, "scaling_fwd", 0))
                rec._te(s.name + ".weight", _te_scale(m, "scaling_fwd", 1))
                return None
            # LayerNormMLP: fc1 = ln @ fc1_weight^T + b1, fc2 input = act(fc1 out)
            s1, s2 = sites
            w1, w2 = m.fc1_weight, m.fc2_weight
            act = _TE_ACT.get(getattr(m, "activation", "gelu"))
            need_z = act is not None and (s2 is not None or "output" in rec.roles or
                                          "grad_output" in rec.roles)
            z = a = None
            if need_z:
                with torch.no_grad():
                    lin = rec._orig_linear or torch.nn.functional.linear
                    z = lin(ln, w1, getattr(m, "fc1_bias", None))
                    a = act(z)
            elif act is None and not getattr(m, "_fp8lab_warned", False):
                m._fp8lab_warned = True
                warnings.warn("fp8lab_capture: LayerNormMLP activation %r unknown: fc2.input "
                              "and fc1.grad_output not recorded" % getattr(m, "activation", None))
            k = None
            if s1 is not None:
                k = rec._fwd(s1, ln, w1, z if "output" in rec.roles else None, auto)
                rec._te(s1.name + ".input", _te_scale(m, "scaling_fwd", 0))
                rec._te(s1.name + ".weight", _te_scale(m, "scaling_fwd", 1))
            if s2 is not None:
                k2 = rec._fwd(s2, a, w2, None, auto)
                k = k2 if k is None else k
                rec._te(s2.name + ".input", _te_scale(m, "scaling_fwd", 3))
                rec._te(s2.name + ".weight", _te_scale(m, "scaling_fwd", 4))
            m._fp8lab_call = k
            if "grad_output" in rec.roles and s1 is not None and z is not None and \
                    k is not None and grad:
                rec._saved[(id(m), k)] = z
            return None

        def post_rec(m, args, out):
            y = _first_tensor(out)
            k = getattr(m, "_fp8lab_call", None)
            if y is None or k is None:
                return None
            if kind == "te_grouped":
                return rec._te_grouped_out(m, y, sites, k)
            last = sites[-1]
            if last is not None and "output" in rec.roles:
                rec._put(last.name + ".output", y, k, rec._target(y, None))
            if y.requires_grad and not rec._in_eval:
                if "grad_output" in rec.roles:
                    y.register_hook(rec._module_grad(m, kind, sites, k))
            elif not rec._in_eval and not rec._recomp:  # no gradient: see _op_record
                for s in sites:
                    if s is not None:
                        rec._pending.setdefault(s.name, []).append(k)
            return None

        self._handles.append(mod.register_forward_pre_hook(pre))
        self._handles.append(mod.register_forward_hook(post))

    def _te_grouped_fwd(self, m, x, args, sites, auto):
        """TE GroupedLinear(inp, m_splits): expert i's input is rows sum(m_splits[:i]) ..
        + m_splits[i] of inp, its weight weight<i> (recorded every step, as TE quantizes it),
        TE's scales from fp8_meta slots 3i (input) and 3i + 1 (weight)."""
        splits = args[1] if len(args) > 1 else None
        if splits is None:
            return None
        splits = [int(v) for v in (splits.tolist() if isinstance(splits, torch.Tensor)
                                   else splits)]
        x2 = x.reshape(-1, x.shape[-1])
        start, ks = 0, {}
        self._forward_begins()
        for i, site in enumerate(sites):
            cnt = splits[i] if i < len(splits) else 0
            if site is not None:
                w = _param_2d(m, ("weight%d" % i,))
                if cnt > 0:
                    ks[i] = self._fwd(site, x2[start:start + cnt], None, None, auto)
                    self._te(site.name + ".input", _te_scale(m, "scaling_fwd", 3 * i))
                self._put_weight(site, w, auto)
                self._te(site.name + ".weight", _te_scale(m, "scaling_fwd", 3 * i + 1))
                self._add_token(site.name, cnt)
            start += cnt
        m._fp8lab_call = (splits, ks)
        return None

    def _te_grouped_out(self, m, y, sites, call):
        splits, ks = call
        y2 = y.reshape(-1, y.shape[-1])
        if "output" in self.roles:
            for i, part in enumerate(y2.split(splits)):
                if i in ks:
                    self._put(sites[i].name + ".output", part, ks[i])
        if "grad_output" not in self.roles or not y.requires_grad or self._in_eval:
            return None

        def hook(g):
            if self._paused:
                return None
            self._bwd_seen = True
            for i, part in enumerate(g.reshape(-1, g.shape[-1]).split(splits)):
                if i in ks:
                    self._put(sites[i].name + ".grad_output", part, ks[i], None, grad=True)
                    self._te(sites[i].name + ".grad_output", _te_scale(m, "scaling_bwd", 2 * i))
            return None
        y.register_hook(hook)
        return None

    def _module_grad(self, m, kind, sites, k):
        bwd = _TE_BWD.get(kind, {})

        def hook(g):
            if self._paused:
                return None
            self._bwd_seen = True
            last = sites[-1]
            if last is not None:  # the module's output gradient: its last GEMM's
                self._put(last.name + ".grad_output", g, k, None, grad=True)
                if kind != "plain":
                    self._te(last.name + ".grad_output",
                             _te_scale(m, "scaling_bwd", bwd["gemm2" if kind == "te_lnmlp"
                                                              else "gemm1"]))
            z = self._saved.pop((id(m), k), None)
            if kind == "te_lnmlp" and sites[0] is not None and z is not None:
                # fc1's output gradient: (g @ fc2_weight) * act'(z), by autograd on act
                act = _TE_ACT[getattr(m, "activation", "gelu")]
                with torch.enable_grad():
                    zz = z.detach().requires_grad_(True)
                    ga = torch.matmul(g.detach().to(m.fc2_weight.dtype), m.fc2_weight.detach())
                    (gz,) = torch.autograd.grad(act(zz), zz, ga.to(zz.dtype))
                self._put(sites[0].name + ".grad_output", gz, k, None, grad=True)
                self._te(sites[0].name + ".grad_output", _te_scale(m, "scaling_bwd", 2))
            return None
        return hook

    @contextlib.contextmanager
    def paused(self):
        """Nothing is recorded inside this block (validation passes, generation)."""
        self._paused += 1
        try:
            yield self
        finally:
            self._paused -= 1

    def micro_step(self):
        """Ends the current micro-batch: the next forward call starts a new one (micro "auto"
        or "manual"). No-op with micro=False."""
        if self.micro:
            self._micro_end = True

    # ---------------------------------------------------------------- steps
    def _fetch(self, d):
        values, by_dev = {}, {}
        for key, a in d.items():
            if isinstance(a, (float, int)):
                values[key] = a
            else:
                by_dev.setdefault(a.device, []).append(key)
        for dev, keys in by_dev.items():
            host = torch.stack([d[k].reshape(()) for k in keys]).cpu().tolist()
            values.update(zip(keys, host))
        return values

    def _snapshot_tensors(self, step):
        tensors = {n: _concat_calls(ts) for n, ts in self._snap.items()}
        for n, calls in self._gsnap.items():
            g = n.rsplit(".", 1)[0]
            want = self._calls.get(g, 0)
            if sorted(calls) != list(range(want)):
                # some calls had no backward (no_grad, recomputation): rows would not pair
                warnings.warn("fp8lab_capture: step %d: %s arrived for %d of the %d calls of %s;"
                              " left out of the snapshot so that its rows stay paired with the "
                              "input's (its amax is recorded)" % (step, n.rsplit(".", 1)[1],
                                                                  len(calls), want, g))
                continue
            tensors[n] = _concat_calls([calls[k] for k in range(want)])
        return tensors, self._subset_rows(tensors, step)

    def _subset_rows(self, tensors, step):
        """Recorder(rows=N): the row roles' tensors cut to N rows in place, the same rows for
        a GEMM's input, output, grad_output and grad_input; the metadata naming each cut
        tensor's whole row count."""
        meta = {}
        if not self.rows:
            return meta
        picks = {}
        for n in sorted(tensors):
            g, role = n.rsplit(".", 1)
            t = tensors[n]
            if role not in _ROW_ROLES or t.dim() < 2:
                continue
            m = t.numel() // t.shape[-1] if t.shape[-1] else 0
            if m <= self.rows:
                continue
            key = (g, m)
            if key not in picks:
                seed = (self.rows_seed * 1000003 + zlib.crc32(g.encode()) * 8191 + step) % (1 << 62)
                gen = torch.Generator().manual_seed(seed)
                picks[key] = torch.sort(torch.randperm(m, generator=gen)[:self.rows]).values
            tensors[n] = t.reshape(m, t.shape[-1])[picks[key]].contiguous()
            meta["fp8lab.rows." + n] = str(m)
        return meta

    def _header(self):
        return "step,tensor,amax%s%s\n" % (",micro" if self.micro else "",
                                            ",te_scale" if self._has_te else "")

    def _rows(self, step, amax, te_scales, last_m):
        """amax.csv's rows of a step: one per micro-batch 0 .. last_m and tensor."""
        values = self._fetch(amax)
        scales = self._fetch(te_scales) if te_scales else {}
        lines = []
        for m in range(last_m + 1):
            for n in self.names:
                line = "%d,%s,%s" % (step, n, _fmt_amax(values.get((m, n), 0.0)))
                if self.micro:
                    line += ",%d" % m
                if self._has_te:
                    s = scales.get((m, n))
                    line += "," + (_fmt_amax(s) if s is not None and s > 0 and
                                   s != float("inf") else "")
                lines.append(line + "\n")
        return "".join(lines)

    def step(self, step):
        """Ends training step `step`: appends its amax rows (one set per micro-batch), writes
        its snapshot when `step` is a multiple of `every` (and was predicted), and starts the
        next step."""
        if self._closed:
            raise RuntimeError("Recorder is closed")
        step = int(step)
        if step < 0 or (self._last is not None and step <= self._last):
            raise ValueError("step %d: steps must be >= 0 and increase (previous %s)" %
                             (step, self._last))
        snap_step = self.every > 0 and step % self.every == 0
        captured = self._capturing()
        if snap_step and not captured:
            warnings.warn("fp8lab_capture: step %d is a snapshot step but step %d was expected; "
                          "its snapshot is skipped (amaxes are recorded)" % (step, self._next))
        self._csv.write(self._rows(step, self._amax, self._te_scales, self._m))
        self._csv.flush()
        ev = self._eval_st
        if ev is not None and ev["_any"]:  # evaluation forwards since the previous step
            if self._eval_csv is None:
                os.makedirs(os.path.dirname(self._eval_partial), exist_ok=True)
                self._eval_csv = open(self._eval_partial, "w")
                self._eval_csv.write(self._header())
            self._eval_csv.write(self._rows(step, ev["_amax"], ev["_te_scales"], ev["_m"]))
            self._eval_csv.flush()
            self.eval_steps += 1
        if ev is not None:
            self._eval_st = self._fresh_state()
        if self._tok_csv is not None:
            tok = self._fetch(self._tok)
            lines = []
            for n in self._expert_names:
                t = int(tok.get(n, 0))
                if t > 0:
                    self._sites[n].ran = True
                lines.append("%d,%s,%d\n" % (step, n, t))
            self._tok_csv.write("".join(lines))
            self._tok_csv.flush()
        self._check_uncaptured()
        if snap_step and captured:
            tensors, rows_meta = self._snapshot_tensors(step)
            write_safetensors(os.path.join(self.path, "step_%d.safetensors" % step), tensors,
                              metadata=dict({"producer": "fp8lab_capture", "step": step},
                                            **{"tied." + k: v for k, v in self.tied.items()},
                                            **rows_meta))
            self.snapshots.append(step)
        self._reset_step()
        self._saved = {}
        self._last = step
        self._next = step + 1
        self._set_capturing()
        self.steps += 1

    # ---------------------------------------------------------------- closing
    def close(self):
        """Removes the hooks, puts F.linear back, warns (one line each on stderr) about GEMMs
        expected to run that never did, and renames amax.csv.partial to amax.csv.
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        for h in self._handles:
            h.remove()
        self._handles = []
        for owner, attr, orig in reversed(self._patched):
            current = getattr(owner, attr)
            if current == self._linear or getattr(current, "_fp8lab_wraps", None) is orig:
                setattr(owner, attr, orig)
            else:
                warnings.warn("fp8lab_capture: %s.%s was replaced by someone else after the "
                              "Recorder; left as it is" % (getattr(owner, "__name__", owner),
                                                            attr))
        self._patched = []
        self._orig_linear = None
        # GEMM calls recorded after the last rec.step (training, and evaluation kept apart):
        # no step wrote them, so they are dropped
        self.unstepped = self._ncalls + (self._eval_st["_ncalls"] if self._eval_st else 0)
        if self.unstepped:
            sys.stderr.write("fp8lab_capture: warning: %d GEMM call%s recorded after the last "
                             "rec.step (%s) %s not in amax.csv: dropped (call rec.step after "
                             "each step's forward and backward)\n"
                             % (self.unstepped, "s" if self.unstepped != 1 else "",
                                "step %d" % self._last if self._last is not None else
                                "none was called", "are" if self.unstepped != 1 else "is"))
        self._ncalls = 0
        self._eval_st = None
        if self._eval_csv is not None:
            self._eval_csv.close()
            self._eval_csv = None
            os.replace(self._eval_partial, os.path.join(os.path.dirname(self._eval_partial),
                                                        "amax.csv"))
        self._amax, self._snap, self._gsnap, self._saved = {}, {}, {}, {}
        self._ctx = None
        if self._tok_csv is not None:
            self._tok_csv.close()
            self._tok_csv = None
            os.replace(self._tok_partial, os.path.join(self.path, "tokens.csv"))
        if self._csv is not None and self.steps:
            self._check_uncaptured()
        if self._csv is not None:
            self.never_ran = sorted(s.name for s in self._sites.values()
                                    if s.expected and not s.ran)
            if self.steps:
                for n in self.never_ran:
                    sys.stderr.write("fp8lab_capture: warning: %s was hooked but never ran in "
                                     "%d steps: its amax.csv rows are all 0\n" % (n, self.steps))
            self._csv.close()
            self._csv = None
            os.replace(self._csv_partial, os.path.join(self.path, "amax.csv"))

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False


def _fmt_amax(v):
    """A float32 value (held in a Python float) as "%.9g", which round-trips float32; inf as
    "inf"; -0 as 0."""
    v = float(v)
    if v != v:  # cannot happen (NaN is masked), but never write NaN: fp8lab rejects it
        v = 0.0
    if v == 0:
        return "0"
    return "%.9g" % v
