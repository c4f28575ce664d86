"""Host time per launch of our kernels by each launch path, beside a torch launch, on one card
(H100/H200: the sm_90a persistent kernel): every path is checked against the exact reference first.

    python benchmarks/launch_paths.py [--case 3] [--launches 20] [--repeat 50]

Paths: the driver's cuLaunchKernel through ctypes with packed parameters (`launch.DirectLaunch`,
the sm_90a backend's), the DSL's compiled host function with its arguments converted once
(`launch.DslLaunch`, the sm_100a backend's), the DSL's own call (arguments converted every call),
and `torch.add` on two 1-element tensors (one small torch kernel). Host µs a launch: `--launches`
launches back to back, unsynchronised, the median over `--repeat` rounds; a GPU sleep queued first
keeps the stream from draining, so no launch waits on the device.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from tabulate import tabulate

from nvgg import cases, env, inputs, reference
from nvgg.kernels.sm90.family import Sm90Kernels
from nvgg.kernels import launch as klaunch
from nvgg.kernels.sm90 import host


def host_us(fn, launches: int, repeat: int) -> float:
    rounds = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        torch.cuda._sleep(5_000_000)
        t0 = time.perf_counter()
        for _ in range(launches):
            fn()
        rounds.append((time.perf_counter() - t0) / launches * 1e6)
    torch.cuda.synchronize()
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", default="3")
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        raise SystemExit("launch_paths times the sm_90a kernel: it needs an H100 or H200")
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    case = cases.get(args.case)
    data = inputs.generate(case, "cuda")
    groups, config, _, ctas = Sm90Kernels()._persistent(data, instrument=False)  # the backend's build
    entry = host.compile_gemm(config, None, "sm_90a")  # with the DSL's callable, for the DSL's paths
    tables, grid = host.build_tables(groups, config, ctas), host.grid_dims(config, None, ctas)
    direct = klaunch.DirectLaunch(entry, tables, grid)
    dsl_call = host.Launch(entry.fn, tables, grid)
    dsl_once = klaunch.DslLaunch(entry.fn, (make_ptr(cutlass.Int64, tables.table.data_ptr(), cute.AddressSpace.gmem,
                                                     assumed_align=16),
                                            cutlass.Int32(tables.total_tiles), cutlass.Int32(grid[0])), keep=tables)
    paths = {"driver (DirectLaunch)": direct, "DSL host function, args once (DslLaunch)": dsl_once,
             "DSL call": dsl_call}
    for name, fn in paths.items():
        verdict = reference.checked_call(data, fn)
        if not verdict.ok:
            raise SystemExit(f"{name} is wrong on case {case.id}: {verdict.message}")
    x = torch.ones(1, device="cuda")
    paths["torch.add (1 element)"] = lambda: torch.add(x, x)
    rows = [[name, f"{host_us(fn, args.launches, args.repeat):.2f}"] for name, fn in paths.items()]
    print(f"card: {env.card(env.collect(torch.device('cuda')))}; case {case.id}, persistent sm_90a kernel; "
          f"host µs a launch, median of {args.repeat} rounds of {args.launches}")
    print(tabulate(rows, headers=["launch path", "host µs / launch"], tablefmt="github", disable_numparse=True))


if __name__ == "__main__":
    main()
