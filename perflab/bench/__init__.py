"""Microbenchmarks of the machine, and ``perflab.bench(fn)`` itself.

This module is callable: ``perflab.bench(fn, **options)`` times ``fn`` with the
timing engine (:func:`perflab.capture.timer.time_function`), while ``perflab.bench.NAME``
are the microbenchmarks (bandwidth, latency, launch, matmul, h2d, collectives...).
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import Any

from perflab.model.timing import TimingResult

MICROBENCHMARKS = ("bandwidth", "latency", "launch", "matmul", "h2d", "collectives", "topology")


class _CallableModule(types.ModuleType):
    def __call__(self, fn: Callable[[], object], /, **options: Any) -> TimingResult:
        from perflab.capture.timer import time_function
        from perflab.model.listeners import notify

        return notify(time_function(fn, **options))

    def __getattr__(self, name: str) -> Any:
        if name in MICROBENCHMARKS:
            return importlib.import_module(f"perflab.bench.{name}")
        raise AttributeError(f"module 'perflab.bench' has no attribute {name!r}")


sys.modules[__name__].__class__ = _CallableModule
