"""`submission`: a user's submission is its own launch scheme, one call of its `custom_kernel` per
input; its backend (backends/submission.py) holds the imported module. Not a strategy a user
names: a submission's rows take it."""

from __future__ import annotations

from .base import Prepared, Strategy


class AsSubmitted(Strategy):
    """The submission is its own launch scheme: one call of custom_kernel per input."""

    name = "submission"
    needs_gpu = False
    grouped = False

    def prepare(self, backend, data) -> Prepared:
        kernel = backend.module.custom_kernel
        return Prepared(lambda: kernel(data))
