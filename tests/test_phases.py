import json

import pytest

from nvgg.kernels.sm90.phase_slots import SM90 as L, SM90_CHUNKS
from nvgg.profiling import phases as ph


def _row(start, desc, p0, a_ready, mma, main, epi, end, switches=(), b_issued=0, b_landed=0):
    row = [0] * L.slots
    row[L.START], row[L.DESC_READY], row[L.FIRST_MMA] = start, desc, mma
    row[L.PHASE0_DONE], row[L.A_READY] = p0, a_ready
    row[L.B_ISSUED], row[L.B_LANDED] = b_issued, b_landed
    row[L.MAINLOOP_DONE], row[L.EPILOGUE_DONE], row[L.EXIT] = main, epi, end
    row[L.SWITCHES] = len(switches)
    for i, t in enumerate(switches):
        row[L.FIRST_SWITCH + i] = t
    return row


BUFFER = [
    _row(1_000, 3_000, 2_500, 4_000, 5_000, 95_000, 99_000, 100_000, switches=(40_000,), b_issued=3_500,
         b_landed=4_800),
    _row(2_000, 6_000, 4_000, 7_000, 12_000, 90_000, 96_000, 98_000, b_issued=6_500, b_landed=11_000),
    [1_500, 0, 0, 0, 0, 2_500] + [0] * (L.slots - 6),   # a CTA that found no tile
]


def test_phase_statistics_by_hand():
    rep = ph.analyse(BUFFER, L)
    assert (rep.ctas, rep.ctas_with_work) == (3, 2)
    assert rep.kernel_us == pytest.approx(99.0)
    by = {p.name: p for p in rep.phases}
    assert by["tensor maps"].median_us == pytest.approx(3.0) and by["tensor maps"].max_us == pytest.approx(4.0)
    assert by["phase 0"].median_us == pytest.approx(1.75) and by["phase 0"].max_us == pytest.approx(2.0)
    # the producer's wait, from its maps to its first tile's A rows: 3.0 -> 4.0 and 6.0 -> 7.0
    assert by["wait for A rows"].median_us == pytest.approx(1.0) and by["wait for A rows"].max_us == pytest.approx(1.0)
    # from the later of the A rows and the CTA's own phase 0: 4.0 -> 5.0 and 7.0 -> 12.0
    assert by["to first MMA"].median_us == pytest.approx(3.0) and by["to first MMA"].max_us == pytest.approx(5.0)
    assert by["mainloops"].max_us == pytest.approx(90.0)
    # the first B copy issued 2.5 and 4.5 after the start, its stage seen 3.8 and 9.0 after
    assert by["to first B copy"].median_us == pytest.approx(3.5) and by["to first B copy"].max_us == pytest.approx(4.5)
    assert by["to first B stage seen"].median_us == pytest.approx(6.4)
    assert by["to first B stage seen"].max_us == pytest.approx(9.0)
    # the plain layout has no helpers: no span to a copied A stage
    assert "to first copied A stage" not in by and "to first copied A stage" in [p[0] for p in SM90_CHUNKS.phases]
    assert rep.time_to_first_mma_us == pytest.approx((4.0 + 10.0) / 2)
    assert rep.setup_share == pytest.approx((4 / 99 + 10 / 96) / 2)
    assert rep.switches_median == 0


def test_chrome_trace_has_one_track_per_cta_and_the_switches():
    trace = json.loads(json.dumps(ph.chrome_trace(BUFFER, L)))
    events = trace["traceEvents"]
    assert {e["tid"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"} == {0, 1, 2}
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == 2 * len(L.phases)
    first = next(e for e in complete if e["tid"] == 0 and e["name"] == "tensor maps")
    assert first["ts"] == 0.0 and first["dur"] == 2.0
    switches = [e for e in events if e["ph"] == "i"]
    assert len(switches) == 1 and switches[0]["ts"] == pytest.approx(39.0)


def test_a_buffer_too_narrow_is_refused():
    with pytest.raises(ValueError, match=f"at least {L.FIRST_SWITCH} slots"):
        ph.analyse([[1, 2, 3]], L)


def test_sm100_phases_by_hand_and_named_for_the_map_mode():
    from nvgg.kernels.sm100.phase_slots import SM100, sm100_for

    def row(start, bars, tmem, maps, issued, landed, mma, main, epi, end, switches=()):
        r = [0] * SM100.slots
        for slot, t in zip(("START", "BARRIERS_READY", "TMEM_READY", "MAPS_READY", "FIRST_TMA_ISSUED",
                            "FIRST_TMA_LANDED", "FIRST_MMA", "MAINLOOP_DONE", "EPILOGUE_DONE", "EXIT"),
                           (start, bars, tmem, maps, issued, landed, mma, main, epi, end)):
            r[getattr(SM100, slot)] = t
        r[SM100.SWITCHES] = len(switches)
        for i, t in enumerate(switches):
            r[SM100.FIRST_SWITCH + i] = t
        return r

    leader = row(1_000, 1_400, 1_600, 1_900, 2_000, 2_800, 3_000, 20_000, 21_000, 21_500, switches=(1_900, 9_000))
    # the other CTA of a pair issues no MMA: it counts as a CTA without work
    peer = row(1_100, 1_500, 1_700, 2_000, 2_100, 0, 0, 0, 21_000, 21_600)
    host = sm100_for("host")
    rep = ph.analyse([leader, peer], host)
    by = {p.name: p for p in rep.phases}
    assert (rep.ctas, rep.ctas_with_work) == (2, 1)
    assert by["barrier init"].median_us == pytest.approx(0.4) and by["tensor-memory alloc"].median_us == pytest.approx(0.2)
    assert by["map prefetch"].median_us == pytest.approx(0.5) and "map replace" not in by
    assert by["first TMA landing"].median_us == pytest.approx(0.8)
    assert by["to first MMA"].median_us == pytest.approx(2.0) and rep.time_to_first_mma_us == pytest.approx(2.0)
    assert by["main loops"].median_us == pytest.approx(17.0) and by["exit"].median_us == pytest.approx(0.5)
    assert rep.switches_median == 1.0  # the leader's 2, the peer's 0
    assert [p[0] for p in sm100_for("device").phases][2] == "map replace"
    assert sm100_for("device").slots == SM100.slots and sm100_for("device").FIRST_MMA == SM100.FIRST_MMA
    trace = ph.chrome_trace([leader, peer], host)
    assert sum(e["ph"] == "i" for e in trace["traceEvents"]) == 2


# --- a user's probe: consecutive marks, an overflow row, several launches ----------------------

def _probe_layout():
    from nvgg.kernels.phase_slots import SlotLayout
    return SlotLayout.for_probe("my_gemm", ("start", "maps_ready", "first_mma", "done"))


PROBED = [
    [1_000, 2_000, 3_000, 50_000],     # a CTA that reached every mark
    [1_200, 2_600, 0, 13_000],         # no first MMA, yet a later mark: 'first_mma' skipped
    [1_100, 4_000, 3_500, 40_000],     # its first MMA stamped before its maps: out of order
    [0, 0, 0, 0],                      # a row no CTA wrote
    [0, 0, 0, 0],                      # the overflow row: no CTA past the rows
]


def test_probe_spans_run_between_consecutive_marks():
    layout = _probe_layout()
    assert [p[0] for p in layout.phases] == ["start → maps_ready", "maps_ready → first_mma", "first_mma → done"]
    rep = ph.analyse(PROBED, layout)
    assert (rep.ctas, rep.ctas_with_work, rep.launches, rep.overflow_ctas) == (3, 2, 1, 0)
    by = {p.name: p for p in rep.phases}
    # every CTA that has both marks counts, work or not: 1.0, 1.4, 2.9 µs
    assert by["start → maps_ready"].ctas == 3 and by["start → maps_ready"].median_us == pytest.approx(1.4)
    assert by["start → maps_ready"].max_us == pytest.approx(2.9)
    # CTA 2's negative span is left out and said so
    assert by["maps_ready → first_mma"].ctas == 1 and by["maps_ready → first_mma"].median_us == pytest.approx(1.0)
    assert by["first_mma → done"].median_us == pytest.approx((47.0 + 36.5) / 2)
    # from each working CTA's first reading: 2.0 and 2.4 µs; of 49.0 and 38.9 µs
    assert rep.time_to_first_mma_us == pytest.approx(2.2)
    assert rep.setup_share == pytest.approx((2.0 / 49.0 + 2.4 / 38.9) / 2)
    assert rep.kernel_us == pytest.approx(49.0)
    assert rep.notes == ("1 of 4 buffer rows hold no mark (CTAs that returned before their first mark, or rows past the grid)",
                         "'first_mma' skipped by 1 of 3 CTAs that reached a later mark",
                         "'first_mma' came before 'maps_ready' in 1 CTAs (left out of 'maps_ready → first_mma')")
    assert rep.timer_step_ns == 100


def test_probe_without_a_first_mma_mark_has_no_time_to_it():
    from nvgg.kernels.phase_slots import SlotLayout
    layout = SlotLayout.for_probe("plain", ("start", "done"))
    rep = ph.analyse([[1_000, 5_000], [2_000, 4_000], [0, 0]], layout)
    assert rep.time_to_first_mma_us is None and rep.ctas_with_work == 2 and rep.setup_share == 0.0
    assert rep.kernel_us == pytest.approx(4.0) and rep.notes == ()


def test_ctas_that_return_early_are_counted_by_their_last_mark():
    layout = _probe_layout()
    full = [1_000, 2_000, 3_000, 9_000]
    rows = [full, full, [1_100, 0, 0, 0], [1_200, 0, 0, 0], [1_300, 2_100, 0, 0], [0, 0, 0, 0]]
    rep = ph.analyse(rows, layout)
    assert rep.notes == ("2 of 5 CTAs marked nothing after 'start' (returned early, no tile?)",
                         "1 of 5 CTAs marked nothing after 'maps_ready' (returned early, no tile?)")
    assert rep.ctas_with_work == 2 and {p.name: p.ctas for p in rep.phases}["start → maps_ready"] == 3


def test_ctas_past_the_buffer_are_counted_not_written():
    layout = _probe_layout()
    # a launch of 6 CTAs given a buffer of 4 rows: CTAs 4 and 5 raised the overflow row to 6
    rows = [[1_000 + i, 2_000, 3_000, 9_000] for i in range(4)] + [[6, 6, 6, 6]]
    rep = ph.analyse(rows, layout)
    assert rep.overflow_ctas == 2 and rep.ctas == 4
    assert "my_gemm: CTAs up to index 5 marked but its buffer holds 4: the marks of 2 CTAs are lost" in rep.notes[-1]
    # a kernel told the buffer holds one row more (its last CTA wrote a time into the overflow row)
    rows = [[1_000 + i, 2_000, 3_000, 9_000] for i in range(4)] + [[1_700_000_000_000_000_000, 0, 0, 0]]
    rep = ph.analyse(rows, layout)
    assert rep.overflow_ctas == 0 and rep.errors == (
        "my_gemm: its overflow row holds a time, not a CTA count: the kernel was told the buffer holds 5 rows, one too "
        "many (pass rows = size(0) - 1)",)


def test_several_launches_of_one_kernel_make_one_report_and_trace_side_by_side():
    layout = _probe_layout()
    first = [[1_000, 2_000, 3_000, 11_000], [0, 0, 0, 0]]
    second = [[20_000, 21_000, 23_000, 40_000], [20_500, 21_000, 22_000, 30_000], [0, 0, 0, 0]]
    rep = ph.analyse_launches([first, second], layout)
    assert (rep.launches, rep.ctas) == (2, 3)
    assert rep.kernel_us == pytest.approx((10.0 + 20.0) / 2)  # the median of the launches' spans
    trace = ph.chrome_trace_launches([("my_gemm (launch 0)", first, layout), ("my_gemm (launch 1)", second, layout)])
    events = trace["traceEvents"]
    assert [e["args"]["name"] for e in events if e["name"] == "process_name"] == ["my_gemm (launch 0)", "my_gemm (launch 1)"]
    assert {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"} == {(0, 0), (1, 0), (1, 1)}
    marks = [e for e in events if e["ph"] == "i"]
    assert len(marks) == 12 and min(e["ts"] for e in marks) == 0.0
    span = next(e for e in events if e["ph"] == "X" and e["pid"] == 1 and e["tid"] == 1 and e["name"] == "first_mma → done")
    assert span["ts"] == pytest.approx(21.0) and span["dur"] == pytest.approx(8.0)


def test_a_probe_buffer_of_the_wrong_width_is_refused():
    with pytest.raises(ValueError, match="rows of 4 columns"):
        ph.analyse([[1, 2, 3], [0, 0, 0]], _probe_layout())


def test_a_call_of_several_kernels_makes_one_report_a_kernel_in_launch_order():
    from nvgg.profiling.submission_phases import kernels_of
    expand = {"kernel": "expand", "marks": ["start", "exit"], "rows": [[1_000, 4_000], [1_100, 4_500], [0, 0]]}
    gemm = {"kernel": "gemm", "marks": ["start", "first_mma", "exit"]}
    launches = [expand, dict(gemm, rows=[[5_000, 6_000, 20_000], [0, 0, 0]]),
                dict(gemm, rows=[[21_000, 23_000, 30_000], [0, 0, 0]])]   # one gemm launch a group
    kernels = kernels_of(launches)
    assert [(k.kernel, k.report.launches, k.report.ctas) for k in kernels] == [("expand", 1, 2), ("gemm", 2, 2)]
    assert kernels[0].report.time_to_first_mma_us is None and kernels[0].report.kernel_us == pytest.approx(3.5)
    gemm_rep = kernels[1].report
    assert gemm_rep.time_to_first_mma_us == pytest.approx(1.5) and gemm_rep.kernel_us == pytest.approx(12.0)
    assert {p.name: p.median_us for p in gemm_rep.phases} == {"start → first_mma": pytest.approx(1.5),
                                                               "first_mma → exit": pytest.approx(10.5)}


def test_a_launch_behind_another_against_the_first_ones_last_reading():
    layout = _probe_layout()
    first = [[1_000, 2_000, 3_000, 50_000], [1_100, 2_100, 3_100, 48_000], [0, 0, 0, 0]]
    # the second call: one CTA starts before the first's last mark (overlap), one CTA has no tile
    second = [[49_000, 50_500, 52_000, 90_000], [50_400, 51_000, 53_000, 91_000], [49_500, 0, 0, 0], [0, 0, 0, 0]]
    b = ph.behind([(first, layout)], [(second, layout)])
    assert (b.start_earliest_us, b.start_median_us) == (pytest.approx(-1.0), pytest.approx(-0.3))
    assert (b.first_mma_median_us, b.first_mma_max_us) == (pytest.approx(2.5), pytest.approx(3.0))
    assert b.overlap and ph.behind([(first, layout)], [([[0, 0, 0, 0], [0, 0, 0, 0]], layout)]) is None
    # ours: the same from START and FIRST_MMA, as profile --phases measures programmatic launches
    # ours: the same from START and FIRST_MMA (profile --phases, programmatic launches); the first
    # launch's last reading is 100.0 µs, the second's CTAs start 0.5 µs before it
    shifted = [[t + 98_500 if t else 0 for t in row] for row in BUFFER]
    ours = ph.behind([(BUFFER, L)], [(shifted, L)])
    assert (ours.start_earliest_us, ours.start_median_us) == (pytest.approx(-0.5), pytest.approx(0.0))
    assert (ours.first_mma_median_us, ours.first_mma_max_us) == (pytest.approx(7.0), pytest.approx(10.5))
