"""What a user waits for: warm `nvgg run --case 3` in a new process against a bare process that only
imports torch and starts CUDA, alternated in one call on one card; the row's own time (inputs,
checks, the timer) from the run's JSON.

    python benchmarks/warm_start.py [--case 3] [--trials 5] [--pycache DIR] [--cold]

Target (issue 27): the warm run within 1 s of the bare start (medians). `--pycache DIR` sets
PYTHONPYCACHEPREFIX for every process: where site-packages cannot be written (a shared read-only
environment) Python compiles torch's sources again in every process, which an installed torch
never does. `--cold` first times one run with an empty kernel cache (the compiles).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from tabulate import tabulate

BARE = "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-400:]}")
    return wall


def nvgg_run(case: str, out: str, env: dict) -> tuple[float, dict, list[str]]:
    """The wall time, the row's result, and the run's timeline (NVGG_TIMELINE, nvgg/procs.py) as
    lines of seconds from the moment the process was asked for."""
    stamps = out + ".timeline"
    if os.path.exists(stamps):
        os.unlink(stamps)
    t0 = time.monotonic()
    wall = timed([sys.executable, "-m", "nvgg", "run", "--case", case, "--json", out], dict(env, NVGG_TIMELINE=stamps))
    lines = []
    for line in open(stamps).read().splitlines():
        t, pid, event = line.split(" ", 2)
        lines.append(f"{float(t) - t0:6.2f} s  {event}")
    lines.append(f"{wall:6.2f} s  nvgg exited")
    return wall, json.load(open(out))["results"][0], lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", default="3")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--pycache", help="PYTHONPYCACHEPREFIX for every process (filled by a first run)")
    parser.add_argument("--cold", action="store_true", help="also one run with an empty kernel cache")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.pycache:
        env["PYTHONPYCACHEPREFIX"] = args.pycache
    rows, bare, warm, row_s = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="nvgg-warm-") as tmp:
        out = os.path.join(tmp, "run.json")
        if args.cold:
            cold_env = dict(env, NVGG_CACHE_DIR=os.path.join(tmp, "cache"))
            wall, res, _ = nvgg_run(args.case, out, cold_env)
            rows.append(["cold kernel cache", "—", f"{wall:.2f}", f"{res['wall_s']:.2f}", "—"])
        timed([sys.executable, "-c", BARE], env)  # the first of each fills caches (bytecode, kernels)
        nvgg_run(args.case, out, env)
        for trial in range(args.trials):
            b = timed([sys.executable, "-c", BARE], env)
            w, res, timeline = nvgg_run(args.case, out, env)
            bare.append(b), warm.append(w), row_s.append(res["wall_s"])
            rows.append([f"warm {trial + 1}", f"{b:.2f}", f"{w:.2f}", f"{res['wall_s']:.2f}", f"{w - b:+.2f}"])
        gpu = res["env"].get("gpu")
    mb, mw = statistics.median(bare), statistics.median(warm)
    paired = statistics.median(w - b for w, b in zip(warm, bare))
    rows.append(["median", f"{mb:.2f}", f"{mw:.2f}", f"{statistics.median(row_s):.2f}", f"{paired:+.2f} (of the pairs)"])
    print(f"card: {gpu}; nvgg run --case {args.case} (persistent, cute) against python -c \"{BARE}\""
          + (f"; PYTHONPYCACHEPREFIX={args.pycache}" if args.pycache else ""))
    print(tabulate(rows, headers=["process", "bare s", "nvgg run s", "its row s", "nvgg - bare s"], tablefmt="github",
                   disable_numparse=True))
    print("the last warm run, step by step:\n" + "\n".join(timeline))


if __name__ == "__main__":
    main()
