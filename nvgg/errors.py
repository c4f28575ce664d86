"""The one exception type for expected failures.

Anything a user can cause (an unknown case, a malformed spec, a shape a backend cannot run, no
GPU) raises `NvggError` with a sentence that says what to do; the CLI prints it as one line and
exits non-zero. Anything else is a bug and keeps its traceback.
"""


# exit codes: a row failed (the user's code among them); bad input; a command that needs a GPU
# where none is visible
FAILED, USAGE, NO_GPU = 1, 2, 3


class NvggError(Exception):
    """An expected failure with a one-line, actionable message; `code` the exit code (USAGE;
    NO_GPU where the same command would work on a machine with a GPU; FAILED where the user's own
    code failed, as a row that raised does)."""

    def __init__(self, message: str, *, code: int = USAGE):
        super().__init__(message)
        self.code = code


def no_gpu(message: str) -> NvggError:
    """The failure of something that needs a CUDA GPU where none is visible: exit code NO_GPU."""
    return NvggError(message, code=NO_GPU)


def read_text(path, what: str, fix: str) -> str:
    """A text file the user named, or one NvggError for each way it cannot be read: "`what` PATH
    does not exist / is a folder / is not a regular file / is not UTF-8 text / cannot be read
    (why): `fix`". A FIFO or a device is refused before it is opened (reading one can wait for
    ever)."""
    from pathlib import Path
    target = Path(path)
    if target.exists() and not target.is_dir() and not target.is_file():
        raise NvggError(f"{what} {path} is not a regular file (a FIFO, a device?): {fix}")
    try:
        return target.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NvggError(f"{what} {path} does not exist: {fix}") from None
    except IsADirectoryError:
        raise NvggError(f"{what} {path} is a folder: {fix}") from None
    except UnicodeDecodeError:
        raise NvggError(f"{what} {path} is not UTF-8 text: {fix}") from None
    except OSError as exc:
        raise NvggError(f"{what} {path} cannot be read ({exc.strerror}): {fix}") from None
