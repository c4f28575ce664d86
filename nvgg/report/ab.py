"""`nvgg ab`'s report (kind "ab"): per case each version's rounds, median time and ratio to the base
with its interval, class and the rule that classed it; the geometric mean over the cases; its JSON
document; and `AB`, the report that grows as cases finish and that every printer reads."""

from __future__ import annotations

import math

from . import Outcome, check_text, fmt_us, tabulate
from .results import predicted_ratios, protocol_text


def ratio_text(r) -> str:
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
    (`means`, nvgg/ab.py geomeans) with its rule; why each case stopped."""
    from ..env import card
    rows, notes = [], []
    for ab in done:
        ratios = ab.ratios()
        for v, name in enumerate(ab.versions):
            times = sorted(ab.times(v))
            median = fmt_us(times[len(times) // 2]) if times else "—"
            r = ratios[v]
            cls = "base" if v == 0 else (r.classify(floor) if r else "—")
            rows.append([ab.case, name, str(len(ab.results[v])), median, "1 (base)" if v == 0 else ratio_text(r), cls,
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
        lines.append(tabulate([[name, ratio_text(g), g.classify(floor) if g else "—"] for name, g in means.items()],
                              headers=["version", "geomean vs base (95%)", "class"]))
        lines.append(f"geomean: {GEOMEAN_RULE} (±{floor:.1%})")
    return "\n".join(lines + notes)


def ratio_dict(r, floor: float) -> dict | None:
    """A ratio in a result file: the estimate, its interval and the level it was drawn at, the rounds, the class."""
    return None if r is None else {"ratio": r.ratio, "lo": r.lo, "hi": r.hi, "rounds": r.n, "level": r.level,
                                   "class": r.classify(floor)}


def ab_document(done, means: dict, floor: float, env: dict) -> dict:
    """`nvgg ab --json`: every round's result, the ratios and classes with the rule that made them,
    the geometric means with theirs."""
    from ..result import document

    cases = []
    for ab in done:
        ratios = ab.ratios()
        versions = [{"name": name, "vs_base": ratio_dict(ratios[v], floor), "times_us": ab.times(v),
                     "first": ab.first[v].to_dict() if v < len(ab.first) and ab.first[v] is not None else None,
                     "rounds": [r.to_dict() for r in ab.results[v]]} for v, name in enumerate(ab.versions)]
        cases.append({"case": ab.case, "stopped": ab.stopped, "floor": floor, "host_bound": ab.host_bound,
                      "rule": ab.rule(floor),
                      "host_load": None if ab.load is None else {"load": ab.load, "cores": ab.cores,
                                                                 "oversubscribed": ab.oversubscribed},
                      "versions": versions})
    return document("ab", env=env, floor=floor, cases=cases, geomean_rule=GEOMEAN_RULE,
                    geomean={k: ratio_dict(g, floor) for k, g in means.items()})


class AB:
    """What `ab` says (kind "ab"), growing as cases finish: each case's rounds (ab.CaseAB), the
    floor its ratios are classed against (a fraction), and `predicted`, the leaderboard's
    prediction of each version where it ran (its Results and the document's keys)."""

    kind = "ab"
    unit = "case"
    title = "nvgg ab"

    def __init__(self, floor: float, means):
        self.floor = floor
        self._means = means  # the cases' geometric means a version (nvgg/ab.py geomeans: the statistics live there)
        self.done: list = []
        self.predicted: tuple[list, dict] | None = None

    @property
    def env(self) -> dict:
        return next((r.env for ab in self.done for r in ab.every() if r.env), {})

    def means(self) -> dict:
        return self._means(self.done)

    def count(self) -> int:
        return len(self.done)

    def document(self) -> dict:
        doc = ab_document(self.done, self.means(), self.floor, self.env)
        if self.predicted:
            results, more = self.predicted
            doc.update(more, protocol_rows=[dict(r.protocol, case=r.case, version=r.source) for r in results])
        return doc

    def text(self) -> str:
        lines = [ab_table(self.done, self.means(), self.floor, self.env)]
        if self.predicted:
            results, more = self.predicted
            lines.append("\n" + "\n".join(filter(None, (
                protocol_text(results, more["protocol"], more["protocol_geomean_us"]),
                predicted_ratios(results, more["protocol_geomean_us"])))))
        return "".join(line + "\n" for line in lines)

    def outcomes(self) -> list[Outcome]:
        """A case's version an outcome, the case the group: the version whose result ended the
        case (ab.CaseAB.failed) failed, or an error where it did not finish; a version the rounds
        class slower than the base, beyond the floor, failed as a regression; the rest passed,
        the base among them."""
        out = []
        for ab in self.done:
            bad, ratios = ab.failed(), ab.ratios()
            for v, name in enumerate(ab.versions):
                mine = [r for r in ([ab.first[v]] if v < len(ab.first) else []) + ab.results[v] if r is not None]
                r = ratios[v]
                cls = r.classify(self.floor) if r is not None else "—"
                against = "the base" if v == 0 else f"{ratio_text(r)} the base's time: {cls}"
                detail = (f"{len(ab.results[v])} rounds; {against}; floor ±{self.floor:.1%}; the case stopped: "
                          f"{ab.stopped}")
                seconds = sum(x.wall_s for x in mine)
                if bad is not None and any(bad is x for x in mine):
                    why = check_text(bad)
                    out.append(Outcome(f"case {ab.case}", name, seconds, "error" if bad.status == "error" else "failed",
                                       "suspect" if bad.status == "ok" else bad.status,
                                       why.strip().splitlines()[0] if why.strip() else why, f"{why}\n{detail}"))
                elif v and cls == "slower":
                    out.append(Outcome(f"case {ab.case}", name, seconds, "failed", "regression",
                                       f"slower: {ratio_text(r)} the base's time, beyond ±{self.floor:.1%}", detail))
                else:
                    out.append(Outcome(f"case {ab.case}", name, seconds, detail=detail))
        return out
