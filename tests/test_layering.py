"""The layering rule of docs/architecture.md: model and analysis never pull in torch, IPython
or bokeh, and each layer imports only the layers that page allows it (with the known
exceptions listed here)."""

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


# docs/architecture.md, "Layers": which perflab layers each layer may import (errors and _gc are shared
# helpers every layer may use).
MAY_IMPORT = {
    "model": {"model"},
    "capture": {"capture", "model"},
    "io": {"io", "model"},
    "analysis": {"analysis", "model"},
    "machine": {"machine", "capture", "model", "analysis"},
    "render": {"render", "model", "analysis"},
}
SHARED = {"errors", "_gc"}
# The known exceptions: a file that reaches a layer its own may not import, each with its
# reason; anything else fails.
EXCEPTIONS = {
    # the display seam: model and analysis results show themselves (and Trace.summary() and
    # Trace.timeline() run) through perflab.render.views, imported on first use
    ("model/display.py", "render"),
    # compile results carry their parsed PTX/SASS and resources; the parsers are analysis
    ("capture/compile.py", "analysis"),
    # capture.profile() returns the Trace of the session it recorded, read by the importer
    ("capture/profile.py", "io"),
}


def _perflab_imports(path: object) -> list[tuple[int, str]]:
    import ast
    from pathlib import Path

    tree = ast.parse(Path(str(path)).read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.startswith("perflab.")]


def test_layers_import_only_what_the_design_allows() -> None:
    from pathlib import Path

    root = Path(perflab.model.__file__).parents[1]
    seen, wrong = set(), []
    for layer, allowed in MAY_IMPORT.items():
        for path in sorted((root / layer).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            for line, name in _perflab_imports(path):
                if name.split(".")[1] in allowed | SHARED:
                    continue
                if (where, name.split(".")[1]) in EXCEPTIONS:
                    seen.add((where, name.split(".")[1]))
                else:
                    wrong.append(f"{where}:{line} imports {name}")
    assert wrong == []
    assert seen == EXCEPTIONS  # an exception that no longer happens comes off the list
    assert len(EXCEPTIONS) <= 3, "a new exception needs a design change (docs/architecture.md), not a list entry"


def test_star_import_shadows_no_builtin() -> None:
    import builtins

    assert not set(perflab.__all__) & set(dir(builtins))
    assert perflab.range.__name__ == "Range"  # still reachable as an attribute


def test_star_import_leaves_range_the_builtin_in_a_fresh_namespace() -> None:
    namespace: dict[str, object] = {}
    exec("from perflab import *", namespace)
    assert "range" not in namespace
    exec("result = list(range(3))", namespace)
    assert namespace["result"] == [0, 1, 2]
    assert {"Trace", "load_trace", "bench"} <= namespace.keys()
