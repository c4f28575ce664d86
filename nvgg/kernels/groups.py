"""What both architectures' kernels know of a group: its device tensors in the competition's layout
(checked before any kernel reads them through raw pointers) and the first columns of the int64
device group table every kernel reads (one row a group).

The competition's data tuple is `(abc, sfasfb, sfasfb_reordered, problem_sizes)` with, per group,
a [m, k/2, 1] and b [n, k/2, 1] (float4_e2m1fn_x2, two e2m1 a byte, the lower k in the low
nibble), c [m, n, 1] fp16, and the scales in cuBLAS's blocked layout: the 4 × 128 scales of a
128-row × 64-k block are one 512-byte chunk, so scale (i, j) sits at
((i // 128) · rest_k + j // 4) · 512 + (i % 32) · 16 + ((i % 128) // 32) · 4 + j % 4, rest_k = k / 64.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Columns of the group table shared by every kernel: the group's packed A and B, blocked scales and
# C (addresses), then its shape. A kernel may append columns of its own after these.
COL_A, COL_B, COL_SFA, COL_SFB, COL_C, COL_M, COL_N, COL_K = range(8)
BASE_COLS = 8


@dataclass
class GroupTensors:
    """One group's device tensors, in the competition's layout (validated by `group_tensors`)."""

    a: torch.Tensor  # (m, k/2) bytes
    b: torch.Tensor  # (n, k/2) bytes
    sfa: torch.Tensor  # blocked scales view; its data_ptr is the start of the blocked storage
    sfb: torch.Tensor
    c: torch.Tensor  # (m, n) fp16
    m: int
    n: int
    k: int

    def base_row(self) -> list[int]:
        """The group's first BASE_COLS table columns (addresses, then m, n, k)."""
        return [self.a.data_ptr(), self.b.data_ptr(), self.sfa.data_ptr(), self.sfb.data_ptr(), self.c.data_ptr(),
                self.m, self.n, self.k]


def blocked_strides(k: int) -> tuple[int, ...]:
    """Byte strides of the competition's blocked scale view [32, 4, rest_rows, 4, rest_k] (batch last)."""
    rest_k = -(-k // 64)
    return (16, 4, rest_k * 512, 1, 512)


def blocked_bytes(rows: int, k: int) -> int:
    """Bytes of one operand's blocked scales: whole 128-row × 64-k chunks of 512 bytes."""
    return -(-rows // 128) * -(-k // 64) * 512


def group_tensors(data, g: int) -> GroupTensors:
    """Group g of the competition's data tuple, checked against the layout the kernels assume."""
    (a, b, c), (sfa, sfb), (m, n, k, l) = data[0][g], data[2][g], data[3][g]
    if l != 1:
        raise ValueError(f"group {g}: l={l}; the kernels take l = 1")
    a2, b2, c2 = a[:, :, 0], b[:, :, 0], c[:, :, 0]
    for name, t, rows, cols in (("a", a2, m, k // 2), ("b", b2, n, k // 2), ("c", c2, m, n)):
        if tuple(t.shape) != (rows, cols) or t.stride() != (cols, 1):
            raise ValueError(f"group {g}: {name} must be a contiguous ({rows}, {cols}) matrix, "
                             f"got shape {tuple(t.shape)} strides {t.stride()}")
    if c2.dtype != torch.float16:
        raise ValueError(f"group {g}: c must be float16, got {c2.dtype}")
    for name, t in (("sfa", sfa), ("sfb", sfb)):
        if t.element_size() != 1 or tuple(t.stride()[:5]) != blocked_strides(k):
            raise ValueError(f"group {g}: {name} is not in the blocked scale layout "
                             f"(strides {t.stride()}, expected {blocked_strides(k)} + batch)")
    # the copy engine reads each tensor from its base address: 16-byte aligned at least (CUDA driver
    # API, cuTensorMapEncodeTiled), 32 for the packed 4-bit operands the sm_100a kernel declares
    for name, t, align in (("a", a2, 32), ("b", b2, 32), ("sfa", sfa, 16), ("sfb", sfb, 16), ("c", c2, 16)):
        if t.data_ptr() % align:
            raise ValueError(f"group {g}: {name} must start at a {align}-byte aligned address, got {t.data_ptr():#x}")
    return GroupTensors(a2.view(torch.uint8), b2.view(torch.uint8), sfa, sfb, c2, m, n, k)


def all_groups(data) -> list[GroupTensors]:
    return [group_tensors(data, g) for g in range(len(data[3]))]
