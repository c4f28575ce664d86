"""The Hopper benchmark table: our kernels' strategies beside the library baselines, one card,
one run. Prints a table (and writes JSON to $OUT or --json).

Columns, all µs per call with the leaderboard's timer (15 inputs, L2 flushed each repetition):
- nvgg strategies on the cute backend (persistent, multistream, graph, sequential), checked first;
- the torch backend's graph and sequential strategies (expand in PyTorch, then cuBLAS);
- cuBLAS fp16 on inputs already expanded to fp16 (not timed: the expansion), one GEMM per group,
  eager and replayed from a CUDA graph: a bound that no FP4-reading pipeline gets for free;
- the fp16 compute floor: FLOPs / the card's fp16 dense rate measured here (cuBLAS 8192^3).

    python benchmarks/bench_hopper.py [--cases 1,2,3,4] [--strategies persistent/cute,...] [--repeat N] [--json FILE]

With --repeat N every column is measured N times, the passes interleaved (each pass times every
column of a case once), and the table shows the median (the JSON keeps every pass): run-to-run
spread, cuBLAS's eager launches above all, is as large as some of the differences the table is
read for.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
from columns import cell, median
from tabulate import tabulate

from nvgg import cases, env, inputs, reference, runner, timing
from nvgg.errors import NvggError

STRATEGIES = [("persistent", "cute"), ("multistream", "cute"), ("graph", "cute"), ("sequential", "cute"),
              ("graph", "torch"), ("sequential", "torch")]


def fp16_peak_tflops() -> float:
    n = 8192
    a = torch.randn(n, n, dtype=torch.float16, device="cuda")
    b = torch.randn(n, n, dtype=torch.float16, device="cuda")
    for _ in range(3):
        a @ b
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
    return 2 * n ** 3 / statistics.median(times) / 1e12


def cublas_pre_expanded(case) -> tuple[float, float]:
    """(eager, graph) µs per call of cuBLAS fp16 GEMMs on pre-expanded operands, checked first."""
    batch = inputs.generate_batch(case, "cuda")
    calls, graphs, keep = [], [], []
    for data in batch:
        ops = []
        for (a, b, c), (sfa, sfb) in zip(data[0], data[1]):
            ea = reference.expand(a[:, :, 0], sfa[:, :, 0], torch.float16)
            eb = reference.expand(b[:, :, 0], sfb[:, :, 0], torch.float16)
            ops.append((ea, eb, c[:, :, 0]))
        keep.append(ops)

        def call(ops=ops):
            for ea, eb, out in ops:
                torch.mm(ea, eb.T, out=out)
        verdict = reference.checked_call(data, call)
        if not verdict.ok:
            raise RuntimeError(f"cuBLAS pre-expanded baseline wrong on case {case.id}: {verdict.message}")
        calls.append(call)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        graphs.append(graph)
    eager = timing.EventTimer("cuda").batch(calls).mean_us
    replay = timing.EventTimer("cuda").batch([g.replay for g in graphs]).mean_us
    return eager, replay


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="1,2,3,4")
    parser.add_argument("--strategies", default=",".join(f"{s}/{b}" for s, b in STRATEGIES),
                        help="nvgg columns, strategy/backend joined by commas")
    parser.add_argument("--repeat", type=int, default=1, help="interleaved passes; the table shows medians")
    parser.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "bench_hopper.json"))
    args = parser.parse_args()
    columns = [tuple(c.split("/")) for c in args.strategies.split(",") if c]
    unknown = [c for c in columns if c not in STRATEGIES]
    if unknown or args.repeat < 1:
        raise SystemExit(f"--strategies takes {', '.join(f'{s}/{b}' for s, b in STRATEGIES)} and --repeat "
                         f"at least 1 (got {args.strategies!r}, {args.repeat})")
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    peak = fp16_peak_tflops()
    rows, doc = [], {"env": env.collect(torch.device("cuda")), "fp16_peak_tflops": peak, "cases": {}}
    for case in cases.select(args.cases):
        passes = []
        for _ in range(args.repeat):
            entry = {}
            for strategy, backend in columns:
                try:
                    res = runner.run_one(case, strategy=strategy, backend=backend)
                    entry[f"{strategy}/{backend}"] = res.time_us if res.status == "ok" else f"{res.status}: {res.message}"
                except NvggError as exc:
                    entry[f"{strategy}/{backend}"] = f"n/a: {exc}"
                except Exception as exc:  # keep measuring the other columns, say what broke
                    entry[f"{strategy}/{backend}"] = f"error: {type(exc).__name__}: {exc}"
            entry["cublas_fp16_pre_expanded"], entry["cublas_fp16_pre_expanded_graph"] = cublas_pre_expanded(case)
            passes.append(entry)
        entry = {"floor_us": case.flops / (peak * 1e12) * 1e6}
        entry.update({k: median([p[k] for p in passes]) for k in passes[0]})
        doc["cases"][case.id] = dict(entry, passes=passes)
        rows.append([case.id] + [cell(entry[k]) for k in entry])
        headers = ["case"] + list(entry)
        print(f"case {case.id} done", flush=True)
    with open(args.json, "w") as fh:
        json.dump(doc, fh, indent=2, default=str)
    print(f"card: {doc['env']['gpu']}; fp16 dense peak measured {peak:.0f} TFLOP/s (cuBLAS 8192^3); "
          f"median of {args.repeat} interleaved pass(es)")
    print(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))


if __name__ == "__main__":
    main()
