"""scripts/gpu-check and scripts/gpu-wheels (files without a .py suffix) as modules, for
tests that call their main() in-process."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from types import ModuleType

from data_paths import ROOT

SCRIPTS = ROOT / "scripts"


def load_script(name: str) -> ModuleType:
    """scripts/NAME, freshly imported as ``script_NAME``."""
    module_name = "script_" + name.replace("-", "_")
    loader = importlib.machinery.SourceFileLoader(module_name, str(SCRIPTS / name))
    spec = importlib.util.spec_from_loader(module_name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
