"""The cute backend's Blackwell (sm_100a) kernels: which to build for a case, and their launches;
and the architecture's tables the rest of nvgg reads (the family: kernels/family.py, found by
kernels/registry.py).

One kernel class (kernels/sm100/nvfp4_gemm.py), native NVFP4 on the tensor core, in builds by tile
(`mma_n` 128 or 256 rows of A, the MMA's N), cluster (one CTA, or a pair running `cta_group::2`
MMAs of 256 rows of B) and launch scheme:
- per group (sequential, multistream, graph): `nvfp4_gemm_sm100`, one launch per group, its tensor
  maps kernel parameters packed once at prepare time; the tile is chosen per group.
- persistent: `nvfp4_grouped_gemm_sm100`, one launch for all groups over a host-made schedule, its
  tensor maps either encoded on the host at prepare time (`host`, the default) or rewritten in the
  kernel on each group change (`device`); the tile is chosen per case.
Shapes are run-time arguments, so one compiled kernel serves every case with that tile. Launches
go through the driver on the cached cubin, their parameters packed by nvgg (kernels/sm100/params.py;
no DSL import in a warm process), the persistent kernel's programmatically; NVGG_SM100_LAUNCH=dsl
sends them through the DSL's compiled host function instead.

The tile is chosen by `host.choose`, a model of the B200 (profiles/b200.toml: SMs, fp4 rate, DRAM
bandwidth), not a measurement: no B200 has run these kernels here. Shape rules: k a multiple of
256, n a multiple of 128, any m ≥ 1, any number of groups.

`host` is the default mode: public B200 results for this problem found host-built maps faster than
an in-kernel replace on each group change (about 3 µs a change: NaregAmirianMegan/NVFP4_Kernels;
gau-nernst/gpu-mode-kernels builds every group's maps on the host); nvgg has measured neither on a
B200.
"""

from __future__ import annotations

import torch

from ..family import (KernelFamily, KernelInfo, Knob, Launch, NcuCounters, checked_group, group_problem, kernel_info,
                      zeroed_first)
from ...cases import Case
from ...profiles import get as get_profile
from .. import cache as kcache
from .. import groups as kgroups
from ..tensormaps import setup_phases
from . import host
from . import config as gemm
from .phase_slots import SM100, sm100_for

ARCH = "sm_100a"
TENSORMAP_MODES = gemm.TENSORMAP_MODES
DEFAULT_MODE = "host"


def _model_inputs(sms: int | None) -> tuple[int, float, float]:
    b200 = get_profile("b200")
    return sms or b200.sm_count, b200.tensor_tflops["fp4"], b200.dram_bandwidth_gbs


def grouped_config(shapes, sms: int | None, tensormaps: str, instrument: bool = False) -> gemm.Sm100Config:
    """The persistent build for these groups: the model's tile, in the given tensor-map mode."""
    best = host.choose(shapes, *_model_inputs(sms))
    return host.with_mode(best.config, tensormaps, instrument)


def group_config(shape, sms: int | None) -> gemm.Sm100Config:
    """The per-group build for one group's shape: the model's tile for that group alone."""
    return host.choose([shape], *_model_inputs(sms)).config


class Sm100Kernels(KernelFamily):
    """The sm_100a kernel family behind the cute backend (the interface: family.py)."""

    arch = ARCH
    capability = (10, 0)
    gpus = "B200"
    profile = "b200"
    # the table's tmem: the tensor memory columns a CTA allocates
    columns = (("tmem_columns", "tmem"), ("cluster", "cluster"), ("stages", "stages"))
    model = "the B200 model"  # host.choose's, from profiles/b200.toml (_model_inputs)
    # Blackwell's tcgen05 MMAs run on the "TC pipe" (sm__pipe_tc_*); GB100's sm__pipe_tensor_*
    # counters there are the warp-level MMAs (dmma/hmma/imma subpipes), which a tcgen05 kernel
    # leaves idle, so reading them would call it latency-bound (ncu 2025.3.1 --query-metrics --chip gb100)
    ncu = NcuCounters("sm_100", "gb100", "sm__pipe_tc_cycles_active", "TC pipe (tcgen05)",
                      "sm__mem_tensor_cycles_active", "sm__inst_executed_pipe_tmem")
    tensormap_modes = TENSORMAP_MODES
    default_mode = DEFAULT_MODE

    @property
    def programmatic(self) -> bool:
        """Whether the persistent kernel's timed launches are programmatic: through the driver
        (host.launch_path), yes; the DSL's own launch sets no such attribute."""
        return host.launch_path() == "driver"

    def shape_problem(self, case: Case, *, grouped: bool) -> str | None:
        if grouped and self.point:
            return self.point_build(case, self.point)[1]
        return group_problem(case, gemm.Sm100Config().is_valid, "the sm_100a cute kernel")

    def compile(self, case: Case, arch: str, *, grouped: bool = False, sms: int | None = None,
                tensormaps: str | None = None) -> list[KernelInfo]:
        if grouped:
            estimate = self._estimate(case.groups, sms)
            config = host.with_mode(estimate.config, self.mode(tensormaps))
            info = self._info(host.compile_gemm(config, arch, need_callable=False), estimate)
            info.extra["launch"] = "programmatic" if self.programmatic else "stream order"
            return [info]
        builds = dict.fromkeys(group_config(shape, sms) for shape in case.groups)
        return [self._info(host.compile_gemm(config, arch, need_callable=False), None) for config in builds]

    def knobs(self) -> tuple[Knob, ...]:
        return (Knob("mma_n", gemm.MMA_N), Knob("cta_group", gemm.CTA_GROUPS), Knob("tensormaps", TENSORMAP_MODES))

    def point_build(self, case: Case, point: dict, sms: int | None = None):
        config = host.with_mode(gemm.Sm100Config(mma_n=point["mma_n"], cta_group=point["cta_group"]),
                                point["tensormaps"])
        why = config.problems() or group_problem(case, config.is_valid, "the sm_100a cute kernel")
        return (None, why) if why else (config, None)

    def default_point(self, case: Case, sms: int | None = None) -> dict:
        config = grouped_config(case.groups, sms, self.default_mode)
        return {"mma_n": config.mma_n, "cta_group": config.cta_group, "tensormaps": config.tensormaps}

    def point_estimate(self, case: Case, point: dict, sms: int | None = None) -> float | None:
        """The B200 model's time (host.estimate), the one `host.choose` ranks the tiles by."""
        config = gemm.Sm100Config(mma_n=point["mma_n"], cta_group=point["cta_group"])
        return host.estimate(case.groups, config, *_model_inputs(sms)).makespan_us

    def _compile_config(self, config, arch: str) -> list[KernelInfo]:
        return [self._info(host.compile_gemm(config, arch, need_callable=False), None)]

    @staticmethod
    def _info(entry: kcache.Entry, estimate) -> KernelInfo:
        info = entry.info
        extra = {"tensormaps": info["config"]["tensormaps"] or "kernel parameters",
                 "mma_tile": info["mma_tile"], "cluster": info["cluster"], "stages": info["stages"],
                 "tmem_columns": info["tmem_columns"], "tmem_alloc_columns": info["tmem_alloc_columns"],
                 "operands": info["operands"], "tcgen05_mma": info["tcgen05_mma"],
                 "accumulators": info["accumulators"],
                 "tensormap_replace": info["tensormap_replace"]}
        if estimate is not None:
            extra["model"] = estimate.to_dict()
        return kernel_info(entry, extra)

    def tiles(self, case: Case, *, grouped: bool = False, sms: int | None = None) -> list[int]:
        if grouped:
            return [self._estimate(case.groups, sms).tiles]
        return [host.choose([shape], *_model_inputs(sms)).tiles for shape in case.groups]

    def group_launcher(self, data, g: int) -> Launch:
        tensors = _group(data, g)
        sms = torch.cuda.get_device_properties(tensors.c.device).multi_processor_count
        config = group_config((tensors.m, tensors.n, tensors.k), sms)
        return host.group_launch(_compiled(config), tensors, config)

    def grouped_launcher(self, data, tensormaps: str | None = None) -> Launch:
        groups, config, entry, resident = self._persistent(data, tensormaps, instrument=False)
        tables = host.build_tables(groups, config, resident, templates=host.templates_of(entry))
        out = host.persistent_launch(entry, groups, tables, config)
        if tables.encode_us:  # host mode: the maps' encoding is prepare-time work, reported apart
            out.setup_us = setup_phases(tables.encode_us)
        return out

    def phase_launcher(self, data, tensormaps: str | None = None,
                       programmatic: bool = False) -> tuple[Launch, torch.Tensor]:
        """The persistent kernel's instrumented build over `data`: a zero-argument launch and the
        int64 [ctas, SM100.slots] buffer each launch fills (zeroed first; kernels/sm100/phase_slots.py).
        Same tile, schedule and grid as the timed build. `programmatic`: launched as the timed
        build is, and the caller zeroes the buffer (a zeroing kernel just before would keep the
        launch from starting behind the kernel before it)."""
        groups, config, entry, resident = self._persistent(data, tensormaps, instrument=True)
        the_plan = host.plan([(g.m, g.n, g.k) for g in groups], config, resident)
        buffer = torch.zeros((the_plan.clusters * config.cta_group, SM100.slots), dtype=torch.int64,
                             device=groups[0].c.device)
        tables = host.build_tables(groups, config, resident, buffer, the_plan, host.templates_of(entry))
        kernel = host.persistent_launch(entry, groups, tables, config, programmatic=programmatic)
        return zeroed_first(kernel, buffer, programmatic)

    def phase_layout(self, tensormaps: str | None = None):
        return sm100_for(self.mode(tensormaps))

    def _persistent(self, data, tensormaps: str | None, *, instrument: bool):
        """The groups, the build, its compiled entry, and the clusters the GPU holds at once."""
        device = data[0][0][2].device
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        return persistent_build(data, self.mode(tensormaps), sms, host.resident_clusters, instrument=instrument,
                                point=self.point)

    def _estimate(self, shapes, sms: int | None) -> host.Estimate:
        """The persistent tile and the model's estimate of it: the point's where the family has one
        (with_point), else the model's choice."""
        if self.point:
            tile = gemm.Sm100Config(mma_n=self.point["mma_n"], cta_group=self.point["cta_group"])
            return host.estimate(shapes, tile, *_model_inputs(sms))
        return host.choose(shapes, *_model_inputs(sms))


def persistent_build(data, tensormaps: str, sms: int, resident=None, *, instrument: bool = False,
                     point: dict | None = None):
    """The host work that picks a persistent launch's build: the groups checked, the model's tile
    (or `point`'s: a point of the family's space), the compiled entry (the disk record alone on the
    driver path: no DSL import), and the clusters the GPU holds at once (`resident(entry,
    cta_group)`; None: one a `cta_group` of the `sms` SMs, as `nvgg compile` assumes, for host work
    timed without a GPU)."""
    groups = [_group(data, g) for g in range(len(data[3]))]
    if point:
        config = host.with_mode(gemm.Sm100Config(mma_n=point["mma_n"], cta_group=point["cta_group"]), tensormaps,
                                instrument)
    else:
        config = grouped_config([(g.m, g.n, g.k) for g in groups], sms, tensormaps, instrument)
    entry = _compiled(config)
    clusters = resident(entry, config.cta_group) if resident else sms // config.cta_group
    return groups, config, entry, clusters


def _compiled(config: gemm.Sm100Config) -> kcache.Entry:
    """The build's cache entry: the compiled record alone where the launch goes through the
    driver (from the disk cache, no DSL in the process), the DSL's callable where it goes through
    the DSL."""
    return host.compile_gemm(config, ARCH, need_callable=host.launch_path() == "dsl")


def _group(data, g: int) -> kgroups.GroupTensors:
    return checked_group(data, g, gemm.Sm100Config().is_valid, "the sm_100a cute kernel")
