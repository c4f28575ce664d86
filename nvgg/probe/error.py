"""The probe's one exception (its own module, so the CuTe DSL marks in probe/cute.py and the probe
itself share it without importing each other)."""


class ProbeError(ValueError):
    """A probe used wrongly (bad or repeated names, an unknown mark, a buffer of the wrong shape):
    raised where the mistake is made, with what to do."""
