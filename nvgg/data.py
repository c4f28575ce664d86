"""Where nvgg reads its data folders, `cases/`, `profiles/` and `protocols/`: the copy a wheel
ships inside the package (`nvgg/_data/`, made by setup.py's build step), else the repository's top
level (a checkout, an editable install). Both are plain folders on disk, read through
importlib.resources."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from .errors import NvggError

NAMES = ("cases", "profiles", "protocols")


def folder(name: str) -> Path:
    """The folder `name` (one of NAMES) as this install has it."""
    packaged = Path(str(files("nvgg") / "_data" / name))
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parent.parent / name
    if checkout.is_dir():
        return checkout
    raise NvggError(f"this nvgg install has no {name}/ folder: reinstall it (pip install . from a checkout, or the wheel)")
