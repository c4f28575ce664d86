"""Why a host-bound row's time differs between processes: fresh processes, each timing the same
rows with its thread pinned to each CPU core in turn (a random order) and unpinned.

    python benchmarks/host_spread.py [--processes 5] [--case 3] [--calls 300]
    python benchmarks/host_spread.py --modes [--windows 1000]   # one process, how long a spread lasts

Per row, core and process: the host µs a call (the median of `--calls` calls issued back to back,
the launches returning before the GPU finishes) and the leaderboard timer's mean µs a call. A
spread that follows the core says pinning is the cure; one that follows the process (the same
in every core of one process, different in the next) says it is not.
Rows: `multistream/cute` (one launch a group from Python) and the torch-eager submission
`tests/fixtures/submissions/honest.py`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HONEST = ROOT / "tests" / "fixtures" / "submissions" / "honest.py"


def child(case_id: str, calls: int, seed: int) -> None:
    import torch

    from nvgg import cases, datapath, timing
    from nvgg.backends import submission as sub
    from nvgg.strategies import AsSubmitted

    sys.path.insert(0, str(HONEST.parent))
    case = cases.get(case_id)
    sessions = {
        "multistream/cute": datapath.setup(case, strategy="multistream", backend="cute"),
        "honest.py": datapath.setup(case, strategy=AsSubmitted(),
                                    backend=sub.SubmissionBackend(sub.load(HONEST, case_id))),
    }
    for name, s in sessions.items():
        if not datapath.check(s):
            raise SystemExit(f"{name} wrong on case {case_id}")
    everyone = sorted(os.sched_getaffinity(0))
    places = [[c] for c in everyone] + [everyone]
    random.Random(seed).shuffle(places)
    device = torch.device("cuda")
    for place in places:
        os.sched_setaffinity(0, place)
        for name, s in sessions.items():
            launches = s.launches
            for launch in launches * 3:
                launch()
            torch.cuda.synchronize()
            host = []
            for i in range(calls):
                if i % len(launches) == 0:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                launches[i % len(launches)]()
                host.append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
            stats = timing.make_timer(device, "leaderboard", max_reps=20, min_span_s=0.0).batch(launches)
            print(json.dumps({"pid": os.getpid(), "core": "all" if len(place) > 1 else place[0], "row": name,
                              "host_us": statistics.median(host), "leaderboard_us": stats.mean_us}), flush=True)


def modes(case_id: str, windows: int) -> None:
    """Two sessions of one host-bound row (the same build), timed in alternating windows of one
    leaderboard batch each (A B A B ...): how the window times correlate with their neighbours, and
    how much closer an adjacent A/B pair is than two windows taken at random."""
    import torch

    from nvgg import cases, datapath, timing

    device = torch.device("cuda")
    for label, strategy in (("multistream/cute", "multistream"),):
        pair = [datapath.setup(cases.get(case_id), strategy=strategy, backend="cute") for _ in range(2)]
        assert all(datapath.check(s) for s in pair)
        clear = timing.L2Flush(device)
        stream = torch.cuda.current_stream(device)
        t0, times = time.perf_counter(), [[], []]
        for w in range(2 * windows):
            launches = pair[w % 2].launches
            torch.cuda.synchronize(device)
            clear()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            for launch in launches:
                launch()
            end.record(stream)
            end.synchronize()
            times[w % 2].append(start.elapsed_time(end) * 1e3 / len(launches))
        wall = time.perf_counter() - t0
        a, b = times
        print(f"\n{label}, case {case_id}: {windows} windows a session, alternating, {wall:.1f} s "
              f"({wall / 2 / windows * 1e3:.2f} ms a window); A µs p5/p50/p95 "
              + "/".join(f"{q:.1f}" for q in _quantiles(a)))
        for lag in (1, 3, 10, 30, 100, 300):
            if lag < windows // 2:
                print(f"  A's autocorrelation at lag {lag} ({lag * wall / windows * 1e3:.0f} ms): {_autocorr(a, lag):+.2f}")
        adjacent = [math.log(y / x) for x, y in zip(a, b)]
        shuffled = b[:]
        random.Random(0).shuffle(shuffled)
        distant = [math.log(y / x) for x, y in zip(a, shuffled)]
        print(f"  log(B/A) sd: adjacent windows {statistics.stdev(adjacent):.3f}, random pairs "
              f"{statistics.stdev(distant):.3f}")
        for block in (10, 100):
            means = [statistics.fmean(a[i:i + block]) for i in range(0, len(a) - block + 1, block)]
            print(f"  means of {block} consecutive windows: sd {statistics.stdev(means) / statistics.fmean(means):.1%}"
                  f" of the mean over {len(means)} blocks")


def _quantiles(xs: list[float]) -> list[float]:
    q = statistics.quantiles(xs, n=20)
    return [q[0], statistics.median(xs), q[-1]]


def _autocorr(xs: list[float], lag: int) -> float:
    m = statistics.fmean(xs)
    num = sum((x - m) * (y - m) for x, y in zip(xs, xs[lag:]))
    den = sum((x - m) ** 2 for x in xs)
    return num / den if den else 0.0


def local_cpus() -> str:
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        words = pynvml.nvmlDeviceGetCpuAffinity(h, (os.cpu_count() + 63) // 64)
        bits = [i for w, word in enumerate(words) for i in range(64) if word >> i & 1]
        return ",".join(map(str, bits))
    except Exception as exc:
        return f"unknown ({type(exc).__name__})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--case", default="3")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--modes", action="store_true", help="one process: how long a spread lasts")
    parser.add_argument("--windows", type=int, default=1000)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.modes:
        modes(args.case, args.windows)
        return
    if args.child is not None:
        child(args.case, args.calls, args.child)
        return
    print(f"cores {os.cpu_count()}, the GPU's local CPUs (NVML): {local_cpus()}", flush=True)
    records = []
    for p in range(args.processes):
        out = subprocess.run([sys.executable, __file__, "--child", str(p), "--case", args.case, "--calls",
                              str(args.calls)], capture_output=True, text=True)
        if out.returncode:
            print(f"process {p} failed: {out.stderr[-800:]}", flush=True)
            continue
        records += [dict(json.loads(line), p=p) for line in out.stdout.splitlines() if line.startswith("{")]
        print(f"process {p} done", file=sys.stderr, flush=True)
    for row in sorted({r["row"] for r in records}):
        mine = [r for r in records if r["row"] == row]
        procs = sorted({r["p"] for r in mine})
        cores = sorted({r["core"] for r in mine}, key=lambda c: (c == "all", c if c != "all" else 0))
        print(f"\n{row}, case {args.case}: host µs a call / leaderboard µs a call; a column a process")
        print("core  " + "  ".join(f"{'p' + str(p):>13}" for p in procs))
        for c in cores:
            cells = {r["p"]: f"{r['host_us']:6.1f}/{r['leaderboard_us']:6.1f}" for r in mine if r["core"] == c}
            print(f"{str(c):>4}  " + "  ".join(f"{cells.get(p, '-'):>13}" for p in procs))


if __name__ == "__main__":
    main()
