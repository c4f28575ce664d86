"""`nvgg profile`'s report: one table an observer across the cases (CUPTI's rows, the setup phases
and kernels, Nsight Compute's counters, occupancy, the phases inside the kernel), and its JSON
document."""

from __future__ import annotations

from . import fmt_us, tabulate
from .results import results_document, results_table, setup_table


def _pct(x) -> str:
    return "—" if x is None else f"{x:.1f}%"


def _tmem(k) -> str:
    """Tensor memory (sm_100): its pipe's instruction rate and its active cycles, % of peak."""
    pipe, active = getattr(k, "tmem_pipe_pct", None), getattr(k, "tmem_pct", None)
    return "—" if pipe is None and active is None else f"{_pct(pipe)} / {_pct(active)}"


def _stalls(k) -> str:
    """The states the kernel's warps waited in longest, with their share of its warp cycles."""
    return ", ".join(f"{why} {share:.0%}" for why, share in k.top_stalls()) or "—"


def ncu_table(reports) -> str:
    """Nsight Compute's kernels of one call: one table across cases ({case: NcuReport}), or one
    report's; a total line a case."""
    by_case = reports if isinstance(reports, dict) else {"": reports}
    rows, totals = [], []
    for cid, report in by_case.items():
        for k in report.kernels:
            rows.append(([cid] if cid else []) + [
                k.name[:60], fmt_us(k.duration_us), f"{k.dram_bytes / 1e6:.2f}", _pct(k.dram_pct), _pct(k.tensor_pct),
                _tmem(k), _pct(k.achieved_occupancy_pct), _pct(k.theoretical_occupancy_pct), k.registers, k.smem_bytes, k.grid,
                k.block, _stalls(k)])
        total = (f"{'case ' + cid + ': ' if cid else ''}total {report.duration_us:.2f} µs over {len(report.kernels)} "
                 f"kernels, DRAM {report.dram_bytes / 1e6:.2f} MB")
        if report.sol_bytes:
            total += f" = {report.dram_bytes / report.sol_bytes:.2f}x the SOL model's {report.sol_bytes / 1e6:.2f} MB"
        pipes = sorted({k.tensor_pipe for k in report.kernels if getattr(k, "tensor_pipe", None)})
        total += f"; MMA pipe: {', '.join(pipes)}" if pipes else "; MMA pipe: none read on this architecture"
        totals.append(f"{total}; report {report.report_file}")
    headers = (["case"] if "" not in by_case else []) + [
        "kernel", "µs", "DRAM MB", "DRAM % peak", "MMA pipe", "TMEM pipe / active", "achieved occ.", "theor. occ.", "regs", "smem B",
        "grid", "block", "warps waited on (share of warp cycles)"]
    table = tabulate(rows, headers=headers, tablefmt="github")
    return "\n".join([table] + totals)


def occupancy_table(rows: list[dict]) -> str:
    with_case = any("case" in r for r in rows)
    table = [([r.get("case", "")] if with_case else []) + [
        r["kernel"][:60], r["registers"], r["smem_bytes"], r["threads"], f"{r['theoretical']:.1%}",
        r["blocks_per_sm"], r["limited_by"], "—" if r["api_blocks_per_sm"] is None else r["api_blocks_per_sm"],
        r["tiles"], f"{r['sm_coverage']:.0%}", f"{r['waves']:.2f}"] for r in rows]
    return tabulate(table, headers=(["case"] if with_case else []) + [
        "kernel", "regs", "smem B", "threads", "theoretical occ.", "blocks/SM", "limited by", "blocks/SM (CUDA API)",
        "tiles", "SM coverage", "waves"], tablefmt="github")


def profile_document(done: list, env: dict, benchmark_ids: set[str]) -> dict:
    """`nvgg profile --json`: the CUPTI rows as a result file's, and each observer's findings by
    case; with several versions (one Profiled each) every version's rows in `results` (each row
    names its version) and its observers' findings under `versions`, by the version's name."""
    def findings(profiled) -> dict:
        more = {}
        if profiled.ncu:
            more["ncu"] = {cid: r.to_dict() for cid, r in profiled.ncu.items()}
        if profiled.occupancy:
            more["occupancy"] = profiled.occupancy
        if profiled.phases:
            more["phases"] = {cid: run.to_dict() for cid, run in profiled.phases.items()}
        if profiled.failures:
            more["failures"] = list(profiled.failures)
        return more

    more = {"cases": [c.id for c in done[0].request.cases]}
    if len(done) == 1:
        more.update(findings(done[0]))
    else:
        more["versions"] = {d.request.source: {"revision": d.request.revision, **findings(d)} for d in done}
    results = [r for d in done for r in d.results.values()]
    return results_document(results, env, benchmark_ids, kind="profile", **more)


def profile_text(done: list, card: str) -> str:
    """One table an observer across the cases: CUPTI rows with their verdicts, setup phases and
    kernels; ncu's counters; occupancy; the phases of each case. Several versions: each one's
    tables under its name."""
    shown = [f"card: {card}"]
    for profiled in done:
        if len(done) > 1:
            at = f" at {profiled.request.revision[:12]}" if profiled.request.revision else ""
            shown.append(f"\n== {profiled.request.source}{at}")
        results = list(profiled.results.values())
        if results:
            shown += [results_table(results), setup_table(results), _kernels_table(profiled.results)]
        if profiled.ncu:
            shown.append(ncu_table(profiled.ncu))
        if profiled.occupancy:
            shown.append(occupancy_table(profiled.occupancy))
        shown += [f"\ncase {cid}:\n{run.table()}" for cid, run in profiled.phases.items()]
    return "\n".join(line for line in shown if line)


def _kernels_table(results: dict) -> str:
    """The kernels each call launched, by name (CUPTI): a submission's as much as ours."""
    rows = []
    for cid, res in results.items():
        for k in (res.cupti or {}).get("kernels", []):
            rows.append([cid, k["name"][:70], f"{k['per_call']:g}", f"{k['mean_us']:.2f}"])
    if not rows:
        return ""
    return tabulate(rows, headers=["case", "kernel (CUPTI)", "launches a call", "µs each"], tablefmt="github")
