"""Plain data objects; imports numpy and the standard library only.

The classes below are imported on first use, so that a module that needs only one part of
the model (a trace importer, which may run in a helper process) does not pay for the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perflab.model.optable import OpTable
    from perflab.model.timing import Comparison, TimingResult

_LAZY = {
    "OpTable": "perflab.model.optable",
    "Comparison": "perflab.model.timing",
    "TimingResult": "perflab.model.timing",
}

__all__ = ["Comparison", "OpTable", "TimingResult"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'perflab.model' has no attribute {name!r}")
