"""What the probe's marks cost inside a kernel, and why: each example built several ways in one
process and timed round-robin (CUPTI kernel duration of one call, L2 flushed before each, the
median over calls), so that builds compare on the same card at the same moment.

Builds of each example (examples/*/submission.py, changed as text before import):
  off          no marks (what runs where nvgg is absent)
  off again    the same, loaded a second time: the spread between two identical builds
  on           every mark
  on, no loop  without the marks inside the k loop (first_tma_landed, first_mma)
  on, no fence every mark, without the memory clobber that orders loads and stores around a mark

    python benchmarks/probe_cost.py [--examples cute,cuda] [--cases 1,2,3,4] [--calls 21]
Prints a table; writes JSON to $OUT/probe_cost.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
from pathlib import Path

import torch
from tabulate import tabulate

from nvgg import cases, cupti, env, inputs, probe, timing
from nvgg.probe import cute as probe_cute

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {"cute": ROOT / "examples/cute_grouped_gemm/submission.py",
            "cuda": ROOT / "examples/cuda_grouped_gemm/submission.py"}
LOOP_MARKS = ("first_tma_landed", "first_mma")
BUILDS = ("off", "off again", "on", "on, no loop", "on, no fence")
CONSTRAINTS = probe_cute.CONSTRAINTS  # the marks' own (with the memory clobber)


def load(example: str, build: str):
    """The example as a fresh module, changed for `build`."""
    text = EXAMPLES[example].read_text()
    if build == "on, no loop":
        kept = []
        for line in text.splitlines():
            if any(f'"{m}"' in line or f"::{m}" in line for m in LOOP_MARKS) and ("mark(" in line or "NVGG_MARK" in line):
                line = line[:len(line) - len(line.lstrip())] + ("pass" if example == "cute" else ";")
            kept.append(line)
        text = "\n".join(kept)
    os.environ[probe.ENV] = "0" if build.startswith("off") else "1"
    header = probe.header_text
    if build == "on, no fence":
        original = header()
        stripped = original.replace(' : "memory");', ");")
        if stripped == original:
            raise SystemExit("probe_cost: the header's mark no longer ends with a memory clobber: update 'on, no fence'")
        probe.header_text = lambda: stripped
        probe_cute.CONSTRAINTS = "l,r"
    try:
        spec = importlib.util.spec_from_file_location(f"{example}_{build.replace(' ', '_').replace(',', '')}",
                                                      EXAMPLES[example])
        module = importlib.util.module_from_spec(spec)
        exec(compile(text, str(EXAMPLES[example]), "exec"), module.__dict__)
    finally:
        probe.header_text, probe_cute.CONSTRAINTS = header, CONSTRAINTS
    if build.startswith("off"):
        module.PHASES = None
    module.NO_FENCE = build == "on, no fence"
    return module


def call(module, data):
    """One call; a DSL build compiles (and traces its marks) at its first: keep its constraint then."""
    if module.NO_FENCE:
        probe_cute.CONSTRAINTS = "l,r"
    try:
        return module.custom_kernel(data)
    finally:
        probe_cute.CONSTRAINTS = CONSTRAINTS


def kernel_us(module, data, flush, device) -> float:
    """One call under CUPTI: the duration of the example's own kernel."""
    flush()
    probe.session().begin()
    torch.cuda.synchronize(device)
    acts = cupti.record(lambda: call(module, data), device)
    mine = [a.us for a in acts if "grouped_gemm" in a.name]
    if len(mine) != 1:
        raise RuntimeError(f"expected one grouped_gemm kernel, CUPTI saw {[a.name for a in acts]}")
    return mine[0]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", default="cute,cuda")
    parser.add_argument("--cases", default="1,2,3,4")
    parser.add_argument("--calls", type=int, default=21)
    args = parser.parse_args()
    device = torch.device("cuda")
    flush = timing.L2Flush(device)
    names = [e.strip() for e in args.examples.split(",") if e.strip()]
    modules = {(e, b): load(e, b) for e in names for b in BUILDS}
    os.environ[probe.ENV] = "1"  # on builds ask for buffers at each call; off builds have PHASES None
    rows, doc = [], {"card": env.card(env.collect(device)), "rows": []}
    for case in cases.select(args.cases):
        data = inputs.generate(case, device)
        for module in modules.values():  # compile and warm up every build first
            call(module, data)
        samples = {key: [] for key in modules}
        for _ in range(args.calls):
            for key, module in modules.items():
                samples[key].append(kernel_us(module, data, flush, device))
        for example in names:
            base = statistics.median(samples[(example, "off")])
            for build in BUILDS:
                s = samples[(example, build)]
                med = statistics.median(s)
                q = statistics.quantiles(s, n=4)
                rows.append([example, case.id, build, f"{med:.1f}", f"{q[0]:.1f}-{q[2]:.1f}", f"{med / base - 1:+.2%}"])
                doc["rows"].append({"example": example, "case": case.id, "build": build, "median_us": med,
                                    "samples_us": s})
        print(f"case {case.id} done", flush=True)
    Path(os.environ.get("OUT", "."), "probe_cost.json").write_text(json.dumps(doc, indent=1))
    print(f"card: {doc['card']}; CUPTI kernel µs, median of {args.calls} calls each, builds interleaved")
    print(tabulate(rows, headers=["example", "case", "build", "median µs", "quartiles", "vs off"], tablefmt="github",
                   disable_numparse=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
