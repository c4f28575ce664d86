"""What the commands share: their options (typer `Annotated` types), the checks every option gets
before any work, progress on stderr, and the JSON they print or write. A command parses, checks its
options here, calls one library function and renders."""

from __future__ import annotations

import contextlib
import errno
import functools
import math
import os
import sys
import time
from enum import Enum
from pathlib import Path
from dataclasses import dataclass
from typing import Annotated, List, Optional, Sequence

import typer
from typer.core import TyperCommand

from .. import cases as casesmod
from ..errors import NvggError, no_gpu

# "starting": what the command's start (torch's import, `_start`) runs within; nvgg's own process
# (__main__.py) sets its Ctrl-C handling there
STATE = {"verbose": False, "starting": contextlib.nullcontext}


def command(fn):
    """A command whose NvggError becomes one line on stderr and exit code error.code (the
    traceback with --verbose); an option given as an empty string, or an NVGG_TIMELINE that cannot
    be written, is refused first, whichever the command."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            _refuse_empty(kwargs)
            from ..procs import check_timeline
            check_timeline()
            _start()
            return fn(*args, **kwargs)
        except NvggError as exc:
            if STATE["verbose"]:
                raise
            typer.secho(f"nvgg: {exc}", err=True, fg=typer.colors.RED)
            raise typer.Exit(exc.code) from None
        except KeyboardInterrupt:
            # the workers are gone with their pool; the result files (output.Live) hold every finished row
            typer.secho("nvgg: interrupted: the rows that finished are in the --json/--markdown/--junit files, if "
                        "given", err=True, fg=typer.colors.RED)
            raise typer.Exit(130) from None
    return wrapper

def _start() -> None:
    """torch imported before the command's own code, which imports the library below it (torch
    with it: commands/__init__.py), within STATE["starting"]: in nvgg's own process a Ctrl-C there
    ends nvgg in one line, as it does while nvgg starts (torch drops an interrupt that lands while
    it imports numpy, and the command would run on); an interrupt raised there is that line too."""
    try:
        with STATE["starting"]():
            import torch  # noqa: F401
    except KeyboardInterrupt:
        typer.echo("nvgg: interrupted", err=True)
        raise typer.Exit(130) from None
    from ..timing import cpu_budget_s
    cpu_budget_s()  # a bad NVGG_CPU_BUDGET_S is refused here, before any row starts


def within(low: float, high: float | None = None):
    """A number option's range, checked as the parser checks its type: a value outside it (or not
    finite) is the parser's one line, exit 2. The help says the range in words; typer's own
    `min`/`max` would add "[x>=1.0]" to it."""
    def check(value):
        if value is not None and (not math.isfinite(value) or value < low or (high is not None and value > high)):
            raise typer.BadParameter(f"{value:g}: give a number " + (f"from {low:g} to {high:g}" if high is not None
                                                                      else f"of {low:g} or more"))
        return value
    return check


class Command(TyperCommand):
    """A command whose help names its arguments as its usage line does, by their metavar (FILE,
    [WHAT]), without typer's type in angle brackets or braces around a required one."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                pieces.append(_argument_name(param) if param.required else f"[{_argument_name(param)}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx, formatter) -> None:
        params = [p for p in self.get_params(ctx) if not getattr(p, "hidden", False)]
        arguments = [(_argument_name(p), p.help or "") for p in params if p.param_type_name == "argument"]
        options = [r for p in params if p.param_type_name == "option" for r in [p.get_help_record(ctx)] if r]
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _argument_name(param) -> str:
    return param.metavar or param.name.upper()


CaseIds = Annotated[Optional[str], typer.Option("--case", metavar="IDS", help="all, benchmarks, tests, or ids like 1,3 (default: benchmarks).")]
CasesFile = Annotated[Optional[str], typer.Option("--cases", metavar="FILE", help="A YAML file of extra cases (cases: {id: {m, n, k, g, seed}}).")]
Shape = Annotated[Optional[str], typer.Option("--shape", metavar="SPEC", help='An inline case: "m: [64, 128]; n: [256, 256]; k: [512, 512]; g: 2; seed: 7".')]
Profile = Annotated[Optional[str], typer.Option("--profile", metavar="NAME", help="GPU profile for the SOL (b200, h100, h200); default: the running GPU's.")]
RowTimeout = Annotated[Optional[float], typer.Option("--timeout", metavar="SECONDS", callback=within(1.0), help="Seconds a row may take (1 or more; each runs in a worker process of its backend or submission; "
                               "default 300) before its worker is killed and the row reported as timed out.")]
JsonOut = Annotated[Optional[str], typer.Option("--json", metavar="FILE",
                                                 help="Write the results as JSON to FILE (- for stdout, in place of the table).")]
JunitOut = Annotated[Optional[str], typer.Option("--junit", metavar="FILE", help="Also write the verdicts as JUnit XML to FILE, the test results CI systems show (- for stdout): a test case a case and row, failed by a regression, a wrong or suspect result.")]
OutputOpt = Annotated[Optional[List[str]], typer.Option("--output", metavar="FORMAT=FILE", help="Also write the results in FORMAT to FILE (- for stdout; repeat for several): json, markdown, junit, table, or any format nvgg has.")]


class TensorMapMode(str, Enum):
    device = "device"
    host = "host"


TensorMaps = Annotated[Optional[TensorMapMode], typer.Option("--tensormaps", metavar="MODE", case_sensitive=False,
    help="The persistent cute kernel's tensor maps: device (rewritten in the kernel on each group change) or "
         "host (every group's encoded on the host at prepare time). Both archs have both; default host.")]


def mode_value(mode: TensorMapMode | None) -> str | None:
    return mode.value if mode is not None else None


def tensormaps_option(flag_value: str | None) -> list[str] | None:
    """--tensormaps as compare takes it: device, host, or several (device,host or all)."""
    from ..selection import TENSORMAP_MODES
    return names(flag_value, TENSORMAP_MODES, "tensor-map mode") if flag_value else None


def _refuse_empty(values: dict) -> None:
    """An option or argument given as "" (or blanks): never what was meant (`--shape ""`, a shell
    variable that was not set), so it is refused rather than read as not given."""
    try:
        from typer._click.globals import get_current_context
    except ImportError:  # typer that depends on click instead of carrying it
        from click import get_current_context
    ctx = get_current_context(silent=True)
    names = {p.name: p.opts[0] if p.param_type_name == "option" else f"the {p.name} argument"
             for p in ctx.command.params} if ctx else {}
    for name, value in values.items():
        items = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(v, str) and not v.strip() for v in items):
            raise NvggError(f"{names.get(name, name)} is empty: give it a value or leave it out")


def check_writable(flag: str, path: str | None, *, stdout_ok: bool = False) -> None:
    """An output path is checked before any work (outputs.ready: through links, a descriptor
    open for writing, a FIFO with a reader, a folder that takes a new file, space on its disk), so
    a long run never ends on a file it cannot write; "-" (stdout) only where the flag takes it."""
    if path is None or (path == "-" and stdout_ok):
        return
    if path == "-":
        raise NvggError(f"{flag} writes a file: pass a file name (- for stdout is for --json, --markdown, --junit and "
                        "--output)")
    if not path.strip():
        raise NvggError(f"{flag} is empty: pass a file name")
    from ..output import files
    try:
        files.ready(path)
    except IsADirectoryError:
        raise NvggError(f"{flag} {path} is a folder: pass a file name") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise NvggError(f"{flag} {path} is a FIFO no process reads: start its reader first (cat {path} &), or "
                            "pass a file") from None
        raise NvggError(f"{flag} {path} cannot be written ({files.reason(exc)}): pass a path in a writable "
                        "folder") from None


def write_file(flag: str, path: str, payload: dict | bytes) -> None:
    """An output written through what its path is (output.files.write_bytes; a dict as JSON); a
    write that fails after the work (a full disk, a reader gone) is one line, not a traceback."""
    from ..output import files
    try:
        if isinstance(payload, bytes):
            files.write_bytes(path, payload)
        else:
            files.write_json(path, payload)
    except OSError as exc:
        raise NvggError(f"{flag} {path} could not be written ({files.reason(exc)}): free space there or pass "
                        "another file") from None


def check_folder(flag: str, path: str) -> None:
    """An output folder (made if missing) checked writable before any work."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise NvggError(f"{flag} {path} is a file: pass a folder")
    try:
        check_writable(flag, str(target / ".nvgg-probe"))
    except NvggError:
        raise NvggError(f"{flag} {path} cannot be written: pass a folder you can write to") from None


def check_submission(path: str) -> str:
    """A submission's path, refused up front where it is no Python file."""
    target = Path(path)
    if not target.is_file():
        what = ("is a folder" if target.is_dir() else "is not a regular file" if target.exists() else "does not exist")
        raise NvggError(f"submission {path} {what}: pass the path of your submission.py")
    if target.suffix != ".py":
        raise NvggError(f"submission {path} is not a Python file (.py): pass the path of your submission.py")
    return str(target.resolve())


def submissions(specs: list[str] | None):
    """The --submission values (PATH or PATH@REV, any number) checked and named, revisions checked
    out: a context manager whose `items` are versions.Version (none for no value)."""
    from .. import procs
    from ..versions import Versions
    if len(specs or []) > 1 and not procs.isolated():
        raise NvggError("NVGG_ISOLATION=off runs every row in nvgg's own process, where two submissions' own imports "
                        "would mix: pass one --submission, or unset NVGG_ISOLATION")
    return Versions(list(specs or []), check_submission)


GpusOpt = Annotated[Optional[str], typer.Option("--gpus", metavar="LIST", help="Spread the rows over GPUs of one model: all, or indices like 0,1 (a worker on each; each row records the GPU that measured it).")]


def pick_gpus(spec: str | None) -> list[int] | None:
    """--gpus checked before any work (`parse_gpus`): the workers' GPUs (procs.Pool's `gpu`), None
    without it."""
    return None if spec is None else [g.index for g in parse_gpus(spec)]


def parse_gpus(spec: str, seen: list | None = None) -> list:
    """`--gpus`'s value: "all" or distinct indices ("0,1"), each a visible GPU (gpus.visible, or
    `seen`), all one model; refused in one line: a malformed list or a GPU named twice (on any
    machine), no GPU (its own exit code), an index not there, GPUs of different models (their
    times could not stand side by side; a sweep's winner would be the card's, not the point's)."""
    from .. import gpus
    text = spec.strip().lower()
    parts = [p.strip() for p in text.split(",")]
    if text != "all" and (not text or not all(p.isdigit() for p in parts)):  # the value's form, on any machine
        raise NvggError(f"--gpus {spec!r}: pass all, or GPU indices separated by commas (like 0,1)")
    numbers = [] if text == "all" else [int(p) for p in parts]
    twice = sorted({n for n in numbers if numbers.count(n) > 1})
    if twice:
        raise NvggError(f"--gpus {spec}: GPU {', '.join(map(str, twice))} named twice: name each GPU once")
    seen = gpus.visible() if seen is None else seen
    if not seen:
        raise no_gpu(f"--gpus {spec}: no GPU is visible here (no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides them "
                     "all): run on a GPU machine, or drop --gpus")
    have = f"this host shows {len(seen)} GPU(s): {', '.join(str(g.index) for g in seen)}"
    if text == "all":
        picked = list(seen)
    else:
        missing = [n for n in numbers if n >= len(seen)]
        if missing:
            raise NvggError(f"--gpus {spec}: no GPU {', '.join(map(str, missing))}; {have}")
        picked = [seen[n] for n in numbers]
    models = sorted({g.name for g in picked})
    if len(models) > 1:
        which = "; ".join(f"{g.index}: {g.name}" for g in picked)
        raise NvggError(f"--gpus {spec}: GPUs of different models ({which}): their times cannot stand side by side; "
                        "pass GPUs of one model")
    return picked


ConfigMap = Annotated[Optional[str], typer.Option("--config", metavar="FILE", help="A config map (nvgg tune --out): each case's point, given to the --submission rows as CONFIG, or to our persistent kernel's rows as its build.")]


@dataclass(frozen=True)
class Points:
    """A config map read for the cases asked: each case's point, for a submission's CONFIG or (a
    map with an arch) for our persistent kernel's build on that arch."""

    by_case: dict
    kernel: bool
    target: str = ""  # what the map was tuned for: a submission's name, or our kernel

    def submission(self, case_id: str) -> tuple:
        return () if self.kernel else self.by_case[case_id]

    def ours(self, case_id: str, strategy: str | None, backend: str | None) -> tuple:
        """Our row's point: the map's where it is the persistent cute kernel's, else none."""
        return self.by_case[case_id] if self.kernel and (strategy, backend) == ("persistent", "cute") else ()


def config_points(path: str | None, picked, submission, device, tensormaps=None) -> Points | None:
    """--config read for the cases asked, before any row: a submission's map needs --submission; our
    kernel's map needs its arch's GPU and no tensor-map mode of its own (the point holds one)."""
    if path is None:
        return None
    arch, target, by_case = _read_config(path, [c.id for c in picked])
    if not arch:
        if not submission:
            raise NvggError("--config holds a submission's points (its CONFIG): add --submission, or drop --config")
        return Points(by_case, kernel=False, target=target)
    from ..backends.base import arch_of
    here = arch_of(device) if device.type == "cuda" else "no GPU"
    if here != arch:
        raise NvggError(f"config map {path} holds {arch} builds of our kernel and this machine has {here}: tune on "
                        "this GPU, or run where the map was made")
    if tensormaps:
        raise NvggError("--config fixes our kernel's build, its tensor maps included: drop --tensormaps")
    from ..backends import cute
    family = cute.family(arch)
    for c in picked:  # each point one the kernel takes for its case, checked before any row
        point = dict(by_case[c.id])
        family.with_point(point)
        why = family.point_build(c, point)[1]
        if why:
            raise NvggError(f"config map {path}: case {c.id}'s point is one the {arch} kernel refuses: {why}")
    return Points(by_case, kernel=True, target=target)


def check_points_taken(path: str | None, points: Points | None, rows, versions=()) -> None:
    """A config map that none of the rows takes is refused before they run: the run would measure
    something other than the tuned choice it was given. A submission's map is checked against the
    submissions (`versions`, versions.Version) as well (check_points_fit)."""
    if points is not None and not points.kernel:
        check_points_fit(path, points, versions)
    if points is None or any(r.point for r in rows):
        return
    if points.kernel:
        raise NvggError(f"config map {path} holds builds of our persistent cute kernel and no row here runs that "
                        "kernel: add it (--strategy persistent --backend cute), or drop --config (a submission takes "
                        "the map nvgg tune --submission wrote)")
    raise NvggError(f"config map {path} holds a submission's points (its CONFIG) and no row here is a submission: "
                    "add --submission, or drop --config")


def check_points_fit(path: str, points: Points, versions) -> None:
    """A submission's config map, refused before any row where it cannot serve each submission
    (versions.Version): made for a file of another name (the map records the one tuned), or a
    point that is not one of the file's TUNE (a knob it lacks or leaves out, a value it does not
    list: its calls would read another CONFIG than the tuned one). A TUNE the file computes is
    checked as each row sets its point."""
    from ..backends.submission import declared_in_source, misfit
    from ..result import point_name
    tuned = Path(points.target.rpartition("@")[0] if "@" in points.target else points.target).name
    if tuned and versions and all(Path(v.path).name != tuned for v in versions):
        given = ", ".join(v.name for v in versions)
        raise NvggError(f"config map {path} was made for {points.target} (nvgg tune --submission {tuned}), not "
                        f"{given}: tune {given} for its own map, or pass the submission the map is for")
    for v in versions:
        found, tune = declared_in_source(v.path)
        if not found:
            raise NvggError(f"config map {path} holds points of a TUNE and submission {v.name} declares none: pass "
                            "the submission the map was made for, or drop --config")
        for case_id, point in points.by_case.items():
            why = misfit(point, tune) if tune is not None else ""
            if why:
                raise NvggError(f"config map {path}: case {case_id}'s point {point_name(point)} {why} in "
                                f"submission {v.name}: tune it again (nvgg tune --out), or pass the map made for it")


def _read_config(path: str | Path, case_ids: list[str]) -> tuple[str, str, dict[str, tuple]]:
    """A config map (`nvgg tune --out`): its arch ("" for a submission's), what it was tuned for,
    and the point of each case asked for, as ((knob, value), ...); one NvggError where the file is
    no config map, lacks a case or holds an empty point."""
    from ..result import read_document
    what = "config map"
    doc = read_document(path, what, "pass the file nvgg tune --out wrote")
    cases = doc.get("cases")
    if doc["kind"] != "config" or not isinstance(cases, dict) or not all(isinstance(v, dict) for v in cases.values()):
        raise NvggError(f"{what} {path} is an nvgg {doc['kind']} file, not a config map: pass the file nvgg tune "
                        "--out wrote")
    missing = [c for c in case_ids if c not in cases]
    if missing:
        held = ", ".join(cases) or "none"
        raise NvggError(f"{what} {path} has no point for case {', '.join(missing)} (it holds {held}): tune those "
                        "cases, or leave them out")
    empty = [c for c in case_ids if not cases[c]]
    if empty:
        raise NvggError(f"{what} {path}: case {empty[0]}'s point is empty (no knob set): tune that case again "
                        "(nvgg tune --out), or leave it out")
    return str(doc.get("arch") or ""), str(doc.get("target") or ""), {c: tuple(cases[c].items()) for c in case_ids}


def emit_json(path: str | None, payload: dict) -> bool:
    """--json of a document written once (result.document): "-" prints it on stdout (True: it
    stands in for the table); a file is written through the JSON printer and announced on stderr."""
    if path is None:
        return False
    from .. import output
    files = output.Live(output.Document(payload), [output.Target("--json", path, output.find("json"))])
    files.update()
    return finish_outputs(files)


class Progress:
    """Rows done and left, the current row and the time spent, on stderr: a live line (rich) in a
    terminal, a plain line a row when stderr is not one (CI logs)."""

    def __init__(self, total: int, what: str = "measuring"):
        self.total, self.done, self.what = total, 0, what
        self.started = time.monotonic()
        self.live = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn
            self.live = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)
            self.task = self.live.add_task(what, total=total)

    def __enter__(self) -> "Progress":
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.stop()

    def start(self, name: str) -> None:
        if self.live is not None:
            self.live.update(self.task, description=f"{self.what}: {name}")
        else:
            typer.echo(f"[{self.done + 1}/{self.total}] {name} ... ({time.monotonic() - self.started:.0f} s so far)", err=True)

    def note(self, text: str) -> None:
        """A line of its own beside the rows' (what runs before them)."""
        if self.live is not None:
            self.live.console.print(text, markup=False, highlight=False)
        else:
            typer.echo(f"{text} ({time.monotonic() - self.started:.0f} s so far)", err=True)

    def finish(self, name: str, outcome: str) -> None:
        self.done += 1
        if self.live is not None:
            self.live.update(self.task, advance=1)
            self.live.console.print(f"{name}: {outcome}", markup=False, highlight=False)
        else:
            typer.echo(f"[{self.done}/{self.total}] {name}: {outcome}", err=True)


def check_outputs(kind: str, *, more: Sequence[str] | None = None, reads: Sequence[tuple[str, str | None]] = (),
                  **named: str | None) -> list:
    """A command's result files, checked before any work: each named one (json=PATH for --json
    PATH, markdown=, junit=) and each --output FORMAT=FILE (`more`) a writable file or - (stdout;
    one of them at most), in a format that prints the command's report (`kind`, result.KINDS), none
    of them another, nor a file the command reads (`reads`, read_files: through links, the same
    file by any name). The files as output.Target, for output.Live."""
    from .. import output
    asked = [(f"--{fmt}", fmt, path) for fmt, path in named.items() if path is not None]
    asked += [("--output", *_format_and_path(spec, kind)) for spec in more or []]
    for flag, _, path in asked:
        check_writable(flag, path, stdout_ok=True)
    printed = [flag for flag, _, path in asked if path == "-"]
    if len(printed) > 1:
        raise NvggError(f"{printed[0]} - and {printed[1]} - would both print on stdout: send one of them to a file")
    check_distinct(*[(flag, path) for flag, _, path in asked], reads=reads)
    return [output.Target(flag, path, output.find(fmt)) for flag, fmt, path in asked]


def _format_and_path(spec: str, kind: str) -> tuple[str, str]:
    """--output FORMAT=FILE: a format that prints `kind` (output.names), and the file."""
    from .. import output
    fmt, given, path = spec.partition("=")
    fmt, fits = fmt.strip().lower(), ", ".join(output.names(kind))
    if not given or not fmt or not path.strip():
        raise NvggError(f"--output {spec!r}: give FORMAT=FILE, like junit=nvgg.xml (formats here: {fits})")
    printer = output.find(fmt)
    if printer is None:
        raise NvggError(f"--output {spec}: nvgg has no format {fmt!r}: choose from {fits}")
    if not printer.prints(kind):
        raise NvggError(f"--output {spec}: the {fmt} format does not print this command's {kind}: choose from {fits}")
    return fmt, path


def read_files(*, submission: Sequence[str] | None = None, config: str | None = None, cases_file: str | None = None,
               baseline: str | None = None) -> list[tuple[str, str | None]]:
    """The files a command reads, by their options (a submission's PATH@REV by its PATH: the working
    copy beside the revision), for check_outputs and check_distinct: no output may overwrite them."""
    from ..versions import split_spec
    files = []
    for spec in submission or []:
        try:
            files.append(("--submission", split_spec(spec)[0]))
        except NvggError:  # a malformed PATH@REV is refused where the versions are read
            files.append(("--submission", spec))
    return files + [("--config", config), ("--cases", cases_file), ("--baseline", baseline)]


def check_distinct(*named: tuple[str, str | None], reads: Sequence[tuple[str, str | None]] = ()) -> None:
    """No two of the files a command writes ((flag, path), stdout and unset left out), nor one of
    them and a file it reads (`reads`), are one file, by any name: one would overwrite the other."""
    def real(pairs):
        return [(flag, path) for flag, path in pairs if path and path != "-"]
    named, reads = real(named), real(reads)
    for i, (flag, path) in enumerate(named):
        for other, other_path in named[i + 1:] + reads:
            if _same_file(path, other_path):
                raise NvggError(f"{flag} and {other} name the same file ({path}): give each its own file")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist yet: the same path once resolved
        return os.path.realpath(a) == os.path.realpath(b)


def check_profile(name: str | None) -> None:
    """--profile names a GPU profile that exists (checked before any row runs)."""
    if name is None:
        return
    from .. import profiles
    if not name.strip():
        raise NvggError(f"--profile is empty: name one of {', '.join(profiles.all_profiles())}")
    profiles.get(name)


def check_timer(timer, device) -> None:
    """A timer other than the leaderboard's times on a GPU only: the CPU's host clock times batches."""
    if device.type != "cuda" and timer.value != "leaderboard":
        raise no_gpu(f"--timer {timer.value} times CUDA launches and no GPU is visible: drop --timer on a CPU run "
                     "(its host clock times batches of calls)")


def finish_outputs(files) -> bool:
    """After the last change of a command's report (output.Live): the files that take one write
    get it, the one on stdout is printed (True: in place of the tables), the files written are
    announced on stderr."""
    text = files.finish()
    if text is not None:
        typer.echo(text, nl=False)
    for path in files.written():
        typer.echo(f"wrote {path}", err=True)
    return text is not None


def show(files) -> None:
    """`finish_outputs`, then the report's tables on stdout where no file went there."""
    if not finish_outputs(files):
        from .. import output
        typer.echo(output.find("table").render(files.report), nl=False)


class Timer(str, Enum):
    leaderboard = "leaderboard"
    queue_ahead = "queue-ahead"
    per_call = "per-call"
    cupti = "cupti"


TimerOpt = Annotated[Timer, typer.Option("--timer", metavar="NAME", case_sensitive=False,
                                         help="leaderboard: the competition's batch-of-15 event timer; queue-ahead: the same "
                                              "with host launch latency hidden; per-call: each call timed alone; cupti: leaderboard plus "
                                              "CUPTI kernel records per call (kernel time, span, gaps, host overhead).")]


class L2(str, Enum):
    nvgg = "nvgg"
    evaluator = "evaluator"


L2Opt = Annotated[L2, typer.Option("--l2", metavar="MODE", case_sensitive=False,
                                   help="How L2 is cleared before each timed repetition: nvgg (a buffer twice the L2, written) or "
                                        "evaluator (as the competition's evaluator: a new 62.5 GiB fp32 randn tensor each "
                                        "repetition; needs that much free GPU memory).")]


ProtocolOpt = Annotated[Optional[str], typer.Option(
    "--protocol", metavar="NAME[:MODE]",
    help="Also predict what the leaderboard will say: run the competition's evaluator's protocol (a file in "
         "protocols/: evaluator, the newest script, or evaluator-pr501, a proposal) in its benchmark (default) or "
         "leaderboard mode, the cases in one worker per row, and set its mean, spread and the cause of any "
         "departure beside the steady state.")]


def check_protocol(spec: str | None, *, quick: bool = False, timer=None, config=None, gpus=None):
    """--protocol's name and mode, and the options that contradict it, refused before any work
    (exit 2); (protocol, mode), or None without --protocol. Whether it can run here is
    `check_protocol_fits`, once the other options are checked."""
    if spec is None:
        return None
    from .. import protocol
    proto, mode = protocol.parse(spec)
    given = f"--protocol {proto.name}:{mode.name}"
    if quick:
        raise NvggError(f"{given} times each case until the evaluator's stop rule after the steady state; --quick "
                        "times one window: drop one of them")
    if timer is not None and timer.value != "leaderboard":
        raise NvggError(f"{given} times with the evaluator's own event pair around {proto.inputs} calls; --timer "
                        f"{timer.value} contradicts it: drop --timer (the steady state uses the leaderboard's timer)")
    if config:
        raise NvggError(f"{given} runs one file for every case, as the evaluator does; --config sets a point a case: "
                        "drop --config (or let the file choose by shape)")
    if gpus:
        raise NvggError(f"{given} runs every case in one worker on one GPU, as the evaluator does: drop --gpus")
    return proto, mode


def check_protocol_fits(predicting, device, cases) -> None:
    """A --protocol checked by `check_protocol` needs a GPU (exit 3) with room for its L2 clear
    and a case's inputs (exit 2); refused before any row runs."""
    if predicting is None:
        return
    from .. import leaderboard
    proto, mode = predicting
    if device.type != "cuda":
        raise no_gpu(f"--protocol {proto.name}:{mode.name} times CUDA events on a GPU and no GPU is visible: run it "
                     "on a machine with a GPU")
    leaderboard.check_memory(proto, list(cases), device)


def predict_leaderboard(todo, results, spec: str, files) -> None:
    """--protocol after the steady-state rows: each row's prediction (leaderboard.predict_all) set
    on its Result, what ran and the geometric means in the report (`files`: output.Live), its files
    rewritten; progress on stderr."""
    from .. import leaderboard
    from ..report import label
    names = list(dict.fromkeys(label(r) for r in results))
    with Progress(len(names), "predicting the leaderboard") as progress:
        files.report.more = leaderboard.predict_all(
            todo, results, spec, on_start=lambda name: progress.start(f"{name} under {spec}"),
            on_result=lambda name, g: progress.finish(name, "ok" if g is not None else "FAILED"))
    files.update()


def warn_if_slow_on_cpu(case, device) -> None:
    """A case of over a GFLOP a call run on a CPU: say on stderr that it takes a while."""
    if case.flops > 1e9 and device.type != "cuda":
        from ..datapath import CPU_BATCH
        typer.echo(f"case {case.id} on the CPU: {case.flops / 1e9:.0f} GFLOP a call, checked and timed on "
                   f"{CPU_BATCH} inputs: this takes a while", err=True)


def check_l2(l2: L2, device) -> None:
    """The evaluator's L2 clear is a GPU's; a CPU run has no L2 to clear."""
    if device.type != "cuda" and l2 is not L2.nvgg:
        raise no_gpu(f"--l2 {l2.value} clears a GPU's L2 and no GPU is visible: drop --l2 on a CPU run")


def pick_cases(case: str | None, shape: str | None, cases_file: str | None, default: str | None = None) -> list[casesmod.Case]:
    if shape and case:
        raise NvggError("give either --case or --shape, not both")
    if shape:
        return [casesmod.parse_shape(shape)]
    spec = case or default
    if spec is None:
        raise NvggError("no case given: pass --case ID (see `nvgg cases`) or --shape \"m: [...]; n: [...]; k: [...]\"")
    return casesmod.select(spec, cases_file)


def names(spec: str, known: tuple[str, ...], what: str) -> list[str]:
    """A comma list of names (or all), each known and listed once."""
    if spec.strip().lower() == "all":
        return list(known)
    out = [s.strip().lower() for s in spec.split(",")]
    for name in out:
        if name not in known:
            raise NvggError(f"unknown {what} {name!r}: choose from {', '.join(known)} or all")
        if out.count(name) > 1:
            raise NvggError(f"{what} {name} is listed twice in {spec!r}: list each once")
    return out
