import json

import pytest

from nvgg.kernels.phase_slots import SM90 as L
from nvgg.profiling import phases as ph


def _row(start, desc, p0, a_ready, mma, main, epi, end, switches=()):
    row = [0] * L.slots
    row[L.START], row[L.DESC_READY], row[L.FIRST_MMA] = start, desc, mma
    row[L.PHASE0_DONE], row[L.A_READY] = p0, a_ready
    row[L.MAINLOOP_DONE], row[L.EPILOGUE_DONE], row[L.EXIT] = main, epi, end
    row[L.SWITCHES] = len(switches)
    for i, t in enumerate(switches):
        row[L.FIRST_SWITCH + i] = t
    return row


BUFFER = [
    _row(1_000, 3_000, 2_500, 4_000, 5_000, 95_000, 99_000, 100_000, switches=(40_000,)),
    _row(2_000, 6_000, 4_000, 7_000, 12_000, 90_000, 96_000, 98_000),
    [1_500, 0, 0, 0, 0, 2_500] + [0] * (L.slots - 6),   # a CTA that found no tile
]


def test_phase_statistics_by_hand():
    rep = ph.analyse(BUFFER)
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
    assert rep.time_to_first_mma_us == pytest.approx((4.0 + 10.0) / 2)
    assert rep.setup_share == pytest.approx((4 / 99 + 10 / 96) / 2)
    assert rep.switches_median == 0


def test_chrome_trace_has_one_track_per_cta_and_the_switches():
    trace = json.loads(json.dumps(ph.chrome_trace(BUFFER)))
    events = trace["traceEvents"]
    assert {e["tid"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"} == {0, 1, 2}
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == 2 * len(L.phases)
    first = next(e for e in complete if e["tid"] == 0 and e["name"] == "tensor maps")
    assert first["ts"] == 0.0 and first["dur"] == 2.0
    switches = [e for e in events if e["ph"] == "i"]
    assert len(switches) == 1 and switches[0]["ts"] == pytest.approx(39.0)


def test_a_buffer_too_narrow_is_refused():
    with pytest.raises(ValueError, match="at least 9 slots"):
        ph.analyse([[1, 2, 3]])


def test_sm100_phases_by_hand_and_named_for_the_map_mode():
    from nvgg.kernels.phase_slots import SM100, sm100_for

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
