"""Launch schemes, by name. Multistream and graph wrap the same per-group launchers as sequential."""

from __future__ import annotations

from ..errors import NvggError
from .base import Prepared, Strategy
from .graph import Graph
from .multistream import Multistream
from .persistent import Persistent
from .sequential import Sequential
from .submitted import AsSubmitted

NAMES = ("persistent", "multistream", "graph", "sequential")
_CLASSES = {"persistent": Persistent, "multistream": Multistream, "graph": Graph, "sequential": Sequential}


def get(name: str) -> Strategy:
    key = name.strip().lower()
    if key not in _CLASSES:
        raise NvggError(f"unknown strategy {name!r}: choose one of {', '.join(NAMES)}")
    return _CLASSES[key]()


__all__ = ["NAMES", "AsSubmitted", "Prepared", "Strategy", "get"]
