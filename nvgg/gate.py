"""The regression gate: a row against its baseline, classified faster / slower / same / unsure
from both runs' own errors, and failed only on a slowdown beyond the allowed one that the noise
does not explain.

A row's noise band is the widest of:
- three standard errors of the difference of the two means (each run's error the wider of
  std/√runs and the spread of its 0.1-s blocks' means: timing.Stats),
- the spread of either run's repetitions (its std over its mean): a repetition of the batch is
  the unit the timer measures, and a mean that moved by less than one repetition's scatter has
  not moved,
- either run's rerun interval (timing.Stats.rerun_us over its mean): where that run said a rerun's
  mean would fall; a host-bound row's reaches its fastest and slowest block, since its reruns mix
  the host's levels in other shares,
- NOISE_FLOOR: what the same build moves between two processes on an idle card beyond both
  (the clocks' state at the start of a run), with a margin over the most that was seen (NOTES.md,
  A/B, rerun and gate; lab log).
Inside the band the row is "same", or "unsure" where the change and its statistical error
together reach past the allowed regression (the measurement cannot tell). Outside it the row is "faster" or "slower"; a slower
row fails the gate when its change is beyond the allowed regression, unless this run was
measured while the card throttled or at an SM clock more than CLOCK_DRIFT below the baseline's:
then it is "unsure", with the clocks as its reason. (The classes follow nvbench's compare script:
same within the noise, unsure where the noise is too large to call it.)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

NOISE_FLOOR = 0.04
CLOCK_DRIFT = 0.02
SIGMAS = 3.0


@dataclass(frozen=True)
class Compared:
    kind: str                 # faster | slower | same | unsure | failed
    change: float | None      # new mean / baseline mean - 1
    band: float | None        # the noise band, relative
    baseline_us: float | None
    reason: str
    fails: bool

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        if self.change is None:
            return f"{self.kind}: {self.reason}" if self.reason else self.kind
        out = f"{self.kind} {self.change:+.1%} (noise ±{self.band:.1%})"
        return out + (f": {self.reason}" if self.reason else "")


def _noise(stats: dict) -> tuple[float, float, float, float]:
    """(mean, relative standard error, relative spread, relative rerun half-width) of a Stats
    dict; the error the wider of the repetitions' and the blocks' (timing.Stats: a host-bound row's
    time wanders over tenths of a second, which consecutive repetitions do not show)."""
    mean = stats["mean_us"]
    return (mean, max(stats["err_us"], stats.get("block_err_us") or 0.0) / mean, stats["std_us"] / mean,
            (stats.get("rerun_us") or 0.0) / mean)


def _clock_reason(new_clocks: dict, old_clocks: dict) -> str:
    """What in the clocks explains a slowdown: this run throttled, or ran at a lower SM clock
    than the baseline (a throttled baseline explains none: it makes the baseline slower)."""
    if new_clocks and new_clocks.get("throttled"):
        return f"this run was measured {new_clocks['throttled']}"
    new_sm, old_sm = (new_clocks or {}).get("sm_mhz"), (old_clocks or {}).get("sm_mhz")
    if new_sm and old_sm and old_sm[1] and new_sm[1] / old_sm[1] < 1 - CLOCK_DRIFT:
        return f"SM clock {new_sm[1]:g} MHz here vs {old_sm[1]:g} MHz in the baseline (median while timed)"
    return ""


def compare(new: dict, old: dict, max_regression_pct: float) -> Compared:
    """A row (Result.to_dict()) against its baseline row, `max_regression_pct` the allowed slowdown."""
    allowed = max_regression_pct / 100
    if old.get("status") == "ok" and new.get("status") != "ok":
        return Compared("failed", None, None, old.get("time_us"),
                        f"was ok, now {new.get('status')}" + (f" ({new['message']})" if new.get("message") else ""), True)
    if not (new.get("stats") and old.get("stats") and new.get("status") == "ok" and old.get("status") == "ok"):
        return Compared("unsure", None, None, old.get("time_us"), "not timed in both runs", False)
    m1, err1, spread1, rerun1 = _noise(new["stats"])
    m0, err0, spread0, rerun0 = _noise(old["stats"])
    change = m1 / m0 - 1
    stat = SIGMAS * math.hypot(err0, err1)
    band = max(stat, spread0, spread1, rerun0, rerun1, NOISE_FLOOR)
    if abs(change) <= band:
        if abs(change) + stat > allowed:
            return Compared("unsure", change, band, m0, f"the noise is wider than the allowed {max_regression_pct:g}%", False)
        return Compared("same", change, band, m0, "", False)
    if change < 0:
        return Compared("faster", change, band, m0, "", False)
    clocks = _clock_reason(new.get("clocks") or {}, old.get("clocks") or {})
    if clocks:
        return Compared("unsure", change, band, m0, f"slower, and {clocks}", False)
    if change > allowed:
        return Compared("slower", change, band, m0, f"beyond the allowed {max_regression_pct:g}%", True)
    return Compared("slower", change, band, m0, f"within the allowed {max_regression_pct:g}%", False)
