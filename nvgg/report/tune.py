"""`nvgg tune`'s report (kind "tune"): a table a case of every point's first-pass time and the
finalists' standing against the winner, a line a case with its answer; the sweep's JSON document;
the winners as a config map; and `Tune`, the report that grows as points finish."""

from __future__ import annotations

from ..result import point_name
from . import fmt_us, status_text, tabulate
from .ab import ratio_dict, ratio_text


def tune_table(done, space: dict, floor: float, env: dict) -> str:
    """`nvgg tune`'s output: a table a case (a column a knob; the first pass's time and its ±, then
    the finalists' standing against the winner from the rounds), and a line a case with the
    winner, the points not told apart from it, where the default stands and the gain over it."""
    from ..env import card
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
            text += f", {ratio_text(gain)} the winner's time ({gain.classify(floor)})"
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
    from ..result import document

    cases = []
    for ct in done:
        finals = []
        for v, p in enumerate(ct.final_points):
            finals.append({"point": dict(p), "rounds": [r.to_dict() for r in ct.final.results[v]],
                           "vs_winner": ratio_dict(ct.against_winner(p), floor)})
        cases.append({"case": ct.case, "stopped": ct.stopped, "default": dict(ct.default),
                      "winner": dict(ct.winner) if ct.winner is not None else None,
                      "not_apart": [dict(p) for p in ct.not_apart], "near": [dict(p) for p in near_points(ct, floor)],
                      "out": [{"point": dict(p), "reason": why,
                               **({"result": ct.out_results[p].to_dict()} if p in ct.out_results else {})}
                              for p, why in ct.out.items()],
                      **({"rule": ct.final.rule(floor)} if ct.final is not None else {}),
                      "gain": ratio_dict(ct.gain(), floor),
                      "points": [ct.first[p].to_dict() for p in _in_space_order(ct)], "finalists": finals,
                      "refused": [{"point": dict(p), "reason": why} for p, why in ct.refused.items()]})
    return document("tune", target=target.name, revision=target.revision, arch=target.arch, space=space, floor=floor,
                    env=env, cases=cases)


def config_map(done, target, space: dict) -> dict:
    """The winners as a config map: case -> point, for `run`, `compare` and `ab`; `arch` set for
    our kernel's points (they are that arch's builds), "" for a submission's."""
    from ..result import document
    return document("config", target=target.name, arch=target.arch, space=space,
                    cases={ct.case: dict(ct.winner) for ct in done if ct.winner is not None})


class Tune:
    """What `tune` says (kind "tune"), growing as points finish: each case's sweep so far
    (tune.CaseTune, in the order asked), the space, the target, the floor (a fraction), and the
    environment (set once the sweep is done: {} while it runs)."""

    kind = "tune"
    unit = "point"
    title = "nvgg tune"

    def __init__(self, target, floor: float):
        self.target, self.floor = target, floor
        self.space: dict = {}
        self.done: list = []
        self.env: dict = {}

    def count(self) -> int:
        return sum(len(ct.first) for ct in self.done)

    def document(self) -> dict:
        return tune_document(self.done, self.target, self.space, self.floor, self.env)

    def text(self) -> str:
        return tune_table(self.done, self.space, self.floor, self.env) + "\n"
