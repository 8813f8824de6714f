#!/usr/bin/env python3
"""tools/te_tb_to_amax.py (issue 41, item 5): a damaged event file is exit 2, one line naming
the file and the byte offset of the record, nothing written; TensorBoard's EventFileLoader
itself stops at such a record silently (the DataLossError is logged at debug level).

The files are written by hand (tb_events.py), so each record's offset is known here: a file
of a version record and 4 events, 2 amaxes each; then
  - cut off inside record 3 (in its data): exit 2 "cut off", "byte <offset of record 3>";
  - a file still being written: its last record's length and CRC there, its data not yet:
    exit 2, the same words ("still being written");
  - one byte of record 2's data flipped (the CRC no longer matches): exit 2 "corrupt", its
    offset; the same for a byte of record 4's length field;
  - a record whose CRCs match bytes that are not an Event: exit 2 "not a TensorBoard event";
  - an event file that is a FIFO (a writer's pipe): exit 2 "not a regular file", at once;
  - the intact file: exit 0, the 8 rows.
Usage: test_te_tb_damaged.py FP8LAB_BIN (not used). Needs the tensorboard package (exit 77 without
it unless FP8LAB_REQUIRE_PYDEPS=1).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tb_events as TB  # noqa: E402
from tb_events import check  # noqa: E402

TB.need_tensorboard()
TAG = "model.fc1_%s_cur_amax"


def good_events():
    return [TB.event(step=s, scalars=[(TAG % "activation", 1.5 + s), (TAG % "weight", 0.25)])
            for s in range(4)]


def offsets(data):
    """The byte offset of each record of a well-formed file (the framing by hand)."""
    out, off = [], 0
    while off < len(data):
        out.append(off)
        off += 12 + int.from_bytes(data[off:off + 8], "little") + 4
    return out


def damaged(tmp, label, data, want, offset):
    d = os.path.join(tmp, "run_" + label)
    os.makedirs(d)
    path = os.path.join(d, "events.out.tfevents.1.h.1.0")
    with open(path, "wb") as f:
        f.write(data)
    out = os.path.join(tmp, "out_" + label)
    rc, so, se = TB.tool([out, d])
    check(rc == 2 and se.count("\n") == 1 and "Traceback" not in se,
          "%s: exit %d, %r" % (label, rc, se))
    check(path in se and ("the record at byte %d " % offset) in se and want in se,
          "%s: the line names %s, byte %d and %r: %r" % (label, path, offset, want, se))
    check(not os.path.exists(out) and not [n for n in os.listdir(tmp) if "fp8lab-" in n],
          "%s: nothing written" % label)


def case_intact(tmp):
    d = os.path.join(tmp, "intact")
    os.makedirs(d)
    TB.write_events(os.path.join(d, "events.out.tfevents.1.h.1.0"), good_events())
    rc, so, se = TB.tool([os.path.join(tmp, "out_intact"), d])
    check(rc == 0, "intact: exit %d %r" % (rc, se))
    with open(os.path.join(tmp, "out_intact", "amax.csv")) as f:
        want = "step,tensor,amax\n" + "".join(
            "%d,model.fc1.input,%s\n%d,model.fc1.weight,0.25\n" % (s, "%.9g" % (1.5 + s), s)
            for s in range(4))
        got = f.read()
        check(got == want, "intact amax.csv:\n%s" % got)


def case_truncated_mid_record(tmp):
    data = TB.events_bytes(good_events())
    off = offsets(data)
    check(len(off) == 5, "5 records: %s" % off)
    cut = off[3] + 12 + 10  # 10 bytes into record 3's data
    damaged(tmp, "cut", data[:cut], "cut off", off[3])


def case_still_being_written(tmp):
    # a writer that has flushed the next record's length and CRC only
    data = TB.events_bytes(good_events())
    extra = TB.record(TB.event(step=4, scalars=[(TAG % "activation", 9.0)]))
    damaged(tmp, "writing", data + extra[:12], "still being written", len(data))
    damaged(tmp, "writing_crc", data + extra[:-2], "still being written", len(data))


def case_corrupt_crc(tmp):
    data = bytearray(TB.events_bytes(good_events()))
    off = offsets(bytes(data))
    data[off[2] + 12 + 5] ^= 0x40  # in record 2's data: its CRC no longer matches
    damaged(tmp, "data_flip", bytes(data), "corrupt", off[2])
    data = bytearray(TB.events_bytes(good_events()))
    data[off[4] + 1] ^= 0x01  # record 4's length: its header CRC no longer matches
    damaged(tmp, "length_flip", bytes(data), "corrupt", off[4])


def case_not_an_event(tmp):
    data = TB.events_bytes(good_events())
    damaged(tmp, "garbage", data + TB.record(b"\xff\xff\xff\xff"), "not a TensorBoard event",
            len(data))


def case_fifo(tmp):
    d = os.path.join(tmp, "fifo_run")
    os.makedirs(d)
    os.mkfifo(os.path.join(d, "events.out.tfevents.1.h.1.0"))
    import subprocess
    try:
        p = subprocess.run([sys.executable, TB.TOOL, os.path.join(tmp, "out_fifo"), d],
                           capture_output=True, text=True, timeout=60)
        rc, se = p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        rc, se = None, "hung on the FIFO"
    check(rc == 2 and "not a regular file" in se and se.count("\n") == 1, "FIFO: %s %r" % (rc, se))
    check(not os.path.exists(os.path.join(tmp, "out_fifo")), "FIFO: nothing written")


def main():
    TB.run_cases("fp8lab-tb-damaged-", [case_intact, case_truncated_mid_record,
                                        case_still_being_written, case_corrupt_crc,
                                        case_not_an_event, case_fifo], "te tensorboard damaged")


if __name__ == "__main__":
    main()
