"""What a row runs: its backend, strategy and the persistent kernel's tensor-map mode, chosen (the
machine's defaults where none is named) and checked in one place, before anything is compiled or
allocated. Every command and the data path ask here; nothing else checks these choices."""

from __future__ import annotations

import torch

from . import backends, strategies
from .backends.base import Backend, arch_of
from .cases import Case
from .errors import NvggError
from .kernels.tensormaps import MODES as TENSORMAP_MODES


def default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def default_backend(device: torch.device) -> str:
    """The backend a row runs when none is named: our kernels where they run, else the library's."""
    return backends.best(device)


def default_strategy(backend: Backend, device: torch.device) -> str:
    if device.type != "cuda":
        return "sequential"
    return "persistent" if backend.supports_grouped else "graph"


def _arch(device: torch.device) -> str | None:
    return arch_of(device) if device.type == "cuda" else None


def _known(mode: str) -> None:
    if mode not in TENSORMAP_MODES:
        raise NvggError(f"unknown tensor-map mode {mode!r}: choose {' or '.join(TENSORMAP_MODES)}")


def choose(strategy: str | None, backend: str | None, tensormaps: str | None, device: torch.device) -> tuple[str, str]:
    """The (strategy, backend) names a row runs (this machine's best where either is not named),
    with the tensor-map mode checked against them. NvggError for an unknown name or a mode that
    does not apply."""
    be = backends.get(backend or default_backend(device))
    st = strategies.get(strategy or default_strategy(be, device))
    check_tensormaps(tensormaps, strategy=st, backend=be.name, arch=_arch(device))
    return st.name, be.name


def check_tensormaps(mode: str | None, *, strategy: strategies.Strategy, backend: str, arch: str | None = None) -> None:
    """The tensor-map mode: only our persistent kernel has one to choose, and only the modes its
    family on `arch` builds (None: not known yet)."""
    if mode is None:
        return
    _known(mode)
    if backend != "cute":
        raise NvggError(f"the tensor-map mode chooses how our persistent kernel gets its tensor maps; the {backend} "
                        "backend has none: use the cute backend")
    if not strategy.grouped:
        raise NvggError(f"the tensor-map mode chooses the persistent kernel's tensor maps; the {strategy.name} strategy "
                        "launches one kernel per group with its maps as kernel parameters: drop the mode or use the "
                        "persistent strategy")
    if arch is not None:
        from .backends.cute import family
        family(arch).mode(mode)  # the family's own modes (KernelFamily.mode)


def check_modes_apply(modes: list[str] | None, strategy_names: list[str]) -> None:
    """Tensor-map modes given for a set of strategies: one of them must be the persistent one."""
    for mode in modes or []:
        _known(mode)
    if modes and "persistent" not in strategy_names:
        raise NvggError("the tensor-map modes choose the persistent kernel's tensor maps: add the persistent strategy")


def select(case: Case, strategy, backend, tensormaps: str | None, device: torch.device, point: dict | None = None):
    """The backend and strategy of a row (names, None for this machine's defaults, or objects),
    checked for the case on the device; `point` a point of the cute kernels' space (nvgg/space.py)
    the persistent build follows. NvggError if unsupported."""
    if isinstance(backend, Backend):
        if tensormaps is not None or point:
            raise NvggError("pass the tensor-map mode or a point with the backend's name, not with a backend object")
        be = backend
    else:
        be = backends.get(backend or default_backend(device))
    st = strategy if isinstance(strategy, strategies.Strategy) else strategies.get(strategy or default_strategy(be, device))
    if point:
        if tensormaps is not None or not st.grouped:
            raise NvggError("a point fixes the persistent kernel's build, its tensor maps included: run it with the "
                            "persistent strategy and no tensor-map mode of its own")
        be = backends.get(be.name, point=point)
    if tensormaps is not None:
        check_tensormaps(tensormaps, strategy=st, backend=be.name, arch=_arch(device))
        be = backends.get(be.name, tensormaps=tensormaps)
    be.check(case, device)
    st.check(be, case, device)
    return be, st


def for_arch(strategy: str, backend: str, tensormaps: str | None, arch: str):
    """The backend and strategy `nvgg compile` builds for `arch` (no GPU needed)."""
    st = strategies.get(strategy)
    be = backends.get(backend)
    check_tensormaps(tensormaps, strategy=st, backend=be.name, arch=arch)
    be = backends.get(be.name, tensormaps=tensormaps)
    if be.name != "cute":
        raise NvggError(f"the {be.name} backend runs library kernels nvgg does not compile: use the cute backend")
    return be, st
