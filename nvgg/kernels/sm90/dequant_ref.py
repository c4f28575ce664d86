"""A PyTorch model of the kernels' e2m1 decode (ptx.decode_word), bit for bit, so the decode can
be checked on its own for every input: a consistent nibble swap, or any permutation inside a
16-value scale block applied to both operands, would leave every GEMM result unchanged.

For a 32-bit word holding e2m1 values v0..v7 (v0 in the low nibble) the kernel builds two words
of e4m3 bytes,
    even = ((word << 4) & 0x80808080) | ((word << 2) & 0x1C1C1C1C)   (v0, v2, v4, v6)
    odd  = (word & 0x80808080)        | ((word >> 2) & 0x1C1C1C1C)   (v1, v3, v5, v7)
each byte being its e2m1 value times 2^-6 read as e4m3; converts them to fp16 two at a time
(exact) and multiplies by 64 * scale in fp16 (round-to-nearest; the product is exact). The four
registers hold v0, v2 | v4, v6 | v1, v3 | v5, v7: `CHUNK_ORDER`.
"""

from __future__ import annotations

import torch

from .ptx import F16X2_SIXTY_FOUR

CHUNK_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # position in the 4 registers -> index of the value in the word


def e4m3_words(words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 tensor of 32-bit words [N] -> the kernel's two e4m3 words (even, odd) of each."""
    w = words.to(torch.int64) & 0xFFFFFFFF
    return ((w << 4) & 0x80808080) | ((w << 2) & 0x1C1C1C1C), (w & 0x80808080) | ((w >> 2) & 0x1C1C1C1C)


def e4m3_bytes(words: torch.Tensor) -> torch.Tensor:
    """int64 tensor of 32-bit words [N] -> the kernel's e4m3 bytes [N, 8] (uint8), register order."""
    even, odd = e4m3_words(words)
    return torch.stack([(x >> (8 * i)) & 0xFF for x in (even, odd) for i in range(4)], dim=-1).to(torch.uint8)


def decode_words(words: torch.Tensor) -> torch.Tensor:
    """int64 tensor of 32-bit words [N] -> fp16 [N, 8], values in register order, as the kernel
    produces them with a scale of 1 (its conversion, then its multiply by 64)."""
    raw = e4m3_bytes(words).view(torch.float8_e4m3fn).to(torch.float16)
    return raw * _sixty_four()


def expand_words(words: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The kernel's values for `words` [N] with fp16 scales [N]: conversion, then one multiply by
    64 * scale."""
    raw = e4m3_bytes(words).view(torch.float8_e4m3fn).to(torch.float16)
    return raw * (scales.to(torch.float16) * _sixty_four())[:, None]


def _sixty_four() -> torch.Tensor:
    return torch.tensor([F16X2_SIXTY_FOUR & 0xFFFF], dtype=torch.int32).to(torch.int16).view(torch.float16)[0]


def words_from_bytes(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [..., 4n] -> int64 words [..., n], little-endian (how a 32-bit load sees them)."""
    b = packed.to(torch.int64).reshape(*packed.shape[:-1], -1, 4)
    return b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24)


def prmt(a: torch.Tensor, b: torch.Tensor, selector: int) -> torch.Tensor:
    """PTX prmt.b32 (default mode) on int64 tensors of 32-bit words: byte i of the result is byte
    (selector >> 4i) & 7 of the eight bytes of b:a (a's bytes are 0-3)."""
    both = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    return sum(both[(selector >> (4 * i)) & 7] << (8 * i) for i in range(4))


def decode_half(words: torch.Tensor, scales: torch.Tensor, selector: int) -> torch.Tensor:
    """ptx.decode_half on int64 words [N] with fp16 scales [N]: fp16 [N, 4], its two registers'
    values (low half first), by the same e4m3 bytes, prmt, conversions and multiply."""
    both = prmt(*e4m3_words(words), selector)
    raw = torch.stack([(both >> (8 * i)) & 0xFF for i in range(4)], dim=-1).to(torch.uint8)
    return raw.view(torch.float8_e4m3fn).to(torch.float16) * (scales.to(torch.float16) * _sixty_four())[:, None]
