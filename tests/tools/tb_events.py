"""tb_events.py: TensorBoard event files written by hand for the tests of tools/te_tb_to_amax.py
(test_te_tb*.py), independently of the tensorboard package the tool reads them with: TFRecord
framing (length, masked CRC-32C of it, data, masked CRC-32C of it) around Event protocol
buffers encoded field by field (wall_time 1, step 2, file_version 3, summary 5 > value 1 > tag
1, simple_value 2), as torch.utils.tensorboard's add_scalar writes them. Also: the tool's path
(FP8LAB_TE_TB_TOOL overrides it: to run the tests against another copy of the tool), running
it, the tensorboard check (exit 77, or a failure under FP8LAB_REQUIRE_PYDEPS) and the shared
check()/run_cases() of tests/trace/test_te_logs.py.
"""
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = (os.environ.get("FP8LAB_TE_TB_TOOL")
        or os.path.join(ROOT, "python", "fp8lab", "te_tb.py"))


def need_tensorboard():
    try:
        import tensorboard  # noqa: F401  (the tool's reader)
    except ImportError as e:
        if os.environ.get("FP8LAB_REQUIRE_PYDEPS", "") not in ("", "0"):
            print("FAILED: %s, and FP8LAB_REQUIRE_PYDEPS is set (scripts/install-deps.sh "
                  "installs tensorboard)" % e)
            sys.exit(1)
        print("skipped: %s (scripts/install-deps.sh installs tensorboard)" % e)
        sys.exit(77)


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_T = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def varint(n):
    n &= (1 << 64) - 1  # an int64 below 0: its two's complement, ten bytes (protobuf's rule)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, wire, payload):
    return varint(num << 3 | wire) + payload


def ld(num, data):  # a length-delimited field
    return field(num, 2, varint(len(data)) + data)


def event(step=None, version=None, scalars=()):
    e = field(1, 1, struct.pack("<d", 1.7e9))
    if step is not None:
        e += field(2, 0, varint(step))
    if version is not None:
        e += ld(3, version.encode())
    if scalars:
        summ = b"".join(ld(1, ld(1, tag.encode("utf-8", "surrogatepass")) +
                           field(2, 5, struct.pack("<f", v))) for tag, v in scalars)
        e += ld(5, summ)
    return e


def record(data):
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked(n)) + data + struct.pack("<I", masked(data))


def events_bytes(events):
    return record(event(version="brain.Event:2")) + b"".join(record(e) for e in events)


def write_events(path, events):
    with open(path, "wb") as f:
        f.write(events_bytes(events))


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def tool(args, cwd=None):
    p = subprocess.run([sys.executable, TOOL] + args, cwd=cwd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def tree(path):
    """{relative path: bytes} of every file below path, and the folders ('/'-ended: None)."""
    out = {}
    for d, dirs, files in os.walk(path):
        for n in dirs:
            out[os.path.relpath(os.path.join(d, n), path) + "/"] = None
        for n in files:
            with open(os.path.join(d, n), "rb") as f:
                out[os.path.relpath(os.path.join(d, n), path)] = f.read()
    return out


sys.path.insert(0, os.path.join(ROOT, "tests", "trace"))
import test_te_logs as TL  # noqa: E402  (its check() and run_cases(): one list of failures)

check = TL.check
run_cases = TL.run_cases


def load_tool():
    """The tool as a module (its main() run in this interpreter: a case costs milliseconds)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("te_tb_tool", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_main(mod, args):
    """(exit status, stderr) of mod.main(args); an exception is a status of its own, a string
    starting 'raised' (a traceback, on the command line)."""
    import contextlib
    import io
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = mod.main(args)
    except BaseException as e:  # noqa: BLE001  the traceback a test looks for
        rc = "raised %s: %s" % (type(e).__name__, e)
    return rc, err.getvalue()
