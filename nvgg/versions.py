"""Versions of a submission as rows: `--submission PATH` or `PATH@REV` (the file as it was at a git
revision), any number of them, each named by the shortest end of its path that tells it from the
others (`v1/submission.py`, `v2/submission.py`, `submission.py@HEAD`).

A revision's file is taken with the folder it sits in (its own imports work), written by `git
archive` into a temporary folder that lives as long as the command (`Versions` is a context
manager), and run in a worker of its own like any other file. Everything is checked before any row
starts: a revision git cannot resolve, a file outside a git repository, a file missing at that
revision, the same file at the same revision twice.

`row` is the one place a version becomes a row (what `run`, `compare`, `ab`, `profile` and `tune`
hand to their workers): a submission's file at its revision, or our kernels, each at a point.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .cases import Case
from .errors import NvggError
from .result import Row


@dataclass(frozen=True)
class Version:
    """One submission to run: the file nvgg imports, the name rows carry, and for a revision
    its full commit hash."""

    path: str           # the file to import (inside the temporary checkout for a revision)
    name: str           # how tables, JSON and the gate name its rows
    revision: str = ""  # the commit's full hash ("" for the working copy)


def row(case: Case, version: Version | None = None, *, point: tuple = (), **common) -> Row:
    """`version` on `case` as a row: a submission's file, named and at its revision as the version
    says, its CONFIG set to `point`; None: our kernels (the strategy, backend and tensor-map mode
    in `common`) built at `point`. `common`: the rest of the row (its timer, profile, device...)."""
    if version is None:
        return Row(case, point=point, **common)
    return Row(case, submission=version.path, source=version.name, revision=version.revision, point=point, **common)


def split_spec(spec: str) -> tuple[str, str]:
    """`PATH@REV` -> (PATH, REV); a plain path (or an existing file whose name holds an @) -> (PATH, "")."""
    if "@" in spec and not Path(spec).exists():
        path, rev = spec.rsplit("@", 1)
        if not path.strip():  # an empty path would name the current folder
            raise NvggError(f"submission {spec}: nothing before @: write PATH@REV with the submission's path "
                            f"(submission.py@{rev.strip() or 'HEAD'})")
        # a PATH that exists (a folder, a README.md) is a revision too: Versions checks its kind
        if path.endswith(".py") or Path(path).exists():
            if not rev.strip():
                raise NvggError(f"submission {spec}: nothing after @: write PATH@REV with a commit, branch or tag")
            return path, rev
    return spec, ""


def _git(repo: Path, *args: str, binary: bool = False):
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=60)
    except FileNotFoundError:
        raise NvggError("git is not installed: PATH@REV reads a revision through git; install git or drop @REV") from None
    if proc.returncode != 0:
        return None
    return proc.stdout if binary else proc.stdout.decode().strip()


def _locate(path: str, rev: str) -> tuple[Path, str, str]:
    """The repository holding `path`, the file's path inside it, and REV's full commit hash."""
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        raise NvggError(f"submission {path}@{rev}: its folder {folder} does not exist: pass a path inside a git checkout")
    top = _git(folder, "rev-parse", "--show-toplevel")
    if not top:
        raise NvggError(f"submission {path}@{rev}: {folder} is not in a git repository: drop @{rev}, or pass a path "
                        "inside a git checkout")
    commit = _git(folder, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if not commit:
        raise NvggError(f"submission {path}@{rev}: no revision {rev!r} in the git repository at {top}: pass a commit, "
                        "branch or tag (git log)")
    inside = (folder / Path(path).name).relative_to(Path(top).resolve()).as_posix()
    if _git(Path(top), "cat-file", "-e", f"{commit}:{inside}") is None:
        raise NvggError(f"submission {path}@{rev}: {inside} does not exist at {rev} ({commit[:12]}): pass a revision "
                        "that has it (git log -- " + inside + ")")
    return Path(top), inside, commit


def _checkout(top: Path, inside: str, commit: str, into: Path) -> Path:
    """The folder of `inside` at `commit`, written under `into`; the file's path there."""
    folder = str(Path(inside).parent.as_posix())
    archive = _git(top, "archive", "--format=tar", commit, *([] if folder == "." else ["--", folder]), binary=True)
    if archive is None:
        raise NvggError(f"git archive of {folder} at {commit[:12]} failed in {top}: check the repository (git fsck)")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / inside


def names(paths: list[str]) -> list[str]:
    """Each path's shortest end (its last 1, 2, ... parts) that no other path of the list ends with;
    the whole path where none is shorter."""
    parts = [Path(p).parts for p in paths]
    out = []
    for i, mine in enumerate(parts):
        for k in range(1, len(mine) + 1):
            end = mine[-k:]
            if all(other[-k:] != end for j, other in enumerate(parts) if j != i):
                break
        out.append(str(Path(*end)))
    return out


class Versions:
    """The submissions of a command line, checked, with temporary checkouts for revisions:
    `with Versions(specs) as versions: ... versions.items`."""

    def __init__(self, specs: list[str], check_file):
        self._tmp: tempfile.TemporaryDirectory | None = None
        self.items: list[Version] = []
        parsed = [(spec, *split_spec(spec)) for spec in specs]
        seen: dict[tuple[str, str], str] = {}
        located = []
        for spec, path, rev in parsed:
            if rev:
                if Path(path).exists():  # in the working copy too: refused here if it is no Python file
                    check_file(path)
                top, inside, commit = _locate(path, rev)
                key = (str(top / inside), commit)
            else:
                key, top, inside, commit = (check_file(path), ""), None, "", ""
            if key in seen:
                at = f" at {commit[:12]}" if commit else ""
                raise NvggError(f"submission {spec} and {seen[key]} name one file{at} again: give each file and "
                                "revision once")
            seen[key] = spec
            located.append((spec, path, rev, top, inside, commit, key[0]))
        labels = names([f"{file}@{rev}" if rev else file for _, _, rev, _, _, _, file in located])
        for (spec, path, rev, top, inside, commit, file), label in zip(located, labels):
            if rev:
                if self._tmp is None:
                    self._tmp = tempfile.TemporaryDirectory(prefix="nvgg-revisions-")
                file = str(check_file(str(_checkout(top, inside, commit, Path(self._tmp.name) / commit[:12]))))
            self.items.append(Version(file, label, commit))

    def __enter__(self) -> "Versions":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
