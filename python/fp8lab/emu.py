"""fp8lab.emu: fp8lab's recipe arithmetic in-process, for a closed-loop emulated training run.

A ctypes binding of libfp8lab_emu.so (src/emu/emu.h): one recipe label of an experiment or
advice file, a slot per tensor, the cast (quantize then dequantize) with fp8lab's statistics,
and TransformerEngine's delayed-scaling update order. The library is the code `fp8lab run`
replays with, so the scales and casts are fp8lab's (docs/semantics.md, "The closed-loop
emulator's library").

    from fp8lab.emu import Recipe
    with Recipe("advice.ini", "mixed") as r:
        s = r.slot("blocks.0.attn.qkv.input")      # None: not covered, stays high precision
        xhat, st = r.qdq(s, x)                      # x: float32 [rows, cols] (1-D: one row)
        ...                                         # every cast of the micro-batch
        r.update()                                  # TE's update: delayed scales move here

The library is looked for, in order: $FP8LAB_EMU_LIB; inside the installed package (a wheel:
fp8lab/lib/fp8lab/libfp8lab_emu.so, beside the program fp8lab/bin/fp8lab); the checkout's build,
$FP8LAB_BUILD/src/emu/ or <checkout>/build/src/emu/. numpy is needed for qdq and pending, not for
qdq_ptr.
"""
import ctypes
import os
import threading

__all__ = ["Recipe", "Stats", "library_path", "ABI"]

ABI = 1  # src/emu/emu.h's FP8EMU_ABI: the signatures and fp8emu_stats below
LIBNAME = "libfp8lab_emu.so"
_ERRLEN = 1024


class _CStats(ctypes.Structure):
    _fields_ = [("amax", ctypes.c_double), ("scale", ctypes.c_double),
                ("overshoot", ctypes.c_double),
                ("n", ctypes.c_int64), ("nonfinite", ctypes.c_int64), ("zeros", ctypes.c_int64),
                ("overflow", ctypes.c_int64), ("underflow", ctypes.c_int64),
                ("subnormal", ctypes.c_int64), ("clipped", ctypes.c_int64),
                ("sum_sq_err", ctypes.c_double), ("sum_sq", ctypes.c_double),
                ("sum_sq_hat", ctypes.c_double)]


_STAT_NAMES = tuple(name for name, _ in _CStats._fields_)


class Stats(tuple):
    """The statistics of one cast (fp8emu_stats; steps.csv's meaning, RECIPES.md): amax, scale
    (NaN for the block kinds and bf16), overshoot, n, nonfinite, zeros, overflow, underflow,
    subnormal, clipped, sum_sq_err, sum_sq, sum_sq_hat; as attributes, or a tuple in that
    order."""
    __slots__ = ()
    _fields = _STAT_NAMES

    def __new__(cls, values):
        return tuple.__new__(cls, values)

    def __getattr__(self, name):
        try:
            return self[_STAT_NAMES.index(name)]
        except ValueError:
            raise AttributeError(name) from None

    def _asdict(self):
        return dict(zip(_STAT_NAMES, self))

    def __repr__(self):
        return "Stats(%s)" % ", ".join("%s=%r" % kv for kv in zip(_STAT_NAMES, self))


def _candidates():
    env = os.environ.get("FP8LAB_EMU_LIB")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    # the installed package (every folder of it: an editable install keeps the Python files in
    # the checkout and what CMake installed in site-packages/fp8lab/), as fp8lab.executable()
    try:
        from . import __path__ as pkg_path
    except ImportError:
        pkg_path = [here]
    for d in list(pkg_path):
        d = os.path.abspath(d)
        out += [os.path.join(d, "lib", "fp8lab", LIBNAME), os.path.join(d, "bin", LIBNAME),
                os.path.join(d, LIBNAME)]
    build = os.environ.get("FP8LAB_BUILD")
    if build:
        out.append(os.path.join(build, "src", "emu", LIBNAME))
    root = os.path.dirname(os.path.dirname(here))  # the checkout: python/fp8lab/..
    out.append(os.path.join(root, "build", "src", "emu", LIBNAME))
    return out, False


def library_path():
    """The path of the libfp8lab_emu.so this module loads (FileNotFoundError when none)."""
    paths, from_env = _candidates()
    for p in paths:
        if os.path.isfile(p):
            return p
    if from_env:
        raise FileNotFoundError("fp8lab.emu: FP8LAB_EMU_LIB=%s: no such file" % paths[0])
    raise FileNotFoundError("fp8lab.emu: no %s in %s (build it: `cmake --build build --target "
                            "fp8lab_emu`, or set FP8LAB_EMU_LIB)" % (LIBNAME, ", ".join(paths)))


_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    lib = ctypes.CDLL(path)
    c = ctypes
    P, I, I64, S, CP = c.c_void_p, c.c_int, c.c_int64, c.c_size_t, c.c_char_p
    sigs = {
        "fp8emu_abi": (I, []),
        "fp8emu_open": (P, [CP, CP, c.c_char_p, S]),
        "fp8emu_close": (None, [P]),
        "fp8emu_slot": (I, [P, CP, c.c_char_p, S]),
        "fp8emu_nslots": (I, [P]),
        "fp8emu_slot_name": (CP, [P, I]),
        "fp8emu_slot_kind": (CP, [P, I]),
        "fp8emu_slot_format": (CP, [P, I]),
        "fp8emu_slot_settings": (CP, [P, I]),
        "fp8emu_qdq": (I, [P, I, P, I64, I64, I, P, c.POINTER(_CStats), c.c_char_p, S]),
        "fp8emu_scale": (c.c_double, [P, I]),
        "fp8emu_pending": (I, [P, P, I]),
        "fp8emu_set_pending": (I, [P, P, I]),
        "fp8emu_update": (I, [P, c.c_char_p, S]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    abi = lib.fp8emu_abi()
    if abi != ABI:
        raise RuntimeError("fp8lab.emu: %s has ABI %d, this module speaks %d (rebuild the "
                           "library, or use the fp8lab package it came with)" % (path, abi, ABI))
    _lib = lib
    return lib


def _text(b):
    return b.decode("utf-8", "replace") if b is not None else None


class Recipe:
    """One recipe label of an experiment file (fp8emu_open): ValueError with the library's
    "file:line: message" when the file is bad, has no section of that label, or sweeps a key
    of it."""

    def __init__(self, ini_path, label):
        self._lib = _load()
        self._err = ctypes.create_string_buffer(_ERRLEN)
        self._st = _CStats()
        self._stp = ctypes.pointer(self._st)
        self._lock = threading.Lock()
        h = self._lib.fp8emu_open(os.fsencode(ini_path), label.encode(), self._err, _ERRLEN)
        if not h:
            raise ValueError(_text(self._err.value))
        self._h = h
        self.ini_path, self.label = ini_path, label

    # ------------------------------------------------------------------ slots
    def _handle(self):
        if not self._h:
            raise ValueError("fp8lab.emu: the Recipe is closed")
        return self._h

    def slot(self, name):
        """The slot of tensor `name` (`<GEMM>.<role>`), created on first use; None when no
        section of the label covers it (the tensor stays in high precision). ValueError for a
        name the recipe cannot take (hybrid without a role)."""
        s = self._lib.fp8emu_slot(self._handle(), name.encode(), self._err, _ERRLEN)
        if s == -1:
            return None
        if s < 0:
            raise ValueError(_text(self._err.value))
        return s

    @property
    def nslots(self):
        return self._lib.fp8emu_nslots(self._handle())

    def _slot_text(self, f, slot):
        v = f(self._handle(), slot)
        if v is None:
            raise IndexError("fp8lab.emu: slot %r is not one of the %d slots" % (slot, self.nslots))
        return _text(v)

    def name(self, slot):
        return self._slot_text(self._lib.fp8emu_slot_name, slot)

    def kind(self, slot):
        """delayed, current, mxfp8, block, rowwise, bf16, nvfp4 or mxfp4."""
        return self._slot_text(self._lib.fp8emu_slot_kind, slot)

    def format(self, slot):
        """The element format: e4m3, e5m2 (e2m1 for the FP4 kinds)."""
        return self._slot_text(self._lib.fp8emu_slot_format, slot)

    def settings(self, slot):
        """The configuration's keys, one "key = value" line each."""
        return self._slot_text(self._lib.fp8emu_slot_settings, slot)

    def scale(self, slot):
        """The scale the slot's next cast uses (delayed: the state's; current: the last
        cast's); NaN for the block kinds and bf16."""
        return self._lib.fp8emu_scale(self._handle(), slot)

    # ------------------------------------------------------------------ casts
    def qdq_ptr(self, slot, xptr, rows, cols, dir=0, outptr=None):
        """The cast of `rows x cols` float32 values (row-major) at address xptr into outptr
        (default: in place), e.g. a contiguous CPU float32 torch tensor's data_ptr(). Returns
        the Stats; ValueError with the library's message on a bad call."""
        if outptr is None:
            outptr = xptr
        # one call at a time: ctypes releases the GIL, and autograd may run backward nodes on
        # one thread per device; the shared stats/err buffers, the slot's pending amax and the
        # library's scratch buffer are then read and written by one call only
        with self._lock:
            rc = self._lib.fp8emu_qdq(self._handle(), slot, xptr, rows, cols, dir, outptr,
                                      self._stp, self._err, _ERRLEN)
            if rc:
                raise ValueError(_text(self._err.value))
            st = self._st
            return Stats((st.amax, st.scale, st.overshoot, st.n, st.nonfinite, st.zeros,
                          st.overflow, st.underflow, st.subnormal, st.clipped, st.sum_sq_err,
                          st.sum_sq, st.sum_sq_hat))

    def qdq(self, slot, x, dir=0, out=None):
        """Casts x (numpy, float32 [rows, cols]; converted to a C-contiguous float32 array if
        it is not one; a 1-D array is one row) as the slot's recipe does: (xhat, Stats). xhat
        is a new array, or `out` (a C-contiguous float32 array of x's size; it may be x).
        dir: the block kinds' direction (0: blocks along each row, 1: along each column).
        Every cast adds to the slot's pending amax (the max since the last update)."""
        import numpy as np
        a = np.ascontiguousarray(x, dtype=np.float32)
        if a.ndim == 1:
            rows, cols = 1, a.shape[0]
        elif a.ndim == 2:
            rows, cols = a.shape
        else:
            raise ValueError("fp8lab.emu: qdq takes a 1-D or 2-D array, not %d-D "
                             "(view it as [rows, last dimension])" % a.ndim)
        if out is None:
            out = np.empty_like(a)
        elif (not isinstance(out, np.ndarray) or out.dtype != np.float32
              or not out.flags.c_contiguous or not out.flags.writeable or out.size != a.size):
            raise ValueError("fp8lab.emu: out must be a writeable C-contiguous float32 array of "
                             "%d elements" % a.size)
        # (out = x: the library casts in place, through its scratch buffer)
        return out, self.qdq_ptr(slot, a.ctypes.data, rows, cols, dir, out.ctypes.data)

    # ------------------------------------------------------------------ amaxes and the update
    def pending(self):
        """The pending amaxes of every slot (float32 [nslots]), to reduce across ranks."""
        import numpy as np
        n = self.nslots
        a = np.zeros(n, dtype=np.float32)
        if self._lib.fp8emu_pending(self._handle(), a.ctypes.data, n):
            raise ValueError("fp8lab.emu: pending failed")
        return a

    def set_pending(self, amax):
        """Writes the pending amaxes of slots 0 .. len(amax)-1 back (after a reduction);
        ValueError for more values than slots, or a negative or NaN one."""
        import numpy as np
        a = np.ascontiguousarray(amax, dtype=np.float32).ravel()
        if self._lib.fp8emu_set_pending(self._handle(), a.ctypes.data, a.size):
            raise ValueError("fp8lab.emu: set_pending: %d values for %d slots, each >= 0 and not "
                             "NaN" % (a.size, self.nslots))

    def update(self):
        """The end of a micro-batch (TE's amax and scale update): every delayed slot rolls its
        pending amax into its history and takes its next scale; pending amaxes are reset."""
        if self._lib.fp8emu_update(self._handle(), self._err, _ERRLEN):
            raise MemoryError(_text(self._err.value))

    # ------------------------------------------------------------------ lifetime
    def close(self):
        if getattr(self, "_h", None):
            self._lib.fp8emu_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return "Recipe(%r, %r)%s" % (self.ini_path, self.label, "" if self._h else " (closed)")
