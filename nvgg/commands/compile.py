"""`nvgg compile`: build a strategy's kernels for a target arch without a GPU; report resources."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from .. import space as spacemod, profiles
from .. import occupancy
from ..kernels import registry
from ..errors import NvggError
from .common import (CasesFile, JsonOut, Progress, Shape, TensorMaps, check_distinct, check_writable, command,
                     emit_json, mode_value, pick_cases, read_files, within)

# the table's columns: a kernel's field and its heading; the family's own (KernelFamily.columns)
# go between the two groups
COLUMNS = {"case": "case", "name": "kernel", "registers": "regs", "smem_bytes": "smem B", "threads": "threads"}
LAST_COLUMNS = {"compile_s": "build s", "theoretical_occupancy": "occupancy", "occupancy_limited_by": "limited by"}


@command
def compile_cmd(arch: Annotated[str, typer.Option("--arch", metavar="ARCH", help="Target: the arch of one of the kernel families (another is refused with their list).")] = "sm_90a",
                case: Annotated[Optional[str], typer.Option("--case", metavar="IDS", help="Case id(s), all, benchmarks or tests.")] = None,
                strategy: Annotated[str, typer.Option("--strategy", metavar="NAME", help="persistent, multistream, graph or sequential.")] = "persistent",
                backend: Annotated[str, typer.Option("--backend", metavar="NAME", help="The backend whose kernels to build.")] = "cute",
                tensormaps: TensorMaps = None, shape: Shape = None, cases_file: CasesFile = None,
                space: Annotated[bool, typer.Option("--space", help="Every point of the persistent kernel's choices (its knobs), each built or refused with the family's reason; the family's own choice marked.")] = False,
                jobs: Annotated[Optional[int], typer.Option("--jobs", metavar="N", callback=within(1, 256), help="With --space: the distinct builds compiled in N processes at once (1 to 256; default: one a CPU core, 16 at most).")] = None,
                json_out: JsonOut = None) -> None:
    """Compile only (no GPU needed): resources, tensor memory, cluster, stages, occupancy per kernel."""
    from .. import selection  # here, not at the top: commands/__init__.py
    from ..result import document
    family = registry.get(arch)
    if family is None:
        raise NvggError(f"--arch {arch!r}: choose {' or '.join(sorted(registry.archs()))}")
    check_writable("--json", json_out, stdout_ok=True)
    check_distinct(("--json", json_out), reads=read_files(cases_file=cases_file))
    os.environ.setdefault("CUTE_DSL_ARCH", arch)
    picked = pick_cases(case, shape, cases_file)
    if jobs is not None and not space:
        raise NvggError("--jobs compiles the builds of --space side by side: add --space, or drop --jobs")
    if space and (strategy != "persistent" or tensormaps):
        raise NvggError("--space sweeps the persistent kernel's choices, the tensor-map mode among them: drop "
                        "--strategy and --tensormaps")
    be, st = selection.for_arch(strategy, backend, mode_value(tensormaps), arch)
    limits = profiles.get(family.profile)
    if space:
        _space(be.kernels(arch), picked, arch, limits, json_out, jobs or spacemod.default_jobs())
        return
    kernels = []
    for c in picked:
        for info in be.compile(c, arch, grouped=st.grouped, sms=limits.sm_count):
            occ = occupancy.of_kernel(info, limits)
            kernels.append(dict(info.to_dict(), case=c.id, strategy=st.name, profile=limits.name,
                                theoretical_occupancy=occ.theoretical, blocks_per_sm=occ.blocks_per_sm,
                                occupancy_limited_by=occ.limited_by))
    if emit_json(json_out, document("compile", arch=arch, kernels=kernels)):
        return
    typer.echo(_table(kernels, {**COLUMNS, **dict(family.columns), **LAST_COLUMNS}))
    typer.echo(f"target {arch}, occupancy against the {limits.name} profile ({limits.sm_count} SMs); "
               "--json FILE (or -) for the PTX and SASS paths and the rest")


def register(app: typer.Typer) -> None:
    app.command("compile")(compile_cmd)


def _table(kernels: list[dict], columns: dict[str, str]) -> str:
    """A row a kernel, its name (with its build: 40-70 characters) a numbered note under the
    table, so the table fits 120 columns; `columns`: the fields shown (where a kernel has one) and
    their headings."""
    from ..report import tabulate as table
    shown = [c for c in columns if any(k.get(c) is not None for k in kernels)]
    names: dict[str, int] = {}

    def cell(k: dict, c: str) -> str:
        if c == "name":
            return f"[{names.setdefault(k[c], len(names) + 1)}]"
        if c == "theoretical_occupancy":
            return f"{k[c]:.1%}"
        if c == "compile_s":
            return f"{k[c]:.2f}"
        return _cell(k.get(c))
    rows = [[cell(k, c) for c in shown] for k in kernels]
    return table(rows, headers=[columns[c] for c in shown]) + "".join(f"\n[{n}] {name}" for name, n in names.items())


def _case_done(progress, built: list) -> None:
    case = built[-1].point.case
    done = [b for b in built if b.point.case == case]
    progress.finish(f"case {case}", f"{sum(1 for b in done if b.kernels)} built, "
                                    f"{sum(1 for b in done if b.point.refused)} refused")


def _space(family, picked, arch: str, limits, json_out, jobs: int = 1) -> None:
    """`--space`: every case's points, the accepted ones built (the distinct builds first, in
    `jobs` processes at once); a table of the built points (a column a knob) and the refusals
    counted by reason under it; every point in the JSON."""
    from .. import space as spacemod
    from ..report import tabulate as table
    from ..result import document
    knobs = [k.name for k in family.knobs()]
    for c in picked:  # a case no point takes is bad input, as it is to a plain compile
        found = spacemod.points(family, c, limits.sm_count)
        if all(p.refused for p in found):
            raise NvggError(f"case {c.id}: no build of the {arch} persistent kernel takes it: "
                            f"{next(p for p in found if p.default).refused}")
    built: list = []
    with Progress(len(picked), "building the space") as progress:
        def on_point(b) -> None:  # the points come case by case, in order (after the builds with jobs)
            if built and built[-1].point.case != b.point.case:
                _case_done(progress, built)
            if not built or built[-1].point.case != b.point.case:
                progress.start(f"case {b.point.case}")
            built.append(b)

        progress.start(f"the distinct builds of {len(picked)} case(s), {jobs} at once" if jobs > 1 else
                       f"case {picked[0].id}")
        spacemod.compile_all(family, picked, arch, limits.sm_count, on_point=on_point, jobs=jobs)
        _case_done(progress, built)
    if emit_json(json_out, document("compile", arch=arch, kernels=[], space=[b.to_dict() for b in built])):
        return
    rows = []
    for b in built:
        if b.point.refused:
            continue
        k = b.kernels[0] if b.kernels else {}
        est = b.point.estimate_us
        rows.append([b.point.case, *(_cell(b.point.values[n]) for n in knobs), "*" if b.point.default else "",
                     "—" if est is None else f"{est:.2f}", k.get("registers", "—"), k.get("smem_bytes", "—"),
                     k.get("tmem_columns") or "—", _cell(k.get("stages")) if k.get("stages") is not None else "—",
                     "built" if b.kernels else f"failed: {b.error}"[:40]])
    typer.echo(table(rows, headers=["case", *knobs, "default", "model µs", "regs", "smem B", "tmem", "stages",
                                    "status"]))
    refused: dict[str, int] = {}
    for b in built:
        if b.point.refused:
            refused[b.point.refused] = refused.get(b.point.refused, 0) + 1
    for reason, count in sorted(refused.items(), key=lambda kv: -kv[1]):
        typer.echo(f"refused {count}: {reason}")
    defaults = [b for b in built if b.point.default]
    typer.echo(f"target {arch}; * the kernel family's own choice for the case"
               + (f"; model µs: {family.model} that choice follows (not a measurement)"
                  if any(b.point.estimate_us is not None for b in built) else "")
               + f"; {sum(1 for b in built if b.kernels)} points built, {sum(1 for b in built if b.point.refused)} "
                 f"refused, {sum(1 for b in built if b.error)} failed to compile, over {len(picked)} case(s)")
    if any(d.point.refused for d in defaults):
        typer.echo("the family's own choice is refused on: " + ", ".join(d.point.case for d in defaults if d.point.refused))


def _cell(value):
    if isinstance(value, dict):
        return "/".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, list):
        return "x".join(str(v) for v in value)
    return value
