"""What a kernel family is: the cute backend's kernels for one architecture, and everything nvgg
knows of that architecture.

The cute backend (cute.py) checks, compiles and launches through the family of the GPU's arch
(Sm90Kernels in kernels/sm90/family.py, Sm100Kernels in kernels/sm100/family.py), found by
registry.py; a new architecture is one more folder under nvgg/kernels/ with its family.py, and
the abstract members below are what its subclass must provide.

Besides its builds, a family carries its architecture's tables, which the generic code reads from
it and names nowhere else: its compute capability and cards, the GPU profile `nvgg compile` checks
occupancy against, the columns its kernels add to `nvgg compile`'s table, its model's name, its
ncu counters and its phase slots (`phase_layout`).

Each family builds two kinds of kernel: a per-group one (one launch a group: the sequential,
multistream and graph strategies) and a persistent one (one launch for all groups: the persistent
strategy), the latter also in an instrumented build that writes phase timestamps
(kernels/phase_slots.py).

The choices a caller may leave open have one default across families: `tensormaps=None` is the
family's `default_mode` (`mode`), and an instrumented launch is made in stream order unless asked
(`programmatic=False`).

`data` is the competition's tuple (see backends/base.py); launches are zero-argument callables.
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Callable

from ..cases import Case
from ..errors import NvggError

if TYPE_CHECKING:
    import torch

    from .phase_slots import SlotLayout


Launch = Callable[[], None]


@dataclass(frozen=True)
class KernelInfo:
    """Resources of one compiled kernel, read from the compiler's output."""

    name: str
    arch: str
    registers: int
    smem_bytes: int
    threads: int
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(out.pop("extra"))
        return out


@dataclass(frozen=True)
class NcuCounters:
    """The Nsight Compute counters that mean something on a family's architecture: the pipe its
    MMAs run on (what a compute-bound verdict reads) and, where it has one, tensor memory; names as
    `ncu --query-metrics --chip CHIP` lists them (profiling/ncu.py reads them)."""

    arch: str
    chip: str  # ncu's name of the architecture's chip, for --query-metrics
    tensor_pipe: str  # a counter: cycles the MMA pipe was active
    tensor_label: str
    tensor_memory: str | None = None  # a counter: cycles tensor memory was active
    tmem_pipe: str | None = None  # a counter: instructions the tensor-memory pipe executed


@dataclass(frozen=True)
class Knob:
    """One choice of a family's persistent build and the values a sweep of it tries (nvgg/space.py)."""

    name: str
    values: tuple


class KernelFamily(abc.ABC):
    """One architecture's kernels behind the cute backend: its shape rules, its builds, their launches."""

    @property
    @abc.abstractmethod
    def arch(self) -> str:
        """The target the family compiles for ("sm_90a", "sm_100a")."""

    # ---- the architecture's tables: class attributes, read from the class (registry.py) without
    # building the family

    @property
    @abc.abstractmethod
    def capability(self) -> tuple[int, int]:
        """The compute capability (major, minor) of the GPUs the family runs on: (9, 0) for sm_90a."""

    @property
    @abc.abstractmethod
    def gpus(self) -> str:
        """Those GPUs in words, for a sentence that tells a user which card runs the family ("H100/H200")."""

    @property
    @abc.abstractmethod
    def profile(self) -> str:
        """The GPU profile (profiles/NAME.toml) whose limits and SM count `nvgg compile` builds and
        checks occupancy against where no GPU is present."""

    # the fields of the family's KernelInfo.extra that `nvgg compile`'s table shows, (field,
    # heading) each, after the threads column (every family's kernels report registers, shared
    # memory and threads)
    columns: tuple[tuple[str, str], ...] = ()
    # what `point_estimate`'s times come from, in words ("the B200 model"); None: the family has no model
    model: str | None = None
    # the counters Nsight Compute reads on the family's GPUs (NcuCounters); None: ncu reads no MMA
    # pipe there
    ncu: NcuCounters | None = None

    @property
    @abc.abstractmethod
    def tensormap_modes(self) -> tuple[str, ...]:
        """The persistent kernel's tensor-map modes, a subset of kernels/tensormaps.MODES:
        "device" (a CTA rewrites its maps in the kernel on each change of group) and "host" (every
        group's maps encoded at prepare time, the kernel only reads them)."""

    @property
    @abc.abstractmethod
    def default_mode(self) -> str:
        """The tensor-map mode that `tensormaps=None` stands for in every method taking one."""

    @property
    @abc.abstractmethod
    def programmatic(self) -> bool:
        """Whether the persistent kernel's timed launches are programmatic (they may start while the
        kernel before them in the stream finishes); the phase profiler then also measures an
        instrumented launch made right behind another."""

    # a point of the family's space (its knobs' values) the persistent build follows instead of the
    # family's own choice (`with_point`); None: the family chooses
    point: dict | None = None

    def with_point(self, point: dict | None) -> "KernelFamily":
        """This family with its persistent build fixed to `point` (a dict of every knob's value);
        NvggError where the point names other knobs."""
        if not point:
            return self
        names = [k.name for k in self.knobs()]
        if sorted(point) != sorted(names):
            raise NvggError(f"a point of the {self.arch} persistent kernel sets {', '.join(names)}; got "
                            f"{', '.join(point) or 'nothing'}")
        import copy
        fixed = copy.copy(self)
        fixed.point = dict(point)
        return fixed

    def mode(self, tensormaps: str | None = None) -> str:
        """The tensor-map mode `tensormaps` names: the point's, else `default_mode`, for None."""
        if tensormaps is None:
            return (self.point or {}).get("tensormaps", self.default_mode)
        if tensormaps not in self.tensormap_modes:
            raise NvggError(f"the {self.arch} persistent kernel has tensor maps {' or '.join(self.tensormap_modes)} "
                            f"only, not {tensormaps!r}")
        return tensormaps

    @abc.abstractmethod
    def shape_problem(self, case: Case, *, grouped: bool) -> str | None:
        """Why the per-group (`grouped` False) or the persistent kernel cannot run `case`, or None."""

    @abc.abstractmethod
    def compile(self, case: Case, arch: str, *, grouped: bool = False, sms: int | None = None,
                tensormaps: str | None = None) -> list[KernelInfo]:
        """Every distinct build `case`'s launches run, compiled for `arch` without a GPU (cached),
        one KernelInfo each. `sms`: the GPU's SM count where the choice of build depends on it
        (None: a nominal one); `tensormaps`: the persistent build's mode."""

    @abc.abstractmethod
    def tiles(self, case: Case, *, grouped: bool = False, sms: int | None = None) -> list[int]:
        """Output tiles each launch covers: one entry a group, or one for the persistent launch."""

    @abc.abstractmethod
    def group_launcher(self, data, g: int) -> Launch:
        """The launch of group `g` alone (everything but the launch done here, at prepare time)."""

    @abc.abstractmethod
    def grouped_launcher(self, data, tensormaps: str | None = None) -> Launch:
        """The persistent kernel's timed launch over every group of `data`."""

    @abc.abstractmethod
    def phase_launcher(self, data, tensormaps: str | None = None,
                       programmatic: bool = False) -> tuple[Launch, torch.Tensor]:
        """The persistent kernel's instrumented build over `data`, on the timed build's grid: a
        launch and the int64 [ctas, layout.slots] buffer each launch fills (`phase_layout`). The
        launch zeroes the buffer first; with `programmatic` it is made as the timed launches are,
        and the caller zeroes the buffer (a zeroing kernel just before would keep the launch from
        starting behind the kernel before it)."""

    @abc.abstractmethod
    def phase_layout(self, tensormaps: str | None = None) -> SlotLayout:
        """The slots of the instrumented build's buffer in that tensor-map mode."""

    # ---- the persistent build's space (nvgg/space.py): its knobs, the build a point names, the
    # family's own choice. A family without knobs declares none; its space is its one build.

    def knobs(self) -> tuple[Knob, ...]:
        """The persistent build's choices a sweep may make, each with the values it tries."""
        return ()

    def point_build(self, case: Case, point: dict, sms: int | None = None) -> tuple[object | None, str | None]:
        """(the persistent build's configuration `point` names for `case`, None), or (None, why the
        family refuses it: the configuration's own checks, or a group it cannot take)."""
        raise NvggError(f"the {self.arch} kernels declare no choices to sweep")

    def default_point(self, case: Case, sms: int | None = None) -> dict:
        """The point the family picks itself for `case` (a heuristic, a model): what runs by default."""
        return {}

    def point_estimate(self, case: Case, point: dict, sms: int | None = None) -> float | None:
        """The family's model of a point's time in µs, where it has one (None)."""
        return None

    def compile_point(self, case: Case, arch: str, point: dict, sms: int | None = None) -> list[KernelInfo]:
        """The build `point` names, compiled for `arch` without a GPU (cached); NvggError if refused."""
        config, why = self.point_build(case, point, sms)
        if why:
            raise NvggError(why)
        return self._compile_config(config, arch)

    def _compile_config(self, config, arch: str) -> list[KernelInfo]:
        raise NvggError(f"the {self.arch} kernels declare no choices to sweep")


def group_problem(case: Case, is_valid, kernel: str) -> str | None:
    """The first group a kernel cannot take, as a sentence: `is_valid(m, n, k)` says why (its words
    "the kernel" become `kernel`), prefixed with the group where the case has several."""
    for i, (m, n, k) in enumerate(case.groups):
        reason = is_valid(m, n, k)
        if reason:
            where = f"group {i}: " if case.g > 1 else ""
            return f"{where}{reason.replace('the kernel', kernel)}"
    return None


def checked_group(data, g: int, is_valid, kernel: str):
    """Group g's device tensors (kernels/groups.py), refused with a sentence where the kernel cannot
    take its shape (`is_valid`, worded as in `group_problem`) or the tensors break the layout."""
    from ..errors import NvggError
    from . import groups as kgroups

    m, n, k, _ = data[3][g]
    reason = is_valid(m, n, k)
    if reason:
        raise NvggError(f"group {g}: {reason.replace('the kernel', kernel)}")
    try:
        return kgroups.group_tensors(data, g)
    except ValueError as exc:
        raise NvggError(f"the cute backend cannot read the inputs: {exc}") from None


def kernel_info(entry, extra: dict) -> KernelInfo:
    """KernelInfo of a compiled kernel (a kernels.cache.Entry): resources read from its cubin, the
    compile times, its PTX, cubin and SASS files (SASS where nvdisasm is installed), and `extra`."""
    from . import cache as kcache, tools

    res = kcache.resources(entry)
    cubin = entry.directory / "kernel.cubin"
    sass = tools.sass(cubin)
    return KernelInfo(
        name=entry.info["name"], arch=entry.info["arch"], registers=res["registers"], smem_bytes=res["smem_bytes"],
        threads=entry.info["threads"],
        extra={"compile_s": round(entry.compile_s, 4), "cache_hit": entry.hit,
               "cold_compile_s": round(entry.info["cold_compile_s"], 3), "frame_bytes": res["frame_bytes"],
               **extra, "ptx": str(entry.directory / "kernel.ptx"), "cubin": str(cubin),
               "sass": str(sass) if sass else None, "cache_dir": str(entry.directory),
               **({} if sass else {"sass_missing": "nvdisasm not found: pip install nvidia-cuda-nvdisasm (or put "
                                                   "a CUDA toolkit's nvdisasm on PATH) to get the SASS"})})


def zeroed_first(kernel: Launch, buffer, programmatic: bool):
    """An instrumented launch and its phase buffer: the buffer zeroed before each launch, or, where
    `programmatic`, left to the caller (a zeroing kernel just before would keep the launch from
    starting behind the kernel before it)."""
    if programmatic:
        return kernel, buffer

    def launch() -> None:
        buffer.zero_()
        kernel()

    return launch, buffer

