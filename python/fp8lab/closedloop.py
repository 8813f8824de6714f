"""fp8lab.closedloop: train a PyTorch model with its linear GEMMs fake-quantized by an fp8lab
recipe, as TransformerEngine would run them, using fp8lab's own C library (fp8lab.emu over
libfp8lab_emu.so) for every scale, cast and statistic (issue 44: the closed loop).

    from fp8lab.closedloop import Emulator
    emu = Emulator(model, "experiments/tiny_gpt.ini", "delayed", counts="out/counts.csv")
    with emu:
        for step, batch in enumerate(loader):
            ...forward/backward/optimizer...
            emu.step(step)
        with emu.frozen():
            ...evaluation...

What is intercepted: every call of torch.nn.functional.linear whose weight is a parameter of
the model (nn.Linear, nn.MultiheadAttention's projections), named as fp8lab.capture's Recorder
names it (capture.linear_gemms: `blocks.0.attn.qkv`), so the emulator's tensor names
(`<GEMM>.input`, `.weight`, `.grad_output`) equal the Recorder's. A Recorder entered inside the
Emulator records the high-precision operands that the emulator then casts (entered around it, it
would see the cast operands, new tensors it does not know, and record nothing of those GEMMs).
Not under torch.autocast (refused: the casts take float32 operands).
`modules` (fnmatch globs on GEMM names, a comma-separated string or a list; None: all) selects
the GEMMs; the recipe's sections (their `tensors` globs) decide which of their tensors are cast:
a tensor no section covers stays in high precision. Not intercepted: x @ W matmul forms,
TransformerEngine modules, fused 3-D expert weights, F.linear bound before the Emulator started
(docs/semantics.md, "The closed-loop emulator").

The semantics (docs/semantics.md, "The closed-loop emulator"): y = F.linear(x, W, b) becomes
a custom autograd function. Forward casts x (rows: all leading dimensions flattened; dir 0) and
W (dir 0) and computes y = xhat @ What^T + b; backward casts the gradient g (dir 0) and computes
dgrad = ghat @ What and wgrad = ghat^T @ xhat; for the block kinds (mxfp8, block, rowwise, nvfp4,
mxfp4) the operands whose contraction runs the other way (W in dgrad, g and x in wgrad) are cast
again from the saved high-precision tensors along dir 1, not counted a second time; the bias
gradient is g summed over rows, unquantized (TE's fused bgrad). Formats are the recipe's
(hybrid: E4M3 forward, E5M2 backward). The scales a micro-batch casts with are those after every
earlier micro-batch's update (step 0: 1); emu.micro_step() and emu.step(step) run the update.
Under torch.distributed the pending amaxes are all-reduced (MAX, default group) before each
update. Tensors off the CPU are copied to the CPU for the C call and back; CPU float32 tensors
go to the C library by their data pointers (no copy).
"""
import contextlib
import math
import os
import struct
import sys

import torch

from . import capture as _capture

__all__ = ["Emulator", "ROLES", "COUNTS_COLUMNS"]

ROLES = ("input", "weight", "grad_output")
# kinds whose blocks follow the contraction: cast again along dir 1 where it runs the other way
_DIR_KINDS = ("mxfp8", "block", "rowwise", "nvfp4", "mxfp4")
_STAT_COUNTS = ("n", "nonfinite", "zeros", "overflow", "underflow", "subnormal", "clipped")
COUNTS_COLUMNS = ("step", "micro", "tensor", "kind", "format", "amax", "scale", "overshoot") + \
    _STAT_COUNTS


def _f32(v):
    """v rounded to float32 (as a Python float)."""
    return struct.unpack("<f", struct.pack("<f", float(v)))[0]


def _g(v):
    """A float as counts.csv and amax.csv write it: %.9g, inf as inf."""
    v = float(v)
    if v == 0:
        return "0"
    return "%.9g" % v


def _g_or_empty(v):
    return "" if v is None or v != v else _g(v)


class _Site:
    """One intercepted GEMM: its name and its three tensors' slots."""
    __slots__ = ("name", "slot_in", "slot_w", "slot_g", "dir_in", "dir_w", "dir_g")

    def __init__(self, name):
        self.name = name


def _autocast_query():
    """A function telling whether torch.autocast is on for the CPU or CUDA (torch >= 2.4 takes
    the device type; 1.13 has one function per device)."""
    try:
        torch.is_autocast_enabled("cpu")
        return lambda: torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda")
    except TypeError:
        return lambda: torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()


_autocast_on = _autocast_query()


class _QLinear(torch.autograd.Function):
    """y = F.linear(x, W, b) with x, W and the output gradient cast by the recipe."""

    @staticmethod
    def forward(ctx, x, w, b, emu, site):
        x2 = x.reshape(-1, x.shape[-1]) if x.dim() != 2 else x
        # an activation recomputation (torch.utils.checkpoint) casts again what the forward
        # cast, with the same scale: not counted a second time (the Recorder's rule)
        count = not _capture._recomputing()
        xhat = emu._cast(site.slot_in, x2, 0, count)
        what = emu._cast(site.slot_w, w, 0, count)
        y = emu._orig_linear(xhat, what, b)
        if x.dim() != 2:
            y = y.reshape(x.shape[:-1] + (w.shape[0],))
        # high-precision x and W are kept only where a block kind casts them again along dir 1
        ctx.save_for_backward(x2 if site.dir_in else None, w if site.dir_w else None,
                              xhat, what)
        ctx.emu, ctx.site, ctx.xshape, ctx.has_b = emu, site, x.shape, b is not None
        return y

    @staticmethod
    def backward(ctx, gy):
        x2, w, xhat, what = ctx.saved_tensors
        emu, site = ctx.emu, ctx.site
        g2 = gy.reshape(-1, gy.shape[-1]) if gy.dim() != 2 else gy
        ghat = emu._cast(site.slot_g, g2, 0)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            wd = emu._cast(site.slot_w, w, 1, count=False) if site.dir_w else what
            dx = ghat.mm(wd).reshape(ctx.xshape)
        if ctx.needs_input_grad[1]:
            gw = emu._cast(site.slot_g, g2, 1, count=False) if site.dir_g else ghat
            xw = emu._cast(site.slot_in, x2, 1, count=False) if site.dir_in else xhat
            dw = gw.t().mm(xw)
        if ctx.has_b and ctx.needs_input_grad[2]:
            db = g2.sum(0)  # TE's fused bgrad: from the unquantized gradient
        return dx, dw, db, None, None


class Emulator:
    """Trains `model` with its linear GEMMs cast by recipe `label` of experiment file `ini`
    (module docstring). counts: path of counts.csv to write (None: none); modules: GEMM-name
    globs (None: all)."""

    def __init__(self, model, ini, label, counts=None, modules=None):
        from . import emu as _emu  # the ctypes binding of libfp8lab_emu.so
        self.model = model
        self.ini, self.label = ini, label
        self.counts_path = counts
        self._recipe = _emu.Recipe(ini, label)
        globs = "*" if modules is None else modules
        # (param, name, owner, expected); an nn.Embedding's own weight is a lookup, not a GEMM
        # (a head tied to it is named by the head, which linear_gemms lists first)
        lookups = {_capture._readable(model, path) for path, mod in model.named_modules()
                   if isinstance(mod, torch.nn.Embedding)}
        self._gemms = [e for e in _capture.linear_gemms(model, globs) if e[1] not in lookups]
        # parameters of 3 or more dimensions (fused Mixture-of-Experts weights): their GEMMs
        # (grouped_mm, bmm, W[e]) are not intercepted; __enter__ says so
        self.not_emulated = [pn for pn, p in model.named_parameters() if p.dim() >= 3]
        if not self._gemms:
            raise ValueError("no GEMM of the model matches %s" %
                             (globs if isinstance(globs, str) else ",".join(globs)))
        self._sites = {}          # id(parameter) -> _Site (made at __enter__)
        self.tensors = {}         # tensor name -> slot (None: left in high precision)
        self._slot_name = {}      # slot -> tensor name
        self._slot_kind = {}
        self._slot_fmt = {}
        self._orig_linear = None
        self._entered = False
        self._frozen = 0
        self._acc = []            # (slot, stats) of each counted cast of the micro-batch
        self._micros = []         # the step's finished micro-batches: {slot: aggregate}
        self.record = {}          # (step, micro, tensor) -> (amax, scale): write_te_scale's
        self.uncast = []          # write_te_scale: the Recorder's tensors the emulator never saw
        self._csv = None
        self._csv_partial = None
        self._last = None
        self.steps = 0

    # ---------------------------------------------------------------- slots and interception
    def _make_slots(self):
        """Every tensor the interception can see, created in sorted name order, so that under
        torch.distributed every rank's slots (and pending-amax vector) line up."""
        r = self._recipe
        names = sorted("%s.%s" % (g, role) for _, g, _, _ in self._gemms for role in ROLES)
        for n in names:
            s = r.slot(n)
            self.tensors[n] = s
            if s is not None:
                self._slot_name[s] = n
                self._slot_kind[s] = r.kind(s)
                self._slot_fmt[s] = r.format(s)
        for p, g, _, _ in self._gemms:
            site = _Site(g)
            site.slot_in = self.tensors[g + ".input"]
            site.slot_w = self.tensors[g + ".weight"]
            site.slot_g = self.tensors[g + ".grad_output"]
            site.dir_in = site.slot_in is not None and self._slot_kind[site.slot_in] in _DIR_KINDS
            site.dir_w = site.slot_w is not None and self._slot_kind[site.slot_w] in _DIR_KINDS
            site.dir_g = site.slot_g is not None and self._slot_kind[site.slot_g] in _DIR_KINDS
            self._sites[id(p)] = site

    def _linear(self, input, weight, bias=None):
        site = self._sites.get(id(weight))
        if site is None or not isinstance(input, torch.Tensor):
            return self._orig_linear(input, weight, bias)
        if _autocast_on():
            raise RuntimeError("fp8lab.closedloop: the Emulator does not run under torch.autocast "
                               "(its casts take the float32 operands, and autocast would run the "
                               "GEMM and its gradient in another dtype): train in float32")
        return _QLinear.apply(input, weight, bias, self, site)

    def _cast(self, slot, t, dir, count=True):
        """t (2-D) cast by `slot` along `dir`; the cast's statistics kept for the micro-batch's
        counts when `count` (and not frozen). slot None: t as it is."""
        if slot is None:
            return t
        t = t.detach()
        src = t if t.dtype == torch.float32 else t.float()
        dev = src.device
        if dev.type != "cpu":
            src = src.to("cpu")
        if not src.is_contiguous():
            src = src.contiguous()
        out = torch.empty_like(src)
        rows, cols = src.shape
        st = self._recipe.qdq_ptr(slot, src.data_ptr(), rows, cols, dir, out.data_ptr())
        if count and not self._frozen:
            self._acc.append((slot, st))
        if dev.type != "cpu":
            out = out.to(dev)
        return out if t.dtype == torch.float32 else out.to(t.dtype)

    # ---------------------------------------------------------------- micro-batches and steps
    def _aggregate(self):
        """The micro-batch's casts, per slot: amax max, counts summed, overshoot max, and the
        scale of the cast with the largest amax (delayed: every cast's; current: the scale the
        micro-batch's amax gives, which `fp8lab run` computes from amax.csv)."""
        agg = {}
        for slot, st in self._acc:
            a = agg.get(slot)
            amax = float(st.amax)
            ov = float(st.overshoot)
            cnt = [int(getattr(st, k)) for k in _STAT_COUNTS]
            if a is None:
                agg[slot] = [amax, float(st.scale), ov, cnt]
                continue
            if amax > a[0] or (a[0] != a[0]):
                a[0], a[1] = amax, float(st.scale)
            if ov == ov and (a[2] != a[2] or ov > a[2]):
                a[2] = ov
            a[3] = [u + v for u, v in zip(a[3], cnt)]
        self._acc = []
        return agg

    def _update(self):
        """TE's update at the end of a micro-batch: the pending amaxes reduced (MAX) over the
        default process group under torch.distributed, then every delayed slot's next scale."""
        r = self._recipe
        dist = torch.distributed
        if r.nslots and dist.is_available() and dist.is_initialized():
            p = torch.from_numpy(r.pending().copy())
            if dist.get_backend() == "nccl":
                t = p.cuda()
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                p = t.cpu()
            else:
                dist.all_reduce(p, op=dist.ReduceOp.MAX)
            r.set_pending(p.numpy())
        r.update()

    def micro_step(self):
        """Ends a micro-batch under gradient accumulation (not the step's last: emu.step ends
        that one): TE's update; its counts rows are written at emu.step with their micro index."""
        self._check_open()
        self._micros.append(self._aggregate())
        self._update()

    def step(self, step):
        """Ends training step `step` and its last micro-batch: TE's update, then the step's
        counts rows (one per cast tensor and micro-batch)."""
        self._check_open()
        step = int(step)
        if step < 0 or (self._last is not None and step <= self._last):
            raise ValueError("step %d: steps must be >= 0 and increase (previous %s)" %
                             (step, self._last))
        self._micros.append(self._aggregate())
        self._update()
        lines = []
        for m, agg in enumerate(self._micros):
            for slot in sorted(agg, key=self._slot_name.__getitem__):
                amax, scale, ov, cnt = agg[slot]
                name = self._slot_name[slot]
                self.record[(step, m, name)] = (amax, scale)
                if self._csv is not None:
                    lines.append("%d,%d,%s,%s,%s,%s,%s,%s,%s\n" % (
                        step, m, name, self._slot_kind[slot], self._slot_fmt[slot], _g(amax),
                        _g_or_empty(scale), _g_or_empty(ov), ",".join(map(str, cnt))))
        if self._csv is not None:
            self._csv.write("".join(lines))
            self._csv.flush()
        self._micros = []
        self._last = step
        self.steps += 1

    @contextlib.contextmanager
    def frozen(self):
        """Evaluation: casts with the current scales; no amax is recorded (the pending amaxes
        are put back at the end), no update, no counts."""
        self._check_open()
        saved = self._recipe.pending().copy() if self._recipe.nslots else None
        self._frozen += 1
        try:
            yield self
        finally:
            self._frozen -= 1
            if saved is not None:
                self._recipe.set_pending(saved)

    def scale(self, tensor):
        """The scale the tensor's next cast uses (NaN for block kinds and bf16; None when the
        recipe leaves it in high precision or the emulator does not see it)."""
        s = self.tensors.get(tensor)
        return None if s is None else self._recipe.scale(s)

    # ---------------------------------------------------------------- entering and leaving
    def _check_open(self):
        if not self._entered:
            raise RuntimeError("the Emulator is not entered (use `with emu:`)")

    def __enter__(self):
        if self._entered:
            raise RuntimeError("the Emulator is entered already")
        if not self.tensors:
            self._make_slots()
        if self.counts_path:
            d = os.path.dirname(os.path.abspath(self.counts_path))
            os.makedirs(d, exist_ok=True)
            self._csv_partial = self.counts_path + ".partial"
            self._csv = open(self._csv_partial, "w")
            self._csv.write(",".join(COUNTS_COLUMNS) + "\n")
        if self.not_emulated:
            print("fp8lab.closedloop: warning: %d parameter(s) of 3 or more dimensions (fused "
                  "Mixture-of-Experts weights: %s%s) are not emulated: their GEMMs run in high "
                  "precision (build the experts from nn.Linear to emulate them)"
                  % (len(self.not_emulated), ", ".join(self.not_emulated[:3]),
                     ", ..." if len(self.not_emulated) > 3 else ""), file=sys.stderr)
        F = torch.nn.functional
        self._orig_linear = F.linear
        F.linear = self._linear
        self._entered = True
        return self

    def __exit__(self, exc_type, exc, tb):
        F = torch.nn.functional
        if F.linear == self._linear:
            F.linear = self._orig_linear
        else:
            import warnings
            warnings.warn("fp8lab.closedloop: torch.nn.functional.linear was replaced by someone "
                          "else after the Emulator; left as it is")
        self._entered = False
        if self._csv is not None:
            self._csv.close()
            self._csv = None
            os.replace(self._csv_partial, self.counts_path)
        return False

    # ---------------------------------------------------------------- the trace's te_scale
    def write_te_scale(self, trace_dir):
        """Rewrites trace_dir/amax.csv (a temporary file, then a rename; under torch.distributed
        trace_dir/rank_<r>/amax.csv when that is where the Recorder wrote) with the te_scale
        column holding the scale this run cast each (step, micro, tensor) with. Every row of a
        tensor the emulator casts must have the emulator's amax (0 where it did not run in
        that micro-batch): a mismatch raises ValueError. te_scale is left as it was (empty for
        a new column) where the tensor was not cast or its kind has no per-tensor scale.
        Returns (rows, rows given a te_scale)."""
        path = os.path.join(trace_dir, "amax.csv")
        dist = torch.distributed
        if not os.path.exists(path) and dist.is_available() and dist.is_initialized():
            path = os.path.join(trace_dir, "rank_%d" % dist.get_rank(), "amax.csv")
        with open(path) as f:
            head = f.readline().rstrip("\n").split(",")
            body = [line.rstrip("\n") for line in f if line.strip()]
        if head[:3] != ["step", "tensor", "amax"]:
            raise ValueError("%s: not an amax.csv (header %s)" % (path, ",".join(head)))
        col = {c: i for i, c in enumerate(head)}
        out_head = head if "te_scale" in col else head + ["te_scale"]
        ts = out_head.index("te_scale")
        cast = {n for n, s in self.tensors.items() if s is not None}
        lines, bad, filled, uncast = [",".join(out_head)], [], 0, set()
        for line in body:
            v = line.split(",")
            if len(v) != len(head):
                raise ValueError("%s: row %r has %d fields, expected %d" %
                                 (path, line, len(v), len(head)))
            if len(out_head) > len(v):
                v.append("")
            step, name = int(v[0]), v[1]
            micro = int(v[col["micro"]]) if "micro" in col and v[col["micro"]] else 0
            if name in cast:
                amax, scale = self.record.get((step, micro, name), (0.0, float("nan")))
                got = _f32(float(v[2]))
                if got != _f32(amax) and not (got != got and amax != amax):
                    bad.append("step %d micro %d %s: amax.csv %s, emulator %s" %
                               (step, micro, name, v[2], _g(amax)))
                if scale == scale and scale > 0 and not math.isinf(scale):
                    v[ts] = _g(scale)
                    filled += 1
            elif name not in self.tensors and name.rsplit(".", 1)[-1] in ROLES:
                uncast.add(name)  # a GEMM the interception does not see (fused experts, x @ W)
            lines.append(",".join(v))
        if bad:
            raise ValueError("%s: %d row(s) whose amax is not the emulator's (the Recorder and "
                             "the Emulator saw different tensors or micro-batches): %s" %
                             (path, len(bad), "; ".join(bad[:5])))
        if uncast:
            u = sorted(uncast)
            print("fp8lab.closedloop: warning: %s: %d tensor(s) the Recorder saw were not cast by "
                  "the emulator (%s%s): their rows get no te_scale, and a replay under the recipe "
                  "casts what this run kept in high precision" % (
                      path, len(u), ", ".join(u[:3]), ", ..." if len(u) > 3 else ""),
                  file=sys.stderr)
        self.uncast = sorted(uncast)
        tmp = "%s.tmp.%d" % (path, os.getpid())
        try:
            with open(tmp, "w") as f:
                f.write("\n".join(lines) + "\n")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return len(body), filled


if __name__ == "__main__":  # python -m fp8lab.closedloop: what the module is, and how to use it
    print(__doc__)
