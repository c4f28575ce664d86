"""The sm_100a kernel's launch without CuTe DSL: its tensor maps encoded and its kernel parameters
packed in plain Python, from what the compile recorded (config.py names, the entry's info.json).

The DSL's host function (`Nvfp4GemmSm100.__call__`, compiled) makes five tensor maps from a group's
pointers and shape at every call, packs 19 kernel parameters and launches with a cluster. nvgg does
the same work once, at prepare time, so a warm process neither imports the DSL nor compiles
anything. What it packs, in the entry's parameter order (sizes from the PTX, `info["params"]`):

  0, 1    12 B  the two tiled MMAs' run-time fields (accumulate, negate flags): all zero at launch
  2       128 B map of the MMA's A = the competition's B (n rows × k e2m1)
  3       8 B   (n, k) int32: the dynamic sizes of that operand's coordinate tensor
  4, 5          map of the MMA's B = A (m rows × k e2m1); (m, k)
  6, 7          map of B's scales (256 int16 per 128-row × 64-k block); (⌈n/128⌉, ⌈k/64⌉)
  8, 9          map of A's scales; (⌈m/128⌉, ⌈k/64⌉)
  10, 11        map of D = Cᵀ (n × m fp16, n contiguous); (n, m)
  12      4 B   k / 256 (stages a tile)
  13-17   8 B   the runs, tiles, group, map-table and phase pointers (persistent; else 0)
  18      4 B   map slots a CTA (device mode)

(Read from the DSL's generated host code and checked, byte for byte, against what that code
passes to the launch for every build and case: tests/test_sm100_launch.py.)

A tensor map (CUtensorMap, 128 bytes) as the DSL's host code writes it: words 0-7, the rest zero
(the DSL leaves words 8-15 unwritten; the copy engine reads the first 64 bytes' fields). The
fields that depend on the group: word 0 the address; word 1 bits 32-63 the byte stride of
dimension 1 over 16 and bit 21 set when the tensor spans 128 KiB or more; word 2 (and 3) bits
0-31 the strides of dimensions 2 (and 3) over 16; word 4 the sizes of dimensions 0 and 1 minus
one, word 5 those of dimensions 2 and 3. Everything else (data type, swizzle, box, fill) is the
build's and comes from a template: the DSL's own encoder's maps for a reference group with those
fields cleared, recorded at compile time (`templates`), where the compile also checks that this
encoder reproduces the DSL's maps for two reference groups.
"""

from __future__ import annotations

import struct

from ..tensormaps import MAP_WORDS
from . import config as cfg

# the kernel's parameters, as sizes in bytes (a build whose PTX declares others is refused)
PARAM_SIZES = (12, 12, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 4, 8, 8, 8, 8, 8, 4)
MAP_PARAMS = (2, 4, 6, 8, 10)  # the five maps, in map order (B, A, SFB, SFA, C)
LARGE_TENSOR_BYTES = 1 << 17  # bit 21 of word 1: the tensor spans at least this many bytes
SF_BLOCK_BYTES = 512  # scales of a 128-row × 64-k block (kernels/groups.py, blocked layout)
_U64 = (1 << 64) - 1


def map_geometry(which: int, m: int, n: int, k: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """(sizes, byte strides of dimensions 1.., element bits) of map `which` (0-4: B, A, SFB, SFA,
    C) of a group: the operands are k × rows e2m1, the scales 256 int16 a block × ⌈k/64⌉ blocks
    × ⌈rows/128⌉ (the DSL reads them as 16-bit elements), D = Cᵀ n × m fp16."""
    if which in (0, 1):
        rows = n if which == 0 else m
        return (k, rows), (k // 2,), 4
    if which in (2, 3):
        rows = n if which == 2 else m
        kb = -(-k // 64)
        return (SF_BLOCK_BYTES // 2, kb, -(-rows // 128)), (SF_BLOCK_BYTES, kb * SF_BLOCK_BYTES), 16
    if which == 4:
        return (n, m), (2 * n,), 16
    raise ValueError(f"map {which}: there are {cfg.MAPS} maps a group")


def span_bytes(which: int, m, n, k):
    """Bytes from map `which`'s address to the end of its last element, the span `encode` compares
    with LARGE_TENSOR_BYTES, in closed form from the group's m, n, k: plain ints here, the kernel's
    64-bit integers in the device mode's map update (nvfp4_gemm.py), so that both decide bit 21
    alike. Only products, sums and floor divisions of non-negative values (the same in both)."""
    if which in (0, 1):  # e2m1 rows of k / 2 bytes
        return (n if which == 0 else m) * (k // 2)
    if which in (2, 3):  # whole 512-byte blocks of 128 rows × 64 k
        rows = n if which == 2 else m
        return (rows + 127) // 128 * ((k + 63) // 64) * SF_BLOCK_BYTES
    if which == 4:  # D = Cᵀ, fp16
        return 2 * m * n
    raise ValueError(f"map {which}: there are {cfg.MAPS} maps a group")


def template(words, rank: int) -> list[int]:
    """A map's build-constant words 0-7: `words` with the group's fields cleared (see the module
    docstring)."""
    w = [int(x) & _U64 for x in list(words)[:8]]
    w[0] = 0
    w[1] &= 0xFFFFFFFF & ~(1 << 21)
    for d in range(2, rank):  # strides of dimensions 2, 3
        w[d] &= ~0xFFFFFFFF & _U64
    w[4] = 0
    if rank > 2:
        w[5] &= 0 if rank > 3 else ~0xFFFFFFFF & _U64
    return w


def encode(tmpl, address: int, sizes, strides, bits: int) -> list[int]:
    """Map words 0-15 (unsigned) from a template and a tensor's address, sizes (elements, innermost
    first) and byte strides of dimensions 1.."""
    rank = len(sizes)
    w = list(tmpl[:8]) + [0] * (MAP_WORDS - 8)
    span = sum((s - 1) * st for s, st in zip(sizes[1:], strides)) + (sizes[0] * bits + 7) // 8
    w[0] = ((address >> 4) & ((1 << 53) - 1)) << 4
    w[1] |= (int(span >= LARGE_TENSOR_BYTES) << 21) | ((strides[0] // 16) << 32)
    for d in range(2, rank):
        w[d] |= (strides[d - 1] // 16) & 0xFFFFFFFF
    dims = [s - 1 for s in sizes] + [0] * (4 - rank)
    w[4] = (dims[0] & 0xFFFFFFFF) | ((dims[1] & 0xFFFFFFFF) << 32)
    if rank > 2:
        w[5] |= (dims[2] & 0xFFFFFFFF) | ((dims[3] & 0xFFFFFFFF) << 32)
    return [x & _U64 for x in w]


def group_maps(templates, addresses, m: int, n: int, k: int) -> list[list[int]]:
    """The five maps of a group (`addresses`: b, a, sfb, sfa, c), words 0-15 each."""
    out = []
    for which in range(cfg.MAPS):
        sizes, strides, bits = map_geometry(which, m, n, k)
        out.append(encode(templates[which], addresses[which], sizes, strides, bits))
    return out


def map_addresses(group) -> tuple[int, int, int, int, int]:
    """A group's tensors in map order: the MMA's A (the competition's B), B (A), their scales, C."""
    return (group.b.data_ptr(), group.a.data_ptr(), group.sfb.data_ptr(), group.sfa.data_ptr(), group.c.data_ptr())


def pack(templates, group, pointers=(0, 0, 0, 0, 0), visits: int = 1) -> list[bytes]:
    """The kernel's 19 parameters for `group` (the per-group kernel's group, or the persistent
    kernel's template group 0), `pointers` the persistent kernel's runs, tiles, group table, map
    table or workspace, and phase buffer (0: none)."""
    m, n, k = group.m, group.n, group.k
    maps = group_maps(templates, map_addresses(group), m, n, k)
    pair = lambda a, b: struct.pack("<ii", a, b)  # noqa: E731
    kb = -(-k // 64)
    params = [bytes(12), bytes(12)]
    for words, sizes in zip(maps, (pair(n, k), pair(m, k), pair(-(-n // 128), kb), pair(-(-m // 128), kb), pair(n, m))):
        params += [struct.pack("<16Q", *words), sizes]
    params.append(struct.pack("<I", k // cfg.TILE_K))
    params += [struct.pack("<Q", p) for p in pointers]
    params.append(struct.pack("<I", visits))
    return params


def check_layout(sizes) -> str | None:
    """Why a compiled entry's parameters (sizes in bytes, its PTX's) are not the ones `pack`
    writes, or None."""
    if tuple(sizes) != PARAM_SIZES:
        return f"the kernel declares parameters of {list(sizes)} bytes; nvgg packs {list(PARAM_SIZES)}"
    return None


def param_size(decl: str) -> int:
    """Bytes of one PTX parameter declaration: `.param .align A .b8 name[N]` or `.param .u32 name`."""
    if decl.endswith("]"):
        return int(decl[decl.rindex("[") + 1:-1])
    for kind, size in ((".u64", 8), (".b64", 8), (".s64", 8), (".u32", 4), (".b32", 4), (".s32", 4)):
        if kind in decl:
            return size
    raise ValueError(f"unknown parameter declaration {decl!r}")
