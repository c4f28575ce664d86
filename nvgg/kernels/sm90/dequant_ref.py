"""A PyTorch model of the kernels' e2m1 decode (ptx.decode_word), bit for bit, so the decode can
be checked on its own for every input: a consistent nibble swap, or any permutation inside a
16-value scale block applied to both operands, would leave every GEMM result unchanged.

For a 32-bit word holding e2m1 values v0..v7 (v0 in the low nibble) the kernel splits the word
into its even and odd nibbles,
    e = word & 0x0F0F0F0F    (v0, v2, v4, v6)      o = word & 0xF0F0F0F0    (v1, v3, v5, v7)
and builds each output register from one of them shifted up by `up` (ptx._DECODE_PAIRS):
    x = ((src << up) | (src << up >> 3)) & DECODE_KEEP
whose halves read as fp16 are the two values times 2^-14; then multiplies by 2^14 and by the
scale in fp16 (round-to-nearest; both products are exact). The four registers hold v0, v4 | v1,
v5 | v2, v6 | v3, v7: `CHUNK_ORDER`.
"""

from __future__ import annotations

import torch

from .ptx import _DECODE_PAIRS, DECODE_KEEP, F16X2_TWO_TO_14

CHUNK_ORDER = (0, 4, 1, 5, 2, 6, 3, 7)  # position in the 4 registers -> index of the value in the word
_SOURCES = {"e": 0x0F0F0F0F, "o": 0xF0F0F0F0}


def fp16_bits(words: torch.Tensor) -> torch.Tensor:
    """int64 tensor of 32-bit words [N] -> the kernel's fp16 bit patterns before its multiplies
    [N, 8] (int16), register order: each value times 2^-14."""
    w = words.to(torch.int64) & 0xFFFFFFFF
    halves = []
    for _, source, up in _DECODE_PAIRS:
        src = w & _SOURCES[source]
        shifted = (src << up) & 0xFFFFFFFF
        x = (shifted | (shifted >> 3)) & DECODE_KEEP
        halves += [x & 0xFFFF, x >> 16]
    return torch.stack(halves, dim=-1).to(torch.int32).to(torch.int16)


def decode_words(words: torch.Tensor) -> torch.Tensor:
    """int64 tensor of 32-bit words [N] -> fp16 [N, 8], values in register order, as the kernel
    produces them with a scale of 1 (its placed bits, then its multiply by 2^14)."""
    return fp16_bits(words).view(torch.float16) * _two_to_14()


def expand_words(words: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The kernel's values for `words` [N] with fp16 scales [N]: placed bits, a multiply by 2^14,
    then one by the scale."""
    return decode_words(words) * scales.to(torch.float16)[:, None]


def _two_to_14() -> torch.Tensor:
    return torch.tensor([F16X2_TWO_TO_14 & 0xFFFF], dtype=torch.int32).to(torch.int16).view(torch.float16)[0]


def words_from_bytes(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [..., 4n] -> int64 words [..., n], little-endian (how a 32-bit load sees them)."""
    b = packed.to(torch.int64).reshape(*packed.shape[:-1], -1, 4)
    return b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24)
