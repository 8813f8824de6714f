"""What the Python tests share (tests/README.md). Dependencies: a test whose Python
dependency is missing prints one "skipped: <reason>" line and exits 77, except under
FP8LAB_REQUIRE_PYDEPS (CI), where it fails (exit 1): no check skips silently in CI. A test that
needs torch may re-run itself under the interpreter that has it: Debian's /usr/bin/python3
(python3-torch), or fp8lab's virtual environment (scripts/venv-torch.sh: torch 2.x,
transformers 5.x, torchao).

The registry: a file's tests are functions of one argument (a temporary folder) marked @test;
run_tests() runs them in order, each in its own folder, prints "ok   name" / "FAIL name" and a
traceback, then "N passed, M failed", and returns the exit status.

    sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
    import pycommon

The check list, for tests written as a sequence of checks that go on after a failure: check()
records and prints a failed check, finish() prints the count and returns the exit status.
run_cli(), csv_rows() and save_npy() are the steps such a test repeats.
"""
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYSTEM_PYTHON = "/usr/bin/python3"


def require(reason):
    """A missing dependency: skipped (exit 77), or a failure under FP8LAB_REQUIRE_PYDEPS."""
    if os.environ.get("FP8LAB_REQUIRE_PYDEPS", "") not in ("", "0"):
        print("FAILED: %s, and FP8LAB_REQUIRE_PYDEPS is set" % reason)
        sys.exit(1)
    print("skipped: " + reason)
    sys.exit(77)


def with_system_python(modules, reason):
    """Re-runs this test under /usr/bin/python3 when the running interpreter lacks `modules`
    (a comma-separated import list) and that one has them; else require(reason)."""
    if (os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON)
            and os.path.exists(SYSTEM_PYTHON)
            and subprocess.run([SYSTEM_PYTHON, "-c", "import " + modules],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0):
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)
    require(reason)


def with_venv(have_deps, reason):
    """Unless have_deps(): re-runs this test once under fp8lab's virtual environment
    (scripts/venv-torch.sh makes it when missing and prints its interpreter); else
    require(reason), with the script's last error line when it failed."""
    if have_deps():
        return
    flag = "FP8LAB_VENV_REEXEC_" + os.path.basename(sys.argv[0]).replace(".", "_")
    if not os.environ.get(flag):
        p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "venv-torch.sh")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        py = p.stdout.strip().splitlines()[-1] if p.returncode == 0 and p.stdout.strip() else ""
        if py and os.path.exists(py):
            os.environ[flag] = "1"
            os.execv(py, [py] + sys.argv)
        reason += "; scripts/venv-torch.sh failed: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    require(reason)


FAILS = []


def check(cond, what):
    """Records a failed check (printed "FAIL: what"); returns cond."""
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)
    return cond


def finish():
    """The exit status of a check-list test: 1 with the count of failed checks, else 0."""
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        return 1
    print("all checks passed")
    return 0


def run_cli(binary, args, cwd):
    """(exit status, stdout + stderr) of `binary args` run in cwd."""
    p = subprocess.run([binary] + list(args), cwd=cwd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def save_npy(d, name, a):
    """a as d/name.npy, little-endian float32 (a trace tensor), d made when missing."""
    os.makedirs(d, exist_ok=True)
    import numpy as np
    np.save(os.path.join(d, name + ".npy"), np.asarray(a, dtype="<f4"))


RESULTS = []


def test(fn):
    """Registers a test (run by run_tests in registration order)."""
    RESULTS.append(fn)
    return fn


def run_tests(prefix):
    """Runs the registered tests, each in a fresh temporary folder named prefix*; returns 0 when
    all passed, else 1."""
    passed = failed = 0
    for fn in RESULTS:
        tmp = tempfile.mkdtemp(prefix=prefix)
        try:
            fn(tmp)
            passed += 1
            print("ok   %s" % fn.__name__)
        except Exception:
            failed += 1
            print("FAIL %s" % fn.__name__)
            traceback.print_exc(file=sys.stdout)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0
