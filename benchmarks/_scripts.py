"""Sibling benchmark scripts as modules: benchmarks/trace.py shares its name with the
standard library's ``trace``, so a plain import would find the wrong module."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent


@functools.cache
def load_script(name: str) -> ModuleType:
    """benchmarks/NAME.py, imported once as ``bench_NAME``."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", HERE / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
