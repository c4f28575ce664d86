"""A submission's phases (nvgg/profiling/submission_phases.py) from synthetic child answers: a marked
kernel launched several times a call among other kernels, each launch's spans and the pooled ones,
the launches matched to their CUPTI records (the marks' share of the marked launches' kernel time,
never above 100%), the next call's launch i against this call's launch i, uneven counts and a
launch no CTA marked."""

import pytest

from nvgg.errors import NvggError
from nvgg.profiling import submission_phases as sp

MARKS = ["start", "first_row", "done"]
T0 = 1_700_000_000_000_000_000   # %globaltimer: ns since some origin of the GPU's
PERIOD = 700.0                   # µs from a call's launch i to the next call's launch i


def _launch(at_us, ctas=2, empty=False):
    """One decode launch starting `at_us` µs after T0: CTA c starts 0.1·c µs later, writes its first
    row 1 µs after its start and is done 4 µs after it (a 4.1 µs span over two CTAs)."""
    rows = []
    for c in range(ctas):
        start = T0 + int(at_us * 1e3) + 100 * c
        rows.append([0, 0, 0] if empty else [start, start + 1_000, start + 4_000])
    return {"kernel": "decode", "marks": MARKS, "rows": rows + [[0, 0, 0]]}


# the call: decode launches at 0, 200, 400, 600 µs (the host's launches between them are slow), a
# library GEMM after each that is launched as often and lasts longer, two elementwise kernels
AT = [0.0, 200.0, 400.0, 600.0]


def _records(decode_at=AT, shift=0.3, gemm_count=4):
    """CUPTI's records of the call: [name, µs, start µs from the first]; a decode kernel starts
    `shift` µs before its first mark (the clocks' origins differ; only differences count) and
    lasts 4.5 µs; the GEMM starts 1 µs after it ends and lasts 20 µs."""
    out = []
    for i, at in enumerate(decode_at):
        out.append(["decode_kernel(unsigned char const*, float*, nvgg_probes)", 4.5, at - shift])
        if i < gemm_count:
            out.append(["sm90_xmma_gemm_f32f32_tf32f32_f32", 20.0, at - shift + 5.5])
    out += [["elementwise_kernel", 2.0, 700.0], ["elementwise_kernel", 2.0, 702.5]]
    first = min(r[2] for r in out)
    return sorted(([n, us, start - first] for n, us, start in out), key=lambda r: r[2])


def _answers(launches, records, second=None):
    """The two children's answers (`child`): the marked one with the reported call and a pair of
    calls back to back, the plain one with kernel times only."""
    busy = 4 * (4.5 + 20.0) + 4.0
    second = second if second is not None else [_shifted(b, PERIOD) for b in launches]
    marked = {"checked": 3, "busy_us": [busy, busy + 1.0, busy + 2.0],
              "call": {"busy_us": busy, "kernels": records, "launches": launches}, "pair": [launches, second]}
    return marked, {"checked": 3, "busy_us": [busy - 1.0, busy, busy + 1.0]}


def _shifted(launch, us):
    return dict(launch, rows=[[t + int(us * 1e3) if t else 0 for t in row] for row in launch["rows"]])


def _run(launches, records, second=None):
    return sp.assemble("mine.py", "4", *_answers(launches, records, second))


def test_each_launch_its_spans_then_the_launches_pooled():
    run = _run([_launch(at) for at in AT], _records())
    (kernel,) = run.kernels
    assert [r.ctas for r in kernel.each] == [2, 2, 2, 2] and kernel.report.ctas == 8 and kernel.report.launches == 4
    for rep in kernel.each + [kernel.report]:
        by = {p.name: p for p in rep.phases}
        assert by["start → first_row"].median_us == pytest.approx(1.0)
        assert by["first_row → done"].median_us == pytest.approx(3.0)
    assert [m.span_us for m in run.marked] == [pytest.approx(4.1)] * 4 and [m.index for m in run.marked] == [0, 1, 2, 3]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in run.table().splitlines()
            if line.startswith("| decode") and "→" in line]
    assert [r[:3] for r in rows] == [["decode", launch, name] for launch in ("0", "1", "2", "3", "all 4")
                                     for name in ("start → first_row", "first_row → done")]
    assert rows[-1] == ["decode", "all 4", "first_row → done", "8", "3.000", "3.000"]


def test_the_marked_launches_are_told_from_a_library_kernel_launched_as_often():
    """The GEMM ran 4 times too and holds each decode launch's marks just as well in time order; the
    decode records hold them with the least time outside them, so they are the marked launches;
    the marks' share is of their 4 × 4.5 µs alone, never of the call's 800 µs of host gaps."""
    run = _run([_launch(at) for at in AT], _records())
    assert [m.record for m in run.marked] == ["decode_kernel(unsigned char const*, float*, nvgg_probes)"] * 4
    assert [m.cupti_us for m in run.marked] == [4.5] * 4 and run.notes == []
    assert run.call_marked_us == pytest.approx(4 * 4.1) and run.marked_cupti_us == pytest.approx(18.0)
    assert run.share == pytest.approx(4.1 / 4.5) and run.share <= 1
    assert ("the marks span 16.40 µs of the 18.00 µs kernel time of the 4 launch(es) they mark (CUPTI, 91.1%; the "
            "call's kernels: 102.00 µs)") in run.table()
    # the first reading to the last over the call is 600 µs: what the old report set against 102 µs
    assert max(m.first_us + m.span_us for m in run.marked) - min(m.first_us for m in run.marked) > 600


def test_a_span_past_its_record_by_less_than_a_tick_counts_as_the_record():
    """A 4.1 µs span in a 3.8 µs record (within the 1 µs tolerance: two clocks' ticks) is matched
    and counted as 3.8 µs: the share stays at or under 100%."""
    records = [[n, 3.8 if "decode" in n else us, start] for n, us, start in _records(shift=0.0)]
    run = _run([_launch(at) for at in AT], records)
    assert run.marked[0].record.startswith("decode_kernel") and run.share == pytest.approx(1.0)
    assert "100.0%" in run.table()


def test_records_whose_spacing_cannot_hold_the_marks_are_not_the_launches():
    """Launch 2's record starts 50 µs later than the marks allow for any one shift of the clocks, and
    no other name ran 4 times: nothing is matched, no share is guessed, and the report says why."""
    records = [[n, us, start + (50.0 if "decode" in n and 350 < start < 450 else 0.0)] for n, us, start in _records()]
    records = [r for r in records if "gemm" not in r[0]]
    run = _run([_launch(at) for at in AT], records)
    assert all(m.record is None for m in run.marked) and run.share is None
    assert run.notes == ["decode: no CUPTI kernel record of the call fits its 4 launch(es) (as many records of one "
                         "name, each holding its launch's marks): its marks are not set against a kernel time"]
    assert "the marks are set against no kernel time: no CUPTI record of the call was matched" in run.table()


def test_one_launch_of_a_kernel_among_sixteen_of_another():
    """Uneven counts: 16 decode launches and one `reduce` launch (its own probe) a call; each probe
    gets the records of the name that ran as often as it asked for buffers."""
    at = [40.0 * i for i in range(16)]
    reduce = {"kernel": "reduce", "marks": ["start", "done"],
              "rows": [[T0 + 700_000, T0 + 709_000], [0, 0]]}
    records = _records(decode_at=at, gemm_count=16) + [["reduce_kernel", 10.0, 699.5 + 0.3]]
    records.sort(key=lambda r: r[2])
    run = _run([_launch(a) for a in at] + [reduce], records)
    assert [k.kernel for k in run.kernels] == ["decode", "reduce"] and len(run.kernels[0].each) == 16
    assert {m.record.split("(")[0] for m in run.marked if m.kernel == "decode"} == {"decode_kernel"}
    assert [(m.record, m.cupti_us, m.index) for m in run.marked if m.kernel == "reduce"] == [("reduce_kernel", 10.0, 0)]
    assert run.share == pytest.approx((16 * 4.1 + 9.0) / (16 * 4.5 + 10.0))


def test_the_next_call_starts_against_the_same_launch_of_this_call():
    run = _run([_launch(at) for at in AT], _records())
    # launch i of the next call starts PERIOD µs after launch i of this one: 700 - 4.1 µs after its last mark
    starts = [m.next_call.start_earliest_us for m in run.marked]
    assert starts == [pytest.approx(PERIOD - 4.1)] * 4 and not any(m.next_call.overlap for m in run.marked)
    assert run.marked[0].next_call.start_median_us == pytest.approx(PERIOD - 4.05)
    assert run.behind is None
    assert ("its CTAs with work start at +695.90 µs (the earliest of each launch, by launch above) from "
            "the last mark of the same launch of this call: the calls do not overlap") in run.table()
    row = next(line for line in run.table().splitlines() if line.startswith("| decode   | 2 ") and "decode_kernel" in line)
    assert [c.strip() for c in row.strip("|").split("|")][3:] == ["4.500", "4.100", "91.1%", "+695.90 (median +695.95)"]


def test_overlapping_calls_are_judged_launch_by_launch():
    """The next call's launch 1 starts 1 µs before this call's launch 1 ends: overlap, said with the
    count of launches; the verdict reads no call-against-call figure (the kernel runs 4 times)."""
    second = [_shifted(_launch(at), PERIOD) for at in AT]
    second[1] = _shifted(_launch(AT[1]), 3.1)
    run = _run([_launch(at) for at in AT], _records(), second)
    assert run.marked[1].next_call.start_earliest_us == pytest.approx(-1.0) and run.marked[1].next_call.overlap
    assert "the calls overlap (1 of 4 launches start before the same launch of this call ends)" in run.table()
    assert run.behind is None


def test_uneven_launches_between_two_calls_and_a_launch_no_cta_marked():
    launches = [_launch(at, empty=(i == 2)) for i, at in enumerate(AT)]
    second = [_shifted(_launch(at), PERIOD) for at in AT[:3]]
    run = _run(launches, _records(), second)
    kernel = run.kernels[0]
    assert [r.ctas for r in kernel.each] == [2, 2, 0, 2] and kernel.report.ctas == 6
    assert "launch 2 of decode: no CTA reached any mark" in kernel.report.notes and not kernel.report.errors
    # the empty launch is matched in its place (the others fix the records) and spans nothing
    assert [m.record is not None for m in run.marked] == [True] * 4 and run.marked[2].first_us is None
    assert run.marked_cupti_us == pytest.approx(3 * 4.5) and run.call_marked_us == pytest.approx(3 * 4.1)
    assert [m.next_call is not None for m in run.marked] == [True, True, False, False]
    assert run.marked[2].next_call is None  # paired, but no CTA of this call's launch 2 marked anything
    assert run.notes == ["decode: of two calls back to back, the first launched it 4 times and the second 3: "
                         "launches past 3 have no next call to show"]
    table = run.table()
    assert "| decode   | 2        | (no CTA marked)" in table and "launch 2 of decode: no CTA reached any mark" in table
    empty = next(line for line in table.splitlines() if line.startswith("| decode   | 2 ") and "decode_kernel" in line)
    assert [c.strip() for c in empty.strip("|").split("|")][2:] == ["decode_kernel(…)", "4.500", "—", "—", "—"]
    doc = run.to_dict()
    assert [m["next_call"] is None for m in doc["marked_launches"]] == [False, False, True, True]
    assert len(doc["kernels"][0]["each_launch"]) == 4 and doc["share"] == pytest.approx(4.1 / 4.5)


def test_a_kernel_launched_once_keeps_the_call_against_the_call():
    """One launch a call: the next call's launch 0 against this call's is the call against the call
    (as before), with its first MMA; where it overlaps the verdict reads it."""
    marks = ["start", "first_mma", "done"]
    one = {"kernel": "gemm", "marks": marks, "rows": [[T0, T0 + 2_000, T0 + 50_000], [0, 0, 0]]}
    overlapping = _shifted(one, 49.0)
    marked, plain = _answers([one], [["gemm_kernel", 50.5, 0.0]], [overlapping])
    run = sp.assemble("mine.py", "3", marked, plain)
    assert run.marked[0].record == "gemm_kernel" and run.share == pytest.approx(50.0 / 50.5)
    assert run.behind is run.marked[0].next_call and run.behind.start_earliest_us == pytest.approx(-1.0)
    assert "start at -1.00 µs (earliest; median -1.00), first MMA at +1.00 µs (median)" in run.table()
    trace = run.trace()
    assert [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"] == ["gemm (launch 0)"]


def test_a_call_without_marks_is_refused():
    with pytest.raises(NvggError, match="no mark was written"):
        _run([_launch(at, empty=True) for at in AT], _records())


def test_readings_keep_their_nanoseconds():
    """%globaltimer reads near Unix time in ns (about 1.8e18): launches are placed from the call's
    first reading in integer ns, not as µs doubles (which keep quarter microseconds there)."""
    at = 1_764_000_000_123_456_789
    one = {"kernel": "k", "marks": ["start", "done"], "rows": [[at, at + 1_130], [0, 0]]}
    two = dict(one, rows=[[at + 5_010, at + 6_020], [0, 0]])
    assert [(m.first_us, m.span_us) for m in sp.marked_launches([one, two])] == [(0.0, 1.13), (5.01, 1.01)]
