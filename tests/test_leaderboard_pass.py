"""A protocol's pass (nvgg/leaderboard.py `_pass`) on the CPU, CUDA's events and synchronize
stood in by the host clock: what the submission is called on, and in which order, is the
evaluator's (check on clones first, then the originals or fresh clones), and its stop rule ends
the loop."""

import dataclasses
import time

import pytest
import torch

from nvgg import cases, leaderboard, protocol as P
from nvgg.reference import reference

CASE = cases.parse_shape("m: [64]; n: [128]; k: [256]; g: 1; seed: 5")


class _Event:
    def __init__(self, enable_timing=False):
        self.at = None

    def record(self, stream=None):
        self.at = time.perf_counter()

    def elapsed_time(self, end):
        return (end.at - self.at) * 1e3


@pytest.fixture
def host_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)


class Recorder:
    """A correct submission that notes each input object it is called on; on the first sight of
    one it waits FIRST_S (as a per-tensor preparation would cost) and works out its product, which
    later calls on it copy (a pass's values do not change)."""

    FIRST_S = 0.02

    def __init__(self):
        self.calls, self.seen, self.products = [], set(), {}

    def __call__(self, data):
        self.calls.append(id(data))
        if id(data) not in self.seen:
            self.seen.add(id(data))
            time.sleep(self.FIRST_S)
        if id(data) not in self.products:
            self.products[id(data)] = (data, reference(data, torch.float32))
        for (_, _, c), r in zip(data[0], self.products[id(data)][1]):
            c.copy_(r)
        return [c for _, _, c in data[0]]


def _proto(name):
    """The protocol with three inputs, a small clear, and a stop rule that ends at the third
    repetition (the rule itself is test_protocol.py's)."""
    proto = P.get(name)
    return dataclasses.replace(proto, clear_shape=(4, 4), inputs=3,
                               stop=P.Stop(min_index=1, min_elapsed_ns=0, rel_err=10.0, wall_ns=120e9))


def test_a_pass_checks_clones_then_times_the_originals(host_cuda):
    proto = _proto("evaluator")
    plan = P.plan(proto, proto.mode("benchmark"), [CASE.id])
    call = Recorder()
    out = leaderboard._pass(proto, plan[1], CASE, call, torch.device("cpu"))
    assert out["status"] == "ok" and out["calls"] == 3 and out["runs"] == 3
    checked, timed = call.calls[:3], call.calls[3:]
    assert len(set(checked)) == 3 and not set(checked) & set(timed)   # the check's calls were on clones
    assert len(set(timed)) == 3 and len(timed) == 3 * out["runs"]     # the same three originals every repetition
    # the first repetition paid the first sights (20 ms a call), the others did not
    assert out["first_us"] > 20_000 and out["rest_mean_us"] < out["first_us"] / 2
    assert len(out["durations_us"]) == len(out["host_us"]) == len(out["clear_us"]) == out["runs"]


def test_fresh_clones_are_new_objects_every_repetition(host_cuda):
    proto = _proto("evaluator-pr501")
    timed_pass = P.plan(proto, proto.mode("benchmark"), [CASE.id])[1]
    call = Recorder()
    out = leaderboard._pass(proto, timed_pass, CASE, call, torch.device("cpu"))
    assert out["status"] == "ok" and out["inputs"] == "fresh-clones" and len(call.calls) == 3 + 3 * out["runs"]
    assert min(out["durations_us"]) > 20_000   # every repetition's calls are first sights


def test_a_wrong_answer_fails_the_pass_before_any_timing(host_cuda):
    proto = _proto("evaluator")
    plan = P.plan(proto, proto.mode("benchmark"), [CASE.id])
    calls = []

    def wrong(data):
        calls.append(1)
        return [torch.zeros_like(c) for _, _, c in data[0]]
    out = leaderboard._pass(proto, plan[1], CASE, wrong, torch.device("cpu"))
    assert out["status"] == "fail" and out["message"].startswith("checked on clones: input 0") and len(calls) == 3


def test_the_recheck_keeps_the_last_inputs_verdict_only(host_cuda):
    """A submission right on the last input and wrong on the others passes the evaluator's
    recheck (its loop keeps the last verdict); nvgg's pass follows it."""
    proto = _proto("evaluator")
    timed_pass = P.plan(proto, proto.mode("leaderboard"), [CASE.id])[-1]
    good = Recorder()
    state = {"n": 0}

    def wrong_but_last(data):
        out = good(data)
        state["n"] += 1
        if state["n"] > 3 and state["n"] % 3 != 0:  # after the check: wrong on inputs 0 and 1 of each repetition
            return [torch.zeros_like(c) for c in out]
        return out
    out = leaderboard._pass(proto, timed_pass, CASE, wrong_but_last, torch.device("cpu"))
    assert timed_pass.recheck == "last" and out["status"] == "ok"


class Prepared(Recorder):
    """A caller that prepares inputs ahead, as our kernels' rows do (`prepare_all`): nothing is
    prepared inside the timed calls, so no repetition pays a first sight."""

    def prepare_all(self, batch):
        for data in batch:
            self.seen.add(id(data))
            self.products[id(data)] = (data, reference(data, torch.float32))


@pytest.mark.parametrize("name", ["evaluator", "evaluator-pr501"])
def test_our_kernels_are_prepared_before_the_timed_calls(host_cuda, name):
    proto = _proto(name)
    timed_pass = P.plan(proto, proto.mode("benchmark"), [CASE.id])[1]
    out = leaderboard._pass(proto, timed_pass, CASE, Prepared(), torch.device("cpu"))
    assert out["status"] == "ok" and max(out["durations_us"]) < 20_000, out["durations_us"]
