"""perflab's own error types: every failure a user can cause ends in one of these."""

from __future__ import annotations

import importlib
from types import ModuleType


class PerflabError(Exception):
    """Base class: a clear message saying what went wrong and where."""


class InputError(PerflabError):
    """A file or argument that perflab cannot use (malformed trace, bad option...)."""

    def __init__(self, message: str, *, source: str | None = None, position: str | None = None):
        self.source = source
        self.position = position
        # what went wrong, without the file: for a report that names the file itself
        self.detail = f"({position}) {message}" if position else message
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


class MissingExtraError(ToolchainError):
    """A package or tool that an optional part of perflab needs is not installed; the
    message names the ``perflab[extra]`` that brings it."""


# the extra that brings each optional package (pyproject.toml's optional-dependencies)
EXTRA_OF = {
    "IPython": "lab",
    "ipywidgets": "lab",
    "jupyterlab": "lab",
    "bokeh": "lab",
    "holoviews": "lab",
    "panel": "lab",
    "torch": "gpu",
    "triton": "gpu",
    "cupy": "gpu",
    "nvtx": "gpu",
    "nvcc": "compile",
    "ptxas": "compile",
    "nvdisasm": "compile",
    "cuobjdump": "compile",
    "duckdb": "sql",
    "dask": "dask",
    "distributed": "dask",
}


def missing_extra(feature: str, package: str, alternative: str = "") -> MissingExtraError:
    """``<feature> needs <package>, which is not installed: pip install 'perflab[<extra>]'``
    (``alternative``: another way to get it, added in brackets)."""
    extra = EXTRA_OF.get(package, "all")
    other = f" ({alternative})" if alternative else ""
    return MissingExtraError(
        f"{feature} needs {package}, which is not installed: pip install 'perflab[{extra}]'{other}"
    )


def import_extra(module: str, feature: str) -> ModuleType:
    """``import module`` for ``feature`` (e.g. "perflab timeline"), or the
    :class:`MissingExtraError` naming the extra to install when the package is absent."""
    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != top:
            raise  # the package is there but one of its own imports is not: not ours to name
        raise missing_extra(feature, top) from None


class NoGPUError(PerflabError):
    """A GPU was required but none is available (or too few for the job). Raise it
    through :func:`no_gpu`, so that every such message reads the same way."""


def no_gpu(needs: str, hint: str = "") -> NoGPUError:
    """``no GPU: <needs> needs a CUDA GPU[; <hint>]``."""
    return NoGPUError(f"no GPU: {needs} needs a CUDA GPU" + (f"; {hint}" if hint else ""))
