import pytest
import torch

from nvgg.cupti import Activity, per_call, summarize


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


def test_each_call_is_recorded_alone_after_an_l2_flush(monkeypatch):
    """`calls`: L2 flushed and the device waited for before each call's recording, so every activity
    belongs to its call; the recordings summarised beside the untraced event time."""
    import types

    from nvgg import cupti
    done = []

    class Flush:
        def __init__(self, device):
            done.append(("flush made", device))

        def __call__(self):
            done.append("flush")
    monkeypatch.setattr(cupti, "L2Flush", Flush)
    monkeypatch.setattr(cupti.torch.cuda, "synchronize", lambda device=None: done.append("wait"))
    monkeypatch.setattr(cupti, "record", lambda fn, device: fn())
    launches = [lambda: done.append("call 0") or [Activity("gemm", "kernel", 0, 30_000)],
                lambda: done.append("call 1") or [Activity("gemm", "kernel", 0, 34_000)]]
    card = types.SimpleNamespace(type="cuda")
    cu = cupti.calls(launches, card, event_us=35.0)
    assert done == [("flush made", card), "flush", "wait", "call 0", "flush", "wait", "call 1"]
    assert cu["calls"] == 2 and cu["kernel_us"] == pytest.approx(32.0) and cu["host_overhead_us"] == pytest.approx(3.0)


def test_the_recorder_records_a_cuda_rows_calls_into_its_result_and_nothing_on_a_cpu(monkeypatch):
    import types

    from nvgg import cupti, timing
    asked = []
    monkeypatch.setattr(cupti, "calls", lambda launches, device, event_us: asked.append((len(launches), event_us))
                        or {"kernel_us": 30.0})
    stats = timing.reduce([40.0, 42.0, 44.0], batch=2, method="leaderboard", clock="cuda events")
    rec = cupti.Recorder()
    assert rec.after_check and rec.repetitions is None
    for device in (torch.device("cpu"), types.SimpleNamespace(type="cuda")):
        result = types.SimpleNamespace(cupti={})
        rec.start()
        rec.stop()
        rec.record(result, types.SimpleNamespace(launches=[None, None], device=device, stats=stats, ends=[1.0]))
        assert result.cupti == ({} if device.type == "cpu" else {"kernel_us": 30.0})
    assert asked == [(2, 42.0)]
