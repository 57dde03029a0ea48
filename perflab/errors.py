"""perflab's own error types: every failure a user can cause ends in one of these."""

from __future__ import annotations


class PerflabError(Exception):
    """Base class: a clear message saying what went wrong and where."""


class InputError(PerflabError):
    """A file or argument that perflab cannot use (malformed trace, bad option...)."""

    def __init__(self, message: str, *, source: str | None = None, position: str | None = None):
        self.source = source
        self.position = position
        where = ""
        if source:
            where = f"{source}"
            if position:
                where += f" ({position})"
            where += ": "
        super().__init__(where + message)


class SchemaError(InputError):
    """A saved perflab file of an unknown kind or schema version."""


class ToolchainError(PerflabError):
    """A CUDA tool is missing, failed, or timed out."""


class NoGPUError(PerflabError):
    """A GPU was required but none is available (or too few for the job). Raise it
    through :func:`no_gpu`, so that every such message reads the same way."""


def no_gpu(needs: str, hint: str = "") -> NoGPUError:
    """``no GPU: <needs> needs a CUDA GPU[; <hint>]``."""
    return NoGPUError(f"no GPU: {needs} needs a CUDA GPU" + (f"; {hint}" if hint else ""))
