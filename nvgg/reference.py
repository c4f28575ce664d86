"""Exact NVFP4 reference, the competition's tolerance check, and output poisoning.

The reference needs no FP4 hardware: it decodes the e2m1 nibbles and e4m3 scales to float64
(every e2m1 x e4m3 value is exact there, and so is every product of two of them), multiplies
with float64 accumulation and rounds once to fp16. On CUDA that is one DGEMM per group (Hopper
runs it on its FP64 tensor cores), fast enough to check benchmark case 1 in well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .inputs import SF_VEC, outputs

# e2m1 code -> value: bit 3 sign, bits 2..1 exponent (bias 1), bit 0 mantissa.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)

RTOL = 1e-3  # the competition's check_implementation: make_match_reference(..., rtol=1e-03, atol=1e-03)
ATOL = 1e-3


def decode_e2m1(packed: torch.Tensor, dtype=torch.float64) -> torch.Tensor:
    """[rows, k/2] packed bytes (uint8 or float4_e2m1fn_x2) -> [rows, k]; element 2i is the low nibble."""
    raw = packed.view(torch.uint8)
    table = torch.tensor(E2M1_VALUES, dtype=dtype, device=raw.device)
    nibbles = torch.stack((raw & 0x0F, raw >> 4), dim=-1).reshape(raw.shape[0], raw.shape[1] * 2)
    return table[nibbles.long()]


def expand(packed: torch.Tensor, scales: torch.Tensor, dtype=torch.float64) -> torch.Tensor:
    """Dequantize one operand: [rows, k/2] e2m1 pairs and [rows, k/16] e4m3 scales -> [rows, k]."""
    values = decode_e2m1(packed, dtype)
    sf = scales.to(values.device).to(dtype).repeat_interleave(SF_VEC, dim=1)[:, : values.shape[1]]
    return values * sf


def reference(data, dtype=torch.float64) -> list[torch.Tensor]:
    """C_g = A_g · B_gᵀ for every group, [m, n, 1] float16, from the plain scales."""
    abc, sf, _, sizes = data
    out = []
    for (a, b, c), (sfa, sfb), (m, n, k, l) in zip(abc, sf, sizes):
        res = torch.empty((m, n, l), dtype=torch.float16, device=c.device)
        for li in range(l):
            ea = expand(a[:, :, li], sfa[:, :, li], dtype)
            eb = expand(b[:, :, li], sfb[:, :, li], dtype)
            res[:, :, li] = (ea @ eb.T).to(torch.float16)
        out.append(res)
    return out


def poison(data) -> None:
    """Fill every output with NaN so an element the kernel never writes fails the check."""
    for _, _, c in data[0]:
        c.fill_(float("nan"))


def checked_call(data, launch) -> "Check":
    """Poison the outputs, run `launch` once and compare with the exact reference (float64): the
    check every benchmark runs before it times a launch."""
    expected = reference(data)
    poison(data)
    launch()
    if expected and expected[0].is_cuda:
        torch.cuda.synchronize()
    return check(outputs(data), expected)


@dataclass(frozen=True)
class Check:
    ok: bool
    message: str = ""
    mismatches: int = 0

    def to_dict(self) -> dict:
        return {"ok": self.ok, "message": self.message, "mismatches": self.mismatches}


def _bad(got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float) -> tuple[torch.Tensor, ...]:
    """Where `got` misses `want` (the elements as float32, and the mask), without a synchronise."""
    got32, want32 = got.float(), want.float().to(got.device)
    bad = (got32 - want32).abs() > atol + rtol * want32.abs()
    bad |= torch.isnan(got32) ^ torch.isnan(want32)
    bad |= torch.isposinf(got32) ^ torch.isposinf(want32)
    bad |= torch.isneginf(got32) ^ torch.isneginf(want32)
    return got32, want32, bad


def _lines(got32: torch.Tensor, want32: torch.Tensor, bad: torch.Tensor, max_report: int) -> list[str]:
    return [f"at {tuple(idx)} got {got32[tuple(idx)].item():g} want {want32[tuple(idx)].item():g}"
            for idx in torch.nonzero(bad)[:max_report].tolist()]


def _form(outputs, expected) -> Check | None:
    """What is wrong with the outputs' form (not a list of that many fp16 tensors of the reference's
    shapes), None where nothing is."""
    if not isinstance(outputs, (list, tuple)) or len(outputs) != len(expected):
        n = len(outputs) if isinstance(outputs, (list, tuple)) else type(outputs).__name__
        return Check(False, f"expected a list of {len(expected)} output tensors, got {n}")
    for g, (got, want) in enumerate(zip(outputs, expected)):
        if not isinstance(got, torch.Tensor):
            return Check(False, f"group {g}: output is {type(got).__name__}, not a tensor")
        if tuple(got.shape) != tuple(want.shape):
            return Check(False, f"group {g}: output shape {tuple(got.shape)}, expected {tuple(want.shape)}")
        if got.dtype != torch.float16:
            return Check(False, f"group {g}: output dtype {got.dtype}, expected torch.float16")
    return None


def check(outputs, expected, rtol: float = RTOL, atol: float = ATOL, max_report: int = 3) -> Check:
    """The competition's tolerance (|got - want| <= atol + rtol·|want|; NaN and ±inf must match)."""
    return check_all([(outputs, expected)], rtol, atol, max_report)[0]


def check_all(pairs, rtol: float = RTOL, atol: float = ATOL, max_report: int = 3) -> list[Check]:
    """`check` of several inputs' (outputs, expected) at once: every group's mismatches counted on
    its device and read back together (one wait for the device, not one a group); each input's
    first failing group described."""
    verdicts: dict[int, Check] = {}
    counted = []  # (input, group, its mismatch count as a tensor)
    for i, (outputs, expected) in enumerate(pairs):
        form = _form(outputs, expected)
        if form is not None:
            verdicts[i] = form
            continue
        counted += [(i, g, _bad(got, want, rtol, atol)[2].count_nonzero()) for g, (got, want)
                    in enumerate(zip(outputs, expected))]
    by_device: dict = {}
    for k, (_, _, n) in enumerate(counted):
        by_device.setdefault(n.device, []).append(k)
    counts = [0] * len(counted)
    for ks in by_device.values():
        for k, n in zip(ks, torch.stack([counted[k][2] for k in ks]).tolist()):
            counts[k] = n
    for (i, g, _), n in zip(counted, counts):
        if n and i not in verdicts:
            got, want = pairs[i][0][g], pairs[i][1][g]
            lines = _lines(*_bad(got, want, rtol, atol), max_report)
            verdicts[i] = Check(False, f"group {g}: {n} of {got.numel()} elements mismatch; " + "; ".join(lines), n)
    return [verdicts.get(i, Check(True)) for i in range(len(pairs))]
