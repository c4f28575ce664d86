"""What a user waits for: `nvgg run --case 3` (persistent, cute) in a new process, cold cache and
then warm, on one card; the warm run's compile and first prepare from its own JSON, beside a bare
process that only imports torch and starts CUDA.

    python benchmarks/warm_start.py [--case 3] [--strategy persistent]

Targets (issue 13): warm, compile + first prepare at most 100 ms and the whole command within 5 s
of wall time, torch's import included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from tabulate import tabulate


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-400:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", default="3")
    parser.add_argument("--strategy", default="persistent")
    args = parser.parse_args()
    env = dict(os.environ)
    rows = []
    with tempfile.TemporaryDirectory(prefix="nvgg-warm-") as tmp:
        env["NVGG_CACHE_DIR"] = os.path.join(tmp, "cache")  # cold: an empty compile cache
        bare = timed([sys.executable, "-c", "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"], env)
        rows.append(["python, import torch, start CUDA", f"{bare:.2f}", "—", "—"])
        for label in ("cold cache", "warm cache"):
            out = os.path.join(tmp, f"{label[:4]}.json")
            wall = timed([sys.executable, "-m", "nvgg", "run", "--case", args.case, "--strategy", args.strategy,
                          "--backend", "cute", "--json", out], env)
            setup = json.load(open(out))["results"][0]["setup_us"]
            rows.append([f"nvgg run --case {args.case} --strategy {args.strategy} ({label})", f"{wall:.2f}",
                         f"{setup['compile'] / 1e3:.1f}", f"{setup['first_prepare'] / 1e3:.1f}"])
    import torch
    print(f"card: {torch.cuda.get_device_name()}; wall time includes the leaderboard timing itself")
    print(tabulate(rows, headers=["process", "wall s", "compile ms", "first prepare ms"], tablefmt="github",
                   disable_numparse=True))


if __name__ == "__main__":
    main()
