"""A user's competition-format `submission.py`: imported in a worker process of its own
(procs.py, rows.py), once, and run there on each case through nvgg's own path (same inputs, same
check, same timer) as its kernel, under its own launch scheme (strategies/submitted.py); a crash,
hang, CUDA error or bad output in user code becomes a failed Result with its reason, and the run
goes on.

The file defines `custom_kernel(data) -> list of C tensors` and may import `task` (nvgg provides
it, nvgg/compat/task.py).

A submission's own error (its import, a call, a `load_inline` build) is shown cut to what matters,
`failure`: the compiler's error lines, or the traceback's frames in the user's files and the
exception; its whole text goes to a log file that outlives the command (`log_dir`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

from ..cases import Case
from ..errors import FAILED, NvggError
from ..result import point_name
from .base import Backend

COMPAT_DIR = Path(__file__).resolve().parent.parent / "compat"


class SubmissionBackend(Backend):
    """An imported submission module as a backend (in the worker that runs its rows)."""

    def __init__(self, module):
        self.module, self.name = module, "submission"

    def check(self, case: Case, device: torch.device) -> None:
        return None


def load(path: str | Path, case: str | None = None):
    """The submission's module, imported; NvggError where it cannot be (its own exception shown as
    `failure` shows it, the log named after `case`, the case the import was for)."""
    path = Path(path)
    if not path.is_file():
        raise NvggError(f"submission {path} does not exist: pass the path of your submission.py")
    for extra in (str(COMPAT_DIR), str(path.resolve().parent)):
        if extra not in sys.path:
            sys.path.insert(0, extra)
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # its own code failed, as a row that raises: exit 1 wherever it is met
        raise NvggError(f"submission {path} failed to import: {failure(exc, path, case)}", code=FAILED) from None
    if not callable(getattr(module, "custom_kernel", None)):
        raise NvggError(f"submission {path} defines no custom_kernel(data): the competition's entry point")
    return module


_LOADED: dict[str, object] = {}


def loaded(path: str, case: str | None = None):
    """`load`, once a process for each file (as the competition imports a submission once)."""
    if path not in _LOADED:
        _LOADED[path] = load(path, case)
    return _LOADED[path]


# --- a submission's space (nvgg tune) ------------------------------------------------------
# A submission declares what nvgg may sweep as a module-level TUNE = {"knob": [values, ...]} (its
# own default first in each list) and reads the point it is given from a module-level CONFIG
# dict, which nvgg sets before each row; without nvgg, CONFIG is whatever the file sets itself.

KNOB_VALUE_TYPES = (bool, int, float, str)


def give_point(module, point: tuple) -> None:
    """Set the submission's CONFIG to `point` ((knob, value) pairs) for the calls that follow; an
    empty point gives the file its own CONFIG back (or none, where it set none). NvggError where
    the point is not one of the file's TUNE (`misfit`): its calls would read a knob it lacks."""
    why = misfit(point, getattr(module, "TUNE", None)) if point else ""
    if why:
        raise NvggError(f"submission {Path(module.__file__).name}: the point {point_name(point)} {why}")
    if not hasattr(module, "__nvgg_own_config__"):
        module.__nvgg_own_config__ = getattr(module, "CONFIG", _NONE)
    if point:
        module.CONFIG = dict(point)
    elif module.__nvgg_own_config__ is _NONE:
        module.__dict__.pop("CONFIG", None)
    else:
        module.CONFIG = module.__nvgg_own_config__


_NONE = object()


def misfit(point: tuple, tune) -> str:
    """Why `point` ((knob, value) pairs) is not a point of the space `tune` (a TUNE dict: every
    knob set, each to one of its values), "" where it is one."""
    if not isinstance(tune, dict):
        return "is for a TUNE the file does not declare"
    knobs = dict(point)
    unknown = [k for k in knobs if k not in tune]
    if unknown:
        return f"sets {unknown[0]!r}, a knob its TUNE lacks (it has {', '.join(map(str, tune))})"
    missing = [k for k in tune if k not in knobs]
    if missing:
        return f"leaves out {missing[0]!r}, a knob of its TUNE"
    for knob, value in knobs.items():
        values = tune[knob] if isinstance(tune[knob], (list, tuple)) else []
        if repr(value) not in map(repr, values):  # 1, 1.0 and True apart, as a JSON file keeps them
            return f"sets {knob}={value!r}, not one of its TUNE's values ({', '.join(map(repr, values))})"
    return ""


def declared_in_source(path: str | Path) -> tuple[bool, dict | None]:
    """Whether the file assigns TUNE at its top level, and the value where it is written as a
    literal (None where it is computed), read from its source without importing it."""
    import ast
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return True, None  # its import says what is wrong with it
    found, value = False, None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "TUNE" for t in targets) and node.value is not None:
            found = True
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                value = None
    return found, value if isinstance(value, dict) else None


def declared_space(path: str) -> dict[str, list]:
    """The submission's TUNE, checked: knob names to non-empty lists of plain values (what a JSON
    file and a worker's pipe carry). Imported in the worker that runs the file's rows; NvggError
    in one line where there is no space to sweep."""
    module = loaded(path)
    name = Path(path).name
    example = "for example TUNE = {'stages': [3, 4, 5], 'cluster': [1, 2]}, your default first in each list"
    tune = getattr(module, "TUNE", None)
    if tune is None:
        raise NvggError(f"submission {name} declares no TUNE to sweep: add a module-level TUNE dict ({example}) and "
                        "read the point from CONFIG in custom_kernel")
    if not isinstance(tune, dict) or not tune:
        raise NvggError(f"submission {name}: TUNE must be a non-empty dict of knob -> list of values ({example})")
    out = {}
    for knob, values in tune.items():
        if not isinstance(knob, str) or not knob.isidentifier():
            raise NvggError(f"submission {name}: TUNE's knob {knob!r} must be a name like 'stages'")
        if not isinstance(values, (list, tuple)) or not values:
            raise NvggError(f"submission {name}: TUNE[{knob!r}] must be a non-empty list of values ({example})")
        bad = [v for v in values if not isinstance(v, KNOB_VALUE_TYPES)]
        if bad:
            raise NvggError(f"submission {name}: TUNE[{knob!r}] holds {bad[0]!r}: values are numbers, strings or "
                            "booleans")
        if len(set(map(repr, values))) < len(values):
            raise NvggError(f"submission {name}: TUNE[{knob!r}] names a value twice")
        out[knob] = list(values)
    return out


# --- a submission's own errors --------------------------------------------------------------

EXCERPT_LINES = 8   # lines of a build's compiler output shown (the log holds the rest)
USER_FRAMES = 3     # innermost frames in the user's own files shown
LOG_FOLDER = "nvgg-logs"


def log_dir() -> Path:
    """Where the whole text of a submission's error goes: a folder `nvgg-logs` in the system's
    temporary folder (TMPDIR), never removed by nvgg (a worker's own log folder is, at its exit)."""
    return Path(tempfile.gettempdir()) / LOG_FOLDER


def failure(exc: BaseException, path: str | Path, case: str | None) -> str:
    """A submission's exception for people: `kind: headline`, then a few lines (a build's compiler
    errors with their context, or the traceback's frames in the user's files and the exception),
    then the log file holding the whole text. A ProbeError is nvgg's own sentence, one line."""
    from ..probe.error import ProbeError
    if isinstance(exc, ProbeError):  # what to do, said where the probe is misused
        return f"ProbeError: {exc}"
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    build = _build_output(exc)
    if build is not None:
        name, output = build
        lines = compiler_errors(output)
        first = next((line.strip() for line in lines if _ERROR.search(line)), "see the whole text")
        headline = f"the extension {name} did not build: {first}"
    else:
        headline = f"{type(exc).__name__}: {_first_line(str(exc))}"
        lines = user_traceback(exc, path)
    where = write_log(path, case, f"submission {path}, case {case or '-'}\n\n{text.rstrip()}\n")
    return "\n".join([headline] + [f"  {line}" for line in lines] + [f"  the whole text: {where}"])


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


_BUILD = re.compile(r"Error building extension ('[^']*')(?::\s*)?(.*)", re.S)


def _build_output(exc: BaseException) -> tuple[str, str] | None:
    """(the extension's name, the build's output) of torch.utils.cpp_extension's build failure
    ("Error building extension 'x': <ninja's output>"), raised by load_inline or load."""
    found = _BUILD.match(str(exc)) if isinstance(exc, RuntimeError) else None
    return (found.group(1), found.group(2)) if found else None


_COMMAND = re.compile(r"^\s*(\[\d+/\d+\]|FAILED:|ninja:)|\s-c\s|\s-o\s")
_ERROR = re.compile(r"\berror\b|undefined reference", re.I)
_TALLY = re.compile(r"^\s*\d+ errors? detected")  # nvcc's count after the errors
_CODE = re.compile(r"^\s+(\d+\s*)?\||^\s")
_PATH = re.compile(r"(?<![\w.])/[^\s:()]*/([^/\s:()]+\.(?:cpp|cc|cxx|cu|cuh|h|hpp|o|so))")


def compiler_errors(output: str, limit: int = EXCERPT_LINES) -> list[str]:
    """The lines of a build's output that say what is wrong: each line naming an error (g++'s and
    nvcc's `error:`, ptxas's `error   :`, the linker's undefined references) with the source lines
    and carets under it and the "In function" line over it; never the compiler's command line.
    Paths cut to their file name (the log keeps them). Where no line names an error, the last
    lines that are no command."""
    lines = output.splitlines()
    keep: list[int] = []
    for i, line in enumerate(lines):
        if _COMMAND.search(line) or _TALLY.match(line) or not _ERROR.search(line):
            continue
        if i and re.search(r"In (member )?function|In instantiation of", lines[i - 1]):
            keep.append(i - 1)
        keep.append(i)
        j = i + 1
        while j < len(lines) and _CODE.match(lines[j]) and not _ERROR.search(lines[j]):
            keep.append(j)
            j += 1
    if not keep:
        keep = [i for i, line in enumerate(lines) if line.strip() and not _COMMAND.search(line)][-limit:]
    shown = [lines[i].rstrip() for i in sorted(set(keep))][:limit]
    return [_PATH.sub(r"\1", line) for line in shown]


def user_traceback(exc: BaseException, path: str | Path, frames: int = USER_FRAMES) -> list[str]:
    """The innermost frames of the traceback that lie in the user's files (the submission's folder,
    less nvgg and installed packages), each as `File "...", line N, in fn` and its source line,
    then the exception (its first three lines)."""
    folder = Path(path).resolve().parent
    package = Path(__file__).resolve().parent.parent
    mine = []
    for frame in traceback.extract_tb(exc.__traceback__):
        where = Path(frame.filename).resolve() if frame.filename and not frame.filename.startswith("<") else None
        if where is None or not where.is_relative_to(folder) or where.is_relative_to(package) or any(
                part in ("site-packages", "dist-packages") for part in where.parts):
            continue
        mine.append(f'File "{frame.filename}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            mine.append(f"  {frame.line.strip()}")
    last = [line for line in "".join(traceback.format_exception_only(type(exc), exc)).splitlines() if line.strip()]
    return _cut_frames(mine, frames) + last[:3]


def _cut_frames(lines: list[str], frames: int) -> list[str]:
    starts = [i for i, line in enumerate(lines) if line.startswith("File ")]
    return lines[starts[-frames]:] if len(starts) > frames else lines


def write_log(path: str | Path, case: str | None, text: str) -> str:
    """Write a submission's error text to a new file in `log_dir()`, named after the submission
    (its folder and file), the case, the time and this process; its path, or why it could not be
    written."""
    path = Path(path)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{path.parent.name}-{path.stem}-case-{case or 'import'}")
    name = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    try:
        folder = log_dir()
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / name
        for n in range(2, 100):  # this process wrote one for the case this second: the next free name
            if not target.exists():
                break
            target = folder / f"{name[:-4]}-{n}.log"
        target.write_text(text)
    except OSError as exc:
        return f"(not written: {exc})"
    return str(target)
