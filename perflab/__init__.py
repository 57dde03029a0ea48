"""perflab: a Jupyter-based GPU performance lab.

``import perflab`` is cheap and needs no GPU: torch, IPython and bokeh are imported
only by the functions that use them. In a notebook: ``%load_ext perflab``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the public names, typed for mypy and IDEs; at run time __getattr__ imports each
    # underscored: not one of the public names this block lists
    from IPython.core.interactiveshell import InteractiveShell as _Shell

    from perflab import machine as machine
    from perflab import recordings as recordings
    from perflab.capture import nvtx as _nvtx
    from perflab.capture.compile import TritonSpec as TritonSpec
    from perflab.capture.compile import compile_cuda as compile_cuda
    from perflab.capture.compile import compile_triton as compile_triton
    from perflab.capture.env import info as info
    from perflab.capture.timer import TimingOptions as TimingOptions
    from perflab.errors import PerflabError as PerflabError
    from perflab.frontend import bench as bench
    from perflab.io import load_trace as load_trace
    from perflab.io.memory_snapshot import load_memory_snapshot as load_memory_snapshot
    from perflab.job_dask import load_job as load_job
    from perflab.model.optable import OpTable as OpTable
    from perflab.model.timing import TimingResult as TimingResult
    from perflab.model.trace import Trace as Trace
    from perflab.recordings import recorded as recorded
    from perflab.render.roofline import roofline as roofline

    range = _nvtx.Range  # perflab.range, kept out of ``import *`` (see _NOT_STARRED)

__version__ = "0.1.0"

# public name -> (module, attribute); resolved on first use (typed above, for checkers)
_LAZY: dict[str, tuple[str, str]] = {
    "bench": ("perflab.frontend", "bench"),
    "TimingResult": ("perflab.model.timing", "TimingResult"),
    "OpTable": ("perflab.model.optable", "OpTable"),
    "TimingOptions": ("perflab.capture.timer", "TimingOptions"),
    "range": ("perflab.capture.nvtx", "Range"),
    "info": ("perflab.capture.env", "info"),
    "PerflabError": ("perflab.errors", "PerflabError"),
    "Trace": ("perflab.model.trace", "Trace"),
    "load_trace": ("perflab.io", "load_trace"),
    "load_job": ("perflab.job_dask", "load_job"),  # io's, or on a Dask cluster (client=)
    "load_memory_snapshot": ("perflab.io.memory_snapshot", "load_memory_snapshot"),
    "compile_cuda": ("perflab.capture.compile", "compile_cuda"),
    "compile_triton": ("perflab.capture.compile", "compile_triton"),
    "TritonSpec": ("perflab.capture.compile", "TritonSpec"),
    "roofline": ("perflab.render.roofline", "roofline"),
    "recorded": ("perflab.recordings", "recorded"),  # a GPU recording, for replay
}

# ``import *`` exports no name that shadows a builtin: ``perflab.range`` stays an attribute
# (``with perflab.range("step"):``) but would hide ``range`` in the user's namespace.
_NOT_STARRED = frozenset({"range"})

# subpackages reachable as attributes after a plain ``import perflab``: perflab.machine.latency
_SUBPACKAGES = frozenset({"machine", "recordings"})

__all__ = [
    "__version__",
    "load_ipython_extension",
    *(name for name in _LAZY if name not in _NOT_STARRED),
]


def __getattr__(name: str) -> object:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"perflab.{name}")
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'perflab' has no attribute {name!r}")


def load_ipython_extension(ipython: _Shell) -> None:
    from perflab.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: _Shell) -> None:
    from perflab.magics import unload_ipython_extension as unload

    unload(ipython)
