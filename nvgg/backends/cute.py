"""Backend `cute`: our CuTe DSL kernels, one family per architecture (registry.py finds them:
kernels/sm90/family.py for sm_90a, kernels/sm100/family.py for sm_100a; each module says what its
kernels are).

The family is the GPU's (or, for `nvgg compile`, the target arch's), a KernelFamily (family.py),
unless the backend is given one of its own: `CuteBackend(family=Sm90Kernels(readiness="grid"))`
runs that family's builds on sm_90a and the default family elsewhere (benchmarks and tests compare
builds so).
`tensormaps` is the persistent kernel's tensor-map mode (None: the family's default); it applies to
the persistent strategy alone, and a mode a family's kernel has not is refused before anything runs.
"""

from __future__ import annotations

import torch

from ..cases import Case
from ..errors import NvggError, no_gpu
from ..kernels import registry
from .base import Backend, KernelInfo, Launch, arch_of
from ..kernels.family import KernelFamily


def family(arch: str) -> KernelFamily:
    """The kernel family that builds for `arch` (registry.py), built afresh."""
    found = registry.get(arch)
    if found is None:
        raise NvggError(f"the cute backend has kernels for {', '.join(registry.archs())}; {arch} has none: use the "
                        "torch backend" + ("" if arch.startswith("sm_") else " (archs are named like sm_100a)"))
    return found()


class CuteBackend(Backend):
    name = "cute"
    supports_grouped = True

    def __init__(self, tensormaps: str | None = None, family: KernelFamily | None = None, point: dict | None = None):
        # the mode as asked for (None: each family's default), checked by selection.check_tensormaps
        self.tensormaps = tensormaps
        self.variant = family  # the family run on its own arch instead of that arch's default one
        self.point = point     # a point of the family's space its persistent build follows (nvgg/space.py)

    def mode(self, arch: str) -> str:
        """The persistent kernel's tensor-map mode on `arch` (KernelFamily.mode)."""
        return self.kernels(arch).mode(self.tensormaps)

    def check(self, case: Case, device: torch.device) -> None:
        if device.type != "cuda" or not torch.cuda.is_available():
            cards = "; ".join(f"{cls.arch}: {cls.gpus}" for cls in registry.families())
            raise no_gpu(f"the cute backend needs a CUDA GPU ({cards}) and none is visible: use the torch backend")
        arch = arch_of(device)
        if registry.get(arch) is None:
            raise NvggError(f"the cute backend runs on {', '.join(registry.archs())}; this GPU is {arch}: use the "
                            "torch backend")
        reason = self.kernels(arch).shape_problem(case, grouped=False)
        if reason:
            raise NvggError(reason)

    def check_grouped(self, case: Case, device: torch.device) -> None:
        """What the persistent strategy adds to `check`: the tensor-map mode and the grouped
        kernel's own limits."""
        arch = arch_of(device)
        self.mode(arch)
        reason = self.kernels(arch).shape_problem(case, grouped=True)
        if reason:
            raise NvggError(reason)

    def compile(self, case: Case, arch: str, *, grouped: bool = False, sms: int | None = None) -> list[KernelInfo]:
        kernels = self.kernels(arch)
        reason = kernels.shape_problem(case, grouped=grouped)
        if reason:
            raise NvggError(reason)
        if grouped:
            return kernels.compile(case, arch, grouped=True, sms=sms, tensormaps=self.mode(arch))
        return kernels.compile(case, arch, grouped=False, sms=sms)

    def tiles(self, case: Case, *, grouped: bool = False, sms: int | None = None, arch: str | None = None) -> list[int]:
        if arch is None:
            raise NvggError("the cute backend's tiles depend on the arch: pass arch="
                            + " or ".join(repr(a) for a in registry.archs()))
        return self.kernels(arch).tiles(case, grouped=grouped, sms=sms)

    def group_launcher(self, data, g: int) -> Launch:
        return self._family(data).group_launcher(data, g)

    def grouped_launcher(self, data) -> Launch:
        kernels, arch = self._family(data), self._arch(data)
        return kernels.grouped_launcher(data, self.mode(arch))

    def phase_launcher(self, data, **options):
        """The persistent kernel's instrumented build: (launch, phase buffer), see
        KernelFamily.phase_launcher (`options`: its `programmatic`)."""
        kernels, arch = self._family(data), self._arch(data)
        return kernels.phase_launcher(data, self.mode(arch), **options)

    def phase_layout(self, device: torch.device):
        """The slot layout of the instrumented build's buffer on this GPU (kernels/phase_slots.py)."""
        arch = arch_of(device)
        return self.kernels(arch).phase_layout(self.mode(arch))

    @staticmethod
    def _arch(data) -> str:
        return arch_of(data[0][0][2].device)

    def kernels(self, arch: str) -> KernelFamily:
        """The kernel family this backend builds for `arch`: the one it was given, where that one
        builds for `arch`, else the arch's own."""
        chosen = self.variant if self.variant is not None and self.variant.arch == arch else family(arch)
        return chosen.with_point(self.point)

    def _family(self, data) -> KernelFamily:
        return self.kernels(self._arch(data))
