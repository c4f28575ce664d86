"""Can `nvgg ab` be trusted? The same build as A and as B, and a copy made slower on purpose, each
A/B'd several times on the benchmark cases; then the evaluator's L2 clear against nvgg's.

    python benchmarks/ab_trust.py [--tries 20] [--cases 1,2,3,4] [--slower 0.03] [--l2-table]
        [--torch-tries N] [--torch-cases IDS] [--ab "--rounds 10"]
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
import time
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


def ab(versions: list[str], cases: str, out: Path, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "nvgg", "ab", "--case", cases, *[x for v in versions for x in ("--submission", v)],
           "--json", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode not in (0, 1) or not out.exists():
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-600:]}")
    return json.loads(out.read_text())


def classes(doc: dict) -> dict[tuple[str, str], tuple[str, float]]:
    """(version name, case) -> (class, ratio) for every version after the first."""
    out = {}
    for case in doc["cases"]:
        for v in case["versions"][1:]:
            r = v["vs_base"]
            out[(v["name"], case["case"])] = (r["class"], r["ratio"]) if r else ("—", float("nan"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--cases", default="1,2,3,4")
    parser.add_argument("--torch-tries", type=int, default=None, help="tries of the torch pair (default --tries)")
    parser.add_argument("--torch-cases", default=None, help="cases of the torch pair (default --cases)")
    parser.add_argument("--slower", type=float, default=0.03)
    parser.add_argument("--ab", default="", help="options passed to nvgg ab, as one string")
    parser.add_argument("--l2-table", action="store_true", help="also time cases with --l2 nvgg and --l2 evaluator")
    parser.add_argument("--smoke", action="store_true", help="CPU: test-1, two tries, the torch versions only")
    args = parser.parse_args()
    if args.smoke:
        args.tries, args.cases = 2, "test-1"
    with tempfile.TemporaryDirectory(prefix="nvgg-ab-trust-") as tmp:
        folder = Path(tmp)
        torch_pair = [version(folder, "torch", "honest.py"), version(folder, "torch-same", "honest.py")]
        # one A/B a try for our kernel: the base, the same build again, the copy made slower
        groups = [(torch_pair, args.torch_cases or args.cases, args.torch_tries or args.tries)]
        if not args.smoke:
            ours = [version(folder, "ours", "ours.py"), version(folder, "ours-same", "ours.py"),
                    version(folder, f"ours-{args.slower:.0%}-slower", "ours.py", args.slower)]
            groups.insert(0, (ours, args.cases, args.tries))
        counts: dict = collections.defaultdict(collections.Counter)
        ratios: dict = collections.defaultdict(list)
        walls: list[float] = []
        gpu = None
        for g, (versions, cases, tries) in enumerate(groups):
            for t in range(tries):
                t0 = time.monotonic()
                doc = ab(versions, cases, folder / f"{g}-{t}.json", args.ab.split())
                walls.append(time.monotonic() - t0)
                gpu = doc["env"].get("gpu")
                for key, (klass, ratio) in classes(doc).items():
                    counts[key][klass] += 1
                    ratios[key].append(ratio)
                said = " ".join(f"{c}:{Path(n).parent.name.split('-', 1)[-1]}={k}/{r:.3f}"
                                for (n, c), (k, r) in classes(doc).items())
                print(f"{Path(versions[0]).parent.name}: try {t + 1}/{tries} in {walls[-1]:.0f} s: {said}",
                      file=sys.stderr, flush=True)
        rows = []
        for (name, case), counter in counts.items():
            rs = sorted(ratios[(name, case)])
            rows.append([name, case, sum(counter.values()), counter["same"], counter["slower"], counter["faster"],
                         counter["unsure"], f"{rs[0]:.3f}-{rs[-1]:.3f}"])
        print(f"card: {gpu}; nvgg ab {args.ab or '(defaults: floor 2%, 30 rounds, 120 s)'}; "
              f"an A/B took {min(walls):.0f}-{max(walls):.0f} s")
        print(tabulate(rows, headers=["version vs base", "case", "tries", "same", "slower", "faster", "unsure",
                                      "ratios"], tablefmt="github"))
        if args.l2_table and not args.smoke:
            l2_rows = []
            for clear in ("nvgg", "evaluator"):
                out = folder / f"l2-{clear}.json"
                cmd = [sys.executable, "-m", "nvgg", "compare", "--case", args.cases, "--strategy", "persistent",
                       "--backend", "cute", "--submission", torch_pair[0], "--l2", clear, "--json", str(out)]
                subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
                for r in json.loads(out.read_text())["results"]:
                    l2_rows.append([clear, r["case"], r["source"] or f"{r['strategy']}/{r['backend']}", r["time_us"],
                                    r["stats"]["std_us"] if r.get("stats") else None, r["status"],
                                    ",".join(f["kind"] for f in r.get("flags", []))])
            print(tabulate(l2_rows, headers=["L2 clear", "case", "row", "µs", "std µs", "status", "flags"],
                           tablefmt="github"))


if __name__ == "__main__":
    main()
