"""perflab's public names are typed: a checker sees ``perflab.Trace`` as the class, not ``Any``,
although ``import perflab`` imports each name only on first use."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import perflab

ROOT = Path(__file__).resolve().parents[1]

WRONG_USES = """\
import perflab

trace = perflab.load_trace("run.json")
reveal_type(trace)
reveal_type(perflab.range)
count: int = trace
perflab.bench(3)
perflab.Trace.no_such_method
"""


def _typed_names() -> dict[str, tuple[str, str]]:
    """What the ``if TYPE_CHECKING:`` block of perflab/__init__.py imports: name -> (module,
    attribute); an assignment ``name = alias.attribute`` names the aliased module's attribute."""
    tree = ast.parse((ROOT / "perflab" / "__init__.py").read_text())
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    names, modules = {}, {}
    for node in block.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = (node.module, alias.name)
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
            base = ast.unparse(node.value.value)
            for target in node.targets:
                names[ast.unparse(target)] = (modules[base], node.value.attr)
    return names


def test_every_public_name_has_its_typed_import() -> None:
    typed = {name: found for name, found in _typed_names().items() if not name.startswith("_")}
    lazy = perflab._LAZY | {name: ("perflab", name) for name in perflab._SUBPACKAGES}
    assert typed == lazy


def test_a_checker_sees_the_real_classes_and_reports_their_misuse(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    snippet = tmp_path / "uses_perflab.py"
    snippet.write_text(WRONG_USES)
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(snippet)],
        cwd=ROOT,  # the project's mypy settings and cache
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line.split(": ", 1)[1] for line in run.stdout.splitlines() if ": " in line]
    assert lines == [
        'note: Revealed type is "perflab.model.trace.Trace"',
        'note: Revealed type is "def (name: str, *, nvtx: bool =) -> perflab.capture.nvtx.Range"',
        'error: Incompatible types in assignment (expression has type "Trace", variable has '
        'type "int")  [assignment]',
        'error: Argument 1 to "bench" has incompatible type "int"; expected '
        '"Callable[[], object]"  [arg-type]',
        'error: "type[Trace]" has no attribute "no_such_method"  [attr-defined]',
    ], run.stdout + run.stderr


def test_bench_takes_exactly_the_timing_options() -> None:
    # bench's keyword options are typed by a TypedDict that repeats TimingOptions' fields:
    # a field added to one must be added to the other, with the same type
    import dataclasses
    import typing

    from perflab.capture.timer import TimingOptions
    from perflab.frontend import BenchOptions

    hints = typing.get_type_hints(BenchOptions)
    assert set(hints) == {f.name for f in dataclasses.fields(TimingOptions)}
    timer_hints = typing.get_type_hints(TimingOptions)
    assert {k: timer_hints[k] for k in hints} == hints
