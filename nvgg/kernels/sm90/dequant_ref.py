"""A PyTorch model of the kernels' e2m1 decode (ptx.decode_store_word), bit for bit, so the decode
can be checked on its own for every input: a consistent nibble swap, or any permutation inside a
16-value scale block applied to both operands, would leave every GEMM result unchanged.

For a 32-bit word holding e2m1 values v0..v7 (v0 in the low nibble) the kernel produces four fp16
pairs; pair i is (v_i, v_{i+4}), built by
    t = word << (12 - 4i);  bits = (t & 0x80008000) | ((t >> 3) & 0x0E000E00)
read as two fp16 numbers (= value * 2^-14 exactly), then multiplied by 2^14 and by the scale in
fp16 (round-to-nearest; both products exact). The 16-byte chunk the kernel stores therefore holds
v0, v4, v1, v5, v2, v6, v3, v7: `CHUNK_ORDER`.
"""

from __future__ import annotations

import torch

CHUNK_ORDER = (0, 4, 1, 5, 2, 6, 3, 7)  # chunk position -> index of the value in the word


def decode_words(words: torch.Tensor) -> torch.Tensor:
    """int64 tensor of 32-bit words [N] -> fp16 [N, 8], values in chunk order, before scaling,
    as the kernel's integer steps and its multiply by 2^14 produce them."""
    w = words.to(torch.int64) & 0xFFFFFFFF
    halves = []
    for i in range(4):
        t = (w << (12 - 4 * i)) & 0xFFFFFFFF
        bits = (t & 0x80008000) | ((t >> 3) & 0x0E000E00)
        halves += [bits & 0xFFFF, bits >> 16]
    raw = torch.stack(halves, dim=-1)  # fp16 bit patterns, 0..0xFFFF
    signed = torch.where(raw >= 0x8000, raw - 0x10000, raw).to(torch.int16)
    return signed.view(torch.float16) * torch.tensor(2.0 ** 14, dtype=torch.float16)


def expand_words(words: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """`decode_words` times each word's fp16 scale [N] (the kernel's second multiply)."""
    return decode_words(words) * scales.to(torch.float16)[:, None]


def words_from_bytes(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [..., 4n] -> int64 words [..., n], little-endian (how a 32-bit load sees them)."""
    b = packed.to(torch.int64).reshape(*packed.shape[:-1], -1, 4)
    return b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24)
