import math
import time

import pytest

from nvgg import timing


def test_reduce_matches_hand_computed_statistics():
    s = timing.reduce([1.0, 2.0, 3.0, 4.0], batch=15, method="leaderboard", clock="cuda events")
    assert s.mean_us == 2.5 and s.median_us == 2.5 and s.best_us == 1.0 and s.worst_us == 4.0
    assert s.std_us == pytest.approx(math.sqrt(5 / 3))          # sample std, n - 1
    assert s.err_us == pytest.approx(math.sqrt(5 / 3) / 2)      # std / sqrt(n)
    assert s.runs == 4 and s.batch == 15


def test_stopping_rule_min_reps_precision_and_cap():
    # identical samples: precise after the minimum of 3
    assert not timing._done([5.0, 5.0], 0.0, 3, 100, 1e-3, 1e9)
    import time
    now = time.perf_counter()
    assert timing._done([5.0, 5.0, 5.0], now, 3, 100, 1e-3, 1e9)
    # noisy samples: keep going until the cap
    noisy = [1.0, 9.0, 1.0, 9.0]
    assert not timing._done(noisy, now, 3, 100, 1e-3, 1e9)
    assert timing._done(noisy, now, 3, 4, 1e-3, 1e9)
    # or until the time budget is spent
    assert timing._done(noisy, now - 10, 3, 100, 1e-3, 5.0)


def test_a_cpu_rows_budget_is_five_seconds_or_what_the_environment_says(monkeypatch):
    import torch

    from nvgg.errors import NvggError
    monkeypatch.delenv("NVGG_CPU_BUDGET_S", raising=False)
    assert timing.cpu_budget_s() == timing.CPU_BUDGET_S == 5.0
    assert timing.make_timer(torch.device("cpu")).budget_s == 5.0
    monkeypatch.setenv("NVGG_CPU_BUDGET_S", " 0.25 ")
    assert timing.make_timer(torch.device("cpu")).budget_s == 0.25
    # a repetition past the budget ends the timing after the least repetitions
    slow = timing.make_timer(torch.device("cpu"))
    stats = slow.batch([lambda: time.sleep(0.1)])
    assert stats.runs == timing.MIN_REPS
    for bad in ("0", "-1", "inf", "nan", "fast"):
        monkeypatch.setenv("NVGG_CPU_BUDGET_S", bad)
        with pytest.raises(NvggError, match=r"^NVGG_CPU_BUDGET_S=.*: set it to a number of seconds above 0$"):
            timing.make_timer(torch.device("cpu"))


def test_cpu_timer_counts_calls_and_labels_the_clock():
    import time
    calls = []
    t = timing.CpuTimer(min_reps=3, max_reps=5, budget_s=1.0)
    s = t.batch([lambda: calls.append(1)] * 4)
    assert s.clock == "host clock (CPU run)" and s.method == "cpu" and s.batch == 4
    assert 3 <= s.runs <= 5 and len(calls) == 4 * s.runs
    # each repetition's end, in order: what an energy meter's window counts its calls from
    ends = t.ends
    assert len(ends) == s.runs and ends == sorted(ends) and ends[-1] <= time.perf_counter()
    ends.clear()
    assert len(t.ends) == s.runs  # a copy: the timer's own list stays whole


def test_repetitions_in_blocks_of_a_tenth_of_a_second():
    ends = [i * 0.03 for i in range(10)]  # a repetition every 30 ms
    assert timing.blocks_of(list(range(10)), ends) == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert timing.blocks_of([1.0, 2.0], [0.0, 0.01]) == [[1.0, 2.0]]
    # a last block under half a block long joins the one before
    assert timing.blocks_of([1, 2, 3], [0.0, 0.09, 0.11]) == [[1, 2, 3]]
    assert timing.blocks_of([1, 2, 3], [0.0, 0.05, 0.11]) == [[1, 2], [3]]


def test_a_time_that_wanders_between_blocks_widens_the_rerun_interval():
    ends = [i * 0.01 for i in range(100)]  # 1 s in 10 blocks
    steady = timing.reduce([50.0 + 0.1 * (i % 2) for i in range(100)], batch=15, method="leaderboard",
                           clock="cuda events", ends_s=ends)
    # two levels, 55 and 92 µs, a level a block: the repetitions' err hides it, the blocks do not
    levels = [55.0 if (i // 10) % 2 else 92.0 for i in range(100)]
    wandering = timing.reduce(levels, batch=15, method="leaderboard", clock="cuda events", ends_s=ends)
    assert steady.blocks == wandering.blocks == 10
    assert steady.rerun_us == pytest.approx(timing.t975(9) * math.sqrt(2) * steady.err_us)
    means_sd = math.sqrt(sum((m - 73.5) ** 2 for m in [92.0, 55.0] * 5) / 9)
    assert wandering.block_err_us == pytest.approx(means_sd / math.sqrt(10))
    assert wandering.rerun_us == pytest.approx(2.2622 * math.sqrt(2) * means_sd / math.sqrt(10), rel=1e-4)
    assert wandering.rerun_us > 5 * wandering.err_us
    assert (wandering.block_lo_us, wandering.block_hi_us) == (55.0, 92.0)
    # a host-bound row: nine blocks at 55 µs, one at 92; the t-interval of the blocks (11.8 µs)
    # falls short of the slow block, 33.3 µs above the mean, where a rerun mixing more of it lands
    once = [92.0 if i >= 90 else 55.0 for i in range(100)]
    plain = timing.reduce(once, batch=15, method="leaderboard", clock="cuda events", ends_s=ends)
    host = timing.reduce(once, batch=15, method="leaderboard", clock="cuda events", ends_s=ends, host_bound=True)
    assert plain.rerun_us == pytest.approx(11.8, abs=0.1) and host.mean_us == pytest.approx(58.7)
    assert host.rerun_us == pytest.approx(92.0 - 58.7)
    # where the blocks' t-interval is the wider, it stays
    assert timing.reduce(levels, batch=15, method="leaderboard", clock="cuda events", ends_s=ends,
                         host_bound=True).rerun_us == wandering.rerun_us
    short = timing.reduce([50.0] * 5, batch=15, method="leaderboard", clock="cuda events", ends_s=[0.0, 0.01, 0.02, 0.03, 0.04])
    assert short.blocks == 1 and short.rerun_us is None and short.block_err_us is None


def test_a_gpu_run_is_timed_for_its_minimum_span():
    import time
    now = time.perf_counter()
    precise = [5.0] * 10
    assert not timing._done(precise, now, 3, 100, 1e-3, 1e9, min_span_s=1.0)  # precise, but too short
    assert timing._done(precise, now - 1.1, 3, 100, 1e-3, 1e9, min_span_s=1.0)
    assert not timing._done(precise * 20, now, 3, 100, 1e-3, 1e9, min_span_s=1.0)  # past the cap, still too short
    assert timing._done(precise, now - 11, 3, 100, 1e-3, 10.0, min_span_s=20.0)  # the budget ends it


def test_a_host_bound_row_is_timed_longer_in_longer_blocks():
    import time
    timer = timing.EventTimer("cuda", flush=False, host_us=60.0)  # the host takes 60 µs to issue a call
    now = time.perf_counter()
    timer._samples = [200.0] * 50  # GPU-bound: a call takes far longer than its issue
    assert timer._enough(now - 0.6) and timer._span == timing.MIN_SPAN_S
    timer._samples = [62.0] * 50  # host-bound: 60 µs of 62 is over HOST_SHARE
    assert not timer._enough(now - 0.6) and timer._span == timing.HOST_SPAN_S
    assert not timer._enough(now - 1.9) and timer._enough(now - 2.1)
    # its blocks are HOST_BLOCK_S long: 2 s of repetitions 20 ms apart make 10, not 20
    timer._ends = [i * 0.02 for i in range(100)]
    timer._samples = [62.0 + (i // 10) % 2 for i in range(100)]
    timer._escaped, timer.outputs = [0.0] * 100, [None] * 15
    stats = timer.end()
    assert (stats.blocks, stats.block_s, stats.batch) == (10, timing.HOST_BLOCK_S, 15)
    # and its rerun interval reaches its farthest block: one slow block among ten
    timer._samples = [62.0 if i < 90 else 99.0 for i in range(100)]
    assert timer.end().rerun_us == pytest.approx(99.0 - 65.7)
    quiet = timing.EventTimer("cuda", flush=False)  # no host time measured: never held longer
    quiet._samples = [62.0] * 50
    assert quiet._enough(now - 0.6) and quiet._span == timing.MIN_SPAN_S
    assert timing.reduce([1.0] * 100, batch=15, method="leaderboard", clock="cuda events",
                         ends_s=[i * 0.02 for i in range(100)]).block_s == timing.BLOCK_S


class _Watch:
    """An observer of a timer (timing.Observer) that wants `more` stops held."""

    def __init__(self, more: int):
        self.events, self.more = [], more

    def before_start(self):
        self.events.append("start")

    def wants_more(self):
        self.more -= 1
        return self.more >= 0

    def after_finish(self):
        self.events.append("end")


def test_an_observer_is_told_the_repetitions_start_and_end_and_holds_the_span():
    """What is measured beside the repetitions (an energy meter) starts as the first begins, ends
    after the last, and keeps the timer going while it wants more, the timer's own stop aside."""
    import torch
    calls = []
    watch = _Watch(more=19)
    timer = timing.make_timer(torch.device("cpu"), observer=watch)
    timer.min_reps = timer.max_reps = 3
    stats = timer.batch([lambda: calls.append(1)])
    # the timer's own stop at 3 repetitions, held 19 more times
    assert watch.events == ["start", "end"] and stats.runs == 22 and len(calls) == 22

    def fails():
        raise RuntimeError("a launch that raises")
    watch = _Watch(more=0)
    with pytest.raises(RuntimeError):
        timing.CpuTimer(observer=watch).batch([fails])
    assert watch.events == ["start", "end"]  # its thread stopped all the same
    import time
    gpu = timing.EventTimer("cuda", flush=False, observer=_Watch(more=1))
    gpu._samples = [200.0] * 50
    now = time.perf_counter()
    assert not gpu._enough(now - 0.6) and gpu._enough(now - 0.6)  # past its span, held once


@pytest.mark.parametrize("value", ["abc", "0", "-1", "inf"])
def test_a_bad_cpu_budget_is_refused_by_every_command_before_any_row(cli, monkeypatch, value):
    """NVGG_CPU_BUDGET_S that is not a positive number of seconds: the command's one line, exit 2,
    before a row starts (a row would have said it only once its worker timed it)."""
    monkeypatch.setenv("NVGG_CPU_BUDGET_S", value)
    out = cli("run", "--case", "test-1", "--strategy", "sequential", "--backend", "torch")
    assert out.exit_code == 2, out.output
    assert "NVGG_CPU_BUDGET_S" in out.stderr and "[1/1]" not in out.output
