"""How much the harness adds: time spin kernels of known length (~2 µs to ~50 µs) with each
timer mode and compare with their durations from CUPTI (torch.profiler). Prints a table.

    python benchmarks/timer_overhead.py
"""

from __future__ import annotations

import torch
from tabulate import tabulate

from nvgg import cupti, timing


def cupti_mean_us(launches) -> float:
    acts = cupti.record(lambda: [launch() for launch in launches])
    assert len(acts) == len(launches), [a.name for a in acts]
    return sum(a.us for a in acts) / len(acts)


def main() -> None:
    dev = torch.device("cuda")
    clock_mhz = timing.spin_cycles_per_us(dev)
    rows = []
    for target_us in (2, 5, 20, 50):
        cycles = int(target_us * clock_mhz)
        launches = [lambda c=cycles: torch.cuda._sleep(c)] * 15
        for launch in launches:
            launch()
        truth = cupti_mean_us(launches)
        lb = timing.EventTimer(dev).batch(launches)
        qa = timing.EventTimer(dev, queue_ahead=True).batch(launches)
        pc = timing.EventTimer(dev).per_call(launches)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for launch in launches:
                launch()
        gr = timing.EventTimer(dev).batch([graph.replay])
        rows.append([f"{truth:.3f}", f"{lb.mean_us:.3f} ({lb.mean_us / truth - 1:+.1%})",
                     f"{qa.mean_us:.3f} ({qa.mean_us / truth - 1:+.1%})",
                     f"{pc.mean_us:.3f} ({pc.mean_us / truth - 1:+.1%})",
                     f"{gr.mean_us / 15:.3f} ({gr.mean_us / 15 / truth - 1:+.1%})"])
    print(f"card: {torch.cuda.get_device_name()}  (spin measured at {clock_mhz:.0f} cycles/µs)")
    print(tabulate(rows, headers=["CUPTI kernel µs", "leaderboard", "queue-ahead", "per-call", "graph of 15 / 15"],
                   tablefmt="github", disable_numparse=True))


if __name__ == "__main__":
    main()
