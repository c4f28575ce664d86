"""Results for people (tabulate tables) and scripts (JSON), built from the same rows; the baseline
regression gate; atomic result files."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from tabulate import tabulate

from .cases import Case
from .errors import NvggError, read_text
from .sol import Sol


def _us(x: float | None) -> str:
    return "—" if x is None else (f"{x:.1f}" if x >= 100 else f"{x:.2f}" if x >= 10 else f"{x:.3f}")


def label(result) -> str:
    """strategy/backend, with the persistent kernel's tensor-map mode where one was used:
    persistent[host]/cute; a submission by its file name: submission[mine.py]."""
    variant = getattr(result, "tensormaps", "") or getattr(result, "source", "")
    strategy = f"{result.strategy}[{variant}]" if variant else result.strategy
    return strategy if result.backend in ("submission", None) else f"{strategy}/{result.backend}"


def row_key(row) -> tuple[str, str, str, str]:
    """What a row is across runs: case, strategy, backend and its variant (the tensor-map mode,
    or the submission's file name); a Result or its JSON dict."""
    get = (lambda k: row.get(k) or "") if isinstance(row, dict) else (lambda k: getattr(row, k, "") or "")
    return get("case"), get("strategy"), get("backend"), get("tensormaps") or get("source")


def speedups(results) -> dict[int, float]:
    """Speedup of each result over sequential on the same backend and case (by list index)."""
    base = {(r.case, r.backend): r.time_us for r in results if r.strategy == "sequential" and r.time_us}
    out = {}
    for i, r in enumerate(results):
        ref = base.get((r.case, r.backend))
        if ref and r.time_us:
            out[i] = ref / r.time_us
    return out


def geomeans(results, benchmark_ids: set[str]) -> dict[str, float]:
    """Geometric mean of the time over the benchmark cases (the leaderboard's ranking), for each
    strategy/backend that ran every benchmark case correctly."""
    by_label: dict[str, dict[str, float]] = {}
    for r in results:
        if r.case in benchmark_ids and r.status == "ok" and r.time_us and not r.suspect:
            by_label.setdefault(label(r), {})[r.case] = r.time_us
    return {name: math.exp(sum(math.log(t) for t in times.values()) / len(times))
            for name, times in by_label.items() if set(times) == benchmark_ids}


def status_text(r) -> str:
    if r.status == "ok" and r.suspect:
        return "SUSPECT"
    return {"ok": "ok", "wrong": "WRONG", "error": "ERROR", "unsupported": "n/a"}[r.status]


NOTE_LEN = 24  # a check column's reason longer than this is a numbered note under the table


def check_text(r) -> str:
    """The check column: the status, and why where it is not plain ok (a failure's message, a
    flag's sentence)."""
    if r.status != "ok":
        return status_text(r) + (f": {r.message}" if r.message else "")
    if r.flags:
        return status_text(r) + ": " + "; ".join(f["text"] for f in r.flags)
    return "ok"


def results_table(results, fmt: str = "github") -> str:
    ups = speedups(results)
    with_cupti = any(r.cupti for r in results)
    with_verdict = any(getattr(r, "verdict", None) for r in results)
    with_gate = any(getattr(r, "gate", None) for r in results)
    rows = []
    footnotes: dict[str, int] = {}

    def note(text: str, short: str) -> str:
        """A long reason once under the table, the cell its status and the note's number."""
        if len(text) <= NOTE_LEN:
            return text
        number = footnotes.setdefault(text.removeprefix(f"{short}: "), len(footnotes) + 1)
        return f"{short} [{number}]"

    for i, r in enumerate(results):
        st = r.stats
        timed = st is not None and r.status == "ok"  # a row wrong when timed keeps its stats in the JSON only
        row = [
            r.case, label(r),
            _us(r.time_us if timed else None) + ("" if not timed or st.clock == "cuda events" else " (CPU)"),
            _us(st.err_us) if timed else "—",
        ]
        if with_cupti:
            cu = r.cupti or {}
            gaps = _us(cu.get("gaps_us")) if cu.get("gaps_shown", True) else "— (see below)"
            row += [_us(cu.get("kernel_us")), _num(cu.get("activities")), gaps, _us(cu.get("host_overhead_us"))]
        row += [
            f"{ups[i]:.2f}x" if i in ups else "—",
            f"{r.gap:.1f}x" if r.gap else "—",
            note(check_text(r), status_text(r)),
        ]
        if with_gate:
            row.append(_gate_text(r.gate))
        if with_verdict:
            row.append((r.verdict or {}).get("phrase", "—"))
        rows.append(row)
    headers = ["case", "strategy/backend", "time µs", "± err"]
    if with_cupti:
        headers += ["kernel µs (CUPTI)", "launches", "gaps in a call µs", "host+launch µs"]
    headers += ["vs sequential", "gap to SOL", "check"] + (["vs baseline"] if with_gate else []) + (
        ["verdict"] if with_verdict else [])
    table = tabulate(rows, headers=headers, tablefmt=fmt, disable_numparse=True)
    notes = [f"[{n}] {text}" for text, n in footnotes.items()]
    notes += [f"{r.case} {label(r)}: {r.cupti['gaps_note']}" for r in results if r.cupti and r.cupti.get("gaps_note")]
    if with_cupti:
        notes.insert(0, "CUPTI, per call: time = kernel µs + host+launch µs; gaps in a call are part of host+launch")
    return table + "".join("\n" + n for n in notes)


def _gate_text(gate: dict | None) -> str:
    if not gate:
        return "— (not in the baseline)"
    from .gate import Compared
    return Compared(**gate).text()


def _num(x) -> str:
    return "—" if x is None else f"{x:g}"


def geomean_table(results, benchmark_ids: set[str]) -> str:
    means = geomeans(results, benchmark_ids)
    if not means:
        return ""
    rows = [[name, _us(t)] for name, t in sorted(means.items(), key=lambda kv: kv[1])]
    return tabulate(rows, headers=["strategy/backend", "geomean µs over benchmarks " + ",".join(sorted(benchmark_ids))],
                    tablefmt="github", disable_numparse=True)


def sol_rows(case: Case, device_sol: Sol | None, b200_sol: Sol) -> list:
    rows = []
    for s in ([device_sol] if device_sol else []) + [b200_sol]:
        rows.append([case.id, s.profile, s.data_path, f"{s.bytes / 1e6:.2f}", f"{s.flops / 1e9:.2f}",
                     _us(s.memory_us), _us(s.compute_us), _us(s.sol_us), s.bound])
    return rows


SOL_HEADERS = ["case", "profile", "data path", "MB", "GFLOP", "memory µs", "compute µs", "SOL µs", "bound"]


def sol_table(rows) -> str:
    return tabulate(rows, headers=SOL_HEADERS, tablefmt="github", disable_numparse=True)


def document(results, env: dict, benchmark_ids: set[str]) -> dict:
    return {"env": env, "results": [r.to_dict() for r in results], "geomean_us": geomeans(results, benchmark_ids)}


def markdown_report(results, env: dict, benchmark_ids: set[str]) -> str:
    """The comparison as GitHub-flavoured Markdown (a CI job summary): the card, the results table
    (verdicts included) and the geometric means."""
    from .env import card
    parts = [f"## nvgg compare\n\ncard: {card(env)}\n", results_table(results)]
    means = geomean_table(results, benchmark_ids)
    if means:
        parts.append("\n" + means)
    return "\n".join(parts) + "\n"


def write_text(path: str | Path, text: str) -> None:
    """Write atomically: a temporary file in the same folder, then rename over the target."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 is for the temporary name only
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: str | Path, payload) -> None:
    write_text(path, json.dumps(payload, indent=2, default=str) + "\n")


STATUSES = ("ok", "wrong", "error", "unsupported")


def read_rows(path: str | Path, what: str = "result file") -> list[dict]:
    """The rows of a file written by --json, each checked to be a result row; anything else (no
    file, a folder, not UTF-8, not JSON, rows of another shape) is one NvggError naming `what`."""
    text = read_text(path, what, "pass a file written by --json FILE")
    try:
        raw = json.loads(text)
    except ValueError:
        raw = None
    rows = raw.get("results") if isinstance(raw, dict) else None
    if not isinstance(rows, list) or not all(_result_row(r) for r in rows):
        raise NvggError(f"{what} {path} is not an nvgg result file (JSON with 'results'): regenerate it with --json")
    return rows


def load_baseline(path: str | Path) -> dict[tuple[str, str, str, str], dict]:
    """An earlier result file's rows by `row_key`; checked whole before any work starts."""
    return {row_key(r): r for r in read_rows(path, "baseline")}


def _result_row(r) -> bool:
    """A result row as --json writes it: a case, a status, stats with numbers or none, and where
    present, flags (a list of {kind, ...}) and clocks (a dict; its SM clocks a list of numbers)."""
    if not isinstance(r, dict) or not isinstance(r.get("case"), str) or r.get("status") not in STATUSES:
        return False
    st = r.get("stats")
    stats_ok = st is None or (isinstance(st, dict) and all(isinstance(st.get(k), (int, float)) and st.get(k) >= 0
                                                           for k in ("mean_us", "err_us", "std_us")) and st["mean_us"] > 0)
    flags, clocks = r.get("flags") or [], r.get("clocks") or {}
    flags_ok = isinstance(flags, list) and all(isinstance(f, dict) and isinstance(f.get("kind"), str) for f in flags)
    sm = clocks.get("sm_mhz") if isinstance(clocks, dict) else None
    clocks_ok = isinstance(clocks, dict) and (sm is None or (isinstance(sm, list) and len(sm) >= 2 and all(
        isinstance(x, (int, float)) for x in sm)))
    return stats_ok and flags_ok and clocks_ok


def gate(results, baseline: dict, max_regression_pct: float) -> list[str]:
    """Each result against its baseline row (gate.compare, kept in result.gate); the lines naming
    the rows that fail the gate. Rows absent from the baseline are not judged; files written
    before the tensor-map mode was recorded key their rows with mode ""."""
    from .gate import compare
    out = []
    for r in results:
        key = row_key(r)
        old = baseline.get(key) or baseline.get(key[:3] + ("",))
        if old is None:
            continue
        found = compare(r.to_dict(), old, max_regression_pct)
        r.gate = found.to_dict()
        if found.fails:
            out.append(f"{r.case} {label(r)}: {found.text()}")
    return out


def setup_table(results) -> str:
    """Host-side phases per result, in milliseconds (compile, argument preparation, graph capture,
    first call, host time per launch)."""
    keys = []
    for r in results:
        keys += [k for k in r.setup_us if k not in keys]
    rows = [[r.case, label(r)] + [f"{r.setup_us[k] / 1e3:.3f}" if k in r.setup_us else "—" for k in keys] for r in results]
    return tabulate(rows, headers=["case", "strategy/backend"] + [f"{k} ms" for k in keys], tablefmt="github",
                    disable_numparse=True)


def _pct(x) -> str:
    return "—" if x is None else f"{x:.1f}%"


def _tmem(k) -> str:
    """Tensor memory (sm_100): its pipe's instruction rate and its active cycles, % of peak."""
    pipe, active = getattr(k, "tmem_pipe_pct", None), getattr(k, "tmem_pct", None)
    return "—" if pipe is None and active is None else f"{_pct(pipe)} / {_pct(active)}"


def ncu_table(reports) -> str:
    """Nsight Compute's kernels of one call: one table across cases ({case: NcuReport}), or one
    report's; a total line a case."""
    by_case = reports if isinstance(reports, dict) else {"": reports}
    rows, totals = [], []
    for cid, report in by_case.items():
        for k in report.kernels:
            rows.append(([cid] if cid else []) + [
                k.name[:60], _us(k.duration_us), f"{k.dram_bytes / 1e6:.2f}", _pct(k.dram_pct), _pct(k.tensor_pct),
                _tmem(k), _pct(k.achieved_occupancy_pct), _pct(k.theoretical_occupancy_pct), k.registers, k.smem_bytes, k.grid,
                k.block])
        total = (f"{'case ' + cid + ': ' if cid else ''}total {report.duration_us:.2f} µs over {len(report.kernels)} "
                 f"kernels, DRAM {report.dram_bytes / 1e6:.2f} MB")
        if report.sol_bytes:
            total += f" = {report.dram_bytes / report.sol_bytes:.2f}x the SOL model's {report.sol_bytes / 1e6:.2f} MB"
        pipes = sorted({k.tensor_pipe for k in report.kernels if getattr(k, "tensor_pipe", None)})
        total += f"; MMA pipe: {', '.join(pipes)}" if pipes else "; MMA pipe: none read on this architecture"
        totals.append(f"{total}; report {report.report_file}")
    headers = (["case"] if "" not in by_case else []) + [
        "kernel", "µs", "DRAM MB", "DRAM % peak", "MMA pipe", "TMEM pipe / active", "achieved occ.", "theor. occ.", "regs", "smem B",
        "grid", "block"]
    table = tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)
    return "\n".join([table] + totals)


def phase_table(run) -> str:
    """Device-side phases of the instrumented persistent kernel: median and max over CTAs."""
    rep = run.report
    rows = [[p.name, p.ctas, _us(p.median_us), _us(p.max_us)] for p in rep.phases]
    table = tabulate(rows, headers=["phase", "CTAs", "median µs", "max µs"], tablefmt="github", disable_numparse=True)
    mode = f", tensor maps {run.tensormaps}" if getattr(run, "tensormaps", "") else ""
    return (f"{table}\n{run.layout.kernel}{mode}: "
            f"{rep.ctas} CTAs ({rep.ctas_with_work} with work), kernel {rep.kernel_us:.2f} µs, "
            f"time to first MMA {rep.time_to_first_mma_us:.2f} µs (median), setup share {rep.setup_share:.1%}, "
            f"group switches per CTA {rep.switches_median:g} (median)\n"
            f"instrumentation cost: kernel {run.instrumented_us:.2f} µs vs {run.plain_us:.2f} µs uninstrumented ({run.cost:+.1%}, CUPTI)"
            + _behind_line(run.behind))


def submission_phase_table(run) -> str:
    """The phases a submission's probe marks show (profiling/submission_phases.py): one table over
    its kernels' spans, a summary line a kernel with what its buffers show wrong, the cost of the
    marks and how much of the call's kernel time they span, and the next call's start."""
    rows = [[k.kernel, p.name, p.ctas, _us(p.median_us), _us(p.max_us)] for k in run.kernels for p in k.report.phases]
    lines = [f"submission {run.path}: {len(run.kernels)} marked kernel(s), {len(run.launches)} launch(es) a call; "
             f"output checked on {run.checked_inputs} inputs with the marks on",
             tabulate(rows, headers=["kernel", "span", "CTAs", "median µs", "max µs"], tablefmt="github",
                      disable_numparse=True)]
    for k in run.kernels:
        rep = k.report
        first = ("" if rep.time_to_first_mma_us is None else
                 f", time to first MMA {rep.time_to_first_mma_us:.2f} µs (median), setup share {rep.setup_share:.1%}")
        lines.append(f"{k.kernel}: {rep.launches} launch(es), {rep.ctas} CTAs marked ({rep.ctas_with_work} with work), "
                     f"first mark to last {rep.kernel_us:.2f} µs{first}")
        lines += [f"  {note}" for note in rep.notes]
    (on_lo, on_hi), (off_lo, off_hi) = run.spread()
    lines.append(f"instrumentation cost: CUPTI kernel time a call {run.instrumented_us:.2f} µs with marks (quartiles "
                 f"{on_lo:.2f}-{on_hi:.2f}) vs {run.plain_us:.2f} µs without ({off_lo:.2f}-{off_hi:.2f}): {run.cost:+.1%} "
                 f"(medians of {len(run.instrumented_calls_us)} calls each, L2 flushed before each)")
    share = run.call_marked_us / run.call_cupti_us if run.call_cupti_us else 0.0
    step = min((k.report.timer_step_ns for k in run.kernels if k.report.timer_step_ns), default=None)
    lines.append(f"the marks span {run.call_marked_us:.2f} µs of the call's {run.call_cupti_us:.2f} µs kernel time "
                 f"(CUPTI, {share:.1%})" + (f"; readings differ by at least {step} ns" if step else ""))
    nxt = run.next_call
    if nxt is not None:
        how = "the calls overlap" if nxt.overlap else "the calls do not overlap"
        mma = "" if nxt.first_mma_median_us is None else f", first MMA at {nxt.first_mma_median_us:+.2f} µs (median)"
        lines.append(f"next call, launched right after with nothing between: its CTAs with work start at "
                     f"{nxt.start_earliest_us:+.2f} µs from this call's last mark (earliest; median "
                     f"{nxt.start_median_us:+.2f}){mma}: {how}")
    return "\n".join(lines)


def _behind_line(behind) -> str:
    if behind is None:
        return ""
    return (f"\nright behind another launch (programmatic, as the timer's calls run), against the moment its "
            f"last CTA exits: CTAs start at {behind.start_median_us:+.2f} µs (median; earliest {behind.start_earliest_us:+.2f}), "
            f"first MMA at {behind.first_mma_median_us:+.2f} µs (median; latest {behind.first_mma_max_us:+.2f})")


def occupancy_table(rows: list[dict]) -> str:
    with_case = any("case" in r for r in rows)
    table = [([r.get("case", "")] if with_case else []) + [
        r["kernel"][:60], r["registers"], r["smem_bytes"], r["threads"], f"{r['theoretical']:.1%}",
        r["blocks_per_sm"], r["limited_by"], "—" if r["api_blocks_per_sm"] is None else r["api_blocks_per_sm"],
        r["tiles"], f"{r['sm_coverage']:.0%}", f"{r['waves']:.2f}"] for r in rows]
    return tabulate(table, headers=(["case"] if with_case else []) + [
        "kernel", "regs", "smem B", "threads", "theoretical occ.", "blocks/SM", "limited by", "blocks/SM (CUDA API)",
        "tiles", "SM coverage", "waves"], tablefmt="github", disable_numparse=True)
