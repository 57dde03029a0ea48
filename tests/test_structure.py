"""The package's shape stays readable (docs/architecture.md): no module grows past what one
reader can hold, and a class name means one class."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "perflab"
MAX_MODULE_LINES = 700
# a Protocol that states, for the render layer, the shape of a class it may not import
SAME_NAME_ON_PURPOSE = {"_Solution"}


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "labextension" not in p.parts)


def test_no_module_is_over_700_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, "split these along a seam they already have (docs/architecture.md)"


def test_each_class_name_is_one_class() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    shared = {name: places for name, places in where.items() if len(places) > 1}
    assert shared.keys() == SAME_NAME_ON_PURPOSE, shared
