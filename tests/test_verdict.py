"""Verdicts from measured numbers (made-up Results, no GPU): each finding holds exactly where its
evidence says so, in the documented order."""

import pytest

from nvgg import cases, timing, verdict
from nvgg.profiles import get as get_profile
from nvgg.profiling.ncu import KernelMetrics, NcuReport
from nvgg.profiling.phases import PhaseReport
from nvgg.result import Result
from nvgg.sol import sol


def _result(time_us, *, host=None, cupti=None, tiles=(), sms=132, per_sm=1, clock="cuda events", case="3",
            strategy="persistent"):
    stats = timing.reduce([time_us], batch=15, method="leaderboard", clock=clock)
    r = Result(case=case, strategy=strategy, backend="cute", status="ok", stats=stats,
               sol=sol(cases.get(case), get_profile("h100")), tiles=list(tiles), sms=sms, ctas_per_sm=per_sm)
    if host is not None:
        r.setup_us["launch_host"] = host
    r.cupti = cupti or {}
    return r


def test_host_bound_against_the_kernel_time_or_the_event_time():
    v = verdict.judge(_result(12.0, host=10.5, cupti={"kernel_us": 6.0, "activities": 1, "gaps_us": 0.0,
                                                       "gaps_shown": True}))
    assert v.kind == "host-bound" and v.phrase == "host-bound: launches take 10.5 µs a call against 6.0 µs of kernels"
    assert v.evidence["launch_host_us"] == 10.5
    assert verdict.judge(_result(12.0, host=11.0)).phrase.endswith("against 12.0 µs measured")
    assert verdict.judge(_result(40.0, host=10.0)).kind != "host-bound"


def test_gaps_only_where_shown_and_large():
    gaps = {"kernel_us": 30.0, "activities": 16, "gaps_us": 25.0, "gaps_shown": True}
    v = verdict.judge(_result(60.0, host=5.0, cupti=gaps))
    assert v.kind == "launch gaps" and "25.0 µs idle between a call's 16 kernels of 60.0 µs" in v.phrase
    assert verdict.judge(_result(60.0, host=5.0, cupti=dict(gaps, gaps_shown=False))).kind != "launch gaps"
    assert verdict.judge(_result(60.0, host=5.0, cupti=dict(gaps, gaps_us=5.0))).kind != "launch gaps"


def test_setup_share_from_the_phases():
    rep = PhaseReport(ctas=128, ctas_with_work=128, kernel_us=20.6, time_to_first_mma_us=9.1, setup_share=0.47,
                      switches_median=0, phases=())
    v = verdict.judge(_result(23.3, host=2.0), phases=rep)
    assert v.kind == "setup" and v.phrase == "setup: first MMA at 9.1 µs of a 20.6 µs kernel (47%)"
    # programmatic launches measured right behind another: the first MMA after the call before
    # ends, against the call's time, decides (case 4: 5.8 of 17.0; case 3: 3.2 of 28.8 is not setup)
    from nvgg.profiling.device_phases import Behind
    v = verdict.judge(_result(17.0, host=2.0), phases=rep, behind=Behind(-0.6, -0.6, 5.8, 6.5))
    assert v.kind == "setup" and v.phrase == "setup: first MMA 5.8 µs after the call before ends, of 17.0 µs a call (34%)"
    v = verdict.judge(_result(28.8, host=2.0), phases=rep, behind=Behind(-4.6, -4.6, 3.2, 4.0))
    assert v.kind != "setup"
    # a probe without a first-MMA mark: no time behind to judge by, the kernel's own share decides
    v = verdict.judge(_result(23.3, host=2.0), phases=rep, behind=Behind(-0.6, -0.6, None, None))
    assert v.kind == "setup" and v.phrase == "setup: first MMA at 9.1 µs of a 20.6 µs kernel (47%)"


def test_under_filled_and_wave_quantization():
    v = verdict.judge(_result(50.0, host=2.0, tiles=[48, 72], sms=132, strategy="sequential"))
    assert v.kind == "under-filled" and "2 launches of 48-72 tiles on 132 CTA slots" in v.phrase
    # the same launches side by side (graph, multistream) fill 120 of 132 slots together
    assert verdict.judge(_result(50.0, host=2.0, tiles=[48, 72], sms=132, strategy="graph")).kind == "device"
    v = verdict.judge(_result(140.0, host=2.0, tiles=[160], sms=132))
    assert v.kind == "wave quantization" and "160 tiles = 1.21 waves" in v.phrase and "(last wave 21% full)" in v.phrase
    # a full last wave, or many waves, is no finding
    assert verdict.judge(_result(140.0, host=2.0, tiles=[264], sms=132)).kind == "device"
    assert verdict.judge(_result(140.0, host=2.0, tiles=[352 * 4], sms=132)).kind == "device"


def test_ncu_decides_memory_compute_or_latency():
    def rep(dram, tensor):
        return NcuReport([KernelMetrics("k", 10.0, 1e6, dram, tensor, None, None, None, None, None, None)])
    assert verdict.judge(_result(20.0, host=2.0), ncu=rep(75.0, 20.0)).phrase == "memory-bound: DRAM at 75% of peak (ncu)"
    assert verdict.judge(_result(20.0, host=2.0), ncu=rep(30.0, 80.0)).kind == "compute-bound"
    assert verdict.judge(_result(20.0, host=2.0), ncu=rep(30.0, 20.0)).kind == "latency-bound"


def test_fallback_is_the_distance_to_the_floor_and_cpu_runs_have_none():
    r = _result(37.9, host=2.0)
    v = verdict.judge(r)
    assert v.kind == "device" and v.evidence["gap"] == pytest.approx(37.9 / r.sol.sol_us)
    assert verdict.judge(_result(1000.0, clock="host clock (CPU run)")).kind == "cpu"
    failed = _result(10.0)
    failed.status = "wrong"
    assert verdict.judge(failed) is None
