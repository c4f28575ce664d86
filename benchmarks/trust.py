"""Numbers a user can trust, checked on a GPU through the CLI as users call it.

    python benchmarks/trust.py faults     # 4 healthy rows + a CUDA fault + a GPU hang; a compare killed halfway
    python benchmarks/trust.py overhead   # wall time of `nvgg compare strategies` on the benchmarks, rows in
                                          # workers vs in one process (NVGG_ISOLATION=off), interleaved
    python benchmarks/trust.py timer      # what the timer sees of the fixtures (honest, kept results, work left
                                          # on a side stream) on case 3: status, time, spread, escape, flags
    python benchmarks/trust.py gate       # the same build twice, five times: the gate's classes; then a build
                                          # 10% slower (our kernel as a submission, NVGG_FIXTURE_SLOWDOWN=0.1)

Each prints its table; `--out DIR` keeps the JSON files (default: a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUBS = ROOT / "tests" / "fixtures" / "submissions"


def nvgg(args: list[str], env: dict | None = None, timeout: float = 900) -> tuple[int, float, str]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nvgg", *args], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), timeout=timeout)
    return proc.returncode, time.monotonic() - t0, proc.stdout + proc.stderr


def rows_of(path: Path) -> list[dict]:
    return json.loads(path.read_text())["results"]


def faults(out: Path) -> None:
    doc = out / "six.json"
    args = ["compare", "--case", "1", "--strategy", "all", "--backend", "cute", "--submission", str(SUBS / "illegal_address.py"),
            "--submission", str(SUBS / "hang.py"), "--timeout", "60", "--json", str(doc)]
    rc, wall, text = nvgg(args)
    print(text)
    rows = rows_of(doc)
    print(f"six rows: exit {rc}, wall {wall:.1f} s (limit: the hang's 60 s + 60 s), {len(rows)} rows in the JSON")
    for r in rows:
        print(f"  {r['case']} {r['strategy']}/{r['backend']} {r['source']}: {r['status']} "
              f"{(r.get('time_us') or 0):.2f} µs {r['message'][:90]} (row {r['wall_s']:.1f} s)")

    half = out / "half.json"
    proc = subprocess.Popen([sys.executable, "-m", "nvgg", *args[:-1], str(half)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    t0 = time.monotonic()
    seen = 0
    while time.monotonic() - t0 < 300 and seen < 3:
        time.sleep(0.5)
        if half.exists():
            seen = len(rows_of(half))
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
    kept = rows_of(half)
    print(f"killed after {time.monotonic() - t0:.1f} s with {seen} rows written: the file parses, {len(kept)} rows: "
          + ", ".join(f"{r['strategy']}:{r['status']}" for r in kept))
    left = subprocess.run(["pgrep", "-f", "nvgg.procs"], capture_output=True, text=True).stdout.split()
    print(f"workers left running after the kill: {left or 'none'}")


def overhead(out: Path, passes: int) -> None:
    base = ["compare", "strategies", "--case", "1,2,3,4"]
    nvgg(base)  # warm the compile cache: neither mode pays a cold compile
    walls = {"in workers": [], "in one process": []}
    for i in range(passes):
        for mode, env in (("in workers", {}), ("in one process", {"NVGG_ISOLATION": "off"})):
            doc = out / f"overhead-{mode.replace(' ', '-')}-{i}.json"
            rc, wall, text = nvgg(base + ["--json", str(doc)], env)
            walls[mode].append(wall)
            if rc:
                print(text)
            print(f"pass {i} {mode}: {wall:.1f} s, exit {rc}, rows ok "
                  f"{sum(r['status'] == 'ok' for r in rows_of(doc))}/{len(rows_of(doc))}")
    med = {m: sorted(w)[len(w) // 2] for m, w in walls.items()}
    print(f"median wall: in workers {med['in workers']:.1f} s, in one process {med['in one process']:.1f} s: "
          f"isolation costs {med['in workers'] / med['in one process'] - 1:+.1%}")


def gate(out: Path, tries: int) -> None:
    args = ["compare", "--case", "1,2,3,4", "--strategy", "persistent", "--backend", "cute",
            "--submission", str(SUBS / "ours.py")]
    base = out / "gate-base.json"
    rc, wall, text = nvgg(args + ["--json", str(base)])
    print(f"baseline: exit {rc}, {wall:.1f} s")
    for r in rows_of(base):
        st, ck = r["stats"] or {}, r["clocks"] or {}
        print(f"  clocks {r['case']} {r['strategy']} {r['source']}: SM {ck.get('sm_mhz')} MHz, mem {ck.get('mem_mhz')}, "
              f"{ck.get('temp_c_max')} C, {ck.get('power_w_max')} W, reasons {ck.get('reasons')}; escape a batch "
              f"{(st.get('escaped_us') or 0) * (st.get('batch') or 0):.1f} µs, spread {st.get('std_us', 0) / max(st.get('mean_us', 1), 1e-9):.2%}")

    classes: dict[str, list[str]] = {}
    for i in range(tries):
        doc = out / f"gate-{i}.json"
        rc, wall, text = nvgg(args + ["--json", str(doc), "--baseline", str(base)])
        for r in rows_of(doc):
            g = r["gate"]
            classes.setdefault(f"{r['case']} {r['strategy']}/{r['backend']} {r['source']}", []).append(
                f"{g['kind']} {g['change']:+.2%}/±{g['band']:.2%}" if g.get("change") is not None else g["kind"])
        print(f"try {i}: exit {rc}, {wall:.1f} s")
    for row, seen in classes.items():
        print(f"  {row}: " + "; ".join(seen))
    same = sum(all(s.startswith("same") for s in seen) for seen in classes.values())
    print(f"rows 'same' in all {tries} tries: {same}/{len(classes)}")
    slow = out / "gate-slower.json"
    rc, wall, text = nvgg(args + ["--json", str(slow), "--baseline", str(base)], {"NVGG_FIXTURE_SLOWDOWN": "0.1"})
    print(f"the submissions 10% slower: exit {rc}")
    for r in rows_of(slow):
        print(f"  {r['case']} {r['strategy']}/{r['backend']} {r['source']}: {r['gate']}")
    print("\n".join(line for line in text.splitlines() if line.startswith("regression")))


def timer(out: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from nvgg import cases, rows
    from nvgg.result import Row
    names = ("honest", "kept", "ours", "side_stream")
    for case in ("3", "1"):
        todo = [Row(cases.get(case), submission=str(SUBS / f"{n}.py"), device="cuda") for n in names]
        for name, r in zip(names, rows.run_many(todo)):
            st = r.stats
            line = f"{case} {name}: {r.status} {r.message[:60]}"
            if st:
                line += (f" | {st.mean_us:.2f} µs ± {st.err_us:.2f}, spread {st.std_us / st.mean_us:.1%}, {st.runs} runs,"
                         f" escape {st.escaped_us * st.batch:.1f} µs a batch | SOL {r.sol.sol_us:.2f} µs | flags "
                         + "; ".join(f.text for f in r.flags))
            print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=("faults", "overhead", "gate", "timer"))
    parser.add_argument("--out", default=None, help="folder for the JSON files")
    parser.add_argument("--passes", type=int, default=2, help="overhead: interleaved passes of each mode")
    parser.add_argument("--tries", type=int, default=5, help="gate: same-build runs against the baseline")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="nvgg-trust-"))
    out.mkdir(parents=True, exist_ok=True)
    {"faults": lambda: faults(out), "overhead": lambda: overhead(out, args.passes),
     "gate": lambda: gate(out, args.tries), "timer": lambda: timer(out)}[args.part]()


if __name__ == "__main__":
    main()
