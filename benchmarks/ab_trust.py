"""Can `nvgg ab` be trusted? The same build as A and as B, and a copy made 3% slower on purpose,
each A/B'd many times on the benchmark cases; then the evaluator's L2 clear against nvgg's.

    python benchmarks/ab_trust.py [--tries 20] [--slower-tries 10] [--cases 1,2,3,4]
        [--groups ours,multistream,torch,slower] [--gpus 0,1,2,3] [--out DIR] [--ab "--rounds 12"]
        [--l2-table]
    python benchmarks/ab_trust.py --smoke     # on a CPU: the mechanics on test-1, the torch pair twice
    python benchmarks/ab_trust.py --tables DIR [DIR ...]   # one table from the A/Bs several --out folders kept

Groups, each an A/B of two versions written into a temporary folder (each a folder of its own with
the fixtures it imports, tests/fixtures/submissions):
- `ours`: nvgg's persistent kernel as a submission (GPU-bound), against the same file again;
- `multistream`: our kernels launched a group at a time over a stream pool (host-bound on the
  small cases), against the same file again;
- `torch`: the torch-eager submission `honest.py` (host-bound), against the same file again;
- `slower`: our persistent kernel with a short spin after each call (NVGG_FIXTURE_SPIN=1), against
  the same with the spin lengthened by 3% of the call's time (NVGG_FIXTURE_SLOWDOWN=0.03; the spin's
  own launch cost lands on both, slowdown.py).
Targets: the same build "same" in at least 19 of 20 tries on each case; the 3% slower copy "slower"
in at least 9 of 10 on cases 1-3 (case 4: what difference is detected).

With --gpus, a try runs on each GPU at a time (CUDA_VISIBLE_DEVICES), the groups' tries taken in
turn; every A/B still runs on one card, but they share the host: host-bound groups are best tried
at most two A/Bs to a host (NOTES.md has the counts by host). The table's last columns count the
case-tries that were host-bound and those where the host's load average reached its cores. A TERM
(a timeout) prints the table of the tries done. `--digest FILE` keeps every A/B's classes by case in
a small JSON file (what the README's counts are made from); tries spread over several calls: give
each its own --out or --digest and --first-try, then --tables.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "submissions"
sys.path.insert(0, str(ROOT))
from nvgg import procs  # noqa: E402


def version(folder: Path, name: str, source: str, env: dict[str, str] | None = None) -> str:
    """A version's folder: the fixture as submission.py (`env` set in its own worker before the
    fixtures read it), with slowdown.py beside it."""
    where = folder / name
    where.mkdir()
    text = (FIXTURES / source).read_text()
    if env:
        text = "import os\n" + "".join(f"os.environ[{k!r}] = {v!r}\n" for k, v in env.items()) + text
    (where / "submission.py").write_text(text)
    shutil.copy(FIXTURES / "slowdown.py", where / "slowdown.py")
    return str(where / "submission.py")


def groups_in(folder: Path, names: list[str], slower: float) -> dict[str, list[str]]:
    made = {
        "ours": lambda: [version(folder, "ours", "ours.py"), version(folder, "ours-same", "ours.py")],
        "multistream": lambda: [version(folder, f"ms{i}", "ours.py", {"NVGG_FIXTURE_STRATEGY": "multistream"})
                                for i in ("", "-same")],
        "torch": lambda: [version(folder, "torch", "honest.py"), version(folder, "torch-same", "honest.py")],
        "slower": lambda: [version(folder, "spun", "ours.py", {"NVGG_FIXTURE_SPIN": "1"}),
                           version(folder, f"spun-{slower:.0%}-slower", "ours.py",
                                   {"NVGG_FIXTURE_SPIN": "1", "NVGG_FIXTURE_SLOWDOWN": str(slower)})],
    }
    unknown = [n for n in names if n not in made]
    if unknown:
        raise SystemExit(f"unknown group {unknown[0]!r}: choose from {', '.join(made)}")
    return {n: made[n]() for n in names}


def ab(versions: list[str], cases: str, out: Path, extra: list[str], gpu: str | None) -> dict:
    cmd = [sys.executable, "-m", "nvgg", "ab", "--case", cases, *[x for v in versions for x in ("--submission", v)],
           "--json", str(out), *extra]
    env = dict(os.environ, **({"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None else {}))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode not in (0, 1) or not out.exists():
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-600:]}")
    return json.loads(out.read_text())


def classes(doc: dict) -> dict[str, dict]:
    """case -> the second version's class, ratio, interval (and its half-width in logs, as a share),
    rounds, the level of the look it stopped at, whether the case was host-bound, why it stopped, and
    whether the host's load average reached its cores during the case."""
    out = {}
    for case in doc["cases"]:
        r = case["versions"][1]["vs_base"]
        loaded = (case.get("host_load") or {}).get("oversubscribed")  # None: not recorded (files from before)
        common = {"loaded": loaded, "host_bound": case.get("host_bound"), "stopped": case.get("stopped", "")}
        out[case["case"]] = ({"class": r["class"], "ratio": r["ratio"], "lo": r["lo"], "hi": r["hi"],
                              "half": math.log(r["hi"] / r["lo"]) / 2, "rounds": r["rounds"], "level": r.get("level"),
                              **common} if r else
                             {"class": "—", "ratio": float("nan"), "half": float("nan"), "rounds": 0, **common})
    return out


def digest(done: list, args) -> dict:
    """What the README's counts are made from, kept small enough for the repository: every A/B's
    classes by case (`classes`), its group, try, time and GPU, the card, nvgg's revision."""
    revision = os.environ.get("NVGG_REVISION") or subprocess.run(  # (a copy of the tree without its .git: given)
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    return {"card": next((c for *_, c in done if c), None), "ab": args.ab, "gpus": args.gpus, "revision": revision,
            "tries": [{"group": g, "try": t, "wall_s": round(wall, 1), "gpu": gpu, "cases": cases}
                      for g, t, cases, wall, gpu, _ in done]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=20, help="tries of each same-build group")
    parser.add_argument("--slower-tries", type=int, default=10)
    parser.add_argument("--cases", default="1,2,3,4")
    parser.add_argument("--groups", default="ours,multistream,torch,slower")
    parser.add_argument("--slower", type=float, default=0.03)
    parser.add_argument("--gpus", default=None, help="GPUs to run tries on side by side (default: one at a time)")
    parser.add_argument("--out", default=None, help="a folder for every A/B's JSON")
    parser.add_argument("--ab", default="", help="options passed to nvgg ab, as one string")
    parser.add_argument("--l2-table", action="store_true", help="also time cases with --l2 nvgg and --l2 evaluator")
    parser.add_argument("--smoke", action="store_true", help="CPU: test-1, two tries, the torch pair only")
    parser.add_argument("--first-try", type=int, default=0, help="the number of the first try (its files' names)")
    parser.add_argument("--tables", nargs="+", default=None,
                        help="print the table of the A/Bs kept in these --out folders or --digest files")
    parser.add_argument("--digest", default=None, help="write every A/B's classes by case to this JSON file")
    args = parser.parse_args()
    if args.tables:
        return kept(args)
    if args.smoke:
        args.tries, args.cases, args.groups = 2, "test-1", "torch"
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a timeout's TERM: the table of the tries done
    gpus = args.gpus.split(",") if args.gpus else [None]
    with tempfile.TemporaryDirectory(prefix="nvgg-ab-trust-") as tmp:
        folder = Path(tmp)
        out = Path(args.out) if args.out else folder / "out"
        out.mkdir(parents=True, exist_ok=True)
        groups = groups_in(folder, args.groups.split(","), args.slower)
        tries = {g: (args.slower_tries if g == "slower" else args.tries) for g in groups}
        todo = [(g, args.first_try + t) for t in range(max(tries.values())) for g in groups if t < tries[g]]
        done: list[tuple] = []  # (group, try, classes, wall, gpu, card), in turn: a run cut short has some of each
        failures: list[str] = []

        def work(server: int, item: tuple[str, int]) -> tuple:
            (g, t), gpu = item, gpus[server]
            t0 = time.monotonic()
            try:
                return g, t, ab(groups[g], args.cases, out / f"{g}-{t}.json", args.ab.split(), gpu), time.monotonic() - t0, gpu
            except RuntimeError as exc:
                return str(exc)

        def finished(got) -> None:  # (one at a time)
            if isinstance(got, str):
                failures.append(got)
                return
            g, t, doc, wall, gpu = got
            done.append((g, t, classes(doc), wall, gpu, doc["env"].get("gpu")))
            (out / f"{g}-{t}.meta.json").write_text(json.dumps({"group": g, "try": t, "wall_s": wall, "gpu": gpu,
                                                               "ab": args.ab, "gpus": args.gpus}))
            said = " ".join(f"{c}:{k['class']}/{k['ratio']:.3f}" for c, k in classes(doc).items())
            print(f"{g}: try {t + 1} of {args.first_try + tries[g]} on GPU {gpu} in {wall:.0f} s: {said}", file=sys.stderr, flush=True)

        try:  # a try on each GPU at a time, each GPU taking the next as its last ends
            procs.take_turns(todo, len(gpus), work, "ab-trust", on_result=finished)
        except KeyboardInterrupt:
            print(f"stopped after {len(done)} A/Bs", file=sys.stderr)
        table(list(done), args, failures)
        if args.digest:
            Path(args.digest).write_text(json.dumps(digest(done, args), indent=1))
        if args.l2_table and not args.smoke:
            l2_table(args.cases, groups.get("torch") or [version(folder, "torch-l2", "honest.py")])


def kept(args) -> None:
    """The table of every A/B the given --out folders (each with its .meta.json) or --digest files kept."""
    done = []
    for path in map(Path, args.tables):
        if path.is_file():
            raw = json.loads(path.read_text())
            done += [(e["group"], e["try"], e["cases"], e["wall_s"], e["gpu"], raw["card"]) for e in raw["tries"]]
            args.ab, args.gpus = raw["ab"], raw["gpus"]
            continue
        metas = sorted(path.glob("*.meta.json"))
        if not metas:
            raise SystemExit(f"{path}: no A/B kept here (no *.meta.json): give the folders --out wrote, or --digest files")
        for meta in metas:
            m = json.loads(meta.read_text())
            doc = json.loads((path / f"{m['group']}-{m['try']}.json").read_text())
            done.append((m["group"], m["try"], classes(doc), m["wall_s"], m["gpu"], doc["env"].get("gpu")))
            args.ab, args.gpus = m["ab"], m["gpus"]
    table(done, args, [])


def table(done: list, args, failures: list[str]) -> None:
    by = collections.defaultdict(list)
    card = None
    for g, _, cases, wall, _, their_card in done:
        card = card or their_card
        for case, k in cases.items():
            by[(g, case)].append((k, wall))
    rows = []
    for (g, case), got in sorted(by.items()):
        counter = collections.Counter(k["class"] for k, _ in got)
        ratios = sorted(k["ratio"] for k, _ in got)
        halves = [k["half"] for k, _ in got if not math.isnan(k["half"])]
        rows.append([g, case, len(got), counter["same"], counter["slower"], counter["faster"], counter["unsure"],
                     f"{ratios[0]:.3f}-{ratios[-1]:.3f}", f"±{statistics.median(halves):.2%}" if halves else "—",
                     statistics.median(k["rounds"] for k, _ in got), sum(bool(k.get("host_bound")) for k, _ in got),
                     sum(k["loaded"] for k, _ in got if k["loaded"] is not None)
                     if any(k["loaded"] is not None for k, _ in got) else "—"])
    walls = [w for _, _, _, w, _, _ in done]
    print(f"card: {card}; nvgg ab {args.ab or '(defaults: floor 2%, 30 rounds, 120 s)'}; "
          f"{len(done)} A/Bs, each {min(walls, default=0):.0f}-{max(walls, default=0):.0f} s; GPUs side by side: "
          f"{args.gpus or 'one'}")
    print(tabulate(rows, headers=["group", "case", "tries", "same", "slower", "faster", "unsure", "ratios",
                                  "median ± (95%)", "median rounds", "host-bound", "load ≥ cores"],
                   tablefmt="github"))
    for f in failures:
        print(f"failed: {f}")


def l2_table(cases: str, torch_pair: list[str]) -> None:
    """Our persistent kernel and the torch submission timed with nvgg's L2 flush, then the evaluator's."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="nvgg-l2-") as tmp:
        for clear in ("nvgg", "evaluator"):
            out = Path(tmp) / f"l2-{clear}.json"
            cmd = [sys.executable, "-m", "nvgg", "compare", "--case", cases, "--strategy", "persistent",
                   "--backend", "cute", "--submission", torch_pair[0], "--l2", clear, "--json", str(out)]
            subprocess.run(cmd, capture_output=True, text=True)
            for r in json.loads(out.read_text())["results"]:
                rows.append([clear, r["case"], r["source"] or f"{r['strategy']}/{r['backend']}", r["time_us"],
                             r["stats"]["std_us"] if r.get("stats") else None, r["status"],
                             ",".join(f["kind"] for f in r.get("flags", []))])
    print(tabulate(rows, headers=["L2 clear", "case", "row", "µs", "std µs", "status", "flags"], tablefmt="github"))


if __name__ == "__main__":
    main()
