"""When a measured time is not the work's: the flags a row gets after it is timed (result.Flag,
kinds and what they mean in result.FLAG_KINDS)."""

from __future__ import annotations

from .result import Flag, Result

# work still running after the end event, per batch, beyond which the events missed it (both must
# hold): an honest batch's device synchronise right after the completed end event stays under one
# or the other, our kernel left on a side stream goes past both (lab log).
ESCAPE_FLOOR_US = 30.0
ESCAPE_SHARE = 0.10
# a submission's first call on new tensors "costs far more than the rest" where it takes
# FIRST_RATIO times a call on tensors it has seen and FIRST_FLOOR_US more: the evaluator's first
# timed repetition runs on tensors its check never saw (it checked clones) and charges that cost to
# a mean of at most FIRST_RUNS repetitions
FIRST_RATIO = 2.0
FIRST_FLOOR_US = 20.0
FIRST_RUNS = 100


def flags_of(result: Result) -> list[Flag]:
    """What makes a measured time one not to take at its word; the cause first (work escaping the
    events explains a time below the speed of light)."""
    out = []
    st, floor = result.stats, result.sol
    if st is None:
        return out
    if st.escaped_us is not None:
        per_batch = st.escaped_us * st.batch
        if per_batch > max(ESCAPE_FLOOR_US, ESCAPE_SHARE * st.mean_us * st.batch):
            out.append(Flag("escaped", f"work escapes the events: the device ran {per_batch:.1f} µs a batch "
                                       f"after the end event ({st.escaped_us:.2f} µs a call; another stream?)"))
    if floor is not None and st.clock == "cuda events" and st.mean_us < floor.sol_us:
        out.append(Flag("below-sol", f"time below the speed of light: {st.mean_us:.3f} µs < {floor.sol_us:.3f} µs "
                                     f"on {floor.profile} (the calls cannot have done the work)"))
    throttled = (result.clocks or {}).get("throttled")
    if throttled:
        out.append(Flag("throttled", throttled))
    first = first_call_flag(result.first_sight)
    if first is not None:
        out.append(first)
    return out


def first_call_flag(sight: dict) -> Flag | None:
    """The leaderboard will charge a first call on new tensors (datapath.check's `first_sight`):
    where it costs far more than a call on tensors seen before, what it adds to the evaluator's
    mean (the extra cost of each of a repetition's calls, spread over FIRST_RUNS repetitions at
    most: more where the evaluator stops sooner)."""
    first, seen = (sight or {}).get("first_us"), (sight or {}).get("seen_us")
    if first is None or seen is None or first < FIRST_RATIO * seen or first - seen < FIRST_FLOOR_US:
        return None
    extra = first - seen
    return Flag("first-call", f"a first call on new tensors took {first:.0f} µs against {seen:.0f} µs on tensors seen "
                              f"before: the leaderboard times its first repetition on tensors its check never saw "
                              f"and adds at least {extra / FIRST_RUNS:.1f} µs to its mean (the evaluator's protocol predicts it)")
