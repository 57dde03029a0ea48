"""The layering rule of docs/architecture.md: model and analysis never pull in torch, IPython
or bokeh, and each layer imports only the layers that page allows it (with the known
exceptions listed here)."""

from __future__ import annotations

import ast
import fnmatch
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

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


# docs/architecture.md: which other perflab layers each layer may import. A layer is a package
# (perflab/NAME/) or a module (perflab/NAME.py); errors and _gc are shared helpers every layer
# may use.
MAY_IMPORT: dict[str, set[str]] = {
    "model": set(),
    "capture": {"model"},
    "io": {"model"},
    "analysis": {"model"},
    "machine": {"model", "capture", "analysis"},
    "render": {"model", "analysis"},
    # the front-ends, on top: model, capture, io, analysis, machine and render never import them
    "frontend": {"model", "capture", "analysis", "render"},
    "magics": {"frontend", "model", "capture", "render"},
    "cli": {"render"},  # the subcommands are found by name, not imported
    # every layer, the shared front-end code, the exercises and the Dask job reader
    "commands": {"model", "capture", "io", "analysis", "machine", "render"}
    | {"frontend", "exercises", "job_dask"},
    "labext": {"model", "cli", "magics"},  # the profile button runs %%gpuprofile's code
    "exercises": {"model", "analysis"},
    "job_dask": {"model", "io", "analysis", "render"},  # it draws a job's overview too
    "recordings": {"model", "io"},
}
SHARED = {"errors", "_gc"}
# perflab/__init__.py names the public API of every layer (imported on first use) and
# perflab/__main__.py runs the cli: both sit above the map
ENTRY_POINTS = {"__init__", "__main__"}
# The known exceptions: the files that reach a layer their own may not import, each with its
# reason (docs/architecture.md lists them too); anything else fails. A key may name several
# files with a shell pattern.
EXCEPTIONS: dict[str, set[str]] = {
    # the display seam: model and analysis results show themselves through
    # perflab.render.views, and the model's conveniences (Trace.idle(), Trace.timeline(),
    # Job.summary(), ...) return what their analysis or view returns, each imported on first use
    "model/display.py": {"render", "analysis"},
    # Trace.summary() returns perflab.analysis.trace_summary.summarize(trace), imported on first use
    "model/trace.py": {"analysis"},
    # compile results carry their parsed PTX/SASS and resources; the parsers are analysis
    # (the CUDA job, the Triton job and the cache they share: capture/compile*.py)
    "capture/compile*.py": {"analysis"},
    # capture.profile() returns the Trace of the session it recorded, read by the importer
    "capture/profile.py": {"io"},
}
ROOT = Path(perflab.model.__file__).parents[1]


def _layer_files(layer: str) -> list[Path]:
    module = ROOT / f"{layer}.py"
    return [module] if module.exists() else sorted((ROOT / layer).rglob("*.py"))


def _perflab_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.startswith("perflab.")]


def test_every_module_belongs_to_a_layer() -> None:
    tops = {path.stem if path.is_file() else path.name for path in ROOT.iterdir()}
    modules = {name for name in tops if (ROOT / name).is_dir() or (ROOT / f"{name}.py").exists()}
    modules -= {"__pycache__", "labextension"}  # the built JupyterLab extension, no Python
    unplaced = modules - MAY_IMPORT.keys() - SHARED - ENTRY_POINTS
    assert unplaced == set(), f"put {sorted(unplaced)} in MAY_IMPORT and docs/architecture.md"


def _exception_of(where: str) -> str | None:
    """The EXCEPTIONS key that names the file ``where``, if any."""
    return next((key for key in EXCEPTIONS if fnmatch.fnmatchcase(where, key)), None)


def test_layers_import_only_what_the_design_allows() -> None:
    seen: dict[str, set[str]] = {}
    wrong = []
    for layer, allowed in MAY_IMPORT.items():
        for path in _layer_files(layer):
            where = path.relative_to(ROOT).as_posix()
            for line, name in _perflab_imports(path):
                target = name.split(".")[1]
                if target in allowed | {layer} | SHARED:
                    continue
                exception = _exception_of(where)
                if exception is not None and target in EXCEPTIONS[exception]:
                    seen.setdefault(exception, set()).add(target)
                else:
                    wrong.append(f"{where}:{line} imports {name} (see docs/architecture.md)")
    assert wrong == []
    assert seen == EXCEPTIONS  # an exception that no longer happens comes off the list
    assert len(EXCEPTIONS) <= 4, "a new exception is a design change (docs/architecture.md)"


def test_exercises_import_loads_only_the_display_mixin_of_the_layers() -> None:
    code = (
        "import json, sys, perflab.exercises\n"
        "print(json.dumps([m for m in sys.modules if m.startswith('perflab.')]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    loaded = set(json.loads(out))
    assert loaded == {
        "perflab.errors",
        "perflab.exercises",
        "perflab.exercises.checks",
        "perflab.model",
        "perflab.model.display",
    }


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
