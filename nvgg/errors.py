"""The one exception type for expected failures.

Anything a user can cause (an unknown case, a malformed spec, a shape a backend cannot run, no
GPU) raises `NvggError` with a sentence that says what to do; the CLI prints it as one line and
exits non-zero. Anything else is a bug and keeps its traceback.
"""


class NvggError(Exception):
    """An expected failure with a one-line, actionable message."""

    def __init__(self, message: str, *, code: int = 2):
        super().__init__(message)
        self.code = code


def read_text(path, what: str, fix: str) -> str:
    """A text file the user named, or one NvggError for each way it cannot be read: "`what` PATH
    does not exist / is a folder / is not UTF-8 text / cannot be read (why): `fix`"."""
    from pathlib import Path
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NvggError(f"{what} {path} does not exist: {fix}") from None
    except IsADirectoryError:
        raise NvggError(f"{what} {path} is a folder: {fix}") from None
    except UnicodeDecodeError:
        raise NvggError(f"{what} {path} is not UTF-8 text: {fix}") from None
    except OSError as exc:
        raise NvggError(f"{what} {path} cannot be read ({exc.strerror}): {fix}") from None
