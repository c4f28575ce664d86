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


def _compare(got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float, max_report: int) -> tuple[int, list[str]]:
    got32, want32 = got.float(), want.float().to(got.device)
    bad = (got32 - want32).abs() > atol + rtol * want32.abs()
    bad |= torch.isnan(got32) ^ torch.isnan(want32)
    bad |= torch.isposinf(got32) ^ torch.isposinf(want32)
    bad |= torch.isneginf(got32) ^ torch.isneginf(want32)
    count = int(bad.count_nonzero())
    lines = []
    for idx in torch.nonzero(bad)[:max_report].tolist():
        lines.append(f"at {tuple(idx)} got {got32[tuple(idx)].item():g} want {want32[tuple(idx)].item():g}")
    return count, lines


def check(outputs, expected, rtol: float = RTOL, atol: float = ATOL, max_report: int = 3) -> Check:
    """The competition's tolerance (|got - want| <= atol + rtol·|want|; NaN and ±inf must match)."""
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
        count, lines = _compare(got, want, rtol, atol, max_report)
        if count:
            total = got.numel()
            return Check(False, f"group {g}: {count} of {total} elements mismatch; " + "; ".join(lines), count)
    return Check(True)
