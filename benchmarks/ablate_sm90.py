"""Where the persistent sm_90a kernel's time goes: the same launch built with parts removed
(GemmConfig.ablate), timed side by side on one card.

    python benchmarks/ablate_sm90.py [--cases 1,2] [--variants full,no_mma,...]

A variant is tokens joined by '+': `full`, `strided` (GemmConfig.chunked off), `no_l2_hints`, `slotsN` (N fp16 A slots) or an ablation (no_mma,
no_expand, no_scale: GemmConfig.ablate). Unablated builds are checked against the exact reference before it is timed; ablated builds compute garbage
by design and are only timed.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import torch
from tabulate import tabulate

from nvgg import cases, env, inputs, reference, timing
from nvgg.backends.cute import config_for
from nvgg.kernels.sm90 import host
from nvgg.kernels.sm90 import nvfp4_gemm as gemm


def config_of(case, variant: str):
    """The persistent kernel's configuration for `case` with `variant`: tokens joined by '+', each
    `full` (nothing), `strided` (every grid-th tile instead of a contiguous run) or an ablation (no_mma, no_expand, no_scale)."""
    config = config_for(case.m, persistent=True)
    for token in variant.split("+"):
        if token == "strided":
            config = replace(config, chunked=False)
        elif token == "no_l2_hints":
            config = replace(config, l2_hints=False)
        elif token.startswith("slots"):
            slots = int(token[5:])
            config = replace(config, slots=slots, stages=gemm.stages_for(config.tile_m, slots))
        elif token in gemm.ABLATIONS:
            config = replace(config, ablate=token)
        elif token != "full":
            raise SystemExit(f"unknown variant token {token!r}")
    return config


def launcher(data, config):
    groups = [host.group_tensors(data, g) for g in range(len(data[3]))]
    entry = host.compile_gemm(config, None, "sm_90a")
    grid = host.persistent_grid(groups, config, entry)
    return host.DirectLaunch(entry, host.build_tables(groups, config, grid), (grid, 1, 1)), host.resources(entry)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="1,2")
    parser.add_argument("--variants", default="full,no_mma,no_expand,no_scale")
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
        rows.append(row)
    print(tabulate(rows, headers=["case"] + args.variants.split(","), tablefmt="github", disable_numparse=True))


if __name__ == "__main__":
    main()
