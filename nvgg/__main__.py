"""The `nvgg` command and `python -m nvgg`. For a command that runs rows in workers, the first
worker starts here, before this process imports torch and the commands (procs.prestart), so its
start (torch, the CUDA context, the data path's modules) overlaps them; then the app runs."""

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


def main() -> None:
    signal.signal(signal.SIGTERM, _terminated)
    try:
        rows = runs_rows(sys.argv[1:])
        if rows:
            from . import procs
            procs.timeline("nvgg started")
            import atexit
            atexit.register(procs.timeline, "nvgg exiting")  # registered first: runs last
            try:
                procs.prestart(preload=("nvgg.datapath",))  # the rows' one data path
            except Exception:  # a bad NVGG_ISOLATION: the command says so in one line
                pass
        from .cli import run
        if rows:
            procs.timeline("nvgg imported its commands")
        try:
            run()
        finally:
            if rows:
                procs.timeline("command done")
    except KeyboardInterrupt:  # before the command runs (torch importing): no traceback either
        print("nvgg: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
