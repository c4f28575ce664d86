"""How long `nvgg compare strategies --case all` takes and where the time goes: the command run once
in a subprocess under `timeout`, then its wall time against the target, every row's wall time
split into its compile, its timed span and the rest (from the JSON), the slowest rows, and the
phases the rows' worker and nvgg stamped (NVGG_TIMELINE), summed over the rows.

    python benchmarks/compare_wall.py [--timeout 900] [--target 170] [--out DIR] [-- MORE COMPARE OPTIONS]

`-- --tensormaps device,host` runs the persistent kernel in both map modes (70 rows, against 56).
`--out DIR` keeps the JSON, the table, the stamped stderr and the timeline. `--target` is the wall
time the whole run should stay within. It needs a GPU and says so (exit 3) where NVML finds none.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from nvgg import gpus  # noqa: E402

# a row's way through its worker (datapath), each phase ending at its stamp
PHASES = [("set up (compile, inputs, prepare)", "row set up"), ("checked", "row checked"),
          ("refilled", "row refilled"), ("timed span", "row timed"), ("clocks read", "row clocks sampled"),
          ("timed outputs checked", "row timed outputs checked"), ("energy figure", "row energy measured"),
          ("verdict, answer", "worker call out")]


def main() -> None:
    parser = argparse.ArgumentParser(description="nvgg compare strategies --case all, its wall time and where it goes")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds before `timeout` stops the command")
    parser.add_argument("--target", type=float, default=170.0, help="the wall time to hold, seconds")
    parser.add_argument("--out", help="a folder for the files (default: a temporary one)")
    parser.add_argument("more", nargs=argparse.REMAINDER, help="-- then options for `nvgg compare`")
    args = parser.parse_args()
    more = args.more[1:] if args.more[:1] == ["--"] else args.more
    if not gpus.visible():
        print("compare_wall.py: no GPU visible (NVML finds none): it times `nvgg compare` on a GPU machine",
              file=sys.stderr)
        sys.exit(3)
    out = Path(args.out or tempfile.mkdtemp(prefix="nvgg-compare-wall-"))
    out.mkdir(parents=True, exist_ok=True)
    doc, stamps = out / "compare.json", out / "timeline.txt"
    stamps.unlink(missing_ok=True)
    cmd = ["timeout", "-k", "30", f"{args.timeout:g}", sys.executable, "-m", "nvgg", "compare", "strategies",
           "--case", "all", "--json", str(doc), *more]
    env = dict(os.environ, NVGG_TIMELINE=str(stamps),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    t0 = time.monotonic()
    lines = []
    with open(out / "table.txt", "w") as table, open(out / "stderr.txt", "w") as log:
        proc = subprocess.Popen(cmd, stdout=table, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        for line in proc.stderr:  # each progress line stamped as it comes
            lines.append((time.monotonic() - t0, line.rstrip("\n")))
            log.write(f"{lines[-1][0]:8.2f} {lines[-1][1]}\n")
    rc, wall = proc.wait(), time.monotonic() - t0
    print(f"`{' '.join(['nvgg', *cmd[7:]])}`: exit {rc}{' (stopped by its timeout)' if rc in (124, 137) else ''}, "
          f"{wall:.1f} s wall, target {args.target:g} s: {'within' if wall <= args.target else 'OVER'}; files in {out}")
    results = json.loads(doc.read_text())["results"] if doc.is_file() else []
    if not results:
        sys.exit("no row finished: " + " | ".join(text for _, text in lines[-5:]))
    first = next((t for t, text in lines if re.match(r"\[1/\d+\] .* \.\.\. ", text)), None)
    built = next((text for _, text in lines if text.startswith("built ")), "nothing built ahead")
    rows = [_split(r) for r in results]
    print(f"before the first row: {first:.1f} s ({built})" if first is not None else "before the first row: ?")
    head = ["case", "row", "status", "wall s", "compile s", "timed s", "rest s"]
    print(tabulate(rows, headers=head, floatfmt=".2f"))
    print("\nthe 10 slowest rows:")
    print(tabulate(sorted(rows, key=lambda r: -r[3])[:10], headers=head, floatfmt=".2f"))
    sums = [sum(r[i] for r in rows) for i in (3, 4, 5, 6)]
    print(f"\n{len(rows)} rows: {sums[0]:.1f} s in rows = compile {sums[1]:.1f} + timed spans {sums[2]:.1f} + rest "
          f"{sums[3]:.1f}; outside the rows {wall - sums[0]:.1f} s")
    phases = _phases(stamps)
    if phases:
        print(tabulate([(name, len(v), sum(v), statistics.median(v), max(v)) for name, v in phases.items()],
                       headers=["worker phase (NVGG_TIMELINE)", "rows", "total s", "median s", "max s"], floatfmt=".3f"))


def _split(r: dict) -> tuple:
    """A row's wall time split: its compile (setup_us), its timed span (the energy meter's span, else
    the clock samples'), the rest."""
    compile_s = (r.get("setup_us") or {}).get("compile", 0.0) / 1e6
    span = (r.get("energy") or {}).get("span_s") or (r.get("clocks") or {}).get("seconds") or 0.0
    mode = f"[{r['tensormaps']}]" if r.get("tensormaps") else ""
    name = r.get("source") or f"{r['strategy']}{mode}/{r['backend']}"
    return r["case"], name, r["status"], r["wall_s"], compile_s, span, r["wall_s"] - compile_s - span


def _phases(path: Path) -> dict[str, list[float]]:
    """Each phase's seconds a row, from the stamps of the processes that ran rows (the ones that
    stamped "row set up"), a row from its "worker call in"; {} without stamps."""
    if not path.is_file():
        return {}
    by_pid: dict[str, list[tuple[float, str]]] = {}
    for line in path.read_text().splitlines():
        at, pid, event = line.split(" ", 2)
        by_pid.setdefault(pid, []).append((float(at), event))
    found: dict[str, list[float]] = {name: [] for name, _ in PHASES}
    for events in by_pid.values():
        if not any(e == "row set up" for _, e in events):
            continue
        last = None
        for at, event in events:
            if event == "worker call in":
                last, step = at, 0
            elif last is not None and step < len(PHASES) and event in [m for _, m in PHASES[step:]]:
                while PHASES[step][1] != event:  # a phase a row skipped (a failed row, no energy)
                    step += 1
                found[PHASES[step][0]].append(at - last)
                last, step = at, step + 1
    return {name: v for name, v in found.items() if v}


if __name__ == "__main__":
    main()
