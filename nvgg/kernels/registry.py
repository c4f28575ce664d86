"""The kernel families, found rather than listed: a new architecture is one folder.

Each folder under nvgg/kernels/ that holds a `family.py` (sm90/, sm100/) is one architecture: that
file defines its KernelFamily subclass (family.py), which carries the architecture's tables beside
its builds. The registry imports those files on first use, and the generic code asks it instead of
naming an architecture: the cute backend for the family of an arch, `nvgg compile` for the archs
it can target, Nsight Compute for the counters of a compute capability. `register` adds a family
defined elsewhere (a test's).

A family is a class here, read without building it; the cute backend builds one where it runs it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
from functools import lru_cache

import nvgg.kernels as kernels
from ..errors import NvggError
from .family import KernelFamily

_REGISTERED: list[type[KernelFamily]] = []  # added by `register`, beside the folders' own


def families() -> tuple[type[KernelFamily], ...]:
    """Every kernel family, by compute capability."""
    return tuple(sorted((*_found(tuple(kernels.__path__)), *_REGISTERED), key=lambda cls: cls.capability))


def archs() -> tuple[str, ...]:
    """The archs the families build for, by compute capability."""
    return tuple(cls.arch for cls in families())


def get(arch: str) -> type[KernelFamily] | None:
    """The family that builds for `arch`, or None."""
    return next((cls for cls in families() if cls.arch == arch), None)


def for_capability(major: int) -> type[KernelFamily] | None:
    """The family of the GPUs of compute capability `major` (the lowest minor where several are), or None."""
    return next((cls for cls in families() if cls.capability[0] == major), None)


def register(cls: type[KernelFamily]) -> type[KernelFamily]:
    """Add a family defined outside nvgg/kernels/ until `unregister`; NvggError where it is not a
    whole family or another one builds for its arch."""
    _check(cls, families())
    _REGISTERED.append(cls)
    return cls


def unregister(cls: type[KernelFamily]) -> None:
    """Take back a family `register` added."""
    _REGISTERED.remove(cls)


@lru_cache(maxsize=None)
def _found(folders: tuple[str, ...]) -> tuple[type[KernelFamily], ...]:
    """The families the family.py of each folder in `folders` (nvgg.kernels's path) defines."""
    found: list[type[KernelFamily]] = []
    for folder in pkgutil.iter_modules(list(folders), f"{kernels.__name__}."):
        name = f"{folder.name}.family"
        if not folder.ispkg or importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(name)
        own = [cls for cls in vars(module).values()
               if inspect.isclass(cls) and issubclass(cls, KernelFamily) and cls.__module__ == name]
        if not own:
            raise NvggError(f"{module.__file__} defines no kernel family (a subclass of kernels/family.py's "
                            "KernelFamily)")
        for cls in own:
            _check(cls, found)
            found.append(cls)
    return tuple(found)


def _check(cls, others) -> None:
    """A whole family (every abstract member given), for an arch no other family builds for."""
    if not (inspect.isclass(cls) and issubclass(cls, KernelFamily)):
        raise NvggError(f"{cls!r} is not a kernel family (a subclass of kernels/family.py's KernelFamily)")
    if inspect.isabstract(cls):
        raise NvggError(f"the kernel family {cls.__module__}.{cls.__qualname__} leaves "
                        f"{', '.join(sorted(cls.__abstractmethods__))} undefined")
    twin = next((other for other in others if other.arch == cls.arch), None)
    if twin is not None:
        raise NvggError(f"two kernel families build for {cls.arch}: {twin.__module__}.{twin.__qualname__} and "
                        f"{cls.__module__}.{cls.__qualname__}")
