"""Child processes: the one way nvgg starts one, whatever it is for.

Every child is this same nvgg (`python -m nvgg.procs`, under a wrapper such as ncu where asked),
started by `Child` with one environment (`environment`: this checkout first on PYTHONPATH, its GPU
where it owns one) and one memory layout (`fixed_layout`), in a process session of its own (a
timeout kills everything it started), its output in a log file. A child runs function objects of nvgg's (they pickle by reference) and
answers with their value, or with what they raised. It ends one of four ways, each worded the same
for every kind of child:
- its answer: the function's value, or the exception it raised (`ChildError`; an `NvggError`
  passes through as itself);
- its CUDA context was lost on the way (an illegal address, a launch failure: CUDA keeps such an
  error for the life of the context): "crashed: CUDA error: ..." (`ChildFailure`);
- no answer within the timeout: its session is killed, "timed out after N s (...)";
- it died (a segfault, os._exit, a non-zero exit without an answer): "crashed: the process died
  (killed by SIGSEGV): <its last log line>".

Two kinds, one start:
- `Worker` (`Pool`): kept across calls (the CUDA start is paid once), calls and answers framed on
  its stdin and stdout, replaced after a failure. Every row of `run`, `compare`, `profile` and
  `tune` runs in one (rows.py), or in a Ray actor that answers the same way (cluster.py).
- `run_once`: one call in a child that exits after it, the call and the answer in files (so a
  wrapper that writes on the child's output, as ncu does, cannot corrupt them). A submission's
  phase runs and ncu's target run this way.

`NVGG_ISOLATION=off` runs a pool's calls in the calling process instead (a debugger, your prints).

A pool is anything that serves `BasePool`'s interface: `Pool` (workers on this host) and
cluster.RayPool (an actor of a Ray cluster). Both hand the same `Call` to a process that answers
with `answer` and read its reply with `settle`, so a lost CUDA context ends a worker, and is
worded, the same way on either.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
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
import threading
import time
import traceback
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .errors import NvggError

TIMEOUT_S = 300.0        # a row: no healthy one comes near (the slowest, a cold compile and the
                         # timer's budget, stays well inside it: lab log)
START_TIMEOUT_S = 180.0  # a worker's start: python, torch, the CUDA context
ROOT = Path(__file__).resolve().parent.parent
_HEADER = struct.Struct("<Q")


class ChildFailure(Exception):
    """A call that ended without an answer: it timed out, its process died or lost its CUDA
    context (the message is the reason). The child is gone."""


class ChildError(Exception):
    """A call that raised in the child with its context intact: `kind: first line`, and the child's
    traceback in `trace`."""

    def __init__(self, message: str, trace: str = ""):
        super().__init__(message)
        self.trace = trace


def isolated() -> bool:
    """Whether a pool runs its calls in workers (NVGG_ISOLATION on, the default) or in this process."""
    value = os.environ.get("NVGG_ISOLATION", "on").strip().lower()
    if value in ("on", "1", "yes", ""):
        return True
    if value in ("off", "0", "no"):
        return False
    raise NvggError(f"NVGG_ISOLATION={value!r}: set it to on (rows in worker processes) or off (in nvgg's own process)")


def check_timeline() -> None:
    """NVGG_TIMELINE, where set, names a file this process can append to: refused in one line
    before any work, rather than each step's line dropped unsaid."""
    path = os.environ.get("NVGG_TIMELINE")
    if not path:
        return
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        raise NvggError(f"NVGG_TIMELINE={path} cannot be appended to ({exc.strerror}): set it to a file you can "
                        "write, or unset it") from None


def timeline(event: str) -> None:
    """Where NVGG_TIMELINE names a file, append `monotonic-seconds pid event` to it: when a command
    and its workers reached each step (benchmarks/warm_start.py reads it; CLOCK_MONOTONIC is one
    clock for every process of the host). Nothing otherwise."""
    path = os.environ.get("NVGG_TIMELINE")
    if path:
        try:
            with open(path, "a") as fh:
                fh.write(f"{time.monotonic():.6f} {os.getpid()} {event}\n")
        except OSError:
            pass


# Linux's personality flag that turns off address-space randomisation for the programs a process
# executes (<linux/personality.h>; what `setarch -R` sets). With randomisation, each worker of one
# host-bound submission ran at a speed of its own: three workers of one file, A/B'd in pinned,
# interleaved rounds, differed by more than their intervals' width; without it, every such A/B's
# interval held 1 (NOTES.md, A/B, rerun and gate).
ADDR_NO_RANDOMIZE = 0x0040000


@contextlib.contextmanager
def fixed_layout():
    """While a child is started: the calling thread's personality with ADDR_NO_RANDOMIZE (a
    thread's own; fork copies the caller's, exec keeps it), so every child lays its memory out
    alike; then as it was. Yields whether it was set: not on another OS, nor where the kernel
    refuses it (a container's seccomp filter may), the child then started as before."""
    try:
        call = ctypes.CDLL(None, use_errno=True).personality
    except (OSError, AttributeError):
        yield False
        return
    call.argtypes, call.restype = [ctypes.c_ulong], ctypes.c_int
    old = call(0xFFFFFFFF)  # (0xffffffff: only read it)
    if old == -1 or call(old | ADDR_NO_RANDOMIZE) == -1:
        yield False
        return
    try:
        yield True
    finally:
        call(old)


def layout() -> str | None:
    """This process's memory layout: "fixed" (started by `fixed_layout`) or "randomised"; None off Linux."""
    try:
        flags = int(Path("/proc/self/personality").read_text(), 16)
    except (OSError, ValueError):
        return None
    return "fixed" if flags & ADDR_NO_RANDOMIZE else "randomised"


def environment(gpu: int | None = None, extra: dict | None = None) -> dict:
    """A child's environment: this one, with this checkout first on PYTHONPATH (the child imports
    the same nvgg), unbuffered output, `extra`, and where the child owns a GPU, only that GPU
    visible (`gpu`: an index among the GPUs this process sees)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    if gpu is not None:
        visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        if visible and not 0 <= gpu < len(visible):
            raise NvggError(f"GPU {gpu} is not one of the {len(visible)} this process sees (CUDA_VISIBLE_DEVICES="
                            f"{os.environ['CUDA_VISIBLE_DEVICES']})")
        env["CUDA_VISIBLE_DEVICES"] = visible[gpu] if visible else str(gpu)
    return env


def cuda_reason(message: str) -> str:
    """The CUDA error in an exception's message ("CUDA error: an illegal memory access was
    encountered"), or its first line."""
    found = re.search(r"CUDA error: [^\n;]*", message or "")
    return found.group(0).strip() if found else _first_line(message)


def timed_out(timeout_s: float, doing: str = "") -> str:
    """How a call that gave no answer in time ended (its process is killed)."""
    return f"timed out after {timeout_s:.0f} s{' ' + doing if doing else ''} (a hang, or far too slow for its time limit)"


def _first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


@dataclass(frozen=True)
class Call:
    """A function of nvgg's and its keyword arguments, as a child receives them (pickled: the
    function by reference)."""

    fn: Callable
    kwargs: dict


# ---------------------------------------------------------------- the child's side

def _context_alive() -> bool:
    """Whether this process's CUDA context still works (after a call): a sticky error (an illegal
    address, a launch failure) fails every later call."""
    if "torch" not in sys.modules:
        return True
    import torch
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return True
    try:
        torch.cuda.synchronize()
        return int(torch.ones(1, device="cuda").add_(1).item()) == 2
    except Exception:
        return False


def answer(call: Call) -> tuple:
    """The reply to a call, as every process that serves one sends it back (a worker, a one-call
    child, a Ray actor): ("ok", value, alive) or ("raised", kind, message, traceback, alive); for
    an NvggError, its exit code in the traceback's place. `alive`: whether the process's CUDA
    context survived the call (`settle` ends a process whose context did not)."""
    try:
        reply = ("ok", call.fn(**call.kwargs))
    except NvggError as exc:
        reply = ("raised", "NvggError", str(exc), exc.code)
    except BaseException as exc:  # user code and kernels: reported, never the end of the run
        reply = ("raised", type(exc).__name__, str(exc), traceback.format_exc())
    alive = _context_alive()
    if not alive and reply[0] == "ok":
        # the call caught the error itself (a launch that failed is a row's result): its message
        # names the CUDA error
        said = getattr(reply[1], "message", "") or ""
        reply = ("raised", "CudaContextLost", said if "CUDA error" in said else "CUDA error: the context failed during the call", "")
    return reply + (alive,)


def _die_with_parent() -> None:
    """Linux: SIGKILL this child when its parent goes, so a killed nvgg (CI's timeout, Ctrl-C)
    leaves no child holding the GPU."""
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


def warm_up(preload=()) -> None:
    """A worker's start, before its first call (a local worker's, and a Ray actor's: cluster.py):
    torch imported, where there is a GPU its CUDA context and cuBLAS's handle made, the modules in
    `preload` imported (a module that fails to import is left to the call that needs it, which then
    says why). Its time is the start's (START_TIMEOUT_S), not any call's."""
    import torch
    timeline("worker imported torch")
    if torch.cuda.is_available():
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # the context itself: CUDA makes it on first use
        torch.cuda.current_blas_handle()  # cuBLAS's, which every row's reference needs
    timeline("worker has CUDA")
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception:
            pass


def _serve(preload: list[str]) -> int:
    """A worker: calls in on stdin, answers out on stdout, until the pipe closes or the CUDA
    context is lost; everything the calls print goes to stderr (the log). It starts (`warm_up`,
    with `preload`) before the first call comes."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    timeline("worker started")
    warm_up(preload)
    timeline("worker ready")
    _write_frame(proto_out, ("ready", os.getpid()))
    while True:
        call = _read_frame(proto_in)
        if call is None:
            return 0
        timeline("worker call in")
        reply = answer(call)
        timeline("worker call out")
        _write_frame(proto_out, reply)
        if not reply[-1]:
            return 3


def _once(call_path: str) -> int:
    """One call from a file, its answer to the file beside it (written whole, then renamed)."""
    call = pickle.loads(Path(call_path).read_bytes())
    reply = answer(call)
    tmp = Path(call_path + ".reply.tmp")
    tmp.write_bytes(pickle.dumps(reply))
    tmp.replace(call_path + ".reply")
    return 0 if reply[-1] else 3


def main(argv: list[str]) -> int:
    _die_with_parent()
    if argv[:1] == ["serve"]:
        return _serve(argv[1:])
    if argv[:1] == ["once"] and len(argv) == 2:
        return _once(argv[1])
    print("usage: python -m nvgg.procs serve [MODULE ...] | once CALL_FILE", file=sys.stderr)
    return 2


# ---------------------------------------------------------------- the parent's side

class Child:
    """One child process: `start`ed with its environment and log, killed with its session, and the
    words for how it ended (the same for every kind of child)."""

    def __init__(self, what: str, log_path: Path, *, gpu: int | None = None, env: dict | None = None,
                 wrap: tuple[str, ...] = ()):
        self.what, self.log_path, self.gpu, self.wrap = what, Path(log_path), gpu, tuple(wrap)
        self.extra_env = dict(env or {})
        self.proc: subprocess.Popen | None = None
        self._log = None

    def start(self, args: list[str], *, pipes: bool) -> None:
        """`python -m nvgg.procs ARGS` under the wrapper; `pipes`: its stdin and stdout are pipes
        to this process (a worker's frames), else nothing in and its output to the log."""
        env = environment(self.gpu, self.extra_env)
        self._log = open(self.log_path, "ab")
        streams = (subprocess.PIPE, subprocess.PIPE) if pipes else (subprocess.DEVNULL, self._log)
        with fixed_layout():
            self.proc = subprocess.Popen([*self.wrap, sys.executable, "-m", "nvgg.procs", *args], env=env,
                                         start_new_session=True, stdin=streams[0], stdout=streams[1], stderr=self._log)

    def kill_after_timeout(self, timeout_s: float, doing: str = "") -> str:
        """Kill the child (and what it started) that gave no answer in time, and say so."""
        self.kill()
        return timed_out(timeout_s, doing)

    def died(self) -> str:
        """Why the child ended without an answer: its exit (a signal by name) and the last line it logged."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        tail = self.log_tail()
        self.close()
        return f"crashed: the process died ({how})" + (f": {tail}" if tail else "")

    def log_tail(self) -> str:
        try:
            lines = [line.strip() for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, wait: bool = True) -> None:
        """SIGKILL the child and what it started. `wait=False`: do not wait while the system takes
        the dead process's CUDA context down (a noticeable wait: lab log): for a pool's end, where nothing
        comes next on that GPU from this process; the process is gone either way, reaped by
        whoever outlives it."""
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            if not wait:  # reaped by a thread of its own, which this process does not wait for at its exit
                threading.Thread(target=self.proc.wait, name="nvgg-reap", daemon=True).start()
                self._drop()
                return
            self.proc.wait()
        self.close()

    def _close_pipes(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def _drop(self) -> None:
        self._close_pipes()
        if self._log is not None:
            self._log.close()
        self.proc = None

    def close(self, wait: bool = False) -> None:
        if self.proc is None:
            return
        self._close_pipes()
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=10 if wait else 0.5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                self.proc.wait()
        self._drop()

    def settle(self, reply):
        """`settle` for this child: one whose CUDA context was lost is waited for (it exits)."""
        return settle(reply, lambda: self.close(wait=True))


def settle(reply: tuple, lost: Callable[[], None]):
    """A reply (`answer`'s tuple) as the call's value, or the exception that says why there is
    none: NvggError as raised, ChildError for a call that raised, ChildFailure where the CUDA
    context was lost, after `lost()` has ended the process that sent it (every later call there
    would fail alike)."""
    alive = reply[-1]
    if reply[0] == "ok" and alive:
        return reply[1]
    _, kind, message, trace, _ = reply
    if not alive:
        lost()
        raise ChildFailure(f"crashed: {cuda_reason(message)} (the CUDA context is lost; the next call starts a new "
                           "process)")
    if kind == "NvggError":
        raise NvggError(message, code=trace)
    raise ChildError(f"{kind}: {_first_line(message)}", trace)


class Worker(Child):
    """A child kept across calls: started on first use, answering calls framed on its pipes."""

    def __init__(self, key: str, log_dir: Path, *, gpu: int | None = None, preload: tuple[str, ...] = ()):
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", key)[:60]
        super().__init__(f"worker {key}", Path(log_dir) / f"worker-{safe}-{time.monotonic_ns()}.log", gpu=gpu)
        self.key = key
        self.preload = tuple(preload)
        self.ready = False

    def spawn(self) -> None:
        """Start the process; it imports torch, makes its CUDA context and imports `preload` while
        the caller goes on."""
        self.ready = False
        self.start(["serve", *self.preload], pipes=True)

    def _ensure_ready(self) -> None:
        if not self.alive():
            self.spawn()
        if not self.ready:
            hello = self._receive(START_TIMEOUT_S, "starting")
            if not (isinstance(hello, tuple) and hello[0] == "ready"):
                self.kill()
                raise ChildFailure(f"the worker did not start: {hello!r}")
            self.ready = True

    def _receive(self, timeout_s: float, doing: str):
        deadline = time.monotonic() + timeout_s
        out = self.proc.stdout
        buf, size = b"", None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChildFailure(self.kill_after_timeout(timeout_s, doing))
            ready, _, _ = select.select([out], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(out.fileno(), 1 << 20)  # one frame a call: nothing past it to over-read
            if not chunk:
                raise ChildFailure(self.died())
            buf += chunk
            if size is None and len(buf) >= _HEADER.size:
                (size,) = _HEADER.unpack(buf[:_HEADER.size])
                buf = buf[_HEADER.size:]
            if size is not None and len(buf) >= size:
                return pickle.loads(buf[:size])

    def call(self, call: Call, timeout_s: float):
        timeline("call asked")
        self._ensure_ready()
        try:
            _write_frame(self.proc.stdin, call)
        except (BrokenPipeError, OSError):
            raise ChildFailure(self.died()) from None
        reply = self._receive(timeout_s, "")
        timeline("call answered")
        return self.settle(reply)


def run_once(fn: Callable, *, timeout_s: float | None = None, gpu: int | None = None, env: dict | None = None,
             wrap: tuple[str, ...] = (), log_path: Path | None = None, **kwargs):
    """`fn(**kwargs)` in a new child that exits after it, under `wrap` (a program that runs the
    child, such as ncu) where given, with `env` added to its environment; its output goes to
    `log_path` (a temporary file where None). The value, or ChildFailure / ChildError / NvggError
    as for a worker's call."""
    timeout_s = timeout_s or TIMEOUT_S
    with tempfile.TemporaryDirectory(prefix="nvgg-once-") as tmp:
        call_path = Path(tmp) / "call"
        call_path.write_bytes(pickle.dumps(Call(fn, kwargs)))
        child = Child(f"child {getattr(fn, '__qualname__', fn)}", log_path or Path(tmp) / "child.log", gpu=gpu, env=env,
                      wrap=wrap)
        child.start(["once", str(call_path)], pipes=False)
        try:
            child.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ChildFailure(child.kill_after_timeout(timeout_s)) from None
        reply_path = Path(str(call_path) + ".reply")
        if not reply_path.is_file():
            raise ChildFailure(child.died())
        reply = pickle.loads(reply_path.read_bytes())
        try:
            return child.settle(reply)
        finally:
            child.close()


# In-process calls (NVGG_ISOLATION=off) one at a time: each moves this process's stdout aside
# (_stdout_to_stderr), and two threads' calls at once (compiles side by side, a pool a GPU) put
# each other's saved stdout back, or a closed one. Reentrant: a call may call a pool itself.
_IN_PROCESS = threading.RLock()


class _stdout_to_stderr:
    """Within: this process's stdout (Python's and the file descriptor C code writes to) goes to
    stderr, as a worker's does, so a call run in-process cannot corrupt `--json -` on stdout."""

    def __enter__(self):
        sys.stdout.flush()
        self._saved, self._stream = os.dup(1), sys.stdout
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        return self

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self._saved, 1)
        os.close(self._saved)
        sys.stdout = self._stream


class BasePool(ABC):
    """What a caller may ask of a pool, whichever processes serve it (this host's workers: `Pool`;
    a Ray cluster's actor: cluster.RayPool): `call` a function object within a time limit, `close`
    (also as a context manager's end), the GPU its processes hold (`gpu`: an index among this
    host's, or the pool's among a cluster's; None: whatever this process sees) and a call's time
    limit where none is given (`timeout_s`). A call's outcome reads the same from either: its
    value; NvggError as raised; ChildError for a call that raised (the process kept); ChildFailure
    for a call that timed out, crashed or lost its CUDA context (the process replaced by the next
    call's)."""

    timeout_s: float
    gpu: int | None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @abstractmethod
    def call(self, key: str, fn: Callable, *, limit_s: float | None = None, **kwargs):
        """`fn(**kwargs)`'s value in the process kept for `key`, within `limit_s` (None: `timeout_s`)."""

    @abstractmethod
    def close(self) -> None:
        """End every process of the pool."""


class Pool(BasePool):
    """Workers by key (a backend's name, a submission's path), each kept across the calls of its
    key, all owning `gpu` (None: whatever this process sees); `with Pool(timeout_s) as pool:
    pool.call(key, fn, **kwargs)`."""

    def __init__(self, timeout_s: float | None = None, *, gpu: int | None = None, preload: tuple[str, ...] = (),
                 spare: bool = True):
        self.timeout_s = timeout_s or TIMEOUT_S
        self.gpu = gpu
        self.spare = spare  # whether a worker started ahead (prestart) may serve it: not for compiles
        self.preload = tuple(preload)
        self.isolated = isolated()
        self.workers: dict[str, Worker] = {}
        self._logs = tempfile.TemporaryDirectory(prefix="nvgg-workers-") if self.isolated else None

    def call(self, key: str, fn: Callable, *, limit_s: float | None = None, **kwargs):
        """`fn(**kwargs)`'s value, within `limit_s` (None: the pool's time limit), in the worker of
        `key` (started on its first call, or after its last failed); as BasePool says otherwise."""
        if not self.isolated:
            try:
                with _IN_PROCESS, _stdout_to_stderr():  # what the call prints stays off the command's own output
                    return fn(**kwargs)
            except NvggError:
                raise
            except Exception as exc:
                raise ChildError(f"{type(exc).__name__}: {_first_line(str(exc))}", traceback.format_exc()) from None
        worker = self.workers.get(key)
        if worker is None:
            worker = self.workers[key] = (self.spare and _adopt_spare(key, self.gpu)) or Worker(key, Path(self._logs.name), gpu=self.gpu,
                                                                         preload=self.preload)
        try:
            return worker.call(Call(fn, kwargs), limit_s or self.timeout_s)
        except ChildFailure:
            self.workers.pop(key, None)
            raise

    def close(self) -> None:
        timeline("pool closing")
        for worker in self.workers.values():
            worker.kill(wait=False)
        timeline("pool closed")
        self.workers.clear()
        if self._logs is not None:
            self._logs.cleanup()
            self._logs = None


def side_by_side(targets: list[Callable[[threading.Event], None]], name: str) -> None:
    """Each `target(stop)` in a thread of its own, all at once, waited for in slices (Ctrl-C and
    SIGTERM reach the calling thread); `stop` is set once one raises, for the others to end at
    their next step, and the first exception is raised here after all have ended. What several
    pools (a GPU each) or compiles run side by side through."""
    stop = threading.Event()
    raised: list[BaseException] = []

    def guard(target) -> None:
        try:
            target(stop)
        except BaseException as exc:  # noqa: BLE001 -- raised again in the calling thread
            raised.append(exc)
            stop.set()

    threads = [threading.Thread(target=guard, args=(t,), daemon=True, name=f"{name}{i}") for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    if raised:
        raise raised[0]


def take_turns(items: list, servers: int, work: Callable, name: str, *, on_start: Callable | None = None,
               on_result: Callable | None = None) -> list:
    """`work(server, item)` for every item, `servers` threads side by side (side_by_side), each
    taking the next item as soon as its last is done; `on_start(item)` and `on_result(value)` run
    one at a time (under one lock), in the order items start and finish; the values come back in
    the items' order; one server takes them in the calling thread. What spreads rows over GPUs
    (rows.spread) and builds over compile processes (space.compile_all) through."""
    results: list = [None] * len(items)
    todo = iter(enumerate(items))
    lock = threading.Lock()

    def serve(server: int, stop: threading.Event) -> None:
        while not stop.is_set():
            with lock:
                nxt = next(todo, None)
                if nxt is not None and on_start:
                    on_start(nxt[1])
            if nxt is None:
                return
            value = work(server, nxt[1])
            with lock:
                results[nxt[0]] = value
                if on_result:
                    on_result(value)

    if servers == 1:
        serve(0, threading.Event())
    else:
        side_by_side([functools.partial(serve, s) for s in range(servers)], name)
    return results


# ---------------------------------------------------------------- a worker started ahead

_SPARE: list = []  # [Worker, its log folder]: started before the command knew its first row


def prestart(preload: tuple[str, ...] = ()) -> None:
    """Start a worker now, before the command's own imports and checks, so its start (python,
    torch, the CUDA context) overlaps them; the pool's first worker adopts it. Killed at exit if
    no call did (bad input). The command line decides whether it will run rows (nvgg/__main__.py)."""
    if not isolated():
        return
    import atexit
    logs = tempfile.TemporaryDirectory(prefix="nvgg-workers-")
    worker = Worker("spare", Path(logs.name), preload=preload)
    worker.spawn()
    _SPARE[:] = [worker, logs]

    def cleanup() -> None:
        if _SPARE:
            _SPARE[0].kill()
        logs.cleanup()
    atexit.register(cleanup)


def _adopt_spare(key: str, gpu: int | None) -> Worker | None:
    if not _SPARE or gpu is not None:
        return None
    worker = _SPARE[0]
    _SPARE.clear()
    if not worker.alive():
        worker.close()  # dead before its first call: its pipes and log go with it
        return None
    worker.key = key
    return worker


if __name__ == "__main__":
    # the module by its name, not this __main__ copy of it: a call imports nvgg.procs by name, and
    # what it changes there (a test's lost context) is what the worker's own checks must read
    from nvgg.procs import main as _main
    sys.exit(_main(sys.argv[1:]))
