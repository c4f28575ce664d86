"""What a run produces and keeps: the row asked for (`Row`), its outcome (`Result`), the flags on a
time not to take at its word, and the versioned JSON file every command writes.

Data only: reading and writing itself, nothing about how a row is measured or scheduled.

The file (`document`, `read_results`): every JSON nvgg writes is an object with `"format": FORMAT`
and a `"kind"` (results, profile, cases, sol, compile, trace), described by the JSON Schema shipped
in the package (`SCHEMA`, nvgg/schema/nvgg.schema.json). A file is read back (as a baseline, by
`report`) through `migrate`: an older format is brought up to this one, a newer one or another
kind is refused in one line that says what it is.
- format 0: the files written before the format was recorded (no "format" key), run and compare
  results only: {env, results, geomean_us}. Rows of the persistent cute kernel written before the
  tensor-map mode was recorded (no "tensormaps" key) ran the only mode that kernel then had, device.
- format 1: format 0's rows unchanged, with "format" and "kind" beside them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

from . import timing
from .cases import Case
from .errors import NvggError, read_text
from .gate import Compared
from .sol import Sol
from .verdict import Verdict

FORMAT = 1
KINDS = ("results", "profile", "cases", "sol", "compile", "trace", "ab", "tune", "config")
SCHEMA = resources.files("nvgg") / "schema" / "nvgg.schema.json"
STATUSES = ("ok", "wrong", "error", "unsupported")

# a flag's kind -> what it means for the run: suspect (the time is not the work's: the command
# fails) or caution (the time is the work's, under conditions the next run may not share)
FLAG_KINDS = {"below-sol": "suspect", "escaped": "suspect", "throttled": "caution", "first-call": "caution"}


@dataclass(frozen=True)
class Flag:
    """Why a measured time is not one to take at its word; `kind` one of FLAG_KINDS."""

    kind: str
    text: str

    @property
    def suspect(self) -> bool:
        return FLAG_KINDS.get(self.kind) == "suspect"


class Cupti(TypedDict, total=False):
    """CUPTI's records of each call of a batch, averaged (cupti.py `per_call`)."""

    calls: int
    activities: float        # launches a call
    kernel_us: float         # the union of a call's activities
    sum_us: float
    span_us: float
    gaps_us: float           # idle inside a call's span
    event_us: float          # the call's untraced event time
    host_overhead_us: float  # event_us - kernel_us
    gaps_shown: bool
    gaps_note: str
    kernels: list[dict]      # {name, per_call, mean_us}


class Clocks(TypedDict, total=False):
    """The card's clocks while a row was timed (clocks.py `summarise`)."""

    samples: int
    seconds: float
    sm_mhz: list[float]      # min, median, max
    mem_mhz: list[float]     # min, max
    temp_c_max: float
    power_w_max: float
    reasons: list[str]
    throttled_share: float
    throttled: str           # a sentence, "" when the card ran as set
    error: str


Env = dict[str, Any]          # env.collect: versions, the GPU, its driver and clocks
KernelRecord = dict[str, Any]  # backends.base.KernelInfo.to_dict: resources, paths, the build's own fields


@dataclass
class Result:
    case: str
    strategy: str
    backend: str
    status: str                    # one of STATUSES
    message: str = ""
    tensormaps: str = ""           # the persistent cute kernel's tensor maps: device or host ("" otherwise)
    source: str = ""               # a submission's name: its file's, or the shortest end of its path that tells it apart
    revision: str = ""             # the git commit a submission was taken from (PATH@REV), "" for the working copy
    point: dict = field(default_factory=dict)  # the knobs' values the row ran with (a sweep's point: nvgg tune)
    l2_clear: str = ""             # how L2 was cleared before each timed repetition (timing.L2_CLEARS), "" on a CPU
    checked_inputs: int = 0
    stats: timing.Stats | None = None
    sol: Sol | None = None
    sol_b200: Sol | None = None
    setup_us: dict[str, float] = field(default_factory=dict)  # host-side phases by name
    cupti: Cupti = field(default_factory=dict)
    kernels: list[KernelRecord] = field(default_factory=list)
    inputs: str = ""
    env: Env = field(default_factory=dict)
    # the launches' output tiles (one entry a launch), the GPU's SMs and the kernel's resident CTAs
    # an SM: the evidence of the wave verdict (empty where the backend cannot say)
    tiles: list[int] = field(default_factory=list)
    sms: int = 0
    ctas_per_sm: int = 0
    verdict: Verdict | None = None
    flags: list[Flag] = field(default_factory=list)
    clocks: Clocks = field(default_factory=dict)
    energy: dict = field(default_factory=dict)  # clocks.energy_a_call: mJ a call, or why none ({} without NVML)
    gate: Compared | None = None   # against the baseline's row, where a baseline was given
    wall_s: float = 0.0            # the row's wall time, setup to result
    # --protocol: the case as the evaluator's protocol times it, beside this steady state (leaderboard.py)
    protocol: dict = field(default_factory=dict)
    # a submission's first calls on new tensors against calls on tensors it has seen (datapath.check)
    first_sight: dict = field(default_factory=dict)

    @property
    def correct(self) -> bool | None:
        return {"ok": True, "wrong": False}.get(self.status)

    @property
    def suspect(self) -> bool:
        """A time that cannot be right (below the speed of light, work escaping the events): the
        row is shown flagged and the command fails."""
        return any(f.suspect for f in self.flags)

    @property
    def trusted(self) -> bool:
        """Correct, timed, and nothing flagged: a time to rank by and gate on."""
        return self.status == "ok" and self.stats is not None and not self.flags

    @property
    def time_us(self) -> float | None:
        return self.stats.mean_us if self.stats else None

    @property
    def gap(self) -> float | None:
        if self.stats is None or self.sol is None or self.stats.clock != "cuda events":
            return None
        from .sol import gap
        return gap(self.stats.mean_us, self.sol)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["verdict"] = out["verdict"] or {}
        out["gate"] = out["gate"] or {}
        out.update(correct=self.correct, time_us=self.time_us, gap_to_sol=self.gap, suspect=self.suspect,
                   trusted=self.trusted)
        return out

    @classmethod
    def from_dict(cls, raw: dict) -> "Result":
        """A row as `to_dict` wrote it (at this FORMAT); TypeError or ValueError where it is not one."""
        kwargs = {k: v for k, v in raw.items() if k in {f.name for f in fields(cls)}}
        if kwargs.get("stats"):
            kwargs["stats"] = timing.Stats(**kwargs["stats"])
        for key in ("sol", "sol_b200"):
            if kwargs.get(key):
                kwargs[key] = Sol(**kwargs[key])
        kwargs["flags"] = [Flag(f["kind"], f.get("text", "")) for f in kwargs.get("flags") or []]
        kwargs["verdict"] = Verdict(**kwargs["verdict"]) if kwargs.get("verdict") else None
        kwargs["gate"] = Compared(**kwargs["gate"]) if kwargs.get("gate") else None
        return cls(**kwargs)


def point_name(point: tuple) -> str:
    """A point ((knob, value), ...) as tables and progress name it: "work=1 split=2"."""
    return " ".join(f"{k}={v}" for k, v in point) or "(no knobs)"


@dataclass(frozen=True)
class Row:
    """One row of a run: a case under a strategy and backend (or a user's submission), as the
    parent hands it to a worker (rows.py)."""

    case: Case
    strategy: str | None = None
    backend: str | None = None
    tensormaps: str | None = None
    submission: str | None = None   # a submission.py's path: it brings its own launch scheme
    profile: str | None = None
    timer: str = "leaderboard"
    batch: int | None = None
    device: str | None = None
    source: str = ""                # a submission's name in tables (versions.names): its file's where empty
    l2: str = "nvgg"                # how the timer clears L2 before each repetition (timing.L2_CLEARS)
    revision: str = ""              # the commit a submission's file was taken from (PATH@REV)
    point: tuple = ()               # ((knob, value), ...): what a submission's CONFIG holds for this row
    energy: bool = True             # measure the energy a call beside the timing (a sweep's points skip it)
    span: bool = True               # time for timing.MIN_SPAN_S at least, the blocks of `± rerun` (a sweep's
                                    # first pass takes the timer's own stop: its finalists are timed again in rounds)

    @property
    def label(self) -> str:
        """A submission's name as its rows carry it."""
        return self.source or Path(self.submission or "").name

    @property
    def name(self) -> str:
        """The row as tables name it: case and strategy/backend (or the submission's name)."""
        if self.submission:
            return f"{self.case.id} submission[{self.label}]"
        mode = f"[{self.tensormaps}]" if self.tensormaps else ""
        return f"{self.case.id} {self.strategy or 'default'}{mode}/{self.backend or 'default'}"

    @property
    def key(self) -> str:
        """The worker a row runs in: one a backend, one a submission file."""
        return f"submission:{self.submission}" if self.submission else f"backend:{self.backend or ''}"

    def failed(self, status: str, message: str) -> Result:
        if self.submission:
            return Result(case=self.case.id, strategy="submission", backend="submission", status=status,
                          message=message, source=self.label, revision=self.revision, point=dict(self.point))
        return Result(case=self.case.id, strategy=self.strategy or "", backend=self.backend or "", status=status,
                      message=message, tensormaps=self.tensormaps or "", point=dict(self.point))


# ---------------------------------------------------------------- the file

def document(kind: str, **body) -> dict:
    """A JSON document of `kind` at this FORMAT, `body` its other keys."""
    assert kind in KINDS, kind
    return {"format": FORMAT, "kind": kind, **body}


def migrate(raw, path, what: str) -> dict:
    """A parsed file brought to this FORMAT; NvggError naming `what` and `path` where it is no
    nvgg file, or of a format this nvgg cannot read."""
    if isinstance(raw, dict) and "format" not in raw and isinstance(raw.get("results"), list):
        raw = _from_format_0(raw)
    fmt = raw.get("format") if isinstance(raw, dict) else None
    if not isinstance(fmt, int) or isinstance(fmt, bool):
        raise NvggError(f"{what} {path} is not an nvgg file (JSON with a format and results): pass a JSON file "
                        "nvgg wrote")
    if fmt > FORMAT:
        raise NvggError(f"{what} {path} is nvgg file format {fmt}, written by a newer nvgg; this one reads formats "
                        f"0 to {FORMAT}: upgrade nvgg to read it")
    if fmt < 0 or raw.get("kind") not in KINDS:
        raise NvggError(f"{what} {path} is not an nvgg file (format {fmt}, kind {raw.get('kind')!r}): pass a JSON "
                        "file nvgg wrote")
    return raw


def _from_format_0(raw: dict) -> dict:
    rows = []
    for row in raw["results"]:
        row = dict(row) if isinstance(row, dict) else row
        if isinstance(row, dict) and "tensormaps" not in row:
            row["tensormaps"] = "device" if (row.get("strategy"), row.get("backend")) == ("persistent", "cute") else ""
        rows.append(row)
    kind = "profile" if "cases" in raw else "results"
    return dict(raw, results=rows, format=FORMAT, kind=kind)


def read_document(path: str | Path, what: str, fix: str) -> dict:
    """A file nvgg wrote, parsed and brought to this FORMAT (`migrate`); one NvggError naming `what`
    and ending in `fix` where it cannot be read or is no JSON."""
    text = read_text(path, what, fix)
    try:
        raw = json.loads(text)
    except ValueError:
        raise NvggError(f"{what} {path} is not JSON: {fix}") from None
    return migrate(raw, path, what)


def read_results(path: str | Path, what: str = "result file") -> list[dict]:
    """The result rows of a run, compare or profile file (any format this nvgg reads), each checked
    to be a row; anything else is one NvggError naming `what`."""
    doc = read_document(path, what, "pass a JSON file of results nvgg wrote")
    if doc["kind"] not in ("results", "profile"):
        raise NvggError(f"{what} {path} is an nvgg {doc['kind']} file, not results: pass the JSON of a run, "
                        "compare or profile")
    rows = doc.get("results")
    if not isinstance(rows, list) or not all(_result_row(r) for r in rows):
        raise NvggError(f"{what} {path} has rows nvgg cannot read back: write it again with this nvgg")
    if not rows:
        raise NvggError(f"{what} {path} holds no rows: pass a file of a run that measured something")
    return rows


def _result_row(r) -> bool:
    """A result row as nvgg writes it: a case, a status, stats with numbers or none, and where
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


def load(path: str | Path, what: str = "result file") -> list[Result]:
    """A result file's rows as Results."""
    try:
        return [Result.from_dict(r) for r in read_results(path, what)]
    except (TypeError, ValueError, KeyError, AttributeError):
        raise NvggError(f"{what} {path} has rows nvgg cannot read back: write it again with this nvgg") from None


def row_key(row) -> tuple[str, str, str, str]:
    """What a row is across runs: case, strategy, backend and its variant (the tensor-map mode,
    or the submission's name); a Result or its JSON dict."""
    get = (lambda k: row.get(k) or "") if isinstance(row, dict) else (lambda k: getattr(row, k, "") or "")
    return get("case"), get("strategy"), get("backend"), get("tensormaps") or get("source")
