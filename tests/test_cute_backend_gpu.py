"""GPU tests of the cute backend (marker `gpu`): every strategy against the exact reference on the
14 competition cases and on shapes the competition never uses (G=1 and G=16, M=1, M not a
multiple of 8 or 64, N=8192, K=256 and K=16384), two inputs each, outputs poisoned first."""

import random

import pytest
import torch

from nvgg import cases, datapath
from nvgg.cases import make_case

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")
STRATEGIES = ["persistent", "multistream", "graph", "sequential"]


def _extra_cases():
    rng = random.Random(7)
    g16 = [(rng.choice([1, 9, 40, 64, 100, 200, 512]), rng.choice([128, 256, 1024]), rng.choice([256, 512, 1024]))
           for _ in range(16)]
    shapes = {
        "g1-m1": [(1, 256, 256)],
        "g1-m7-k16384": [(7, 256, 16384)],
        "g1-m57-k16384": [(57, 128, 16384)],
        "g1-m131-n8192": [(131, 8192, 512)],
        "g2-m3-m300": [(3, 384, 768), (300, 128, 256)],
        "g16-mixed": g16,
    }
    return [make_case(name, [s[0] for s in v], [s[1] for s in v], [s[2] for s in v], seed=5) for name, v in shapes.items()]


EXTRA = {c.id: c for c in _extra_cases()}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("case_id", [c.id for c in cases.builtin()])
def test_cute_matches_the_reference_on_competition_cases(case_id, strategy):
    res = datapath.run_one(cases.get(case_id), strategy=strategy, backend="cute", device=CUDA, batch=2, do_time=False)
    assert res.status == "ok", res.message
    assert res.checked_inputs == 2


@pytest.mark.parametrize("strategy", ["persistent", "sequential"])
@pytest.mark.parametrize("case_id", list(EXTRA))
def test_cute_matches_the_reference_on_other_shapes(case_id, strategy):
    res = datapath.run_one(EXTRA[case_id], strategy=strategy, backend="cute", device=CUDA, batch=2, do_time=False)
    assert res.status == "ok", res.message


def test_cute_refuses_a_shape_it_cannot_run():
    from nvgg.errors import NvggError
    with pytest.raises(NvggError, match="multiple of 128"):
        datapath.run_one(make_case("bad", [64], [200], [256]), strategy="persistent", backend="cute", device=CUDA)
