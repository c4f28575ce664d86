"""`graph`: the multistream launches captured once into a CUDA graph and replayed.

One graph is captured per input (the captured kernels read that input's buffers), so a new input
means a new capture rather than a copy into captured buffers: no extra memory traffic is timed.
Capture and instantiation are setup costs, reported apart; replay is what is timed.
"""

from __future__ import annotations

import time

import torch

from .base import Prepared, Strategy, group_launchers
from .multistream import POOL_SIZE, StreamPool


class Graph(Strategy):
    name = "graph"

    def __init__(self, pool_size: int = POOL_SIZE):
        self.pool_size = pool_size

    def prepare(self, backend, data) -> Prepared:
        launchers, prep_us = group_launchers(backend, data)
        device = data[0][0][2].device
        pool = StreamPool(device, self.pool_size)
        capture_stream = torch.cuda.Stream(device)
        capture_stream.wait_stream(torch.cuda.current_stream(device))
        # one eager pass on the same streams first: library handles and workspaces (cuBLAS
        # creates one per stream) must exist before capture, where creating them fails
        with torch.cuda.stream(capture_stream):
            pool.fork_join(launchers)
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        with torch.cuda.graph(graph, stream=capture_stream):
            pool.fork_join(launchers)
        torch.cuda.synchronize(device)
        capture_us = (time.perf_counter() - t0) * 1e6
        return Prepared(graph.replay, {"prepare_args": prep_us, "graph_capture_instantiate": capture_us},
                        keep=(launchers, pool, capture_stream))
