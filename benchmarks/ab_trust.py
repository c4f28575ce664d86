"""Can `nvgg ab` be trusted? The same build as A and as B, and a copy made slower on purpose, each
A/B'd several times on the benchmark cases; then the evaluator's L2 clear against nvgg's.

    python benchmarks/ab_trust.py [--tries 20] [--cases 1,2,3,4] [--slower 0.03] [--l2-table]
    python benchmarks/ab_trust.py --smoke     # on a CPU: the mechanics on test-1, two tries

Versions (written into a temporary folder, each a folder of its own with the fixtures it imports):
`ours` (nvgg's persistent kernel as a submission, GPU-bound), `ours-same` (the same file again),
`ours-slower` (the same with NVGG_FIXTURE_SLOWDOWN set in its own process: a spin after each call
of that share of the call's time), `torch` (the host-bound library submission `honest.py`) and
`torch-same`. Targets (issue 28): the same build "same" in at least 19 of 20 tries a case; 3%
slower "slower" in at least 9 of 10 on cases 1-3.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "submissions"


def version(folder: Path, name: str, source: str, slowdown: float = 0.0) -> str:
    """A version's folder: the fixture as submission.py, with slowdown.py beside it."""
    where = folder / name
    where.mkdir()
    text = (FIXTURES / source).read_text()
    if slowdown:  # set in the version's own worker process before slowdown.py reads it
        text = f"import os\nos.environ['NVGG_FIXTURE_SLOWDOWN'] = '{slowdown}'\n" + text
    (where / "submission.py").write_text(text)
    shutil.copy(FIXTURES / "slowdown.py", where / "slowdown.py")
    return str(where / "submission.py")


def ab(a: str, b: str, cases: str, out: Path, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "nvgg", "ab", "--case", cases, "--submission", a, "--submission", b, "--json", str(out),
           *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode not in (0, 1) or not out.exists():
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-600:]}")
    return json.loads(out.read_text())


def classes(doc: dict) -> dict[str, tuple[str, float, str]]:
    """case -> (class, ratio, why it stopped)."""
    out = {}
    for case in doc["cases"]:
        r = case["versions"][1]["vs_base"]
        out[case["case"]] = (r["class"] if r else "—", r["ratio"] if r else float("nan"), case["stopped"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--cases", default="1,2,3,4")
    parser.add_argument("--slower", type=float, default=0.03)
    parser.add_argument("--l2-table", action="store_true", help="also time cases with --l2 nvgg and --l2 evaluator")
    parser.add_argument("--smoke", action="store_true", help="CPU: test-1, two tries, the torch versions only")
    args = parser.parse_args()
    if args.smoke:
        args.tries, args.cases = 2, "test-1"
    with tempfile.TemporaryDirectory(prefix="nvgg-ab-trust-") as tmp:
        folder = Path(tmp)
        pairs = {"torch same build": (version(folder, "torch", "honest.py"), version(folder, "torch-same", "honest.py"))}
        if not args.smoke:
            ours = version(folder, "ours", "ours.py")
            pairs["ours same build"] = (ours, version(folder, "ours-same", "ours.py"))
            pairs[f"ours {args.slower:.0%} slower"] = (ours, version(folder, "ours-slower", "ours.py", args.slower))
        counts: dict = collections.defaultdict(collections.Counter)
        ratios: dict = collections.defaultdict(list)
        for label, (a, b) in pairs.items():
            for t in range(args.tries):
                doc = ab(a, b, args.cases, folder / f"{len(counts)}-{t}.json", [])
                for case, (klass, ratio, stopped) in classes(doc).items():
                    counts[(label, case)][klass] += 1
                    ratios[(label, case)].append(ratio)
                print(f"{label}: try {t + 1}/{args.tries} done", file=sys.stderr, flush=True)
        gpu = doc["env"].get("gpu")
        rows = []
        for (label, case), counter in counts.items():
            rs = sorted(ratios[(label, case)])
            rows.append([label, case, counter["same"], counter["slower"], counter["faster"], counter["unsure"],
                         f"{rs[0]:.3f}-{rs[-1]:.3f}"])
        print(f"card: {gpu}; {args.tries} tries a pair and case (nvgg ab, default floor ±2%)")
        print(tabulate(rows, headers=["pair", "case", "same", "slower", "faster", "unsure", "ratios"], tablefmt="github"))
        if args.l2_table and not args.smoke:
            l2_rows = []
            for clear in ("nvgg", "evaluator"):
                out = folder / f"l2-{clear}.json"
                cmd = [sys.executable, "-m", "nvgg", "compare", "--case", args.cases, "--strategy", "persistent",
                       "--backend", "cute", "--submission", pairs["torch same build"][0], "--l2", clear, "--json", str(out)]
                subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
                for r in json.loads(out.read_text())["results"]:
                    l2_rows.append([clear, r["case"], r["source"] or f"{r['strategy']}/{r['backend']}", r["time_us"]])
            print(tabulate(l2_rows, headers=["L2 clear", "case", "row", "µs"], tablefmt="github"))


if __name__ == "__main__":
    main()
