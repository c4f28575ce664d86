"""The B200 benchmark table, in one command on a B200 (sm_100): our sm_100a kernels' strategies
and tensor-map modes beside the library peer, on the benchmark cases, in one run on one card; then
the device phases of the persistent kernel in both modes. Every nvgg column is checked against the
exact reference before it is timed. No B200 has run this here: its numbers are the owner's to take.

    python benchmarks/bench_b200.py [--cases 1,2,3,4] [--repeat N] [--json FILE]

Columns, µs per call with the leaderboard's timer (15 inputs, L2 flushed each repetition):
- persistent[host] and persistent[device] (one launch for all groups; maps encoded on the host at
  prepare time, or rewritten in the kernel on each group change), multistream, graph, sequential;
- torch's `_scaled_mm` on the NVFP4 operands, one call per group, sequential and from a CUDA graph
  (the library peer: what the competition's reference runs);
- the speed of light of profiles/b200.toml (bytes / 7.68 TB/s: every case is memory-bound).

Targets (issue 11; for the B200 owner to check, not a test): persistent with host maps under
27 / 18 / 8 / 6 µs on benchmarks 1-4 (the best public results are 27.9 / 18.8 / 8.48 / 6.43), and the
time to first MMA under 2 µs (the phase table's median over CTAs).

With --repeat N each column is measured N times, the passes interleaved, and the table shows the
median (the JSON keeps every pass).

Then the launches of the persistent kernel (host maps) on each case, each checked first: the host
µs a launch through the driver (nvgg's packed parameters; programmatic, then in stream order) and
through the DSL's own host function (NVGG_SM100_LAUNCH=dsl), and the device µs a call of 20 calls
back to back (no refill between: what programmatic launches overlap). Targets (issue 21): a
launch's host cost at most 5 µs. A warm process's compile and first prepare (target 100 ms):
`python benchmarks/warm_start.py --case 3`; the host work alone, on any machine:
`python benchmarks/warm_start_sm100.py`.
"""

from __future__ import annotations

import argparse
import json
import os

import torch
from columns import cell, median
from tabulate import tabulate

from nvgg import cases, datapath, env
from nvgg.errors import NvggError
from nvgg.profiles import get as get_profile
from nvgg.profiling import device_phases

COLUMNS = [("persistent", "cute", "host"), ("persistent", "cute", "device"), ("multistream", "cute", None),
           ("graph", "cute", None), ("sequential", "cute", None), ("graph", "torch", None),
           ("sequential", "torch", None)]
TARGET_HOST_US = {"1": 27.0, "2": 18.0, "3": 8.0, "4": 6.0}
TARGET_FIRST_MMA_US = 2.0
TARGET_LAUNCH_HOST_US = 5.0
BACK_TO_BACK = 20


def _cell(v) -> str:
    return cell(v, 2)


def _name(strategy: str, backend: str, mode: str | None) -> str:
    return f"{strategy}[{mode}]/{backend}" if mode else f"{strategy}/{backend}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="1,2,3,4")
    parser.add_argument("--repeat", type=int, default=1, help="interleaved passes; the table shows medians")
    parser.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "bench_b200.json"))
    args = parser.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (10, 0):
        found = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA GPU"
        raise SystemExit(f"bench_b200 needs a B200 (sm_100); this machine has {found}: "
                         "run benchmarks/bench_hopper.py on an H100/H200")
    if args.repeat < 1:
        raise SystemExit(f"--repeat takes a count of at least 1, got {args.repeat}")
    b200 = get_profile("b200")
    doc = {"env": env.collect(torch.device("cuda")), "cases": {}, "phases": {}}
    rows, headers = [], []
    for case in cases.select(args.cases):
        passes = [{_name(*c): _time(case, *c) for c in COLUMNS} for _ in range(args.repeat)]
        entry = {"sol_us": case.bytes / (b200.dram_bandwidth_gbs * 1e9) * 1e6}
        entry.update({k: median([p[k] for p in passes]) for k in passes[0]})
        doc["cases"][case.id] = dict(entry, passes=passes)
        headers = ["case"] + list(entry) + ["target host"]
        rows.append([case.id] + [_cell(v) for v in entry.values()] + [_cell(TARGET_HOST_US.get(case.id, "—"))])
        print(f"case {case.id} done", flush=True)
    phase_rows, phase_headers = [], []
    for case in cases.select(args.cases):
        for mode in ("host", "device"):
            try:
                run = device_phases.run(case, tensormaps=mode)
            except NvggError as exc:
                phase_rows.append([case.id, mode, f"n/a: {exc}"])
                continue
            rep = run.report
            doc["phases"][f"{case.id}/{mode}"] = run.to_dict()
            phase_rows.append([case.id, mode, f"{rep.time_to_first_mma_us:.2f}", f"{rep.kernel_us:.2f}"]
                              + [f"{p.median_us:.2f}/{p.max_us:.2f}" for p in rep.phases])
            phase_headers = ["case", "maps", "to first MMA µs", "kernel µs"] + [f"{p.name} med/max" for p in rep.phases]
    launch_rows = []
    for case in cases.select(args.cases):
        try:
            found = _launches(case)
        except Exception as exc:  # keep the other tables; say what broke
            launch_rows.append([case.id, f"error: {type(exc).__name__}: {exc}", "", ""])
            continue
        doc.setdefault("launches", {})[case.id] = found
        launch_rows += [[case.id, name, f"{v['host_us']:.2f}", f"{v['device_us']:.2f}"] for name, v in found.items()]
    with open(args.json, "w") as fh:
        json.dump(doc, fh, indent=2, default=str)
    print(f"card: {env.card(doc['env'])}; µs per call (leaderboard timer), median of {args.repeat} pass(es); "
          f"SOL from profiles/b200.toml ({b200.dram_bandwidth_gbs:.0f} GB/s)")
    print(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))
    if phase_rows:
        print(f"\ndevice phases of the persistent kernel (instrumented build), µs; target: to first MMA "
              f"under {TARGET_FIRST_MMA_US} µs")
        print(tabulate(phase_rows, headers=phase_headers, tablefmt="github", disable_numparse=True))
    print(f"\nlaunches of the persistent kernel (host maps): host µs a launch (target at most {TARGET_LAUNCH_HOST_US}), "
          f"device µs a call over {BACK_TO_BACK} calls back to back")
    print(tabulate(launch_rows, headers=["case", "launch", "host µs", "device µs / call"], tablefmt="github",
                   disable_numparse=True))


def _launches(case) -> dict:
    """Host and back-to-back device µs of the persistent kernel's launch paths, each checked first."""
    from launch_paths import host_us

    from nvgg import inputs, reference
    from nvgg.kernels.sm100.family import persistent_build
    from nvgg.kernels import launch as klaunch
    from nvgg.kernels.sm100 import host

    data = inputs.generate(case, "cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    groups, config, entry, clusters = persistent_build(data, "host", sms, host.resident_clusters)
    tables = host.build_tables(groups, config, clusters, templates=host.templates_of(entry))
    ctas, cluster = tables.plan.clusters * config.cta_group, (config.cta_group, 1, 1)
    packed = host.packed_params(entry, groups[0], tables)
    with_fn = host.compile_gemm(config)  # the DSL's callable, for its own launch
    paths = {
        "driver, programmatic": klaunch.PackedLaunch(entry, packed, (ctas, 1, 1), cluster=cluster, programmatic=True,
                                                     keep=(groups, tables)),
        "driver, stream order": klaunch.PackedLaunch(entry, packed, (ctas, 1, 1), cluster=cluster, keep=(groups, tables)),
        "DSL host function, args once": klaunch.DslLaunch(with_fn.fn, host.dsl_args(config, groups[0], tables, ctas),
                                                          keep=(groups, tables)),
    }
    out = {}
    for name, fn in paths.items():
        verdict = reference.checked_call(data, fn)
        if not verdict.ok:
            raise NvggError(f"{name} is wrong on case {case.id}: {verdict.message}")
        out[name] = {"host_us": host_us(fn, BACK_TO_BACK, 50), "device_us": _back_to_back_us(fn)}
    return out


def _back_to_back_us(fn, rounds: int = 20) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start.record()
        for _ in range(BACK_TO_BACK):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / BACK_TO_BACK)
    return median(times)


def _time(case, strategy: str, backend: str, mode: str | None):
    try:
        res = datapath.run_one(case, strategy=strategy, backend=backend, tensormaps=mode)
        return res.time_us if res.status == "ok" else f"{res.status}: {res.message}"
    except NvggError as exc:
        return f"n/a: {exc}"
    except Exception as exc:  # keep measuring the other columns, say what broke
        return f"error: {type(exc).__name__}: {exc}"


if __name__ == "__main__":
    main()
