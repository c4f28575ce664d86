"""The rows of `run` and `compare` (kind "results"): their tables (the results with their notes,
the geometric means over the benchmarks, the setup phases, `run`'s statistics and clocks, the
leaderboard's prediction), their JSON document, and `Results`, the report that grows as rows finish
and that every printer reads."""

from __future__ import annotations

import math

from .. import result as resultmod
from ..protocol import geomean
from ..result import Result
from . import NOTE_LEN, Outcome, check_text, fmt_us, label, status_text, tabulate


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


def results_document(results, env: dict, benchmark_ids: set[str], kind: str = "results", **more) -> dict:
    """The JSON of a run, compare or profile (result.document at the current format)."""
    return resultmod.document(kind, **more, env=env, results=[r.to_dict() for r in results],
                              geomean_us=geomeans(results, benchmark_ids))


def setup_table(results) -> str:
    """Host-side phases per result, in milliseconds (compile, argument preparation, graph capture,
    first call, host time per launch)."""
    keys = []
    for r in results:
        keys += [k for k in r.setup_us if k not in keys]
    rows = [[r.case, label(r)] + [f"{r.setup_us[k] / 1e3:.3f}" if k in r.setup_us else "—" for k in keys] for r in results]
    return tabulate(rows, headers=["case", "strategy/backend"] + [f"{k} ms" for k in keys], tablefmt="github")


def run_text(results, env: dict, *, rerun: bool = True) -> str:
    """`nvgg run`'s output: the card, the row's table (`rerun`: with its rerun interval), its SOL,
    statistics, setup phases and clocks."""
    from ..env import card
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


class Results:
    """What `run` and `compare` say (kind "results"), growing as rows finish: the rows in the order
    asked, the environment they ran in, the benchmark cases for the geometric mean, and `more`, the
    document's keys beside the rows (what the leaderboard's protocol ran and its geometric means).
    The printers (nvgg/output) read it; `text()` is the terminal's."""

    kind = "results"
    unit = "row"

    def __init__(self, command: str, device, benchmark_ids: set[str], *, rerun: bool = True):
        self.command, self.device, self.bench, self.rerun = command, device, benchmark_ids, rerun
        self.title = f"nvgg {command}"
        self.results: list[Result] = []
        self.more: dict = {}
        self._env: dict | None = None

    @property
    def env(self) -> dict:
        """The environment of the first row that recorded one, else this process's view."""
        found = next((r.env for r in self.results if r.env), None)
        if found:
            return found
        if self._env is None:
            from ..env import collect
            self._env = collect(self.device)
        return self._env

    def add(self, result: Result) -> None:
        self.results.append(result)

    def reorder(self, results: list[Result]) -> bool:
        """The rows in `results`' order (the rows as asked: spread over GPUs they finish in any);
        whether that moved one."""
        if [id(r) for r in results] == [id(r) for r in self.results] or len(results) != len(self.results):
            return False
        self.results = list(results)
        return True

    def count(self) -> int:
        return len(self.results)

    def document(self) -> dict:
        return results_document(self.results, self.env, self.bench, **self.more)

    def text(self) -> str:
        """`run`'s row with its statistics, or `compare`'s table and geometric means; then the
        leaderboard's prediction where it ran."""
        from ..env import card
        predicted = self.more.get("protocol")
        if self.command == "run":
            parts = [run_text(self.results, self.env, rerun=self.rerun)]
            if predicted:
                parts.append(protocol_text(self.results, predicted, self.more["protocol_geomean_us"]))
        else:
            parts = [f"card: {card(self.env)}\n{results_table(self.results, rerun=self.rerun)}"]
            means = geomean_table(self.results, self.bench)
            if means:
                parts.append("\n" + means)
            if predicted:
                parts.append("\n" + protocol_text(self.results, predicted, self.more["protocol_geomean_us"]))
        return "".join(part + "\n" for part in parts)

    def failing(self) -> list[Result]:
        """The rows that fail the command: wrong, an error, a suspect time, or (where the
        leaderboard's protocol ran) a prediction that failed on a row that passed."""
        predicted = "protocol" in self.more
        return [r for r in self.results if r.status in ("wrong", "error") or r.suspect
                or (predicted and r.status == "ok" and r.protocol.get("status") != "ok")]

    def outcomes(self) -> list[Outcome]:
        """A row an outcome, its case the group: an error where it did not finish, failed where it
        fails the command (`failing`) or the baseline's gate (a regression), skipped where it
        cannot run here, passed otherwise."""
        failing = {id(r) for r in self.failing()}
        out = []
        for r in self.results:
            reasons: list[tuple[str, str]] = []  # (kind, reason)
            if id(r) in failing:
                if r.status != "ok" or r.suspect:
                    reasons.append(("suspect" if r.status == "ok" else r.status, check_text(r)))
                else:
                    reasons.append(("protocol", f"the leaderboard's protocol: {r.protocol.get('message')}"))
            if r.gate is not None and r.gate.fails:
                reasons.append(("regression", f"vs baseline: {r.gate.text()}"))
            verdict = "error" if r.status == "error" else "failed" if reasons else "passed"
            detail = _row_lines(r)
            if r.status == "unsupported" and not reasons:  # (one the baseline ran is a regression)
                verdict, reasons, detail = "skipped", [("unsupported", check_text(r))], ""
            message = "; ".join(why.strip().splitlines()[0] if why.strip() else why for _, why in reasons)
            out.append(Outcome(f"case {r.case}", label(r), r.wall_s, verdict, reasons[0][0] if reasons else "",
                               message, detail))
        return out


def _row_lines(r) -> str:
    """What a row says, for a reader of its outcome: its time, its check (whole), its class
    against the baseline, its verdict, its prediction's failure."""
    timed = r.stats is not None and r.status == "ok"
    lines = [f"time: {fmt_us(r.time_us)} µs a call" + (f" (± {fmt_us(r.stats.rerun_us)} µs on a rerun)"
                                                       if r.stats.rerun_us is not None else "")] if timed else []
    lines.append(f"check: {check_text(r)}")
    if r.gate is not None:
        lines.append(f"vs baseline: {r.gate.text()}")
    if getattr(r, "verdict", None):
        lines.append(f"verdict: {r.verdict.phrase}")
    if r.protocol and r.protocol.get("status") not in (None, "ok"):
        lines.append(f"leaderboard prediction: {r.protocol.get('status')}: {r.protocol.get('message', '')}")
    return "\n".join(lines)
