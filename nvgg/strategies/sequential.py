"""`sequential`: one launch per group, in order, on the caller's stream. The baseline every
speedup is quoted against."""

from __future__ import annotations

from .base import Prepared, Strategy, group_launchers


class Sequential(Strategy):
    name = "sequential"
    needs_gpu = False

    def prepare(self, backend, data) -> Prepared:
        launchers, prep_us = group_launchers(backend, data)

        def launch() -> None:
            for group in launchers:
                group()
        return Prepared(launch, {"prepare_args": prep_us})
