"""The course's cross-references hold: every "notebook NN" a notebook names (in its text, its
code or its stored outputs) is a notebook of the course, and every notebook it names by file
name (``01-timing-done-right``) exists under that name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
NUMBERS = {p.name[:2] for p in PATHS}
STEMS = {p.stem for p in PATHS}
# "notebook 03", "Notebooks 10 and 12", "notebooks 03, 06 and 12"
BY_NUMBER = re.compile(r"\b[Nn]otebooks? ((?:\d\d)(?:(?:, | and | or )\d\d)*)\b")
# a notebook's file name: two digits, a dash, then words joined by dashes; the recordings'
# folders (00-quickstart, 10-launch, ...) are named in paths and are not notebook names
BY_NAME = re.compile(r"(?<![\w/-])(\d\d-[a-z]+(?:-[a-z0-9]+){2,})(?:\.ipynb)?\b")


def _texts(path: Path) -> list[tuple[str, str]]:
    """(where, text) for every cell's source and every stored text output."""
    out = []
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        out.append((f"cell {i}", "".join(cell["source"])))
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain") or ""
            out.append((f"cell {i} output", "".join(text)))
    return out


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_notebook_named_by_number_exists(path: Path) -> None:
    missing = [
        f"{where}: {m.group(0)!r}"
        for where, text in _texts(path)
        for m in BY_NUMBER.finditer(text)
        for number in re.findall(r"\d\d", m.group(1))
        if number not in NUMBERS
    ]
    assert missing == []


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_notebook_named_by_file_name_exists(path: Path) -> None:
    missing = [
        f"{where}: {m.group(1)!r}"
        for where, text in _texts(path)
        for m in BY_NAME.finditer(text)
        if m.group(1) not in STEMS
    ]
    assert missing == []


def test_the_checks_catch_a_stale_reference(tmp_path: Path) -> None:
    text = "as notebook 31 shows; see `07-triton-from-python` and notebooks 03 and 42"
    numbers = [n for m in BY_NUMBER.finditer(text) for n in re.findall(r"\d\d", m.group(1))]
    assert [n for n in numbers if n not in NUMBERS] == ["31", "42"]
    assert [m.group(1) for m in BY_NAME.finditer(text)] == ["07-triton-from-python"]
    assert "07-triton-from-python" not in STEMS
