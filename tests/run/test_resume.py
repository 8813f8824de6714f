#!/usr/bin/env python3
"""test_resume.py: crash consistency, --force and --resume of `fp8lab run`, through the binary.

  test_resume.py FP8LAB_BIN

1. --force never deletes a folder fp8lab did not create: a user's <out>/trace/ survives a
   synth: run with --force (the generated trace goes to <out>/synth_trace/, run.json says so),
   and a synth_trace/ holding a file of the user's is refused, the file kept.
2. fp8lab's temporaries (.<name>.tmp.<pid> of a process that is gone) are removed by the next
   run, with or without --force; a folder holding nothing else is not "not empty"; other
   names, and the temporaries of a live process, are left alone.
3. A kill between the run's commit and the end of its report (over another experiment's
   results) leaves the folder marked: `fp8lab report` refuses it (exit 2, one line), a plain
   `fp8lab run` says what to do, `--resume` finishes it; after a kill during a report, --force
   with another experiment leaves none of the killed report's plots.
4. --resume's refusals: no interrupted run, no checkpoint, another experiment file, a changed
   trace, --resume with --force.
5. The kill test: a clean reference run, then 10 kills (SIGKILL) at seeded random moments
   (during the replay, between checkpointed steps, and during the report), each followed by
   --resume (one of them, on a fresh folder, by a plain re-run without --force instead): every
   output file byte-identical to the reference, run.json except its two timestamps
   (started_utc, wall_time_s).
6. A three-rank trace with reduce_amax, killed twice and resumed with another --threads (needs
   numpy for tools/reference/gen_trace.py; skipped without): the same bytes.
7. experts.csv (issue 40) of a two-rank trace with tokens.csv: its rows as worked out by the
   test, the same bytes after a kill and --resume, a changed tokens.csv refusing the resume.

Kills land mid-run because the runs are slowed by FP8LAB_TEST_STEP_DELAY_MS (a pause after each
step; docs/reference.md) and the kill moments are taken from what the folder shows (the first checkpoint,
the marker's phase) plus a seeded random delay, so the test does not depend on the machine's
speed. Deterministic: random.Random(16).
"""
import fcntl
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BIN = None
EXP = """[trace]
path = synth:llm
synth_steps = 30
synth_seed = 3
[recipe.delayed]
kind = delayed
format = hybrid
history_len = 1, 16
margin = 0, 1
[recipe.jit]
kind = current
format = hybrid
[analysis]
gemm = true
gemm_max_tokens = 64
[output]
dir = out
"""
# another experiment (the folder's earlier results in part 3, a wrong file in part 4)
EXP_B = EXP.replace("history_len = 1, 16", "history_len = 4").replace("synth_steps = 30",
                                                                      "synth_steps = 20")
MARKER = ".fp8lab-run-in-progress"
CKPT = ".fp8lab-checkpoint"
DELAY_MS = "15"
TIMESTAMPS = ("started_utc", "wall_time_s")


def run(args, cwd, env=None, check=None):
    p = subprocess.run([BIN] + args, cwd=cwd, capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if check is not None and p.returncode != check:
        raise AssertionError("fp8lab %s: exit %d (expected %d)\n%s%s" % (
            " ".join(args), p.returncode, check, p.stdout, p.stderr))
    return p


def one_line(text):
    return text.count("\n") == 1 and text.endswith("\n")


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def write(path, text):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def snapshot(folder):
    """Every file under folder: relative path -> bytes (run.json with its timestamps cut)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            rel = os.path.relpath(p, folder)
            with open(p, "rb") as fh:
                data = fh.read()
            if rel == "run.json":
                j = json.loads(data)
                for k in TIMESTAMPS:
                    assert k in j, "run.json has no %s" % k
                # byte for byte except the two values: the same text with them blanked
                data = re.sub(rb'("(?:started_utc|wall_time_s)": )[^,\n]*', rb"\1X", data)
            out[rel] = data
    return out


def diff(ref, got):
    msgs = []
    for k in sorted(set(ref) | set(got)):
        if k not in got:
            msgs.append("missing " + k)
        elif k not in ref:
            msgs.append("extra " + k)
        elif ref[k] != got[k]:
            msgs.append("differs " + k)
    return msgs


def wait_unlocked(folder, timeout=20.0):
    """Until no process holds the folder's lock (a killed report's children die with it)."""
    t_end = time.time() + timeout
    while True:
        fd = os.open(folder, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.time() > t_end:
                raise AssertionError("%s: still locked %.0f s after the kill" % (folder, timeout))
            time.sleep(0.01)
        finally:
            os.close(fd)


def marker_phase(folder):
    try:
        with open(os.path.join(folder, MARKER)) as f:
            for line in f:
                if line.startswith("phase "):
                    return line.split()[1]
    except OSError:
        return None
    return None


def ckpt_phase(folder):
    """The phase a checkpoint records (run_resume.c's layout: magic, version, sizeof acc, the
    fp8lab version in 32 bytes, then the phase): 1 replay, 2 commit, 3 committed (report)."""
    with open(os.path.join(folder, CKPT, "state"), "rb") as f:
        head = f.read(64)
    assert head[:8] == b"FP8CKPT\x01", head[:8]
    return int.from_bytes(head[56:64], sys.byteorder)


# ------------------------------------------------------------------ 1. --force and synth traces

def test_force_keeps_user_trace(d):
    write(os.path.join(d, "k.ini"), EXP.replace("synth_steps = 30", "synth_steps = 4"))
    out = os.path.join(d, "o1")
    write(os.path.join(out, "trace", "mine.txt"), "the user's own file\n")
    write(os.path.join(out, "notes.txt"), "notes\n")
    for i in range(2):  # over the user's folder, then over the first run's results
        run(["run", "k.ini", "--out", "o1", "--force", "--quiet", "--no-report"], d, check=0)
        assert os.path.exists(os.path.join(out, "trace", "mine.txt")), \
            "--force removed the user's trace/mine.txt (run %d)" % (i + 1)
        assert os.path.exists(os.path.join(out, "notes.txt"))
        with open(os.path.join(out, "run.json")) as f:
            j = json.load(f)
        assert j["trace"]["path"] == "o1/synth_trace", j["trace"]["path"]
        assert sorted(os.listdir(os.path.join(out, "synth_trace")))[0] == "amax.csv"
    # a synth_trace/ with a file of the user's is not fp8lab's to replace: refused, kept
    write(os.path.join(out, "synth_trace", "mine.txt"), "mine\n")
    p = run(["run", "k.ini", "--out", "o1", "--force", "--quiet", "--no-report"], d, check=2)
    assert p.stderr == ("fp8lab: o1/synth_trace: holds mine.txt, which fp8lab did not write: it "
                        "replaces only a synth trace of its own there (move your files away)\n"), \
        p.stderr
    assert os.path.exists(os.path.join(out, "synth_trace", "mine.txt"))
    assert os.path.exists(os.path.join(out, "synth_trace", "amax.csv"))
    print("  --force: the user's trace/ and a foreign synth_trace/ kept")


# ------------------------------------------------------------------ 2. temporaries

def test_debris(d):
    write(os.path.join(d, "k.ini"), EXP.replace("synth_steps = 30", "synth_steps = 4"))
    dead = dead_pid()
    fp8lab_temps = [".steps.csv.tmp.%d" % dead, ".run.json.tmp.%d" % dead,
                    ".summary.csv.tmp.%d" % dead, "plots/.snr.png.tmp.%d" % dead,
                    "notebooks_export/.k.ipynb.tmp.%d" % dead,
                    ".synth_trace.tmp.%d/amax.csv" % dead, ".synth_trace.old.%d/step_0.safetensors" % dead,
                    MARKER, CKPT + "/state", CKPT + "/steps.csv"]
    # (a) a folder of nothing but fp8lab's debris is not "not empty": a plain run goes ahead
    out = os.path.join(d, "o2")
    for t in fp8lab_temps:
        write(os.path.join(out, t), "partial")
    p = run(["run", "k.ini", "--out", "o2", "--quiet", "--no-report"], d)
    assert p.returncode == 0, "a folder of fp8lab temporaries refused: %s" % p.stderr
    for t in fp8lab_temps:
        assert not os.path.exists(os.path.join(out, t.split("/")[0] if t.startswith(".synth")
                                               else t)), "%s left" % t
    # (b) --force removes them too, and leaves a live process's and other names alone
    live = os.getpid()
    keep = [".notes.txt.tmp.%d" % dead, ".steps.csv.tmp.%d" % live, "plots/.snr.png.tmp.%d" % live,
            ".steps.csv.tmp.0%d" % dead, "steps.csv.tmp.%d" % dead, ".steps.csv.tmp.%dx" % dead,
            "plots/.mine.txt.tmp.%d" % dead]
    for t in fp8lab_temps[:5] + keep:
        write(os.path.join(out, t), "partial")
    run(["run", "k.ini", "--out", "o2", "--quiet", "--no-report", "--force"], d, check=0)
    for t in fp8lab_temps[:5]:
        assert not os.path.exists(os.path.join(out, t)), "--force left %s" % t
    for t in keep:
        assert os.path.exists(os.path.join(out, t)), "%s removed" % t
    print("  temporaries: %d of fp8lab's removed with and without --force, %d others kept"
          % (len(fp8lab_temps), len(keep)))


# ------------------------------------------------------------------ kills

def start(d, extra, every_step=True, exp="k.ini"):
    env = dict(os.environ, FP8LAB_TEST_STEP_DELAY_MS=DELAY_MS)
    ckpt = ["--checkpoint-interval", "0"] if every_step else []
    return subprocess.Popen([BIN, "run", exp, "--threads", "2", "--quiet"] + ckpt + extra,
                            cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_for(cond, proc, timeout=60.0):
    t_end = time.time() + timeout
    while not cond():
        if proc.poll() is not None:
            return False
        if time.time() > t_end:
            raise AssertionError("timed out waiting for the run")
        time.sleep(0.002)
    return True


def kill(proc):
    finished = proc.poll() is not None
    if not finished:
        proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return not finished and proc.returncode == -signal.SIGKILL


def test_mixed_folder(d):
    """3: killed over another experiment's results between the commit and the report's end."""
    write(os.path.join(d, "k.ini"), EXP)
    write(os.path.join(d, "b.ini"), EXP_B)
    out = os.path.join(d, "out")
    shutil.rmtree(out, ignore_errors=True)
    run(["run", "k.ini", "--threads", "2", "--quiet"], d, check=0)
    ref = snapshot(out)
    run(["run", "b.ini", "--out", "out", "--threads", "2", "--quiet", "--force"], d, check=0)
    b_json = open(os.path.join(out, "run.json")).read()
    p = start(d, ["--force"], every_step=False)  # the default interval: one checkpoint here

    def committed():  # the new run.json is in place: the rest is the commit's end and the report
        try:
            return open(os.path.join(out, "run.json")).read() != b_json
        except OSError:
            return False
    landed = wait_for(committed, p)
    assert kill(p) and landed, "the run ended before the kill"
    wait_unlocked(out)
    r = run(["report", "out"], d)
    assert r.returncode == 2 and one_line(r.stderr), "report over the mixed folder: exit %d %r" % (
        r.returncode, r.stderr)
    assert r.stderr == ("fp8lab: report: out: an fp8lab run of k.ini was interrupted here (during "
                        "its %s): its files may mix two runs; continue it with `fp8lab run k.ini "
                        "--resume` or start over with --force\n" % marker_phase(out)), r.stderr
    r = run(["run", "k.ini", "--quiet"], d, check=2)
    assert "was interrupted here" in r.stderr and one_line(r.stderr), r.stderr
    run(["run", "k.ini", "--threads", "2", "--quiet", "--resume"], d, check=0)
    problems = diff(ref, snapshot(out))
    assert not problems, "resumed after a kill in the report phase: %s" % problems
    assert not os.path.exists(os.path.join(out, MARKER))
    assert not os.path.exists(os.path.join(out, CKPT))
    print("  mixed folder: report refused (exit 2), plain run refused, --resume byte-identical")


def test_force_after_report_kill(d):
    """3b: --force over a folder whose report was killed: the plots the interrupted report drew
    (listed nowhere yet) go with the rest, the folder is another run's exactly."""
    out = os.path.join(d, "out")
    shutil.rmtree(out, ignore_errors=True)
    run(["run", "b.ini", "--out", "out", "--threads", "2", "--quiet"], d, check=0)
    ref_b = snapshot(out)
    only_k = os.path.join(out, "plots", "amax_layers.0.qkv.output.png")  # k draws it, b does not
    assert not os.path.exists(only_k)
    p = start(d, ["--force"], every_step=False)
    landed = wait_for(lambda: os.path.exists(only_k), p)
    assert kill(p) and landed, "the run ended before the kill"
    wait_unlocked(out)
    run(["run", "b.ini", "--out", "out", "--threads", "2", "--quiet", "--force"], d, check=0)
    problems = diff(ref_b, snapshot(out))
    assert not problems, "--force after a kill in the report: %s" % problems
    print("  --force after a kill in the report: the interrupted report's plots gone")


def test_resume_errors(d):
    out = os.path.join(d, "out")
    r = run(["run", "k.ini", "--resume", "--quiet"], d, check=2)  # complete folder: nothing to do
    assert r.stderr == "fp8lab: out: no interrupted fp8lab run to resume here (no %s)\n" % MARKER, \
        r.stderr
    r = run(["run", "k.ini", "--resume", "--force"], d, check=2)
    assert one_line(r.stderr) and "--resume" in r.stderr and "--force" in r.stderr, r.stderr
    p = start(d, ["--force"])
    landed = wait_for(lambda: os.path.exists(os.path.join(out, CKPT, "state")) and
                      os.path.getsize(os.path.join(out, CKPT, "steps.csv")) > 5000, p)
    assert kill(p) and landed
    wait_unlocked(out)
    saved = os.path.join(d, "saved")
    shutil.rmtree(saved, ignore_errors=True)
    shutil.copytree(out, saved, symlinks=True)
    # another experiment file (the same text under another name, then another text)
    shutil.copy(os.path.join(d, "k.ini"), os.path.join(d, "k2.ini"))
    for exp in ("k2.ini", "b.ini"):
        r = run(["run", exp, "--out", "out", "--resume", "--quiet"], d, check=2)
        assert r.stderr == ("fp8lab: %s: not the experiment of the interrupted run in out (its "
                            "path or text differs): resume with the same experiment file, or "
                            "start over with --force\n" % exp), r.stderr
    # a changed trace
    amax = os.path.join(out, "synth_trace", "amax.csv")
    st = os.stat(amax)
    os.utime(amax, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
    r = run(["run", "k.ini", "--resume", "--quiet"], d, check=2)
    assert r.stderr == ("fp8lab: out: the trace changed since the interrupted run started (a file "
                        "added, removed or rewritten): resume needs the same trace; start over "
                        "with --force\n"), r.stderr
    os.utime(amax, ns=(st.st_atime_ns, st.st_mtime_ns))
    # no checkpoint (killed before its first)
    os.rename(os.path.join(out, CKPT, "state"), os.path.join(d, "state"))
    r = run(["run", "k.ini", "--resume", "--quiet"], d, check=2)
    assert r.stderr == ("fp8lab: out: the interrupted run left no checkpoint (it was killed before "
                        "its first): start over with --force\n"), r.stderr
    # a damaged one
    with open(os.path.join(d, "state"), "rb") as f:
        data = bytearray(f.read())
    data[100] ^= 1
    with open(os.path.join(out, CKPT, "state"), "wb") as f:
        f.write(data)
    r = run(["run", "k.ini", "--resume", "--quiet"], d, check=2)
    assert r.stderr == ("fp8lab: out/%s/state: truncated or damaged (checksum): start over with "
                        "--force\n" % CKPT), r.stderr
    # the refusals changed nothing: the saved copy resumes
    shutil.rmtree(out)
    os.rename(saved, out)
    print("  --resume refused: complete folder, --force, 2 other experiment files, changed trace, "
          "no checkpoint, damaged checkpoint")


def kill_test(d, rng):
    """5: 10 kills at seeded random moments, each resumed; every output against the reference.
    The trace is generated once (a synth: experiment would generate it again in every run:
    part 3 resumes one of those)."""
    run(["synth", "llm", "trace", "--steps", "30", "--seed", "3"], d, check=0)
    write(os.path.join(d, "kt.ini"), EXP.replace("synth:llm", "trace").replace("dir = out",
                                                                                 "dir = kout"))
    out = os.path.join(d, "kout")
    run(["run", "kt.ini", "--threads", "2", "--quiet"], d, check=0)  # the reference: no kill
    ref = snapshot(out)
    # how long the phases take here (a run slowed and checkpointed as the killed ones are)
    shutil.rmtree(out)
    p = start(d, [], exp="kt.ini")
    t0 = time.time()
    wait_for(lambda: os.path.exists(os.path.join(out, CKPT, "state")), p)
    t_ckpt = time.time()
    wait_for(lambda: marker_phase(out) == "report", p)
    t_report = time.time()
    p.communicate()
    t_end = time.time()
    assert p.returncode == 0, p.stderr
    problems = diff(ref, snapshot(out))
    assert not problems, "a run with checkpoints after every step: %s" % problems
    replay_s, report_s = t_report - t_ckpt, t_end - t_report
    print("  reference: first checkpoint after %.2f s, replay %.2f s, report %.2f s"
          % (t_ckpt - t0, replay_s, report_s))
    kinds = ["replay"] * 7 + ["report"] * 3
    rng.shuffle(kinds)
    fresh = kinds.index("replay")  # this one on an empty folder, re-run plainly
    table, landed = [], {"replay": 0, "commit": 0, "report": 0}
    for i, kind in enumerate(kinds):
        if i == fresh:
            shutil.rmtree(out)
        for attempt in range(5):
            p = start(d, [] if i == fresh else ["--force"], exp="kt.ini")
            if kind == "replay":
                ok = wait_for(lambda: os.path.exists(os.path.join(out, CKPT, "state")), p)
                delay = rng.uniform(0.0, 0.75 * replay_s)  # margin: a faster run than measured
            else:
                ok = wait_for(lambda: marker_phase(out) == "report", p)
                delay = rng.uniform(0.0, 0.8 * report_s)
            time.sleep(delay if ok else 0)
            # a kill that lands after the run's last file operation (the marker and the
            # checkpoint removed; the process still exiting, which under LeakSanitizer's exit
            # scan takes a while) finds the work done: as if the run had ended first
            if kill(p):
                wait_unlocked(out)
                if os.path.exists(os.path.join(out, MARKER)):
                    break
            print("    point %d: the run ended before the kill (%.2f s): again" % (i + 1, delay))
        else:
            raise AssertionError("point %d: no kill landed in 5 tries" % (i + 1))
        wait_unlocked(out)
        where = {1: "replay", 2: "commit", 3: "report"}[ckpt_phase(out)]
        landed[where] += 1
        r = run(["report", "kout"], d, check=2)  # every kill leaves the folder marked
        assert "was interrupted here" in r.stderr, r.stderr
        if i == fresh:
            r = run(["run", "kt.ini", "--threads", "2"], d, check=0)  # no --force, no --resume
            how = "plain re-run"
        else:
            r = run(["run", "kt.ini", "--threads", "2", "--resume"], d, check=0)
            m = re.search(r"resumed kout after step (\d+) of 30", r.stderr)
            assert m, r.stderr
            how = "resumed after step %s" % m.group(1)
        problems = diff(ref, snapshot(out))
        assert not problems, "point %d (%s, %s): %s" % (i + 1, where, how, problems)
        assert not os.path.exists(os.path.join(out, MARKER))
        table.append("    point %2d: killed %.3f s into the %s (landed in the %s); %s: "
                     "byte-identical" % (i + 1, delay, kind, where, how))
    print("\n".join(table))
    print("  kill test: %d points, %d in the replay, %d in the commit, %d in the report: all "
          "byte-identical" % (len(kinds), landed["replay"], landed["commit"], landed["report"]))
    # (a replay kill that a faster run turns into a report kill is still a kill: the counts are
    # what the seeded moments must cover at least)
    assert landed["replay"] >= 4 and landed["report"] >= 2, landed
    commit_kills(d, ref)


SHIM = r"""
/* rename() that kills the process after the Nth rename out of the checkpoint folder: the
 * commit of the partial files (histograms, gemm, stream, steps), in the middle */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
int rename(const char *a, const char *b) {
  static int (*real)(const char *, const char *);
  static int count;
  if (!real) real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
  int rc = real(a, b);
  const char *n = getenv("FP8LAB_TEST_KILL_AFTER_RENAMES");
  if (n && strstr(a, "/.fp8lab-checkpoint/") && !strstr(b, "/.fp8lab-checkpoint/") &&
      ++count == atoi(n))
    raise(SIGKILL);
  return rc;
}
/* unlink() that kills the process after the Nth removal of an earlier run's row file (the
 * commit takes it away just before renaming the new one over its name) */
int unlink(const char *a) {
  static int (*real)(const char *);
  static int count;
  if (!real) real = (int (*)(const char *))dlsym(RTLD_NEXT, "unlink");
  int rc = real(a);
  const char *n = getenv("FP8LAB_TEST_KILL_AFTER_UNLINKS");
  const char *base = strrchr(a, '/');
  base = base ? base + 1 : a;
  if (n && rc == 0 && !strstr(a, "/.fp8lab-checkpoint/") &&
      (!strcmp(base, "histograms.csv") || !strcmp(base, "gemm.csv") ||
       !strcmp(base, "stream.csv") || !strcmp(base, "steps.csv")) &&
      ++count == atoi(n))
    raise(SIGKILL);
  return rc;
}
"""


def commit_kills(d, ref):
    """Kills inside the commit, which random moments hardly ever hit: a rename() shim
    (LD_PRELOAD) kills the run after the 1st and after the 4th (last) partial file renamed
    into place; --resume finishes the commit. Skipped without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        print("  commit kills: skipped (no C compiler)")
        return
    src, so = os.path.join(d, "shim.c"), os.path.join(d, "shim.so")
    write(src, SHIM)
    subprocess.run([cc, "-shared", "-fPIC", "-o", so, src, "-ldl"], check=True)
    out = os.path.join(d, "kout")
    # a sanitizer build's runtime wants to come first among the libraries: let the shim precede
    asan = (os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    # after the 1st and the 4th (last) rename of a partial file into place; then between the
    # removal of the earlier run's file and the rename of the new one over its name (the
    # commit over an earlier run, --force): the 1st (histograms.csv) and the 4th (steps.csv)
    for var, what in (("FP8LAB_TEST_KILL_AFTER_RENAMES", "renames"),
                      ("FP8LAB_TEST_KILL_AFTER_UNLINKS", "removals")):
        for n in (1, 4):
            env = dict(os.environ, LD_PRELOAD=so, ASAN_OPTIONS=asan)
            env[var] = str(n)
            p = subprocess.run([BIN, "run", "kt.ini", "--threads", "2", "--quiet", "--force"],
                               cwd=d, env=env, capture_output=True, text=True)
            assert p.returncode == -signal.SIGKILL, "exit %d: %s" % (p.returncode, p.stderr)
            assert ckpt_phase(out) == 2, "not killed in the commit"
            r = run(["run", "kt.ini", "--threads", "2", "--resume"], d, check=0)
            assert "resumed kout after step 30 of 30" in r.stderr, r.stderr
            problems = diff(ref, snapshot(out))
            assert not problems, "killed after %d %s in the commit: %s" % (n, what, problems)
    # no layer triplet: the commit drops gemm.csv (no rows) after histograms.csv's rename
    write(os.path.join(d, "ng.ini"), EXP.replace("synth:llm", "trace").replace(
        "dir = out", "dir = ngout").replace("[recipe.delayed]", "tensors = *.input, *.output\n"
                                                                "[recipe.delayed]"))
    ng = os.path.join(d, "ngout")
    run(["run", "ng.ini", "--threads", "2", "--quiet", "--no-report"], d, check=0)
    ref_ng = snapshot(ng)
    assert "gemm.csv" not in ref_ng
    env = dict(os.environ, LD_PRELOAD=so, FP8LAB_TEST_KILL_AFTER_RENAMES="2", ASAN_OPTIONS=asan)
    p = subprocess.run([BIN, "run", "ng.ini", "--threads", "2", "--quiet", "--no-report",
                        "--force"], cwd=d, env=env, capture_output=True, text=True)
    assert p.returncode == -signal.SIGKILL and ckpt_phase(ng) == 2, p.stderr
    run(["run", "ng.ini", "--threads", "2", "--no-report", "--resume"], d, check=0)
    problems = diff(ref_ng, snapshot(ng))
    assert not problems, "killed in a commit without gemm.csv: %s" % problems
    print("  commit kills: after the 1st and the 4th rename of the partial files, after the "
          "1st and the 4th removal of an earlier run's file, and in a commit without gemm.csv; "
          "resumed: byte-identical")


def test_ranks_resume(d, rng):
    """A three-rank trace with reduce_amax (the reduction over ranks in the replayed state, a
    mismatching amax.csv) killed twice and resumed with another --threads: the same CSVs, the
    same run.json but for the timestamps, threads and the engine's name."""
    try:
        import numpy  # noqa: F401  (tools/reference/gen_trace.py needs it)
    except ImportError:
        print("  ranks: skipped (no numpy)")
        return
    gen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                       "reference", "gen_trace.py")
    rd = os.path.join(d, "ranks")
    os.makedirs(rd)
    subprocess.run([sys.executable, gen, "trace", "--seed", "5", "--ranks", "3", "--ini",
                    "exp.ini", "--reduce-amax"], cwd=rd, check=True, capture_output=True)
    run(["run", "exp.ini", "--quiet", "--no-report", "--out", "o", "--threads", "2"], rd, check=0)

    def cut(snap):
        j = snap["run.json"]
        snap["run.json"] = re.sub(rb'("(?:threads|engine|name)": )"?cpu[^,\n]*|("threads": )\d+',
                                  rb"\1\2X", j)
        return snap
    ref = cut(snapshot(os.path.join(rd, "o")))
    done = []
    for _ in range(2):
        shutil.rmtree(os.path.join(rd, "o"))
        env = dict(os.environ, FP8LAB_TEST_STEP_DELAY_MS="15")
        p = subprocess.Popen([BIN, "run", "exp.ini", "--quiet", "--no-report", "--out", "o",
                              "--threads", "2", "--checkpoint-interval", "0"], cwd=rd, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ok = wait_for(lambda: os.path.exists(os.path.join(rd, "o", CKPT, "state")), p)
        time.sleep(rng.uniform(0.2, 0.9))
        assert kill(p) and ok, "the run ended before the kill"
        r = run(["run", "exp.ini", "--no-report", "--out", "o", "--threads", "3", "--resume"], rd,
                check=0)
        done.append(re.search(r"resumed o after step (\d+) of (\d+)", r.stderr).group(1, 2))
        problems = diff(ref, cut(snapshot(os.path.join(rd, "o"))))
        assert not problems, "ranks: %s" % problems
    print("  3 ranks, reduce_amax: resumed after steps %s of %s with --threads 3: byte-identical"
          % (" and ".join(s for s, _ in done), done[0][1]))


def test_npy_resume(d, rng):
    """The compact stream ([output] stream = npy, issue 27): killed twice mid-replay and
    resumed, stream.npy (cut back to the checkpoint's records) and stream.json byte-identical
    to a clean run's, and every other file."""
    nd = os.path.join(d, "npy")
    write(os.path.join(nd, "n.ini"), EXP.replace("dir = out", "dir = o\nstream = npy"))
    run(["run", "n.ini", "--quiet", "--no-report", "--threads", "2"], nd, check=0)
    ref = snapshot(os.path.join(nd, "o"))
    assert "stream.npy" in ref and "stream.json" in ref and "stream.csv" not in ref, sorted(ref)
    done = []
    for _ in range(2):
        shutil.rmtree(os.path.join(nd, "o"))
        env = dict(os.environ, FP8LAB_TEST_STEP_DELAY_MS="40")
        p = subprocess.Popen([BIN, "run", "n.ini", "--quiet", "--no-report", "--threads", "2",
                              "--checkpoint-interval", "0"], cwd=nd, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ok = wait_for(lambda: os.path.exists(os.path.join(nd, "o", CKPT, "state")), p)
        time.sleep(rng.uniform(0.1, 0.5))
        assert kill(p) and ok, "the run ended before the kill"
        r = run(["run", "n.ini", "--no-report", "--threads", "2", "--resume"], nd, check=0)
        done.append(re.search(r"resumed o after step (\d+) of (\d+)", r.stderr).group(1, 2))
        problems = diff(ref, snapshot(os.path.join(nd, "o")))
        assert not problems, "stream = npy: %s" % problems
    print("  stream = npy: resumed after steps %s of %s: byte-identical"
          % (" and ".join(s for s, _ in done), done[0][1]))


def write_tokens_trace(td, rng):
    """Two ranks, 40 steps, experts 0..3 of m.experts.*.up: expert 0 on both ranks (a replica),
    1 on rank 0, 2 and 3 on rank 1 (3 never gets a token); tokens per rank and step drawn from
    rng (0 a third of the time), expert 2 without a row at every fifth step. Returns the
    expected experts.csv, worked out here: per GEMM the steps with a row on some rank, those
    whose tokens summed over the ranks are > 0, their total, min and max."""
    held = {0: (0, 1), 1: (0, 2, 3)}
    per = {}  # (gemm, step) -> summed tokens
    for r, experts in held.items():
        amax, tok = ["step,tensor,amax"], ["step,gemm,tokens"]
        for step in range(40):
            for e in experts:
                g = "m.experts.%d.up" % e
                amax += ["%d,%s.input,%d" % (step, g, 1 + step % 7), "%d,%s.weight,2" % (step, g)]
                if e == 2 and step % 5 == 0:
                    continue
                n = 0 if e == 3 or rng.random() < 1 / 3 else rng.randrange(1, 500)
                tok.append("%d,%s,%d" % (step, g, n))
                per[(g, step)] = per.get((g, step), 0) + n
        write(os.path.join(td, "rank_%d" % r, "amax.csv"), "\n".join(amax) + "\n")
        write(os.path.join(td, "rank_%d" % r, "tokens.csv"), "\n".join(tok) + "\n")
    lines = ["gemm,group,expert,steps,steps_run,tokens,tokens_min,tokens_max"]
    for e in range(4):
        g = "m.experts.%d.up" % e
        vals = [per[(g, s)] for s in range(40) if (g, s) in per]
        ran = [v for v in vals if v > 0]
        lines.append("%s,m.experts.*.up,%d,%d,%d,%d,%s,%s" % (
            g, e, len(vals), len(ran), sum(ran), min(ran) if ran else "", max(ran) if ran else ""))
    return "\n".join(lines) + "\n"


def test_tokens_resume(d, rng):
    """experts.csv (issue 40) of a two-rank trace with tokens.csv: the rows worked out here,
    the same bytes after a kill and --resume; a changed tokens.csv refuses the resume (it is in
    the trace's fingerprint)."""
    td = os.path.join(d, "tok")
    expected = write_tokens_trace(os.path.join(td, "tr"), rng)
    write(os.path.join(td, "t.ini"), "[trace]\npath = tr\n[recipe.d]\nkind = delayed\n"
          "history_len = 1, 4\n[output]\ndir = o\n")
    run(["run", "t.ini", "--quiet", "--no-report", "--threads", "2"], td, check=0)
    ref = snapshot(os.path.join(td, "o"))
    assert ref.get("experts.csv", b"").decode() == expected, ref.get("experts.csv")
    shutil.rmtree(os.path.join(td, "o"))
    env = dict(os.environ, FP8LAB_TEST_STEP_DELAY_MS="40")
    p = subprocess.Popen([BIN, "run", "t.ini", "--quiet", "--no-report", "--threads", "2",
                          "--checkpoint-interval", "0"], cwd=td, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ok = wait_for(lambda: os.path.exists(os.path.join(td, "o", CKPT, "state")), p)
    time.sleep(rng.uniform(0.1, 0.5))
    assert kill(p) and ok, "the run ended before the kill"
    tok = os.path.join(td, "tr", "rank_1", "tokens.csv")
    st = os.stat(tok)
    os.utime(tok, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
    r = run(["run", "t.ini", "--no-report", "--resume", "--quiet"], td, check=2)
    assert r.stderr == ("fp8lab: o: the trace changed since the interrupted run started (a file "
                        "added, removed or rewritten): resume needs the same trace; start over "
                        "with --force\n"), r.stderr
    os.utime(tok, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = run(["run", "t.ini", "--no-report", "--threads", "2", "--resume"], td, check=0)
    done = re.search(r"resumed o after step (\d+) of (\d+)", r.stderr).group(1, 2)
    problems = diff(ref, snapshot(os.path.join(td, "o")))
    assert not problems, "tokens: %s" % problems
    print("  experts.csv of a 2-rank trace with tokens.csv: as worked out; resumed after step %s "
          "of %s: byte-identical; a changed tokens.csv refused" % done)


def main():
    global BIN
    BIN = os.path.abspath(sys.argv[1])
    t = time.time()
    with tempfile.TemporaryDirectory(prefix="fp8lab_resume_") as d:
        test_force_keeps_user_trace(d)
        test_debris(d)
        test_mixed_folder(d)
        test_force_after_report_kill(d)
        run(["run", "k.ini", "--threads", "2", "--quiet", "--force"], d, check=0)
        test_resume_errors(d)
        rng = random.Random(16)
        kill_test(d, rng)
        test_ranks_resume(d, rng)
        test_npy_resume(d, rng)
        test_tokens_resume(d, rng)
    print("test_resume: ok (%.1f s)" % (time.time() - t))


if __name__ == "__main__":
    main()
