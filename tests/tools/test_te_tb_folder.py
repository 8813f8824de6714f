#!/usr/bin/env python3
"""tools/te_tb_to_amax.py (issue 41): the trace folder is the import's, as for import-te.

  - --force over an `fp8lab import-te` folder (amax.csv, te_overflows.csv, te_log.json):
    afterwards the folder holds exactly the new amax.csv and te_log.json, no te_overflows.csv of
    the old import (item 4: the report compared another run's overflows); te_log.json lists
    ["amax.csv", "te_log.json"] as "written";
  - --force over a capture (`fp8lab synth llm`: snapshots and amax.csv) is exit 2, one line
    naming a file the import did not write, the capture byte for byte as it was; the same for
    an earlier import plus a file of the user's, a symbolic link in it, a rank_<r>/ folder it
    did not list, an older import's te_log.json (no "written") holding rank_<r>/ beyond its
    "files"; an older import's own files alone are replaced;
  - no --force: a non-empty folder is refused, untouched; a target that is a file or a
    symbolic link is refused;
  - a killed import's leftovers beside the target (.<base>.fp8lab-import.<pid> and
    .<base>.fp8lab-old.<pid>, pid gone) are removed; one of a live process is kept; an old
    import left only under .fp8lab-old (a swap killed half-way) is moved back;
  - a failure while writing (ENOSPC, the second file, by patching the tool's writer): exit 1,
    one line, the previous import byte for byte, no temporary folder, nor parent folders made
    for a new target;
  - SIGKILL at 10 seeded moments of a --force conversion: the folder is wholly the old
    import or the new one, and the next conversion leaves nothing beside it;
  - the swap: with os.rename failing, --force still replaces an earlier import (renameat2
    RENAME_EXCHANGE did it); with RENAME_EXCHANGE reported unsupported (EINVAL), the fallback
    (rename aside, rename in, remove) leaves the new import and nothing beside it.
Usage: test_te_tb_folder.py FP8LAB_BIN. Needs the tensorboard package (exit 77 without it
unless FP8LAB_REQUIRE_PYDEPS=1).
"""
import json
import os
import subprocess
import sys

BIN = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tb_events as TB  # noqa: E402
from tb_events import check, tree  # noqa: E402

TB.need_tensorboard()
TAG = "dec.0.fc1_%s_cur_amax"


def make_run(tmp, label, steps=range(0, 4), base=1.0):
    d = os.path.join(tmp, "tb_" + label)
    os.makedirs(d)
    TB.write_events(os.path.join(d, "events.out.tfevents.1.h.1.0"),
                    [TB.event(step=s, scalars=[(TAG % "activation", base + s),
                                               (TAG % "weight", 0.5)]) for s in steps])
    return d


def amax_want(steps=range(0, 4), base=1.0):
    return ("step,tensor,amax\n" + "".join("%d,dec.0.fc1.input,%.9g\n%d,dec.0.fc1.weight,0.5\n"
                                           % (s, base + s, s) for s in steps)).encode()


def leftovers(parent):
    return sorted(n for n in os.listdir(parent) if ".fp8lab-" in n)


def refused(label, rc, se, want, before, folder, parent):
    check(rc == 2 and se.count("\n") == 1 and want in se, "%s: exit %d %r" % (label, rc, se))
    check(tree(folder) == before, "%s: the folder as it was" % label)
    check(leftovers(parent) == [], "%s: nothing beside it: %s" % (label, leftovers(parent)))


def te_logs(tmp):
    """A one-rank TE debug log with cur_amax and overflows%, for fp8lab import-te."""
    sys.path.insert(0, os.path.join(TB.ROOT, "tests", "trace"))
    import test_te_logs as TL
    d = os.path.join(tmp, "telog", "nvdlfw_inspect_statistics_logs")
    os.makedirs(d)
    with open(os.path.join(d, "nvdlfw_inspect_globalrank-0.log"), "w") as f:
        for it in range(0, 6):
            f.write(TL.te_line("dec.0.fc1_activation_cur_amax", it, 3.0 + it))
            f.write(TL.te_line("dec.0.fc1_activation_overflows%", it, 0.5))
    return os.path.dirname(d)


def case_force_over_import_te(tmp):
    tr = os.path.join(tmp, "te_trace")
    p = subprocess.run([BIN, "import-te", te_logs(tmp), tr], capture_output=True, text=True)
    check(p.returncode == 0 and os.path.exists(os.path.join(tr, "te_overflows.csv")),
          "import-te: exit %d %s; holds %s" % (p.returncode, p.stderr.strip(),
                                                sorted(tree(tr)) if os.path.isdir(tr) else None))
    rc, so, se = TB.tool([tr, make_run(tmp, "over_te"), "--force"])
    check(rc == 0, "--force over import-te: exit %d %r" % (rc, se))
    got = tree(tr)
    check(sorted(got) == ["amax.csv", "te_log.json"], "after --force: %s" % sorted(got))
    check(got.get("amax.csv") == amax_want(), "the new amax.csv: %r" % got.get("amax.csv"))
    meta = json.loads(got.get("te_log.json", b"{}"))
    check(meta.get("written") == ["amax.csv", "te_log.json"], "written: %s" % meta.get("written"))
    check(leftovers(tmp) == [], "nothing beside it: %s" % leftovers(tmp))


def case_force_refuses_capture(tmp):
    cap = os.path.join(tmp, "cap")
    p = subprocess.run([BIN, "synth", "llm", cap, "--steps", "20"], capture_output=True, text=True)
    check(p.returncode == 0, "synth: %s" % p.stderr.strip())
    before = tree(cap)
    rc, so, se = TB.tool([cap, make_run(tmp, "over_cap"), "--force"])
    refused("capture", rc, se, "which no import wrote", before, cap, tmp)
    check(cap in se and ".safetensors" in se, "the line names the folder and a snapshot: %r" % se)


def earlier_import(tmp, label):
    tr = os.path.join(tmp, label)
    rc, so, se = TB.tool([tr, make_run(tmp, label + "_first", base=7.0)])
    check(rc == 0, "%s: the first import: %r" % (label, se))
    return tr


def case_force_refuses_foreign_entries(tmp):
    run = make_run(tmp, "foreign_new")
    for label, add, want in [
            ("user_file", lambda tr: open(os.path.join(tr, "notes.txt"), "w").close(),
             "notes.txt"),
            ("symlink", lambda tr: os.symlink("amax.csv", os.path.join(tr, "link.csv")),
             "link.csv"),
            ("rank_dir", lambda tr: os.makedirs(os.path.join(tr, "rank_3")), "rank_3"),
            ("fifo", lambda tr: os.mkfifo(os.path.join(tr, "te_overflows.csv")),
             "te_overflows.csv")]:
        tr = earlier_import(tmp, "foreign_" + label)
        add(tr)
        before = tree(tr) if label != "fifo" else sorted(os.listdir(tr))
        rc, so, se = TB.tool([tr, run, "--force"])
        check(rc == 2 and se.count("\n") == 1 and want in se and "which no import wrote" in se,
              "%s: exit %d %r" % (label, rc, se))
        after = tree(tr) if label != "fifo" else sorted(os.listdir(tr))
        check(after == before, "%s: the folder as it was" % label)
    # an older import (te_log.json without "written"): its own files are replaced, a
    # rank_<r>/ beyond its "files" is not
    for label, extra, ok in [("older_own", None, True), ("older_rank", "rank_2", False)]:
        tr = os.path.join(tmp, label)
        os.makedirs(os.path.join(tr, "rank_0"))
        os.makedirs(os.path.join(tr, "rank_1"))
        for r in (0, 1):
            with open(os.path.join(tr, "rank_%d" % r, "amax.csv"), "w") as f:
                f.write("step,tensor,amax\n0,x.input,1\n")
        with open(os.path.join(tr, "te_overflows.csv"), "w") as f:
            f.write("step,tensor,overflows_pct\n")
        with open(os.path.join(tr, "te_log.json"), "w") as f:
            json.dump({"source": "TransformerEngine debug statistics logs (nvdlfw_inspect, "
                                 "cur_amax)", "files": [{"rank": 0, "file": "a"},
                                                        {"rank": 1, "file": "b"}]}, f)
        if extra:
            os.makedirs(os.path.join(tr, extra))
            with open(os.path.join(tr, extra, "amax.csv"), "w") as f:
                f.write("step,tensor,amax\n")
        before = tree(tr)
        rc, so, se = TB.tool([tr, run, "--force"])
        if ok:
            check(rc == 0 and sorted(tree(tr)) == ["amax.csv", "te_log.json"],
                  "%s: exit %d %r, holds %s" % (label, rc, se, sorted(tree(tr))))
        else:
            refused(label, rc, se, "rank_2", before, tr, tmp)


def case_refusals_without_force(tmp):
    tr = earlier_import(tmp, "noforce")
    before = tree(tr)
    rc, so, se = TB.tool([tr, make_run(tmp, "noforce_new")])
    refused("no --force", rc, se, "not empty", before, tr, tmp)
    f = os.path.join(tmp, "a_file")
    with open(f, "w") as fh:
        fh.write("mine\n")
    rc, so, se = TB.tool([f, make_run(tmp, "onto_file")])
    check(rc == 2 and "not a folder" in se and open(f).read() == "mine\n", "a file: %r" % se)
    os.symlink(tr, os.path.join(tmp, "a_link"))
    rc, so, se = TB.tool([os.path.join(tmp, "a_link"), make_run(tmp, "onto_link"), "--force"])
    check(rc == 2 and "symbolic link" in se and tree(tr) == before, "a link: %r" % se)


def dead_pid():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def case_leftovers(tmp):
    parent = os.path.join(tmp, "lo")
    os.makedirs(parent)
    tr = os.path.join(parent, "trace")
    dead = dead_pid()
    for n in (".trace.fp8lab-import.%d" % dead, ".trace.fp8lab-old.%d" % dead,
              ".trace.fp8lab-import.%d" % os.getpid(), ".other.fp8lab-import.%d" % dead):
        os.makedirs(os.path.join(parent, n, "rank_0"))
    rc, so, se = TB.tool([tr, make_run(tmp, "lo1")])
    # the dead pid's .fp8lab-old folder is moved back (no target), its .fp8lab-import one removed
    check(rc == 2 and "not empty" in se, "an old import moved back, then no --force: %r" % se)
    check(sorted(os.listdir(tr)) == ["rank_0"], "the .fp8lab-old folder moved back: %s"
          % os.listdir(tr))
    check(leftovers(parent) == [".other.fp8lab-import.%d" % dead,
                                ".trace.fp8lab-import.%d" % os.getpid()],
          "a live pid's and another target's kept, the dead one's removed: %s" % leftovers(parent))
    if os.path.isdir(os.path.join(tr, "rank_0")):
        os.rmdir(os.path.join(tr, "rank_0"))
    rc, so, se = TB.tool([tr, make_run(tmp, "lo2")])
    check(rc == 0 and tree(tr).get("amax.csv") == amax_want(), "into the emptied folder: %r" % se)


PATCHED = """
import errno, importlib.util, os, sys
spec = importlib.util.spec_from_file_location("t", %r)
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
%s
sys.exit(t.main(sys.argv[1:]))
"""


def patched(patch, args):
    p = subprocess.run([sys.executable, "-c", PATCHED % (TB.TOOL, patch)] + args,
                       capture_output=True, text=True)
    return p.returncode, p.stderr


FULL_DISK = """
real = t.Folder.write
calls = []
def write(self, rel, text):
    calls.append(rel)
    if len(calls) == 2:
        raise t.os_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), "%s: cannot write" % rel)
    real(self, rel, text)
t.Folder.write = write
"""


def case_failure_leaves_previous(tmp):
    tr = earlier_import(tmp, "fail")
    before = tree(tr)
    rc, se = patched(FULL_DISK, [tr, make_run(tmp, "fail_new"), "--force"])
    check(rc == 1 and se.count("\n") == 1 and "No space left" in se, "ENOSPC: %d %r" % (rc, se))
    check(tree(tr) == before and leftovers(tmp) == [], "ENOSPC: the previous import as it was, "
          "nothing beside it: %s" % leftovers(tmp))
    new = os.path.join(tmp, "new_parent", "deeper", "trace")
    rc, se = patched(FULL_DISK, [new, make_run(tmp, "fail_new2")])
    check(rc == 1 and not os.path.exists(os.path.join(tmp, "new_parent")),
          "ENOSPC into a new folder: exit %d, the parents made for it removed" % rc)


def case_swap(tmp):
    tr = earlier_import(tmp, "swap")
    # os.rename fails: only renameat2's RENAME_EXCHANGE can have moved it in
    no_rename = ("def no(*a):\n    raise OSError(errno.EXDEV, 'rename disabled by the test')\n"
                 "t.os.rename = no\n")
    probe = os.path.join(tmp, "probe_a"), os.path.join(tmp, "probe_b")
    os.makedirs(probe[0])
    os.makedirs(probe[1])
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    supported = libc.renameat2(-100, probe[0].encode(), -100, probe[1].encode(), 2) == 0
    if supported:
        rc, se = patched(no_rename, [tr, make_run(tmp, "swap_new", base=3.0), "--force"])
        check(rc == 0 and tree(tr).get("amax.csv") == amax_want(base=3.0) and
              leftovers(tmp) == [], "RENAME_EXCHANGE: exit %d %r, %s" % (rc, se, leftovers(tmp)))
    else:
        print("note: this file system has no RENAME_EXCHANGE (errno %d): the fallback only"
              % ctypes.get_errno())
    no_exchange = "t.rename_exchange = lambda a, b: errno.EINVAL\n"
    rc, se = patched(no_exchange, [tr, make_run(tmp, "swap_new2", base=5.0), "--force"])
    check(rc == 0 and tree(tr).get("amax.csv") == amax_want(base=5.0) and leftovers(tmp) == [],
          "the fallback: exit %d %r, %s" % (rc, se, leftovers(tmp)))


WRITE_BEFORE_SWAP = """
real = t.rename_exchange
def swap(a, b):
    if not os.path.exists(os.path.join(b, "notes.txt")):
        with open(os.path.join(b, "notes.txt"), "w") as f:  # the user's, after the first check
            f.write("mine\\n")
    return real(a, b)
t.rename_exchange = swap
"""


def case_written_before_swap(tmp):
    """A file of the user's written into the target after the tool checked it, just before
    the swap: the folder swapped out is checked again before its removal, the swap undone,
    exit 2 naming the file; the earlier import and the file kept, nothing beside them. Also the
    fallback (no RENAME_EXCHANGE): the folder moved aside is checked before the new one goes in."""
    for label, patch in (("swap", WRITE_BEFORE_SWAP),
                         ("fallback", WRITE_BEFORE_SWAP.replace(
                             "return real(a, b)", "return errno.EINVAL"))):
        tr = earlier_import(tmp, "wb_" + label)
        before = tree(tr)
        rc, se = patched(patch, [tr, make_run(tmp, "wb_new_" + label, base=7.0), "--force"])
        after = tree(tr)
        kept = {k: v for k, v in after.items() if k != "notes.txt"}
        check(rc == 2 and "notes.txt" in se and "notes.txt" in after and kept == before and
              leftovers(tmp) == [], "%s: a file written before the swap: exit %d %r, left %s"
              % (label, rc, se, leftovers(tmp)))


def case_odd_targets(tmp):
    """A leftover whose pid no process can have (20 digits) is not a leftover of an import:
    kept, no traceback; '//' is refused like '/'."""
    parent = os.path.join(tmp, "odd")
    os.makedirs(os.path.join(parent, ".trace.fp8lab-import.99999999999999999999"))
    rc, so, se = TB.tool([os.path.join(parent, "trace"), make_run(tmp, "odd1")])
    check(rc == 0 and "Traceback" not in se and
          os.path.isdir(os.path.join(parent, ".trace.fp8lab-import.99999999999999999999")),
          "a 20-digit pid: exit %d %r" % (rc, se))
    rc, so, se = TB.tool(["//", make_run(tmp, "odd2")])
    check(rc == 2 and se.count("\n") == 1 and "Traceback" not in se, "'//': exit %d %r" % (rc, se))


def case_killed(tmp):
    """SIGKILL at 10 seeded moments of a --force conversion over an earlier import: the folder
    is always wholly the old import or wholly the new one, and the next conversion removes what
    the killed one left beside it."""
    import random
    import signal
    import time
    rnd = random.Random(41)
    tr = earlier_import(tmp, "killed")
    old = tree(tr)
    steps = range(0, 4000)
    big = make_run(tmp, "killed_new", steps=steps, base=2.0)
    new_amax = amax_want(steps=steps, base=2.0)
    t0 = time.time()
    rc, so, se = TB.tool([os.path.join(tmp, "killed_probe"), big])
    took = time.time() - t0
    check(rc == 0, "the probe conversion: %r" % se)
    outcomes = []
    for k in range(10):
        p = subprocess.Popen([sys.executable, TB.TOOL, tr, big, "--force"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rnd.uniform(0.5, 1.1) * took)  # the reading takes most of it: its end

        p.send_signal(signal.SIGKILL)
        p.wait()
        now = tree(tr)
        whole_new = now.get("amax.csv") == new_amax and sorted(now) == ["amax.csv", "te_log.json"]
        check(now == old or whole_new, "kill %d: neither the old import nor the new: %s"
              % (k, sorted(now)))
        outcomes.append(("new" if whole_new else "old") + ("+left" if leftovers(tmp) else ""))
        if whole_new:  # back to the old one for the next kill
            rc, so, se = TB.tool([tr, make_run(tmp, "killed_back%d" % k, base=7.0), "--force"])
            check(rc == 0 and tree(tr) == old, "kill %d: the old import again: %r" % (k, se))
    rc, so, se = TB.tool([tr, big, "--force"])
    check(rc == 0 and tree(tr).get("amax.csv") == new_amax and leftovers(tmp) == [],
          "after the kills: exit %d %r, beside it %s" % (rc, se, leftovers(tmp)))
    print("killed at 10 moments of %.2f s: %s" % (took, " ".join(outcomes)))


def main():
    TB.run_cases("fp8lab-tb-folder-", [case_force_over_import_te, case_force_refuses_capture,
                                       case_force_refuses_foreign_entries,
                                       case_refusals_without_force, case_leftovers,
                                       case_failure_leaves_previous, case_swap, case_written_before_swap,
                                       case_odd_targets, case_killed],
                 "te tensorboard folder")


if __name__ == "__main__":
    main()
