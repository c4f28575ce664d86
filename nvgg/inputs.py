"""Inputs identical to the competition's, and the scale-factor layouts.

`generate(case, device)` follows the competition generator's algorithm draw for draw, so on CUDA
it returns the same bits for the same case and seed. The order of random draws is the contract:

    torch.manual_seed(seed)
    for each group (l = 1):
        a   = randint(255, (l, m, k/2), uint8, cuda) & 0xBB  -> permute (m, k/2, l), float4_e2m1fn_x2
        b   = the same with n
        c   = randn((l, m, n), float16, cuda)                -> permute (m, n, l)
        sfa = randint(1, 3, (l, m, k/16), int8, CPU generator) -> float8_e4m3fn -> (m, k/16, l), on CPU
        sfb = the same with n
        sfa_blocked, then sfb_blocked (see `to_blocked`)

Nibble order: the first element of a float4_e2m1fn_x2 byte is its LOW nibble. The mask 0xBB keeps
each nibble's sign and two low bits, so the competition's values are 0, ±0.5, ±1, ±1.5.

Blocked scale layout (cuBLAS's "block scaling factors layout", what the B200 MMA reads): per batch
a tensor of shape (rest_mn, rest_k, 32, 4, 4) in memory, rest_mn = ceil(mn/128), rest_k =
ceil(k/16/4), exposed as the permuted view (32, 4, rest_mn, 4, rest_k, l). Row i, scale column j
lives at [i % 32, (i % 128) // 32, i // 128, j % 4, j // 4, b]; so a 128-row x 64-element block's
scales are one contiguous 512-byte chunk. Padding rows hold the random fill, never zero.

On a CPU every draw comes from the CPU generator, so the bits differ from the competition's
(`same_bits_as_competition(device)` says which; the CLI prints it).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import torch

from .cases import Case

SF_VEC = 16      # elements per e4m3 scale along K
BATCH = 15       # inputs per timing measurement, as the competition's timer uses
SEED_STEP = 42   # the competition advances the seed by 42 before generating each timing input


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def same_bits_as_competition(device: torch.device | str) -> bool:
    return torch.device(device).type == "cuda"


def _fp4(l: int, mn: int, k: int, device) -> torch.Tensor:
    raw = torch.randint(255, (l, mn, k // 2), dtype=torch.uint8, device=device) & 0xBB
    return raw.permute(1, 2, 0).view(torch.float4_e2m1fn_x2)


def _scales(l: int, mn: int, k: int, generator: torch.Generator | None = None) -> torch.Tensor:
    # drawn from the CPU generator and left on the CPU, as the competition does
    drawn = torch.randint(1, 3, (l, mn, _ceil_div(k, SF_VEC)), dtype=torch.int8, generator=generator)
    return drawn.to(torch.float8_e4m3fn).permute(1, 2, 0)


def cpu_scales(case: Case, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The plain scales (sfa, sfb) of every group that `generate` on a GPU draws for `seed`: there
    they are the only draws of the CPU generator, so a generator of their own seeded alike (the
    same Mersenne Twister, seeded the same way as `torch.manual_seed` seeds the default one) gives
    the same bits, and the inputs of a batch can draw theirs at once, on threads."""
    gen = torch.Generator().manual_seed(seed)
    return [(_scales(1, m, k, gen), _scales(1, n, k, gen)) for m, n, k in case.groups]


def to_blocked(plain: torch.Tensor, mn: int, k: int, device, generator: torch.Generator | None = None) -> torch.Tensor:
    """The blocked copy of plain scales [mn, k/16, l]; its fill is drawn first, as the competition
    does (from `generator`, else the default one)."""
    l = plain.shape[2]
    sf_k = _ceil_div(k, SF_VEC)
    rest_mn, rest_k = _ceil_div(mn, 128), _ceil_div(sf_k, 4)
    shape = (l, rest_mn, rest_k, 32, 4, 4)
    blocked = torch.randint(1, 3, shape, dtype=torch.int8, device=device, generator=generator).to(torch.float8_e4m3fn)
    # storage [b, r, c, i % 32, (i % 128) // 32, j % 4] holds row i = 128r + 32((i % 128) // 32) + i % 32 and
    # column j = 4c + j % 4: permuted to (b, r, (i % 128) // 32, i % 32, c, j % 4) it is the plain scales
    # padded to whole blocks; the fill is copied out, the scales written over its top-left, copied back
    as_plain = blocked.view(torch.uint8).permute(0, 1, 4, 3, 2, 5)
    padded = as_plain.reshape(l, rest_mn * 128, rest_k * 4)  # a copy (the dims do not merge)
    padded[:, :mn, :sf_k] = plain.to(device).view(torch.uint8).permute(2, 0, 1)
    as_plain.copy_(padded.view(l, rest_mn, 4, 32, rest_k, 4))
    blocked = blocked.permute(3, 4, 1, 5, 2, 0)
    return blocked


def from_blocked(blocked: torch.Tensor, mn: int, k: int) -> torch.Tensor:
    """Plain [mn, k/16] scales (batch 0) back from the blocked view, on the blocked tensor's device."""
    sf_k = _ceil_div(k, SF_VEC)
    rows = blocked.shape[2] * 128
    cols = blocked.shape[4] * 4
    # (i%32, (i%128)//32, i//128, j%4, j//4) -> (i//128, (i%128)//32, i%32, j//4, j%4)
    plain = blocked[..., 0].permute(2, 1, 0, 4, 3).reshape(rows, cols)
    return plain[:mn, :sf_k]


def generate(case: Case, device: torch.device | str = "cuda", seed: int | None = None,
             scales: list[tuple[torch.Tensor, torch.Tensor]] | None = None):
    """The competition's data tuple (abc, sfasfb, sfasfb_reordered, problem_sizes) for one seed.
    `scales`: the plain scales already drawn for this seed (`cpu_scales`; a GPU device only)."""
    device = torch.device(device)
    seed = case.seed if seed is None else seed
    if scales is not None and device.type != "cuda":
        raise ValueError("scales drawn ahead are the CPU generator's draws of a GPU run; on a CPU they interleave")
    torch.manual_seed(seed)
    abc, sf, sf_blocked, sizes = [], [], [], []
    l = 1
    for g, (m, n, k) in enumerate(case.groups):
        a = _fp4(l, m, k, device)
        b = _fp4(l, n, k, device)
        c = torch.randn((l, m, n), dtype=torch.float16, device=device).permute(1, 2, 0)
        sfa, sfb = scales[g] if scales is not None else (_scales(l, m, k), _scales(l, n, k))
        sfa_blocked = to_blocked(sfa, m, k, device)
        sfb_blocked = to_blocked(sfb, n, k, device)
        abc.append((a, b, c))
        sf.append((sfa, sfb))
        sf_blocked.append((sfa_blocked, sfb_blocked))
        sizes.append((m, n, k, l))
    return abc, sf, sf_blocked, sizes


# the CPU generator's draws of the last case's batch, (groups, seed) -> cpu_scales: the rows of a
# sweep or a compare run one case's points one after another in a worker, and the draws are the
# slow part of their setup (lab log)
_DRAWN: dict[tuple, list] = {}


def drawn_scales(case: Case, seeds: list[int]) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    """`cpu_scales` of each seed, drawn on threads the first time and kept for the case's next
    rows (`_DRAWN`); each call gets copies of its own (a row's inputs are refilled in place),
    written over the copies a finished row gave back (`give_back`) where there are any."""
    groups = tuple(case.groups)
    if any(key[0] != groups for key in _DRAWN):  # one case's draws kept: rows of one case follow each other
        _DRAWN.clear()
        _SPARE.clear()
    missing = [s for s in dict.fromkeys(seeds) if (groups, s) not in _DRAWN]
    if missing:
        with ThreadPoolExecutor(min(len(missing), os.cpu_count() or 1)) as pool:  # torch's ops let go of the GIL
            for s, scales in zip(missing, pool.map(lambda s: cpu_scales(case, s), missing)):
                _DRAWN[(groups, s)] = scales
    return [[(_copy_of(sfa), _copy_of(sfb)) for sfa, sfb in _DRAWN[(groups, s)]] for s in seeds]


# CPU scale tensors of finished rows, by (shape, strides, dtype), to be written over by the next
# row's copies: a fresh copy's pages are faulted in anew each row, which cost several times more
# with a second worker beside it on another GPU, so that two GPUs' sweep was no faster than one's
# (lab log)
_SPARE: dict[tuple, list[torch.Tensor]] = {}


def _copy_of(t: torch.Tensor) -> torch.Tensor:
    spare = _SPARE.get((tuple(t.shape), t.stride(), t.dtype))
    if not spare:
        return t.clone()
    out = spare.pop()
    _host_copy(out, t)
    return out


def _host_copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """A CPU copy on this thread alone (numpy's), as bytes: torch's CPU copy goes wide over its
    thread pool, which the workers beside this one on the other GPUs' rows contend for."""
    try:
        import numpy as np
    except ImportError:  # torch runs without numpy
        _copy(dst, src)
        return
    np.copyto(dst.view(torch.uint8).numpy(), src.view(torch.uint8).numpy())


def give_back(batch: list) -> None:
    """A finished row's batch (nothing of it used again): its CPU scales serve the next row's
    copies of `drawn_scales` instead of new allocations."""
    for data in batch:
        for pair in data[1]:
            for t in pair:
                if t.device.type == "cpu":
                    _SPARE.setdefault((tuple(t.shape), t.stride(), t.dtype), []).append(t)


def generate_batch(case: Case, device: torch.device | str = "cuda", count: int = BATCH) -> list:
    """The inputs of one timing measurement: `count` tuples, seeds case.seed + 42·i for i = 1..count.
    On a GPU the CPU generator's draws (the plain scales, the slow part of a warm run: lab log)
    are made for all inputs at once on threads, then the GPU's in order."""
    device = torch.device(device)
    seeds = [case.seed + SEED_STEP * (i + 1) for i in range(count)]
    if device.type != "cuda" or count < 2:
        return [generate(case, device, seed=s) for s in seeds]
    drawn = drawn_scales(case, seeds)
    return [generate(case, device, seed=s, scales=sc) for s, sc in zip(seeds, drawn)]


def memory_needed(case: Case, count: int, reference_bytes: int = 8) -> int:
    """Bytes a run of `count` inputs holds at its peak, roughly: the inputs (A, B, both scale
    layouts, C: about case.bytes each), and the reference's decoded copies of the largest group
    (A and B expanded at `reference_bytes` an element, and its product)."""
    largest = max((m + n) * k + m * n for m, n, k in case.groups)
    return count * case.bytes + largest * reference_bytes


def memory_free(device: torch.device) -> int | None:
    """Free bytes on the device (the GPU's, or the host's available memory); None where unknown."""
    if device.type == "cuda":
        # NVML first: asking CUDA would start a CUDA context in a process that only schedules rows
        # (nvgg's own, checking a row before its worker runs it); both count the whole device
        from .profiles import nvml_query, visible_index
        index = visible_index(device.index or 0)
        free = None if index is None else nvml_query(lambda nvml, handle: nvml.nvmlDeviceGetMemoryInfo(handle).free, index)
        free = int(free) if free is not None else torch.cuda.mem_get_info(device)[0]
        if torch.cuda.is_initialized():  # what this process's caching allocator holds unused is free to it
            free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return free
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


# the timed repetitions' inputs: new values (seeds past the checked batch's) written over the
# checked ones in place, so prepared launches keep their addresses and a call that returns what
# it computed for the checked inputs is wrong
TIMED_SEED_OFFSET = 1_000_003


def refill(case: Case, data, index: int, round_: int = 0) -> None:
    """Overwrite input `index` of the batch in place with new values (A, B, both scale layouts),
    and fill its outputs with NaN. The values are the competition's kinds (masked e2m1 pairs,
    scales 1 or 2) drawn on the inputs' device from a generator of their own: they need only be
    new, not the competition's bits, and the CPU generator the competition draws scales from is
    the slow part of a warm run (lab log)."""
    device = data[0][0][0].device
    gen = torch.Generator(device=device)
    gen.manual_seed(case.seed + TIMED_SEED_OFFSET * (round_ + 1) + SEED_STEP * (index + 1))  # new values each round
    for (a, b, c), (sfa, sfb), (sfa_b, sfb_b), (m, n, k, l) in zip(data[0], data[1], data[2], data[3]):
        for packed in (a, b):
            raw = packed.view(torch.uint8)
            raw.copy_(torch.randint(255, raw.shape, dtype=torch.uint8, device=device, generator=gen) & 0xBB)
        c.fill_(float("nan"))
        for plain, blocked, mn in ((sfa, sfa_b, m), (sfb, sfb_b, n)):
            drawn = torch.randint(1, 3, plain.shape, dtype=torch.int8, device=device, generator=gen)
            _copy(plain, drawn.to(torch.float8_e4m3fn))
            _copy(blocked, to_blocked(drawn.to(torch.float8_e4m3fn), mn, k, device, generator=gen))


def _copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    # as bytes: every dtype here is one byte an element (fp4 pairs, e4m3), and copy_ has no fp4 kernel
    dst.view(torch.uint8).copy_(src.view(torch.uint8))


def outputs(data) -> list[torch.Tensor]:
    """The C tensors a run writes, as the competition's custom_kernel returns them."""
    return [c for (_, _, c) in data[0]]
