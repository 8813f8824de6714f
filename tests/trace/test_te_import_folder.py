#!/usr/bin/env python3
"""`fp8lab import-te`'s trace folder (issue 41, cases 1 and 7): what --force may replace, and
that no failure or kill leaves a partial folder or loses the previous import.

The rules (docs/capture.md, "What --force may replace"): a folder is an earlier import's when
its te_log.json (source: TransformerEngine's statistics logs) lists every entry in it
("written"; for an import older than that list: amax.csv, te_overflows.csv, te_log.json and
rank_<r>/amax.csv for r < len(files)); --force replaces only such a folder, as a whole, and
refuses anything else with exit 2 and one line naming the folder and one foreign entry. The
import is written into <parent>/.<base>.fp8lab-import.<pid> and moved in at the end (rename,
or RENAME_EXCHANGE with the earlier import, which is then removed).

  1. refusals, every file byte-identical afterwards (sha256 of each, the entries' kinds): a
     synth capture; a 4-rank capture (rank_<r>/amax.csv, no te_log.json) under a 2-rank log; an
     import with a notes.txt, a rank_0/notes.txt, a symbolic link, a FIFO, a snapshot beside
     it; an older import with a rank beyond its files; a te_log.json that is not an import's;
     a target that is a file or a symbolic link (to an import's folder: refused, both kept);
  2. replacements: a 3-rank import whose rank_1/ the user removed, then a 1-rank import
     --force: exactly amax.csv and te_log.json; an import over an earlier one equals a fresh
     import into an empty folder byte for byte, its te_log.json "written" as written; an older
     import (te_log.json without "written") accepted; the target given as cap/, ./cap, ".",
     and relative to another working folder; an empty folder's permissions kept;
  3. leftovers of killed imports beside the target (.<base>.fp8lab-import.<pid>,
     .<base>.fp8lab-old.<pid>, pid gone) are removed by the next import, a live pid's kept; an
     -old folder with no target (a kill inside the fallback swap) is moved back;
  4. case 7: writes made to fail with RLIMIT_FSIZE (SIGXFSZ ignored: write() returns EFBIG)
     in rank_0/amax.csv, in a later rank's, in te_log.json: exit 1, the target as it was (absent;
     or under --force the earlier import byte-identical), no temporary folder left;
  5. the kill test: an earlier import, then 10 kills (SIGKILL) of a --force import at seeded
     moments (random.Random(41): 4 while the logs are read, 4 while the new folder is written,
     2 near the end): the target is byte-identical to the earlier import or to a reference
     import of the new logs, the only leftover a .<base>.fp8lab-*.<killed pid> folder, which the
     next import removes; then kills inside the commit through an LD_PRELOAD shim (after the
     swap, and in the fallback without RENAME_EXCHANGE after each of its two renames).

Usage: test_te_import_folder.py FP8LAB_BIN. Standard library only (a C compiler for the shim
of part 5's commit kills, skipped without one).
"""
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_te_logs as tl  # noqa: E402  (reads sys.argv[1] as the binary too)

BIN = os.path.abspath(sys.argv[1])
FAILS = []
LEFTOVER = re.compile(r"^\.(.+)\.fp8lab-(import|old)\.(\d+)$")


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)
    return cond


def run(args, cwd=None, preexec=None):
    p = subprocess.run([BIN] + args, cwd=cwd, capture_output=True, text=True,
                       preexec_fn=preexec)
    return p.returncode, p.stdout, p.stderr


def tree(folder):
    """Every entry below folder: relative path -> sha256 of a file's bytes, or its kind
    ('dir', 'link -> target', 'fifo'): what 'byte-identical' compares."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for n in dirs + files:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, folder)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "link -> " + os.readlink(p)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = "dir"
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    out[rel] = hashlib.sha256(f.read()).hexdigest()
            else:
                out[rel] = "special %o" % stat.S_IFMT(st.st_mode)
    return out


def diff(a, b):
    return ["%s: %s" % (k, "missing" if k not in b else "extra" if k not in a else "differs")
            for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def leftovers(parent):
    return sorted(n for n in os.listdir(parent) if LEFTOVER.match(n))


def write_logs(root, iters_per_rank, layers=("a.fc1", "a.fc2", "b.proj")):
    """TE logs (cur_amax of activation, weight, gradient) in root/nvdlfw_inspect_statistics_logs/,
    rank r logged at iterations iters_per_rank[r]."""
    d = os.path.join(root, "nvdlfw_inspect_statistics_logs")
    os.makedirs(d)
    rng = random.Random(len(iters_per_rank))
    for r, iters in enumerate(iters_per_rank):
        with open(os.path.join(d, "nvdlfw_inspect_globalrank-%d.log" % r), "w") as f:
            for it in iters:
                for L in layers:
                    for t in ("activation", "weight", "gradient"):
                        f.write(tl.te_line("%s_%s_cur_amax" % (L, t), it, rng.uniform(0.5, 30)))
    return root


def summary(n0, text):
    """A case's closing line: what it showed, or that it failed (FAIL lines above say how)."""
    print(("" if len(FAILS) == n0 else "FAILED (%d): " % (len(FAILS) - n0)) + text)


def one_line_naming(se, *names):
    return se.count("\n") == 1 and all(n in se for n in names)


def import_ok(logs, target, *extra, cwd=None):
    rc, so, se = run(["import-te", logs, target] + list(extra), cwd=cwd)
    check(rc == 0, "import-te %s %s %s: exit %d: %s" % (logs, target, " ".join(extra), rc, se.strip()))
    return rc == 0


# ------------------------------------------------------------------ 1. refusals


def refused(tmp, logs, target, label, *names, cwd=None, force=True):
    """import-te LOGS target [--force] is exit 2, one line naming names, every entry of
    target's parent folder (the target, anything beside it) unchanged."""
    parent = os.path.dirname(os.path.abspath(os.path.join(cwd or tmp, target)))
    before = tree(parent)
    rc, so, se = run(["import-te", logs, target] + (["--force"] if force else []), cwd=cwd)
    ok = check(rc == 2 and one_line_naming(se, *names),
               "%s: exit %d, want 2 and one line naming %s: %r" % (label, rc, names, se))
    problems = diff(before, tree(parent))
    ok &= check(not problems, "%s: changed: %s" % (label, problems[:5]))
    return ok, se.strip()


def case_refusals(tmp):
    n0 = len(FAILS)
    logs1 = write_logs(os.path.join(tmp, "logs1"), [range(0, 10)])
    logs2 = write_logs(os.path.join(tmp, "logs2"), [range(0, 10), range(0, 10)])
    said = []
    # the case 1: a capture of fp8lab synth (snapshots and amax.csv)
    rc, so, se = run(["synth", "llm", os.path.join(tmp, "cap"), "--steps", "3"])
    check(rc == 0, "synth: %d %s" % (rc, se))
    ok, se = refused(tmp, logs2, os.path.join(tmp, "cap"), "synth capture", "cap",
                     "step_0.safetensors", "import-te did not write")
    said.append(se)
    refused(tmp, logs2, os.path.join(tmp, "cap"), "synth capture, no --force", "not empty",
            force=False)
    # a 4-rank capture: rank_<r>/amax.csv (a capture's, no te_log.json) and a 2-rank log
    cap4 = os.path.join(tmp, "cap4")
    for r in range(4):
        os.makedirs(os.path.join(cap4, "rank_%d" % r))
        with open(os.path.join(cap4, "rank_%d" % r, "amax.csv"), "w") as f:
            f.write("step,tensor,amax\n0,a.fc1.input,%d.5\n" % (r + 1))
    ok, se = refused(tmp, logs2, cap4, "4-rank capture", "cap4", "rank_0/amax.csv",
                     "no te_log.json")
    said.append(se)
    # an import with something of the user's in it
    for label, add, name in (
            ("notes.txt", lambda d: open(os.path.join(d, "notes.txt"), "w").write("mine\n"),
             "notes.txt"),
            ("rank_0/notes.txt", lambda d: open(os.path.join(d, "rank_0", "notes.txt"), "w")
             .write("mine\n"), "rank_0/notes.txt"),
            ("a snapshot", lambda d: open(os.path.join(d, "step_0.safetensors"), "wb")
             .write(b"\x08" + b"\0" * 7 + b"{}      "), "step_0.safetensors"),
            ("a symbolic link", lambda d: os.symlink("/etc", os.path.join(d, "etc")), "etc"),
            ("a FIFO", lambda d: os.mkfifo(os.path.join(d, "pipe")), "pipe"),
            ("a folder", lambda d: os.makedirs(os.path.join(d, "rank_7")), "rank_7"),
            ("a link in place of amax.csv",
             lambda d: (os.remove(os.path.join(d, "rank_1", "amax.csv")),
                        os.symlink("../te_log.json", os.path.join(d, "rank_1", "amax.csv"))),
             "rank_1/amax.csv")):
        d = os.path.join(tmp, "user_" + re.sub(r"\W", "_", label))
        import_ok(logs2, d)
        add(d)
        ok, se = refused(tmp, logs1, d, "an import with " + label, os.path.basename(d), name,
                         "import-te did not write")
        if label == "notes.txt":
            said.append(se)
    # an older import (no "written") with a rank beyond its files; a te_log.json not TE's
    old = os.path.join(tmp, "old_extra")
    import_ok(logs2, old)
    strip_written(old)
    os.makedirs(os.path.join(old, "rank_2"))
    shutil.copy(os.path.join(old, "rank_1", "amax.csv"), os.path.join(old, "rank_2", "amax.csv"))
    refused(tmp, logs1, old, "an older import with rank_2 beyond its 2 files", "rank_2")
    foreign = os.path.join(tmp, "foreign_json")
    import_ok(logs1, foreign)
    with open(os.path.join(foreign, "te_log.json"), "w") as f:
        json.dump({"source": "my own notes", "written": ["amax.csv", "te_log.json"]}, f)
    refused(tmp, logs1, foreign, "a te_log.json of another source", "te_log.json", "source")
    # a target that is a file, or a symbolic link (to an import's folder: neither is touched)
    with open(os.path.join(tmp, "afile"), "w") as f:
        f.write("mine\n")
    ok, se = refused(tmp, logs1, os.path.join(tmp, "afile"), "a file", "afile", "not a folder")
    said.append(se)
    link_to = os.path.join(tmp, "linked_import")
    import_ok(logs2, link_to)
    os.symlink("linked_import", os.path.join(tmp, "alink"))
    for t in ("alink", "alink/"):
        ok, se = refused(tmp, logs1, t, "a symbolic link " + t, "symbolic link", cwd=tmp)
    said.append(se)
    summary(n0, "refusals: synth capture, 4-rank capture, 7 foreign entries, an older import's "
          "extra rank, another te_log.json, a file, a link: exit 2, every file unchanged")
    for s in said:
        print("  said: " + s)


def strip_written(folder):
    """te_log.json as an import before issue 41 wrote it: no "written"."""
    p = os.path.join(folder, "te_log.json")
    with open(p) as f:
        j = json.load(f)
    check("written" in j, "%s: te_log.json has no \"written\"" % folder)
    j.pop("written", None)
    with open(p, "w") as f:
        json.dump(j, f, indent=2)
        f.write("\n")


# ------------------------------------------------------------------ 2. replacements


def case_replacements(tmp):
    n0 = len(FAILS)
    logs1 = write_logs(os.path.join(tmp, "r_logs1"), [range(0, 12, 2)])
    logs2 = write_logs(os.path.join(tmp, "r_logs2"), [range(0, 10), range(0, 10)])
    logs3 = write_logs(os.path.join(tmp, "r_logs3"), [range(0, 8)] * 3)
    # a fresh import of each, into a new folder: what every replacement must equal
    ref = {}
    for name, logs in (("1", logs1), ("2", logs2), ("3", logs3)):
        d = os.path.join(tmp, "ref" + name)
        import_ok(logs, d)
        ref[name] = tree(d)
    j = json.load(open(os.path.join(tmp, "ref3", "te_log.json")))
    check(j.get("written") == ["rank_0/amax.csv", "rank_1/amax.csv", "rank_2/amax.csv",
                               "te_log.json"], "ref3 written: %s" % j.get("written"))
    j = json.load(open(os.path.join(tmp, "ref1", "te_log.json")))
    check(j.get("written") == ["amax.csv", "te_log.json"], "ref1 written: %s" % j.get("written"))
    # 3 ranks, the user removes rank_1/, then 1 rank with --force: no stale rank_2/amax.csv
    d = os.path.join(tmp, "stale")
    import_ok(logs3, d)
    shutil.rmtree(os.path.join(d, "rank_1"))
    import_ok(logs1, d, "--force")
    check(sorted(os.listdir(d)) == ["amax.csv", "te_log.json"],
          "after rank_1/ removed and a 1-rank --force: %s" % sorted(os.listdir(d)))
    check(not diff(ref["1"], tree(d)), "after rank_1/ removed: %s" % diff(ref["1"], tree(d)))
    # an import over an earlier one equals a fresh import, byte for byte (each way round)
    for first, second in (("2", "3"), ("3", "2"), ("3", "1"), ("1", "3"), ("2", "2")):
        d = os.path.join(tmp, "over_%s_%s" % (first, second))
        import_ok({"1": logs1, "2": logs2, "3": logs3}[first], d)
        import_ok({"1": logs1, "2": logs2, "3": logs3}[second], d, "--force")
        check(not diff(ref[second], tree(d)), "%s over %s: %s" % (second, first,
                                                                  diff(ref[second], tree(d))))
        check(not leftovers(tmp), "leftovers: %s" % leftovers(tmp))
    # an older import (te_log.json without "written") is replaced under --force
    for logs, name in ((logs2, "2"), (logs1, "1")):
        d = os.path.join(tmp, "older_" + name)
        import_ok(logs, d)
        strip_written(d)
        import_ok(logs3, d, "--force")
        check(not diff(ref["3"], tree(d)), "over an older %s-rank import: %s" % (name, diff(ref["3"], tree(d))))
    # the target as cap/, ./cap, ".", relative from another working folder: te_log.json's
    # log_dir is the argument as given, so the logs are named the same way each time
    os.makedirs(os.path.join(tmp, "wd", "sub"))
    shutil.copytree(logs2, os.path.join(tmp, "wd", "L"))
    base = os.path.join(tmp, "wd", "formref")
    import_ok(os.path.join(tmp, "wd", "L"), base)
    want = tree(base)
    cap = os.path.join(tmp, "wd", "cap")
    for label, target, cwd in (("cap/", "cap/", "wd"), ("./cap", "./cap", "wd"),
                               (".", ".", "wd/cap"), ("../cap from sub", "../cap", "wd/sub"),
                               ("cap/. ", "cap/.", "wd"), ("cap//", "cap//", "wd")):
        if not os.path.isdir(cap):
            import_ok(logs3, cap)
        import_ok(os.path.join(tmp, "wd", "L"), target, "--force", cwd=os.path.join(tmp, cwd))
        check(not diff(want, tree(cap)), "target %s: %s" % (label, diff(want, tree(cap))))
        check(not leftovers(os.path.join(tmp, "wd")), "target %s: leftovers %s"
              % (label, leftovers(os.path.join(tmp, "wd"))))
    # a new folder under folders that do not exist yet; an empty folder, its permissions kept
    import_ok(logs1, os.path.join(tmp, "new", "a", "b"))
    check(not diff(ref["1"], tree(os.path.join(tmp, "new", "a", "b"))), "new/a/b")
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    os.chmod(empty, 0o750)
    import_ok(logs1, empty)
    check(stat.S_IMODE(os.stat(empty).st_mode) == 0o750 and not diff(ref["1"], tree(empty)),
          "an empty folder: mode %o" % stat.S_IMODE(os.stat(empty).st_mode))
    summary(n0, "replacements: a removed rank_1/ leaves no rank_2/; 5 imports over imports and 2 over "
          "older imports equal fresh ones byte for byte; cap/, ./cap, ., ../cap, cap/., cap//")


# ------------------------------------------------------------------ 3. leftovers


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def case_leftovers(tmp):
    n0 = len(FAILS)
    logs1 = write_logs(os.path.join(tmp, "l_logs1"), [range(0, 6)])
    logs2 = write_logs(os.path.join(tmp, "l_logs2"), [range(0, 6), range(0, 6)])
    par = os.path.join(tmp, "lo")
    os.makedirs(par)
    t = os.path.join(par, "t")
    import_ok(logs1, t)
    earlier = tree(t)
    dead, live = dead_pid(), os.getpid()
    for n in (".t.fp8lab-import.%d" % dead, ".t.fp8lab-old.%d" % dead,
              ".t.fp8lab-import.%d" % live, ".u.fp8lab-import.%d" % dead):
        os.makedirs(os.path.join(par, n, "rank_0"))
        open(os.path.join(par, n, "rank_0", "amax.csv"), "w").write("step,tensor,amax\n")
    import_ok(logs2, t, "--force")
    check(sorted(os.listdir(par)) == sorted([".t.fp8lab-import.%d" % live, ".u.fp8lab-import.%d"
                                             % dead, "t"]),
          "leftovers after the next import: %s" % sorted(os.listdir(par)))
    # a kill in the fallback swap: the earlier import only under .t.fp8lab-old.<pid>, no t
    shutil.rmtree(t)
    import_ok(logs1, t)
    os.rename(t, os.path.join(par, ".t.fp8lab-old.%d" % dead))
    rc, so, se = run(["import-te", logs2, t])  # no --force: the earlier import is back first
    check(rc == 2 and "not empty" in se and not diff(earlier, tree(t)),
          "an -old leftover without its target: moved back: exit %d %r" % (rc, se))
    check(".t.fp8lab-old.%d" % dead not in os.listdir(par), "the -old leftover is gone")
    summary(n0, "leftovers: a dead pid's .t.fp8lab-import/.t.fp8lab-old removed, a live pid's and "
          "another target's kept; an -old folder without its target moved back")


# ------------------------------------------------------------------ 4. failed writes (case 7)


def fsize_limit(n):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    return pre


def case_failed_writes(tmp):
    n0 = len(FAILS)
    # rank 0 logs 2 iterations, rank 1 forty: rank_0/amax.csv < te_log.json < rank_1/amax.csv
    logs_r = write_logs(os.path.join(tmp, "f_logsr"), [range(0, 2), range(0, 40)])
    # few rows: both amax.csv smaller than te_log.json
    logs_j = write_logs(os.path.join(tmp, "f_logsj"), [range(0, 1), range(0, 1)])
    sizes = {}
    for name, logs in (("r", logs_r), ("j", logs_j)):
        d = os.path.join(tmp, "f_ref" + name)
        import_ok(logs, d)
        sizes[name] = {f: os.path.getsize(os.path.join(d, f)) for f in
                       ("rank_0/amax.csv", "rank_1/amax.csv", "te_log.json")}
    sr, sj = sizes["r"], sizes["j"]
    check(sr["rank_0/amax.csv"] < sr["rank_1/amax.csv"] and
          sj["rank_1/amax.csv"] < sj["te_log.json"] and sj["rank_0/amax.csv"] < sj["te_log.json"],
          "sizes as planned: %s" % sizes)
    hits = (("rank_0/amax.csv", logs_r, sr["rank_0/amax.csv"] // 2),
            ("rank_1/amax.csv", logs_r, (sr["rank_0/amax.csv"] + sr["te_log.json"]) // 2
             if sr["te_log.json"] < sr["rank_1/amax.csv"] else sr["rank_0/amax.csv"] + 1),
            ("te_log.json", logs_j, max(sj["rank_0/amax.csv"], sj["rank_1/amax.csv"]) + 1))
    par = os.path.join(tmp, "fw")
    os.makedirs(par)
    prev = os.path.join(par, "prev")
    import_ok(write_logs(os.path.join(tmp, "f_logs1"), [range(0, 3)]), prev)
    earlier = tree(prev)
    for where, logs, n in hits:
        for target, force in ((os.path.join(par, "new"), []), (prev, ["--force"])):
            rc, so, se = run(["import-te", logs, target] + force, preexec=fsize_limit(n))
            label = "%s fails (limit %d bytes), %s" % (where, n, "--force over an import"
                                                          if force else "a new folder")
            check(rc == 1 and se.count("\n") == 1 and os.path.basename(where) in se and
                  "File too large" in se, "%s: exit %d %r" % (label, rc, se))
            if force:
                check(not diff(earlier, tree(prev)), "%s: the earlier import changed: %s"
                      % (label, diff(earlier, tree(prev))))
            else:
                check(not os.path.exists(target), "%s: a partial folder: %s" % (
                    label, sorted(tree(target)) if os.path.isdir(target) else "?"))
            check(sorted(os.listdir(par)) == ["prev"], "%s: left %s" % (label, os.listdir(par)))
            if where == "rank_1/amax.csv" and not force:
                print("  said: " + se.strip())
    summary(n0, "failed writes (case 7): rank_0/amax.csv, rank_1/amax.csv, te_log.json: exit 1, "
          "nothing left, an earlier import byte-identical")


# ------------------------------------------------------------------ 5. kills


def big_logs(root, ranks=4, iters=400):
    """Logs of about 25 MB (4 ranks x 400 iterations x 144 tensors), about a second's import."""
    d = os.path.join(root, "nvdlfw_inspect_statistics_logs")
    os.makedirs(d)
    rng = random.Random(root)
    vals = ["%.4f" % rng.uniform(0.05, 30) for _ in range(997)]
    layers = ["model.layers.%d.mlp.fc%d" % (l, f) for l in range(24) for f in (1, 2)]
    names = ["%s_%s_cur_amax" % (L, t) for L in layers for t in ("activation", "weight", "gradient")]
    for r in range(ranks):
        k = r
        out = []
        for it in range(iters):
            head = "2025-06-03 12:34:56,789 - INFO - "
            mid = "%siteration=%06d%svalue=" % (tl.TABS, it, tl.TABS)
            for n in names:
                k += 7
                out.append(head + n + mid + vals[k % 997] + "\n")
        with open(os.path.join(d, "nvdlfw_inspect_globalrank-%d.log" % r), "w") as f:
            f.writelines(out)
    return root


def wait_until(cond, proc, timeout=60.0):
    end = time.time() + timeout
    while not cond():
        if proc.poll() is not None:
            return False
        if time.time() > end:
            raise AssertionError("timed out")
        time.sleep(0.001)
    return True


def case_kills(tmp):
    n0 = len(FAILS)
    rng = random.Random(41)
    par = os.path.join(tmp, "k")
    os.makedirs(par)
    old_logs = big_logs(os.path.join(tmp, "k_old"), ranks=2, iters=100)
    new_logs = big_logs(os.path.join(tmp, "k_new"))
    target = os.path.join(par, "t")
    ref_dir = os.path.join(tmp, "k_ref")
    import_ok(new_logs, ref_dir)
    ref = tree(ref_dir)
    import_ok(old_logs, target)
    earlier = tree(target)
    tmpname = lambda pid: os.path.join(par, ".t.fp8lab-import.%d" % pid)  # noqa: E731
    # the phases here: reading the logs, then writing the new folder, then the commit
    t0 = time.time()
    p = subprocess.Popen([BIN, "import-te", new_logs, target, "--force"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    wait_until(lambda: os.path.exists(tmpname(p.pid)), p)
    t_write = time.time() - t0
    p.communicate()
    t_end = time.time() - t0
    check(p.returncode == 0 and not diff(ref, tree(target)), "an unkilled --force import")
    print("  an import here: %.2f s reading, %.2f s writing and committing" % (t_write,
                                                                                t_end - t_write))
    kinds = ["read"] * 4 + ["write"] * 4 + ["end"] * 2
    rng.shuffle(kinds)
    landed = {"before": 0, "during": 0, "after": 0}
    for i, kind in enumerate(kinds):
        import_ok(old_logs, target, "--force")  # the earlier import, and the last kill's leftovers removed
        check(not diff(earlier, tree(target)) and not leftovers(par),
              "point %d: before it: %s %s" % (i + 1, diff(earlier, tree(target)), leftovers(par)))
        p = subprocess.Popen([BIN, "import-te", new_logs, target, "--force"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if kind == "read":
            delay = rng.uniform(0.0, 0.9 * t_write)
        elif kind == "write":
            wait_until(lambda: os.path.exists(tmpname(p.pid)), p)
            delay = rng.uniform(0.0, 0.9 * (t_end - t_write))
        else:  # about when the writing ends: the commit, or just before or after it
            wait_until(lambda: os.path.exists(tmpname(p.pid)), p)
            delay = rng.uniform(0.8 * (t_end - t_write), 1.05 * (t_end - t_write))
        time.sleep(delay)
        ended = p.poll() is not None
        if not ended:
            p.send_signal(signal.SIGKILL)
        p.communicate()
        got = tree(target)
        left = leftovers(par)
        is_old, is_new = not diff(earlier, got), not diff(ref, got)
        check(is_old or is_new, "point %d (%s, %.3f s): the target is neither import: %s" % (
            i + 1, kind, delay, diff(ref, got)[:5]))
        check(all(LEFTOVER.match(n).group(1) == "t" and int(LEFTOVER.match(n).group(3)) == p.pid
                  for n in left) and set(os.listdir(par)) == set(left) | {"t"},
              "point %d: beside the target: %s" % (i + 1, sorted(os.listdir(par))))
        where = ("before" if is_old else "during" if left else "after")
        landed[where] += 1
        print("    point %2d: %s, killed %.3f s in: %s the commit%s; target = the %s import%s" % (
            i + 1, kind, delay, where, " (it had ended)" if ended else "",
            "earlier" if is_old else "new", ", left " + " ".join(left) if left else ""))
    import_ok(old_logs, target, "--force")
    check(not leftovers(par), "the last leftovers removed: %s" % leftovers(par))
    # the 4 moments while the logs are read land before the commit on any machine's speed
    check(landed["before"] >= 4, "kills before the commit: %s" % landed)
    summary(n0, "  kill test: 10 points, %d before the commit, %d during it, %d after: never a partial "
          "folder, the earlier import kept until the swap" % (landed["before"], landed["during"],
                                                             landed["after"]))
    commit_kills(tmp, par, target, new_logs, old_logs, ref, earlier)


SHIM = r"""
/* Kills import-te inside its commit: after the RENAME_EXCHANGE swap (FP8LAB_TEST_KILL_SWAP),
 * or with the swap refused as on a file system without it (FP8LAB_TEST_NO_EXCHANGE) after the
 * Nth rename of the fallback (FP8LAB_TEST_KILL_AFTER_RENAMES). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int renameat2(int a, const char *x, int b, const char *y, unsigned flags) {
  static int (*real)(int, const char *, int, const char *, unsigned);
  if (!real) real = (int (*)(int, const char *, int, const char *, unsigned))dlsym(RTLD_NEXT, "renameat2");
  if (getenv("FP8LAB_TEST_NO_EXCHANGE")) {
    errno = EINVAL;
    return -1;
  }
  static int wrote;
  const char *w = getenv("FP8LAB_TEST_WRITE_INTO_TARGET"); /* a user's file, just before the swap */
  if (w && !wrote++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", y, w);
    FILE *f = fopen(p, "w");
    if (f) fputs("the user's\n", f), fclose(f);
  }
  int rc = real(a, x, b, y, flags);
  if (rc == 0 && getenv("FP8LAB_TEST_KILL_SWAP")) raise(SIGKILL);
  return rc;
}
int rename(const char *a, const char *b) {
  static int (*real)(const char *, const char *);
  static int count;
  if (!real) real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
  int rc = real(a, b);
  const char *n = getenv("FP8LAB_TEST_KILL_AFTER_RENAMES");
  /* the fallback's renames: the target aside, the new folder in (not amax.csv's own) */
  if (n && rc == 0 && strstr(a, ".csv") == NULL && strstr(a, ".json") == NULL &&
      ++count == atoi(n))
    raise(SIGKILL);
  return rc;
}
"""


def commit_kills(tmp, par, target, new_logs, old_logs, ref, earlier):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        print("  commit kills: skipped (no C compiler)")
        return
    src, so = os.path.join(tmp, "shim.c"), os.path.join(tmp, "shim.so")
    with open(src, "w") as f:
        f.write(SHIM)
    subprocess.run([cc, "-shared", "-fPIC", "-o", so, src, "-ldl"], check=True)
    asan = (os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    said = []
    for label, env, want_target, want_left in (
            ("after the swap", {"FP8LAB_TEST_KILL_SWAP": "1"}, ref, "import"),
            ("no exchange: also without the shim's kill", {"FP8LAB_TEST_NO_EXCHANGE": "1"}, ref,
             None),
            ("no exchange: after the earlier import went aside",
             {"FP8LAB_TEST_NO_EXCHANGE": "1", "FP8LAB_TEST_KILL_AFTER_RENAMES": "1"}, None, "old"),
            ("no exchange: after the new one went in",
             {"FP8LAB_TEST_NO_EXCHANGE": "1", "FP8LAB_TEST_KILL_AFTER_RENAMES": "2"}, ref, "old")):
        import_ok(old_logs, target, "--force")
        e = dict(os.environ, LD_PRELOAD=so, ASAN_OPTIONS=asan, **env)
        p = subprocess.Popen([BIN, "import-te", new_logs, target, "--force"], env=e,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        p.stderr_text = p.communicate()[1]
        killed = want_left is not None
        check(p.returncode == (-signal.SIGKILL if killed else 0), "%s: exit %d %s" % (
            label, p.returncode, p.stderr_text))
        left = leftovers(par)
        if want_target is None:  # the window of the fallback: the earlier import is aside
            aside = ".t.fp8lab-old.%d" % p.pid
            check(not os.path.exists(target) and left == [".t.fp8lab-import.%d" % p.pid, aside]
                  and not diff(earlier, tree(os.path.join(par, aside))) and
                  not diff(ref, tree(os.path.join(par, left[0]))),
                  "%s: %s %s" % (label, os.path.exists(target), left))
        else:
            check(not diff(want_target, tree(target)), "%s: the target: %s" % (
                label, diff(want_target, tree(target))[:5]))
            want = [".t.fp8lab-%s.%d" % (want_left, p.pid)] if killed else []
            check(left == want, "%s: left %s, want %s" % (label, left, want))
            if killed:  # what is left is the earlier import, whole
                check(not diff(earlier, tree(os.path.join(par, left[0]))), label)
        # the next import (no --force: it refuses, the target kept) removes or moves back
        before = tree(target) if os.path.exists(target) else None
        rc, so_, se = run(["import-te", old_logs, target])
        check(rc == 2 and "not empty" in se and not leftovers(par),
              "%s: the next import: exit %d %r, left %s" % (label, rc, se, leftovers(par)))
        check(not diff(before or earlier, tree(target)), "%s: after the next import" % label)
        said.append(label)
    # a file of the user's written into the target in the instant before the swap (after
    # import-te checked the folder): the folder swapped out is walked again before its removal,
    # so the swap is undone, exit 2 naming the file, and nothing is lost
    import_ok(old_logs, target, "--force")
    e = dict(os.environ, LD_PRELOAD=so, ASAN_OPTIONS=asan, FP8LAB_TEST_WRITE_INTO_TARGET="notes.txt")
    p = subprocess.run([BIN, "import-te", new_logs, target, "--force"], env=e,
                       capture_output=True, text=True)
    want = dict(earlier)
    got = tree(target)
    check(p.returncode == 2 and "holds notes.txt" in p.stderr and
          got.get("notes.txt") is not None and
          not diff(want, {k: v for k, v in got.items() if k != "notes.txt"}) and not leftovers(par),
          "a file written into the target before the swap: exit %d %r, left %s, diff %s" % (
              p.returncode, p.stderr, leftovers(par),
              diff(want, {k: v for k, v in got.items() if k != "notes.txt"})[:5]))
    if os.path.exists(os.path.join(target, "notes.txt")):
        os.remove(os.path.join(target, "notes.txt"))
    said.append("a user's file written just before the swap: swapped back, kept")
    print("  commit kills: %s: the target the earlier or the new import (or, in the fallback's "
          "window, the earlier one aside, moved back by the next import)" % "; ".join(said))


def main():
    tmp = tempfile.mkdtemp(prefix="fp8lab-te-folder-")
    t = time.time()
    try:
        for case in (case_refusals, case_replacements, case_leftovers, case_failed_writes,
                     case_kills):
            try:
                case(tmp)
            except Exception as e:  # one case's crash must not hide the others' results
                check(False, "%s: %s: %s" % (case.__name__, type(e).__name__, e))
    finally:
        if not FAILS:
            shutil.rmtree(tmp)
        else:
            print("kept", tmp)
    if FAILS:
        print("%d failures" % len(FAILS))
        sys.exit(1)
    print("te import folder: all checks passed (%.1f s)" % (time.time() - t))


if __name__ == "__main__":
    main()
