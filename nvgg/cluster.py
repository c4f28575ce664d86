"""Past one host, through Ray (a sweep's `ray` option, auto or an address; `pip install 'nvgg[ray]'`).

Each GPU of the cluster is a Ray actor that holds it (`num_gpus=1`: Ray places the actors on the
nodes and sets each one's CUDA_VISIBLE_DEVICES) and runs the one data path in its own process, as
a local worker does. `RayPool` is a pool as procs.BasePool declares one, as procs.Pool is, and its
actor answers a call as a local worker does (procs.answer, read back by procs.settle): an actor
whose CUDA context a call lost is killed and the next call starts another. So a sweep's plan
(tune._Plan) serves the cluster's GPUs as it serves a host's: a point goes to whichever is free, a
case's rounds whole to one, and the results come back here, merged into the same files as they
arrive. Ray does the placing; nvgg keeps no scheduler of its own for machines.
The nodes need nvgg (and, for our kernels, CuTe DSL) installed as on this host.
"""

from __future__ import annotations

import os

from . import procs
from .errors import NvggError


def _ray():
    try:
        import ray
    except ImportError:
        raise NvggError("a sweep over a Ray cluster needs Ray, which is not installed: pip install 'nvgg[ray]'") from None
    return ray


def connect(address: str) -> int:
    """Join the cluster at `address` ("auto": the one RAY_ADDRESS names or this host runs; a Ray
    session this process already holds is used as it is); how many GPUs it has (at least one).
    NvggError in one line otherwise."""
    ray = _ray()
    if not ray.is_initialized():
        if address != "auto":
            _reachable(address)
        try:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR", include_dashboard=False)
        except Exception as exc:  # no cluster there, a version it refuses: one line
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise NvggError(f"cannot join a Ray cluster at {address} ({first}): start one with `ray start --head "
                            "--num-gpus N`, or pass its address") from None
    count = int(ray.cluster_resources().get("GPU", 0))
    if count < 1:
        raise NvggError(f"the Ray cluster at {address} has no GPU to give a point: start its nodes with GPUs "
                        "(`ray start --num-gpus N`)")
    return count


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """A TCP connection to the head the address names (`host:port`, `ray://host[:port]`), refused
    in one line where none answers: Ray itself waits a minute and more for a head that is not
    there, printing its retries."""
    import socket
    rest = address.split("://", 1)[1] if "://" in address else address
    host, _, port = rest.rstrip("/").rpartition(":") if ":" in rest else (rest, "", "")
    try:
        number = int(port) if port else (10001 if address.startswith("ray://") else 6379)  # Ray's client / GCS ports
        socket.create_connection((host or "localhost", number), timeout=timeout_s).close()
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise NvggError(f"cannot reach a Ray cluster at {address} ({why}): start one with `ray start --head "
                        "--num-gpus N`, or pass its address (host:port, or ray://host:port)") from None


def pools(count: int, timeout_s: float | None) -> list["RayPool"]:
    """One RayPool a GPU, their actors started at once; the models refused where they differ (each
    actor asks its own GPU)."""
    made = [RayPool(timeout_s, index=i) for i in range(count)]
    try:
        _start(made)
    except procs.ChildFailure as exc:
        raise NvggError(f"the Ray cluster's actors did not start: {exc}") from None
    names = _ray().get([p._get().gpu_name.remote() for p in made], timeout=made[0].timeout_s)
    if len(set(names)) > 1:
        for p in made:
            p.close()
        which = "; ".join(f"{i}: {n or 'no GPU'}" for i, n in enumerate(names))
        raise NvggError(f"the Ray cluster's GPUs are of different models ({which}): their times cannot stand side "
                        "by side; give the sweep a cluster of one model")
    return made


def _start(pools: list["RayPool"]) -> None:
    """Start an actor for each of `pools` that has none, all at once, and wait until each has made
    a local worker's start (procs.warm_up: torch, the CUDA context, the data path), within
    procs.START_TIMEOUT_S: a call's limit then holds the call alone, as a local worker's does (the
    first call's limit held the actor's start: a sweep's 60-s points timed out on a loaded host).
    procs.ChildFailure where one does not start."""
    ray = _ray()
    new = [p for p in pools if p._actor is None]
    actors = [ray.remote(num_gpus=1)(_Worker).remote() for _ in new]
    try:
        ray.get([a.ready.remote() for a in actors], timeout=procs.START_TIMEOUT_S)
    except (ray.exceptions.GetTimeoutError, ray.exceptions.RayError) as exc:
        for actor in actors:
            try:
                ray.kill(actor)
            except Exception:  # already gone
                pass
        if isinstance(exc, ray.exceptions.GetTimeoutError):
            raise procs.ChildFailure(f"a Ray actor did not start within {procs.START_TIMEOUT_S:.0f} s") from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise procs.ChildFailure(f"crashed: a Ray actor was lost as it started ({first})") from None
    for pool, actor in zip(new, actors):
        pool._actor = actor


class _Worker:
    """The actor's body: one process holding one GPU, answering each call as a local worker does."""

    def ready(self) -> int:
        from . import datapath
        procs.warm_up(datapath.WORKER_PRELOAD)
        return os.getpid()

    def call(self, call: procs.Call) -> tuple:
        return procs.answer(call)

    def gpu_name(self) -> str | None:
        from .profiles import gpu_name
        return gpu_name()


class RayPool(procs.BasePool):
    """A pool of one Ray actor holding one GPU (`index` names it in this sweep), whatever the key;
    an actor that hangs past the call's limit, or loses its CUDA context, is killed and the next
    call starts another."""

    def __init__(self, timeout_s: float | None = None, *, index: int = 0):
        self.timeout_s = timeout_s or procs.TIMEOUT_S
        self.gpu = index
        self._actor = None

    def _get(self):
        if self._actor is None:
            _start([self])
        return self._actor

    def call(self, key: str, fn, *, limit_s: float | None = None, **kwargs):
        """`fn(**kwargs)` in the actor (Ray sends `fn` by value where it is no module's); as
        procs.BasePool says. A lost actor (its process died: a fault, killed) is a ChildFailure too."""
        ray = _ray()
        limit = limit_s or self.timeout_s
        try:
            reply = ray.get(self._get().call.remote(procs.Call(fn, kwargs)), timeout=limit)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise procs.ChildFailure(procs.timed_out(limit)) from None
        except ray.exceptions.RayError as exc:
            self._actor = None
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise procs.ChildFailure(f"crashed: the Ray actor was lost ({first})") from None
        return procs.settle(reply, self.close)

    def close(self) -> None:
        if self._actor is not None:
            try:
                _ray().kill(self._actor)
            except Exception:  # already gone
                pass
            self._actor = None
