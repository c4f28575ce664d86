"""`multistream`: per-group launches spread over a pool of CUDA streams.

Each call forks from the caller's stream (an event the side streams wait on) and joins back
(the caller's stream waits on each side stream's event), so events recorded on the caller's
stream around a call cover every group's work.
"""

from __future__ import annotations

import torch

from .base import Prepared, Strategy, group_launchers

POOL_SIZE = 8


class StreamPool:
    def __init__(self, device: torch.device, size: int):
        self.streams = [torch.cuda.Stream(device) for _ in range(size)]

    def fork_join(self, launchers) -> None:
        caller = torch.cuda.current_stream()
        fork = torch.cuda.Event()
        fork.record(caller)
        joins = []
        for i, group in enumerate(launchers):
            side = self.streams[i % len(self.streams)]
            side.wait_event(fork)
            with torch.cuda.stream(side):
                group()
            done = torch.cuda.Event()
            done.record(side)
            joins.append(done)
        for done in joins:
            caller.wait_event(done)


class Multistream(Strategy):
    name = "multistream"

    def __init__(self, pool_size: int = POOL_SIZE):
        self.pool_size = pool_size
        self._pools: dict[torch.device, StreamPool] = {}

    def pool(self, device: torch.device) -> StreamPool:
        if device not in self._pools:
            self._pools[device] = StreamPool(device, self.pool_size)
        return self._pools[device]

    def prepare(self, backend, data) -> Prepared:
        launchers, prep_us = group_launchers(backend, data)
        pool = self.pool(data[0][0][2].device)
        return Prepared(lambda: pool.fork_join(launchers), {"prepare_args": prep_us})
