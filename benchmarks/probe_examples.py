"""The probe examples on a GPU, in one run: each example checked on every case (2 inputs each),
then profiled through its marks on the benchmark cases (`nvgg profile --phases --submission`'s
path): CTAs, time to first MMA, setup share, the tensor-map span, how much of CUPTI's kernel time
the marks span, and the instrumentation cost (CUPTI kernel time with marks against without).
Prints two tables, writes JSON to $OUT/probe_examples.json.

    python benchmarks/probe_examples.py [--examples cute,cuda] [--check all] [--cases 1,2,3,4]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from tabulate import tabulate

from nvgg import cases, datapath, env
from nvgg.backends import submission as sub
from nvgg.errors import NvggError
from nvgg.strategies import AsSubmitted
from nvgg.profiling import submission_phases

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {"cute": ROOT / "examples/cute_grouped_gemm/submission.py",
            "cuda": ROOT / "examples/cuda_grouped_gemm/submission.py"}


def check(path: Path, case_ids: str) -> list:
    """Every case, checked in this process (2 inputs each): [case, ok or why not, seconds]."""
    module = sub.load(path)
    rows = []
    for case in cases.select(case_ids):
        t0 = time.perf_counter()
        try:
            session = datapath.setup(case, strategy=AsSubmitted(), backend=sub.SubmissionBackend(module), batch=2)
            ok = datapath.check(session)
            verdict = "ok" if ok else session.result.message[:80]
        except Exception as exc:  # report and go on with the other cases
            verdict = f"{type(exc).__name__}: {str(exc)[:80]}"
        rows.append([case.id, verdict, round(time.perf_counter() - t0, 1)])
    return rows


def span(report, name: str):
    p = next((p for p in report.phases if p.name == name), None)
    return f"{p.median_us:.2f} / {p.max_us:.2f}" if p else "—"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", default="cute,cuda")
    parser.add_argument("--check", default="all", help="cases to check (ids or all); 'none' to skip")
    parser.add_argument("--cases", default="1,2,3,4", help="cases to profile")
    args = parser.parse_args()
    card = env.card(env.collect(torch.device("cuda")))
    doc = {"card": card, "check": {}, "phases": {}}
    names = [e.strip() for e in args.examples.split(",") if e.strip()]
    if args.check != "none":
        for name in names:
            doc["check"][name] = check(EXAMPLES[name], args.check)
            print(f"{name}: " + ", ".join(f"{c} {v}" for c, v, _ in doc["check"][name]), flush=True)
    rows = []
    for name in names:
        for case in cases.select(args.cases):
            try:
                run = submission_phases.run(str(EXAMPLES[name]), case, timeout_s=600)
            except NvggError as exc:
                rows.append([name, case.id, str(exc)[:100]] + ["—"] * 9)
                continue
            doc["phases"][f"{name}/{case.id}"] = run.to_dict()
            rep = run.main
            rows.append([name, case.id, rep.ctas, f"{rep.time_to_first_mma_us:.2f}", f"{rep.setup_share:.1%}",
                         span(rep, "start → maps_ready"), f"{rep.kernel_us:.1f}", f"{run.call_cupti_us:.1f}",
                         f"{run.call_marked_us / run.call_cupti_us:.1%}", f"{run.plain_us:.1f}", f"{run.instrumented_us:.1f}",
                         f"{run.cost:+.2%}"])
            print(f"{name} case {case.id}: done", flush=True)
    out = Path(os.environ.get("OUT", ".")) / "probe_examples.json"
    out.write_text(json.dumps(doc, indent=1, default=str))
    print(f"\ncard: {card}")
    for name in names:
        if doc["check"].get(name):
            bad = [r for r in doc["check"][name] if r[1] != "ok"]
            print(f"{name}: {len(doc['check'][name]) - len(bad)} of {len(doc['check'][name])} cases right"
                  + "".join(f"\n  case {c}: {v}" for c, v, _ in bad))
    print(tabulate(rows, headers=["example", "case", "CTAs", "to first MMA µs", "setup share", "maps µs med/max",
                                  "first to last mark µs", "CUPTI kernel µs", "marked/CUPTI", "plain µs", "marked µs",
                                  "cost"], tablefmt="github", disable_numparse=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
