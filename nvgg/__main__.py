"""The `nvgg` command and `python -m nvgg`. For a command that runs rows in workers, the first
worker starts here, before this process reads the command line and imports torch (procs.prestart),
so its start (torch, the CUDA context, the data path's modules) overlaps them; then the app runs."""

import contextlib
import os
import signal
import sys

# torch.cuda.is_available() through NVML: nvgg's own process only schedules rows, and asking the
# CUDA runtime would start it there (workers start theirs; they inherit this, as torch documents)
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def runs_rows(argv: list[str]) -> bool:
    """Whether a command line runs rows in workers: run, compare, and profile with --cupti or our
    kernel's --phases (ncu and a submission's phases run in processes of their own)."""
    if not argv or {"--help", "-h"} & set(argv):
        return False
    if argv[0] in ("run", "compare"):
        return True
    return argv[0] == "profile" and ("--cupti" in argv or ("--phases" in argv and "--submission" not in argv))


def _terminated(signum, frame) -> None:
    """SIGTERM (CI's timeout, `kill`): leave as an exit does, so the rows' workers are killed, the
    temporary folders removed and the result files keep the rows done; exit code 128 + 15."""
    raise SystemExit(128 + signum)


# the exit code of a command ended by Ctrl-C (128 + SIGINT). Such a process never leaves through
# the interpreter's own exit: CPython may end it by SIGINT after its teardown (exit status -2, not
# 130) once a KeyboardInterrupt went through code it evaluated itself, as where the interrupt
# lands in typer's evaluation of string annotations while it builds the commands (strace:
# kill(self, SIGINT) after the exit handlers; lab log)
INTERRUPTED = 128 + signal.SIGINT


def leave(code) -> None:
    """End the process as `sys.exit(code)` would, without the interpreter's teardown: the exit
    handlers run (temporary folders removed, workers killed, timelines stamped) and the output is
    flushed, then the process ends. Tearing down the modules nvgg imported (torch's above all)
    is a large share of a warm `nvgg run`'s wall time (NOTES.md, Host costs; lab log), spent
    after every result was written. A thread not marked daemon still running: the usual exit,
    which waits for it, but for an interrupted command (INTERRUPTED), which ends at once."""
    import threading
    if isinstance(code, bool) or not isinstance(code, (int, type(None))):
        sys.exit(code)  # a message as the code: printed, exit 1, as Python does
    if code == INTERRUPTED:
        _end(code)
    if any(t.is_alive() and not t.daemon and t is not threading.main_thread() for t in threading.enumerate()):
        sys.exit(code)
    _end(code)


def _end(code) -> None:
    """The exit handlers run, the output flushed, the process ended with `code`."""
    import atexit
    atexit._run_exitfuncs()  # what Py_Finalize would run first (CPython's exit handlers, weakref.finalize's)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a reader gone (a closed pipe): nothing more can be said
            pass
    os._exit(code or 0)


@contextlib.contextmanager
def _interrupt_ends_it():
    """Within: Ctrl-C ends nvgg at once (`_interrupted`) instead of raising KeyboardInterrupt, for
    the start: nvgg's own imports here, then the command's import of torch (commands/common.py,
    `_start`). torch's C extension imports numpy as it initialises and drops whatever that raises,
    a KeyboardInterrupt included, so an interrupt landing there was lost and the command ran to its
    end. Where SIGINT is ignored (a job started with &), it stays ignored."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    signal.signal(signal.SIGINT, _interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupted(signum, frame) -> None:
    """Nothing to keep before the command's own code runs: the exit handlers (the worker started
    ahead killed, its folder removed) and out, exit code 130, from wherever the start was (no
    exception that the code it interrupts could drop)."""
    print("nvgg: interrupted", file=sys.stderr)
    _end(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminated)
    code = 0
    try:
        with _interrupt_ends_it():
            rows = runs_rows(sys.argv[1:])
            if rows:
                from . import procs
                procs.timeline("nvgg started")
                import atexit
                atexit.register(procs.timeline, "nvgg exiting")  # registered first: runs last
                try:
                    procs.prestart(preload=("nvgg.datapath",))  # datapath.WORKER_PRELOAD, not imported here (torch)
                except Exception:  # a bad NVGG_ISOLATION: the command says so in one line
                    pass
            from .cli import run
            from .commands.common import STATE
            STATE["starting"] = _interrupt_ends_it  # the command's own start, once its line is read
        if rows:
            procs.timeline("nvgg imported its commands")
        try:
            run()
        except SystemExit as exc:
            code = exc.code
        finally:
            if rows:
                procs.timeline("command done")
    except KeyboardInterrupt:  # before the command runs (its imports): no traceback either
        print("nvgg: interrupted", file=sys.stderr)
        code = INTERRUPTED
    leave(code)


if __name__ == "__main__":
    main()
