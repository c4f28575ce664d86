import pytest
import torch

from nvgg import cases, datapath, inputs, reference, strategies
from nvgg.backends import get as get_backend
from nvgg.errors import NvggError

CPU = torch.device("cpu")


@pytest.mark.parametrize("case_id", ["test-1", "test-2", "test-9", "test-10"])
def test_sequential_torch_on_cpu_matches_reference(case_id):
    data = inputs.generate(cases.get(case_id), CPU)
    want = reference.reference(data)
    reference.poison(data)
    prepared = strategies.get("sequential").prepare(get_backend("torch"), data)
    assert prepared.launch() is None
    assert reference.check(inputs.outputs(data), want).ok


@pytest.mark.parametrize("name", ["multistream", "graph", "persistent"])
def test_gpu_strategies_refuse_a_cpu_with_a_clear_message(name):
    with pytest.raises(NvggError, match="needs a CUDA GPU"):
        strategies.get(name).check(get_backend("torch"), cases.get("3"), CPU)


def test_unknown_strategy_and_backend():
    with pytest.raises(NvggError, match="choose one of persistent, multistream, graph, sequential"):
        strategies.get("turbo")
    with pytest.raises(NvggError, match="unknown backend 'cublas'"):
        get_backend("cublas")


def test_run_one_on_cpu_checks_then_times():
    res = datapath.run_one(cases.get("test-4"), device=CPU)
    assert res.status == "ok" and res.strategy == "sequential" and res.backend == "torch"
    assert res.checked_inputs == 1 and res.stats.clock == "host clock (CPU run)" and res.stats.batch == datapath.CPU_BATCH
    assert res.gap is None  # no SOL gap is quoted for a CPU clock
    assert res.sol_b200.bound == "memory" and "different bits" in res.inputs


def test_run_one_reports_a_wrong_kernel(monkeypatch):
    from nvgg.backends.torch_lib import TorchBackend

    class OffByOne(TorchBackend):
        def group_launcher(self, data, g):
            inner = super().group_launcher(data, g)
            c = data[0][g][2]

            def launch():
                inner()
                c[0, 0, 0] += 1
            return launch

    res = datapath.run_one(cases.get("test-1"), backend=OffByOne(), device=CPU)
    assert res.status == "wrong" and "group 0: 1 of" in res.message and res.stats is None


def test_run_one_reports_an_unwritten_group():
    from nvgg.backends.torch_lib import TorchBackend

    class SkipsLastGroup(TorchBackend):
        def group_launcher(self, data, g):
            return (lambda: None) if g == len(data[3]) - 1 else super().group_launcher(data, g)

    res = datapath.run_one(cases.get("test-8"), backend=SkipsLastGroup(), device=CPU)
    assert res.status == "wrong" and res.message.startswith("input 0: group 3")


class _Watcher:
    """A row's observer that writes down when it is told of what (datapath.Observer)."""

    def __init__(self, name, seen, after_check, repetitions=None):
        self.name, self.seen, self.after_check, self.repetitions = name, seen, after_check, repetitions

    def start(self):
        self.seen.append((self.name, "start"))

    def stop(self):
        self.seen.append((self.name, "stop"))

    def record(self, result, timed):
        self.seen.append((self.name, "record", result.stats is timed.stats, len(timed.launches), len(timed.ends)))


class _Repetitions:
    """The timer's own observer (timing.Observer): its repetitions' exact span."""

    def __init__(self, seen):
        self.seen = seen

    def before_start(self):
        self.seen.append(("inside", "first repetition"))

    def wants_more(self):
        return False

    def after_finish(self):
        self.seen.append(("inside", "last repetition"))


def test_measure_tells_its_observers_of_the_timed_run_and_records_after_the_check():
    """The clocks' kind records whatever the check says, the energy's and CUPTI's kind only once the
    timed calls are found right; start and stop hold the timer's run, whose repetitions the timer
    tells the one observer that asks (`repetitions`)."""
    session = datapath.setup(cases.get("test-4"), device=CPU)
    assert datapath.check(session)
    seen = []
    observers = [_Watcher("clocks", seen, False), _Watcher("energy", seen, True, _Repetitions(seen)),
                 _Watcher("cupti", seen, True)]
    datapath.measure(session, observers=observers)
    res = session.result
    runs = res.stats.runs
    assert res.status == "ok" and runs >= 3 and res.stats.batch == datapath.CPU_BATCH
    assert seen == [("clocks", "start"), ("energy", "start"), ("cupti", "start"),
                    ("inside", "first repetition"), ("inside", "last repetition"),
                    ("clocks", "stop"), ("energy", "stop"), ("cupti", "stop"),
                    ("clocks", "record", True, datapath.CPU_BATCH, runs),
                    ("energy", "record", True, datapath.CPU_BATCH, runs),
                    ("cupti", "record", True, datapath.CPU_BATCH, runs)]
    assert res.energy == {} and res.clocks == {} and res.cupti == {}  # the watchers wrote nothing
    with pytest.raises(ValueError, match="tells one observer of its repetitions"):
        datapath.measure(session, observers=[_Watcher("a", [], True, _Repetitions([])),
                                             _Watcher("b", [], True, _Repetitions([]))])


def test_a_row_wrong_when_timed_keeps_its_clocks_and_no_other_record():
    from nvgg.backends.torch_lib import TorchBackend

    class OnceRight(TorchBackend):
        """Right when checked, then keeps its first results: the timed calls write nothing."""

        def group_launcher(self, data, g):
            inner, calls = super().group_launcher(data, g), []

            def launch():
                if not calls:
                    inner()
                calls.append(1)
            return launch

    session = datapath.setup(cases.get("test-1"), backend=OnceRight(), device=CPU, batch=1)
    assert datapath.check(session)
    seen = []
    datapath.measure(session, observers=[_Watcher("clocks", seen, False), _Watcher("cupti", seen, True)])
    assert session.result.status == "wrong" and "wrong when timed" in session.result.message
    assert [s[:2] for s in seen] == [("clocks", "start"), ("cupti", "start"), ("clocks", "stop"), ("cupti", "stop"),
                                     ("clocks", "record")]


def test_a_rows_own_observers_follow_its_timer_and_energy():
    from nvgg import clocks, cupti
    plain = datapath.observers_for(CPU)  # no energy counter on a CPU: the clocks alone
    assert [type(o) for o in plain] == [clocks.Sampler] and plain[0].period_s == clocks.PERIOD_S
    traced = datapath.observers_for(CPU, "cupti", energy=False, rounds=True)
    assert [type(o) for o in traced] == [clocks.Sampler, cupti.Recorder] and traced[0].period_s is None
    res = datapath.run_one(cases.get("test-4"), device=CPU)
    assert res.clocks == {"samples": 0, "error": "no CUDA device: clocks not sampled", "throttled": ""}
    assert res.energy == {} and res.cupti == {}
