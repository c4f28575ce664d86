"""The Hopper benchmark table: our kernels' strategies beside the library baselines, one card,
one run. Prints a table (and writes JSON to $OUT or --json).

Columns, all µs per call with the leaderboard's timer (15 inputs, L2 flushed each repetition):
- nvgg strategies on the cute backend (persistent, multistream, graph, sequential), checked first;
  the persistent kernel by build: `persistent[host]` and `persistent[device]` (its tensor-map
  modes, phase 0 first and then each CTA waiting on the readiness counters of a group's rows),
  `persistent[host+chunks]` (A streamed by helper warps beside the main loops, a counter a row
  block and stage: the backend's default), `persistent[grid+device]` (the earlier build's wait and
  maps: a grid barrier after all of phase 0), `persistent[chunks+split]` and
  `persistent[chunks+nosplit]` (tiles' k always or never split between CTAs, where the backend
  splits where its model says), `persistent[serial]`
  (launched without programmatic stream serialization, each launch waiting for the previous
  kernel to end, and phase 0 dealt evenly), `persistent` (the backend's default build);
- the torch backend's graph and sequential strategies (expand in PyTorch, then cuBLAS);
- cuBLAS fp16 on inputs already expanded to fp16 (not timed: the expansion), one GEMM per group,
  eager and replayed from a CUDA graph: a bound that no FP4-reading pipeline gets for free;
- the fp16 compute floor: FLOPs / the card's fp16 dense rate measured here (cuBLAS 8192^3).

    python benchmarks/bench_hopper.py [--cases 1,2,3,4] [--strategies persistent[host]/cute,...] [--repeat N]
        [--phases] [--json FILE]

With --repeat N every column is measured N times, the passes interleaved (each pass times every
column of a case once), and the table shows the median (the JSON keeps every pass): run-to-run
spread, cuBLAS's eager launches above all, is as large as some of the differences the table is
read for. --phases adds, per case and persistent build, the instrumented build's phases (medians
and maxima over CTAs): the time to the first MMA and what precedes it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
from columns import cell, median, refuse as _refuse
from tabulate import tabulate

from nvgg import cases, datapath, env, inputs, reference, timing
from nvgg.errors import NvggError

STRATEGIES = [("persistent[host]", "cute"), ("persistent[device]", "cute"), ("persistent[grid+device]", "cute"),
              ("multistream", "cute"), ("graph", "cute"), ("sequential", "cute"), ("graph", "torch"),
              ("sequential", "torch")]
KNOWN = STRATEGIES + [("persistent", "cute")]


def _column(strategy: str, backend: str) -> dict:
    """datapath.run_one's arguments for a column name: persistent[OPTIONS] takes options joined by
    "+": host (default) or device maps, rows (default), grid or chunks wait, split or nosplit (the
    chunks build's tiles' k always or never split; else where the model says), serial (launched
    without programmatic stream serialization, the previous launch's way)."""
    if not strategy.startswith("persistent["):
        return {"strategy": strategy, "backend": backend}
    options = _build_options(strategy)
    from nvgg.backends.cute import CuteBackend
    from nvgg.kernels.sm90.family import Sm90Kernels
    wait = ([w for w in ("grid", "chunks") if w in options] or ["rows"])[0]
    split = True if "split" in options else False if "nosplit" in options else None
    build = Sm90Kernels(readiness=wait, programmatic="serial" not in options, split=split)
    return {"strategy": "persistent",
            "backend": CuteBackend(tensormaps="device" if "device" in options else "host", family=build)}


def _build_options(strategy: str) -> set[str]:
    """The options of a persistent[OPTIONS] column, refused in one line where unknown or clashing."""
    options = set(strategy[len("persistent["):-1].split("+"))
    unknown = options - {"host", "device", "grid", "rows", "chunks", "split", "nosplit", "serial"}
    if (unknown or len(options & {"grid", "rows", "chunks"}) > 1 or {"host", "device"} <= options
            or {"split", "nosplit"} <= options or (options & {"split", "nosplit"} and "chunks" not in options)):
        _refuse(f"{strategy}: the options are host or device, one of grid, rows and chunks, split or nosplit "
                "(chunks only), and serial, joined by +")
    return options


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
    parser.add_argument("--phases", action="store_true", help="the persistent builds' device phases too")
    parser.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "bench_hopper.json"))
    args = parser.parse_args()
    columns = [tuple(c.split("/")) for c in args.strategies.split(",") if c]
    unknown = [c for c in columns if c not in KNOWN and not (len(c) == 2 and c[0].startswith("persistent["))]
    if unknown or args.repeat < 1 or not columns:
        _refuse(f"--strategies takes {', '.join(f'{s}/{b}' for s, b in KNOWN)} and --repeat "
                f"at least 1 (got {args.strategies!r}, {args.repeat})")
    for strategy, _ in columns:  # every column's options, before any GPU work
        if strategy.startswith("persistent["):
            _build_options(strategy)
    folder = os.path.dirname(os.path.abspath(args.json))
    if not args.json or os.path.isdir(args.json) or not os.access(folder, os.W_OK):
        _refuse(f"--json {args.json!r} cannot be written (a folder, or a folder that does not exist or is read-only): "
                "give a file path in a writable folder")
    if not torch.cuda.is_available():
        _refuse("it measures on a GPU and none is visible here: run it on an H100 or H200")
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    peak = fp16_peak_tflops()
    rows, doc = [], {"env": env.collect(torch.device("cuda")), "fp16_peak_tflops": peak, "cases": {}}
    for case in cases.select(args.cases):
        passes = []
        for _ in range(args.repeat):
            entry = {}
            for strategy, backend in columns:
                try:
                    res = datapath.run_one(case, **_column(strategy, backend))
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
    print(f"card: {doc['env']['gpu']}; fp16 dense peak measured {peak:.0f} TFLOP/s (cuBLAS 8192^3); "
          f"median of {args.repeat} interleaved pass(es)")
    print(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))
    if args.phases:
        print_phases(args, columns, doc)
    with open(args.json, "w") as fh:
        json.dump(doc, fh, indent=2, default=str)


def print_phases(args, columns, doc) -> None:
    """Each persistent build's device phases (instrumented build, checked first), per case."""
    from nvgg.profiling import device_phases

    rows, names = [], []
    for case in cases.select(args.cases):
        for strategy, backend in columns:
            if not strategy.startswith("persistent"):
                continue
            kwargs = _column(strategy, backend)
            try:
                run = device_phases.run(case, backend=kwargs["backend"])
            except NvggError as exc:
                rows.append([case.id, strategy, f"n/a: {exc}"])
                continue
            rep = run.report
            # a build's own names for its spans (the chunks build streams A beside its main loops)
            names.append([p.name for p in rep.phases])
            doc["cases"][case.id].setdefault("phases", {})[strategy] = run.to_dict()
            behind = run.behind
            rows.append([case.id, strategy, f"{run.plain_us:.1f}", f"{rep.time_to_first_mma_us:.2f}",
                         f"{behind.start_median_us:+.2f} / {behind.first_mma_median_us:+.2f}" if behind else "—"]
                        + [f"{p.median_us:.2f} / {p.max_us:.2f}" for p in rep.phases])
    print("\ndevice phases, µs (median / max over CTAs; kernel: CUPTI, the timed build); "
          "targets: to first MMA at most 3 µs on cases 3 and 4; behind: a programmatic launch right behind "
          "another, its CTAs' start / first MMA against the other's last exit (medians)")
    print(tabulate(rows, headers=["case", "build", "kernel µs", "to first MMA µs", "behind: start / first MMA"]
                   + [" / ".join(dict.fromkeys(n)) for n in zip(*names)],
                   tablefmt="github", disable_numparse=True))


if __name__ == "__main__":
    main()
