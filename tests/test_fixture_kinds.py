"""The fixtures that prepare on first sight, on the CPU: per_tensor.py (a plan per tensor set) and
per_shape.py (a compile per shape, torch ops on a CPU) are exact on the values of each call, and
per_tensor.py plans once per tensor set."""

import importlib.util

import pytest
import torch

from conftest import submission_path
from nvgg import inputs, reference
from nvgg.cases import parse_shape

SHAPES = ("m: [64, 96]; n: [256, 256]; k: [256, 512]",
          "m: [200, 40, 136]; n: [136, 264, 72]; k: [768, 256, 512]")


def _fixture(name: str):
    """A fresh import of the fixture (its caches empty)."""
    spec = importlib.util.spec_from_file_location(f"fixture_{name}", submission_path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exact(module, data):
    expected = reference.reference(data, torch.float32)
    verdict = reference.check(module.custom_kernel(data), expected)
    assert verdict.ok, verdict.message
    return expected


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", ["per_tensor", "per_shape"])
def test_exact_on_each_calls_values_in_the_same_tensors(name, shape):
    module, case = _fixture(name), parse_shape(shape)
    data = inputs.generate(case, "cpu")
    first = _exact(module, data)
    inputs.refill(case, data, 0)  # new values, the same tensors: C to NaN
    second = _exact(module, data)
    assert not torch.equal(first[0], second[0])  # a result kept from the first call would fail


def test_per_tensor_plans_once_per_tensor_set():
    module, case = _fixture("per_tensor"), parse_shape(SHAPES[0])
    data = inputs.generate(case, "cpu")
    module.custom_kernel(data)
    assert len(module.PLANS) == 1
    (plan,) = module.PLANS.values()
    assert all(kept is given for kept, given in zip(plan["tensors"], module._tensors(data)))
    inputs.refill(case, data, 0)
    module.custom_kernel(data)
    assert len(module.PLANS) == 1  # the same tensors, new values: no new plan
    module.custom_kernel(inputs.generate(case, "cpu", seed=7))
    assert len(module.PLANS) == 2
    clones = ([tuple(t.clone() for t in group) for group in data[0]], data[1],
              [tuple(t.clone() for t in pair) for pair in data[2]], data[3])
    module.custom_kernel(clones)
    assert len(module.PLANS) == 3  # clones: new tensors, whatever their values


def test_per_shape_expands_as_the_reference_and_leaves_triton_alone_on_a_cpu():
    module, case = _fixture("per_shape"), parse_shape(SHAPES[1])
    data = inputs.generate(case, "cpu")
    for (a, _, _), (sfa, _), (sfa_blocked, _), (m, _, k, _) in zip(*data):
        got = module._expand_torch(*module._operand(a, sfa_blocked, m, k), m, k)
        assert torch.equal(got.double(), reference.expand(a[:, :, 0], sfa[:, :, 0]))
    module.custom_kernel(data)
    assert module.triton is None and module._KERNEL is None
