"""What a user waits for: warm `nvgg run --case 3` in a new process against a bare process that only
imports torch and starts CUDA, alternated in one call on one card; the row's own time (inputs,
checks, the timer) from the run's JSON.

    python benchmarks/warm_start.py [--case 3] [--trials 5] [--quick] [--pycache DIR] [--cold]

Target (issue 27): the warm run within 1 s of the bare start (medians). `--quick` times `nvgg run
--quick` (one timing window, without `± rerun` or the energy a call) instead. `--pycache DIR` sets
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
# the bare process, saying when it had torch and when CUDA (CLOCK_MONOTONIC, as NVGG_TIMELINE)
BARE_STAMPED = ("import time; print(time.monotonic()); import torch; print(time.monotonic()); "
                "torch.zeros(1, device='cuda'); torch.cuda.synchronize(); print(time.monotonic())")


def timed(cmd: list[str], env: dict) -> float:
    return timed_out(cmd, env)[0]


def timed_out(cmd: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-400:]}")
    return wall, proc.stdout


def bare_run(env: dict) -> tuple[float, str]:
    """The bare start's wall time and its steps: Python up, torch imported, CUDA up, exited (s)."""
    t0 = time.monotonic()
    wall, out = timed_out([sys.executable, "-c", BARE_STAMPED], env)
    up, torch_at, cuda_at = (float(x) - t0 for x in out.split())
    return wall, f"{up:.2f} / {torch_at - up:.2f} / {cuda_at - torch_at:.2f} / {wall - cuda_at:.2f}"


def steps(timeline: list[str]) -> str:
    """A warm run's row in its worker, by step: set up, checked, timed (the energy a call measured in
    the same span), the observers' figures made from it (s)."""
    at = {line.split("s  ", 1)[1]: float(line.split(" s ", 1)[0]) for line in timeline}
    marks = ["worker call in", "row set up", "row checked", "row refilled", "row timed", "row clocks sampled",
             "row timed outputs checked", "row observed", "worker call out"]
    if marks[0] not in at or marks[-1] not in at:
        return "—"
    for before, mark in zip(marks, marks[1:]):  # a step not taken (--quick: no energy a call) lasted 0 s
        at.setdefault(mark, at[before])
    d = [at[b] - at[a] for a, b in zip(marks, marks[1:])]
    return " / ".join(f"{x:.2f}" for x in d)


def nvgg_run(case: str, out: str, env: dict, extra: tuple = ()) -> tuple[float, dict, list[str]]:
    """The wall time, the row's result, and the run's timeline (NVGG_TIMELINE, nvgg/procs.py) as
    lines of seconds from the moment the process was asked for."""
    stamps = out + ".timeline"
    if os.path.exists(stamps):
        os.unlink(stamps)
    t0 = time.monotonic()
    wall = timed([sys.executable, "-m", "nvgg", "run", "--case", case, *extra, "--json", out],
                 dict(env, NVGG_TIMELINE=stamps))
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
    parser.add_argument("--quick", action="store_true", help="nvgg run --quick: one timing window, no energy a call")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.pycache:
        env["PYTHONPYCACHEPREFIX"] = args.pycache
    rows, bare, warm, row_s = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="nvgg-warm-") as tmp:
        out = os.path.join(tmp, "run.json")
        if args.cold:
            cold_env = dict(env, NVGG_CACHE_DIR=os.path.join(tmp, "cache"))
            wall, res, _ = nvgg_run(args.case, out, cold_env, ("--quick",) if args.quick else ())
            rows.append(["cold kernel cache", "—", "—", f"{wall:.2f}", f"{res['wall_s']:.2f}", "—", "—"])
        timed([sys.executable, "-c", BARE], env)  # the first of each fills caches (bytecode, kernels)
        extra = ("--quick",) if args.quick else ()
        nvgg_run(args.case, out, env, extra)
        for trial in range(args.trials):
            b, bare_steps = bare_run(env)
            w, res, timeline = nvgg_run(args.case, out, env, extra)
            bare.append(b), warm.append(w), row_s.append(res["wall_s"])
            rows.append([f"warm {trial + 1}", f"{b:.2f}", bare_steps, f"{w:.2f}", f"{res['wall_s']:.2f}", steps(timeline),
                         f"{w - b:+.2f}"])
        gpu = res["env"].get("gpu")
    mb, mw = statistics.median(bare), statistics.median(warm)
    paired = statistics.median(w - b for w, b in zip(warm, bare))
    rows.append(["median", f"{mb:.2f}", "", f"{mw:.2f}", f"{statistics.median(row_s):.2f}", "",
                 f"{paired:+.2f} (of the pairs)"])
    print(f"card: {gpu}; nvgg run --case {args.case}{' --quick' if args.quick else ''} (persistent, cute) against python -c \"{BARE}\""
          + (f"; PYTHONPYCACHEPREFIX={args.pycache}" if args.pycache else ""))
    print(tabulate(rows, headers=["process", "bare s", "bare: up / torch / CUDA / exit s", "nvgg run s", "its row s",
                                  "row: setup / check / refill / timed / clocks / outputs / energy / out s", "nvgg - bare s"], tablefmt="github",
                   disable_numparse=True))
    print("the last warm run, step by step:\n" + "\n".join(timeline))


if __name__ == "__main__":
    main()
