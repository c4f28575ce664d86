"""The cute backend's Hopper (sm_90a) kernels: which to build for a case, and their launches; and
the architecture's tables the rest of nvgg reads (the family: kernels/family.py, found by
kernels/registry.py).

- per group: `nvfp4_gemm_sm90`, specialised for the group's (m, n, k) at compile time; one
  launch per group (the sequential, multistream and graph strategies wrap the same launcher).
- grouped: `nvfp4_grouped_gemm_sm90`, one persistent launch for all groups; shapes, pointers and
  tile counts come from a device table, so one compiled kernel serves any set of groups that
  meets the shape rules. It has two builds: the plain one, and one with wide tiles (a group's
  last full tile and the rest of its rows, up to 64, on one B decode) that the backend picks
  where merging shortens the longest CTA's list on this GPU's SMs (`persistent_config`).
Both read NVFP4, expand it to fp16 exactly (the persistent kernel expands A once per launch into an
fp16 copy that it then loads by TMA, stage by stage as helper warps write it) and multiply with
wgmma; see kernels/sm90/nvfp4_gemm.py.

Shape rules (both kernels): k a multiple of 256, n a multiple of 128, any m ≥ 1; the persistent kernel
takes at most 512 groups (gemm.MAX_GROUPS).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import torch

from ..family import (KernelFamily, KernelInfo, Knob, Launch, NcuCounters, checked_group, group_problem, kernel_info,
                      zeroed_first)
from ...cases import Case
from ...errors import NvggError
from .. import groups as kgroups, launch
from ..tensormaps import setup_phases
from . import host
from . import config as gemm
from .phase_slots import SM90, SM90_CHUNKS

ARCH = "sm_90a"
# where the persistent kernel's tensor maps come from: its producer rewrites one pair in the kernel
# (`device`), or the host encodes every group's pair at prepare time (`host`; gemm.GemmConfig)
TENSORMAP_MODES = gemm.TENSORMAP_MODES


def config_for(ms, *, persistent: bool) -> gemm.GemmConfig:
    """The configuration the backend runs for groups of these m: the A tile that holds the largest
    m (up to 128 rows), and the deepest load ring that fits in shared memory."""
    tile_m = gemm.pick_tile_m(ms)
    return gemm.GemmConfig(tile_m=tile_m, stages=gemm.stages_for(tile_m), persistent=persistent)


WIDE_SLOTS = 6  # fp16 A slots of 192 rows: 4 stages of the packed-B ring still fit beside them
# SMs the persistent kernel's choice assumes where no GPU is present (`nvgg compile`): the H100
# SXM's and the H200's (profiles/h100.toml, h200.toml)
NOMINAL_SMS = 132
# the share by which the split build's longest CTA (modelled) must beat the unsplit one's
SPLIT_MARGIN = 0.03


def wide_config(base: gemm.GemmConfig) -> gemm.GemmConfig | None:
    """The wide-tile build of a persistent configuration (GemmConfig.wide_tiles), or None where it
    has none (tile_m below 128). Its fp16 A slots are larger, so it has fewer of them."""
    if not gemm.has_half_width(base.tile_m, base.half_tiles):
        return None
    return replace(base, wide_tiles=True, slots=WIDE_SLOTS, stages=gemm.stages_for(base.tile_m, WIDE_SLOTS, True))


def persistent_config(ms, ns, ks, sms: int, readiness: str = "chunks", split: bool | None = None) -> gemm.GemmConfig:
    """The persistent kernel the backend launches for these groups on `sms` SMs (one CTA each):
    the wide-tile build where merging tiles shortens the longest CTA's list (gemm.tile_plan),
    else the plain one, whose eight fp16 A slots beat the wide build's six where nothing merges
    (case 1: lab log). Then, in the chunks build, the split build (GemmConfig.split_k) of the
    plain or the wide one, whichever has the shorter longest CTA (gemm.split_span), where it is
    shorter than the unsplit choice's by more than SPLIT_MARGIN; `split` True or False forces it.
    Cached: each prepare asks, and the schedules behind the answer take tens of milliseconds."""
    return _persistent_config(tuple(ms), tuple(ns), tuple(ks), sms, readiness, split)


@functools.lru_cache(maxsize=256)
def _persistent_config(ms, ns, ks, sms: int, readiness: str, split: bool | None) -> gemm.GemmConfig:
    base = config_for(ms, persistent=True)
    wide = wide_config(base)
    chosen = wide if wide is not None and gemm.tile_plan(ms, ns, wide, sms) else base
    if split is False or readiness != "chunks":
        return chosen
    options = [replace(c, readiness="chunks", split_k=True) for c in (base, wide) if c is not None]
    spans = [gemm.split_span(ms, ns, ks, c, sms)[0] for c in options]
    best = min(range(len(options)), key=lambda i: spans[i])
    if split or spans[best] < gemm.split_span(ms, ns, ks, chosen, sms)[1] * (1 - SPLIT_MARGIN):
        return options[best]
    return chosen


def _shape_problem(case: Case, config: gemm.GemmConfig) -> str | None:
    return group_problem(case, config.is_valid, "the cute backend")


class Sm90Kernels(KernelFamily):
    """The sm_90a kernel family behind the cute backend (the interface: family.py). Its
    persistent kernel also comes in builds that benchmarks and tests compare against, run through
    `CuteBackend(family=Sm90Kernels(readiness=..., programmatic=...))`."""

    arch = ARCH
    capability = (9, 0)
    gpus = "H100/H200"
    profile = "h100"  # the H100's limits, which the H200 shares
    # Hopper's warpgroup MMAs (wgmma: HGMMA, QGMMA, ...) count in the tensor pipe's
    # type_hmma_hgmma... counter (seen in the SpeedOfLight section's raw page on an H200, ncu 2025.3)
    ncu = NcuCounters("sm_90", "gh100", "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active",
                      "tensor pipe")
    tensormap_modes = TENSORMAP_MODES
    # host maps: the same kernel time as device maps on the four benchmarks, a shorter setup in
    # the kernel, and no map written in the kernel (NOTES.md, Persistent sm_90a kernel; lab log)
    default_mode = "host"

    def __init__(self, readiness: str = "chunks", programmatic: bool = True, split: bool | None = None):
        # how the persistent kernel's fp16 A is written and waited for (gemm.READINESS): "chunks",
        # streamed by helper warps beside the main loops, the first tile's first stage decoded in
        # the CTA (the fastest build measured: NOTES.md, lab log); "rows" and "grid", the earlier
        # builds' phase 0 before the first MMA, are there for benchmarks and tests to compare against
        self.readiness = readiness
        self._programmatic = programmatic
        # whether the chunks build splits tiles' k between CTAs (GemmConfig.split_k): None, where
        # the model says it shortens the longest CTA (`persistent_config`); True or False, always
        self.split = split

    @property
    def programmatic(self) -> bool:
        """Whether the persistent kernel's timed launches may start while the kernel before them in
        the stream finishes (launch.DirectLaunch's `programmatic`; see kernels/sm90/nvfp4_gemm.py)."""
        return self._programmatic

    def shape_problem(self, case: Case, *, grouped: bool) -> str | None:
        if grouped and self.point:
            return self.point_build(case, self.point)[1]
        if grouped and case.g > gemm.MAX_GROUPS:
            return (f"the persistent sm_90a cute kernel takes at most {gemm.MAX_GROUPS} groups, got {case.g}: "
                    "use the graph or multistream strategy")
        return _shape_problem(case, config_for(case.m, persistent=grouped))

    def compile(self, case: Case, arch: str, *, grouped: bool = False, sms: int | None = None,
                tensormaps: str | None = None) -> list[KernelInfo]:
        if grouped:
            builds = [(self._grouped_config(case.m, case.n, case.k, sms or NOMINAL_SMS, tensormaps), None)]
        else:  # every per-group launch runs the expand kernel first
            builds = [(config_for([m], persistent=False), (m, n, k)) for m, n, k in dict.fromkeys(case.groups)]
            builds.append((host.EXPAND_CONFIG, None))
        infos = [self._info(host.compile_gemm(config, shape, arch, need_callable=False)) for config, shape in builds]
        if grouped:  # how its timed launches are made
            infos[0].extra["launch"] = "programmatic" if self.programmatic else "stream order"
        return infos

    def _grouped_config(self, ms, ns, ks, sms: int, tensormaps: str | None = None,
                        instrument: bool = False) -> gemm.GemmConfig:
        """The persistent build: the point's where the family has one (with_point), else the
        backend's choice for these groups on `sms` SMs, in the tensor-map mode asked for."""
        if self.point:
            return gemm.GemmConfig(persistent=True, readiness=self.readiness, instrument=instrument, **self.point)
        return replace(persistent_config(ms, ns, ks, sms, self.readiness, self.split), tensormaps=self.mode(tensormaps),
                       readiness=self.readiness,
                       instrument=instrument)

    def knobs(self) -> tuple[Knob, ...]:
        """tile_m 32 holds no benchmark's m (40 and up); stages up to what fits (stages_for stops at 6)."""
        return (Knob("tile_m", (64, 128)), Knob("stages", (2, 3, 4, 5, 6)), Knob("slots", (WIDE_SLOTS, gemm.A16_SLOTS)),
                Knob("half_tiles", (True, False)), Knob("wide_tiles", (False, True)),
                Knob("tensormaps", TENSORMAP_MODES), Knob("split_k", (False, True)))

    def point_build(self, case: Case, point: dict, sms: int | None = None):
        config = gemm.GemmConfig(persistent=True, readiness=self.readiness, **point)
        why = config.problems()
        if not why and case.g > gemm.MAX_GROUPS:
            why = f"the persistent sm_90a cute kernel takes at most {gemm.MAX_GROUPS} groups, got {case.g}"
        why = why or _shape_problem(case, config)
        return (None, why) if why else (config, None)

    def default_point(self, case: Case, sms: int | None = None) -> dict:
        c = persistent_config(case.m, case.n, case.k, sms or NOMINAL_SMS, self.readiness, self.split)
        return {"tile_m": c.tile_m, "stages": c.stages, "slots": c.slots, "half_tiles": c.half_tiles,
                "wide_tiles": c.wide_tiles, "tensormaps": self.default_mode, "split_k": c.split_k}

    def _compile_config(self, config, arch: str) -> list[KernelInfo]:
        return [self._info(host.compile_gemm(config, None, arch, need_callable=False))]

    @staticmethod
    def _info(entry) -> KernelInfo:
        res = host.resources(entry)
        extra = {"wgmma": entry.info["wgmma"]}
        if entry.info["config"]["persistent"]:
            extra["tensormaps"] = entry.info["config"]["tensormaps"]
        if res["setmaxnreg"]:  # the wide build's warpgroups after setmaxnreg (MMA "inc", producer "dec")
            extra["setmaxnreg"] = res["setmaxnreg"]
        return kernel_info(entry, extra)

    def tiles(self, case: Case, *, grouped: bool = False, sms: int | None = None) -> list[int]:
        if grouped:
            config = self._grouped_config(case.m, case.n, case.k, sms or NOMINAL_SMS)
            return [gemm.table_tiles(case.m, case.n, config.tile_m, config.wide_tiles)[2]]
        return [gemm.table_tiles([m], [n], config_for([m], persistent=False).tile_m)[2] for m, n, _ in case.groups]

    def group_launcher(self, data, g: int) -> Launch:
        tensors = self._group(data, g)
        config = config_for([tensors.m], persistent=False)
        entry = host.compile_gemm(config, (tensors.m, tensors.n, tensors.k), ARCH, need_callable=False)
        tiles = host.count_tiles([tensors], config.tile_m)  # the per-group grid: one CTA a tile
        tables = host.build_tables([tensors], config, tiles)
        gemm_launch = self._launcher(entry, tables, host.grid_dims(config, (tensors.m, tensors.n, tensors.k), tiles))
        sms = torch.cuda.get_device_properties(tensors.c.device).multi_processor_count
        expand = launch.DirectLaunch(host.compile_gemm(host.EXPAND_CONFIG, None, ARCH, need_callable=False), tables,
                                   (host.expand_grid(tables, sms), 1, 1))
        return host.ExpandThenGemm(expand, gemm_launch)

    def grouped_launcher(self, data, tensormaps: str | None = None) -> Launch:
        groups, config, entry, grid = self._persistent(data, tensormaps, instrument=False)
        tables = self._tables(groups, config, grid)
        out = self._launcher(entry, tables, host.grid_dims(config, None, grid), programmatic=self.programmatic)
        if tables.encode_us:  # host maps: their encoding is prepare-time work, reported apart
            out.setup_us = setup_phases(tables.encode_us)
        return out

    def phase_launcher(self, data, tensormaps: str | None = None,
                       programmatic: bool = False) -> tuple[Launch, torch.Tensor]:
        """The persistent kernel's instrumented build over `data`: a zero-argument launch and the
        int64 [ctas, SM90.slots] buffer each launch fills with %globaltimer readings (zeroed
        first; see nvgg/kernels/sm90/phase_slots.py for the slots). Same grid and tiles as the timed
        build. `programmatic`: launched as the timed build is, and the caller zeroes the buffer (a zeroing
        kernel just before would keep the launch from starting behind the kernel before it)."""
        groups, config, entry, grid = self._persistent(data, tensormaps, instrument=True)
        buffer = torch.zeros((grid, SM90.slots), dtype=torch.int64, device=groups[0].c.device)
        kernel = self._launcher(entry, self._tables(groups, config, grid, buffer), host.grid_dims(config, None, grid),
                                programmatic=programmatic)
        return zeroed_first(kernel, buffer, programmatic)

    def phase_layout(self, tensormaps: str | None = None):
        # the same slots in both modes; the chunks build streams A beside its main loops
        return SM90_CHUNKS if self.readiness == "chunks" else SM90

    def _persistent(self, data, tensormaps: str | None = None, *, instrument: bool):
        if len(data[3]) > gemm.MAX_GROUPS:
            raise NvggError(f"the persistent cute kernel takes at most {gemm.MAX_GROUPS} groups, got {len(data[3])}: "
                            "use the graph or multistream strategy")
        groups = [self._group(data, g) for g in range(len(data[3]))]
        sms = torch.cuda.get_device_properties(groups[0].c.device).multi_processor_count
        config = self._grouped_config([t.m for t in groups], [t.n for t in groups], [t.k for t in groups], sms,
                                      tensormaps, instrument)
        # the launches go through the driver on the cubin (launch.DirectLaunch): a compiled entry on
        # disk serves a new process without rebuilding the DSL's callable (seconds a kernel)
        timed = host.compile_gemm(replace(config, instrument=False), None, ARCH, need_callable=False)
        entry = host.compile_gemm(config, None, ARCH, need_callable=False) if instrument else timed
        # the instrumented build runs on the timed build's grid
        return groups, config, entry, host.persistent_grid(groups, config, timed)

    @staticmethod
    def _tables(groups, config: gemm.GemmConfig, grid: int, phases: torch.Tensor | None = None) -> host.Tables:
        """The persistent launch's tables."""
        return host.build_tables(groups, config, grid, phases)

    @staticmethod
    def _launcher(entry, tables, grid, programmatic: bool = False) -> Launch:
        # through the driver: a fraction of the DSL's own call's host time a launch, the same GPU
        # time (benchmarks/launch_paths.py; NOTES.md, Host costs)
        return launch.DirectLaunch(entry, tables, grid, programmatic=programmatic)

    @staticmethod
    def _group(data, g: int) -> kgroups.GroupTensors:
        return checked_group(data, g, config_for([data[3][g][0]], persistent=False).is_valid, "the cute backend")
