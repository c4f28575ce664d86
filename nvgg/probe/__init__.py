"""Phase marks inside a user's own kernel: what `nvgg profile --phases --submission` reads.

A kernel marks the moments it wants to see. Each mark reads the GPU's global nanosecond timer
(%globaltimer, on sm_90 and sm_100 alike) and lane 0 of the calling warp stores it in the CTA's
row of an int64 buffer, one buffer a launch:

    buffer[cta, column]     cta: the linear block index x + nx·(y + ny·z); column: the mark's
                            place in the probe's list of marks; a mark never reached stays 0;
                            a mark reached twice keeps the later time
    shape [rows + 1, marks] row `rows` is the overflow row: a CTA at or past `rows` stores no
                            time and raises that row's column to its index + 1, so the report can
                            say how many CTAs the buffer missed instead of the kernel writing past it

nvgg's own instrumented kernels write the same kind of buffer (nvgg/kernels/phase_slots.py) and
nvgg/profiling/phases.py reads both.

Use (CuTe DSL; CUDA C++ through `cuda_source()` and nvgg_probe.cuh, same buffer):

    try:                                 # nvgg present: `nvgg profile --phases` turns marks on
        from nvgg.probe import Probe
    except ImportError:                  # absent (the competition's harness): no marks at all
        Probe = None
    PHASES = Probe("gemm", ("start", "maps_ready", "first_mma", "mainloop_done")) if Probe else None

    def mark(probes, name, warp=None):    # plain Python, run while the kernel is traced
        if probes is not None:
            PHASES.mark(probes, name, warp=warp)

    probes = PHASES.cute_buffer(ctas) if PHASES else None    # host, every call: None when off
    ...  kernel(..., probes: Optional[cute.Tensor]):  ...  mark(probes, "first_mma", warp=0)

Off (nvgg absent, or present without NVGG_PROBES=1 in the environment) the buffer is None, the
kernel takes no buffer and no mark is traced: the same PTX as the kernel without marks.
On, `buffer` hands out views of a pool that nvgg zeroes between calls (no GPU work inside a
call): ask for a new buffer on every call, one a launch.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources

from .error import ProbeError

ENV = "NVGG_PROBES"      # "1": this process records marks (nvgg's profiling child sets it)
MAX_MARKS = 32
HEADER = "nvgg_probe.cuh"

# The names nvgg's own kernels mark (kernels/phase_slots.py), suggested so that a user's report
# and nvgg's read side by side; any identifier will do.
VOCABULARY = {
    "start": "the CTA's first instruction",
    "barriers_ready": "pipeline barriers (mbarriers) initialised",
    "tmem_ready": "tensor memory allocated (sm_100)",
    "maps_ready": "tensor maps (TMA descriptors) made, replaced or prefetched",
    "first_tma_issued": "the first TMA load issued",
    "first_tma_landed": "the first TMA load's data in shared memory (its barrier passed)",
    "first_mma": "the first MMA issued",
    "mainloop_done": "the last MMA of the CTA's last tile issued",
    "epilogue_done": "the last tile's stores issued",
    "exit": "the CTA's last instruction",
}

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def enabled() -> bool:
    return os.environ.get(ENV, "") == "1"


_PROBES: dict[str, tuple[str, ...]] = {}


class Probe:
    """One kernel's marks: `kernel` names it in the report (and is the C++ namespace of its
    columns), `marks` are the moments in the order the kernel is expected to reach them."""

    def __init__(self, kernel: str, marks):
        if not isinstance(kernel, str) or not _IDENT.match(kernel):
            raise ProbeError(f"probe name {kernel!r} is not an identifier: use letters, digits and _ (e.g. 'grouped_gemm')")
        if isinstance(marks, str) or not all(isinstance(m, str) for m in marks):
            raise ProbeError(f"probe {kernel!r}: marks must be a list of names, e.g. ('start', 'first_mma', 'exit')")
        marks = tuple(marks)
        if not 1 <= len(marks) <= MAX_MARKS:
            raise ProbeError(f"probe {kernel!r} has {len(marks)} marks: give 1 to {MAX_MARKS}")
        for name in marks:
            if not _IDENT.match(name):
                raise ProbeError(f"probe {kernel!r}: mark {name!r} is not an identifier: use letters, digits and _")
            if marks.count(name) > 1:
                raise ProbeError(f"probe {kernel!r} names mark {name!r} {marks.count(name)} times: every mark needs "
                                 "its own name (its own column)")
        known = _PROBES.setdefault(kernel, marks)
        if known != marks:
            raise ProbeError(f"two probes are named {kernel!r} with different marks ({', '.join(known)} and "
                             f"{', '.join(marks)}): give each kernel its own probe name")
        self.kernel, self.marks = kernel, marks

    def __repr__(self) -> str:
        return f"Probe({self.kernel!r}, {self.marks!r})"

    @property
    def on(self) -> bool:
        return enabled()

    def column(self, name: str) -> int:
        try:
            return self.marks.index(name)
        except ValueError:
            raise ProbeError(f"probe {self.kernel!r} has no mark {name!r}: its marks are {', '.join(self.marks)}") from None

    # --- host side -------------------------------------------------------------------------

    def buffer(self, ctas: int):
        """The int64 [ctas + 1, marks] CUDA tensor one launch of `ctas` CTAs writes, or None
        when probes are off. Ask on every call."""
        if not enabled():
            return None
        if isinstance(ctas, bool) or not isinstance(ctas, int) or ctas < 1:
            raise ProbeError(f"probe {self.kernel!r}: buffer(ctas) needs the launch's CTA count (an int >= 1), got {ctas!r}")
        return session().take(self, ctas)

    def cute_buffer(self, ctas: int):
        """`buffer` as a CuTe DSL tensor with a dynamic row count (one compiled kernel serves
        every grid), or None when off."""
        buf = self.buffer(ctas)
        if buf is None:
            return None
        from cutlass.cute.runtime import from_dlpack
        return from_dlpack(buf, assumed_align=8).mark_compact_shape_dynamic(mode=0, stride_order=(0, 1))

    def cuda_source(self) -> str:
        """CUDA C++ text to put before a kernel that marks: nvgg_probe.cuh (NVGG_PROBES defined
        when probes are on) and the probe's columns as `namespace <kernel> { enum ... }`, so
        `NVGG_MARK(probes, <kernel>::first_mma)` names a column; an unknown name fails to compile."""
        columns = ", ".join(f"{name} = {i}" for i, name in enumerate(self.marks))
        switch = f"#ifndef NVGG_PROBES\n#define NVGG_PROBES {1 if enabled() else 0}\n#endif\n"
        return (f"{switch}{header_text()}\nnamespace {self.kernel} {{ enum : int {{ {columns}, "
                f"SLOTS = {len(self.marks)} }}; }}\n")

    # --- device side (CuTe DSL) ------------------------------------------------------------

    def mark(self, probes, name: str, *, warp: int | None = None, loc=None, ip=None) -> None:
        """In a CuTe DSL kernel: record now as `name` in this CTA's row of `probes` (the kernel's
        buffer argument). Lane 0 of every warp that reaches the call writes; `warp=w` keeps only
        warp w of the CTA (for code all warps run). With `probes` None, nothing is emitted."""
        if probes is None:
            return
        from . import cute as _cute
        _cute.mark(probes, self.column(name), len(self.marks), warp, loc=loc, ip=ip)


def header_text() -> str:
    return resources.files(__package__).joinpath(HEADER).read_text()


def include_dir() -> str:
    """The folder holding nvgg_probe.cuh, for nvcc's -I (or load_inline's extra_include_paths)."""
    return str(resources.files(__package__))


# --- the process's buffers ----------------------------------------------------------------


@dataclass
class Launch:
    """One buffer handed out: the probe it belongs to and the tensor a launch writes."""

    probe: Probe
    tensor: object  # torch.Tensor [rows + 1, marks], int64, on the GPU

    def to_dict(self) -> dict:
        return {"kernel": self.probe.kernel, "marks": list(self.probe.marks), "rows": self.tensor.tolist()}


class Session:
    """The buffers of this process's calls. `begin()` zeroes the pool and starts a call;
    `next_call()` starts another without waiting (back-to-back calls); `calls()` lists each
    call's launches. Buffers are views of one zeroed pool, so asking for one launches nothing;
    where a call needs more than the pool holds, a new zeroed chunk is made and the pool is
    enlarged at the next `begin()`."""

    CHUNK = 1 << 16  # int64 elements (512 KiB)
    # launches a call may hand out before the pool starts over on its own: a process with probes
    # on that nothing profiles (no begin()) would otherwise keep every buffer it ever asked for
    MAX_LAUNCHES = 4096

    def __init__(self, device: str = "cuda"):
        self.device = device
        self._chunks, self._used, self._launches = [], 0, [[]]

    def take(self, probe: Probe, ctas: int):
        import torch
        if sum(len(c) for c in self._launches) >= self.MAX_LAUNCHES:
            self.begin()
        need = (ctas + 1) * len(probe.marks)
        if not self._chunks or self._used + need > self._chunks[-1].numel():
            self._chunks.append(torch.zeros(max(need, self.CHUNK), dtype=torch.int64, device=self.device))
            self._used = 0
        view = self._chunks[-1][self._used:self._used + need].view(ctas + 1, len(probe.marks))
        self._used += need
        self._launches[-1].append(Launch(probe, view))
        return view

    def begin(self) -> None:
        """Zero the pool (on the current stream, before the call) and start a new call."""
        import torch
        if len(self._chunks) > 1:
            total = sum(c.numel() for c in self._chunks)
            self._chunks = [torch.zeros(total, dtype=torch.int64, device=self.device)]
        elif self._chunks:
            self._chunks[0].zero_()
        self._used, self._launches = 0, [[]]

    def next_call(self) -> None:
        self._launches.append([])

    def calls(self) -> list[list[Launch]]:
        return [list(c) for c in self._launches]


_SESSION: Session | None = None


def session() -> Session:
    global _SESSION
    if _SESSION is None:
        _SESSION = Session()
    return _SESSION
