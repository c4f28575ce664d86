"""Does the ± nvgg prints hold in the next run? The same rows in fresh processes, one after the
other: how many of the later runs' means fall inside the interval the first run printed (its
`± rerun`), inside the blocks' t-interval alone (what `± rerun` is on a row that is not
host-bound), and inside the repetitions' standard error alone; and the same with every run taken
as the first in turn ("any first").

    python benchmarks/rerun.py [--runs 11] [--case 3,4] [--strategy multistream,persistent]

Rows: the strategies on our kernels and the torch-eager submission `honest.py` (host-bound).
Target (issue 28): at least 9 of 10 later means inside the first run's interval on host-bound rows.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from nvgg import timing  # noqa: E402
HONEST = ROOT / "tests" / "fixtures" / "submissions" / "honest.py"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--case", default="3,4")
    parser.add_argument("--strategy", default="multistream,persistent")
    args = parser.parse_args()
    runs: list[dict] = []
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a timeout's TERM: the table of the runs done
    with tempfile.TemporaryDirectory(prefix="nvgg-rerun-") as tmp:
        try:
            _runs(args, Path(tmp), runs)
        except KeyboardInterrupt:
            print(f"stopped after {len(runs)} runs", file=sys.stderr)
    if len(runs) < 2:
        raise SystemExit("fewer than two runs: nothing to compare")
    gpu = runs[0].pop("gpu")
    for run in runs[1:]:
        run.pop("gpu")
    table(runs, gpu)


def _runs(args, tmp: Path, runs: list[dict]) -> None:
    for i in range(args.runs):
        out = tmp / f"{i}.json"
        cmd = [sys.executable, "-m", "nvgg", "compare", "--case", args.case, "--strategy", args.strategy,
               "--backend", "cute", "--submission", str(HONEST), "--json", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if not out.exists():
            raise SystemExit(f"run {i} wrote nothing ({proc.returncode}): {proc.stderr[-500:]}")
        doc = json.loads(out.read_text())
        rows = {(r["case"], r["source"] or r["strategy"]): {**r, "host_bound": (r["stats"].get("block_s") or 0) >= timing.HOST_BLOCK_S}
                for r in doc["results"] if r["status"] == "ok"}
        runs.append({"gpu": doc["results"][0]["env"].get("gpu"), **rows})
        said = " ".join(f"{c}/{name}:{r['stats']['mean_us']:.1f}" for (c, name), r in rows.items())
        print(f"run {i + 1}/{args.runs} done: {said}", file=sys.stderr, flush=True)


def _t_interval(st: dict) -> float | None:
    """The blocks' t-interval alone (what `± rerun` is for a row that is not host-bound)."""
    if not st.get("blocks") or st["blocks"] < timing.MIN_BLOCKS or st.get("block_err_us") is None:
        return None
    return timing.t975(st["blocks"] - 1) * math.sqrt(2) * max(st["err_us"], st["block_err_us"])


def _held(runs: list[dict], key, width) -> tuple[int, int]:
    """Every run taken as the first in turn: how many of the other runs' means its interval held."""
    held = total = 0
    for i, run in enumerate(runs):
        if key not in run or width(run[key]["stats"]) is None:
            continue
        st = run[key]["stats"]
        for j, other in enumerate(runs):
            if j != i and key in other:
                total += 1
                held += abs(other[key]["stats"]["mean_us"] - st["mean_us"]) <= width(st)
    return held, total


def table(runs: list[dict], gpu) -> None:
    first, later = runs[0], runs[1:]
    widths = {"± rerun": lambda st: st.get("rerun_us"), "blocks' t": _t_interval,
              "±1.96 err": lambda st: 1.96 * st["err_us"]}
    rows = []
    for key, r in first.items():
        st = r["stats"]
        means = [run[key]["stats"]["mean_us"] for run in later if key in run]
        row = [key[0], key[1], f"{st['mean_us']:.1f}", st.get("blocks"), "yes" if r["host_bound"] else "no"]
        for width in widths.values():
            w = width(st)
            inside = sum(abs(m - st["mean_us"]) <= w for m in means) if w is not None else None
            held, total = _held(runs, key, width)
            row += [f"±{w:.1f}" if w is not None else "—", f"{inside}/{len(means)}" if w is not None else "—",
                    f"{held}/{total}" if total else "—"]
        rows.append(row + [f"{min(means):.1f}-{max(means):.1f}"])
    print(f"card: {gpu}; the first run's interval against {len(later)} later runs, each a fresh process; "
          f"'any first': every run's interval against all the others' means")
    headers = ["case", "row", "first µs", "blocks", "host-bound"]
    for name in widths:
        headers += [name, "inside", "any first"]
    print(tabulate(rows, headers=headers + ["later means"], tablefmt="github"))


if __name__ == "__main__":
    main()
