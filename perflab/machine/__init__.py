"""Microbenchmarks of the machine: memory latency and bandwidth, kernel launch cost, matmul
throughput, host-device copies, collectives and the links between GPUs.

Each is a module with a ``run()``; ``perflab.machine.latency.run()`` works after a plain
``import perflab.machine``: the modules are imported on first use, so the package stays light.
The command line reaches them as ``perflab machine NAME``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

MICROBENCHMARKS = ("bandwidth", "latency", "launch", "matmul", "h2d", "collectives", "topology")


def __getattr__(name: str) -> ModuleType:
    if name in MICROBENCHMARKS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
