import itertools

import pytest
import torch

from nvgg import cases, inputs, reference


def _e2m1_by_definition(code: int) -> float:
    sign = -1.0 if code & 8 else 1.0
    exp, man = (code >> 1) & 3, code & 1
    mag = man * 0.5 if exp == 0 else (1 + man / 2) * 2.0 ** (exp - 1)
    return sign * mag


def test_decoder_on_every_byte_low_nibble_first():
    raw = torch.arange(256, dtype=torch.uint8).reshape(1, 256)
    got = reference.decode_e2m1(raw)[0]
    for byte in range(256):
        assert got[2 * byte].item() == _e2m1_by_definition(byte & 0xF)
        assert got[2 * byte + 1].item() == _e2m1_by_definition(byte >> 4)


def test_every_scaled_value_is_exact_in_fp16():
    values = torch.tensor([_e2m1_by_definition(c) for c in range(16)], dtype=torch.float64)
    scales = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).double()
    scales = scales[torch.isfinite(scales)]
    prod = values[:, None] * scales[None, :]
    assert torch.equal(prod.half().double(), prod)


def test_reference_matches_a_scalar_loop():
    torch.manual_seed(0)
    m, n, k = 3, 2, 64
    a = torch.randint(0, 256, (m, k // 2, 1), dtype=torch.uint8)
    b = torch.randint(0, 256, (n, k // 2, 1), dtype=torch.uint8)
    sfa = torch.randint(1, 120, (m, k // 16, 1), dtype=torch.int8).view(torch.float8_e4m3fn)
    sfb = torch.randint(1, 120, (n, k // 16, 1), dtype=torch.int8).view(torch.float8_e4m3fn)
    c = torch.zeros((m, n, 1), dtype=torch.float16)
    data = ([(a, b, c)], [(sfa, sfb)], [None], [(m, n, k, 1)])
    got = reference.reference(data)[0]

    def elem(t, sf, r, kk):
        byte = int(t[r, kk // 2, 0])
        return _e2m1_by_definition(byte & 0xF if kk % 2 == 0 else byte >> 4) * float(sf[r, kk // 16, 0].float())

    for i, j in itertools.product(range(m), range(n)):
        want = sum(elem(a, sfa, i, kk) * elem(b, sfb, j, kk) for kk in range(k))
        assert got[i, j, 0].item() == torch.tensor(want).half().item()


def test_check_accepts_exact_and_reports_mismatches():
    want = [torch.ones((4, 4, 1), dtype=torch.float16)]
    assert reference.check([want[0].clone()], want).ok
    off = want[0].clone()
    off[1, 2, 0] = 1.01  # beyond atol + rtol·|1| = 0.002
    res = reference.check([off], want)
    assert not res.ok and res.mismatches == 1 and "(1, 2, 0)" in res.message
    near = want[0].clone()
    near[0, 0, 0] = 1.0019531  # fp16 spacing at 1 is 0.00098: two ulps, inside the tolerance
    assert reference.check([near], want).ok


def test_check_catches_nan_inf_shape_dtype_and_count():
    want = [torch.ones((2, 2, 1), dtype=torch.float16)]
    nan = want[0].clone()
    nan[0, 0, 0] = float("nan")
    assert "1 of 4" in reference.check([nan], want).message
    inf = want[0].clone()
    inf[1, 1, 0] = float("inf")
    assert not reference.check([inf], want).ok
    assert "shape" in reference.check([torch.ones((2, 3, 1), dtype=torch.float16)], want).message
    assert "dtype" in reference.check([want[0].float()], want).message
    assert "list of 1" in reference.check([], want).message


def test_poison_makes_unwritten_outputs_fail():
    data = inputs.generate(cases.get("test-1"), "cpu")
    want = reference.reference(data, torch.float32)
    reference.poison(data)
    assert all(torch.isnan(c).all() for c in inputs.outputs(data))
    assert not reference.check(inputs.outputs(data), want).ok


@pytest.mark.parametrize("case_id", ["test-1", "test-9"])
def test_fp32_and_fp64_reference_agree(case_id):
    data = inputs.generate(cases.get(case_id), "cpu")
    assert reference.check(reference.reference(data, torch.float32), reference.reference(data, torch.float64)).ok


def test_checked_call_fails_a_launch_that_writes_nothing_and_passes_one_that_does():
    data = inputs.generate(cases.get("test-1"), "cpu")
    assert not reference.checked_call(data, lambda: None).ok  # the outputs stay poisoned
    want = reference.reference(data)

    def write():
        for c, w in zip(inputs.outputs(data), want):
            c.copy_(w)

    verdict = reference.checked_call(data, write)
    assert verdict.ok and verdict.mismatches == 0


def test_several_inputs_checked_at_once_say_what_each_alone_would():
    """reference.check_all (the checked run's inputs compared together): each input's verdict, its
    first failing group and its count, as reference.check of that input alone says them."""
    want = [torch.zeros(4, 8, 1, dtype=torch.float16), torch.ones(2, 8, 1, dtype=torch.float16)]
    right = [w.clone() for w in want]
    off = [w.clone() for w in want]
    off[1][0, :3, 0] = 5.0
    nan = [w.clone() for w in want]
    nan[0][1, 1, 0] = float("nan")
    pairs = [(right, want), (off, want), ([want[0]], want), (nan, want), (right, want)]
    together = reference.check_all(pairs)
    assert together == [reference.check(got, exp) for got, exp in pairs]
    assert [v.ok for v in together] == [True, False, False, False, True]
    assert together[1].mismatches == 3 and together[1].message.startswith("group 1: 3 of 16 elements mismatch")
    assert together[2].message == "expected a list of 2 output tensors, got 1"
    assert reference.check_all([]) == []
