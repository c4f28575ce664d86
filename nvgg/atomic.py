"""A regular file written all or nothing: whatever reads it at any moment sees the old contents or
the new, never part of them (a temporary file beside it, renamed over it). What nvgg's outputs
(output/files.py) and the kernel cache's files (kernels/cache.py, read without its lock by other
processes) are written with."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def replace_whole(target: Path, data: bytes) -> None:
    """`data` at `target` (its folder made if missing); a file that existed keeps its permission
    bits, a new one gets what a file opened for writing would."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        os.chmod(tmp, mode)  # mkstemp's 0600 is for the temporary name only
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_all(fd: int, data: bytes) -> None:
    """Every byte of `data` to the descriptor (os.write may take fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
