"""The layering rule: model and analysis never pull in torch, IPython or bokeh."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import perflab.analysis
import perflab.model

HEAVY = ("torch", "IPython", "bokeh", "holoviews", "triton", "cupy")


def _modules(package: object) -> list[str]:
    return [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]  # type: ignore[attr-defined]


def test_import_perflab_model_and_analysis_stays_light() -> None:
    names = ["perflab", *_modules(perflab.model), *_modules(perflab.analysis)]
    code = (
        "import importlib, sys\n"
        f"for n in {names!r}: importlib.import_module(n)\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert out.strip() == "[]", f"heavy modules imported: {out}"


def test_model_imports_only_numpy_and_stdlib() -> None:
    # model modules may import perflab.model, perflab.errors, numpy and the stdlib only
    import ast
    from pathlib import Path

    root = Path(perflab.model.__file__).parent
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.col_offset == 0:
                top = node.module.split(".")[0]
                if top == "perflab":
                    assert node.module.startswith(("perflab.model", "perflab.errors")), (
                        f"{path.name} imports {node.module}"
                    )
