"""A kernel family's space: every point of its persistent build's knobs (family.py `Knob`) for a
case, each either refused with the family's own reason (never compiled) or a build; the point the
family picks itself marked as the default (and added where its knobs' values miss it), with the
family's model of the point's time where it has one (sm_100a: the B200 model).

`nvgg compile --space` builds every point on the CPU; a sweep (`nvgg tune`) times them.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import Callable

from .kernels.family import KernelFamily
from .cases import Case
from .errors import NvggError


@dataclass(frozen=True)
class Point:
    """One combination of a family's knobs for one case."""

    case: str
    knobs: tuple[tuple[str, object], ...]
    refused: str = ""                  # the family's reason, "" where the point builds
    default: bool = False              # the family's own choice for this case
    estimate_us: float | None = None   # the family's model of its time, where it has one

    @property
    def values(self) -> dict:
        return dict(self.knobs)

    @property
    def name(self) -> str:
        return " ".join(f"{k}={_text(v)}" for k, v in self.knobs)

    def to_dict(self) -> dict:
        return {"case": self.case, "point": self.values, "name": self.name, "refused": self.refused,
                "default": self.default, "estimate_us": self.estimate_us}


def _text(value) -> str:
    return {True: "yes", False: "no"}.get(value, str(value)) if isinstance(value, bool) else str(value)


def points(family: KernelFamily, case: Case, sms: int | None = None) -> list[Point]:
    """Every point of `family`'s knobs for `case`, in the knobs' order, refused or not; the
    family's default marked (appended where the knobs' values do not hold it)."""
    knobs = family.knobs()
    if not knobs:
        raise NvggError(f"the {family.arch} kernels declare no choices to sweep")
    names = [k.name for k in knobs]
    default = family.default_point(case, sms)
    combos = [dict(zip(names, values)) for values in itertools.product(*(k.values for k in knobs))]
    if default not in combos:
        combos.append(default)
    out = []
    for combo in combos:
        _, why = family.point_build(case, combo, sms)
        out.append(Point(case.id, tuple(combo.items()), why or "", combo == default,
                         None if why else family.point_estimate(case, combo, sms)))
    return out


@dataclass
class Built:
    """A point compiled (or refused, or failed to compile): its kernels' resources where built."""

    point: Point
    kernels: list = field(default_factory=list)  # KernelInfo.to_dict() of each build
    error: str = ""                               # the compiler's refusal of a point the family accepted

    def to_dict(self) -> dict:
        return dict(self.point.to_dict(), kernels=self.kernels, error=self.error)


def compile_all(family: KernelFamily, cases: list[Case], arch: str, sms: int | None = None,
                on_point: Callable[[Built], None] | None = None, jobs: int = 1) -> list[Built]:
    """Every case's points, the accepted ones compiled for `arch` (cached: a build several cases
    share compiles once), in order; a build the compiler fails is that point's error, not the end.
    `jobs` > 1: the distinct builds first, in that many worker processes at once (procs.Pool, no
    GPU asked of them), then the points answered from them; `on_point` as each case's points are
    answered, in order."""
    found = [(case, point) for case in cases for point in points(family, case, sms)]
    builds: dict = {}  # the build's configuration -> (case, point values) of its first point
    for case, point in found:
        if not point.refused:
            config, _ = family.point_build(case, point.values, sms)
            builds.setdefault(config, (case, point.values))
    done = _compile_builds(arch, builds, sms, jobs) if jobs > 1 and len(builds) > 1 else None
    out = []
    for case, point in found:
        built = Built(point)
        if not point.refused:
            if done is not None:
                built.kernels, built.error = done[family.point_build(case, point.values, sms)[0]]
            else:
                try:
                    built.kernels = [k.to_dict() for k in family.compile_point(case, arch, point.values, sms)]
                except NvggError:
                    raise
                except Exception as exc:  # the DSL or ptxas refusing a build: that point's answer
                    built.error = _first(exc)
        out.append(built)
        if on_point:
            on_point(built)
    return out


def default_jobs() -> int:
    """Compiles side by side: one a CPU core this process may use, 16 at most (each a CuTe DSL
    compile in a process of its own)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(16, cores))


def build(arch: str, case: Case, point: dict, sms: int | None) -> list[dict]:
    """In a worker: our kernel family's build of `point` for `case` (kernels/cache.py keeps it),
    its kernels as KernelInfo.to_dict()."""
    from .backends import cute
    return [k.to_dict() for k in cute.family(arch).compile_point(case, arch, point, sms)]


def _compile_builds(arch: str, builds: dict, sms: int | None, jobs: int) -> dict:
    """Each build (config -> (case, point)) compiled in `jobs` workers at once: config ->
    (kernels, error). NvggError (a cache that cannot be written, say) as raised."""
    from . import procs
    todo = list(builds.items())

    def one(server: int, item) -> tuple[list, str]:
        _, (case, values) = item
        try:
            return pool.call(f"compile:{server}", build, arch=arch, case=case, point=values, sms=sms), ""
        except procs.ChildError as exc:  # the DSL or ptxas refusing a build: that point's answer
            return [], str(exc)
        except procs.ChildFailure as exc:
            return [], f"the compiler's process ended: {exc}"

    with procs.Pool(spare=False) as pool:
        answers = procs.take_turns(todo, min(jobs, len(todo)), one, "nvgg-compile")
    return {config: answer for (config, _), answer in zip(todo, answers)}


def _first(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
