#!/usr/bin/env python3
"""tools/te_tb_to_amax.py (issue 41, item 6): tensor names and steps by amax.csv's rules.

  - tags that give the names `../../x.input`, `/abs.input`, a control character, a comma, a
    name over 200 bytes, and an event at step -5: exit 2, one line naming the event file and
    the tag, nothing written (they imported with exit 0 before, and `fp8lab run` then failed);
  - the tool's rules are fp8lab's: a table of names (path segments, '..' in its places, empty
    components, control characters C0 and C1, UTF-8 of 2-4 bytes, 200 and 201 bytes, commas,
    spaces) and steps (-5, -1, 0, 1, 2^63 - 1), each through the tool (as a tag
    `<layer>_activation_cur_amax`, whose tensor is `<layer>.input`) and, as an amax.csv row,
    through `fp8lab inspect` (argv[1]): both accept or both refuse (the tool's main() run in
    this interpreter, the bad tags above on the command line); the same table (with names
    that do not end in `.input`, and step 2^63, which an event cannot hold) through the tool's
    rule functions against `fp8lab inspect`.
Usage: test_te_tb_rules.py FP8LAB_BIN. Needs the tensorboard package (exit 77 without it unless
FP8LAB_REQUIRE_PYDEPS=1).
"""
import os
import subprocess
import sys

BIN = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tb_events as TB  # noqa: E402
from tb_events import check  # noqa: E402

TB.need_tensorboard()


def tool_on(tmp, label, tag, step=0, extra=(), mod=None):
    d = os.path.join(tmp, "ev_" + label)
    os.makedirs(d)
    path = os.path.join(d, "events.out.tfevents.1.h.1.0")
    TB.write_events(path, [TB.event(step=0, scalars=[("ok.fc1_weight_cur_amax", 1.0)]),
                           TB.event(step=step, scalars=[(tag, 2.0)])] + list(extra))
    out = os.path.join(tmp, "out_" + label)
    if mod:  # in this interpreter
        rc, se = TB.run_main(mod, [out, d])
    else:
        rc, so, se = TB.tool([out, d])
    return rc, se, path, out


def inspect_row(tmp, label, name, step=0):
    """fp8lab inspect's exit status on an amax.csv holding the row (step, name, 2)."""
    d = os.path.join(tmp, "csv_" + label)
    os.makedirs(d)
    with open(os.path.join(d, "amax.csv"), "wb") as f:
        f.write(b"step,tensor,amax\n0,ok.fc1.weight,1\n%d,%s,2\n" % (step, name.encode()))
    p = subprocess.run([BIN, "inspect", d], capture_output=True)
    check(p.returncode in (0, 2), "inspect %r: exit %d %r" % (name, p.returncode, p.stderr))
    return p.returncode


def case_bad_tags(tmp):
    for label, tag, step, want in [
            ("dotdot", "../../x_activation_cur_amax", 0, "'..' path segment"),
            ("abs", "/abs_activation_cur_amax", 0, "starts with '/'"),
            ("control", "a\x01b_activation_cur_amax", 0, "control character"),
            ("comma", "a,b_activation_cur_amax", 0, "comma"),
            ("long", "L" * 195 + "_activation_cur_amax", 0, "201 bytes long"),
            ("negative", "neg.fc1_activation_cur_amax", -5, "step -5 is negative"),
            ("stat_name", "a.fc1_activation_x\x85y", 0, "the statistic name")]:
        rc, se, path, out = tool_on(tmp, label, tag, step)
        check(rc == 2 and se.count("\n") == 1 and path in se and repr(tag) in se and want in se,
              "%s: exit %d %r" % (label, rc, se))
        check(not os.path.exists(out) and not [n for n in os.listdir(tmp) if "fp8lab-" in n],
              "%s: nothing written" % label)


NAMES = ["a.fc1", "a/b/c", "a//b", "a/", "./a", "a/./b", "..", "../../x", "a/..", "a/../b",
         "..a", "a..", "a/..b", "...", "/abs", "//x", " lead", "trail ", "a b", "\u00e9t\u00e9",
         "\u4e2d", "\U0001f600", "a\tb", "a\x01", "a\x7f", "a\u0085", "a\u009f", "a\u00a0",
         "a,b", "a\"b", "a;b", "L" * 194, "L" * 195, "\u00e9" * 97, "\u00e9" * 98,
         "\u4e2d" * 64 + "ab", "\u4e2d" * 65, ""]
STEPS = [-5, -1, 0, 1, 7, 2 ** 63 - 1]


def case_same_rules_as_amax_csv(tmp):
    mod = TB.load_tool()
    n = agree = 0
    # end to end: the tag's layer, whose tensor is <layer>.input
    for k, layer in enumerate(NAMES):
        if not layer:
            continue  # "_activation_cur_amax" is not a TE statistic's name: no tensor
        name = layer + ".input"
        rc, se, _, _ = tool_on(tmp, "n%d" % k, layer + "_activation_cur_amax", mod=mod)
        ins = inspect_row(tmp, "n%d" % k, name)
        n += 1
        agree += (rc == 0) == (ins == 0)
        check((rc == 0) == (ins == 0) and rc in (0, 2),
              "name %r: the tool exit %d (%s), fp8lab inspect exit %d" % (name, rc, se.strip(),
                                                                         ins))
    for k, step in enumerate(STEPS):
        rc, se, _, _ = tool_on(tmp, "s%d" % k, "st.fc1_activation_cur_amax", step, mod=mod)
        ins = inspect_row(tmp, "s%d" % k, "st.fc1.input", step)
        n += 1
        agree += (rc == 0) == (ins == 0)
        check((rc == 0) == (ins == 0), "step %d: the tool exit %d (%s), fp8lab inspect exit %d"
              % (step, rc, se.strip(), ins))
    # the rule functions, on names and a step no event can give
    for k, name in enumerate(NAMES):
        ins = inspect_row(tmp, "f%d" % k, name)
        mine = getattr(mod, "name_problem", lambda s: "no rule")(name)
        check((mine is None) == (ins == 0), "name_problem(%r) = %r, fp8lab inspect exit %d"
              % (name, mine, ins))
    for k, step in enumerate(STEPS + [2 ** 63]):
        ins = inspect_row(tmp, "g%d" % k, "st.fc1.input", step)
        mine = getattr(mod, "step_problem", lambda s: "no rule")(step)
        check((mine is None) == (ins == 0), "step_problem(%d) = %r, fp8lab inspect exit %d"
              % (step, mine, ins))
    print("%d names and steps end to end: the tool and fp8lab inspect agreed on %d" % (n, agree))


def main():
    TB.run_cases("fp8lab-tb-rules-", [case_bad_tags, case_same_rules_as_amax_csv],
                 "te tensorboard name rules")


if __name__ == "__main__":
    main()
