"""IPython front-end: ``%load_ext perflab`` registers the cell magics.

Each magic module (``gpuprofile``, ``ptx``) exposes a ``Magics`` subclass named
``MAGICS`` and stays thin: parse options, call the library, display.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

MAGIC_MODULES = ("gpuprofile", "ptx")


def load_ipython_extension(ipython: Any) -> None:
    for name in MAGIC_MODULES:
        module_name = f"perflab.magics.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        module = importlib.import_module(module_name)
        ipython.register_magics(module.MAGICS)


def unload_ipython_extension(ipython: Any) -> None:
    """Nothing to undo beyond IPython's own bookkeeping."""
