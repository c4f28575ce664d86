import pytest

from nvgg.profiling.cupti import Activity, per_call, summarize


def test_summary_of_overlapping_and_gapped_activities():
    acts = [Activity("a", "kernel", 0, 10_000), Activity("b", "kernel", 5_000, 12_000), Activity("c", "kernel", 20_000, 23_000)]
    s = summarize(acts)
    assert s.activities == 3
    assert s.busy_us == 15.0 and s.sum_us == 20.0 and s.span_us == 23.0 and s.idle_us == 8.0


def test_summary_of_nothing():
    assert summarize([]).span_us == 0.0


def test_per_call_columns_add_up_for_one_kernel_a_call():
    # one 38.3 µs kernel a call (the example that once printed 173 µs of "gaps"): no gaps in a call
    calls = [[Activity("gemm", "kernel", t, t + 38_300)] for t in (0, 100_000, 250_000)]
    cu = per_call(calls, event_us=40.0)
    assert cu["calls"] == 3 and cu["activities"] == 1 and cu["gaps_us"] == 0.0 and cu["gaps_shown"]
    assert cu["kernel_us"] == pytest.approx(38.3) and cu["host_overhead_us"] == pytest.approx(1.7)
    assert cu["kernels"] == [{"name": "gemm", "per_call": 1.0, "mean_us": pytest.approx(38.3)}]


def test_per_call_hides_gaps_that_tracing_inflated():
    # two kernels a call, 10 µs apart under tracing, but the untraced call spends only 2 µs outside them
    calls = [[Activity("expand", "kernel", 0, 5_000), Activity("gemm", "kernel", 15_000, 35_000)]] * 2
    cu = per_call(calls, event_us=27.0)
    assert cu["activities"] == 2 and cu["gaps_us"] == pytest.approx(10.0) and not cu["gaps_shown"]
    assert "tracing slows the launches" in cu["gaps_note"] and cu["host_overhead_us"] == pytest.approx(2.0)
    assert [k["name"] for k in cu["kernels"]] == ["gemm", "expand"]  # by total time
    shown = per_call(calls, event_us=40.0)
    assert shown["gaps_shown"] and shown["gaps_note"] == "" and shown["host_overhead_us"] == pytest.approx(15.0)
    with pytest.raises(ValueError):
        per_call([], 1.0)


def test_per_call_says_when_untraced_calls_overlap_their_kernels():
    # a 20 µs kernel traced alone, 17.6 µs a call back to back: programmatic launches overlap
    calls = [[Activity("gemm", "kernel", t, t + 20_000)] for t in (0, 100_000)]
    cu = per_call(calls, event_us=17.6)
    assert cu["host_overhead_us"] == pytest.approx(-2.4) and cu["gaps_shown"]
    assert cu["gaps_note"] == ("host and launch -2.4 µs: untraced, the calls' kernels overlap "
                               "(programmatic launches start behind the call before)")
