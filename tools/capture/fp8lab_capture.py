"""fp8lab_capture: record a PyTorch training run as an fp8lab trace.

A trace (README, "Traces") is a directory of `step_<N>.safetensors` snapshots plus an
`amax.csv` (`step,tensor,amax`) with every step's amaxes; tensors are named
`<module path>.<role>`. This module hooks chosen modules (nn.Linear by default) and writes both:

    import fp8lab_capture
    with fp8lab_capture.Recorder(model, "traces/run1", modules="*.fc1,*.qkv", every=50) as rec:
        for step, batch in enumerate(loader):
            ...forward/backward/optimizer...
            rec.step(step)

Roles, per hooked module (module path = its name in model.named_modules()):
- `input`: the first positional argument of forward (forward pre-hook);
- `weight`: module.weight as the forward used it, read in the forward hook at the module's
  first call of the step (the weight the step's GEMMs saw, before the optimizer updates it);
- `output`: forward's result (forward hook; the first tensor when it returns a tuple);
- `grad_output`: the gradient w.r.t. the output (register_full_backward_hook);
- `grad_input`: the gradient w.r.t. the input (same hook; only when asked for in `roles`).

Amax rules (those of fp8lab): amax = max |x| over the non-NaN elements, inf counts, 0 for an
all-NaN or empty tensor. They are computed on the tensor's device as the hooks fire (one
torch.aminmax pass each) and fetched with one device-to-host transfer per step and device (at
`rec.step`; CPU amaxes are plain floats), so recording every step's amaxes costs one read of
each hooked tensor and no synchronisation inside forward/backward. Measured on the tiny GPT of
experiments/tiny_gpt.py on the CPU: about 5% of the step time (see the top of that file).
- A module that did not run during a step gets amax 0 for all its roles (fp8lab reads 0 as
  "did not run": delayed scaling keeps its state), and its tensors are absent from that step's
  snapshot.
- No backward during a step (eval mode, torch.no_grad(), a forward-only step) gives
  grad_output (and grad_input) amax 0. Forward calls are recorded whatever module.training
  says: run validation outside the Recorder or inside `with rec.paused():`.
- A module called several times in one step (weight sharing, gradient accumulation
  micro-batches, activation recomputation): the amax is the max over the calls, and the
  snapshot holds all calls concatenated along the first dimension, each call's tensor
  reshaped to (-1, last dim) (a single call keeps its shape; if the calls' last dims differ,
  each is flattened to 1-D). So the snapshot's amax equals amax.csv's. The weight is read once
  per step (first call).

Snapshots: at steps that are multiples of `every` (step 0 included), full tensors are copied to
the CPU in the hooks (detached, contiguous; this synchronises, at snapshot steps only) and
written as step_<N>.safetensors: BF16, F16 and F32 as they are, every other dtype converted to
F32. The Recorder decides whether to copy before it knows the step number, so it predicts the
next step as the previous one + 1 (the first as `start_step`, default 0); `rec.step(n)` with
another n still records amaxes, but a snapshot step that was not predicted is skipped with a
warning. Steps must increase.

Files: every file is written to a temporary name and renamed. amax.csv is appended (flushed each
step) as `amax.csv.partial` and renamed to `amax.csv` when the Recorder closes, also when the
`with` block ends by an exception (the rows of completed steps are kept; an unfinished step's
data are dropped). After a crash that skipped the close, rename amax.csv.partial yourself.
safetensors.torch.save_file is used when the `safetensors` package is importable, otherwise a
built-in writer (8-byte little-endian header length, JSON header padded with spaces to 8-byte
alignment, data).

Distributed: when torch.distributed is initialised, each rank writes its own trace in
`<path>/rank_<r>/` (no communication; replay one rank's folder, e.g. `path = traces/run1/rank_0`).

Hooks are removed when the Recorder closes (`with` exit, also on exceptions, or `close()`).
Requires torch >= 1.13; numpy is not needed.
"""
import contextlib
import ctypes
import fnmatch
import json
import os
import struct
import sys
import warnings

import torch

__all__ = ["Recorder", "write_safetensors", "amax_of", "DEFAULT_ROLES", "ALL_ROLES"]

ALL_ROLES = ("input", "weight", "output", "grad_output", "grad_input")
DEFAULT_ROLES = ("input", "weight", "output", "grad_output")

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

    One pass: torch.aminmax (no |x| temporary), amax = max(-min, max). aminmax propagates NaN:
    on the CPU the result is checked (there is no device to wait for) and recomputed with NaN
    replaced by 0 only when it is NaN; on accelerators NaN is always replaced first (one more
    pass), so that nothing waits for the device inside forward/backward."""
    x = x.detach()
    if x.numel() == 0:
        return 0.0 if x.device.type == "cpu" else \
            torch.zeros((), dtype=torch.float32, device=x.device)
    if x.dtype not in _ST_DTYPES:
        x = x.float()  # recorded as F32, like the snapshot (rounding is monotonic)
    inf = float("inf")
    if x.device.type == "cpu":
        mn, mx = _aminmax(x)
        m = max(-float(mn), float(mx))
        if m == m:  # not NaN
            return m + 0.0  # -0 -> +0
        mn, mx = _aminmax(torch.nan_to_num(x, nan=0.0, posinf=inf, neginf=-inf))
        return max(-float(mn), float(mx)) + 0.0
    mn, mx = _aminmax(torch.nan_to_num(x, nan=0.0, posinf=inf, neginf=-inf))
    return torch.maximum(-mn, mx).abs().float()


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
    """One tensor for several calls of a module in a step (see the module docstring)."""
    if len(ts) == 1:
        return ts[0]
    dtype = ts[0].dtype
    if any(t.dtype != dtype for t in ts):
        ts = [t.float() for t in ts]
    if all(t.dim() >= 1 for t in ts) and len({t.shape[-1] for t in ts}) == 1:
        return torch.cat([t.reshape(-1, t.shape[-1]) for t in ts], 0)
    return torch.cat([t.reshape(-1) for t in ts], 0)


class Recorder:
    """Hooks modules of `model` and records an fp8lab trace into `path` (see the module doc).

    model: an nn.Module. path: the trace directory (created; `rank_<r>/` added under
    torch.distributed). modules: fnmatch globs on module names, a comma-separated string or a
    list (default "*": every module of `types`); the root module is named "root".
    every: snapshot steps are the multiples of `every` (None or 0: amax.csv only).
    roles: which of ALL_ROLES to record. types: module classes hooked (default nn.Linear).
    start_step: the first step number expected. overwrite: remove an existing trace's files
    (step_*.safetensors, amax.csv) in the directory instead of refusing."""

    def __init__(self, model, path, modules="*", every=100, roles=DEFAULT_ROLES,
                 types=(torch.nn.Linear,), start_step=0, overwrite=False):
        if isinstance(modules, str):
            modules = [m.strip() for m in modules.split(",") if m.strip()]
        roles = tuple(roles)
        bad = [r for r in roles if r not in ALL_ROLES]
        if bad:
            raise ValueError("unknown role(s) %s (known: %s)" % (bad, ", ".join(ALL_ROLES)))
        self.every = int(every) if every else 0
        self.roles = roles
        rank = None
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            rank = torch.distributed.get_rank()
            path = os.path.join(path, "rank_%d" % rank)
        self.path = path
        self.rank = rank

        self._modules = []  # (name, module)
        for name, mod in model.named_modules():
            if not isinstance(mod, tuple(types)):
                continue
            name = name or "root"
            if any(fnmatch.fnmatchcase(name, g) for g in modules):
                self._modules.append((name, mod))
        if not self._modules:
            raise ValueError("no module of types %s matches %s" %
                             ([t.__name__ for t in types], ",".join(modules)))
        self.names = []  # tensor names in amax.csv order
        for name, mod in self._modules:
            for r in roles:
                if r == "weight" and not isinstance(getattr(mod, "weight", None), torch.Tensor):
                    continue
                self.names.append("%s.%s" % (name, r))
        self._known = set(self.names)

        os.makedirs(path, exist_ok=True)
        ours = [f for f in os.listdir(path) if (f.startswith("step_") and
                f.endswith(".safetensors")) or f in ("amax.csv", "amax.csv.partial")]
        if ours and not overwrite:
            raise FileExistsError("%s already holds a trace (%s, ...); pass overwrite=True" %
                                  (path, sorted(ours)[0]))
        for f in ours:
            os.remove(os.path.join(path, f))
        self._csv_partial = os.path.join(path, "amax.csv.partial")
        self._csv = open(self._csv_partial, "w")
        self._csv.write("step,tensor,amax\n")
        self._csv.flush()

        self._amax = {}   # tensor name -> 0-d float32 tensor (device) for the current step
        self._snap = {}   # tensor name -> list of CPU tensors (snapshot steps only)
        self._weight_seen = set()
        self._next = int(start_step)
        self._last = None
        self._paused = 0
        self._handles = []
        self.snapshots = []  # steps written as snapshots
        self._closed = False
        try:
            for name, mod in self._modules:
                self._hook(name, mod)
        except Exception:
            self.close()
            raise

    # ---------------------------------------------------------------- hooks
    def _capturing(self):
        return self.every > 0 and self._next % self.every == 0

    def _record(self, name, x):
        a = _amax_value(x)
        prev = self._amax.get(name)
        if prev is not None:
            if isinstance(a, float) and isinstance(prev, float):
                a = max(prev, a)
            else:  # on an accelerator (both on one device unless the module moved)
                dev = (a if isinstance(a, torch.Tensor) else prev).device
                a = torch.maximum(torch.as_tensor(prev, dtype=torch.float32, device=dev),
                                  torch.as_tensor(a, dtype=torch.float32, device=dev))
        self._amax[name] = a
        if self._capturing():
            self._snap.setdefault(name, []).append(x.detach().to("cpu", copy=True))

    def _hook(self, name, mod):
        roles = self.roles
        want_in, want_out = "input" in roles, "output" in roles
        want_w = "weight" in roles and ("%s.weight" % name) in self._known
        want_go, want_gi = "grad_output" in roles, "grad_input" in roles

        if want_in:
            def pre(m, args):
                if self._paused:
                    return
                x = _first_tensor(args)
                if x is not None:
                    self._record(name + ".input", x)
            self._handles.append(mod.register_forward_pre_hook(pre))

        if want_out or want_w:
            def fwd(m, args, out):
                if self._paused:
                    return
                if want_w and name not in self._weight_seen:
                    self._weight_seen.add(name)
                    self._record(name + ".weight", m.weight)
                if want_out:
                    y = _first_tensor(out)
                    if y is not None:
                        self._record(name + ".output", y)
            self._handles.append(mod.register_forward_hook(fwd))

        if want_go or want_gi:
            def bwd(m, grad_input, grad_output):
                if self._paused:
                    return
                if want_go:
                    g = _first_tensor(grad_output)
                    if g is not None:
                        self._record(name + ".grad_output", g)
                if want_gi:
                    g = _first_tensor(grad_input)
                    if g is not None:
                        self._record(name + ".grad_input", g)
            self._handles.append(mod.register_full_backward_hook(bwd))

    @contextlib.contextmanager
    def paused(self):
        """Hooks ignore every call inside this block (validation passes, generation)."""
        self._paused += 1
        try:
            yield self
        finally:
            self._paused -= 1

    # ---------------------------------------------------------------- steps
    def step(self, step):
        """Ends training step `step`: appends its amax rows, writes its snapshot when `step` is
        a multiple of `every` (and was predicted), and starts the next step."""
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

        # CPU amaxes are Python floats already; the others: one transfer per device (stack
        # the step's 0-d amaxes there, then .cpu() once)
        values = {}
        by_dev = {}
        for n, a in self._amax.items():
            if isinstance(a, float):
                values[n] = a
            else:
                by_dev.setdefault(a.device, []).append(n)
        for dev, ns in by_dev.items():
            host = torch.stack([self._amax[n] for n in ns]).cpu().tolist()
            values.update(zip(ns, host))
        lines = []
        for n in self.names:
            v = values.get(n, 0.0)
            lines.append("%d,%s,%s\n" % (step, n, _fmt_amax(v)))
        self._csv.write("".join(lines))
        self._csv.flush()

        if snap_step and captured:
            tensors = {n: _concat_calls(ts) for n, ts in self._snap.items()}
            write_safetensors(os.path.join(self.path, "step_%d.safetensors" % step), tensors,
                              metadata={"producer": "fp8lab_capture", "step": step})
            self.snapshots.append(step)

        self._amax = {}
        self._snap = {}
        self._weight_seen = set()
        self._last = step
        self._next = step + 1

    # ---------------------------------------------------------------- closing
    def close(self):
        """Removes the hooks and renames amax.csv.partial to amax.csv. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for h in self._handles:
            h.remove()
        self._handles = []
        self._amax = {}
        self._snap = {}
        if self._csv is not None:
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
