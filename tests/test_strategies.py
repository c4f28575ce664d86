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
