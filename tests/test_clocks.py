"""The card's clocks while a row is timed (nvgg/clocks.py): samples summarised, throttling read
from the driver's reasons."""

import bisect
import math
import random
import time

import pytest
import torch

from nvgg import clocks, timing


def test_idle_and_application_clock_reasons_are_settings_not_throttling():
    samples = [{"t": i * 0.05, "sm_mhz": 1755, "mem_mhz": 2619, "temp_c": 60, "power_w": 690.0, "reasons": 0x1 | 0x2}
               for i in range(4)]
    calm = clocks.summarise(samples)
    assert calm["throttled"] == "" and calm["reasons"] == [] and calm["sm_mhz"] == [1755, 1755, 1755]


def test_the_sampler_says_why_it_sampled_nothing_on_a_cpu():
    with clocks.Sampler(torch.device("cpu")) as s:
        pass
    assert s.summary() == {"samples": 0, "error": "no CUDA device: clocks not sampled", "throttled": ""}


class SimCard:
    """A card in simulated time (nothing sleeps: the test hangs on neither the machine's load nor
    its threads): power stepping between random levels at random moments (or held at `watts`);
    NVML's energy counter moving every 76-124 ms, each change holding the energy up to it in whole
    mJ; reads taking `reads_s`, sampling the counter at a random point inside, and held up at
    random (a pre-emption, a wait for the interpreter) before and after it; `stamp`, the reading
    thread's clock, held up at random too."""

    def __init__(self, seed: int, watts: float | None = None, reads_s=(0.001, 0.025), held: float = 0.2,
                 held_s: float = 0.03, horizon_s: float = 3.0):
        rng = self.rng = random.Random(seed)
        self.t = 0.0
        self.reads_s, self.held, self.held_s = reads_s, held, held_s
        self.p_at, self.p_w = [-1.0], [watts or rng.uniform(60, 700)]
        while watts is None and self.p_at[-1] < horizon_s:
            self.p_at.append(self.p_at[-1] + rng.uniform(0.02, 0.5))
            self.p_w.append(rng.uniform(60, 700))
        self.e_at = [0.0]
        for k in range(1, len(self.p_at)):
            self.e_at.append(self.e_at[-1] + self.p_w[k - 1] * (self.p_at[k] - self.p_at[k - 1]))
        base, u = rng.randrange(10**9), -rng.uniform(0, 0.124)  # mJ since the driver loaded; the counter's phase
        self.u, self.v = [], []
        while u < horizon_s:
            self.u.append(u)
            self.v.append(base + math.floor(self.energy_mj(u)))
            u += rng.uniform(0.076, 0.124)
        self.when = dict(zip(self.v, self.u))

    def energy_mj(self, t: float) -> float:
        k = bisect.bisect_right(self.p_at, t) - 1
        return 1000 * (self.e_at[k] + self.p_w[k] * (t - self.p_at[k]))

    def _hold(self) -> None:
        if self.rng.random() < self.held:
            self.t += self.rng.uniform(0, self.held_s)

    def now(self) -> float:
        return self.t

    def stamp(self) -> float:
        self._hold()
        return self.t

    def read(self) -> int:
        took, at = self.rng.uniform(*self.reads_s), self.rng.random()
        self._hold()
        self.t += took * at
        sampled = self.t
        self.t += took * (1 - at)
        self._hold()
        return self.v[bisect.bisect_right(self.u, sampled) - 1]

    def watts_between(self, v0: int, v1: int) -> float:
        """The true mean power between the changes that showed `v0` and `v1`."""
        u0, u1 = self.when[v0], self.when[v1]
        return (self.energy_mj(u1) - self.energy_mj(u0)) / (u1 - u0) / 1000


def _read_for(card: SimCard, span_s: float) -> list:
    """The meter's reading loop over `span_s` of the card's simulated time, its clock `stamp`."""
    return clocks.EnergyMeter(card.read, card.stamp).watch(lambda: card.t >= span_s)


def test_the_stated_bound_holds_in_a_thousand_simulated_windows():
    """Reads of 1-25 ms held up at random before and after they sample the counter, the clock held
    up too, power stepping under the window: the true mean power between the window's changes lies
    within the stated bound every time."""
    windows = misses = 0
    worst = 0.0
    bounds = []
    for seed in range(1000):
        card = SimCard(seed)
        span_s = card.rng.uniform(0.25, 2.0)
        changes = _read_for(card, span_s)
        power = clocks.power_of(changes, span_s)
        if "watts" not in power:
            continue
        i, j, bound = clocks.best_window(changes)
        assert power["within"] == bound and power["updates"] == j - i
        truth = card.watts_between(changes[i][2], changes[j][2])
        windows += 1
        misses += abs(power["watts"] - truth) > power["watts"] * bound
        worst = max(worst, abs(power["watts"] - truth) / (power["watts"] * bound))
        bounds.append(bound)
    assert windows >= 995 and misses == 0, (windows, misses)
    # a bound, not a guess: the errors come within reach of it (worst 0.88 of it at these seeds),
    # and it is no wider than the reads make it (half the windows within 5%)
    assert 0.5 < worst <= 1.0 and sorted(bounds)[len(bounds) // 2] < 0.05, (worst, sorted(bounds)[len(bounds) // 2])


def test_the_window_bound_is_its_ends_brackets_and_the_counters_whole_mj():
    sharp0, sharp1 = (1.000, 1.006, 10_000), (1.400, 1.406, 10_000 + 120_000)  # 300 W for 0.4 s
    # ends at the brackets' middles 0.4 s apart, each off by up to 3 ms; the energy off by under 1 mJ
    assert clocks.window_bound(sharp0, sharp1) == pytest.approx((0.006 / 0.4 + 1 / 120_000) / (1 - 0.006 / 0.4))
    late = (1.195, 1.255, 10_000 + 60_000)  # a change whose reads were held up 60 ms: the window skips it
    assert clocks.best_window([sharp0, late, sharp1]) == (0, 2, clocks.window_bound(sharp0, sharp1))
    assert clocks.window_bound(sharp0, (1.004, 1.100, 10_030)) == math.inf  # brackets longer than the window
    assert clocks.best_window([sharp0]) is None
    assert clocks.power_of([sharp0, (1.004, 1.100, 10_030)], 0.2)["note"].endswith(
        "2 time(s) in the 0.20 s timed: none two far enough apart for the reads around them to place a window between them")
    power = clocks.power_of([sharp0, late, sharp1], 0.5)
    assert power == {"watts": pytest.approx(300.0), "seconds": pytest.approx(0.4), "updates": 2,
                     "within": clocks.window_bound(sharp0, sharp1)}


def test_power_from_the_counters_steps_and_the_energy_a_call():
    """300 W for 0.6 s of simulated time, reads of about 3 ms: the power within its bound, and the
    energy a call the power times the span's wall time a call, above idle less the idle power."""
    card = SimCard(7, watts=300.0, reads_s=(0.0025, 0.0035), held=0.1, held_s=0.005)
    power = clocks.power_of(_read_for(card, 0.6), 0.6)
    assert power["updates"] >= 3 and 0.3 < power["seconds"] < 0.6, power
    assert abs(power["watts"] - 300.0) <= power["watts"] * power["within"] and power["within"] < 0.05, power
    e = clocks.energy_a_call(power, span_s=0.6, calls=15 * 8000, idle={"watts": 70.0})  # 5 µs of wall time a call
    assert e["wall_us"] == pytest.approx(5.0) and e["mj_per_call"] == pytest.approx(power["watts"] * 0.005)
    assert e["mj_above_idle"] == pytest.approx((power["watts"] - 70.0) * 0.005) and e["note"] == clocks.ENERGY_NOTE
    from nvgg.report import energy_line
    line = energy_line(e)
    assert line.startswith(f"energy: {e['mj_per_call']:.3f} mJ a call at board power, idle included: "
                           f"{power['watts']:.0f} W within {power['within']:.1%} (NVML's counter over "), line
    assert line.endswith(f"times 5.0 µs of wall time a call; above idle (70 W): {e['mj_above_idle']:.3f} mJ a call")
    busy = clocks.energy_a_call(power, 0.6, 15 * 8000, {"note": "the card was busy"})
    assert busy["idle_watts"] is None and busy["mj_above_idle"] is None
    assert energy_line(busy).endswith("; no idle power (the card was busy)")


def test_no_energy_figure_where_the_counter_does_not_move_or_is_missing():
    card = SimCard(0)
    changes = clocks.EnergyMeter(lambda: card.read() and 1000, card.stamp).watch(lambda: card.t > 0.5)
    note = "NVML's energy counter changed 0 time(s) in the 0.50 s timed: too few to place a window between two of its changes"
    assert changes == [] and clocks.power_of(changes, 0.5) == {"note": note}
    e = clocks.energy_a_call(clocks.power_of(changes, 0.5), 0.5, 100, {})
    assert e["mj_per_call"] is None and e["note"] == note
    from nvgg.report import energy_line
    assert energy_line(e) == f"energy: no figure ({note})"
    assert clocks.EnergyMeter(lambda: None).watch(lambda: False) == []  # a counter that cannot be read: no loop
    assert clocks.meter(torch.device("cpu")) is None and clocks.idle(torch.device("cpu")) == {}
    assert energy_line({}) == ""


def test_the_meter_holds_a_timers_span_until_its_bound_and_keeps_its_window_inside():
    """The meter as the CPU timer's observer, its counter and clock simulated: the timer's own stop
    comes at once, the span goes on until a window is bound within ENERGY_WITHIN (or the meter's
    limit), and only changes whose bracket closed before the span ended count."""
    card = SimCard(3, watts=450.0, reads_s=(0.0025, 0.0035), held=0.1, held_s=0.005, horizon_s=60.0)

    def read() -> int:
        time.sleep(0.0002)  # the interpreter to the launching thread between reads, as a real read lets it
        return card.read()
    meter = clocks.EnergyMeter(read, card.now, idle={"watts": 60.0})
    timer = timing.CpuTimer(min_reps=3, max_reps=3, budget_s=60.0, observer=meter)
    stats = timer.batch([lambda: time.sleep(0.0001)] * 2)
    assert not meter._thread.is_alive() and stats.runs >= 3
    assert meter.best <= clocks.ENERGY_WITHIN or meter.finished - meter.started >= clocks.ENERGY_SPAN_S
    e = meter.result(stats.runs * stats.batch)
    assert e["calls"] == stats.runs * 2 and e["span_s"] == pytest.approx(meter.finished - meter.started, abs=1e-3)
    assert abs(e["watts"] - 450.0) <= e["watts"] * e["within"], e
    assert all(c[1] <= meter.finished for c in meter.changes[:-1])
    inside = [c for c in meter.changes if c[1] <= meter.finished]
    assert e["within"] == clocks.best_window(inside)[2]


def test_the_idle_power_is_read_once_and_only_from_a_card_at_rest(monkeypatch):
    import types
    from nvgg import profiles
    util = types.SimpleNamespace(gpu=0)
    reads = []
    nv = types.SimpleNamespace(nvmlDeviceGetPowerUsage=lambda h: reads.append(1) or 71_500,
                               nvmlDeviceGetUtilizationRates=lambda h: util)
    monkeypatch.setattr(profiles, "nvml", lambda: nv)
    monkeypatch.setattr(clocks, "_handle", lambda nvml, device: object())
    monkeypatch.setattr(clocks, "_IDLE", {})
    card = types.SimpleNamespace(type="cuda", index=0)
    assert clocks.idle(card) == {"watts": 71.5}
    util.gpu = 40  # busy later: the first read stands
    assert clocks.idle(card) == {"watts": 71.5} and len(reads) == 1
    busy = clocks.idle(types.SimpleNamespace(type="cuda", index=1))
    assert "watts" not in busy and busy["note"].startswith("the card was busy (40% of NVML's last sample period)")


def test_a_sampler_without_a_period_reads_at_its_two_ends_alone(monkeypatch):
    """An A/B's round: the clocks read when it begins and ends, no thread beside the launching one."""
    import threading
    import types
    from nvgg import clocks, profiles
    reads = []
    nv = types.SimpleNamespace(NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1, NVML_TEMPERATURE_GPU=0,
                               nvmlDeviceGetClockInfo=lambda h, which: reads.append(which) or 1980,
                               nvmlDeviceGetTemperature=lambda h, what: 50,
                               nvmlDeviceGetPowerUsage=lambda h: 300_000,
                               nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0,
                               nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0)
    monkeypatch.setattr(profiles, "nvml", lambda: nv)
    monkeypatch.setattr(clocks, "_handle", lambda nvml, device: object())
    before = set(threading.enumerate())
    sampler = clocks.Sampler(types.SimpleNamespace(type="cuda"), period_s=None).__enter__()
    started = [t for t in threading.enumerate() if t not in before]  # only its own: others may end meanwhile
    assert not started and sampler._thread is None and len(sampler.samples) == 1
    sampler.__exit__(None, None, None)
    summary = sampler.summary()
    assert summary["samples"] == 2 and summary["sm_mhz"] == [1980, 1980, 1980] and not summary["throttled"]
