"""Why each strategy costs what it costs, on cases 1-4: persistent against multistream against
graph (cute backend). Per case and strategy: event time (leaderboard timer), CUPTI kernel time,
span and gaps, host + launch overhead; for the persistent kernel the device phases (setup share,
time to first MMA) from the instrumented build; achieved occupancy from Nsight Compute (each
kernel alone under ncu, so the per-group kernel's figure serves multistream and graph alike),
theoretical occupancy and SM coverage. Prints tables, writes JSON to $OUT.

    python benchmarks/profile_table.py [--cases 1,2,3,4] [--no-ncu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch
from tabulate import tabulate

from nvgg import cases, datapath, env, occupancy
from nvgg.profiles import for_gpu_name
from nvgg.profiling import device_phases, ncu

STRATEGIES = ("persistent", "multistream", "graph")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="1,2,3,4")
    parser.add_argument("--no-ncu", action="store_true")
    args = parser.parse_args()
    out_dir = os.environ.get("OUT", ".")
    prof = for_gpu_name(torch.cuda.get_device_name())
    doc = {"env": env.collect(torch.device("cuda")), "rows": []}
    rows = []
    for case in cases.select(args.cases):
        achieved = {}
        if not args.no_ncu:
            for strategy in ("persistent", "sequential"):
                try:
                    rep = ncu.profile({"case": case.to_dict(), "strategy": strategy, "backend": "cute"}, os.path.join(out_dir, "ncu"))
                    occ = [k.achieved_occupancy_pct for k in rep.kernels if k.achieved_occupancy_pct is not None]
                    achieved[strategy] = (statistics.median(occ), rep.dram_bytes / case.bytes, len(rep.kernels))
                except Exception as exc:  # keep the other measurements; say what failed
                    print(f"ncu {case.id} {strategy}: {exc}", file=sys.stderr)
        ph = device_phases.run(case)
        for strategy in STRATEGIES:
            res = datapath.run_one(case, strategy=strategy, backend="cute", timer="cupti")
            cu = res.cupti
            kern = res.kernels[0] if res.kernels else {}
            theo = occupancy.theoretical(kern.get("registers", 0), kern.get("smem_bytes", 0), kern.get("threads", 1), prof)
            occ = achieved.get("persistent" if strategy == "persistent" else "sequential")
            tiles = sum(session_tiles(case, strategy))
            cover = occupancy.coverage(min(tiles, prof.sm_count * max(theo.blocks_per_sm, 1)), prof, theo.blocks_per_sm)
            waves = tiles / (prof.sm_count * max(theo.blocks_per_sm, 1))
            row = {
                "case": case.id, "strategy": strategy, "status": res.status,
                "event_us": res.time_us, "cupti_kernel_us": cu.get("kernel_us"), "span_us": cu.get("span_us"),
                "gaps_us": cu.get("gaps_us"), "host_overhead_us": cu.get("host_overhead_us"), "kernels": cu.get("activities"),
                "setup_share": ph.report.setup_share if strategy == "persistent" else None,
                "first_mma_us": ph.report.time_to_first_mma_us if strategy == "persistent" else None,
                "achieved_occupancy_pct": occ[0] if occ else None, "dram_vs_sol": occ[1] if occ else None,
                "theoretical_occupancy": theo.theoretical, "tiles": tiles, "sm_coverage": cover.coverage, "waves": waves,
            }
            doc["rows"].append(row)
            rows.append([case.id, strategy, _f(row["event_us"]), _f(row["cupti_kernel_us"]), _f(row["gaps_us"]),
                         _f(row["host_overhead_us"]), _f(row["kernels"]),
                         "—" if row["setup_share"] is None else f"{row['setup_share']:.1%}",
                         _f(row["first_mma_us"]), "—" if occ is None else f"{occ[0]:.1f}%",
                         f"{theo.theoretical:.1%}", tiles, f"{cover.coverage:.0%}", f"{waves:.2f}",
                         "—" if occ is None else f"{occ[1]:.2f}x"])
        doc.setdefault("phases", {})[case.id] = ph.to_dict()
        print(f"case {case.id} done", file=sys.stderr, flush=True)
    with open(os.path.join(out_dir, "profile_table.json"), "w") as fh:
        json.dump(doc, fh, indent=2, default=str)
    print(f"card: {doc['env']['gpu']}")
    print(tabulate(rows, headers=["case", "strategy", "event µs", "CUPTI kernel µs", "gaps µs", "host+launch µs",
                                  "kernels/call", "setup share", "to 1st MMA µs", "achieved occ.", "theor. occ.",
                                  "tiles", "SM coverage", "waves", "DRAM / SOL bytes"], tablefmt="github", disable_numparse=True))
    return 0


def session_tiles(case, strategy: str) -> list[int]:
    import torch

    from nvgg.backends import get
    from nvgg.backends.base import arch_of
    return get("cute").tiles(case, grouped=(strategy == "persistent"), arch=arch_of(torch.device("cuda")))


def _f(x) -> str:
    return "—" if x is None else f"{x:.2f}"


if __name__ == "__main__":
    sys.exit(main())
