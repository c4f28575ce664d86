"""Does the energy a call's stated bound hold on a card? Per case, the default kernel set up and
checked once, then: a reference window (the timer's repetitions for `--reference-s` seconds with
the energy meter beside them: the same figure as a default row's, its calls counted the same way,
over ten times the length and so fifty-odd steps of the counter), `--runs` default measurements
(`datapath.measure`: the energy a call inside the timed span), and the reference again. Each
figure's mJ a call against the two references' mean: inside its stated bound or not; the
references' own difference says how far the power drifted over the minute, which no bound of a
half-second span covers. Every other run is followed by one without the meter, so the table also
says what the reading thread costs the time a call. The card's idle power is read first, before
anything of this process ran on it.

    python benchmarks/energy_bound.py [--case 3,4] [--runs 8] [--reference-s 5]

The bound (clocks.window_of) adds the calls each end of the window may count wrong, the counter's
whole mJ and the power's spread from step to step of the counter (95%); not covered: NVML's own
measurement and a drift over longer than the span.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def reference(session, seconds: float) -> tuple[dict, float]:
    """The session's repetitions, the leaderboard's way, for `seconds`, with an energy meter beside
    them: its energy dict (the calls counted as a default row's) and the mean µs a call."""
    from nvgg import clocks, timing
    meter = clocks.meter(session.device)
    if meter is None:
        raise SystemExit("NVML's energy counter cannot be read on this card")
    clock = timing.make_timer(session.device, "leaderboard", min_span_s=seconds, budget_s=seconds + 5.0,
                              observer=meter)
    stats = clock.batch(session.launches)
    energy = meter.result(clock.ends, stats.batch)
    if energy.get("mj_per_call") is None:
        raise SystemExit(f"no reference figure: {energy['note']}")
    return energy, stats.mean_us


def _pct(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}%}"


def one_case(case_id: str, runs: int, reference_s: float) -> tuple[list[list], list[str]]:
    from nvgg import cases, datapath
    session = datapath.setup(cases.get(case_id))
    name = f"{session.result.strategy}/{session.result.backend}"
    if not datapath.check(session):
        raise SystemExit(f"case {case_id} {name}: {session.result.status}: {session.result.message}")
    before, before_us = reference(session, reference_s)
    figures, with_us, without_us = [], [], []
    for i in range(runs):
        datapath.measure(session)
        r = session.result
        if r.status != "ok":
            raise SystemExit(f"case {case_id} {name} run {i + 1}: {r.status}: {r.message}")
        figures.append(dict(r.energy))
        with_us.append(r.stats.mean_us)
        if i % 2:
            datapath.measure(session, energy=False)
            without_us.append(session.result.stats.mean_us)
    after, after_us = reference(session, reference_s)
    ref_mj = (before["mj_per_call"] + after["mj_per_call"]) / 2
    rows = []
    for i, (e, us) in enumerate(zip(figures, with_us)):
        if e.get("mj_per_call") is None:
            rows.append([case_id, i + 1, f"{us:.2f}", "no figure: " + e.get("note", "")[:60]] + [""] * 14)
            continue
        off = abs(e["mj_per_call"] - ref_mj) / e["mj_per_call"]
        parts = e["within_parts"]
        rows.append([case_id, i + 1, f"{us:.2f}", f"{e['mj_per_call']:.3f}", _pct(e["within"]), _pct(parts["count"]),
                     _pct(parts["mj"], 4), _pct(parts["spread"]), f"{e['seconds']:.3f}", e["updates"], e["calls"],
                     f"{e['wall_us']:.2f}", f"{e['span_s']:.2f}", f"{e['watts']:.1f}",
                     "—" if e["mj_above_idle"] is None else f"{e['mj_above_idle']:.3f}", f"{ref_mj:.3f}", _pct(off),
                     "yes" if off <= e["within"] else "NO"])

    def said(ref: dict, us: float) -> str:
        return (f"{ref['mj_per_call']:.3f} mJ a call within {ref['within']:.2%} ({ref['watts']:.1f} W over "
                f"{ref['seconds']:.2f} s, {ref['updates']} steps, {ref['wall_us']:.2f} µs of wall time a call; "
                f"events {us:.2f} µs)")
    lines = [f"case {case_id} {name}: reference before {said(before, before_us)}, after {said(after, after_us)}: "
             f"the references {abs(after['mj_per_call'] - before['mj_per_call']) / ref_mj:.2%} apart in mJ a call",
             f"case {case_id} {name}: µs a call with the meter (median of {len(with_us)}) {statistics.median(with_us):.3f}, "
             f"without it (median of {len(without_us)}) "
             + (f"{statistics.median(without_us):.3f}" if without_us else "—")]
    return rows, lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", default="3,4")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--reference-s", type=float, default=5.0)
    args = parser.parse_args()
    t0 = time.monotonic()
    import torch

    from nvgg import clocks
    device = torch.device("cuda")
    idle = clocks.idle(device)
    rows, said = [], []
    for case_id in args.case.split(","):
        case_rows, case_said = one_case(case_id, args.runs, args.reference_s)
        rows += case_rows
        said += case_said
        print(f"case {case_id} done ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    print(f"card: {torch.cuda.get_device_name(device)}; idle power before this process ran anything: "
          + (f"{idle['watts']:.1f} W" if "watts" in idle else idle.get("note", "not read")))
    print(tabulate(rows, headers=["case", "run", "µs a call", "mJ a call", "within", "count", "whole mJ", "spread",
                                  "window s", "updates", "calls", "wall µs a call", "span s", "W", "above idle mJ",
                                  "reference mJ", "off it", "inside"],
                   tablefmt="github", disable_numparse=True))
    print("\n".join(said))
    held = sum(r[-1] == "yes" for r in rows)
    print(f"the references' mean mJ a call inside the stated bound in {held} of {len(rows)} figures; "
          f"{time.monotonic() - t0:.0f} s in all")


if __name__ == "__main__":
    main()
