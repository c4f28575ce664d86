import pytest
import torch

from nvgg import cases, inputs


def test_layout_dtypes_and_devices_follow_the_competition():
    case = cases.get("test-4")
    abc, sf, sf_blocked, sizes = inputs.generate(case, "cpu")
    assert sizes == [(80, 384, 256, 1), (128, 256, 512, 1), (256, 128, 256, 1)]
    for (a, b, c), (sfa, sfb), (ra, rb), (m, n, k, l) in zip(abc, sf, sf_blocked, sizes):
        assert a.dtype == torch.float4_e2m1fn_x2 and tuple(a.shape) == (m, k // 2, 1)
        assert tuple(b.shape) == (n, k // 2, 1) and c.dtype == torch.float16 and tuple(c.shape) == (m, n, 1)
        assert sfa.dtype == torch.float8_e4m3fn and tuple(sfa.shape) == (m, k // 16, 1) and sfa.device.type == "cpu"
        assert tuple(ra.shape) == (32, 4, (m + 127) // 128, 4, k // 64, 1)
        # every nibble keeps only its sign and two low bits
        assert int((a.view(torch.uint8) & 0x44).count_nonzero()) == 0
        # scales are 1 or 2
        assert set(sfa.float().unique().tolist()) <= {1.0, 2.0}


def test_same_seed_same_bits_and_batch_seeds_step_by_42():
    case = cases.get("test-1")
    x = inputs.generate(case, "cpu")
    y = inputs.generate(case, "cpu", seed=case.seed)
    assert torch.equal(x[0][1][0].view(torch.uint8), y[0][1][0].view(torch.uint8))
    batch = inputs.generate_batch(case, "cpu", count=3)
    third = inputs.generate(case, "cpu", seed=case.seed + 42 * 3)
    assert torch.equal(batch[2][0][0][0].view(torch.uint8), third[0][0][0].view(torch.uint8))
    assert not torch.equal(batch[0][0][0][0].view(torch.uint8), batch[1][0][0][0].view(torch.uint8))


def test_scales_drawn_ahead_are_the_default_generators_draws_in_order():
    """On a GPU the plain scales are the CPU generator's only draws (sfa then sfb, group by group):
    drawn ahead from a generator of their own they are those bits, seed by seed."""
    case = cases.get("test-3")
    for seed in (case.seed, case.seed + 42):
        torch.manual_seed(seed)
        want = [(torch.randint(1, 3, (1, m, k // 16), dtype=torch.int8), torch.randint(1, 3, (1, n, k // 16), dtype=torch.int8))
                for m, n, k in case.groups]
        got = inputs.cpu_scales(case, seed)
        assert len(got) == len(case.groups) > 1
        for (sfa, sfb), (wa, wb) in zip(got, want):
            assert torch.equal(sfa.view(torch.int8), wa.permute(1, 2, 0).to(torch.float8_e4m3fn).view(torch.int8))
            assert torch.equal(sfb.view(torch.int8), wb.permute(1, 2, 0).to(torch.float8_e4m3fn).view(torch.int8))
    assert not torch.equal(inputs.cpu_scales(case, 1)[0][0].view(torch.int8), inputs.cpu_scales(case, 2)[0][0].view(torch.int8))
    with pytest.raises(ValueError, match="interleave"):  # on a CPU every draw shares the one generator
        inputs.generate(case, "cpu", scales=inputs.cpu_scales(case, case.seed))


def test_a_cases_draws_are_kept_for_its_next_rows_as_copies_of_their_own():
    """generate_batch's draws (drawn_scales) are made once a case in a worker: the next row gets
    the same values in tensors of its own (a row's refill writes its plain scales), and another
    case's draws replace them."""
    case, other = cases.get("test-3"), cases.get("test-4")
    seeds = [case.seed + 42, case.seed + 84]
    first = inputs.drawn_scales(case, seeds)
    for scales, seed in zip(first, seeds):
        for (sfa, sfb), (wa, wb) in zip(scales, inputs.cpu_scales(case, seed)):
            assert torch.equal(sfa.view(torch.int8), wa.view(torch.int8)) and torch.equal(sfb.view(torch.int8), wb.view(torch.int8))
    want = first[0][0][0].view(torch.int8).clone()
    first[0][0][0].view(torch.uint8).fill_(0)  # a row refilling its inputs in place
    again = inputs.drawn_scales(case, seeds)
    assert torch.equal(again[0][0][0].view(torch.int8), want)
    assert again[0][0][0].data_ptr() != first[0][0][0].data_ptr()
    inputs.drawn_scales(other, [other.seed])
    assert {key[0] for key in inputs._DRAWN} == {tuple(other.groups)}


def test_blocked_layout_index_formula_and_round_trip():
    mn, k = 200, 512
    plain = torch.randint(1, 100, (mn, k // 16, 1), dtype=torch.int8).to(torch.float8_e4m3fn)
    blocked = inputs.to_blocked(plain, mn, k, "cpu")
    storage = blocked.permute(5, 2, 4, 0, 1, 3).contiguous().view(torch.uint8).flatten()
    rest_k = k // 64
    for i, j in [(0, 0), (31, 3), (32, 0), (127, 31), (128, 5), (199, 17)]:
        offset = ((i // 128) * rest_k + j // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + j % 4
        assert storage[offset] == plain[i, j, 0].view(torch.uint8)
    assert torch.equal(inputs.from_blocked(blocked, mn, k).view(torch.uint8), plain[:, :, 0].view(torch.uint8))


def test_blocked_copy_matches_plain_scales_in_generated_inputs():
    case = cases.get("test-9")
    _, sf, sf_blocked, sizes = inputs.generate(case, "cpu")
    for (sfa, sfb), (ra, rb), (m, n, k, _) in zip(sf, sf_blocked, sizes):
        assert torch.equal(inputs.from_blocked(ra, m, k).view(torch.uint8), sfa[:, :, 0].view(torch.uint8))
        assert torch.equal(inputs.from_blocked(rb, n, k).view(torch.uint8), sfb[:, :, 0].view(torch.uint8))


def test_refilled_inputs_are_new_values_at_the_same_addresses():
    case = cases.get("test-4")
    data = inputs.generate(case, "cpu", seed=7)
    ptrs = [t.data_ptr() for group in data[0] for t in group]
    before = [t.view(torch.uint8).clone() for (a, b, _) in data[0] for t in (a, b)]
    inputs.refill(case, data, 0)
    assert [t.data_ptr() for group in data[0] for t in group] == ptrs
    after = [t.view(torch.uint8) for (a, b, _) in data[0] for t in (a, b)]
    assert all((x != y).float().mean() > 0.5 for x, y in zip(before, after))
    assert all(bool(c.isnan().all()) for _, _, c in data[0])
    # the new scales, plain and blocked, are the same values (the reference reads one, kernels the other)
    for (sfa, sfb), (ba, bb), (m, n, k, _) in zip(data[1], data[2], data[3]):
        assert torch.equal(inputs.from_blocked(ba, m, k).view(torch.uint8), sfa[:, :, 0].view(torch.uint8))
        assert torch.equal(inputs.from_blocked(bb, n, k).view(torch.uint8), sfb[:, :, 0].view(torch.uint8))
        assert set(sfa.view(torch.uint8).unique().tolist()) <= {0x38, 0x40}  # e4m3 1.0 and 2.0, as the competition draws


def test_a_refill_depends_on_the_case_and_the_index_alone():
    case = cases.get("test-4")
    first, second = inputs.generate(case, "cpu", seed=1), inputs.generate(case, "cpu", seed=2)
    inputs.refill(case, first, 3)
    inputs.refill(case, second, 3)
    for g in range(case.g):
        for x, y in zip(first[0][g][:2], second[0][g][:2]):
            assert torch.equal(x.view(torch.uint8), y.view(torch.uint8))
        assert torch.equal(first[2][g][1].view(torch.uint8), second[2][g][1].view(torch.uint8))


def test_a_finished_rows_scales_are_written_over_by_the_next_rows_copies():
    """give_back: the next drawn_scales writes the kept draws into the tensors a finished row gave
    back (no new allocation), with the draws' values whatever the row left in them."""
    case = cases.get("test-3")
    seeds = [case.seed + 42, case.seed + 84]
    first = inputs.drawn_scales(case, seeds)
    want = [[(a.view(torch.int8).clone(), b.view(torch.int8).clone()) for a, b in s] for s in first]
    ptrs = {t.data_ptr() for s in first for pair in s for t in pair}
    for s in first:
        for a, b in s:
            a.view(torch.uint8).fill_(7), b.view(torch.uint8).fill_(7)  # the row's refills
    inputs.give_back([(None, s) for s in first])
    again = inputs.drawn_scales(case, seeds)
    assert {t.data_ptr() for s in again for pair in s for t in pair} == ptrs
    for s, w in zip(again, want):
        for (a, b), (wa, wb) in zip(s, w):
            assert torch.equal(a.view(torch.int8), wa) and torch.equal(b.view(torch.int8), wb)
    fresh = inputs.drawn_scales(case, seeds)  # nothing given back since: copies of their own
    assert not ({t.data_ptr() for s in fresh for pair in s for t in pair} & ptrs)
