"""A fault costs one row: every row runs in a worker process, one kept per backend across rows
and replaced after a fault, so an illegal address, a deadlocked kernel or a crash of user code
ends that row with its reason and the run goes on.

The parent only schedules rows, enforces timeouts and renders; the worker runs the one data
path (`runner.run_row`) and sends the Result back. Frames on the worker's own pipe are pickles
(the worker is this same nvgg), each a 8-byte length and the payload; the worker's stdout and
stderr (user code prints, library warnings) go to a log file whose last line names a crash.

A row ends one of four ways:
- its Result: the row's own outcome (ok, wrong, error, unsupported);
- the worker's CUDA context was lost on the way (an illegal address, a launch failure: CUDA
  keeps such an error for the life of the context), so the worker says so and exits: the row
  is "crashed: CUDA error: ...", and the next row of that backend starts a new worker;
- no answer within the timeout: the worker's process group is killed, the row "timed out";
- the worker died (a segfault, os._exit): the row "crashed" with its exit and last log line.

`NVGG_ISOLATION=off` runs rows in the calling process instead (a debugger, a test's fakes).
"""

from __future__ import annotations

import importlib
import os
import pickle
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from .errors import NvggError

TIMEOUT_S = 300.0        # a row: no healthy one comes near (the slowest, a cold compile and the
                         # timer's 10 s budget, takes under a minute on an H100)
START_TIMEOUT_S = 180.0  # a worker's start: python, torch, the CUDA context
_HEADER = struct.Struct("<Q")


def isolated() -> bool:
    return os.environ.get("NVGG_ISOLATION", "on").strip().lower() not in ("off", "0", "no")


class RowFailure(Exception):
    """A row that ended without an answer: it timed out or its worker crashed (the message is
    the row's reason)."""


@dataclass(frozen=True)
class Call:
    """A function of nvgg's to call in a worker: `module:function` and its keyword arguments
    (picklable)."""

    target: str
    kwargs: dict


def resolve(target: str):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def cuda_reason(message: str) -> str:
    """The CUDA error in an exception's message ("CUDA error: an illegal memory access was
    encountered"), or its first line."""
    found = re.search(r"CUDA error: [^\n;]*", message or "")
    return found.group(0).strip() if found else _first_line(message)


# ---------------------------------------------------------------- the worker

def _context_alive() -> bool:
    """Whether this process's CUDA context still works (after a row raised): a sticky error (an
    illegal address, a launch failure) fails every later call."""
    import torch
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return True
    try:
        torch.cuda.synchronize()
        return int(torch.ones(1, device="cuda").add_(1).item()) == 2
    except Exception:
        return False


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when the parent goes, so a killed nvgg (CI's timeout, Ctrl-C)
    leaves no worker holding the GPU."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:
            os._exit(0)
    except Exception:
        pass


def _read_frame(stream) -> object | None:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    return pickle.loads(stream.read(size))


def _write_frame(stream, obj) -> None:
    payload = pickle.dumps(obj)
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def serve(proto_in, proto_out) -> int:
    """The worker's loop: a Call in, ("ok", value, alive) or ("raised", kind, message, traceback,
    alive) out, until the pipe closes or the CUDA context is lost."""
    import torch
    if torch.cuda.is_available():
        torch.cuda.init()
    _write_frame(proto_out, ("ready", os.getpid()))
    while True:
        call = _read_frame(proto_in)
        if call is None:
            return 0
        try:
            reply = ("ok", resolve(call.target)(**call.kwargs))
        except NvggError as exc:
            reply = ("raised", "NvggError", str(exc), "")
        except BaseException as exc:  # user code and kernels: reported, never the end of the run
            reply = ("raised", type(exc).__name__, str(exc), traceback.format_exc())
        alive = _context_alive()
        if not alive and reply[0] == "ok":
            # the row caught the error itself (a launch that failed is the row's result): its message
            # names the CUDA error
            said = getattr(reply[1], "message", "") or ""
            reply = ("raised", "CudaContextLost", said if "CUDA error" in said else "CUDA error: the context failed during the row", "")
        _write_frame(proto_out, reply + (alive,))
        if not alive:
            return 3


def main() -> int:
    _die_with_parent()
    # the protocol keeps the pipes the parent gave as stdin/stdout; everything the row prints goes
    # to stderr (the parent's log file)
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return serve(proto_in, proto_out)


# ---------------------------------------------------------------- the parent

class Worker:
    """One worker process: started on first use, answering Calls until it is closed or lost."""

    def __init__(self, key: str, log_dir: Path):
        self.key = key
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", key)[:60]
        self.log_path = log_dir / f"worker-{safe}-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen | None = None
        self.ready = False

    def spawn(self) -> None:
        """Start the process; it imports torch and makes its CUDA context while the caller goes on."""
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._log = open(self.log_path, "ab")
        self.ready = False
        self.proc = subprocess.Popen([sys.executable, "-m", "nvgg.isolation"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, env=env, start_new_session=True)

    def start(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.spawn()
        ready = self._receive(START_TIMEOUT_S, "starting")
        if not (isinstance(ready, tuple) and ready[0] == "ready"):
            self.kill()
            raise RowFailure(f"the worker did not start: {ready!r}")
        self.ready = True

    def _receive(self, timeout_s: float, doing: str):
        deadline = time.monotonic() + timeout_s
        out = self.proc.stdout
        buf = b""
        size = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                what = f" {doing}" if doing else ""
                raise RowFailure(f"timed out after {timeout_s:.0f} s{what} (a hang, or far too slow: raise --timeout)")
            ready, _, _ = select.select([out], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(out.fileno(), 1 << 20)  # one frame a call: nothing past it to over-read
            if not chunk:
                raise RowFailure(self._death())
            buf += chunk
            if size is None and len(buf) >= _HEADER.size:
                (size,) = _HEADER.unpack(buf[:_HEADER.size])
                buf = buf[_HEADER.size:]
            if size is not None and len(buf) >= size:
                return pickle.loads(buf[:size])

    def _death(self) -> str:
        """Why the worker's pipe closed: its exit (a signal by name) and the last line it logged."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        tail = self.log_tail()
        self.close()
        return f"crashed: the worker died ({how})" + (f": {tail}" if tail else "")

    def log_tail(self) -> str:
        try:
            lines = [line.strip() for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def call(self, call: Call, timeout_s: float):
        if self.proc is None or not self.ready or self.proc.poll() is not None:
            self.start()
        try:
            _write_frame(self.proc.stdin, call)
        except (BrokenPipeError, OSError):
            raise RowFailure(self._death()) from None
        reply = self._receive(timeout_s, "")
        alive = reply[-1]
        if reply[0] == "ok" and alive:
            return reply[1]
        _, kind, message, trace, _ = reply
        if not alive:
            self.close(wait=True)
            raise RowFailure(f"crashed: {cuda_reason(message)} (the CUDA context is lost; the next row starts a new worker)")
        if kind == "NvggError":
            raise NvggError(message)
        raise RowError(f"{kind}: {_first_line(message)}", trace)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            self.proc.wait()
        self.close()

    def close(self, wait: bool = False) -> None:
        if self.proc is None:
            return
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except Exception:
                pass
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=10 if wait else 0.5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                self.proc.wait()
        self._log.close()
        self.proc = None


class RowError(Exception):
    """A call that raised in the worker with the context intact: the row fails, the worker stays."""

    def __init__(self, message: str, trace: str = ""):
        super().__init__(message)
        self.trace = trace


class Pool:
    """Workers by key (a backend's name, a submission's path), each kept across the rows of its
    key; `with Pool(timeout_s) as pool: pool.call(key, call)`."""

    def __init__(self, timeout_s: float | None = None):
        self.timeout_s = timeout_s or TIMEOUT_S
        self.isolated = isolated()
        self.workers: dict[str, Worker] = {}
        self._logs = tempfile.TemporaryDirectory(prefix="nvgg-workers-") if self.isolated else None

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, key: str, call: Call):
        """The function's value. NvggError as raised; RowFailure (timed out, crashed: the worker is
        gone) or RowError (raised, the worker kept) for a row that failed."""
        if not self.isolated:
            try:
                return resolve(call.target)(**call.kwargs)
            except NvggError:
                raise
            except Exception as exc:
                raise RowError(f"{type(exc).__name__}: {_first_line(str(exc))}", traceback.format_exc()) from None
        worker = self.workers.get(key)
        if worker is None:
            worker = self.workers[key] = _adopt_spare(key) or Worker(key, Path(self._logs.name))
        try:
            return worker.call(call, self.timeout_s)
        except RowFailure:
            self.workers.pop(key, None)
            raise

    def close(self) -> None:
        for worker in self.workers.values():
            worker.kill()
        self.workers.clear()
        if self._logs is not None:
            self._logs.cleanup()
            self._logs = None


# ---------------------------------------------------------------- a worker started ahead

_SPARE: list = []  # [Worker, its log folder]: started before the command knew its first row


def runs_rows(argv: list[str]) -> bool:
    """Whether a command line runs rows in workers: run, compare, and profile with --cupti or our
    kernel's --phases (ncu and a submission's phases run in processes of their own)."""
    if not argv or {"--help", "-h"} & set(argv):
        return False
    if argv[0] in ("run", "compare"):
        return True
    return argv[0] == "profile" and ("--cupti" in argv or ("--phases" in argv and "--submission" not in argv))


def prespawn(argv: list[str]) -> None:
    """For a command that runs rows, start a worker before the command's own imports and checks,
    so its start (python, torch, the CUDA context) overlaps them; the first row's key adopts it.
    Killed at exit if no row did (bad input)."""
    if not isolated() or not runs_rows(argv):
        return
    import atexit
    logs = tempfile.TemporaryDirectory(prefix="nvgg-workers-")
    worker = Worker("spare", Path(logs.name))
    worker.spawn()
    _SPARE[:] = [worker, logs]

    def cleanup() -> None:
        if _SPARE:
            _SPARE[0].kill()
        logs.cleanup()
    atexit.register(cleanup)


def _adopt_spare(key: str) -> Worker | None:
    if not _SPARE:
        return None
    worker = _SPARE[0]
    _SPARE.clear()
    if worker.proc is None or worker.proc.poll() is not None:
        worker.close()  # dead before its first row: its pipes and log go with it
        return None
    worker.key = key
    return worker


if __name__ == "__main__":
    sys.exit(main())
