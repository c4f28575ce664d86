"""Flags on a measured time not to take at its word (nvgg/flags.py): below the speed of light, work
escaping the events (suspect: the command fails), the card throttled (caution)."""

from nvgg import clocks, timing
from nvgg.flags import flags_of
from nvgg.result import Result


def _result(mean_us, escaped_us=None, batch=15, sol_us=10.0, clocks_summary=None):
    from nvgg.sol import Sol
    stats = timing.Stats(runs=10, batch=batch, mean_us=mean_us, std_us=0.1, err_us=0.03, best_us=mean_us,
                         worst_us=mean_us, median_us=mean_us, method="leaderboard", clock="cuda events",
                         escaped_us=escaped_us)
    sol = Sol(case="3", profile="h100", data_path="fp16", bytes=1, flops=1, memory_us=sol_us, compute_us=1.0,
              sol_us=sol_us, bound="memory")
    return Result(case="3", strategy="submission", backend="submission", status="ok", stats=stats, sol=sol,
                  clocks=clocks_summary or {})


def test_a_time_below_the_speed_of_light_is_suspect():
    r = _result(0.109)
    r.flags = flags_of(r)
    assert [f.kind for f in r.flags] == ["below-sol"] and r.suspect and not r.trusted
    assert "0.109 µs < 10.000 µs on h100" in r.flags[0].text
    from nvgg import verdict
    assert verdict.judge(r).kind == "below-sol"
    from nvgg.report import check_text
    from nvgg.report.results import geomeans
    assert check_text(r).startswith("SUSPECT: time below the speed of light")
    assert geomeans([r], {"3"}) == {}


def test_work_escaping_the_events_is_suspect_and_a_sync_is_not():
    # honest: a device synchronise after the end event takes ~10 µs a batch (0.7 µs a call), and
    # a torch submission's up to ~80 µs of a batch of milliseconds
    assert flags_of(_result(100.0, escaped_us=0.7)) == []
    assert flags_of(_result(2000.0, escaped_us=5.5)) == []
    # our kernel left on a side stream on case 3: 68 µs of a 368 µs batch
    assert [f.kind for f in flags_of(_result(24.5, escaped_us=4.5, sol_us=13.0))] == ["escaped"]
    # 15 calls of ~100 µs left on another stream: the device runs ~1.5 ms past the end event
    flags = flags_of(_result(12.0, escaped_us=95.0))
    assert [f.kind for f in flags] == ["escaped"] and "1425.0 µs a batch" in flags[0].text


def test_throttled_samples_flag_the_row_with_reason_and_range():
    samples = [{"t": i * 0.05, "sm_mhz": mhz, "mem_mhz": 2619, "temp_c": 60 + i, "power_w": 690.0, "reasons": reasons}
               for i, (mhz, reasons) in enumerate([(1755, 0x1), (1410, 0x4), (1530, 0x4 | 0x1), (1755, 0)])]
    summary = clocks.summarise(samples)
    assert summary["sm_mhz"] == [1410, 1642.5, 1755] and summary["reasons"] == ["power cap"]
    assert summary["throttled"] == "throttled: power cap, SM clock 1410-1755 MHz in 50% of the samples while timed"
    r = _result(100.0, clocks_summary=summary)
    r.flags = flags_of(r)
    assert [f.kind for f in r.flags] == ["throttled"] and not r.suspect and not r.trusted
    # idle and application-clock reasons are settings, not throttling
    calm = clocks.summarise([dict(s, reasons=0x1 | 0x2) for s in samples])
    assert calm["throttled"] == "" and calm["reasons"] == []
