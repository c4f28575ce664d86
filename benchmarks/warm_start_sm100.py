"""The host work before the first sm_100a launch, in a warm process, timed on any machine (no GPU:
nothing here touches one): for each case, the persistent build (host maps) and every per-group
build found in the disk cache, the schedule and tables planned, every group's maps encoded, and
every launch's kernel parameters packed (kernels/sm100/params.py), with no CuTe DSL module in the
process. The SMs are a B200's 148, one cluster a cta_group of them (what `nvgg compile` assumes;
on a B200 the occupancy query decides).

    python benchmarks/warm_start_sm100.py [--cases 1,2,3,4] [--repeat 5] [--json FILE|-]

It first makes sure the disk cache ($NVGG_CACHE_DIR) holds every build the cases need (compiling,
with the DSL, in this process), then measures in a fresh process (`--child`), where it fails if
any `cutlass` module was imported. Target (issue 21): within 100 ms a case, as on sm_90a. Inputs
are generated on the CPU first and are not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD_FLAG = "--child"


def _builds(case_ids):
    from nvgg import cases
    from nvgg.kernels.sm100 import family as sm100

    builds = set()
    for case in cases.select(case_ids):
        builds.add(sm100.grouped_config(case.groups, 148, "host"))
        builds.update(sm100.group_config(shape, 148) for shape in case.groups)
    return builds


def host_work(case, data) -> dict:
    """One case's host work before its launches, timed (ms)."""
    from nvgg.kernels.sm100 import family as sm100
    from nvgg.kernels.sm100 import host

    t0 = time.perf_counter()
    groups, config, entry, clusters = sm100.persistent_build(data, "host", 148)
    t1 = time.perf_counter()
    tables = host.build_tables(groups, config, clusters, templates=host.templates_of(entry))
    t2 = time.perf_counter()
    packed = [host.packed_params(entry, groups[0], tables)]
    hits = [entry.hit]
    for g in groups:
        group_entry = host.compile_gemm(sm100.group_config((g.m, g.n, g.k), 148), "sm_100a", need_callable=False)
        hits.append(group_entry.hit)
        packed.append(host.packed_params(group_entry, g, None))
    t3 = time.perf_counter()
    return {"case": case.id, "groups": len(groups), "build": host.kernel_name(config), "hits": hits,
            "lookup_ms": (t1 - t0) * 1e3, "tables_and_maps_ms": (t2 - t1) * 1e3,
            "per_group_ms": (t3 - t2) * 1e3, "host_work_ms": (t3 - t0) * 1e3,
            "maps": len(tables.encode_us), "params": sum(len(p) for p in packed)}


def child(case_ids: str, repeat: int) -> dict:
    t0 = time.perf_counter()
    from nvgg import cases, inputs

    imports_ms = (time.perf_counter() - t0) * 1e3
    rows = []
    for case in cases.select(case_ids):
        data = inputs.generate(case, "cpu")
        passes = [host_work(case, data) for _ in range(repeat)]
        row = dict(passes[0], first_ms=passes[0]["host_work_ms"],
                   host_work_ms=statistics.median(p["host_work_ms"] for p in passes))
        row["dsl_modules"] = sorted(m for m in sys.modules if m == "cutlass" or m.startswith("cutlass."))
        rows.append(row)
    return {"imports_ms": imports_ms, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="1,2,3,4")
    parser.add_argument("--repeat", type=int, default=5, help="passes a case; the table shows the first and the median")
    parser.add_argument("--json", default=None, help="write the result here (- : stdout, in place of the table)")
    parser.add_argument(CHILD_FLAG, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeat < 1:
        raise SystemExit(f"--repeat takes a count of at least 1, got {args.repeat}")
    if args.child:
        doc = child(args.cases, args.repeat)
        if any(r["dsl_modules"] for r in doc["rows"]):
            raise SystemExit(f"the warm host work imported CuTe DSL: {doc['rows'][0]['dsl_modules'][:5]}")
    else:
        from nvgg.errors import NvggError
        from nvgg.kernels.sm100 import host

        try:
            builds = _builds(args.cases)
        except NvggError as exc:
            raise SystemExit(f"warm_start_sm100: {exc}") from None
        for config in sorted(builds, key=repr):  # the cache the child reads
            host.compile_gemm(config, "sm_100a", need_callable=False)
        cmd = [sys.executable, os.path.abspath(__file__), "--cases", args.cases, "--repeat", str(args.repeat),
               "--json", "-", CHILD_FLAG]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"the measuring process failed: {(proc.stderr or proc.stdout).strip()[-600:]}")
        doc = json.loads(proc.stdout)
    import platform

    doc["machine"] = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs (no GPU used)"
    if args.json == "-":
        print(json.dumps(doc, indent=1))
        return
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1)
    from tabulate import tabulate

    rows = [[r["case"], r["groups"], r["build"], "/".join(sorted(set(r["hits"]))), f"{r['lookup_ms']:.2f}",
             f"{r['tables_and_maps_ms']:.2f}", f"{r['per_group_ms']:.2f}", f"{r['first_ms']:.2f}",
             f"{r['host_work_ms']:.2f}", ", ".join(r["dsl_modules"]) or "none"] for r in doc["rows"]]
    print(f"{doc['machine']}; nvgg's imports {doc['imports_ms']:.0f} ms (torch included); host work before the "
          f"first sm_100a launches of a case, ms (first pass, then median of {args.repeat})")
    print(tabulate(rows, headers=["case", "groups", "persistent build", "cache", "lookup", "tables + maps",
                                  "per-group lookups + packing", "first", "median", "DSL modules"],
                   tablefmt="github", disable_numparse=True))


if __name__ == "__main__":
    main()
