"""Where the persistent sm_90a kernel's time goes: the same launch built with parts removed
(GemmConfig.ablate), timed side by side on one card.

    python benchmarks/ablate_sm90.py [--cases 1,2] [--variants full,no_mma,...]

A variant is tokens joined by '+': `full`, `strided` (GemmConfig.chunked off), `no_l2_hints`,
`no_half` (GemmConfig.half_tiles off), `wide` / `no_wide` (the wide-tile build or the plain one, where `full` is the backend's own choice), `slotsN` (N fp16 A slots), `tileN` (tile_m N) or an
ablation (no_mma, no_expand, no_scale: GemmConfig.ablate). Unablated builds are checked against
the exact reference before they are timed; ablated builds compute garbage by design and are only
timed. With --phases, each unablated variant's instrumented build also reports its device phases
(profiling/phases.py): medians over CTAs, and the time from kernel start to the first MMA.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

import torch
from tabulate import tabulate

from nvgg import cases, env, inputs, reference, timing
from nvgg.backends.cute_sm90 import NOMINAL_SMS, config_for, persistent_config, wide_config
from nvgg.kernels import groups as kgroups, launch as klaunch
from nvgg.kernels.sm90 import host
from nvgg.kernels.sm90 import config as gemm
from nvgg.kernels.phase_slots import SM90
from nvgg.profiling import phases


def config_of(case, variant: str):
    """The persistent kernel's configuration for `case` with `variant`: tokens joined by '+', each
    `full` (nothing), `strided` (every grid-th tile instead of the scheduled lists) or another token of the module docstring."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else NOMINAL_SMS
    config = persistent_config(case.m, case.n, sms)  # what the backend runs
    for token in variant.split("+"):
        if token == "strided":
            config = replace(config, chunked=False)
        elif token == "no_l2_hints":
            config = replace(config, l2_hints=False)
        elif token == "no_half":
            config = replace(config_for(case.m, persistent=True), half_tiles=False)
        elif token == "no_wide":
            config = config_for(case.m, persistent=True)
        elif token == "wide":
            config = wide_config(config_for(case.m, persistent=True)) or config
        elif token.startswith("tile"):
            tile_m = int(token[4:])
            config = replace(config, tile_m=tile_m, stages=gemm.stages_for(tile_m, config.slots))
        elif token.startswith("slots"):
            slots = int(token[5:])
            config = replace(config, slots=slots, stages=gemm.stages_for(config.tile_m, slots, config.wide_tiles))
        elif token in gemm.ABLATIONS:
            config = replace(config, ablate=token)
        elif token != "full":
            raise SystemExit(f"unknown variant token {token!r}")
    return config


def launcher(data, config):
    groups = [kgroups.group_tensors(data, g) for g in range(len(data[3]))]
    entry = host.compile_gemm(config, None, "sm_90a")
    grid = host.persistent_grid(groups, config, entry)
    return klaunch.DirectLaunch(entry, host.build_tables(groups, config, grid), (grid, 1, 1)), host.resources(entry)


def phase_medians(batch, config, runs: int = 3) -> dict[str, float]:
    """Median µs per phase (profiling/phases.py) of the instrumented build of `config`, on the timed
    build's grid, over the first `runs` inputs (L2 flushed before each), plus its time to first MMA."""
    inst = replace(config, instrument=True)
    entry = host.compile_gemm(inst, None, "sm_90a")
    flush = timing.L2Flush(torch.device("cuda"))
    reports = []
    for data in batch[:runs]:
        groups = [kgroups.group_tensors(data, g) for g in range(len(data[3]))]
        grid = host.persistent_grid(groups, config, host.compile_gemm(config, None, "sm_90a"))
        buffer = torch.zeros((grid, SM90.slots), dtype=torch.int64, device="cuda")
        launch = klaunch.DirectLaunch(entry, host.build_tables(groups, inst, grid, buffer), (grid, 1, 1))
        flush()
        launch()
        torch.cuda.synchronize()
        reports.append(phases.analyse(buffer.cpu()))
    out = {"start to first MMA": statistics.median(r.time_to_first_mma_us for r in reports)}
    for name, *_ in SM90.phases:
        spans = [p.median_us for r in reports for p in r.phases if p.name == name]
        if spans:
            out[name] = statistics.median(spans)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="1,2")
    parser.add_argument("--variants", default="full,no_mma,no_expand,no_scale")
    parser.add_argument("--phases", action="store_true",
                        help="also print each unablated variant's device phases (its instrumented build)")
    parser.add_argument("--once", default="", help="launch VARIANT on the first case 5 times and exit (for ncu)")
    args = parser.parse_args()
    print(f"card: {env.collect(torch.device('cuda'))['gpu']}")
    if args.once:
        case = cases.select(args.cases)[0]
        data = inputs.generate(case, "cuda")
        launch, _ = launcher(data, config_of(case, args.once))
        for _ in range(5):
            launch()
        torch.cuda.synchronize()
        return
    rows = []
    for case in cases.select(args.cases):
        batch = inputs.generate_batch(case, "cuda")
        row = [case.id]
        for variant in args.variants.split(","):
            config = config_of(case, variant)
            ablate = config.ablate
            launches = []
            for data in batch:
                launch, res = launcher(data, config)
                launches.append(launch)
                if not ablate:
                    verdict = reference.checked_call(data, launch)
                    if not verdict.ok:
                        raise SystemExit(f"case {case.id} {variant}: WRONG: {verdict.message}")
            stats = timing.EventTimer("cuda").batch(launches)
            row.append(f"{stats.mean_us:.1f} ({res['registers']}r)")
            print(f"case {case.id} {variant}: {stats.mean_us:.1f} us, {res['registers']} registers", flush=True)
            if args.phases and not ablate:
                spans = phase_medians(batch, config)
                print(f"case {case.id} {variant} phases (median us): "
                      + ", ".join(f"{name} {us:.2f}" for name, us in spans.items()), flush=True)
        rows.append(row)
    print(tabulate(rows, headers=["case"] + args.variants.split(","), tablefmt="github", disable_numparse=True))


if __name__ == "__main__":
    main()
