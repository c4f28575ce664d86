"""`persistent`: one launch for all groups; a device-side scheduler walks every group's tiles.
Needs a backend with a grouped kernel (the cute backend's persistent kernel)."""

from __future__ import annotations

import time

from .base import Prepared, Strategy


class Persistent(Strategy):
    name = "persistent"
    grouped = True

    def prepare(self, backend, data) -> Prepared:
        t0 = time.perf_counter()
        launch = backend.grouped_launcher(data)
        # host work the launcher reports apart (the host encoding of tensor maps), inside prepare_args
        return Prepared(launch, {"prepare_args": (time.perf_counter() - t0) * 1e6, **getattr(launch, "setup_us", {})})
