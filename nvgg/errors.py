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
