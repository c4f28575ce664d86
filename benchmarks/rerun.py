"""Does the ± nvgg prints hold in the next run? The same rows in fresh processes, one after the
other: how many of the later runs' means fall inside the interval the first run printed (its
`± rerun`), and inside the repetitions' standard error alone (what the ± was before).

    python benchmarks/rerun.py [--runs 11] [--case 3,4] [--strategy multistream,persistent]

Rows: the strategies on our kernels and the torch-eager submission `honest.py` (host-bound).
Target (issue 28): at least 9 of 10 later means inside the first run's interval on host-bound rows.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
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
        rows = {(r["case"], r["source"] or r["strategy"]): r for r in doc["results"] if r["status"] == "ok"}
        runs.append({"gpu": doc["results"][0]["env"].get("gpu"), **rows})
        print(f"run {i + 1}/{args.runs} done", file=sys.stderr, flush=True)


def table(runs: list[dict], gpu) -> None:
    first, later = runs[0], runs[1:]
    rows = []
    for key, r in first.items():
        st = r["stats"]
        mean, rerun, err = st["mean_us"], st.get("rerun_us"), st["err_us"]
        means = [run[key]["stats"]["mean_us"] for run in later if key in run]
        inside = sum(abs(m - mean) <= rerun for m in means) if rerun is not None else None
        inside_err = sum(abs(m - mean) <= 1.96 * err for m in means)
        rows.append([key[0], key[1], f"{mean:.1f}", f"±{rerun:.1f}" if rerun is not None else "—", st.get("blocks"),
                     f"{inside}/{len(means)}" if inside is not None else "—", f"±{1.96 * err:.2f}",
                     f"{inside_err}/{len(means)}", f"{min(means):.1f}-{max(means):.1f}"])
    print(f"card: {gpu}; the first run's interval against {len(later)} later runs, each a fresh process")
    print(tabulate(rows, headers=["case", "row", "first µs", "± rerun", "blocks", "inside", "±1.96 err", "inside",
                                  "later means"], tablefmt="github"))


if __name__ == "__main__":
    main()
