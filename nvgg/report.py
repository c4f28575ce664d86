"""Results for people (tabulate tables) and scripts (JSON documents, result.py), built from the same
rows; the baseline regression gate. The files are written by outputs.py."""

from __future__ import annotations

import math
from pathlib import Path

import tabulate as tabulate_module

from . import result as resultmod
from .cases import Case
from .protocol import geomean
from .result import point_name, row_key
from .sol import Sol


def fmt_us(x: float | None) -> str:
    """µs to read at a glance: 3 significant digits and more, thousands grouped (a CPU run's
    3,424,784)."""
    if x is None:
        return "—"
    return f"{x:,.0f}" if x >= 10_000 else f"{x:.1f}" if x >= 100 else f"{x:.2f}" if x >= 10 else f"{x:.3f}"


def label(result) -> str:
    """strategy/backend, with the persistent kernel's tensor-map mode where one was used:
    persistent[host]/cute; a submission by its file name: submission[mine.py]."""
    variant = getattr(result, "tensormaps", "") or getattr(result, "source", "")
    strategy = f"{result.strategy}[{variant}]" if variant else result.strategy
    return strategy if result.backend in ("submission", None) else f"{strategy}/{result.backend}"


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



def tabulate(rows, headers, tablefmt: str = "github", **kwargs) -> str:
    """tabulate's table without the two spaces it adds to every header (a run's table in 100
    columns); cells as given, never parsed as numbers."""
    saved, tabulate_module.MIN_PADDING = tabulate_module.MIN_PADDING, 0
    try:
        return tabulate_module.tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True, **kwargs)
    finally:
        tabulate_module.MIN_PADDING = saved


NOTE_LEN = 24  # a check or verdict text longer than this is a numbered note under a terminal table


def check_text(r) -> str:
    """The check column: the status, and why where it is not plain ok (a failure's message, a
    flag's sentence)."""
    if r.status != "ok":
        return status_text(r) + (f": {r.message}" if r.message else "")
    if r.flags:
        return status_text(r) + ": " + "; ".join(f.text for f in r.flags)
    return "ok"


def results_table(results, fmt: str = "github", *, markdown: bool = False, rerun: bool = True) -> str:
    """The rows as a table, then its numbered notes (long reasons, CUPTI's); `markdown`: the notes
    as a list after a blank line, so GitHub renders them apart from the table; `rerun`: with the
    `± rerun` column (not for a run timed in one window, which has no interval to give)."""
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
            fmt_us(r.time_us if timed else None) + ("" if not timed or st.clock == "cuda events" else " (CPU)"),
        ] + ([spread_cell(st, footnotes) if timed else "—"] if rerun else [])
        if with_cupti:
            cu = r.cupti or {}
            gaps = fmt_us(cu.get("gaps_us")) if cu.get("gaps_shown", True) else "— (see below)"
            row += [fmt_us(cu.get("kernel_us")), _num(cu.get("activities")), gaps, fmt_us(cu.get("host_overhead_us"))]
        row += [
            f"{ups[i]:.2f}x" if i in ups else "—",
            f"{r.gap:.1f}x" if r.gap else "—",
            note(check_text(r), status_text(r)),
        ]
        if with_gate:
            row.append(_gate_text(r.gate))
        if with_verdict:  # in a terminal the kind, the phrase a note (a table that fits 100 columns)
            row.append("—" if not r.verdict else r.verdict.phrase if markdown else note(r.verdict.phrase, r.verdict.kind))
        rows.append(row)
    headers = ["case", "strategy/backend", "time µs"] + (["± rerun"] if rerun else [])
    if with_cupti:
        headers += ["kernel µs", "launches", "gaps µs", "host µs"]
    headers += ["vs seq", "SOL gap", "check"] + (["vs baseline"] if with_gate else []) + (
        ["verdict"] if with_verdict else [])
    table = tabulate(rows, headers=headers, tablefmt=fmt)
    notes = [f"[{n}] {text}" for text, n in footnotes.items()]
    notes += [f"{r.case} {label(r)}: {r.cupti['gaps_note']}" for r in results if r.cupti and r.cupti.get("gaps_note")]
    if with_cupti:
        notes.insert(0, "CUPTI, per call: time = kernel µs + host µs (host and launch overhead, with the gaps between "
                        "a call's kernels)")
    if markdown:
        return table + ("\n\n" + "\n".join(f"- {n}" for n in notes) if notes else "")
    return table + "".join("\n" + n for n in notes)


TELL_APART = 0.02  # a rerun interval wider than this share of the mean cannot tell versions 2% apart


def spread_cell(st, footnotes: dict[str, int]) -> str:
    """Where a rerun's mean will fall (95%, timing.Stats.rerun_us); a note where the run was too
    short to measure that, or where it is too wide to tell versions apart."""
    def noted(value: float, text: str) -> str:
        return f"{fmt_us(value)} [{footnotes.setdefault(text, len(footnotes) + 1)}]"

    if st.rerun_us is None:
        return noted(st.err_us, "± is the repetitions' standard error only: too few 0.1-s blocks to tell what a "
                                "rerun will show")
    if st.rerun_us > TELL_APART * st.mean_us:
        return noted(st.rerun_us, f"too noisy to tell versions {TELL_APART:.0%} apart: a rerun's mean may move by "
                                  f"more (the time wanders between the run's blocks); `nvgg ab` alternates versions")
    return fmt_us(st.rerun_us)


def compare_outcome(r) -> str:
    """A finished row in a few words: its status and time, or its reason."""
    if r.status == "ok" and r.stats is not None:
        return f"{status_text(r)} {fmt_us(r.time_us)} µs ({r.wall_s:.1f} s)"
    import textwrap
    reason = textwrap.shorten(r.message.splitlines()[0], width=100, placeholder=" …") if r.message else ""
    return f"{status_text(r)} ({r.wall_s:.1f} s): {reason}"


def _gate_text(gate) -> str:
    return gate.text() if gate else "— (not in the baseline)"


def _num(x) -> str:
    return "—" if x is None else f"{x:g}"


def geomean_table(results, benchmark_ids: set[str]) -> str:
    means = geomeans(results, benchmark_ids)
    if not means:
        return ""
    rows = [[name, fmt_us(t)] for name, t in sorted(means.items(), key=lambda kv: kv[1])]
    return tabulate(rows, headers=["strategy/backend", "geomean µs over benchmarks " + ",".join(sorted(benchmark_ids))],
                    tablefmt="github")


def protocol_text(results, described: dict, means: dict[str, float]) -> str:
    """--protocol: what the leaderboard will say, beside the steady state: per row the protocol's
    statistics (µs a call), the steady state and their ratio; the geometric mean of the predicted
    means; then, for each row whose mean departs from its steady state beyond noise, the cause
    nvgg measured, and each failure's message."""
    head = (f"leaderboard prediction: protocol {described['name']} ({described['about']}; {described['source']}), "
            f"{described['mode']} mode, cases {','.join(described['order'])} in that order in one worker per row")
    rows, notes = [], []
    for r in results:
        p = r.protocol or {}
        if not p:
            continue
        if p.get("status") != "ok":
            rows.append([r.case, label(r), p.get("status", "?").upper()] + ["-"] * 7)
            notes.append(f"{r.case} {label(r)}: {p.get('message', '')}")
            continue
        steady = p.get("steady_us")
        rows.append([r.case, label(r), str(p["runs"]), fmt_us(p["mean_us"]), fmt_us(p["std_us"]), fmt_us(p["err_us"]),
                     fmt_us(p["best_us"]), fmt_us(p["worst_us"]), fmt_us(steady),
                     f"{p['mean_us'] / steady:.2f}x" if steady else "-"])
        if p.get("departs"):
            notes.append(f"{r.case} {label(r)}: mean {p['mean_us']:.1f} µs against {steady:.1f} steady "
                         f"({p['difference_us']:+.1f}, noise ±{p['noise_us']:.1f}): {p['cause']}")
        if p.get("caveat"):
            notes.append(f"{r.case} {label(r)}: {p['caveat']}")
    if not rows:
        return ""
    lines = [head, tabulate(rows, headers=["case", "row", "runs", "mean µs", "std", "err", "best", "worst",
                                           "steady µs", "mean/steady"], tablefmt="github")]
    for name, g in sorted(means.items(), key=lambda kv: kv[1]):
        steady = [r.time_us for r in results if label(r) == name and r.time_us]
        sg = geomean(steady) if len(steady) == len(described["order"]) else None
        lines.append(f"geomean of the means (the ranking) {name}: {g:.1f} µs predicted"
                     + (f", {sg:.1f} µs steady state" if sg else ""))
    lines += notes
    return "\n".join(lines)


def predicted_ratios(results, means: dict[str, float]) -> str:
    """`ab --protocol`: each version's predicted geometric mean over the first version's (one run
    of the protocol each: no interval)."""
    names = list(dict.fromkeys(label(r) for r in results))
    if not names or names[0] not in means:
        return ""
    return "\n".join(f"predicted geomean {name} / {names[0]}: {means[name] / means[names[0]]:.3f} (one run of the "
                     "protocol each, no interval: the rounds above are the steady state's)"
                     for name in names[1:] if name in means)


def sol_rows(case: Case, device_sol: Sol | None, b200_sol: Sol) -> list:
    rows = []
    for s in ([device_sol] if device_sol else []) + [b200_sol]:
        rows.append([case.id, s.profile, s.data_path, f"{s.bytes / 1e6:.2f}", f"{s.flops / 1e9:.2f}",
                     fmt_us(s.memory_us), fmt_us(s.compute_us), fmt_us(s.sol_us), s.bound])
    return rows


SOL_HEADERS = ["case", "profile", "data path", "MB", "GFLOP", "memory µs", "compute µs", "SOL µs", "bound"]


def sol_table(rows) -> str:
    return tabulate(rows, headers=SOL_HEADERS, tablefmt="github")


def results_document(results, env: dict, benchmark_ids: set[str], kind: str = "results", **more) -> dict:
    """The JSON of a run, compare or profile (result.document at the current format)."""
    return resultmod.document(kind, **more, env=env, results=[r.to_dict() for r in results],
                              geomean_us=geomeans(results, benchmark_ids))


def markdown_report(results, env: dict, benchmark_ids: set[str]) -> str:
    """The comparison as GitHub-flavoured Markdown (a CI job summary): the card, the results table
    (verdicts included) and the geometric means."""
    from .env import card
    parts = [f"## nvgg compare\n\ncard: {card(env)}\n", results_table(results, markdown=True)]
    means = geomean_table(results, benchmark_ids)
    if means:
        parts.append("\n" + means)
    return "\n".join(parts) + "\n"


def load_baseline(path: str | Path) -> dict[tuple[str, str, str, str], dict]:
    """An earlier result file's rows by `row_key` (any format this nvgg reads, migrated); checked
    whole before any work starts."""
    return {row_key(r): r for r in resultmod.read_results(path, "baseline")}


def in_baseline(row, baseline: dict) -> bool:
    """Whether a row about to run (result.Row) has a row to be judged against in `baseline`
    (load_baseline); a persistent row whose tensor-map mode is the default matches any mode."""
    if row.submission:
        key = (row.case.id, "submission", "submission", row.label)
        return key in baseline
    head = (row.case.id, row.strategy or "", row.backend or "")
    return any(k[:3] == head and (row.tensormaps is None or k[3] == row.tensormaps) for k in baseline)


def gate(results, baseline: dict, max_regression_pct: float) -> list[str]:
    """Each result against its baseline row (gate.compare, kept in result.gate); the lines naming
    the rows that fail the gate. Rows absent from the baseline are not judged."""
    from dataclasses import replace

    from .gate import compare
    out = []
    for r in results:
        key = row_key(r)
        old, other_mode = baseline.get(key), ""
        if old is None and r.tensormaps:
            # the mode came from the kernel's default or a config map's point (compare --config against a
            # default run): the baseline's one row of that case, strategy and backend, in whatever mode
            same = [(k, v) for k, v in baseline.items() if k[:3] == key[:3] and k[3]]
            if len(same) == 1:
                (_, _, _, other_mode), old = same[0]
        if old is None:
            continue
        found = compare(r.to_dict(), old, max_regression_pct)
        if other_mode:
            found = replace(found, reason="; ".join(x for x in (found.reason, f"against the baseline's {other_mode} maps") if x))
        r.gate = found
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
    return tabulate(rows, headers=["case", "strategy/backend"] + [f"{k} ms" for k in keys], tablefmt="github")


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
                k.name[:60], fmt_us(k.duration_us), f"{k.dram_bytes / 1e6:.2f}", _pct(k.dram_pct), _pct(k.tensor_pct),
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


def run_text(results, env: dict, *, rerun: bool = True) -> str:
    """`nvgg run`'s output: the card, the row's table (`rerun`: with its rerun interval), its SOL,
    statistics, setup phases and clocks."""
    from .env import card
    lines = [f"card: {card(env)}   torch {env.get('torch')}   nvgg {env.get('nvgg')}"]
    lines += [f"inputs: {r.inputs}" for r in results[:1] if r.inputs]
    lines.append(results_table(results, rerun=rerun))
    for r in results:
        if r.sol is not None and r.stats is not None:
            lines.append(f"SOL on {r.sol.profile}: {r.sol.sol_us:.3f} µs ({r.sol.bound}-bound, {r.sol.data_path} data path); "
                         f"native B200 SOL {r.sol_b200.sol_us:.3f} µs")
        elif r.sol_b200 is not None and r.stats is not None:
            lines.append(f"native B200 SOL {r.sol_b200.sol_us:.3f} µs (no GPU profile here: a CPU time has no gap to quote)")
        if r.stats is not None:
            st = r.stats
            lines.append(f"{r.case} {label(r)}: mean {st.mean_us:.3f} µs, median {st.median_us:.3f}, best {st.best_us:.3f}, "
                         f"worst {st.worst_us:.3f}, std {st.std_us:.3f}, {st.runs} runs x {st.batch} inputs [{st.method}, {st.clock}]")
        if r.setup_us:
            lines.append("setup: " + ", ".join(f"{k} {v / 1e3:.2f} ms" for k, v in r.setup_us.items()))
        lines.append(clocks_line(r.clocks))
        lines.append(energy_line(r.energy))
    return "\n".join(line for line in lines if line)


def energy_line(energy: dict) -> str:
    """The energy a call (clocks.energy_a_call): the card's board power, idle included, over a window
    of the timed repetitions, per call completed in it, with what its bound covers and what not,
    and the same above the idle power where it was read; or why there is no figure; "" without NVML."""
    if not energy:
        return ""
    if energy.get("mj_per_call") is None:
        return f"energy: no figure ({energy['note']})"
    idle = (f"above idle ({energy['idle_watts']:.0f} W): {energy['mj_above_idle']:.3f} mJ a call"
            if energy.get("mj_above_idle") is not None else f"no idle power ({energy.get('idle_note', 'not read')})")
    return (f"energy: {energy['mj_per_call']:.3f} mJ a call within {energy['within']:.1%}, board power idle included "
            f"({energy['watts']:.0f} W over {energy['seconds']:.2f} s of the timed repetitions, their L2 clears and "
            f"host gaps included, {energy['updates']} steps of NVML's counter), per call completed in it "
            f"({energy['wall_us']:.1f} µs of wall time a call); within: the calls counted, the counter's whole mJ, "
            f"the power's spread step to step (95%), not NVML's own measurement or a drift over longer than the "
            f"span; {idle}")


def clocks_line(clocks: dict) -> str:
    """The card's clocks while the row was timed, one line ("" where none were sampled)."""
    if not clocks or not clocks.get("samples") or "sm_mhz" not in clocks:
        return f"clocks: {clocks['error']}" if clocks and clocks.get("error") else ""
    lo, mid, hi = clocks["sm_mhz"]
    state = clocks.get("throttled") or "not throttled"
    return (f"clocks while timed: SM {lo}-{hi} MHz (median {mid:g}), memory {clocks['mem_mhz'][0]}-{clocks['mem_mhz'][1]} MHz, "
            f"up to {clocks['temp_c_max']} °C and {clocks['power_w_max']} W, {clocks['samples']} samples; {state}")


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


# ---------------------------------------------------------------- an A/B (nvgg ab)

def _ratio_text(r) -> str:
    return "—" if r is None else f"{r.ratio:.3f}x ({r.lo:.3f}-{r.hi:.3f})"


def _rule_text(ab, floor: float) -> str:
    """The rule that classed a case's ratios, for its rows: the band, host-bound or not and its most
    rounds, the level of the look it stopped at."""
    most = f"up to {ab.design.most} rounds" if ab.design else ""
    parts = [f"±{floor:.1%}", ("host-bound, " if ab.host_bound else "") + most, f"look at {ab.level:.1%}"]
    return ", ".join(p for p in parts if p)


GEOMEAN_RULE = "the cases' log half-widths added in quadrature, classed against the same ±floor"


def ab_table(done, means: dict, floor: float, env: dict) -> str:
    """`nvgg ab`'s output: per case each version's rounds, median time and ratio to the base with
    its interval, class and the rule that classed it; then the geometric mean over the cases
    (`means`, ab.geomeans) with its rule; why each case stopped."""
    from .env import card
    rows, notes = [], []
    for ab in done:
        ratios = ab.ratios()
        for v, name in enumerate(ab.versions):
            times = sorted(ab.times(v))
            median = fmt_us(times[len(times) // 2]) if times else "—"
            r = ratios[v]
            cls = "base" if v == 0 else (r.classify(floor) if r else "—")
            rows.append([ab.case, name, str(len(ab.results[v])), median, "1 (base)" if v == 0 else _ratio_text(r), cls,
                         "" if v == 0 else _rule_text(ab, floor)])
            if cls == "unsure":
                need = r.rounds_to_decide(floor, 1 - ab.design.alphas[-1] if ab.design else None)
                notes.append(f"case {ab.case} {name}: too noisy to tell apart at ±{floor:.1%} in {r.n} rounds: its "
                             f"rounds' ratios spread ±{math.expm1(r.spread):.1%} (one standard deviation); at that "
                             "spread " + (f"about {need} rounds would decide" if need < 10_000 else
                                          "no practical number of rounds would decide (the ratio sits on the floor)"))
        if ab.host_bound:
            notes.append(f"case {ab.case}: host-bound (a version's host time to issue a call is most of the call): "
                         f"its rounds spread wide, so it may take up to {ab.design.most if ab.design else '?'} rounds "
                         "to tell a change of the floor")
        if ab.oversubscribed:
            notes.append(f"case {ab.case}: {ab.load_text()}: a version slowed for the whole case by the others' "
                         "load is a bias its interval does not show; A/B on a quieter host before trusting a faster or "
                         "slower here")
        notes.append(f"case {ab.case}: {ab.stopped}")
    lines = [f"card: {card(env)}   floor ±{floor:.1%}: same inside it, faster or slower wholly beyond it",
             "intervals hold 95% wherever a case stops: each look's own level (the rule column) spends a share of the 5%",
             tabulate(rows, headers=["case", "version", "rounds", "median µs", "vs base (95%)", "class", "rule"])]
    if len(done) > 1:
        lines.append(tabulate([[name, _ratio_text(g), g.classify(floor) if g else "—"] for name, g in means.items()],
                              headers=["version", "geomean vs base (95%)", "class"]))
        lines.append(f"geomean: {GEOMEAN_RULE} (±{floor:.1%})")
    return "\n".join(lines + notes)


def _ratio_dict(r, floor: float) -> dict | None:
    """A ratio in a result file: the estimate, its interval and the level it was drawn at, the rounds, the class."""
    return None if r is None else {"ratio": r.ratio, "lo": r.lo, "hi": r.hi, "rounds": r.n, "level": r.level,
                                   "class": r.classify(floor)}


def ab_document(done, means: dict, floor: float, env: dict) -> dict:
    """`nvgg ab --json`: every round's result, the ratios and classes with the rule that made them,
    the geometric means with theirs."""
    from .result import document

    cases = []
    for ab in done:
        ratios = ab.ratios()
        versions = [{"name": name, "vs_base": _ratio_dict(ratios[v], floor), "times_us": ab.times(v),
                     "first": ab.first[v].to_dict() if v < len(ab.first) and ab.first[v] is not None else None,
                     "rounds": [r.to_dict() for r in ab.results[v]]} for v, name in enumerate(ab.versions)]
        cases.append({"case": ab.case, "stopped": ab.stopped, "floor": floor, "host_bound": ab.host_bound,
                      "rule": ab.rule(floor),
                      "host_load": None if ab.load is None else {"load": ab.load, "cores": ab.cores,
                                                                 "oversubscribed": ab.oversubscribed},
                      "versions": versions})
    return document("ab", env=env, floor=floor, cases=cases, geomean_rule=GEOMEAN_RULE,
                    geomean={k: _ratio_dict(g, floor) for k, g in means.items()})


# ---------------------------------------------------------------- a sweep (nvgg tune)

def tune_table(done, space: dict, floor: float, env: dict) -> str:
    """`nvgg tune`'s output: a table a case (a column a knob; the first pass's time and its ±, then
    the finalists' standing against the winner from the rounds), and a line a case with the
    winner, the points not told apart from it, where the default stands and the gain over it."""
    from .env import card
    knobs = list(space)
    lines = [f"card: {card(env)}   floor ±{floor:.1%}: same inside it, faster or slower wholly beyond it; finalists "
             "measured again in interleaved rounds, their intervals holding 95% wherever the rounds stopped"]
    for ct in done:
        good = ct.good()
        order = good + [p for p in ct.points if p in ct.first and p not in good]
        rows = []
        for p in order:
            r = ct.first[p]
            timed = r.status == "ok" and r.stats is not None
            vs = ct.against_winner(p)
            standing = ("winner" if p == ct.winner else
                        "out in the rounds" if p in ct.out else
                        f"{vs.ratio:.3f}x {vs.classify(floor)}" if vs is not None else
                        "—" if timed and not r.suspect else status_text(r))
            rows.append([*(str(v) for _, v in p), "*" if p == ct.default else "",
                         fmt_us(r.time_us) if timed else "—", fmt_us(r.stats.rerun_us if timed and r.stats.rerun_us
                                                                      is not None else r.stats.err_us if timed else None),
                         standing])
        lines += [f"\ncase {ct.case}" + (f" ({ct.stopped})" if ct.stopped else ""),
                  tabulate(rows, headers=[*knobs, "default", "µs", "±", "vs winner"])]
        lines += [f"{point_name(p)}: {status_text(ct.first[p])}: {_first_line(ct.first[p].message)}"
                  for p in order if ct.first[p].status != "ok" or ct.first[p].suspect]
        lines += [f"{point_name(p)}: {why}" for p, why in ct.out.items()]
        if ct.refused:
            lines.append(f"refused by the kernel's own checks, not run: {len(ct.refused)} points (their reasons in the JSON)")
        lines.append(tune_summary(ct, floor))
    lines.append("* the file's default (each knob's first value); µs and ± from the first pass, 'vs winner' from the "
                 "rounds; a finalist that failed or was suspect in them is out, never the winner")
    return "\n".join(lines)


def _first_line(text: str, most: int = 160) -> str:
    """A message's first line, cut to `most` characters."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else "no reason given"
    return line if len(line) <= most else line[:most - 1] + "…"


def tune_summary(ct, floor: float) -> str:
    """A case's answer in a line."""
    if ct.winner is None:
        return f"case {ct.case}: no winner ({ct.stopped or 'no point ran right'})"
    out = f"; out in the rounds: {', '.join(point_name(p) for p in ct.out)}" if ct.out else ""
    good = ct.good()
    text = f"case {ct.case}: winner {point_name(ct.winner)} ({fmt_us(ct.first[ct.winner].time_us)} µs)"
    if ct.not_apart:
        text += "; not told apart from it: " + ", ".join(point_name(p) for p in ct.not_apart)
    near = near_points(ct, floor)
    if near:
        text += (f"; {len(near)} more within {floor:.1%} of the fastest in the first pass, not measured again "
                 f"(the JSON's 'near')")
    if ct.default == ct.winner:
        text += "; the default wins"
    elif ct.default in good:
        gain = ct.gain()
        text += f"; the default is {good.index(ct.default) + 1} of {len(good)} in the first pass"
        if gain is not None:
            text += f", {_ratio_text(gain)} the winner's time ({gain.classify(floor)})"
    else:
        text += "; the default did not run right"
    text += out
    if ct.final is not None and ct.final.oversubscribed:
        text += (f"; {ct.final.load_text()} during the rounds: a point slowed throughout by that load is a bias "
                 "their intervals do not show")
    return text


def near_points(ct, floor: float) -> list[tuple]:
    """First-pass points within `floor` of the fastest's time that were not finalists: the rounds
    compared only the finalists, so these may be as good as the winner and were not told apart."""
    good = ct.good()
    if not good:
        return []
    best = ct.first[good[0]].time_us
    return [p for p in good[1:] if p not in ct.final_points and ct.first[p].time_us <= best * (1 + floor)]


def _in_space_order(ct) -> list[tuple]:
    """A case's measured points in the space's order (over several GPUs they finish in any), the
    rest (a resumed sweep's, of a space read otherwise) after them as measured."""
    order = {p: i for i, p in enumerate(ct.points)}
    return sorted(ct.first, key=lambda p: order.get(p, len(order)))


def tune_document(done, target, space: dict, floor: float, env: dict) -> dict:
    """`nvgg tune --json`: the space, and a case: every point's first-pass result, the finalists'
    rounds and ratios to the winner, the winner, the points not told apart, the default's gain."""
    from .result import document

    cases = []
    for ct in done:
        finals = []
        for v, p in enumerate(ct.final_points):
            finals.append({"point": dict(p), "rounds": [r.to_dict() for r in ct.final.results[v]],
                           "vs_winner": _ratio_dict(ct.against_winner(p), floor)})
        cases.append({"case": ct.case, "stopped": ct.stopped, "default": dict(ct.default),
                      "winner": dict(ct.winner) if ct.winner is not None else None,
                      "not_apart": [dict(p) for p in ct.not_apart], "near": [dict(p) for p in near_points(ct, floor)],
                      "out": [{"point": dict(p), "reason": why,
                               **({"result": ct.out_results[p].to_dict()} if p in ct.out_results else {})}
                              for p, why in ct.out.items()],
                      **({"rule": ct.final.rule(floor)} if ct.final is not None else {}),
                      "gain": _ratio_dict(ct.gain(), floor),
                      "points": [ct.first[p].to_dict() for p in _in_space_order(ct)], "finalists": finals,
                      "refused": [{"point": dict(p), "reason": why} for p, why in ct.refused.items()]})
    return document("tune", target=target.name, revision=target.revision, arch=target.arch, space=space, floor=floor,
                    env=env, cases=cases)


def config_map(done, target, space: dict) -> dict:
    """The winners as a config map: case -> point, for `run`, `compare` and `ab`; `arch` set for
    our kernel's points (they are that arch's builds), "" for a submission's."""
    from .result import document
    return document("config", target=target.name, arch=target.arch, space=space,
                    cases={ct.case: dict(ct.winner) for ct in done if ct.winner is not None})
